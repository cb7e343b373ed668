//! H-TCP (Leith, Shorten, "H-TCP: TCP for high-speed and long-distance networks",
//! PFLDnet 2004), as Linux's `tcp_htcp` runs it (the module the parallel-transfer
//! study's tuned hosts ran).
//!
//! The paper makes the increase a function of the time `Δ` since the last
//! congestion event, so that it is Reno's for the first `Δ_L` = 1 s and grows
//! after:
//!
//! ```text
//! α(Δ) = 1                                     Δ ≤ Δ_L
//! α(Δ) = 1 + 10 (Δ - Δ_L) + ((Δ - Δ_L) / 2)^2  Δ > Δ_L
//! ```
//!
//! scaled by `2 (1 - β)` so that the mean rate does not depend on β, and (RTT
//! scaling) by `RTT_min / 100 ms`, clamped to [0.1, 2], so flows of different RTTs
//! share fairly. The decrease is adaptive, `β = RTT_min / RTT_max` in [0.5, 0.8],
//! and falls back to 0.5 when the throughput reached before successive losses
//! changed by more than 20 % (the "bandwidth switch": the path changed, so
//! converge fast).
//!
//! Linux's module, kept here: α and β in fixed point (×128), the RTT scaling
//! factor ×8; `RTT_max` grows only by samples within 20 ms of it and fades 5 %
//! toward `RTT_min` at each loss; `Δ` counts from the end of recovery; α is
//! recomputed at each window increment and at each loss (so the first increment
//! after a loss uses the α of the epoch before it, as Linux does); the module's
//! jiffies are exact time here; its undo (spurious-loss detection) is not run, as
//! the engines have none.

use super::segments::SegmentWindow;
use super::{AckSample, CongestionControl};
use crate::time::{Duration, Instant};

/// `ALPHA_BASE`: 1.0, ×128.
const ALPHA_BASE: u64 = 1 << 7;
/// `BETA_MIN`: 0.5, ×128.
const BETA_MIN: u64 = 1 << 6;
/// `BETA_MAX`: 0.8, ×128.
const BETA_MAX: u64 = 102;
/// Δ_L.
const DELTA_L: Duration = Duration::from_secs(1);

/// H-TCP.
#[derive(Debug, Clone)]
pub struct Htcp {
    win: SegmentWindow,
    /// Segments per RTT, ×128.
    alpha: u64,
    /// Window kept on a loss, ×128.
    beta: u64,
    /// β may follow the RTT ratio (false right after a bandwidth switch).
    modeswitch: bool,
    min_rtt: Option<Duration>,
    max_rtt: Option<Duration>,
    /// The last congestion event (or the end of its recovery).
    last_cong: Instant,
    /// Throughput measurement: segments since `lasttime`.
    packetcount: u64,
    lasttime: Instant,
    /// Smoothed throughput (segments per second) and its max this epoch and the
    /// epoch before.
    bi: u64,
    max_b: u64,
    old_max_b: u64,
}

impl Htcp {
    /// A controller with `cwnd = initial_window`, starting at `now`.
    pub fn new(smss: u64, initial_window: u64, now: Instant) -> Self {
        Htcp {
            win: SegmentWindow::new(smss, initial_window),
            alpha: ALPHA_BASE,
            beta: BETA_MIN,
            modeswitch: false,
            min_rtt: None,
            max_rtt: None,
            last_cong: now,
            packetcount: 0,
            lasttime: now,
            bi: 0,
            max_b: 0,
            old_max_b: 0,
        }
    }

    /// α, segments per RTT.
    pub fn alpha(&self) -> f64 {
        self.alpha as f64 / 128.0
    }

    /// β, the fraction of the window kept on a loss.
    pub fn beta(&self) -> f64 {
        self.beta as f64 / 128.0
    }

    /// `htcp_ccount`: RTTs since the last congestion event.
    fn ccount(&self, now: Instant) -> u64 {
        match self.min_rtt {
            Some(m) if !m.is_zero() => {
                (now.saturating_duration_since(self.last_cong).as_nanos() / m.as_nanos()) as u64
            }
            _ => 0,
        }
    }

