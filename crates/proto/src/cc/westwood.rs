//! TCP Westwood+ (Grieco, Mascolo, "Performance evaluation and comparison of
//! Westwood+, New Reno, and Vegas TCP congestion control", ACM SIGCOMM CCR 34(2),
//! 2004; Mascolo et al., "TCP Westwood: Bandwidth estimation for enhanced transport
//! over wireless links", MobiCom 2001), as Linux's `tcp_westwood` runs it.
//!
//! The sender estimates the bandwidth its ACKs report, once per RTT (Westwood+;
//! the original estimated per ACK and overestimated under ACK compression), with
//! two passes of a low-pass filter `b <- 7/8 b + 1/8 sample`. After a congestion
//! episode it sets
//!
//! ```text
//! ssthresh = max(BWE · RTT_min / MSS, 2),  cwnd = ssthresh (after fast recovery)
//! ```
//!
//! instead of halving: the window the path was delivering with an empty queue.
//! A random loss on an unqueued path so costs little; a congestion loss drains
//! the queue. Growth is Reno's.
//!
//! Linux's module, kept here: the estimation interval is the latest RTT sample,
//! at least 50 ms; fast recovery itself uses Reno's half window and the
//! Westwood window is set when it completes (`CA_EVENT_COMPLETE_CWR`); a
//! timeout sets ssthresh from the estimate and restarts `RTT_min` at the next
//! sample. The estimate counts delivered bytes from the engine's delivery-rate
//! samples (cumulative and SACKed), where Linux counts `snd_una`'s advance and an
//! MSS per duplicate ACK.

use super::segments::SegmentWindow;
use super::{AckSample, CongestionControl, RateSample};
use crate::time::{Duration, Instant};

/// `TCP_WESTWOOD_RTT_MIN`: the shortest estimation interval.
const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// TCP Westwood+.
#[derive(Debug, Clone)]
pub struct Westwood {
    win: SegmentWindow,
    /// Bandwidth estimate and its first filter pass, bytes per second.
    bw_est: f64,
    bw_ns_est: f64,
    /// The current estimation interval: its start and the bytes delivered then.
    interval_start: Option<(Instant, u64)>,
    rtt: Option<Duration>,
    rtt_min: Option<Duration>,
    reset_rtt_min: bool,
}

impl Westwood {
    /// A controller with `cwnd = initial_window`.
    pub fn new(smss: u64, initial_window: u64) -> Self {
        Westwood {
            win: SegmentWindow::new(smss, initial_window),
            bw_est: 0.0,
            bw_ns_est: 0.0,
            interval_start: None,
            rtt: None,
            rtt_min: None,
            reset_rtt_min: false,
        }
    }

    /// The bandwidth estimate, bytes per second.
    pub fn bandwidth(&self) -> f64 {
        self.bw_est
    }

    /// `tcp_westwood_bw_rttmin`: the estimate times RTT_min, segments (≥ 2).
    fn bw_rttmin(&self) -> u64 {
        let rtt_min = self.rtt_min.map_or(0.0, |r| r.as_secs_f64());
        ((self.bw_est * rtt_min / self.win.smss() as f64) as u64).max(2)
    }

    /// `westwood_update_window` and `westwood_filter`.
    fn update_window(&mut self, now: Instant, delivered: u64) {
        let Some((start, at_start)) = self.interval_start else {
            self.interval_start = Some((now, delivered));
            return;
        };
        let Some(rtt) = self.rtt else {
            return;
        };
        let delta = now.saturating_duration_since(start);
        if delta > rtt.max(MIN_INTERVAL) {
            let sample = (delivered - at_start) as f64 / delta.as_secs_f64();
            if self.bw_est == 0.0 && self.bw_ns_est == 0.0 {
                self.bw_ns_est = sample;
                self.bw_est = sample;
            } else {
                self.bw_ns_est = (7.0 * self.bw_ns_est + sample) / 8.0;
                self.bw_est = (7.0 * self.bw_est + self.bw_ns_est) / 8.0;
            }
            self.interval_start = Some((now, delivered));
        }
    }
}

impl CongestionControl for Westwood {
    fn on_ack(&mut self, _now: Instant, ack: &AckSample) {
        let acked = self.win.acked(ack);
        self.win.reno_cong_avoid(acked);
    }

    fn on_loss(&mut self, _now: Instant, _in_flight: u64) {
        self.win.enter_recovery(self.win.cwnd / 2);
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        let w = self.bw_rttmin();
        self.win.cwnd = w;
        self.win.ssthresh = w;
    }

    fn on_timeout(&mut self, _now: Instant, _in_flight: u64) {
        self.win.enter_loss(self.bw_rttmin());
        self.reset_rtt_min = true;
    }

    fn on_timeout_in_episode(&mut self, _now: Instant, _in_flight: u64) {
        self.win.enter_loss(self.win.ssthresh);
    }

    fn window(&self) -> u64 {
        self.win.window_bytes()
    }

    fn ssthresh(&self) -> u64 {
        self.win.ssthresh_bytes()
    }

    fn wants_rate_samples(&self) -> bool {
        true
    }

    fn on_rate_sample(&mut self, now: Instant, rs: &RateSample, delivered: u64, _in_flight: u64) {
        if let Some(r) = rs.rtt {
            self.rtt = Some(r);
            self.rtt_min = match self.rtt_min {
                Some(m) if !self.reset_rtt_min => Some(m.min(r)),
                _ => Some(r),
            };
            self.reset_rtt_min = false;
        }
        self.update_window(now, delivered);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_recovery_the_window_is_the_estimate_times_rtt_min() {
        let mut c = Westwood::new(1000, 100_000);
        c.rtt = Some(Duration::from_millis(100));
        c.rtt_min = Some(Duration::from_millis(100));
        // Deliver 10 MB/s for 2 s, sampled every 10 ms.
        for i in 0..=200u64 {
            c.update_window(Instant::from_nanos(i * 10_000_000), i * 100_000);
        }
        assert!((c.bandwidth() / 1e7 - 1.0).abs() < 1e-6);
        c.on_loss(Instant::ZERO, 0);
        assert_eq!(c.window(), 50 * 1000, "Reno's half during recovery");
        c.on_recovery_end(Instant::ZERO);
        // 10 MB/s x 100 ms / 1000 B = 1000 segments.
        assert_eq!(c.window(), 1000 * 1000);
        assert_eq!(c.ssthresh(), 1000 * 1000);
    }
}
