//! BBR: model-based congestion control (Cardwell, Cheng, Gunn, Hassas Yeganeh,
//! Jacobson, "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016), as
//! Linux's `tcp_bbr.c` (v1) runs it, with BBRv3's loss bound as an option
//! (draft-ietf-ccwg-bbr).
//!
//! > BBR … uses recent measurements of a transport connection's delivery rate, round-
//! > trip time, and packet loss rate to build an explicit model of the network path
//! > … then uses that model to control how fast it sends data and the maximum
//! > volume of data it allows in flight (draft-ietf-ccwg-bbr §1).
//!
//! The model is two numbers: the bottleneck bandwidth (a windowed maximum of
//! delivery-rate samples over ten round trips) and the round-trip propagation time (a
//! windowed minimum over ten seconds, refreshed by ProbeRTT). The sender paces at
//! `pacing_gain × bw` and keeps at most `cwnd_gain × bw × min_rtt` in flight, the
//! gains set by the state machine:
//!
//! ```text
//!  Startup ──full bw──▶ Drain ──inflight ≤ BDP──▶ ProbeBW (gains 1.25, 0.75, 1 × 6)
//!     ▲                                              │  ▲
//!     └──────────── min RTT 10 s old ──▶ ProbeRTT ───┘  │ (200 ms and a round at 4 packets)
//! ```
//!
//! This core counts bytes and sees the connection only through [`RateSample`]s; the
//! engines feed it (TCP through [`CongestionControl`](super::CongestionControl),
//! UDT through [`BbrUdt`](super::BbrUdt)). Random loss is not a signal to v1 at all;
//! with [`BbrConfig::loss_threshold`] set, a round trip that lost more than that share
//! of its data ends Startup and bounds what is kept in flight, as BBRv3 does; below
//! it loss is ignored, which is what keeps a long lossy path full.
//!
//! Not here: Linux v1's long-term ("policer") bandwidth sampling, and BBRv3's
//! ProbeBW sub-states (DOWN, CRUISE, REFILL, UP) and its ECN response; the v1 gain cycle
//! is kept with v3's loss bound beside it.

use super::delivery_rate::RateSample;
use super::minmax::WindowedMax;
use crate::time::{Duration, Instant};

/// 2/ln(2): the smallest gain that doubles the delivery rate each round in Startup
/// (Linux `bbr_high_gain`, 2885/1000).
pub const HIGH_GAIN: f64 = 2.885;
/// Drain's pacing gain: the inverse of Startup's, to empty the queue it built in one
/// round (Linux `bbr_drain_gain`).
pub const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
/// ProbeBW's window gain: two BDPs, so delayed and stretched ACKs do not stall it.
pub const CWND_GAIN: f64 = 2.0;
/// ProbeBW's pacing gains: probe up by a quarter for one min RTT, drain it for one,
/// cruise for six (Linux `bbr_pacing_gain`).
pub const PACING_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The bandwidth filter's window, round trips (Linux `bbr_bw_rtts`: the cycle + 2).
pub const BW_WINDOW_ROUNDS: u64 = PACING_GAINS.len() as u64 + 2;
/// The min-RTT filter's window (Linux `bbr_min_rtt_win_sec`).
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// How long ProbeRTT holds the window at its floor (Linux `bbr_probe_rtt_mode_ms`).
pub const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// The window floor, packets (Linux `bbr_cwnd_min_target`).
pub const MIN_CWND_PKTS: u64 = 4;
/// Startup ends when the bandwidth grew less than this factor …
pub const FULL_BW_THRESH: f64 = 1.25;
/// … for this many rounds in a row (Linux `bbr_full_bw_thresh`, `bbr_full_bw_cnt`).
pub const FULL_BW_ROUNDS: u32 = 3;
/// The pacing rate is this far below the model's, so queues drain (Linux
/// `bbr_pacing_margin_percent`).
pub const PACING_MARGIN: f64 = 0.01;
/// ACK-aggregation allowance: the window's extra room is the most data delivered
/// beyond the model's rate in an epoch, remembered over this many rounds …
pub const EXTRA_ACKED_ROUNDS: u64 = 5;
/// … and at most this long at the model's rate (Linux `bbr_extra_acked_win_rtts`,
/// `bbr_extra_acked_max_us`).
pub const EXTRA_ACKED_MAX: Duration = Duration::from_millis(100);
/// BBRv3's multiplicative bound on inflight after excessive loss
/// (draft-ietf-ccwg-bbr `BBRBeta`).
pub const BETA: f64 = 0.7;
/// Startup ends on loss only after this many loss events in a round
/// (draft-ietf-ccwg-bbr `BBRStartupFullLossCnt`).
pub const STARTUP_FULL_LOSS_COUNT: u32 = 6;
/// BBRv3's loss threshold (draft-ietf-ccwg-bbr `BBRLossThresh`).
pub const V3_LOSS_THRESHOLD: f64 = 0.02;

