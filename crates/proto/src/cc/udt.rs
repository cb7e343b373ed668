//! UDT's native rate control, `CUDTCC` of UDT4 4.11 (`src/ccc.cpp`), with the study's
//! equations as a second profile.
//!
//! UDT controls a *sending period* (µs between packets) once per SYN (10 ms) from the
//! ACKs, and a window that only caps what is in flight. Variable names follow
//! `CUDTCC`'s (`pkt_snd_period` is `m_dPktSndPeriod`, and so on).
//!
//! Profiles ([`UdtProfile`]):
//! - `Udt4`: 4.11 as shipped: slow start up to the flow window; `inc` from the spare
//!   bandwidth with the B/9 clamp and a 0.01 floor; x1.125 at the start of a
//!   congestion period and at most four randomised further decreases within it; no
//!   increase in the SYN right after a NAK.
//! - `Paper`: the AR-UDT study's equations 1-3: `inc = max(10^ceil(log10(B*MSS*8)) *
//!   1.5e-6 / MSS, 1/MSS)` with B the spare bandwidth (no B/9 clamp), and x1.125 on
//!   *every* NAK. Slow start and the once-per-SYN gating are kept, because the paper
//!   says nothing of how a flow starts and UDT has always done this.
//!
//! `fix_inverted_fallback`: 4.11's `onLoss` and `onTimeout`, when slow start ends with
//! no receive rate measured yet, set the period to `cwnd / (RTT + SYN)` (packets per
//! µs where µs per packet is meant: a period near zero, i.e. line rate). 4.11 fixed the
//! same formula in `onACK` only. `false` reproduces the reference; `true` uses
//! `(RTT + SYN) / cwnd` everywhere.

use crate::seq::UdtSeqNumber;
use crate::time::{Duration, Instant};
use longhaul_wire::udt::LossList;

/// SYN, the rate-control interval, µs (`m_iSYNInterval`).
pub const SYN_US: f64 = 10_000.0;
/// A receiver sends a light ACK every this many packets between its full ACKs,
/// one per SYN (`m_iSelfClockInterval`).
pub const SELF_CLOCK: u32 = 64;

/// Which rule set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UdtProfile {
    /// UDT4 4.11's `CUDTCC`.
    #[default]
    Udt4,
    /// The AR-UDT paper's equations 1-3.
    Paper,
}

/// UDT rate control's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdtConfig {
    /// Rule set.
    pub profile: UdtProfile,
    /// Use `(RTT + SYN) / cwnd` where 4.11 inverts it (see the module docs).
    pub fix_inverted_fallback: bool,
    /// Seed of the randomised decreases (4.11 seeds `rand()` with the sequence
    /// number; here that number is hashed with this seed).
    pub seed: u64,
}

impl Default for UdtConfig {
    fn default() -> Self {
        UdtConfig {
            profile: UdtProfile::Udt4,
            fix_inverted_fallback: false,
            seed: 0,
        }
    }
}

/// What the engine knows when it calls the controller (`CCC`'s pushed fields).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdtInputs {
    /// Smoothed RTT, µs.
    pub rtt_us: f64,
    /// Receiving rate the peer reports, packets per second (0 if unknown).
    pub rcv_rate_pps: u32,
    /// Link capacity the peer estimates, packets per second.
    pub bandwidth_pps: u32,
    /// Packet size, bytes, IP and UDP headers included.
    pub mss: u32,
    /// The flow window from the handshake, packets (`m_dMaxCWndSize`).
    pub max_cwnd_pkts: f64,
    /// The largest sequence number sent so far (`m_iSndCurrSeqNo`).
    pub snd_curr_seq: UdtSeqNumber,
    /// The RTT field of the ACK being processed, µs (AR-UDT's `R[t]`; 0 when not an
    /// ACK).
    pub ack_rtt_us: f64,
    /// The receive rate the full ACK being processed reports, packets per second,
    /// before the sender's smoothing (0 when not a full ACK or not measured).
    pub ack_recv_rate_pps: u32,
    /// The link capacity the full ACK being processed reports, packets per second,
    /// before the sender's smoothing (0 when not a full ACK or not measured).
    pub ack_bandwidth_pps: u32,
}

