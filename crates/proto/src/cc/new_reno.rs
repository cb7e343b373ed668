//! NewReno congestion control (RFC 5681 §3.1, RFC 6582), counting bytes.
//!
//! The engine does loss recovery (RFC 6675 with SACK, RFC 6582 without); this file
//! only moves `cwnd` and `ssthresh`. The initial slow start may run a HyStart
//! (HyStart++ of RFC 9406, or Linux's; off by default for NewReno).

use super::hystart::{HyStart, HyStartMode, SlowStartStep};
use super::{AckSample, CongestionControl};

use crate::time::Instant;

/// How cwnd grows in congestion avoidance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Avoidance {
    /// Count acknowledged bytes and add SMSS per cwnd of them (RFC 5681's
    /// recommendation, RFC 3465 with L = 1; Linux does the same): one SMSS per RTT
    /// whether or not the receiver delays its ACKs.
    #[default]
    ByteCounting,
    /// `cwnd += SMSS*SMSS/cwnd` per ACK (RFC 5681 eq. 3): with delayed ACKs, half an
    /// SMSS per RTT, the model behind Mathis's `sqrt(3/(4p))`.
    PerAck,
}

/// How cwnd grows in slow start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SlowStart {
    /// `cwnd += min(N, SMSS)` per ACK of new data (RFC 5681 eq. 2).
    #[default]
    ByteCounting,
    /// `cwnd += SMSS` per ACK of new data, however little it acknowledges (RFC 2581,
    /// and Linux before appropriate byte counting: `snd_cwnd++` per ACK).
    PerAck,
}

/// NewReno's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NewRenoConfig {
    /// Congestion-avoidance increase rule.
    pub avoidance: Avoidance,
    /// Slow-start increase rule.
    pub slow_start: SlowStart,
    /// The HyStart of the initial slow start, if any (with its own increase rule).
    pub hystart: Option<HyStartMode>,
}

/// RFC 5681 slow start and congestion avoidance.
#[derive(Debug, Clone)]
pub struct NewReno {
    config: NewRenoConfig,
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Byte counting: bytes acknowledged since `cwnd` last grew. Per ACK: the
    /// fractional remainder of `SMSS*SMSS/cwnd`, scaled by cwnd.
    bytes_acked: u64,
    /// HyStart, while it governs the initial slow start.
    hystart: Option<HyStart>,
}

impl NewReno {
    /// A controller with `cwnd = initial_window` and an infinite `ssthresh`, made at
    /// `now` (where a HyStart's first round begins).
    pub fn new(config: NewRenoConfig, smss: u64, initial_window: u64, now: Instant) -> Self {
        //= https://www.rfc-editor.org/rfc/rfc5681#section-3.1
        //# The initial value of ssthresh SHOULD be set arbitrarily high (e.g.,
        //# to the size of the largest possible advertised window)
        NewReno {
            config,
            smss,
            cwnd: initial_window,
            ssthresh: u64::MAX,
            bytes_acked: 0,
            hystart: config.hystart.map(|m| HyStart::new(m, now)),
        }
    }

    fn reduce(&mut self, in_flight: u64) {
        //# ssthresh = max (FlightSize / 2, 2*SMSS)            (4)
        self.ssthresh = (in_flight / 2).max(2 * self.smss);
        self.bytes_acked = 0;
        self.hystart = None;
    }
}

