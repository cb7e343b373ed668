//! Round-trip time estimation and the retransmission timeout (RFC 6298).

use crate::time::Duration;

/// The RTO bounds and starting value.
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
}

impl RtoConfig {
    /// RFC 6298 as written: minimum 1 s, initial 1 s, maximum 60 s.
    pub const RFC6298: RtoConfig = RtoConfig {
        min_rto: Duration::from_secs(1),
        max_rto: Duration::from_secs(60),
        initial_rto: Duration::from_secs(1),
        granularity: Duration::from_millis(1),
    };
    /// Linux: `TCP_RTO_MIN` = 200 ms, `TCP_RTO_MAX` = 120 s, initial 1 s.
    pub const LINUX: RtoConfig = RtoConfig {
        min_rto: Duration::from_millis(200),
        max_rto: Duration::from_secs(120),
        initial_rto: Duration::from_secs(1),
        granularity: Duration::from_millis(1),
    };
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
        };
        e.rto_ns = e.compute_rto();
        e
    }

    /// Takes a sample `r` (Karn's rule is the caller's: never sample a retransmitted
    /// segment).
    pub fn on_sample(&mut self, r: Duration) {
        self.on_sample_nanos(nanos(r));
    }

    /// [`on_sample`](Self::on_sample) in nanoseconds (the engines' per-ACK path).
    pub fn on_sample_nanos(&mut self, r: u64) {
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
    /// RTTVAR.
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

    #[test]
    fn minimum_and_backoff() {
        let mut e = RttEstimator::new(RtoConfig::LINUX);
        e.on_sample(Duration::from_millis(10));
        assert_eq!(e.rto(), Duration::from_millis(200));
        e.on_timeout();
        e.on_timeout();
        assert_eq!(e.rto(), Duration::from_millis(800));
        e.on_sample(Duration::from_millis(10));
        assert_eq!(e.rto(), Duration::from_millis(200));
    }
}