#[path = "bbr_config.rs"]
mod config;
pub use config::{BbrConfig, LhChanges, MAX_PACED_OVER_LOSS};

/// The state machine's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BbrMode {
    /// Doubling the rate each round until the bandwidth stops growing.
    Startup,
    /// Emptying the queue Startup built.
    Drain,
    /// Cycling the pacing gain around the bandwidth found.
    ProbeBw,
    /// Holding inflight at its floor to measure the propagation RTT.
    ProbeRtt,
}

/// A BBR sender's model and state.
#[derive(Debug, Clone)]
pub struct Bbr {
    cfg: BbrConfig,
    smss: u64,
    /// The window floor, bytes: [`MIN_CWND_PKTS`] segments unless the sender cannot
    /// hold that little in flight ([`set_min_cwnd_pkts`](Self::set_min_cwnd_pkts)).
    min_cwnd: u64,
    mode: BbrMode,
    /// Bottleneck bandwidth, bytes per second, over [`BW_WINDOW_ROUNDS`] rounds.
    bw: WindowedMax,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    round_count: u64,
    next_round_delivered: u64,
    round_start: bool,
    full_bw: u64,
    full_bw_count: u32,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_stamp: Instant,
    pacing_gain: f64,
    cwnd_gain: f64,
    cwnd: u64,
    prior_cwnd: u64,
    /// Bytes per second.
    pacing_rate: f64,
    has_seen_rtt: bool,
    /// The last RTT sample.
    last_rtt: Option<Duration>,
    /// The least RTT sample of this round and of the last.
    round_min_rtt: [Option<Duration>; 2],
    extra_acked: [u64; 2],
    extra_acked_idx: usize,
    extra_acked_rounds: u64,
    ack_epoch_stamp: Instant,
    ack_epoch_acked: u64,
    /// v3: data delivered and lost in this round, and the loss events.
    round_delivered: u64,
    round_lost: u64,
    round_loss_events: u32,
    round_bounded: bool,
    /// TCP loss recovery's first round: the window follows deliveries only.
    packet_conservation: bool,
    in_recovery: bool,
    /// v3: the bound on inflight set by excessive loss.
    inflight_hi: Option<u64>,
    /// The loss rate of rounds with no standing queue
    /// ([`LhChanges::pace_over_loss`]).
    random_loss: f64,
    /// Bytes a probing phase must see delivered, of what it sent, before it
    /// ends while the BDP is less ([`set_probe_span_pkts`](Self::set_probe_span_pkts));
    /// 0 for Linux's phases.
    probe_span: u64,
    /// What the receivers may hold before they acknowledge, bytes, and the longest
    /// they wait to ([`set_ack_schedule`](Self::set_ack_schedule)); 0 for TCP's.
    ack_hold: u64,
    ack_hold_for: Duration,
    /// The delivered count by which all that was in flight when the phase began
    /// has been delivered.
    cycle_delivered: u64,
    /// The delivered count and the bytes in flight of the acknowledgement being
    /// handled, and whether it brought a bandwidth sample.
    ack_delivered: u64,
    ack_in_flight: u64,
    ack_sampled: bool,
}

impl Bbr {
    /// A sender at `now` with segments of `smss` bytes and an initial window of
    /// `initial_window` bytes.
    pub fn new(cfg: BbrConfig, smss: u64, initial_window: u64, now: Instant) -> Self {
        let mut b = Bbr {
            cfg,
            smss,
            min_cwnd: MIN_CWND_PKTS * smss,
            mode: BbrMode::Startup,
            bw: WindowedMax::default(),
            min_rtt: None,
            min_rtt_stamp: now,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            full_bw: 0,
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: now,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            cwnd: initial_window.max(MIN_CWND_PKTS * smss),
            prior_cwnd: 0,
            pacing_rate: 0.0,
            has_seen_rtt: false,
            last_rtt: None,
            round_min_rtt: [None; 2],
            extra_acked: [0; 2],
            extra_acked_idx: 0,
            extra_acked_rounds: 0,
            ack_epoch_stamp: now,
            ack_epoch_acked: 0,
            round_delivered: 0,
            round_lost: 0,
            round_loss_events: 0,
            round_bounded: false,
            packet_conservation: false,
            in_recovery: false,
            inflight_hi: None,
            random_loss: 0.0,
            probe_span: 0,
            ack_hold: 0,
            ack_hold_for: Duration::ZERO,
            cycle_delivered: 0,
            ack_delivered: 0,
            ack_in_flight: 0,
            ack_sampled: false,
        };
        b.init_pacing_rate(None);
        b
    }

