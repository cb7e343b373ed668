//! BIC TCP (Xu, Harfoush, Rhee, "Binary Increase Congestion Control (BIC) for
//! Fast Long-Distance Networks", IEEE INFOCOM 2004), as Linux's `tcp_bic` runs it.
//!
//! The paper: after a loss at window `W_max` the window drops to `β W_max` and
//! then searches for the loss point by binary search, "increase to the midpoint of
//! the current window and `W_max`", capped at `S_max` segments per RTT (additive
//! increase far below `W_max`) and at least `S_min`; past `W_max` it probes
//! outward ("max probing"), slowly at first, then linearly at `S_max` per RTT.
//! Fast convergence: a loss below the previous `W_max` sets the new `W_max` to
//! `(1 + β) / 2` of the window, leaving room to a newcomer.
//!
//! Linux's module (kept here, constants included):
//! - `β = 819/1024 ≈ 0.8`; `S_max = max_increment = 16`; `BICTCP_B = 4`, so
//!   one binary step covers a quarter of the distance to `W_max` per RTT;
//!   `smooth_part = 20` RTTs to cover the last `B` segments;
//! - Reno below `low_window = 14` segments;
//! - while `W_max` is unknown (no loss yet) at most 5 % growth per RTT (cnt ≤ 20);
//! - the increase is one segment per `cnt` acknowledged, with `cnt` divided by the
//!   ACK ratio (segments per ACK, a moving average ×16): a vestige of counting
//!   ACKs rather than segments, which since `tcp_cong_avoid_ai` counts segments
//!   makes a delayed-ACK receiver double BIC's increase. Kept, as Linux runs it.
//! - `cnt` is recomputed at most every `HZ/32` (31.25 ms) while cwnd is unchanged.

use super::segments::SegmentWindow;
use super::{AckSample, CongestionControl};
use crate::time::{Duration, Instant};

/// `BICTCP_BETA_SCALE`.
const BETA_SCALE: u64 = 1024;
/// `beta`: the window kept on a loss, ×1024.
const BETA: u64 = 819;
/// `BICTCP_B`: a binary step goes to `(max + min) / B`.
const B: u64 = 4;
/// `max_increment` (S_max).
const MAX_INCREMENT: u64 = 16;
/// `low_window`: Reno below it.
const LOW_WINDOW: u64 = 14;
/// `smooth_part`.
const SMOOTH_PART: u64 = 20;
/// `ACK_RATIO_SHIFT`.
const ACK_RATIO_SHIFT: u32 = 4;
/// `HZ / 32`.
const RECOMPUTE_AFTER: Duration = Duration::from_micros(31_250);

/// BIC TCP.
#[derive(Debug, Clone)]
pub struct Bic {
    win: SegmentWindow,
    /// Segments acknowledged per increment.
    cnt: u64,
    /// `W_max` (0: none yet).
    last_max_cwnd: u64,
    last_cwnd: u64,
    last_time: Option<Instant>,
    /// Segments per ACK, ×16.
    delayed_ack: u64,
}

impl Bic {
    /// A controller with `cwnd = initial_window`.
    pub fn new(smss: u64, initial_window: u64) -> Self {
        Bic {
            win: SegmentWindow::new(smss, initial_window),
            cnt: 0,
            last_max_cwnd: 0,
            last_cwnd: 0,
            last_time: None,
            delayed_ack: 2 << ACK_RATIO_SHIFT,
        }
    }

    /// `W_max` in segments (0 before the first loss).
    pub fn last_max_cwnd(&self) -> u64 {
        self.last_max_cwnd
    }

    /// `bictcp_reset`, on a retransmission timeout (`TCP_CA_Loss`).
    fn reset(&mut self) {
        self.cnt = 0;
        self.last_max_cwnd = 0;
        self.last_cwnd = 0;
        self.last_time = None;
        self.delayed_ack = 2 << ACK_RATIO_SHIFT;
    }

