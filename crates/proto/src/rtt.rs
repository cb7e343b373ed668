//! Round-trip time estimation and the retransmission timeout, in two profiles: RFC
//! 6298 as written, and Linux's (`tcp_rtt_estimator` and `__tcp_set_rto` in
//! `net/ipv4/tcp_input.c` and `include/net/tcp.h`).
//!
//! They differ where the minimum applies. RFC 6298 takes SRTT + 4·RTTVAR and rounds
//! it up to the minimum; Linux adds the minimum's worth of variance to SRTT, so its
//! RTO is at least SRTT + 200 ms. On a 200 ms path with a steady RTT the RFC's RTO
//! is about 200 ms, and a SACK repair that takes a round trip and a half times out;
//! Linux's is about 400 ms.

use crate::time::Duration;

/// How the RTO is worked out from the RTT samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtoFormula {
    /// RFC 6298 §2: RTO = max(SRTT + max(G, 4·RTTVAR), min).
    Rfc6298,
    /// Linux: RTO = SRTT + RTTVAR, where RTTVAR is at least the minimum and follows
    /// the largest mean deviation seen in each flight, decaying by a quarter a
    /// flight; a sample below SRTT moves the deviation 8× less.
    Linux,
}

/// The RTO bounds, starting value and formula.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RtoConfig {
    /// Lower bound on the RTO: 1 s per RFC 6298 (2.4), 200 ms in Linux.
    pub min_rto: Duration,
    /// Upper bound on the RTO after backoff.
    pub max_rto: Duration,
    /// RTO before the first sample.
    pub initial_rto: Duration,
    /// Clock granularity G.
    pub granularity: Duration,
    /// How samples make the RTO.
    pub formula: RtoFormula,
}

impl RtoConfig {
    /// RFC 6298 as written: minimum 1 s, initial 1 s, maximum 60 s.
    pub const RFC6298: RtoConfig = RtoConfig {
        min_rto: Duration::from_secs(1),
        max_rto: Duration::from_secs(60),
        initial_rto: Duration::from_secs(1),
        granularity: Duration::from_millis(1),
        formula: RtoFormula::Rfc6298,
    };
    /// Linux: `TCP_RTO_MIN` = 200 ms, `TCP_RTO_MAX` = 120 s, initial 1 s, and its
    /// formula, in jiffies of 1 ms (`HZ` = 1000).
    pub const LINUX: RtoConfig = RtoConfig {
        min_rto: Duration::from_millis(200),
        max_rto: Duration::from_secs(120),
        initial_rto: Duration::from_secs(1),
        granularity: Duration::from_millis(1),
        formula: RtoFormula::Linux,
    };

    /// The preset that goes with `formula`: RFC 6298's bounds with its formula,
    /// Linux's with Linux's.
    pub const fn preset(formula: RtoFormula) -> RtoConfig {
        match formula {
            RtoFormula::Rfc6298 => RtoConfig::RFC6298,
            RtoFormula::Linux => RtoConfig::LINUX,
        }
    }
}

impl Default for RtoConfig {
    fn default() -> Self {
        RtoConfig::RFC6298
    }
}