/// The fewest packets a UDT sender may keep unacknowledged, whatever its
/// controller's window says. UDT4's receiver never advertises less than two packets
/// of free buffer, "to break potential deadlock" (`CUDT::sendCtrl`), and the engine
/// holds the congestion window to the same floor.
pub const MIN_WINDOW_PKTS: u64 = 2;

/// The events a UDT rate controller reacts to; the engine is generic over it, so UDT
/// and AR-UDT drive the same engine.
pub trait UdtRateControl: core::fmt::Debug + Send {
    /// A full ACK for everything before `ack` arrived (light ACKs are not passed on).
    fn on_ack(&mut self, now: Instant, ack: UdtSeqNumber, inputs: &UdtInputs);
    /// A NAK arrived whose first lost sequence number is `first_lost`.
    fn on_loss(&mut self, now: Instant, first_lost: UdtSeqNumber, inputs: &UdtInputs);
    /// The EXP timer expired.
    fn on_timeout(&mut self, now: Instant, inputs: &UdtInputs);
    /// A NAK arrived with loss list `list`, after [`on_loss`](Self::on_loss). UDT4's
    /// controllers need only the first loss.
    fn on_nak_ranges(&mut self, _now: Instant, _list: LossList<'_>) {}
    /// A light ACK (every 64 packets, no rates or RTT) acknowledged everything
    /// before `ack`. UDT4's controllers do not see these.
    fn on_light_ack(&mut self, _now: Instant, _ack: UdtSeqNumber) {}
    /// The packet `seq` was just sent, at `now`; the sending schedule had it leave
    /// at `due`, earlier than `now` by the debt of a sender paying back lateness
    /// (`now` itself in a simulator, and after the sender had nothing to send).
    fn on_packet_sent(&mut self, _now: Instant, _due: Instant, _seq: UdtSeqNumber) {}
    /// The sender ran out of data at `now`: all it was given is sent, and its
    /// window and send buffer had room for more. Told once until its next
    /// data packet. UDT4's controllers do not see this; a model that measures the
    /// path from what is delivered must not read the application's pace as the
    /// path's.
    fn on_app_limited(&mut self, _now: Instant) {}
    /// Time between packets, µs.
    fn pkt_snd_period_us(&self) -> f64;
    /// Congestion window, packets.
    fn cwnd_pkts(&self) -> f64;
    /// Whether the controller is still in slow start.
    fn in_slow_start(&self) -> bool;
}

/// `CUDTCC`.
#[derive(Debug, Clone)]
pub struct Udt {
    config: UdtConfig,
    last_rc_time: Instant,
    slow_start: bool,
    last_ack: UdtSeqNumber,
    loss: bool,
    last_dec_seq: UdtSeqNumber,
    last_dec_period: f64,
    avg_nak_num: u32,
    nak_count: u32,
    dec_count: u32,
    dec_random: u32,
    cwnd: f64,
    pkt_snd_period: f64,
    /// The `inc` of the last rate increase, packets per SYN (for traces and tests).
    last_inc: f64,
}

impl Udt {
    /// `CUDTCC::init` at `now`, with `snd_curr_seq` the sequence number before the
    /// first one to be sent.
    pub fn new(config: UdtConfig, now: Instant, snd_curr_seq: UdtSeqNumber) -> Self {
        Udt {
            config,
            last_rc_time: now,
            slow_start: true,
            last_ack: snd_curr_seq,
            loss: false,
            last_dec_seq: snd_curr_seq.dec(),
            last_dec_period: 1.0,
            avg_nak_num: 0,
            nak_count: 0,
            dec_count: 0,
            dec_random: 1,
            cwnd: 16.0,
            pkt_snd_period: 1.0,
            last_inc: 0.0,
        }
    }

    /// The `inc` of the last increase, packets per SYN.
    pub fn last_inc(&self) -> f64 {
        self.last_inc
    }