    /// `bictcp_update`: segments per increment at window `cwnd`.
    fn update(&mut self, now: Instant, cwnd: u64) {
        if self.last_cwnd == cwnd
            && self
                .last_time
                .is_some_and(|t| now.saturating_duration_since(t) <= RECOMPUTE_AFTER)
        {
            return;
        }
        self.last_cwnd = cwnd;
        self.last_time = Some(now);
        if cwnd <= LOW_WINDOW {
            self.cnt = cwnd;
            return;
        }
        let max = self.last_max_cwnd;
        self.cnt = if cwnd < max {
            // Binary search toward W_max: a quarter of the distance per RTT.
            let dist = (max - cwnd) / B;
            if dist > MAX_INCREMENT {
                cwnd / MAX_INCREMENT
            } else if dist <= 1 {
                cwnd * SMOOTH_PART / B
            } else {
                cwnd / dist
            }
        } else if cwnd < max + B {
            // Max probing: slowly just past W_max ...
            cwnd * SMOOTH_PART / B
        } else if cwnd < max + MAX_INCREMENT * (B - 1) {
            cwnd * (B - 1) / (cwnd - max)
        } else {
            // ... then linearly at S_max.
            cwnd / MAX_INCREMENT
        };
        if self.last_max_cwnd == 0 {
            // No W_max yet: grow at most 5 % per RTT.
            self.cnt = self.cnt.min(20);
        }
        self.cnt = ((self.cnt << ACK_RATIO_SHIFT) / self.delayed_ack).max(1);
    }

    /// `bictcp_recalc_ssthresh`: records `W_max`, returns the new ssthresh.
    fn recalc_ssthresh(&mut self) -> u64 {
        let cwnd = self.win.cwnd;
        self.last_max_cwnd = if cwnd < self.last_max_cwnd {
            // Fast convergence.
            cwnd * (BETA_SCALE + BETA) / (2 * BETA_SCALE)
        } else {
            cwnd
        };
        if cwnd <= LOW_WINDOW {
            (cwnd / 2).max(2)
        } else {
            (cwnd * BETA / BETA_SCALE).max(2)
        }
    }
}

impl CongestionControl for Bic {
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        let mut acked = self.win.acked(ack);
        if acked == 0 {
            return;
        }
        // `bictcp_acked`: ratio = (15 ratio + sample) / 16.
        self.delayed_ack = self.delayed_ack + acked - (self.delayed_ack >> ACK_RATIO_SHIFT);
        if self.win.in_slow_start() {
            acked = self.win.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.update(now, self.win.cwnd);
        self.win.cong_avoid_ai(self.cnt, acked);
    }

    fn on_loss(&mut self, _now: Instant, _in_flight: u64) {
        let ssthresh = self.recalc_ssthresh();
        self.win.enter_recovery(ssthresh);
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.win.cwnd = self.win.ssthresh;
    }

    fn on_timeout(&mut self, _now: Instant, _in_flight: u64) {
        let ssthresh = self.recalc_ssthresh();
        self.win.enter_loss(ssthresh);
        self.reset();
    }

    fn on_timeout_in_episode(&mut self, _now: Instant, _in_flight: u64) {
        self.win.enter_loss(self.win.ssthresh);
        self.reset();
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

    const SMSS: u64 = 1000;

    /// Acknowledges one window, one segment per ACK, 1 ms apart.
    fn ack_window(c: &mut Bic, t: &mut u64) {
        let n = c.win.cwnd;
        for _ in 0..n {
            *t += 1_000_000;
            c.on_ack(Instant::from_nanos(*t), &AckSample::new(SMSS, 0, None));
        }
    }

    #[test]
    fn a_loss_keeps_0_8_and_the_search_halves_the_distance_to_w_max() {
        let mut c = Bic::new(SMSS, 1000 * SMSS);
        c.on_loss(Instant::ZERO, 0);
        c.on_recovery_end(Instant::ZERO);
        assert_eq!(c.win.cwnd, 1000 * 819 / 1024);
        assert_eq!(c.last_max_cwnd(), 1000);
        let mut t = 0;
        // Far below W_max (distance / 4 > 16): S_max = 16 segments per RTT, times
        // the ACK ratio's 2 of a fresh connection decaying toward 1 per ACK here.
        let before = c.win.cwnd;
        ack_window(&mut c, &mut t);
        let step = c.win.cwnd - before;
        assert!((16..=32).contains(&step), "first RTT added {step}");
        // The ratio has converged to one segment per ACK: the binary search now adds
        // min(distance / 4, 16) per RTT, so the window approaches W_max without
        // passing it for many RTTs.
        for _ in 0..30 {
            ack_window(&mut c, &mut t);
            assert!(c.win.cwnd <= 1000 + 1, "cwnd {}", c.win.cwnd);
        }
        assert!(c.win.cwnd >= 990, "cwnd {}", c.win.cwnd);
    }

    #[test]
    fn fast_convergence_lowers_w_max_after_a_loss_below_it() {
        let mut c = Bic::new(SMSS, 1000 * SMSS);
        c.on_loss(Instant::ZERO, 0);
        // A second loss at 799 < W_max 1000: W_max = 799 (1 + 0.8) / 2, 719.
        c.on_loss(Instant::ZERO, 0);
        assert_eq!(c.last_max_cwnd(), 799 * (1024 + 819) / 2048);
    }
}
