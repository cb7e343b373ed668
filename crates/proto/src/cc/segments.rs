//! Linux's window arithmetic in whole segments, for the controllers that follow a
//! Linux module (BIC, H-TCP, Illinois, Vegas, Westwood+): `snd_cwnd` and
//! `snd_ssthresh` in segments, `snd_cwnd_cnt` counting acknowledged segments
//! toward the next increment, and the kernel's `tcp_slow_start`,
//! `tcp_cong_avoid_ai` and `tcp_reno_cong_avoid` (net/ipv4/tcp_cong.c).
//!
//! The engines count bytes; this converts an ACK's bytes to whole segments and
//! carries the remainder to the next ACK, so a stream of partial segments earns
//! what Linux's `pkts_acked` would.
//!
//! [`Rounds`] marks round trips as Linux's modules do with `snd_nxt`: a round
//! ends when an ACK measures a segment sent after it began.

use super::AckSample;
use crate::time::Instant;

/// `snd_cwnd`, `snd_ssthresh` and `snd_cwnd_cnt`, in segments.
#[derive(Debug, Clone)]
pub struct SegmentWindow {
    smss: u64,
    /// `snd_cwnd`.
    pub cwnd: u64,
    /// `snd_ssthresh` (`u64::MAX` until the first loss).
    pub ssthresh: u64,
    /// `snd_cwnd_cnt`: segments acknowledged since the last increment.
    pub cnt: u64,
    /// Acknowledged bytes short of a whole segment.
    residue: u64,
}

impl SegmentWindow {
    /// `cwnd` of `initial_window` bytes (at least one segment), infinite ssthresh.
    pub fn new(smss: u64, initial_window: u64) -> Self {
        SegmentWindow {
            smss,
            cwnd: (initial_window / smss).max(1),
            ssthresh: u64::MAX,
            cnt: 0,
            residue: 0,
        }
    }

    /// The sender's maximum segment size.
    pub fn smss(&self) -> u64 {
        self.smss
    }

    /// Whole segments acknowledged by `ack`, carrying the rest.
    pub fn acked(&mut self, ack: &AckSample) -> u64 {
        self.residue += ack.bytes_acked;
        let segs = self.residue / self.smss;
        self.residue %= self.smss;
        segs
    }

    /// `tcp_in_slow_start`.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// `tcp_slow_start`: grows cwnd by `acked` up to ssthresh and returns the
    /// segments left over for congestion avoidance.
    pub fn slow_start(&mut self, acked: u64) -> u64 {
        let cwnd = (self.cwnd + acked).min(self.ssthresh);
        let left = acked - (cwnd - self.cwnd);
        self.cwnd = cwnd;
        left
    }

    /// `tcp_cong_avoid_ai`: one segment per `w` acknowledged (several at once if
    /// a stretch ACK earns them).
    pub fn cong_avoid_ai(&mut self, w: u64, acked: u64) {
        let w = w.max(1);
        if self.cnt >= w {
            self.cnt = 0;
            self.cwnd += 1;
        }
        self.cnt += acked;
        if self.cnt >= w {
            let delta = self.cnt / w;
            self.cnt -= delta * w;
            self.cwnd += delta;
        }
    }

    /// `tcp_reno_cong_avoid`: slow start, then one segment per window.
    pub fn reno_cong_avoid(&mut self, acked: u64) {
        let mut acked = acked;
        if self.in_slow_start() {
            acked = self.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.cong_avoid_ai(self.cwnd, acked);
    }

    /// Enters recovery with `ssthresh` segments (at least 2): cwnd drops to it
    /// (the engines have no PRR; cwnd is ssthresh through the episode).
    pub fn enter_recovery(&mut self, ssthresh: u64) {
        self.ssthresh = ssthresh.max(2);
        self.cwnd = self.ssthresh;
        self.cnt = 0;
    }

    /// A retransmission timeout with `ssthresh` segments: cwnd is one segment
    /// (`tcp_enter_loss`).
    pub fn enter_loss(&mut self, ssthresh: u64) {
        self.ssthresh = ssthresh.max(2);
        self.cwnd = 1;
        self.cnt = 0;
    }

    /// cwnd in bytes.
    pub fn window_bytes(&self) -> u64 {
        self.cwnd * self.smss
    }

    /// ssthresh in bytes.
    pub fn ssthresh_bytes(&self) -> u64 {
        self.ssthresh.saturating_mul(self.smss)
    }
}

/// Round trips, as Linux's modules mark them with `snd_nxt`.
#[derive(Debug, Clone, Copy)]
pub struct Rounds {
    start: Instant,
}

impl Rounds {
    /// The first round begins at `now`.
    pub fn new(now: Instant) -> Self {
        Rounds { start: now }
    }

    /// Starts a new round at `now` (a module's reset of its `snd_nxt` mark).
    pub fn restart(&mut self, now: Instant) {
        self.start = now;
    }

    /// Whether `ack` ends the round (it measured a segment sent after the round
    /// began); if so the next round begins now.
    pub fn ended(&mut self, now: Instant, ack: &AckSample) -> bool {
        match ack.sent_at(now) {
            Some(sent) if sent >= self.start => {
                self.start = now;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_stops_at_ssthresh_and_hands_over_the_rest() {
        let mut w = SegmentWindow::new(1000, 10_000);
        w.ssthresh = 12;
        assert_eq!(w.slow_start(5), 3);
        assert_eq!(w.cwnd, 12);
        // Congestion avoidance: one segment per cwnd acknowledged.
        w.cong_avoid_ai(12, 3);
        assert_eq!((w.cwnd, w.cnt), (12, 3));
        w.cong_avoid_ai(12, 9);
        assert_eq!((w.cwnd, w.cnt), (13, 0));
        // A stretch ACK earning two increments gets both.
        w.cong_avoid_ai(4, 9);
        assert_eq!((w.cwnd, w.cnt), (15, 1));
    }

    #[test]
    fn partial_segments_carry_to_the_next_ack() {
        let mut w = SegmentWindow::new(1000, 10_000);
        let ack = AckSample::new(1500, 0, None);
        assert_eq!(w.acked(&ack), 1);
        assert_eq!(w.acked(&ack), 2);
    }
}
