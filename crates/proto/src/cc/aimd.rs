//! The machinery the loss-based high-speed TCPs share: RFC 5681's slow start and
//! recovery hooks around an additive-increase, multiplicative-decrease rule whose
//! two parameters depend on the window, `a(w)` segments per RTT and `b(w)`, the
//! fraction given up on a loss. Each such TCP is one [`Response`] in its own file
//! ([`super::Scalable`], [`super::HighSpeed`]); NewReno is the constant response
//! a = 1, b = 1/2 (kept in `new_reno.rs`, which also has RFC 5681's per-ACK form).
//!
//! As Linux's `tcp_cong_avoid_ai`, the increase is counted in acknowledged bytes:
//! a window's worth of ACKed data adds a(w) segments, however the receiver spaces
//! its ACKs. As Linux's `ssthresh` callbacks, the decrease applies to cwnd, not to
//! FlightSize.

use super::{AckSample, CongestionControl};
use crate::time::Instant;

/// A window-dependent AIMD rule, in segments.
pub trait Response: core::fmt::Debug + Clone + Send {
    /// Segments added per RTT of acknowledgements at a window of `w` segments.
    fn increase(&self, w: f64) -> f64;
    /// The fraction of the window given up on a loss at `w` segments.
    fn decrease(&self, w: f64) -> f64;
}

/// RFC 5681 slow start, then `response`'s AIMD.
#[derive(Debug, Clone)]
pub struct Aimd<R> {
    response: R,
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Segments earned but not yet added (the fraction of the next one).
    earned: f64,
}

impl<R: Response> Aimd<R> {
    /// A controller with `cwnd = initial_window` and an infinite `ssthresh`.
    pub fn new(response: R, smss: u64, initial_window: u64) -> Self {
        Aimd {
            response,
            smss,
            cwnd: initial_window,
            ssthresh: u64::MAX,
            earned: 0.0,
        }
    }

    fn segments(&self) -> f64 {
        self.cwnd as f64 / self.smss as f64
    }

    fn reduce(&mut self) {
        let b = self.response.decrease(self.segments());
        self.ssthresh = ((self.cwnd as f64 * (1.0 - b)) as u64).max(2 * self.smss);
        self.earned = 0.0;
    }
}

impl<R: Response> CongestionControl for Aimd<R> {
    fn on_ack(&mut self, _now: Instant, ack: &AckSample) {
        if self.cwnd < self.ssthresh {
            // RFC 5681 eq. 2: cwnd += min(N, SMSS).
            self.cwnd += ack.bytes_acked.min(self.smss);
            return;
        }
        // A window of ACKed bytes earns a(w) segments.
        let w = self.segments();
        self.earned += self.response.increase(w) * ack.bytes_acked as f64 / self.cwnd as f64;
        if self.earned >= 1.0 {
            let whole = self.earned.floor();
            self.cwnd += whole as u64 * self.smss;
            self.earned -= whole;
        }
    }

    fn on_loss(&mut self, _now: Instant, _in_flight: u64) {
        self.reduce();
        self.cwnd = self.ssthresh;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.cwnd = self.ssthresh;
    }

    fn on_timeout(&mut self, _now: Instant, _in_flight: u64) {
        self.reduce();
        self.cwnd = self.smss;
    }

    fn on_timeout_in_episode(&mut self, _now: Instant, _in_flight: u64) {
        self.cwnd = self.smss;
        self.earned = 0.0;
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reno as a response: a = 1, b = 1/2.
    #[derive(Debug, Clone)]
    struct Reno;
    impl Response for Reno {
        fn increase(&self, _w: f64) -> f64 {
            1.0
        }
        fn decrease(&self, _w: f64) -> f64 {
            0.5
        }
    }

    #[test]
    fn a_window_of_acks_adds_the_increase_and_a_loss_takes_the_decrease() {
        let smss = 1000;
        let mut c = Aimd::new(Reno, smss, 10 * smss);
        c.on_loss(Instant::ZERO, 0);
        assert_eq!(c.window(), 5 * smss);
        // Delayed ACKs (two segments each) earn the same per window.
        for _ in 0..2 {
            c.on_ack(Instant::ZERO, &AckSample::new(2 * smss, 0, None));
        }
        assert_eq!(c.window(), 5 * smss);
        c.on_ack(Instant::ZERO, &AckSample::new(smss, 0, None));
        assert_eq!(c.window(), 6 * smss);
        c.on_timeout(Instant::ZERO, 0);
        assert_eq!((c.window(), c.ssthresh()), (smss, 3 * smss));
    }
}
