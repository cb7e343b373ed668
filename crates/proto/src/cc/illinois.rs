//! TCP-Illinois (Liu, Başar, Srikant, "TCP-Illinois: a loss and delay-based
//! congestion control algorithm for high-speed networks", VALUETOOLS 2006;
//! Performance Evaluation 65(6-7), 2008), as Linux's `tcp_illinois` runs it.
//!
//! Loss decides the direction, queueing delay the step. With `d_a` the average
//! queueing delay over the last RTT and `d_m` the largest seen, the paper's
//! increase α and decrease β are
//!
//! ```text
//! α = α_max                       d_a ≤ d_1
//! α = κ1 / (κ2 + d_a)             otherwise     (α(d_1) = α_max, α(d_m) = α_min)
//! β = β_min                       d_a ≤ d_2
//! β = κ3 + κ4 d_a                 d_2 < d_a < d_3  (linear from β_min to β_max)
//! β = β_max                       d_a ≥ d_3
//! ```
//!
//! with `d_1 = d_m / 100`, `d_2 = d_m / 10`, `d_3 = 8 d_m / 10`, `α_max = 10`,
//! `α_min = 0.3`, `β_min = 1/8`, `β_max = 1/2`: far from congestion it adds ten
//! segments per RTT and gives up an eighth on a loss; near it, Reno's half.
//!
//! Linux's module, kept here: α (×128) and β (×64) in integer arithmetic over
//! delays in microseconds, recomputed once per RTT; α returns to `α_max` only
//! after `θ` = 5 RTTs in a row below `d_1`; below `win_thresh` = 15 segments it is
//! Reno (α 1, β 1/2); a retransmission timeout resets α and β to Reno's.

use super::segments::{Rounds, SegmentWindow};
use super::{AckSample, CongestionControl};
use crate::time::Instant;

const ALPHA_SHIFT: u32 = 7;
const ALPHA_SCALE: u64 = 1 << ALPHA_SHIFT;
/// 0.3.
const ALPHA_MIN: u64 = ALPHA_SCALE * 3 / 10;
/// 10.
const ALPHA_MAX: u64 = 10 * ALPHA_SCALE;
/// 1 (Reno's).
const ALPHA_BASE: u64 = ALPHA_SCALE;
const BETA_SHIFT: u32 = 6;
const BETA_SCALE: u64 = 1 << BETA_SHIFT;
/// 1/8.
const BETA_MIN: u64 = BETA_SCALE / 8;
/// 1/2 (Reno's).
const BETA_MAX: u64 = BETA_SCALE / 2;
const BETA_BASE: u64 = BETA_MAX;
/// Reno below this window, segments.
const WIN_THRESH: u64 = 15;
/// RTTs of low delay before α returns to α_max.
const THETA: u32 = 5;

/// TCP-Illinois.
#[derive(Debug, Clone)]
pub struct Illinois {
    win: SegmentWindow,
    rounds: Rounds,
    /// ×128.
    alpha: u64,
    /// ×64.
    beta: u64,
    /// Smallest and largest RTT samples, µs.
    base_rtt: u64,
    max_rtt: u64,
    /// This round's samples.
    sum_rtt: u64,
    cnt_rtt: u64,
    /// Whether delay has left the low zone since α was last α_max.
    rtt_above: bool,
    rtt_low: u32,
}

impl Illinois {
    /// A controller with `cwnd = initial_window`, starting at `now`.
    pub fn new(smss: u64, initial_window: u64, now: Instant) -> Self {
        Illinois {
            win: SegmentWindow::new(smss, initial_window),
            rounds: Rounds::new(now),
            alpha: ALPHA_MAX,
            beta: BETA_BASE,
            base_rtt: u64::MAX,
            max_rtt: 0,
            sum_rtt: 0,
            cnt_rtt: 0,
            rtt_above: false,
            rtt_low: 0,
        }
    }

    /// α, segments per RTT.
    pub fn alpha(&self) -> f64 {
        self.alpha as f64 / ALPHA_SCALE as f64
    }

    /// β, the fraction of the window given up on a loss.
    pub fn beta(&self) -> f64 {
        self.beta as f64 / BETA_SCALE as f64
    }

    /// The increase for average queueing delay `da` and maximum `dm`, µs.
    fn alpha_for(&mut self, da: u64, dm: u64) -> u64 {
        let d1 = dm / 100;
        if da <= d1 {
            // Never left the low-delay zone: α_max at once; otherwise after θ
            // rounds in it, so that one good RTT does not jump the window.
            if !self.rtt_above {
                return ALPHA_MAX;
            }
            self.rtt_low += 1;
            if self.rtt_low < THETA {
                return self.alpha;
            }
            self.rtt_low = 0;
            self.rtt_above = false;
            return ALPHA_MAX;
        }
        self.rtt_above = true;
        // κ1 / (κ2 + d_a) through (d_1, α_max) and (d_m, α_min).
        let (dm, da) = (dm - d1, da - d1);
        dm * ALPHA_MAX / (dm + da * (ALPHA_MAX - ALPHA_MIN) / ALPHA_MIN)
    }