    /// `measure_rtt`.
    fn measure_rtt(&mut self, rtt: Duration) {
        let min = *self.min_rtt.get_or_insert(rtt);
        if rtt < min {
            self.min_rtt = Some(rtt);
        }
        let min = self.min_rtt.unwrap_or(rtt);
        let max = self.max_rtt.get_or_insert(min);
        if *max < min {
            *max = min;
        }
        if *max < rtt && rtt <= *max + Duration::from_millis(20) {
            *max = rtt;
        }
    }

    /// `measure_achieved_throughput`: segments per second over about a window.
    fn measure_throughput(&mut self, now: Instant, acked: u64) {
        self.packetcount += acked;
        let Some(min) = self.min_rtt.filter(|m| !m.is_zero()) else {
            return;
        };
        let elapsed = now.saturating_duration_since(self.lasttime);
        let alpha_segs = (self.alpha >> 7).max(1);
        if self.packetcount >= self.win.cwnd.saturating_sub(alpha_segs) && elapsed >= min {
            let cur = (self.packetcount as u128 * 1_000_000_000 / elapsed.as_nanos()) as u64;
            if self.ccount(now) <= 3 {
                // Just after a back-off.
                self.bi = cur;
                self.max_b = cur;
            } else {
                self.bi = (3 * self.bi + cur) / 4;
                self.max_b = self.max_b.max(self.bi);
            }
            self.packetcount = 0;
            self.lasttime = now;
        }
    }

    /// `htcp_beta_update`.
    fn beta_update(&mut self) {
        let (max_b, old_max_b) = (self.max_b, self.old_max_b);
        self.old_max_b = max_b;
        // The bandwidth switch: |maxB - old_maxB| > 20 % of old_maxB.
        if !(4 * old_max_b..=6 * old_max_b).contains(&(5 * max_b)) {
            self.beta = BETA_MIN;
            self.modeswitch = false;
            return;
        }
        match (self.min_rtt, self.max_rtt) {
            (Some(min), Some(max))
                if self.modeswitch && min > Duration::from_millis(10) && !max.is_zero() =>
            {
                let b = ((min.as_nanos() << 7) / max.as_nanos()) as u64;
                self.beta = b.clamp(BETA_MIN, BETA_MAX);
            }
            _ => {
                self.beta = BETA_MIN;
                self.modeswitch = true;
            }
        }
    }

    /// `htcp_alpha_update`.
    fn alpha_update(&mut self, now: Instant) {
        let diff = now.saturating_duration_since(self.last_cong);
        // α(Δ) in the module's integer arithmetic, Δ in milliseconds (HZ = 1000).
        let mut factor = 1u64;
        if diff > DELTA_L {
            let d = (diff - DELTA_L).as_millis() as u64;
            factor = 1 + (10 * d + (d / 2) * (d / 2) / 1000) / 1000;
        }
        if let Some(min) = self.min_rtt {
            // RTT scaling: factor × RTT_min / 100 ms, the ratio ×8 clamped to
            // [0.5, 10] ("scale" is its inverse).
            let min_ms = (min.as_millis() as u64).max(1);
            let scale = ((1000u64 << 3) / (10 * min_ms)).clamp(1 << 2, 10 << 3);
            factor = ((factor << 3) / scale).max(1);
        }
        self.alpha = 2 * factor * ((1 << 7) - self.beta);
        if self.alpha == 0 {
            self.alpha = ALPHA_BASE;
        }
    }

    /// `htcp_param_update` then `htcp_recalc_ssthresh`, on a loss.
    fn recalc_ssthresh(&mut self, now: Instant) -> u64 {
        self.beta_update();
        self.alpha_update(now);
        if let (Some(min), Some(max)) = (self.min_rtt, self.max_rtt) {
            if max > min {
                // A slowly fading memory of RTT_max, for routing changes.
                self.max_rtt = Some(min + (max - min) * 95 / 100);
            }
        }
        ((self.win.cwnd * self.beta) >> 7).max(2)
    }