    /// Multiplies the sending period by `f` (AR-UDT's in-SYN adjustment).
    pub(super) fn scale_period(&mut self, f: f64) {
        self.pkt_snd_period *= f;
    }

    /// The increase for spare bandwidth `b` packets/s (before any clamp), per profile.
    pub fn inc_for(&self, b: i64, mss: u32) -> f64 {
        let mss = f64::from(mss);
        let min_inc = match self.config.profile {
            // 4.11: "The minimum increase parameter is increased from 1.0 / m_iMSS to
            // 0.01 because the original was too small"
            UdtProfile::Udt4 => 0.01,
            UdtProfile::Paper => 1.0 / mss,
        };
        if b <= 0 {
            return min_inc;
        }
        // inc = 10^ceil(log10(B * MSS * 8)) * 1.5e-6 / MSS   (paper eq. 1)
        let inc = 10f64.powf((b as f64 * mss * 8.0).log10().ceil()) * 0.000_001_5 / mss;
        inc.max(min_inc)
    }

    fn fallback_period(&self, inputs: &UdtInputs) -> f64 {
        let rtt_syn = inputs.rtt_us + SYN_US;
        if self.config.fix_inverted_fallback {
            rtt_syn / self.cwnd
        } else {
            // 4.11's onLoss/onTimeout, units inverted (see the module docs).
            self.cwnd / rtt_syn
        }
    }

    fn leave_slow_start(&mut self, inputs: &UdtInputs) -> bool {
        self.slow_start = false;
        if inputs.rcv_rate_pps > 0 {
            self.pkt_snd_period = 1e6 / f64::from(inputs.rcv_rate_pps);
            return true;
        }
        self.pkt_snd_period = self.fallback_period(inputs);
        false
    }

    /// Hash of the seed and `seq` as a uniform number in [0, 1]: 4.11 calls
    /// `srand(m_iLastDecSeq); rand()`, a function of the sequence number alone; this
    /// keeps that property without a global RNG.
    fn uniform(&self, seq: UdtSeqNumber) -> f64 {
        let mut z = self.config.seed ^ u64::from(seq.value()).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / ((1u64 << 53) - 1) as f64
    }
}

impl UdtRateControl for Udt {
    fn on_ack(&mut self, now: Instant, ack: UdtSeqNumber, inputs: &UdtInputs) {
        // At most once per SYN.
        if now.saturating_duration_since(self.last_rc_time) < Duration::from_micros(SYN_US as u64) {
            return;
        }
        self.last_rc_time = now;
        let rtt_syn = inputs.rtt_us + SYN_US;
        if self.slow_start {
            self.cwnd += f64::from(self.last_ack.len_to(ack));
            self.last_ack = ack;
            if self.cwnd > inputs.max_cwnd_pkts {
                self.slow_start = false;
                self.pkt_snd_period = if inputs.rcv_rate_pps > 0 {
                    1e6 / f64::from(inputs.rcv_rate_pps)
                } else {
                    rtt_syn / self.cwnd
                };
            }
        } else {
            self.cwnd = f64::from(inputs.rcv_rate_pps) / 1e6 * rtt_syn + 16.0;
        }
        if self.slow_start {
            return;
        }
        // No increase in the SYN right after a NAK.
        if self.loss {
            self.loss = false;
            return;
        }
        let bw = i64::from(inputs.bandwidth_pps);
        let mut b = (inputs.bandwidth_pps as f64 - 1e6 / self.pkt_snd_period) as i64;
        if self.config.profile == UdtProfile::Udt4
            && self.pkt_snd_period > self.last_dec_period
            && bw / 9 < b
        {
            // Below the rate of the last decrease, spare capacity is capped at one
            // decrease step (a ninth of the link).
            b = bw / 9;
        }
        let inc = self.inc_for(b, inputs.mss);
        self.last_inc = inc;
        // 1/SND' = 1/SND + inc/SYN   (paper eq. 2)
        self.pkt_snd_period = (self.pkt_snd_period * SYN_US) / (self.pkt_snd_period * inc + SYN_US);
    }