    /// The mode.
    pub fn mode(&self) -> BbrMode {
        self.mode
    }
    /// The bottleneck bandwidth estimate, bytes per second.
    pub fn bandwidth(&self) -> u64 {
        self.bw.get()
    }
    /// The propagation RTT estimate.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
    /// The pacing rate, bytes per second.
    pub fn pacing_bytes_per_sec(&self) -> f64 {
        self.pacing_rate
    }
    /// The congestion window, bytes.
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }
    /// Raises the window floor to `pkts` segments, if that is more than Linux's
    /// four: for a sender that cannot bring its packets in flight down to
    /// four. ProbeRTT waits for the inflight to reach the floor before it starts its
    /// 200 ms, so a floor the sender cannot reach would hold it in ProbeRTT, at the
    /// floor's window, for good. (Linux has no such case: TCP can always send less.
    /// A UDT group can't, see `bbr_udt`.)
    pub fn set_min_cwnd_pkts(&mut self, pkts: u64) {
        self.min_cwnd = pkts.max(MIN_CWND_PKTS) * self.smss;
        self.cwnd = self.cwnd.max(self.min_cwnd);
    }
    /// Makes a probing phase (ProbeBW's 1.25) last, while the BDP is less than
    /// `pkts` segments, until `pkts` segments sent during it are delivered and a
    /// bandwidth sample has come after them: for a sender whose bandwidth samples
    /// are the arrival rate of the receiver's last `pkts` packets (UDT's, see
    /// `bbr_udt`). Linux's phase lasts a min RTT, and at a BDP of a few packets
    /// that is a packet or two, which such a sample does not see: the estimate
    /// could then fall (a slow spell reads low, and the filter takes it after ten
    /// rounds) but never rise again. Above that BDP a min RTT already holds more
    /// than `pkts` packets, and the phase is Linux's.
    pub fn set_probe_span_pkts(&mut self, pkts: u64) {
        self.probe_span = pkts * self.smss;
    }
    /// Tells the model its receivers acknowledge only every `pkts` segments or
    /// every `every`, whichever comes first (UDT's light and full ACKs: 64
    /// packets a receiver, a SYN of 10 ms). What they hold, up to `min(pkts, bw
    /// × every)`, has arrived but is in flight to the sender. The window makes
    /// room for all of it, or the sender waits for an ACK with the pipe empty;
    /// so does Drain's end, or Drain never ends (the inflight cannot fall to one
    /// BDP while the receivers hold more). ProbeBW's phases are left as Linux
    /// has them: with the hold, or half of it, in their targets too, the probes
    /// overran a 1-BDP queue at 1 ms and 10 Gb/s × 100 µs (see docs/bbr.md).
    /// Linux's ACK-aggregation allowance finds this only when one ACK brings it
    /// all; a group's members' ACKs come apart, each bringing its share, and
    /// four coupled channels of `longhaul send` over loopback held windows of
    /// 20-80 packets against the 256 their receivers hold, and in four runs of
    /// eight moved 84-107 Mb/s (`--no-couple`, 5.4 Gb/s). 0 (TCP's, which ACKs
    /// every other segment): no room.
    pub fn set_ack_schedule(&mut self, pkts: u64, every: Duration) {
        self.ack_hold = pkts * self.smss;
        self.ack_hold_for = every;
    }
    /// Whether Startup found the pipe full.
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }
    /// The pacing gain in force.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }
    /// Round trips counted so far.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }
    /// The configuration it runs.
    pub fn config(&self) -> &BbrConfig {
        &self.cfg
    }
    /// v3's inflight bound, if loss set one.
    pub fn inflight_hi(&self) -> Option<u64> {
        self.inflight_hi
    }

    /// Pacing before the first sample: the initial window per RTT (1 ms when no
    /// RTT is known) at Startup's gain (Linux `bbr_init_pacing_rate_from_rtt`).
    fn init_pacing_rate(&mut self, srtt: Option<Duration>) {
        let rtt = srtt
            .unwrap_or(Duration::from_millis(1))
            .max(Duration::from_micros(1));
        self.has_seen_rtt = srtt.is_some();
        self.pacing_rate =
            self.cwnd as f64 / rtt.as_secs_f64() * HIGH_GAIN * (1.0 - self.cfg.lh.pacing_margin);
    }

    /// `gain × BDP`, bytes; the initial window while no RTT is known.
    fn bdp(&self, bw: u64, gain: f64) -> u64 {
        match self.min_rtt {
            None => self.cwnd.max(self.min_cwnd),
            Some(rtt) => (bw as f64 * rtt.as_secs_f64() * gain).ceil() as u64,
        }
    }

    /// `gain × BDP` plus the quantisation allowance (Linux `bbr_inflight` and
    /// `bbr_quantization_budget`): two more packets in the probing phase, so it
    /// really does put more in flight.
    fn inflight(&self, bw: u64, gain: f64) -> u64 {
        let mut w = self.bdp(bw, gain) + self.cfg.quantization_pkts * self.smss;
        if self.mode == BbrMode::ProbeBw && self.cycle_idx == 0 {
            w += 2 * self.smss;
        }
        w
    }

    /// What the receiver may hold unacknowledged at `bw` ([`set_ack_schedule`](
    /// Self::set_ack_schedule)): it has arrived, but the sender counts it in flight.
    fn held(&self, bw: u64) -> u64 {
        self.ack_hold
            .min((bw as f64 * self.ack_hold_for.as_secs_f64()) as u64)
    }

    /// One acknowledgement: update the model, then the pacing rate and window
    /// (Linux `bbr_main`). `delivered` is the sampler's count after it, `in_flight`
    /// what is in flight after it.
    pub fn update(&mut self, now: Instant, rs: &RateSample, delivered: u64, in_flight: u64) {
        self.update_with_rate(now, rs, rs.rate(), delivered, in_flight);
    }

    /// [`update`](Self::update) with the bandwidth sample, bytes per second, given
    /// apart from the rate sample (an engine whose ACKs cannot time deliveries, such
    /// as UDT's cumulative ones, measures it elsewhere); `None`: no sample, and no
    /// round trip counted.
    pub fn update_with_rate(
        &mut self,
        now: Instant,
        rs: &RateSample,
        rate: Option<f64>,
        delivered: u64,
        in_flight: u64,
    ) {
        self.ack_delivered = delivered;
        self.ack_in_flight = in_flight;
        self.ack_sampled = rate.is_some();
        if !self.has_seen_rtt {
            if let Some(rtt) = rs.rtt {
                self.init_pacing_rate(Some(rtt));
            }
        }
        if rs.rtt.is_some() {
            self.last_rtt = rs.rtt;
        }
        self.update_bw(rs, rate, delivered);
        if self.round_start {
            self.round_min_rtt = [None, self.round_min_rtt[0]];
        }
        if let Some(rtt) = rs.rtt {
            self.round_min_rtt[0] = Some(self.round_min_rtt[0].map_or(rtt, |m| m.min(rtt)));
        }
        self.update_loss_round(now, rs);
        self.update_ack_aggregation(now, rs);
        self.update_cycle_phase(now, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(now, in_flight);
        self.update_min_rtt(now, rs, delivered, in_flight);
        self.update_gains();
        let bw = self.bw.get();
        self.set_pacing_rate(bw);
        self.set_cwnd(rs, bw, in_flight);
    }

    /// The sender's retransmission timer fired (TCP's RTO, UDT's EXP): Linux BBR
    /// keeps its model but a new round starts and Startup's plateau count restarts.
    pub fn on_rto(&mut self, in_flight: u64) {
        self.prior_cwnd = self.cwnd.max(self.prior_cwnd);
        self.cwnd = (in_flight + self.smss).max(self.min_cwnd);
        self.full_bw = 0;
        self.round_start = true;
    }

    /// Counts rounds by delivered data and takes the bandwidth sample (Linux
    /// `bbr_update_bw`).
    fn update_bw(&mut self, rs: &RateSample, rate: Option<f64>, delivered: u64) {
        self.round_start = false;
        let Some(rate) = rate else { return };
        // "packet-timed" round trips: a round ends when a packet sent after the
        // last round ended is delivered.
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = delivered;
            self.round_count += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        let bw = rate as u64;
        if self.cfg.lh.drain_holds_bw && self.mode == BbrMode::Drain {
            // Drain's samples show its 0.35 pacing, not the path: the estimate is
            // kept, and kept fresh, so it outlives a long Drain by ten rounds.
            let held = bw.max(self.bw.get());
            self.bw.update(BW_WINDOW_ROUNDS, self.round_count, held);
            return;
        }
        // App-limited samples understate the path: take them only if they beat
        // the estimate.
        if !rs.is_app_limited || bw >= self.bw.get() {
            self.bw.update(BW_WINDOW_ROUNDS, self.round_count, bw);
        }
    }

    /// v3: the loss rate of each round, and its response when above the threshold.
    fn update_loss_round(&mut self, now: Instant, rs: &RateSample) {
        let Some(thresh) = self.cfg.loss_threshold else {
            return;
        };
        self.round_delivered += rs.newly_acked;
        self.round_lost += rs.newly_lost;
        if rs.losses {
            self.round_loss_events += 1;
        }
        // The loss rate of a round: judged when the round ends, or earlier once
        // the losses exceed the threshold of a whole flight (the draft compares a
        // sample's losses with the inflight of when the lost packet left), so that a
        // few losses early in a round are not read as a high rate.
        let sent = self.round_delivered + self.round_lost;
        let flight = if self.round_start {
            sent
        } else {
            sent.max(rs.prior_in_flight)
        };
        let too_high = flight > 0
            && self.round_lost as f64 > thresh * flight as f64
            && self
                .cfg
                .lh
                .loss_needs_queue
                .is_none_or(|f| f <= 0.0 || self.queue_stands(f));
        // v3 grows the bound back while probing up and the round's loss rate is
        // tolerable (draft: "BBRProbeInflightHiUpward"), here by what is delivered,
        // doubling it each probing round.
        if self.pacing_gain > 1.0 && !too_high {
            if let Some(hi) = self.inflight_hi.as_mut() {
                *hi += rs.newly_acked;
            }
        }
        // Once per round: the bound answers the round's loss rate, not each loss.
        if too_high && !self.round_bounded {
            self.round_bounded = true;
            // "BBRHandleInflightTooHigh": inflight_hi = max(inflight, beta × target).
            let target = self.inflight(self.bw.get(), 1.0);
            let bound = rs.prior_in_flight.max((BETA * target as f64) as u64);
            self.inflight_hi = Some(self.inflight_hi.map_or(bound, |h| h.min(bound)));
            if self.mode == BbrMode::ProbeBw && self.pacing_gain > 1.0 {
                // Stop probing up at once.
                self.advance_cycle(now);
            }
        }
        // "BBRCheckStartupHighLoss": judged on every ACK rather than only at the
        // first too-high one of a round (which is usually the third loss event,
        // short of the six required). A UDT round only ends at a full ACK with a
        // receiver reading, so one round can last seconds while those stall; the
        // exit must not wait for the next round to be judged again.
        if too_high
            && self.mode == BbrMode::Startup
            && self.round_loss_events >= STARTUP_FULL_LOSS_COUNT
        {
            self.full_bw_reached = true;
        }
        if self.round_start {
            self.update_random_loss();
            self.round_delivered = 0;
            self.round_lost = 0;
            self.round_loss_events = 0;
            self.round_bounded = false;
        }
    }

    /// The window's allowance for ACKs that arrive in bursts (Linux
    /// `bbr_update_ack_aggregation`): the most data delivered beyond the model's
    /// rate within an epoch, over the last five to ten rounds.
    fn update_ack_aggregation(&mut self, now: Instant, rs: &RateSample) {
        if rs.newly_acked == 0 || self.bw.get() == 0 {
            return;
        }
        if self.round_start {
            self.extra_acked_rounds += 1;
            if self.extra_acked_rounds >= EXTRA_ACKED_ROUNDS {
                self.extra_acked_rounds = 0;
                self.extra_acked_idx ^= 1;
                self.extra_acked[self.extra_acked_idx] = 0;
            }
        }
        let epoch = now.saturating_duration_since(self.ack_epoch_stamp);
        let mut expected = (self.bw.get() as f64 * epoch.as_secs_f64()) as u64;
        // A new epoch when ACKs came slower than the model says, or after a very
        // long one (2^20 packets).
        if self.ack_epoch_acked <= expected
            || self.ack_epoch_acked + rs.newly_acked >= (1 << 20) * self.smss
        {
            self.ack_epoch_acked = 0;
            self.ack_epoch_stamp = now;
            expected = 0;
        }
        self.ack_epoch_acked += rs.newly_acked;
        let extra = (self.ack_epoch_acked - expected.min(self.ack_epoch_acked)).min(self.cwnd);
        let slot = &mut self.extra_acked[self.extra_acked_idx];
        *slot = (*slot).max(extra);
    }

    fn aggregation_allowance(&self) -> u64 {
        if !self.full_bw_reached {
            return 0;
        }
        let cap = (self.bw.get() as f64 * EXTRA_ACKED_MAX.as_secs_f64()) as u64;
        self.extra_acked[0].max(self.extra_acked[1]).min(cap)
    }

    /// ProbeBW: move to the next gain once this one has run its course (Linux
    /// `bbr_is_next_cycle_phase`).
    fn update_cycle_phase(&mut self, now: Instant, rs: &RateSample) {
        if self.mode != BbrMode::ProbeBw {
            return;
        }
        let full_length = self
            .min_rtt
            .is_some_and(|m| now.saturating_duration_since(self.cycle_stamp) > m);
        let gain = self.pacing_gain;
        let bw = self.bw.get();
        let next = if gain == 1.0 {
            full_length
        } else if gain > 1.0 {
            // Probe until the queue it builds holds a quarter BDP, or loss says the
            // pipe is full; and, for a sampler that needs it, until a sample has
            // seen the probe's packets arrive (one that came after the phase
            // ended would read the next phase's pace in with them).
            let seen = self.probe_span == 0
                || self.bdp(bw, 1.0) >= self.probe_span
                || (self.ack_sampled
                    && self.ack_delivered >= self.cycle_delivered + self.probe_span);
            full_length && seen && (rs.losses || rs.prior_in_flight >= self.inflight(bw, gain))
        } else {
            // Drain until the queue is gone, at most one min RTT.
            full_length || rs.prior_in_flight <= self.inflight(bw, 1.0)
        };
        if next {
            self.advance_cycle(now);
        }
    }

    fn advance_cycle(&mut self, now: Instant) {
        self.cycle_idx = (self.cycle_idx + 1) % PACING_GAINS.len();
        self.cycle_stamp = now;
        self.cycle_delivered = self.ack_delivered + self.ack_in_flight;
    }

    /// Startup ends when three rounds in a row grew the bandwidth by less than a
    /// quarter (Linux `bbr_check_full_bw_reached`).
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let bw = self.bw.get();
        if bw as f64 >= self.full_bw as f64 * FULL_BW_THRESH {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        let queue_shows = self
            .cfg
            .lh
            .startup_queue_exit
            .is_some_and(|f| self.queue_shows(f));
        self.full_bw_reached = self.full_bw_count >= FULL_BW_ROUNDS || queue_shows;
    }

    /// Whether the last RTT sample is more than `fraction` above the min RTT: a
    /// queue at the bottleneck. No sample yet: no queue known.
    fn queue_shows(&self, fraction: f64) -> bool {
        above(self.last_rtt, self.min_rtt, fraction)
    }

    /// Whether the least RTT sample of this round and the last is more than
    /// `fraction` above the min RTT: a queue that every packet waits in.
    ///
    /// In Startup, within a round, this round's samples alone: each Startup round
    /// puts more in flight than the last, so the last round's least sample was
    /// taken before this round's queue built, and read with this round's it hides
    /// that queue for a whole round. A UDT round ends only at a full ACK with a
    /// receiver reading, and those stall behind lost retransmissions, so that round
    /// can last hundreds of milliseconds: a coupled group at 100 Mb/s × 20 ms with
    /// 5 % loss lost a fifth of what it sent in such a round over an RTT of
    /// twice the min, read no queue (the last round's least sample was the min
    /// RTT itself) and kept Startup's gain for 0.5 s. At a round's first ACK the
    /// round judged is the one that just ended, so both rounds' samples are read
    /// then: the new round's first sample alone is often a full ACK that waited
    /// behind a hole's repair.
    fn queue_stands(&self, fraction: f64) -> bool {
        let standing = if self.mode == BbrMode::Startup && !self.round_start {
            self.round_min_rtt[0]
        } else {
            self.round_min_rtt.iter().flatten().min().copied()
        };
        above(standing, self.min_rtt, fraction)
    }

    /// The standing-queue threshold that [`LhChanges::pace_over_loss`] reads
    /// loss by, if it is on.
    fn pace_over_loss_queue(&self) -> Option<f64> {
        let lh = &self.cfg.lh;
        (lh.pace_over_loss == Some(true))
            .then_some(lh.loss_needs_queue)
            .flatten()
            .filter(|&f| f > 0.0)
    }

    /// At a round's end: its loss rate joins the random-loss average if it was a
    /// ProbeBW round at a gain of at most 1 with no queue standing (a probe's
    /// losses, or Startup's, are the flow's own overshoot).
    fn update_random_loss(&mut self) {
        let Some(f) = self.pace_over_loss_queue() else {
            return;
        };
        let sent = self.round_delivered + self.round_lost;
        if self.mode == BbrMode::ProbeBw
            && self.pacing_gain <= 1.0
            && sent > 0
            && !self.queue_stands(f)
        {
            let p = self.round_lost as f64 / sent as f64;
            self.random_loss += (p - self.random_loss) / 8.0;
        }
    }

    /// The random loss rate the pacing makes up for now: none while a queue
    /// stands or outside ProbeBW.
    fn loss_to_make_up(&self) -> f64 {
        match self.pace_over_loss_queue() {
            Some(f) if self.mode == BbrMode::ProbeBw && !self.queue_stands(f) => {
                self.random_loss.min(MAX_PACED_OVER_LOSS)
            }
            _ => 0.0,
        }
    }

    /// Startup → Drain when the pipe is full; Drain → ProbeBW when the queue is
    /// gone (Linux `bbr_check_drain`).
    fn check_drain(&mut self, now: Instant, in_flight: u64) {
        if self.mode == BbrMode::Startup && self.full_bw_reached {
            self.mode = BbrMode::Drain;
        }
        // The inflight counts what the receivers may hold, which has arrived
        // (`set_ack_schedule`).
        let bw = self.bw.get();
        if self.mode == BbrMode::Drain && in_flight <= self.inflight(bw, 1.0) + self.held(bw) {
            self.enter_probe_bw(now);
        }
    }

    /// Enters ProbeBW in a phase chosen from the seed, never the draining one
    /// (Linux: `CYCLE_LEN - 1 - prandom_u32_max(bbr_cycle_rand)`, then advance).
    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = BbrMode::ProbeBw;
        let r = splitmix(self.cfg.seed ^ self.round_count) % 7;
        self.cycle_idx = PACING_GAINS.len() - 1 - r as usize;
        self.advance_cycle(now);
    }

    /// The min-RTT filter and ProbeRTT (Linux `bbr_update_min_rtt`).
    fn update_min_rtt(&mut self, now: Instant, rs: &RateSample, delivered: u64, in_flight: u64) {
        let expired = now.saturating_duration_since(self.min_rtt_stamp) > MIN_RTT_WINDOW;
        if let Some(rtt) = rs.rtt {
            if self.min_rtt.is_none_or(|m| rtt < m) || expired {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = now;
            } else if self.min_rtt.is_some_and(|m| {
                rtt.as_secs_f64() <= m.as_secs_f64() * (1.0 + self.cfg.lh.min_rtt_confirm)
                    && self.cfg.lh.min_rtt_confirm > 0.0
            }) {
                self.min_rtt_stamp = now;
            }
        }
        if expired && self.mode != BbrMode::ProbeRtt {
            self.mode = BbrMode::ProbeRtt;
            self.prior_cwnd = self.cwnd.max(self.prior_cwnd);
            self.probe_rtt_done = None;
        }
        if self.mode != BbrMode::ProbeRtt {
            return;
        }
        match self.probe_rtt_done {
            None if in_flight <= self.min_cwnd => {
                // Inflight reached the floor: hold it there for 200 ms and a round.
                self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = delivered;
            }
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && now >= done {
                    self.min_rtt_stamp = now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    if self.full_bw_reached {
                        self.enter_probe_bw(now);
                    } else {
                        self.mode = BbrMode::Startup;
                    }
                }
            }
            None => {}
        }
    }

    /// Whether the sender should mark itself application-limited (ProbeRTT's
    /// samples measure the floor, not the path).
    pub fn in_probe_rtt(&self) -> bool {
        self.mode == BbrMode::ProbeRtt
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            BbrMode::Startup => (HIGH_GAIN, HIGH_GAIN),
            BbrMode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            BbrMode::ProbeBw => (PACING_GAINS[self.cycle_idx], self.cfg.lh.cwnd_gain),
            BbrMode::ProbeRtt => (1.0, 1.0),
        };
    }

    /// Bounds the bandwidth estimate by `max`, bytes per second, known from
    /// outside the model: samples already in the filter above it are lowered to
    /// it. (Not in Linux or the draft; a UDT group uses it for its link's
    /// capacity, see `bbr_udt`.)
    pub fn limit_bandwidth(&mut self, max: u64) {
        self.bw.limit(max);
    }

    /// Linux `bbr_set_pacing_rate`: never lower the rate in Startup, so one low
    /// sample cannot slow the climb.
    fn set_pacing_rate(&mut self, bw: u64) {
        if bw == 0 {
            return;
        }
        let rate = bw as f64 * self.pacing_gain * (1.0 - self.cfg.lh.pacing_margin)
            / (1.0 - self.loss_to_make_up());
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// Linux `bbr_set_cwnd`: grow toward `cwnd_gain × BDP` plus allowances by what
    /// was acknowledged; before the pipe is full, grow without a target.
    fn set_cwnd(&mut self, rs: &RateSample, bw: u64, in_flight: u64) {
        let acked = rs.newly_acked;
        if self.packet_conservation {
            // The first round of a recovery: send one packet per packet delivered
            // (Linux `bbr_set_cwnd_to_recover_or_restore`).
            self.cwnd = self.cwnd.max(in_flight + acked);
        } else if acked > 0 {
            // Plus room for what the receivers may hold (`set_ack_schedule`).
            let target =
                self.inflight(bw, self.cwnd_gain) + self.held(bw) + self.aggregation_allowance();
            if self.full_bw_reached {
                self.cwnd = (self.cwnd + acked).min(target);
            } else if self.cwnd < target || bw == 0 {
                self.cwnd += (acked as f64 * self.cfg.lh.startup_growth) as u64;
            }
            self.cwnd = self.cwnd.max(self.min_cwnd);
        }
        if let (Some(hi), BbrMode::ProbeBw) = (self.inflight_hi, self.mode) {
            self.cwnd = self.cwnd.min(hi.max(self.min_cwnd));
        }
        if self.mode == BbrMode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.min_cwnd);
        }
    }
}

