//! Scalable TCP (Kelly, "Scalable TCP: Improving Performance in Highspeed Wide
//! Area Networks", ACM SIGCOMM Computer Communication Review 33(2), 2003), as
//! Linux's `tcp_scalable` runs it.
//!
//! The paper: per ACK in congestion avoidance `cwnd <- cwnd + a` (a = 0.01), on a
//! loss `cwnd <- cwnd - b * cwnd` (b = 0.125): a multiplicative increase, so the
//! time to recover from a loss does not grow with the window. Its response
//! function: with a loss every 1/p packets the window climbs from (1 - b) W to W
//! at (1 + a) per RTT, sending W b / ln(1 + a) packets, so
//!
//! ```text
//! W = ln(1 + a) / (b p) ~ 0.08 / p   segments
//! ```
//!
//! Linux (`tcp_scalable.c`) adds one segment per min(cwnd, 100) ACKed segments
//! (`TCP_SCALABLE_AI_CNT`), which is a = 0.01 per ACK above 100 segments and
//! Reno's one segment per RTT below (the paper switches to Reno below a "legacy"
//! window too), and sets ssthresh to cwnd - cwnd/8 (`TCP_SCALABLE_MD_SCALE` 3).

use super::aimd::{Aimd, Response};

/// Scalable TCP's rule.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ScalableResponse;

/// Linux's `TCP_SCALABLE_AI_CNT`: one segment per this many ACKed, at most.
const AI_CNT: f64 = 100.0;
/// Kelly's b, Linux's 1/2^`TCP_SCALABLE_MD_SCALE`.
const B: f64 = 0.125;

impl Response for ScalableResponse {
    fn increase(&self, w: f64) -> f64 {
        // One segment per min(w, 100) ACKed: w / min(w, 100) per RTT.
        w / w.min(AI_CNT)
    }
    fn decrease(&self, _w: f64) -> f64 {
        B
    }
}

/// Scalable TCP.
pub type Scalable = Aimd<ScalableResponse>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn above_100_segments_a_window_grows_by_one_percent_per_rtt() {
        let r = ScalableResponse;
        assert_eq!(r.increase(50.0), 1.0);
        assert!((r.increase(1000.0) - 10.0).abs() < 1e-12);
        assert_eq!(r.decrease(1000.0), 0.125);
    }
}
