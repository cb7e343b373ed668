//! HighSpeed TCP (Floyd, RFC 3649, 2003).
//!
//! Below `Low_Window` (38 segments) it is standard TCP. Above, the increase a(w)
//! and decrease b(w) are chosen so that the response function is a line on log-log
//! axes through (`Low_P`, `Low_Window`) and (`High_P`, `High_Window`):
//!
//! ```text
//! RFC 3649 §5:  w = 0.12 / p^0.835                                   (response)
//!   b(w) = (High_Decrease - 0.5) (log(w) - log(W)) / (log(W_1) - log(W)) + 0.5
//!   p(w) = exp((log(w) - log(W)) / (log(W_1) - log(W)) (log(P_1) - log(P)) + log(P))
//!   a(w) = w^2 p(w) 2 b(w) / (2 - b(w))
//! with W = Low_Window = 38, W_1 = High_Window = 83000, P = Low_P = 1.5/W^2,
//! P_1 = High_P = 10^-7, High_Decrease = 0.1.
//! ```
//!
//! Linux's `tcp_highspeed` tabulates the same a(w) and b(w) at 73 windows and
//! steps between them; this file computes the RFC's functions at the current
//! window. Neither runs the Limited Slow-Start (RFC 3742) the RFC suggests.

use super::aimd::{Aimd, Response};

/// RFC 3649's parameters.
const LOW_WINDOW: f64 = 38.0;
const HIGH_WINDOW: f64 = 83_000.0;
const HIGH_P: f64 = 1e-7;
const HIGH_DECREASE: f64 = 0.1;

/// HighSpeed TCP's rule.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HighSpeedResponse;

impl HighSpeedResponse {
    /// Where `w` lies between Low_Window and High_Window, on a log scale (0..1).
    fn position(w: f64) -> f64 {
        (w.ln() - LOW_WINDOW.ln()) / (HIGH_WINDOW.ln() - LOW_WINDOW.ln())
    }

    /// p(w): the loss rate at which the response function gives window `w`.
    pub fn loss_rate(w: f64) -> f64 {
        let low_p = 1.5 / (LOW_WINDOW * LOW_WINDOW);
        (Self::position(w) * (HIGH_P.ln() - low_p.ln()) + low_p.ln()).exp()
    }
}

impl Response for HighSpeedResponse {
    fn increase(&self, w: f64) -> f64 {
        if w <= LOW_WINDOW {
            return 1.0;
        }
        let b = self.decrease(w);
        w * w * Self::loss_rate(w) * 2.0 * b / (2.0 - b)
    }
    fn decrease(&self, w: f64) -> f64 {
        if w <= LOW_WINDOW {
            return 0.5;
        }
        (HIGH_DECREASE - 0.5) * Self::position(w) + 0.5
    }
}

/// HighSpeed TCP.
pub type HighSpeed = Aimd<HighSpeedResponse>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of RFC 3649's Appendix B table (the window at which a(w) reaches each
    /// whole number of segments, with b(w) to two places; Linux's `tcp_highspeed`
    /// carries the same rows), within the rounding of its printed values.
    #[test]
    fn a_and_b_match_the_rfcs_table() {
        let r = HighSpeedResponse;
        for (w, a, b) in [
            (38.0, 1.0, 0.50),
            (118.0, 2.0, 0.44),
            (221.0, 3.0, 0.41),
            (347.0, 4.0, 0.38),
            (1058.0, 8.0, 0.33),
            (5036.0, 20.0, 0.25),
            (10661.0, 30.0, 0.21),
        ] {
            assert!(
                (r.increase(w) / a - 1.0).abs() < 0.06,
                "a({w}) = {}",
                r.increase(w)
            );
            assert!(
                (r.decrease(w) - b).abs() < 0.006,
                "b({w}) = {}",
                r.decrease(w)
            );
        }
    }
}