    /// The decrease for `da` and `dm`, µs.
    fn beta_for(da: u64, dm: u64) -> u64 {
        let d2 = dm / 10;
        if da <= d2 {
            return BETA_MIN;
        }
        let d3 = 8 * dm / 10;
        if da >= d3 || d3 <= d2 {
            return BETA_MAX;
        }
        (BETA_MIN * d3 - BETA_MAX * d2 + (BETA_MAX - BETA_MIN) * da) / (d3 - d2)
    }

    /// `update_params`, once per round.
    fn update_params(&mut self) {
        if self.win.cwnd < WIN_THRESH {
            self.alpha = ALPHA_BASE;
            self.beta = BETA_BASE;
        } else if let Some(avg) = self.sum_rtt.checked_div(self.cnt_rtt) {
            let dm = self.max_rtt.saturating_sub(self.base_rtt);
            let da = avg.saturating_sub(self.base_rtt);
            self.alpha = self.alpha_for(da, dm);
            self.beta = Self::beta_for(da, dm);
        }
        self.sum_rtt = 0;
        self.cnt_rtt = 0;
    }

    fn recalc_ssthresh(&self) -> u64 {
        let cwnd = self.win.cwnd;
        cwnd - ((cwnd * self.beta) >> BETA_SHIFT)
    }
}

impl CongestionControl for Illinois {
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        if let Some(rtt) = ack.rtt {
            let us = rtt.as_micros() as u64;
            self.base_rtt = self.base_rtt.min(us);
            self.max_rtt = self.max_rtt.max(us);
            self.sum_rtt += us;
            self.cnt_rtt += 1;
        }
        if self.rounds.ended(now, ack) {
            self.update_params();
        }
        let mut acked = self.win.acked(ack);
        if acked == 0 {
            return;
        }
        if self.win.in_slow_start() {
            acked = self.win.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        // cwnd += α / cwnd per segment.
        self.win.cnt += acked;
        let delta = (self.win.cnt * self.alpha) >> ALPHA_SHIFT;
        if delta >= self.win.cwnd {
            self.win.cwnd += delta / self.win.cwnd;
            self.win.cnt = 0;
        }
    }

    fn on_loss(&mut self, _now: Instant, _in_flight: u64) {
        let ssthresh = self.recalc_ssthresh();
        self.win.enter_recovery(ssthresh);
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.win.cwnd = self.win.ssthresh;
    }

    fn on_timeout(&mut self, now: Instant, _in_flight: u64) {
        // ssthresh from the β in force, then as any timeout.
        self.win.ssthresh = self.recalc_ssthresh();
        self.on_timeout_in_episode(now, 0);
    }

    fn on_timeout_in_episode(&mut self, now: Instant, _in_flight: u64) {
        // TCP_CA_Loss: Reno's α and β, the low-delay count and the round reset.
        self.win.enter_loss(self.win.ssthresh);
        self.alpha = ALPHA_BASE;
        self.beta = BETA_BASE;
        self.rtt_low = 0;
        self.rtt_above = false;
        self.sum_rtt = 0;
        self.cnt_rtt = 0;
        self.rounds.restart(now);
    }

    fn window(&self) -> u64 {
        self.win.window_bytes()
    }

    fn ssthresh(&self) -> u64 {
        self.win.ssthresh_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's curves at their corners: α_max at d_1, α_min at d_m; β_min up
    /// to d_2, β_max from d_3, linear between.
    #[test]
    fn alpha_and_beta_follow_the_papers_curves() {
        let mut c = Illinois::new(1000, 100_000, Instant::ZERO);
        let dm = 100_000;
        assert_eq!(c.alpha_for(dm / 100, dm), ALPHA_MAX);
        assert_eq!(c.alpha_for(dm, dm), ALPHA_MIN);
        // α = κ1 / (κ2 + d_a) is a hyperbola: 1/α is linear in d_a.
        let mid = c.alpha_for(dm / 100 + (dm - dm / 100) / 2, dm) as f64;
        let inv = (1.0 / ALPHA_MAX as f64 + 1.0 / ALPHA_MIN as f64) / 2.0;
        assert!((1.0 / mid / inv - 1.0).abs() < 0.02, "α mid {mid}");
        assert_eq!(Illinois::beta_for(dm / 10, dm), BETA_MIN);
        assert_eq!(Illinois::beta_for(8 * dm / 10, dm), BETA_MAX);
        let b = Illinois::beta_for(45_000, dm);
        assert_eq!(
            b,
            (BETA_MIN + BETA_MAX) / 2,
            "β at the middle of [d_2, d_3]"
        );
    }

    #[test]
    fn after_high_delay_alpha_waits_theta_rounds_in_the_low_zone() {
        let mut c = Illinois::new(1000, 100_000, Instant::ZERO);
        c.alpha = c.alpha_for(50_000, 100_000);
        assert!(c.alpha < ALPHA_MAX);
        let low = c.alpha;
        for _ in 1..THETA {
            assert_eq!(c.alpha_for(0, 100_000), low);
        }
        assert_eq!(c.alpha_for(0, 100_000), ALPHA_MAX);
    }
}