/// SRTT, RTTVAR and the RTO with exponential backoff.
///
/// Kept in integer nanoseconds: the estimator runs on every ACK, and `Duration`
/// arithmetic (seconds plus nanoseconds, normalised on every step) costs more.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    /// The configuration's bounds in nanoseconds: `[min, max, initial, granularity]`
    /// (converted once; every ACK recomputes the RTO).
    bounds_ns: [u64; 4],
    srtt_ns: Option<u64>,
    rttvar_ns: u64,
    latest_ns: u64,
    min_rtt_ns: u64,
    backoff_shift: u32,
    formula: RtoFormula,
    /// Linux's state: the mean deviation ×4 (`mdev_us`), its largest in the current
    /// flight (`mdev_max_us`), and where that flight ends (`rtt_seq`: the send
    /// sequence, as an offset, when it began). `rttvar_ns` is Linux's `rttvar_us`.
    mdev_ns: u64,
    mdev_max_ns: u64,
    flight_end: u64,
    /// The RTO in nanoseconds, recomputed on every sample and backoff (read on
    /// every ACK).
    rto_ns: u64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl RttEstimator {
    /// An estimator with no samples yet.
    pub fn new(config: RtoConfig) -> Self {
        let mut e = RttEstimator {
            bounds_ns: [
                nanos(config.min_rto),
                nanos(config.max_rto),
                nanos(config.initial_rto),
                nanos(config.granularity),
            ],
            srtt_ns: None,
            rttvar_ns: 0,
            latest_ns: 0,
            min_rtt_ns: u64::MAX,
            backoff_shift: 0,
            rto_ns: 0,
            formula: config.formula,
            mdev_ns: 0,
            mdev_max_ns: 0,
            flight_end: 0,
        };
        e.rto_ns = e.compute_rto();
        e
    }

    /// Takes a sample `r` (Karn's rule is the caller's: never sample a retransmitted
    /// segment).
    pub fn on_sample(&mut self, r: Duration) {
        self.on_sample_nanos(nanos(r));
    }

    /// A sample `r` (ns) from an ACK that moved SND.UNA to `una`, with SND.NXT at
    /// `nxt` (both as offsets): Linux's formula needs to know where each flight ends;
    /// RFC 6298's ignores them.
    pub fn on_ack_sample_nanos(&mut self, r: u64, una: u64, nxt: u64) {
        match self.formula {
            RtoFormula::Rfc6298 => self.on_sample_rfc(r),
            RtoFormula::Linux => self.on_sample_linux(r, una, nxt),
        }
    }

    /// Linux's `tcp_rtt_estimator`, in nanoseconds where it keeps microseconds.
    fn on_sample_linux(&mut self, r: u64, una: u64, nxt: u64) {
        self.latest_ns = r;
        self.min_rtt_ns = self.min_rtt_ns.min(r);
        let min = self.bounds_ns[0];
        match self.srtt_ns {
            None => {
                // "no previous measure": SRTT = R and mdev = 2R, so the RTO is 3R
                // unless the minimum is more.
                self.srtt_ns = Some(r);
                self.mdev_ns = 2 * r;
                self.rttvar_ns = self.mdev_ns.max(min);
                self.mdev_max_ns = self.rttvar_ns;
                self.flight_end = nxt;
            }
            Some(srtt) => {
                // "rtt = 7/8 rtt + 1/8 new"
                self.srtt_ns = Some(srtt - srtt / 8 + r / 8);
                let err = r.abs_diff(srtt) as i64;
                let mut m = err - (self.mdev_ns / 4) as i64;
                if r < srtt && m > 0 {
                    // A sample below SRTT moves mdev with gain 1/32, not 1/4 ("similar
                    // to one of Eifel findings": the RTO neither grows on a faster
                    // sample nor falls too fast).
                    m >>= 3;
                }
                // "mdev = 3/4 mdev + 1/4 new"
                self.mdev_ns = (self.mdev_ns as i64 + m).max(0) as u64;
                if self.mdev_ns > self.mdev_max_ns {
                    self.mdev_max_ns = self.mdev_ns;
                    self.rttvar_ns = self.rttvar_ns.max(self.mdev_max_ns);
                }
                if una > self.flight_end {
                    // A flight has been acknowledged: RTTVAR decays a quarter of the
                    // way to its largest mdev, and the next flight starts at the
                    // minimum.
                    if self.mdev_max_ns < self.rttvar_ns {
                        self.rttvar_ns -= (self.rttvar_ns - self.mdev_max_ns) / 4;
                    }
                    self.flight_end = nxt;
                    self.mdev_max_ns = min;
                }
            }
        }
        self.backoff_shift = 0;
        self.rto_ns = self.compute_rto();
    }

    /// [`on_sample`](Self::on_sample) in nanoseconds. With no sequence to place it,
    /// Linux's formula takes each such sample as the end of a flight.
    pub fn on_sample_nanos(&mut self, r: u64) {
        match self.formula {
            RtoFormula::Rfc6298 => self.on_sample_rfc(r),
            RtoFormula::Linux => {
                let end = self.flight_end;
                self.on_sample_linux(r, end + 1, end + 1);
            }
        }
    }

    /// RFC 6298 §2.
    fn on_sample_rfc(&mut self, r: u64) {
        self.latest_ns = r;
        self.min_rtt_ns = self.min_rtt_ns.min(r);
        match self.srtt_ns {
            //= https://www.rfc-editor.org/rfc/rfc6298#section-2
            //# (2.2) When the first RTT measurement R is made, the host MUST set
            //# SRTT <- R, RTTVAR <- R/2
            None => {
                self.srtt_ns = Some(r);
                self.rttvar_ns = r / 2;
            }
            //# (2.3) When a subsequent RTT measurement R' is made, a host MUST set
            //# RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'|
            //# SRTT <- (1 - alpha) * SRTT + alpha * R'
            Some(srtt) => {
                let err = srtt.abs_diff(r);
                self.rttvar_ns = self.rttvar_ns - self.rttvar_ns / 4 + err / 4;
                self.srtt_ns = Some(srtt - srtt / 8 + r / 8);
            }
        }
        // A new sample after a retransmission timeout ends the backoff (RFC 6298 5.7
        // leaves this to the implementation; Linux does the same).
        self.backoff_shift = 0;
        self.rto_ns = self.compute_rto();
    }

    /// The smoothed RTT, if any sample has been taken.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt_ns.map(Duration::from_nanos)
    }
    /// The most recent sample.
    pub fn latest(&self) -> Duration {
        Duration::from_nanos(self.latest_ns)
    }
    /// The smallest sample seen (`Duration::MAX` before the first).
    pub fn min_rtt(&self) -> Duration {
        if self.min_rtt_ns == u64::MAX {
            Duration::MAX
        } else {
            Duration::from_nanos(self.min_rtt_ns)
        }
    }
    /// RTTVAR (with Linux's formula, its `rttvar_us`: four mean deviations, and at
    /// least the minimum RTO).
    pub fn rttvar(&self) -> Duration {
        Duration::from_nanos(self.rttvar_ns)
    }

    /// The current RTO, with backoff applied and the bounds enforced.
    pub fn rto(&self) -> Duration {
        Duration::from_nanos(self.rto_ns)
    }

    /// The current RTO in nanoseconds.
    pub fn rto_nanos(&self) -> u64 {
        self.rto_ns
    }

    fn compute_rto(&self) -> u64 {
        let [min, max, initial, granularity] = self.bounds_ns;
        if let (RtoFormula::Linux, Some(srtt)) = (self.formula, self.srtt_ns) {
            // `__tcp_set_rto`: SRTT + RTTVAR, in whole jiffies (rounded up), at most
            // `TCP_RTO_MAX` after the backoff.
            let rto = (srtt + self.rttvar_ns).div_ceil(granularity.max(1)) * granularity.max(1);
            let backed_off = rto.saturating_mul(1 << self.backoff_shift.min(16));
            return backed_off.min(max);
        }
        let base = match self.srtt_ns {
            //# (2.3) RTO <- SRTT + max (G, K*RTTVAR), where K = 4.
            Some(srtt) => srtt.saturating_add(granularity.max(self.rttvar_ns * 4)),
            None => initial,
        };
        //# (2.4) Whenever RTO is computed, if it is less than 1 second, then the
        //# RTO SHOULD be rounded up to 1 second.
        // (The minimum is configurable: `RtoConfig::LINUX` uses 200 ms.)
        let rto = base.max(min);
        let backed_off = rto.saturating_mul(1 << self.backoff_shift.min(16));
        backed_off.min(max)
    }

    /// Doubles the RTO after a timeout.
    //# (5.5) The host MUST set RTO <- RTO * 2 ("back off the timer").
    pub fn on_timeout(&mut self) {
        self.backoff_shift = (self.backoff_shift + 1).min(16);
        self.rto_ns = self.compute_rto();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_first_and_subsequent_samples() {
        let mut e = RttEstimator::new(RtoConfig {
            min_rto: Duration::ZERO,
            ..RtoConfig::RFC6298
        });
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(Duration::from_millis(100));
        assert_eq!(e.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(e.rto(), Duration::from_millis(300)); // 100 + 4 * 50
        e.on_sample(Duration::from_millis(200));
        // rttvar = 3/4*50 + 1/4*100 = 62.5; srtt = 87.5 + 25 = 112.5
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(112_500 + 250_000));
    }

    fn ms(n: u64) -> u64 {
        n * 1_000_000
    }

    /// Linux's first sample: mdev = 2R, RTTVAR at least the 200 ms minimum, RTO =
    /// SRTT + RTTVAR (3R on a long path, R + 200 ms on a short one).
    #[test]
    fn linux_first_sample() {
        for (r, rto) in [(100, 300), (10, 210), (300, 900)] {
            let mut e = RttEstimator::new(RtoConfig::LINUX);
            assert_eq!(e.rto(), Duration::from_secs(1), "before any sample");
            e.on_ack_sample_nanos(ms(r), 0, 10);
            assert_eq!(e.rto(), Duration::from_millis(rto), "R = {r} ms");
        }
    }

    /// A steady 200 ms RTT, one sample a flight: Linux's RTO settles at SRTT + the
    /// 200 ms minimum, 400 ms; RFC 6298's with the same minimum at SRTT + G.
    #[test]
    fn linux_keeps_the_minimum_above_srtt_where_the_rfc_rounds_up_to_it() {
        let mut linux = RttEstimator::new(RtoConfig::LINUX);
        let mut rfc = RttEstimator::new(RtoConfig {
            min_rto: Duration::from_millis(200),
            ..RtoConfig::RFC6298
        });
        for flight in 0..60 {
            // Each sample acknowledges the previous flight and a new one is out.
            linux.on_ack_sample_nanos(ms(200), flight * 100, flight * 100 + 100);
            rfc.on_ack_sample_nanos(ms(200), flight * 100, flight * 100 + 100);
        }
        let l = linux.rto().as_nanos() as f64 / 1e6;
        assert!((399.0..=401.0).contains(&l), "Linux: {l} ms");
        assert_eq!(rfc.rto(), Duration::from_millis(201));
    }

    /// Within one flight RTTVAR only grows; it decays a quarter of the way to the
    /// flight's largest deviation when SND.UNA passes the flight's end.
    #[test]
    fn linux_rttvar_decays_once_a_flight() {
        let mut e = RttEstimator::new(RtoConfig::LINUX);
        e.on_ack_sample_nanos(ms(200), 0, 100); // mdev 400, RTTVAR 400
        for una in [10, 50, 100] {
            e.on_ack_sample_nanos(ms(200), una, 100); // still the first flight
            assert_eq!(e.rttvar(), Duration::from_millis(400), "una {una}");
        }
        // mdev has fallen 400 → 300 → 225 → 168.75 → 126.56; the flight's largest
        // was 400 (the first sample's), so nothing decays yet.
        e.on_ack_sample_nanos(ms(200), 101, 200);
        assert_eq!(e.rttvar(), Duration::from_millis(400));
        // The next flight's largest is the 200 ms minimum: 400 - (400 - 200) / 4.
        e.on_ack_sample_nanos(ms(200), 201, 300);
        assert_eq!(e.rttvar(), Duration::from_millis(350));
    }

    /// A sample below SRTT moves the deviation with gain 1/32 (Linux's Eifel-like
    /// rule), not 1/4.
    #[test]
    fn linux_a_faster_sample_barely_moves_the_deviation() {
        let mut e = RttEstimator::new(RtoConfig::LINUX);
        e.on_ack_sample_nanos(ms(100), 0, 100); // SRTT 100, mdev 200
        e.on_ack_sample_nanos(ms(20), 10, 100);
        // |err| 80 less mdev/4 = 30, over 8: mdev 203.75; SRTT 87.5 + 2.5 = 90.
        assert_eq!(e.srtt(), Some(Duration::from_millis(90)));
        assert_eq!(e.rttvar(), Duration::from_micros(203_750));
        assert_eq!(
            e.rto(),
            Duration::from_millis(294),
            "293.75 in whole jiffies"
        );
        e.on_timeout();
        assert_eq!(e.rto(), Duration::from_millis(588));
    }

    #[test]
    fn minimum_and_backoff() {
        let mut e = RttEstimator::new(RtoConfig {
            min_rto: Duration::from_millis(200),
            ..RtoConfig::RFC6298
        });
        e.on_sample(Duration::from_millis(10));
        assert_eq!(e.rto(), Duration::from_millis(200));
        e.on_timeout();
        e.on_timeout();
        assert_eq!(e.rto(), Duration::from_millis(800));
        e.on_sample(Duration::from_millis(10));
        assert_eq!(e.rto(), Duration::from_millis(200));
    }
}
