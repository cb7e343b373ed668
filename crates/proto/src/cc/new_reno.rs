//! NewReno congestion control (RFC 5681 §3.1, RFC 6582), counting bytes.
//!
//! The engine does loss recovery (RFC 6675 with SACK, RFC 6582 without); this file
//! only moves `cwnd` and `ssthresh`.

use super::{AckSample, CongestionControl};
use crate::time::Instant;

/// RFC 5681 slow start and congestion avoidance.
#[derive(Debug, Clone)]
pub struct NewReno {
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acknowledged since `cwnd` last grew in congestion avoidance.
    bytes_acked: u64,
}

impl NewReno {
    /// A controller with `cwnd = initial_window` and an infinite `ssthresh`.
    pub fn new(smss: u64, initial_window: u64) -> Self {
        //= https://www.rfc-editor.org/rfc/rfc5681#section-3.1
        //# The initial value of ssthresh SHOULD be set arbitrarily high (e.g.,
        //# to the size of the largest possible advertised window)
        NewReno {
            smss,
            cwnd: initial_window,
            ssthresh: u64::MAX,
            bytes_acked: 0,
        }
    }

    fn reduce(&mut self, in_flight: u64) {
        //# ssthresh = max (FlightSize / 2, 2*SMSS)            (4)
        self.ssthresh = (in_flight / 2).max(2 * self.smss);
        self.bytes_acked = 0;
    }
}

impl CongestionControl for NewReno {
    fn on_ack(&mut self, _now: Instant, ack: &AckSample) {
        if self.cwnd < self.ssthresh {
            //# During slow start, a TCP increments cwnd by at most SMSS bytes for
            //# each ACK received that cumulatively acknowledges new data.
            //# cwnd += min (N, SMSS)                      (2)
            self.cwnd += ack.bytes_acked.min(self.smss);
        } else {
            // RFC 5681 allows cwnd += SMSS*SMSS/cwnd per ACK (3), which truncates to
            // zero once cwnd exceeds SMSS^2 bytes; we use the byte-counting form it
            // recommends instead:
            //# Another common formula that a TCP MAY use to update cwnd during
            //# congestion avoidance is given in equation (3) ... the RECOMMENDED way
            //# to increase cwnd during congestion avoidance is to count the number of
            //# bytes that have been acknowledged by ACKs for new data.
            self.bytes_acked += ack.bytes_acked;
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd += self.smss;
            }
        }
    }

    fn on_loss(&mut self, _now: Instant, in_flight: u64) {
        self.reduce(in_flight);
        // With RFC 6675's pipe-based recovery the window is not inflated: cwnd is
        // set to ssthresh at once and the engine sends while pipe < cwnd.
        self.cwnd = self.ssthresh;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        //= https://www.rfc-editor.org/rfc/rfc6582#section-3.2
        //# Set cwnd to either (1) min (ssthresh, max(FlightSize, SMSS) + SMSS)
        //# or (2) ssthresh.
        // Option (2): cwnd is already ssthresh.
        self.cwnd = self.ssthresh;
    }

    fn on_timeout(&mut self, _now: Instant, in_flight: u64) {
        self.reduce(in_flight);
        //# Furthermore, upon a timeout (as specified in [RFC2988]) cwnd MUST be set
        //# to no more than the loss window, LW, which equals 1 full-sized segment
        self.cwnd = self.smss;
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

    const SMSS: u64 = 1000;

    fn ack(bytes: u64) -> AckSample {
        AckSample::new(bytes, 0, None)
    }

    #[test]
    fn slow_start_adds_one_smss_per_ack() {
        let mut c = NewReno::new(SMSS, 10 * SMSS);
        for _ in 0..10 {
            c.on_ack(Instant::ZERO, &ack(SMSS));
        }
        assert_eq!(c.window(), 20 * SMSS);
        // A delayed ACK covering two segments still adds only SMSS (eq. 2).
        c.on_ack(Instant::ZERO, &ack(2 * SMSS));
        assert_eq!(c.window(), 21 * SMSS);
    }

    #[test]
    fn avoidance_adds_one_smss_per_window() {
        let mut c = NewReno::new(SMSS, 10 * SMSS);
        c.on_loss(Instant::ZERO, 20 * SMSS);
        assert_eq!(c.window(), 10 * SMSS);
        for _ in 0..9 {
            c.on_ack(Instant::ZERO, &ack(SMSS));
        }
        assert_eq!(c.window(), 10 * SMSS);
        c.on_ack(Instant::ZERO, &ack(SMSS));
        assert_eq!(c.window(), 11 * SMSS);
    }

    #[test]
    fn timeout_collapses_to_one_segment() {
        let mut c = NewReno::new(SMSS, 10 * SMSS);
        c.on_timeout(Instant::ZERO, 3 * SMSS);
        assert_eq!(c.window(), SMSS);
        assert_eq!(c.ssthresh(), 2 * SMSS);
    }
}
