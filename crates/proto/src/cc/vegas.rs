//! TCP Vegas (Brakmo, Peterson, "TCP Vegas: End to End Congestion Avoidance on a
//! Global Internet", IEEE JSAC 13(8), 1995), as Linux's `tcp_vegas` runs it.
//!
//! The paper, once per RTT: with `BaseRTT` the smallest RTT seen,
//!
//! ```text
//! Expected = cwnd / BaseRTT,  Actual = cwnd / RTT,
//! Diff = (Expected - Actual) BaseRTT       (segments queued in the network)
//! Diff < α: cwnd + 1;  Diff > β: cwnd - 1;  otherwise hold.
//! ```
//!
//! so at equilibrium a flow keeps between α and β segments in the bottleneck
//! queue. In slow start it exits once `Diff` exceeds γ.
//!
//! Linux's module, kept here: α = 2, β = 4, γ = 1; `RTT` is the smallest sample
//! of the last round (filtering delayed ACKs) and a round with fewer than three
//! samples falls back to Reno; Diff is computed as `cwnd (RTT - BaseRTT) /
//! BaseRTT` (the paper divides by RTT: the same below a queue of a few percent of
//! the RTT); slow start grows every RTT (the paper's every other RTT is not run)
//! and its exit sets cwnd to the rate actually achieved; during recovery and
//! after a timeout it is Reno until the connection is open again. Losses are
//! answered as Reno (`tcp_reno_ssthresh`: half the window).

use super::segments::{Rounds, SegmentWindow};
use super::{AckSample, CongestionControl};
use crate::time::Instant;

/// Lower bound of segments queued.
pub const ALPHA: u64 = 2;
/// Upper bound of segments queued.
pub const BETA: u64 = 4;
/// Slow start's exit threshold.
const GAMMA: u64 = 1;

/// TCP Vegas.
#[derive(Debug, Clone)]
pub struct Vegas {
    win: SegmentWindow,
    rounds: Rounds,
    /// Off in recovery and loss (Reno then).
    doing_vegas_now: bool,
    /// Smallest RTT ever and smallest this round, µs (+1, never zero).
    base_rtt: u64,
    min_rtt: u64,
    cnt_rtt: u64,
}

impl Vegas {
    /// A controller with `cwnd = initial_window`, starting at `now`.
    pub fn new(smss: u64, initial_window: u64, now: Instant) -> Self {
        Vegas {
            win: SegmentWindow::new(smss, initial_window),
            rounds: Rounds::new(now),
            doing_vegas_now: true,
            base_rtt: u64::MAX,
            min_rtt: u64::MAX,
            cnt_rtt: 0,
        }
    }

    /// `vegas_enable`: fresh samples from a round starting now.
    fn enable(&mut self, now: Instant) {
        self.doing_vegas_now = true;
        self.rounds.restart(now);
        self.cnt_rtt = 0;
        self.min_rtt = u64::MAX;
    }

    /// The once-per-RTT adjustment.
    fn adjust(&mut self, acked: u64) {
        let (cwnd, rtt, base) = (self.win.cwnd, self.min_rtt, self.base_rtt);
        let target = cwnd * base / rtt;
        let diff = cwnd * (rtt - base) / base;
        if diff > GAMMA && self.win.in_slow_start() {
            // Too fast: take the rate actually achieved and leave slow start.
            self.win.cwnd = cwnd.min(target + 1);
            self.win.ssthresh = self.win.ssthresh.min(self.win.cwnd);
        } else if self.win.in_slow_start() {
            self.win.slow_start(acked);
        } else if diff > BETA {
            self.win.cwnd -= 1;
            self.win.ssthresh = self.win.ssthresh.min(self.win.cwnd);
        } else if diff < ALPHA {
            self.win.cwnd += 1;
        }
        self.win.cwnd = self.win.cwnd.max(2);
        // `tcp_current_ssthresh` in the open state: at least 3/4 of cwnd.
        let c = self.win.cwnd;
        self.win.ssthresh = self.win.ssthresh.max((c >> 1) + (c >> 2));
    }
}

impl CongestionControl for Vegas {
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        if let Some(rtt) = ack.rtt {
            let us = rtt.as_micros() as u64 + 1;
            self.base_rtt = self.base_rtt.min(us);
            self.min_rtt = self.min_rtt.min(us);
            self.cnt_rtt += 1;
        }
        let acked = self.win.acked(ack);
        if !self.doing_vegas_now {
            self.win.reno_cong_avoid(acked);
            return;
        }
        if self.rounds.ended(now, ack) {
            if self.cnt_rtt <= 2 {
                // Too few samples to tell a delayed ACK's RTT from the path's.
                self.win.reno_cong_avoid(acked);
            } else {
                self.adjust(acked);
            }
            self.cnt_rtt = 0;
            self.min_rtt = u64::MAX;
        } else if self.win.in_slow_start() {
            self.win.slow_start(acked);
        }
    }

    fn on_loss(&mut self, _now: Instant, _in_flight: u64) {
        self.doing_vegas_now = false;
        self.win.enter_recovery(self.win.cwnd / 2);
    }

    fn on_recovery_end(&mut self, now: Instant) {
        self.win.cwnd = self.win.ssthresh;
        self.enable(now);
    }

    fn on_timeout(&mut self, now: Instant, _in_flight: u64) {
        self.win.enter_loss(self.win.cwnd / 2);
        // Linux is Reno until TCP_CA_Loss ends; the engines do not report that
        // end, so Vegas starts over at once, on fresh samples.
        self.enable(now);
    }

    fn on_timeout_in_episode(&mut self, now: Instant, _in_flight: u64) {
        self.win.enter_loss(self.win.ssthresh);
        self.enable(now);
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
    use crate::time::Duration;

    /// One round of four ACKs measuring `rtt_ms`, from the round's start `s` (ms):
    /// the first three time segments sent before it, the fourth one sent at it,
    /// which ends the round. Returns the next round's start.
    fn round(c: &mut Vegas, s: u64, rtt_ms: u64) -> u64 {
        let rtt = Duration::from_millis(rtt_ms);
        for k in 0..4 {
            let at = Instant::from_nanos((s + rtt_ms - 3 + k) * 1_000_000);
            c.on_ack(at, &AckSample::new(1000, 0, None).with_rtt(Some(rtt)));
        }
        s + rtt_ms
    }

    #[test]
    fn the_window_rises_below_alpha_falls_above_beta_and_holds_between() {
        let mut c = Vegas::new(1000, 100_000, Instant::from_nanos(1_000_000_000));
        c.win.ssthresh = 50;
        // BaseRTT 100 ms, no queue: Diff 0 < α, grow.
        let s = round(&mut c, 1000, 100);
        assert_eq!(c.win.cwnd, 101);
        // RTT 102 ms: Diff = 101 x 2 / 100 = 2, hold.
        let s = round(&mut c, s, 102);
        assert_eq!(c.win.cwnd, 101);
        // RTT 101 ms: Diff 1 < α, grow.
        let s = round(&mut c, s, 101);
        assert_eq!(c.win.cwnd, 102);
        // RTT 110 ms: Diff 10 > β, shrink.
        round(&mut c, s, 110);
        assert_eq!(c.win.cwnd, 101);
    }
}
