//! FAST TCP (Jin, Wei, Low, "FAST TCP: Motivation, Architecture, Algorithms,
//! Performance", IEEE INFOCOM 2004). Linux has no FAST module; this follows the
//! paper.
//!
//! The paper's window update, applied periodically (here once per RTT):
//!
//! ```text
//! w <- min{ 2w, (1 - γ) w + γ (baseRTT / RTT · w + α) }
//! ```
//!
//! with `RTT` the average RTT and `baseRTT` the smallest seen. At its fixed point
//! `w (RTT - baseRTT) / RTT = α`: each flow keeps α packets in the bottleneck's
//! queue, whatever the path's rate, and flows sharing a link get equal rates.
//! From a small window the same rule grows by min(w, γα) per RTT, which is FAST's
//! start. The paper's RTT average is a moving average per ACK with weight
//! `min(3 / w, 1/4)`; a loss halves the window, as Reno ("FAST reacts to loss as
//! TCP Reno does").
//!
//! Defaults: α = 200 segments (the paper leaves α to the operator; 200 keeps a
//! few milliseconds of queue at 1 Gb/s), γ = 1/2. Departures from the paper: the
//! update runs every RTT (the paper's implementation can run it more often and
//! spreads the change over the RTT's ACKs); the window moves in whole segments at
//! each update.

use super::segments::Rounds;
use super::{AckSample, CongestionControl};
use crate::time::{Duration, Instant};

/// FAST's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FastConfig {
    /// Segments each flow keeps queued at equilibrium.
    pub alpha: f64,
    /// The update's step, in (0, 1].
    pub gamma: f64,
}

impl Default for FastConfig {
    fn default() -> Self {
        FastConfig {
            alpha: 200.0,
            gamma: 0.5,
        }
    }
}

/// FAST TCP.
#[derive(Debug, Clone)]
pub struct Fast {
    cfg: FastConfig,
    smss: u64,
    /// The window, segments.
    w: f64,
    ssthresh: u64,
    rounds: Rounds,
    base_rtt: Option<Duration>,
    /// Seconds.
    avg_rtt: Option<f64>,
}

impl Fast {
    /// A controller with `cwnd = initial_window`, starting at `now`.
    pub fn new(cfg: FastConfig, smss: u64, initial_window: u64, now: Instant) -> Self {
        Fast {
            cfg,
            smss,
            w: (initial_window / smss).max(1) as f64,
            ssthresh: u64::MAX,
            rounds: Rounds::new(now),
            base_rtt: None,
            avg_rtt: None,
        }
    }

    /// The update at the end of a round.
    fn update(&mut self) {
        let (Some(base), Some(avg)) = (self.base_rtt, self.avg_rtt) else {
            return;
        };
        let FastConfig { alpha, gamma } = self.cfg;
        let target = base.as_secs_f64() / avg * self.w + alpha;
        let next = ((1.0 - gamma) * self.w + gamma * target).min(2.0 * self.w);
        self.w = next.round().max(2.0);
    }
}

impl CongestionControl for Fast {
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        if let Some(rtt) = ack.rtt {
            self.base_rtt = Some(self.base_rtt.map_or(rtt, |b| b.min(rtt)));
            let r = rtt.as_secs_f64();
            let eta = (3.0 / self.w).min(0.25);
            self.avg_rtt = Some(self.avg_rtt.map_or(r, |a| (1.0 - eta) * a + eta * r));
        }
        if self.rounds.ended(now, ack) {
            self.update();
        }
    }

    fn on_loss(&mut self, _now: Instant, _in_flight: u64) {
        self.w = (self.w / 2.0).floor().max(2.0);
        self.ssthresh = self.w as u64 * self.smss;
    }

    fn on_recovery_end(&mut self, now: Instant) {
        self.rounds.restart(now);
    }

    fn on_timeout(&mut self, now: Instant, _in_flight: u64) {
        self.ssthresh = ((self.w / 2.0).floor().max(2.0)) as u64 * self.smss;
        self.on_timeout_in_episode(now, 0);
    }

    fn on_timeout_in_episode(&mut self, now: Instant, _in_flight: u64) {
        self.w = 1.0;
        self.rounds.restart(now);
    }

    fn window(&self) -> u64 {
        self.w as u64 * self.smss
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn in_slow_start(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_update_settles_where_alpha_segments_are_queued() {
        // A fluid link of C segments per second and propagation RTT d: the queue
        // is what the window holds beyond C d.
        let (c, d) = (10_000.0, 0.1);
        let mut f = Fast::new(FastConfig::default(), 1000, 10_000, Instant::ZERO);
        f.base_rtt = Some(Duration::from_secs_f64(d));
        for _ in 0..200 {
            let queue = (f.w - c * d).max(0.0);
            f.avg_rtt = Some(d + queue / c);
            f.update();
        }
        let queue = f.w - c * d;
        assert!((queue - 200.0).abs() <= 1.0, "queue {queue}");
    }
}