    fn on_loss(&mut self, _now: Instant, first_lost: UdtSeqNumber, inputs: &UdtInputs) {
        if self.slow_start && self.leave_slow_start(inputs) {
            return;
        }
        self.loss = true;
        if self.config.profile == UdtProfile::Paper {
            // P = P * 1.125 on every NAK   (paper eq. 3)
            self.last_dec_period = self.pkt_snd_period;
            self.pkt_snd_period *= 1.125;
            self.last_dec_seq = inputs.snd_curr_seq;
            return;
        }
        if first_lost > self.last_dec_seq {
            // A new congestion period.
            self.last_dec_period = self.pkt_snd_period;
            self.pkt_snd_period = (self.pkt_snd_period * 1.125).ceil();
            self.avg_nak_num = (f64::from(self.avg_nak_num) * 0.875
                + f64::from(self.nak_count) * 0.125)
                .ceil() as u32;
            self.nak_count = 1;
            self.dec_count = 1;
            self.last_dec_seq = inputs.snd_curr_seq;
            // Randomised further decreases break loss synchronisation between flows.
            let r = self.uniform(self.last_dec_seq);
            self.dec_random = ((f64::from(self.avg_nak_num) * r).ceil() as u32).max(1);
        } else {
            // 4.11: `(m_iDecCount ++ < 5) && (0 == (++ m_iNAKCount % m_iDecRandom))`;
            // the second operand runs only when the first holds.
            let under = self.dec_count < 5;
            self.dec_count += 1;
            if under {
                self.nak_count += 1;
                if self.nak_count.is_multiple_of(self.dec_random) {
                    // 0.875^5 = 0.51: at most about half the rate per congestion period.
                    self.pkt_snd_period = (self.pkt_snd_period * 1.125).ceil();
                    self.last_dec_seq = inputs.snd_curr_seq;
                }
            }
        }
    }

    fn on_timeout(&mut self, _now: Instant, inputs: &UdtInputs) {
        // 4.11 only leaves slow start here; its decrease on timeout is commented out.
        if self.slow_start {
            self.leave_slow_start(inputs);
        }
    }