/// BBR as a TCP sender's controller: the engine's delivery-rate samples drive it;
/// loss recovery only makes it conserve packets for a round and restore its window
/// after (Linux's `bbr_set_state` and `bbr_set_cwnd_to_recover_or_restore`).
impl super::CongestionControl for Bbr {
    fn wants_rate_samples(&self) -> bool {
        true
    }
    fn on_rate_sample(&mut self, now: Instant, rs: &RateSample, delivered: u64, in_flight: u64) {
        self.update(now, rs, delivered, in_flight);
    }
    fn on_loss(&mut self, _now: Instant, in_flight: u64) {
        // Linux `bbr_save_cwnd`, then packet conservation from the inflight.
        self.prior_cwnd = if self.in_recovery || self.mode == BbrMode::ProbeRtt {
            self.prior_cwnd.max(self.cwnd)
        } else {
            self.cwnd
        };
        self.in_recovery = true;
        self.packet_conservation = true;
        self.cwnd = (in_flight + self.smss).max(self.min_cwnd);
    }
    fn on_recovery_end(&mut self, _now: Instant) {
        self.in_recovery = false;
        self.packet_conservation = false;
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }
    fn on_timeout(&mut self, _now: Instant, in_flight: u64) {
        // The engine signals no end of a timeout's episode, so it is not a
        // recovery here (a flag it never cleared would keep a stale prior window).
        self.on_rto(in_flight);
    }
    fn window(&self) -> u64 {
        self.cwnd
    }
    fn ssthresh(&self) -> u64 {
        u64::MAX
    }
    fn in_slow_start(&self) -> bool {
        self.mode == BbrMode::Startup
    }
    fn pacing_rate(&self) -> Option<f64> {
        Some(self.pacing_rate)
    }
}

/// Whether `rtt` is more than `fraction` above `min`; false if either is unknown.
fn above(rtt: Option<Duration>, min: Option<Duration>, fraction: f64) -> bool {
    match (rtt, min) {
        (Some(rtt), Some(min)) => rtt.as_secs_f64() > min.as_secs_f64() * (1.0 + fraction),
        _ => false,
    }
}

/// SplitMix64's output function: a seeded choice without a global RNG.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
#[path = "bbr_tests.rs"]
mod tests;
