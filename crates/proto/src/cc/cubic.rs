//! CUBIC congestion control (RFC 9438).
//!
//! Variable names follow the RFC: `w_max`, `k`, `t_epoch`, `cwnd_epoch`, `w_est`,
//! `c`, `beta_cubic`, `alpha_cubic`. Windows are kept in segments as `f64` inside
//! (the RFC's unit) and reported in bytes. The initial slow start runs a HyStart
//! ([`HyStart`]): by default Linux's delay test, as Linux's CUBIC runs it, or
//! HyStart++ (RFC 9406, which RFC 9438 §4.10 allows), or none; other slow starts
//! are RFC 5681's.

use super::hystart::{HyStart, HyStartMode, SlowStartStep};
use super::{AckSample, CongestionControl};
use crate::time::{Duration, Instant};

/// CUBIC's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubicConfig {
    /// C, the cubic scaling constant (0.4).
    pub c: f64,
    /// beta_cubic, the multiplicative decrease factor (0.7).
    pub beta_cubic: f64,
    /// Fast convergence (§4.7).
    pub fast_convergence: bool,
    /// The Reno-friendly region (§4.3).
    pub reno_friendly: bool,
    /// The HyStart of the initial slow start, if any.
    pub hystart: Option<HyStartMode>,
}

impl Default for CubicConfig {
    fn default() -> Self {
        //= https://www.rfc-editor.org/rfc/rfc9438#section-5
        //# C SHOULD be set to 0.4 ... beta_cubic SHOULD be set to 0.7
        CubicConfig {
            c: 0.4,
            beta_cubic: 0.7,
            fast_convergence: true,
            reno_friendly: true,
            hystart: Some(HyStartMode::Linux),
        }
    }
}

/// CUBIC's state.
#[derive(Debug, Clone)]
pub struct Cubic {
    config: CubicConfig,
    smss: f64,
    /// Congestion window, segments.
    cwnd: f64,
    /// Slow-start threshold, segments.
    ssthresh: f64,
    /// Window just before the last reduction, segments.
    w_max: f64,
    /// Time to grow back to `w_max`, seconds.
    k: f64,
    /// Start of the current congestion-avoidance epoch.
    t_epoch: Option<Instant>,
    /// cwnd at the start of the epoch.
    cwnd_epoch: f64,
    /// Reno-friendly estimate, segments.
    w_est: f64,
    /// cwnd when ssthresh was last set (`cwnd_prior`).
    cwnd_prior: f64,
    /// HyStart, while it governs the initial slow start.
    hystart: Option<HyStart>,
}

impl Cubic {
    /// A controller with `cwnd = initial_window` bytes.
    pub fn new(config: CubicConfig, smss: u64, initial_window: u64, now: Instant) -> Self {
        let hystart = config.hystart.map(|m| HyStart::new(m, now));
        let smss = smss as f64;
        Cubic {
            hystart,
            config,
            smss,
            cwnd: initial_window as f64 / smss,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            k: 0.0,
            t_epoch: None,
            cwnd_epoch: 0.0,
            w_est: 0.0,
            cwnd_prior: 0.0,
        }
    }

    /// `W_cubic(t) = C*(t-K)^3 + W_max` (Eq. 1), segments, `t` in seconds since the
    /// epoch.
    pub fn w_cubic(&self, t: f64) -> f64 {
        self.config.c * (t - self.k).powi(3) + self.w_max
    }

    /// K, seconds, and W_max, segments, of the current epoch (for traces and tests).
    pub fn epoch(&self) -> (f64, f64) {
        (self.k, self.w_max)
    }

    fn alpha_cubic(&self) -> f64 {
        let b = self.config.beta_cubic;
        //# alpha_cubic = 3 * (1 - beta_cubic) / (1 + beta_cubic)   (Eq. 4)
        3.0 * (1.0 - b) / (1.0 + b)
    }