    /// Entering recovery or loss (`htcp_reset`).
    fn congestion_event(&mut self, now: Instant) {
        self.last_cong = now;
        self.packetcount = 0;
        self.lasttime = now;
    }
}

impl CongestionControl for Htcp {
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        if let Some(rtt) = ack.rtt {
            self.measure_rtt(rtt);
        }
        let acked = self.win.acked(ack);
        if acked == 0 {
            return;
        }
        self.measure_throughput(now, acked);
        if self.win.in_slow_start() {
            self.win.slow_start(acked);
            return;
        }
        // cwnd += α / cwnd per segment: one segment once cnt α reaches cwnd.
        if (self.win.cnt * self.alpha) >> 7 >= self.win.cwnd {
            self.win.cwnd += 1;
            self.win.cnt = 0;
            self.alpha_update(now);
        } else {
            self.win.cnt += acked;
        }
    }

    fn on_loss(&mut self, now: Instant, _in_flight: u64) {
        let ssthresh = self.recalc_ssthresh(now);
        self.win.enter_recovery(ssthresh);
        self.congestion_event(now);
    }

    fn on_recovery_end(&mut self, now: Instant) {
        self.win.cwnd = self.win.ssthresh;
        // Back in TCP_CA_Open: Δ counts from here.
        self.congestion_event(now);
    }

    fn on_timeout(&mut self, now: Instant, _in_flight: u64) {
        let ssthresh = self.recalc_ssthresh(now);
        self.win.enter_loss(ssthresh);
        self.congestion_event(now);
    }

    fn on_timeout_in_episode(&mut self, now: Instant, _in_flight: u64) {
        self.win.enter_loss(self.win.ssthresh);
        self.congestion_event(now);
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

    fn at(s: f64) -> Instant {
        Instant::from_nanos((s * 1e9) as u64)
    }

    #[test]
    fn alpha_follows_the_papers_function_of_the_time_since_a_loss() {
        let mut c = Htcp::new(1000, 100_000, Instant::ZERO);
        c.min_rtt = Some(Duration::from_millis(100));
        c.beta = BETA_MIN;
        // 2 (1 - β) α(Δ) with β = 0.5: α itself, at RTT_min 100 ms (scale 1).
        for (delta, paper) in [(0.5, 1.0), (2.0, 11.25), (4.0, 33.25), (11.0, 126.0)] {
            c.alpha_update(at(delta));
            assert_eq!(c.alpha(), f64::floor(paper), "Δ {delta} s");
        }
        // RTT scaling: at 20 ms the increase is a fifth (as a 100 ms flow's per
        // unit time), at 300 ms clamped to twice.
        c.min_rtt = Some(Duration::from_millis(20));
        c.alpha_update(at(11.0));
        assert_eq!(c.alpha(), 25.0);
        c.min_rtt = Some(Duration::from_millis(300));
        c.alpha_update(at(11.0));
        assert_eq!(c.alpha(), 252.0);
    }

    #[test]
    fn beta_is_the_rtt_ratio_unless_the_bandwidth_moved() {
        let mut c = Htcp::new(1000, 1000 * 1000, Instant::ZERO);
        c.min_rtt = Some(Duration::from_millis(100));
        c.max_rtt = Some(Duration::from_millis(140));
        c.max_b = 1000;
        c.old_max_b = 1000;
        // The first loss arms the mode switch at β = 0.5; the next uses the ratio.
        c.on_loss(at(1.0), 0);
        assert_eq!(c.beta(), 0.5);
        c.max_b = 1100;
        c.on_loss(at(2.0), 0);
        // RTT_max faded 5 % toward RTT_min at the first loss: 138 ms.
        assert_eq!(c.beta, (100 << 7) / 138);
        // A 30 % change of throughput between epochs: back to 0.5.
        c.max_b = 1430;
        c.on_loss(at(3.0), 0);
        assert_eq!(c.beta(), 0.5);
    }
}
