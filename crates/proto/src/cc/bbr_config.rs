//! BBR's parameters: the configuration a sender is built with, and longhaul's
//! changes to Linux's algorithm, each switchable (docs/bbr.md says what each is for
//! and what it measured).

use super::{CWND_GAIN, PACING_MARGIN, V3_LOSS_THRESHOLD};

/// BBR's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbrConfig {
    /// BBRv3's loss response: a round trip that loses more than this share of the
    /// data it sent ends Startup and bounds inflight to `max(inflight at the loss,
    /// 0.7 × the model's)`. `None`: v1, which ignores loss.
    pub loss_threshold: Option<f64>,
    /// Extra window beyond the model for quantisation, packets (Linux: three TSO
    /// bursts; an engine without segmentation offload sends single packets).
    pub quantization_pkts: u64,
    /// Seeds which ProbeBW phase the first cycle starts in (Linux picks it at random
    /// so flows do not probe in step).
    pub seed: u64,
    /// longhaul's departures from BBR (`bbr-lh`); [`LhChanges::NONE`] is BBR.
    pub lh: LhChanges,
    /// Over UDT: the window and Drain's end make room for what the receivers hold
    /// unacknowledged (64 packets each, or a SYN's worth; see
    /// [`Bbr::set_ack_schedule`](super::Bbr::set_ack_schedule)). Off in every preset, so the studies' sweeps keep
    /// their figures; `longhaul send` turns it on. No effect on TCP.
    pub ack_hold: bool,
}

/// longhaul's changes to BBR, each aimed at a fault BBR shows on long fat paths,
/// each a knob so its effect can be measured alone (docs/bbr.md has the
/// measurements). [`LhChanges::NONE`] turns them all off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LhChanges {
    /// A min-RTT sample no more than this fraction above the estimate confirms it
    /// (restarts its 10 s expiry) without replacing it. In v1 only a lower sample
    /// does, so a flow whose queue ProbeBW's 0.75 phase already drains still runs
    /// ProbeRTT every 10 s, each time holding 4 packets in flight for 200 ms and a
    /// round: 4 % of a 200 ms path's time. A path whose RTT grew gives no confirming
    /// sample, so ProbeRTT still finds the new one. 0: v1.
    pub min_rtt_confirm: f64,
    /// Startup ends after one round that grew the bandwidth by less than a quarter
    /// if the RTT then shows a queue of this fraction of the min RTT: the pipe is
    /// full and more rounds only build the queue (v1 waits three, putting up to
    /// 2.9 BDP in flight, which overflows a 1-BDP buffer). `None`: v1.
    pub startup_queue_exit: Option<f64>,
    /// In Startup the window grows by this multiple of what is acknowledged (v1: 1,
    /// doubling per round); 2 lets it follow Startup's 2.89 pacing gain, so a path
    /// of BDP `B` packets fills in `log_2.89(B / 16)` rounds instead of `log_2`.
    pub startup_growth: f64,
    /// The pacing margin (v1: 1 %). `bbr-lh` keeps v1's: without it a 1 ms path
    /// keeps a standing queue of a third of its RTT, for under 1 % more goodput at
    /// 200 ms.
    pub pacing_margin: f64,
    /// ProbeBW's window gain (v1: 2, two BDPs). Several TCP flows on one
    /// bottleneck each overestimate their share (each one's max filter holds the
    /// rates it saw while the others drained), and the window, not the pacing,
    /// then sets how much they queue: with two BDPs each, up to a BDP stands in
    /// the queue. (Several UDT flows do not move with it: each one's estimate
    /// stands near the link's rate, docs/bbr.md.)
    pub cwnd_gain: f64,
    /// v3's loss bound answers a lossy round only if the RTT then shows a queue of
    /// this fraction of the min RTT: the standing RTT (the least RTT sample of this
    /// round and the last, as Copa's "RTTstanding", Arun and Balakrishnan, NSDI
    /// 2018; in Startup, within a round, this round's alone: see `queue_stands`)
    /// is that much above the min. The least, because under loss most of a
    /// UDT flow's samples wait behind a hole's repair and would show a queue that
    /// is not there. Loss with no queue behind it is not this flow's overshoot
    /// (a lossy link drops at random), and bounding inflight for it leaves the
    /// pipe part empty: the same reading of delay beside loss as TCP Veno's (Fu
    /// and Liew, "TCP Veno: TCP Enhancement for Transmission over Wireless Access
    /// Networks", IEEE JSAC 21(2), 2003). Flows that overshoot a shared
    /// bottleneck fill its queue first, so their losses still bound them.
    ///
    /// `None` or 0: v3, every lossy round counts (a coupled group takes `None` as
    /// "not set" and 0 as "off"). Off in [`LhChanges::ALL`]; a coupled group of
    /// `bbr-lh` channels turns it on ([`crate::cc::GROUP_LOSS_NEEDS_QUEUE`] says
    /// why there and not for every flow).
    pub loss_needs_queue: Option<f64>,
    /// Drain keeps the bandwidth estimate: Drain paces at 0.35 of it by design,
    /// so what it delivers shows that pacing, not the path. Each Drain sample is
    /// taken as the larger of itself and the estimate, which so stays, and stays
    /// fresh, through Drain and for the filter's ten rounds after. v1 takes
    /// Drain's samples as they are: its Drain ends within a round or two, well
    /// inside the filter's ten rounds. A UDT sender's Drain can last thirty: it
    /// ends when the packets counted in flight fit one BDP, after a Startup
    /// overshoot many wait for a lost retransmission's repair, and a 1 ms path's
    /// rounds are 10 ms full-ACK periods. Its own samples then took the estimate
    /// down (a coupled group at 1 Gb/s × 1 ms with 1 % loss: 1000 to 247 Mb/s
    /// before Drain ended, then, with v3's bound, about 10 Mb/s). false: v1.
    pub drain_holds_bw: bool,
    /// A UDT sender also takes RTT samples from NAKs: the receiver sends one the
    /// moment a packet arrives beyond a gap, so the time from that packet's send
    /// to the NAK is a round trip that no hole delays. A cumulative ACK's sample
    /// times the newest packet it covers, which under loss waited behind a hole
    /// (at 5 % loss almost every one), so without these the standing RTT showed a
    /// queue that was not there and v3's bound cut a coupled group's window
    /// (100 Mb/s × 20 ms, 5 % loss: 68 Mb/s, and 84-86 with this and
    /// `drain_holds_bw`'s refresh). false: ACK samples only. TCP ignores it.
    pub nak_rtt: bool,
    /// In ProbeBW, while no queue stands (by `loss_needs_queue`, which this needs,
    /// as it needs v3's loss threshold, without which rounds' losses are not
    /// counted), pace at the model's rate over `1 - p`, where `p` is the loss rate of the
    /// rounds that showed no standing queue at a gain of at most 1 (a moving
    /// average, an eighth per round, at most `MAX_PACED_OVER_LOSS`).
    ///
    /// Why: a link that drops at random drops on the way in (the simulator's and
    /// the emulator's links do; a lossy radio hop before the bottleneck does), so a
    /// packet lost there takes none of the bottleneck's time. Paced at what is
    /// delivered, the flow leaves `p` of the link idle: a coupled group at
    /// 100 Mb/s × 20 ms with 5 % loss kept it 93-94 % busy in its cruise, where four
    /// models, each overshooting, kept it 99-100 % busy over a queue. Loss after the
    /// bottleneck, where making up for it would overload it, builds a queue at once
    /// and the queue turns this off, as it does when the flow's share of a shared
    /// bottleneck shrinks; only loss with no queue behind it is counted.
    ///
    /// `None`: not set (a coupled `bbr-lh` group turns it on, as it does
    /// `loss_needs_queue`; docs/bbr.md has the measurements); `Some(false)`: off.
    pub pace_over_loss: Option<bool>,
}