    fn reduce(&mut self) {
        //= https://www.rfc-editor.org/rfc/rfc9438#section-4.7
        //# if cwnd < W_max and fast convergence enabled, further reduce W_max
        //# W_max = cwnd * (1 + beta_cubic) / 2
        self.w_max = if self.config.fast_convergence && self.cwnd < self.w_max {
            self.cwnd * (1.0 + self.config.beta_cubic) / 2.0
        } else {
            self.cwnd
        };
        self.cwnd_prior = self.cwnd;
        //# ssthresh = cwnd * beta_cubic  (cwnd-based form; FlightSize is allowed too)
        self.ssthresh = (self.cwnd * self.config.beta_cubic).max(2.0);
        self.t_epoch = None;
        self.hystart = None;
    }
}

impl CongestionControl for Cubic {
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        let acked = ack.bytes_acked as f64 / self.smss;
        if self.cwnd < self.ssthresh {
            let cwnd_bytes = self.window();
            match self.hystart.as_mut() {
                Some(h) => match h.on_ack(now, ack, self.smss as u64, cwnd_bytes) {
                    SlowStartStep::Grow(bytes) => self.cwnd += bytes as f64 / self.smss,
                    SlowStartStep::Avoid => {
                        self.ssthresh = self.cwnd;
                        self.hystart = None;
                    }
                },
                None => self.cwnd += acked.min(1.0),
            }
            return;
        }
        let t_epoch = *self.t_epoch.get_or_insert_with(|| {
            //= https://www.rfc-editor.org/rfc/rfc9438#section-4.2
            //# K = cubic_root((W_max - cwnd_epoch) / C)   (Eq. 2)
            self.cwnd_epoch = self.cwnd;
            self.k = if self.w_max > self.cwnd {
                ((self.w_max - self.cwnd) / self.config.c).cbrt()
            } else {
                // No reduction to grow back from (slow start left without a loss,
                // by HyStart++): the curve starts here, convex (Linux's
                // `bic_origin_point = cwnd`, K = 0).
                self.w_max = self.cwnd;
                0.0
            };
            self.w_est = self.cwnd;
            now
        });
        let rtt = ack.srtt.unwrap_or(Duration::from_millis(100)).as_secs_f64();
        let t = (now - t_epoch).as_secs_f64();
        //= https://www.rfc-editor.org/rfc/rfc9438#section-4.2
        //# target = cwnd if W_cubic(t + RTT) < cwnd; 1.5 * cwnd if W_cubic(t + RTT) >
        //# 1.5 * cwnd; W_cubic(t + RTT) otherwise
        let target = self.w_cubic(t + rtt).clamp(self.cwnd, 1.5 * self.cwnd);
        if self.config.reno_friendly {
            //= https://www.rfc-editor.org/rfc/rfc9438#section-4.3
            //# W_est = W_est + alpha_cubic * segments_acked / cwnd   (Eq. 4)
            //# Once W_est has grown to reach the cwnd at the time of most recently
            //# setting ssthresh ... the sender SHOULD set alpha_cubic to 1
            let alpha = if self.w_est >= self.cwnd_prior {
                1.0
            } else {
                self.alpha_cubic()
            };
            self.w_est += alpha * acked / self.cwnd;
            if self.w_cubic(t) < self.w_est {
                //# When receiving a new ACK in congestion avoidance (where cwnd could
                //# be greater than or less than W_max), CUBIC checks whether W_cubic(t)
                //# is less than W_est. If so, CUBIC is in the Reno-friendly region and
                //# cwnd SHOULD be set to W_est at each reception of a new ACK.
                self.cwnd = self.cwnd.max(self.w_est);
                return;
            }
        }
        //# cwnd SHOULD be incremented by (target - cwnd) / cwnd for each received
        //# new ACK
        self.cwnd += (target - self.cwnd) / self.cwnd * acked;
    }

    fn on_loss(&mut self, _now: Instant, _in_flight: u64) {
        self.reduce();
        self.cwnd = self.ssthresh;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.cwnd = self.ssthresh;
    }

    fn on_timeout(&mut self, _now: Instant, _in_flight: u64) {
        //= https://www.rfc-editor.org/rfc/rfc9438#section-4.8
        //# In the case of a timeout, CUBIC follows Reno to reduce cwnd [RFC5681] but
        //# sets ssthresh using beta_cubic
        self.reduce();
        self.cwnd = 1.0;
    }

    fn on_timeout_in_episode(&mut self, _now: Instant, _in_flight: u64) {
        // As Reno (RFC 9438 §4.8 follows RFC 5681 on timeouts): ssthresh and W_max
        // stay. Reducing again from a window of one segment would drag W_max down
        // to nothing.
        self.cwnd = 1.0;
        self.t_epoch = None;
    }

    fn window(&self) -> u64 {
        (self.cwnd * self.smss) as u64
    }
    fn ssthresh(&self) -> u64 {
        if self.ssthresh.is_finite() {
            (self.ssthresh * self.smss) as u64
        } else {
            u64::MAX
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMSS: u64 = 1448;

    /// Drives the controller with ACKs spread evenly over each RTT and checks the
    /// window against W_cubic(t) after a loss at W_max = 1000 segments.
    #[test]
    fn window_follows_the_cubic_function_after_a_loss() {
        let rtt = Duration::from_millis(100);
        let mut c = Cubic::new(CubicConfig::default(), SMSS, 1000 * SMSS, Instant::ZERO);
        c.on_loss(Instant::ZERO, 1000 * SMSS);
        assert_eq!(c.window() / SMSS, 700);
        let mut now = Instant::ZERO;
        let mut t_epoch = None;
        let mut checked = 0;
        let k = (300.0f64 / 0.4).cbrt(); // 9.09 s
        for round in 0..200 {
            let segs = c.window() / SMSS;
            let step = rtt / segs as u32;
            for _ in 0..segs {
                now += step;
                c.on_ack(now, &AckSample::new(SMSS, 0, Some(rtt)));
                t_epoch.get_or_insert(now);
            }
            let t = (now - t_epoch.unwrap()).as_secs_f64();
            if round % 25 == 24 {
                // W(t) = C (t - K)^3 + W_max; the RFC aims at W(t + RTT), one RTT ahead.
                let expected = 0.4 * (t + rtt.as_secs_f64() - k).powi(3) + 1000.0;
                let got = c.window() as f64 / SMSS as f64;
                let err = (got - expected).abs() / expected;
                assert!(
                    err < 0.05,
                    "t = {t:.2} s: cwnd {got:.1} vs W(t) {expected:.1}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 8);
        let (k_got, w_max) = c.epoch();
        assert!((k_got - k).abs() < 1e-9 && w_max == 1000.0);
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = Cubic::new(CubicConfig::default(), SMSS, 100 * SMSS, Instant::ZERO);
        c.on_loss(Instant::ZERO, 0); // w_max = 100, cwnd = 70
        c.on_loss(Instant::ZERO, 0); // 70 < 100: w_max = 70 * 1.7 / 2
        assert!((c.epoch().1 - 59.5).abs() < 1e-9);
        assert_eq!(c.window() / SMSS, 49);
    }

    #[test]
    fn a_repeated_timeout_holds_ssthresh_and_w_max() {
        let mut c = Cubic::new(CubicConfig::default(), SMSS, 100 * SMSS, Instant::ZERO);
        c.on_timeout(Instant::ZERO, 0); // w_max = 100, ssthresh = 70, cwnd = 1
        c.on_timeout_in_episode(Instant::ZERO, 0);
        assert_eq!((c.window(), c.ssthresh() / SMSS), (SMSS, 70));
        assert!((c.epoch().1 - 100.0).abs() < 1e-9);
    }
}