impl CongestionControl for NewReno {
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        if let (true, Some(h)) = (self.cwnd < self.ssthresh, self.hystart.as_mut()) {
            match h.on_ack(now, ack, self.smss, self.cwnd) {
                SlowStartStep::Grow(bytes) => self.cwnd += bytes,
                SlowStartStep::Avoid => {
                    self.ssthresh = self.cwnd;
                    self.hystart = None;
                }
            }
        } else if self.cwnd < self.ssthresh {
            //# During slow start, a TCP increments cwnd by at most SMSS bytes for
            //# each ACK received that cumulatively acknowledges new data.
            //# cwnd += min (N, SMSS)                      (2)
            self.cwnd += match self.config.slow_start {
                SlowStart::ByteCounting => ack.bytes_acked.min(self.smss),
                SlowStart::PerAck if ack.bytes_acked > 0 => self.smss,
                SlowStart::PerAck => 0,
            };
        } else {
            match self.config.avoidance {
                Avoidance::ByteCounting => {
                    //# Another common formula that a TCP MAY use to update cwnd during
                    //# congestion avoidance is given in equation (3) ... the RECOMMENDED
                    //# way to increase cwnd during congestion avoidance is to count the
                    //# number of bytes that have been acknowledged by ACKs for new data.
                    self.bytes_acked += ack.bytes_acked;
                    if self.bytes_acked >= self.cwnd {
                        self.bytes_acked -= self.cwnd;
                        self.cwnd += self.smss;
                    }
                }
                Avoidance::PerAck => {
                    //# cwnd += SMSS*SMSS/cwnd                     (3)
                    // Kept exact: the remainder carries over, so that a large cwnd
                    // (where the quotient is below one byte) still grows.
                    let num = self.smss * self.smss + self.bytes_acked;
                    self.bytes_acked = num % self.cwnd;
                    self.cwnd += num / self.cwnd;
                }
            }
        }
    }

    fn on_loss(&mut self, _now: Instant, in_flight: u64) {
        self.reduce(in_flight);
        // With RFC 6675's pipe-based recovery the window is not inflated: cwnd is
        // set to ssthresh at once and the engine sends while pipe < cwnd.
        self.cwnd = self.ssthresh;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        //= https://www.rfc-editor.org/rfc/rfc6582#section-3.2
        //# Set cwnd to either (1) min (ssthresh, max(FlightSize, SMSS) + SMSS)
        //# or (2) ssthresh.
        // Option (2): cwnd is already ssthresh.
        self.cwnd = self.ssthresh;
    }

    fn on_timeout(&mut self, _now: Instant, in_flight: u64) {
        self.reduce(in_flight);
        //# Furthermore, upon a timeout (as specified in [RFC2988]) cwnd MUST be set
        //# to no more than the loss window, LW, which equals 1 full-sized segment
        self.cwnd = self.smss;
    }

    fn on_timeout_in_episode(&mut self, _now: Instant, _in_flight: u64) {
        //= https://www.rfc-editor.org/rfc/rfc5681#section-3.1
        //# when a TCP sender detects segment loss using the retransmission timer
        //# and the given segment has already been retransmitted by way of the
        //# retransmission timer at least once, the value of ssthresh is held
        //# constant.
        self.cwnd = self.smss;
        self.bytes_acked = 0;
    }

    fn window(&self) -> u64 {
        self.cwnd
    }
    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMSS: u64 = 1000;

    fn ack(bytes: u64) -> AckSample {
        AckSample::new(bytes, 0, None)
    }

    #[test]
    fn slow_start_adds_one_smss_per_ack() {
        let mut c = NewReno::new(NewRenoConfig::default(), SMSS, 10 * SMSS, Instant::ZERO);
        for _ in 0..10 {
            c.on_ack(Instant::ZERO, &ack(SMSS));
        }
        assert_eq!(c.window(), 20 * SMSS);
        // A delayed ACK covering two segments still adds only SMSS (eq. 2).
        c.on_ack(Instant::ZERO, &ack(2 * SMSS));
        assert_eq!(c.window(), 21 * SMSS);
    }

    #[test]
    fn avoidance_adds_one_smss_per_window() {
        let mut c = NewReno::new(NewRenoConfig::default(), SMSS, 10 * SMSS, Instant::ZERO);
        c.on_loss(Instant::ZERO, 20 * SMSS);
        assert_eq!(c.window(), 10 * SMSS);
        for _ in 0..9 {
            c.on_ack(Instant::ZERO, &ack(SMSS));
        }
        assert_eq!(c.window(), 10 * SMSS);
        c.on_ack(Instant::ZERO, &ack(SMSS));
        assert_eq!(c.window(), 11 * SMSS);
    }

    #[test]
    fn slow_start_per_ack_adds_a_segment_however_little_is_acknowledged() {
        let per_ack = NewRenoConfig {
            slow_start: SlowStart::PerAck,
            ..Default::default()
        };
        let mut c = NewReno::new(per_ack, SMSS, 3 * SMSS, Instant::ZERO);
        c.on_ack(Instant::ZERO, &ack(4));
        assert_eq!(c.window(), 4 * SMSS);
        let mut c = NewReno::new(NewRenoConfig::default(), SMSS, 3 * SMSS, Instant::ZERO);
        c.on_ack(Instant::ZERO, &ack(4));
        assert_eq!(c.window(), 3 * SMSS + 4, "byte counting: min(N, SMSS)");
    }

    #[test]
    fn per_ack_increase_is_rfc5681_equation_3() {
        let cfg = NewRenoConfig {
            avoidance: Avoidance::PerAck,
            ..Default::default()
        };
        // cwnd = ssthresh = 10 SMSS after the loss. Five delayed ACKs (two segments
        // each) cover one window: SMSS^2/cwnd each, about SMSS/2 per RTT in all
        // (100 + 99 + 98 + 97 + 96 bytes, as cwnd grows under them).
        let mut c = NewReno::new(cfg, SMSS, 20 * SMSS, Instant::ZERO);
        c.on_loss(Instant::ZERO, 20 * SMSS);
        for _ in 0..5 {
            c.on_ack(Instant::ZERO, &ack(2 * SMSS));
        }
        assert_eq!(c.window(), 10 * SMSS + 490);
        // At a cwnd of 2000 SMSS each ACK adds half a byte: the remainder carries, so
        // 4000 ACKs add 2000 bytes (less the last one's rounding).
        let mut c = NewReno::new(cfg, SMSS, 4000 * SMSS, Instant::ZERO);
        c.on_loss(Instant::ZERO, 4000 * SMSS);
        for _ in 0..4000 {
            c.on_ack(Instant::ZERO, &ack(SMSS));
        }
        assert!(
            (1998..=2000).contains(&(c.window() - 2000 * SMSS)),
            "{}",
            c.window()
        );
    }

    #[test]
    fn timeout_collapses_to_one_segment() {
        let mut c = NewReno::new(NewRenoConfig::default(), SMSS, 10 * SMSS, Instant::ZERO);
        c.on_timeout(Instant::ZERO, 3 * SMSS);
        assert_eq!(c.window(), SMSS);
        assert_eq!(c.ssthresh(), 2 * SMSS);
    }

    #[test]
    fn a_repeated_timeout_holds_ssthresh() {
        let mut c = NewReno::new(NewRenoConfig::default(), SMSS, 10 * SMSS, Instant::ZERO);
        c.on_timeout(Instant::ZERO, 40 * SMSS);
        assert_eq!(c.ssthresh(), 20 * SMSS);
        c.on_timeout_in_episode(Instant::ZERO, SMSS);
        assert_eq!((c.window(), c.ssthresh()), (SMSS, 20 * SMSS));
    }
}