/// The most random loss [`LhChanges::pace_over_loss`] makes up for: at 25 % the
/// pacing rises by a third, and a path losing more is no path to fill.
pub const MAX_PACED_OVER_LOSS: f64 = 0.25;

impl LhChanges {
    /// BBR as Linux runs it.
    pub const NONE: LhChanges = LhChanges {
        min_rtt_confirm: 0.0,
        startup_queue_exit: None,
        startup_growth: 1.0,
        pacing_margin: PACING_MARGIN,
        cwnd_gain: CWND_GAIN,
        loss_needs_queue: None,
        drain_holds_bw: false,
        nak_rtt: false,
        pace_over_loss: None,
    };
    /// All of longhaul's changes.
    pub const ALL: LhChanges = LhChanges {
        min_rtt_confirm: 0.025,
        startup_queue_exit: Some(0.25),
        startup_growth: 2.0,
        pacing_margin: PACING_MARGIN,
        cwnd_gain: CWND_GAIN,
        loss_needs_queue: None,
        drain_holds_bw: true,
        nak_rtt: true,
        pace_over_loss: None,
    };
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig {
            loss_threshold: None,
            quantization_pkts: 3,
            seed: 0,
            lh: LhChanges::NONE,
            ack_hold: false,
        }
    }
}

impl BbrConfig {
    /// BBRv3's loss bound at its draft's 2 %.
    pub fn v3_loss() -> Self {
        BbrConfig {
            loss_threshold: Some(V3_LOSS_THRESHOLD),
            ..BbrConfig::default()
        }
    }

    /// `bbr-lh`: BBR with all of longhaul's changes and v3's loss bound (which
    /// four flows on one bottleneck need to share it evenly; docs/bbr.md).
    pub fn lh() -> Self {
        BbrConfig {
            lh: LhChanges::ALL,
            ..BbrConfig::v3_loss()
        }
    }
}