    fn pkt_snd_period_us(&self) -> f64 {
        self.pkt_snd_period
    }
    fn cwnd_pkts(&self) -> f64 {
        self.cwnd
    }
    fn in_slow_start(&self) -> bool {
        self.slow_start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1500;

    fn inputs(bandwidth_pps: u32) -> UdtInputs {
        UdtInputs {
            rtt_us: 100_000.0,
            rcv_rate_pps: bandwidth_pps,
            bandwidth_pps,
            mss: MSS,
            max_cwnd_pkts: 25_600.0,
            snd_curr_seq: UdtSeqNumber::new(1000),
            ack_rtt_us: 100_000.0,
            ack_recv_rate_pps: 0,
            ack_bandwidth_pps: 0,
        }
    }

    /// A controller out of slow start, sending at `rate_bps`.
    fn at_rate(profile: UdtProfile, rate_bps: f64) -> Udt {
        let mut u = Udt::new(
            UdtConfig {
                profile,
                ..UdtConfig::default()
            },
            Instant::ZERO,
            UdtSeqNumber::new(0),
        );
        u.slow_start = false;
        u.pkt_snd_period = 1e6 / (rate_bps / (f64::from(MSS) * 8.0));
        u
    }

    /// The talk's table for a 10 Gb/s link and 1500-byte packets: 10 packets per SYN
    /// below 9 Gb/s, 1 up to 9.9, 0.1 up to 9.99, down to the floor.
    #[test]
    fn inc_follows_the_table() {
        let link_pps = (10e9 / (f64::from(MSS) * 8.0)) as u32;
        for (rate_gbps, expected) in [
            (1.0, 10.0),
            (8.5, 10.0),
            (9.05, 1.0),
            (9.5, 1.0),
            (9.95, 0.1),
            (9.995, 0.01),
        ] {
            let mut u = at_rate(UdtProfile::Udt4, rate_gbps * 1e9);
            u.last_dec_period = f64::MAX; // no B/9 clamp: the rate is above its last decrease
            u.on_ack(
                Instant::from_nanos(20_000_000),
                UdtSeqNumber::new(10),
                &inputs(link_pps),
            );
            let rel = (u.last_inc() - expected).abs() / expected;
            assert!(
                rel < 1e-9,
                "at {rate_gbps} Gb/s inc = {} (want {expected})",
                u.last_inc()
            );
        }
        // The paper profile's floor is 1/MSS, not 0.01.
        let mut u = at_rate(UdtProfile::Paper, 9.9999e9);
        u.on_ack(
            Instant::from_nanos(20_000_000),
            UdtSeqNumber::new(10),
            &inputs(link_pps),
        );
        assert!(
            (u.last_inc() - 1.0 / 1500.0).abs() < 1e-12,
            "{}",
            u.last_inc()
        );
    }

    /// One increase: 1/SND' = 1/SND + inc/SYN.
    #[test]
    fn increase_adds_inc_packets_per_syn() {
        let mut u = at_rate(UdtProfile::Udt4, 1e9);
        u.last_dec_period = f64::MAX;
        let before = 1e6 / u.pkt_snd_period_us();
        u.on_ack(
            Instant::from_nanos(20_000_000),
            UdtSeqNumber::new(10),
            &inputs(833_333),
        );
        let after = 1e6 / u.pkt_snd_period_us();
        assert!((after - before - u.last_inc() * 100.0).abs() < 1e-6);
        // A second ACK within the same SYN changes nothing.
        let p = u.pkt_snd_period_us();
        u.on_ack(
            Instant::from_nanos(25_000_000),
            UdtSeqNumber::new(20),
            &inputs(833_333),
        );
        assert_eq!(u.pkt_snd_period_us(), p);
    }

    /// Below the rate of its last decrease, UDT4 caps the spare bandwidth at a ninth of
    /// the link. On a 2 Gb/s link at 0.2 Gb/s: spare 1.8 Gb/s rounds up to 1e10 (inc
    /// 10), the clamp's 0.22 Gb/s to 1e9 (inc 1).
    #[test]
    fn b9_clamp_below_the_last_decrease() {
        let link = (2e9 / 12_000.0) as u32;
        let mut clamped = at_rate(UdtProfile::Udt4, 0.2e9);
        clamped.last_dec_period = 1.0; // the period is above it: the rate is below
        clamped.on_ack(
            Instant::from_nanos(20_000_000),
            UdtSeqNumber::new(10),
            &inputs(link),
        );
        let mut free = at_rate(UdtProfile::Udt4, 0.2e9);
        free.last_dec_period = f64::MAX;
        free.on_ack(
            Instant::from_nanos(20_000_000),
            UdtSeqNumber::new(10),
            &inputs(link),
        );
        assert!(
            (clamped.last_inc() - 1.0).abs() < 1e-9,
            "{}",
            clamped.last_inc()
        );
        assert!((free.last_inc() - 10.0).abs() < 1e-9, "{}", free.last_inc());
        // The paper profile has no clamp.
        let mut paper = at_rate(UdtProfile::Paper, 0.2e9);
        paper.last_dec_period = 1.0;
        paper.on_ack(
            Instant::from_nanos(20_000_000),
            UdtSeqNumber::new(10),
            &inputs(link),
        );
        assert!((paper.last_inc() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn slow_start_grows_by_acked_packets_until_the_flow_window() {
        let mut u = Udt::new(UdtConfig::default(), Instant::ZERO, UdtSeqNumber::new(0));
        let mut inp = inputs(0);
        inp.max_cwnd_pkts = 100.0;
        u.on_ack(Instant::from_nanos(10_000_000), UdtSeqNumber::new(51), &inp);
        assert_eq!(u.cwnd_pkts(), 16.0 + 52.0);
        assert!(u.in_slow_start());
        inp.rcv_rate_pps = 50_000;
        u.on_ack(
            Instant::from_nanos(20_000_000),
            UdtSeqNumber::new(100),
            &inp,
        );
        assert!(!u.in_slow_start());
        // The period becomes 1e6 / receive rate = 20 µs, and 4.11 applies the first
        // increase in the same call (here the floor, 0.01: the bandwidth is unknown).
        let expected = 20.0 * SYN_US / (20.0 * 0.01 + SYN_US);
        assert!(
            (u.pkt_snd_period_us() - expected).abs() < 1e-9,
            "{}",
            u.pkt_snd_period_us()
        );
    }

    #[test]
    fn nak_decreases_and_blocks_the_next_increase() {
        let mut u = at_rate(UdtProfile::Udt4, 1e9);
        let p0 = u.pkt_snd_period_us();
        let inp = inputs(83_333);
        u.on_loss(Instant::ZERO, UdtSeqNumber::new(500), &inp);
        assert_eq!(u.pkt_snd_period_us(), (p0 * 1.125).ceil());
        let p1 = u.pkt_snd_period_us();
        u.on_ack(Instant::from_nanos(20_000_000), UdtSeqNumber::new(10), &inp);
        assert_eq!(u.pkt_snd_period_us(), p1, "no increase right after a NAK");
        u.on_ack(Instant::from_nanos(40_000_000), UdtSeqNumber::new(10), &inp);
        assert!(u.pkt_snd_period_us() < p1);
    }

    /// Within one congestion period at most five decreases happen (each x1.125,
    /// rounded up to a whole µs as 4.11 does).
    #[test]
    fn at_most_five_decreases_per_congestion_period() {
        let mut u = at_rate(UdtProfile::Udt4, 1e9);
        u.avg_nak_num = 1; // DecRandom = 1: every further NAK may decrease
        let inp = inputs(83_333);
        let p0 = u.pkt_snd_period_us();
        u.on_loss(Instant::ZERO, UdtSeqNumber::new(1500), &inp);
        // Further NAKs of the same period: their first loss is not after last_dec_seq.
        for _ in 0..20 {
            u.on_loss(Instant::ZERO, UdtSeqNumber::new(400), &inp);
        }
        let expected = (0..5).fold(p0, |p, _| (p * 1.125).ceil());
        assert_eq!(u.pkt_snd_period_us(), expected);
        // The next loss beyond the last decrease opens a new period: one more.
        u.on_loss(Instant::ZERO, UdtSeqNumber::new(2000), &inp);
        assert_eq!(u.pkt_snd_period_us(), (expected * 1.125).ceil());
    }

    #[test]
    fn paper_profile_decreases_on_every_nak() {
        let mut u = at_rate(UdtProfile::Paper, 1e9);
        let p0 = u.pkt_snd_period_us();
        for _ in 0..3 {
            u.on_loss(Instant::ZERO, UdtSeqNumber::new(400), &inputs(83_333));
        }
        assert!((u.pkt_snd_period_us() - p0 * 1.125f64.powi(3)).abs() < 1e-9);
    }

    #[test]
    fn inverted_fallback_and_its_fix() {
        let mut inp = inputs(0);
        inp.rtt_us = 90_000.0; // RTT + SYN = 100 ms
        let mut faithful = Udt::new(UdtConfig::default(), Instant::ZERO, UdtSeqNumber::new(0));
        faithful.on_timeout(Instant::ZERO, &inp);
        assert!((faithful.pkt_snd_period_us() - 16.0 / 100_000.0).abs() < 1e-12);
        let fixed_cfg = UdtConfig {
            fix_inverted_fallback: true,
            ..UdtConfig::default()
        };
        let mut fixed = Udt::new(fixed_cfg, Instant::ZERO, UdtSeqNumber::new(0));
        fixed.on_timeout(Instant::ZERO, &inp);
        assert_eq!(fixed.pkt_snd_period_us(), 100_000.0 / 16.0);
    }
}
