//! HyStart++ (Balasubramanian, Huang, Olson, RFC 9406, 2023): a slow start that
//! leaves before the first loss, when the round trip time starts to grow.
//!
//! Standard slow start doubles the window each round until a loss; on a long path
//! with a buffer of one BDP the last doubling overflows it by up to a window's
//! worth of packets. HyStart++ watches the smallest RTT of each round:
//!
//! ```text
//! RFC 9406 §4.2, in standard slow start, per ACK:
//!   cwnd += min(N, L * SMSS)                       (L = 8 unpaced, infinite paced)
//!   if rttSampleCount >= N_RTT_SAMPLE and both rounds' minimum RTTs are known:
//!     RttThresh = max(MIN_RTT_THRESH, min(lastRoundMinRTT / MIN_RTT_DIVISOR, MAX_RTT_THRESH))
//!     if currentRoundMinRTT >= lastRoundMinRTT + RttThresh:
//!       cssBaselineMinRtt = currentRoundMinRTT; enter Conservative Slow Start (CSS)
//! in CSS, per ACK:
//!   cwnd += min(N, L * SMSS) / CSS_GROWTH_DIVISOR
//!   if rttSampleCount >= N_RTT_SAMPLE and currentRoundMinRTT < cssBaselineMinRtt:
//!     the rise was spurious: back to standard slow start
//!   after CSS_ROUNDS rounds of CSS: ssthresh = cwnd, congestion avoidance
//! a loss in either phase ends HyStart++ (the controller's own response applies).
//! ```
//!
//! Linux's CUBIC runs its own HyStart (Ha, Rhee, "Taming the Elephants: New TCP
//! Slow Start", Computer Networks 55(9), 2011; `tcp_cubic.c`), which the RFC grew
//! from; both are here, as [`HyStartMode`]s. Linux runs two tests from a window of
//! 16 segments, and on either leaves slow start at once (ssthresh = cwnd), with no
//! conservative phase; its slow start adds every acknowledged segment:
//! - **ACK train**: ACKs no more than 2 ms apart since the round began, for longer
//!   than half the smallest RTT (unpaced; Linux's allowance for TSO and pacing
//!   delays, at most 1 ms, is not added). A round whose ACKs keep coming for half
//!   an RTT means the bottleneck has been busy that long: the window is about one
//!   BDP. This catches a fast path before any queue shows, which the delay test
//!   cannot when each round goes out as a burst behind an empty queue.
//! - **Delay**: the smallest of the round's first 8 RTT samples above the
//!   connection's smallest RTT by an eighth of it (clamped to 4-16 ms): the same
//!   threshold as HyStart++, against the smallest RTT ever, not the last round's.
//!
//! Constants as the RFC recommends: MIN_RTT_THRESH 4 ms, MAX_RTT_THRESH 16 ms,
//! MIN_RTT_DIVISOR 8, N_RTT_SAMPLE 8, CSS_GROWTH_DIVISOR 4, CSS_ROUNDS 5, L 8 (the
//! engines' window-limited senders are unpaced). Rounds are marked as the RFC's
//! `windowEnd = SND.NXT`: a round ends when an ACK measures a segment sent after it
//! began ([`Rounds`]). Only the initial slow start runs it (the RFC leaves the slow
//! start after a timeout to the implementation; this one runs the standard one).

use super::segments::Rounds;
use super::AckSample;
use crate::time::{Duration, Instant};

const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
const N_RTT_SAMPLE: u32 = 8;
const CSS_GROWTH_DIVISOR: u64 = 4;
const CSS_ROUNDS: u32 = 5;
/// Segments one ACK may add, for an unpaced sender.
const L: u64 = 8;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    SlowStart,
    /// Conservative Slow Start since the RTT rose to `baseline`, `rounds` ago.
    Css {
        baseline: Duration,
        rounds: u32,
    },
    /// Ended by a loss or by CSS's last round.
    Done,
}

/// Which HyStart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HyStartMode {
    /// HyStart++, RFC 9406: last round's minimum RTT, then Conservative Slow Start.
    Rfc9406,
    /// Linux CUBIC's HyStart delay test: the smallest RTT, then out at once.
    Linux,
}

/// Linux's `hystart_low_window`: no test below 16 segments.
const LINUX_LOW_WINDOW: u64 = 16;
/// Linux's `hystart_ack_delta_us`: ACKs at most this far apart form a train.
const ACK_DELTA: Duration = Duration::from_millis(2);

/// What slow start does with an ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowStartStep {
    /// Grow cwnd by this many bytes.
    Grow(u64),
    /// Leave slow start now: ssthresh = cwnd.
    Avoid,
}

/// HyStart++'s state for one connection.
#[derive(Debug, Clone)]
pub struct HyStart {
    mode: HyStartMode,
    phase: Phase,
    /// The smallest RTT yet (Linux's `delay_min`).
    min_rtt: Option<Duration>,
    /// Linux: when this round began, and the last ACK of its train.
    round_start: Instant,
    last_ack: Instant,
    rounds: Rounds,
    last_round_min_rtt: Option<Duration>,
    current_round_min_rtt: Option<Duration>,
    rtt_sample_count: u32,
}

impl HyStart {
    /// HyStart of `mode` from the connection's start at `now`.
    pub fn new(mode: HyStartMode, now: Instant) -> Self {
        HyStart {
            mode,
            min_rtt: None,
            round_start: now,
            last_ack: now,
            phase: Phase::SlowStart,
            rounds: Rounds::new(now),
            last_round_min_rtt: None,
            current_round_min_rtt: None,
            rtt_sample_count: 0,
        }
    }

    /// Whether it still governs slow start (no loss yet, CSS not over).
    pub fn active(&self) -> bool {
        self.phase != Phase::Done
    }

    /// Whether it is in Conservative Slow Start.
    pub fn in_css(&self) -> bool {
        matches!(self.phase, Phase::Css { .. })
    }

    /// A loss or timeout: HyStart++ is over.
    pub fn on_congestion(&mut self) {
        self.phase = Phase::Done;
    }

    /// An ACK in slow start at a window of `cwnd` bytes of `smss`-byte segments:
    /// how cwnd changes.
    pub fn on_ack(&mut self, now: Instant, ack: &AckSample, smss: u64, cwnd: u64) -> SlowStartStep {
        if self.mode == HyStartMode::Linux {
            return self.on_ack_linux(now, ack, smss, cwnd);
        }
        if self.rounds.ended(now, ack) {
            //# lastRoundMinRTT = currentRoundMinRTT
            //# currentRoundMinRTT = infinity
            //# rttSampleCount = 0
            self.last_round_min_rtt = self.current_round_min_rtt.take();
            self.rtt_sample_count = 0;
            if let Phase::Css { baseline, rounds } = self.phase {
                //# If CSS_ROUNDS rounds are complete, enter congestion avoidance by
                //# setting the ssthresh to the current cwnd.
                if rounds + 1 >= CSS_ROUNDS {
                    self.phase = Phase::Done;
                    return SlowStartStep::Avoid;
                }
                self.phase = Phase::Css {
                    baseline,
                    rounds: rounds + 1,
                };
            }
        }
        if let Some(rtt) = ack.rtt {
            let cur = self.current_round_min_rtt.map_or(rtt, |c| c.min(rtt));
            self.current_round_min_rtt = Some(cur);
            self.rtt_sample_count += 1;
        }
        let grow = ack.bytes_acked.min(L * smss);
        let enough = self.rtt_sample_count >= N_RTT_SAMPLE;
        match (
            self.phase,
            self.current_round_min_rtt,
            self.last_round_min_rtt,
        ) {
            (Phase::SlowStart, Some(cur), Some(last)) if enough => {
                let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                if cur >= last + thresh {
                    self.phase = Phase::Css {
                        baseline: cur,
                        rounds: 0,
                    };
                }
                SlowStartStep::Grow(grow)
            }
            (Phase::Css { baseline, .. }, Some(cur), _) => {
                if enough && cur < baseline {
                    // The RTT fell back below the baseline: the rise was spurious.
                    self.phase = Phase::SlowStart;
                    return SlowStartStep::Grow(grow);
                }
                SlowStartStep::Grow(grow / CSS_GROWTH_DIVISOR)
            }
            (Phase::Css { .. }, None, _) => SlowStartStep::Grow(grow / CSS_GROWTH_DIVISOR),
            _ => SlowStartStep::Grow(grow),
        }
    }

    /// Linux's delay test (`hystart_update`, HYSTART_DELAY).
    fn on_ack_linux(
        &mut self,
        now: Instant,
        ack: &AckSample,
        smss: u64,
        cwnd: u64,
    ) -> SlowStartStep {
        if self.rounds.ended(now, ack) {
            // `bictcp_hystart_reset`.
            self.current_round_min_rtt = None;
            self.rtt_sample_count = 0;
            self.round_start = now;
            self.last_ack = now;
        }
        let low = cwnd < LINUX_LOW_WINDOW * smss;
        // The ACK train: ACKs no more than 2 ms apart since the round began, for
        // longer than half the smallest RTT, mean the bottleneck has been busy for
        // half a round trip: the window has about reached the path's BDP.
        if let Some(min) = self.min_rtt.filter(|_| !low) {
            if now.saturating_duration_since(self.last_ack) <= ACK_DELTA {
                self.last_ack = now;
                if now.saturating_duration_since(self.round_start) > min / 2 {
                    self.phase = Phase::Done;
                    return SlowStartStep::Avoid;
                }
            }
        }
        if let Some(rtt) = ack.rtt {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
            if self.rtt_sample_count < N_RTT_SAMPLE {
                // The round's RTT: the smallest of its first 8 samples.
                let cur = self.current_round_min_rtt.map_or(rtt, |c| c.min(rtt));
                self.current_round_min_rtt = Some(cur);
                self.rtt_sample_count += 1;
            } else if let (Some(cur), Some(min)) = (self.current_round_min_rtt, self.min_rtt) {
                let thresh = (min / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                if !low && cur > min + thresh {
                    self.phase = Phase::Done;
                    return SlowStartStep::Avoid;
                }
            }
        }
        SlowStartStep::Grow(ack.bytes_acked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMSS: u64 = 1000;

    /// One round of `n` ACKs of two segments each, 1 ms apart, measuring `rtt_ms`;
    /// the first ends the round before it (its segment left at `s`, ms, when that
    /// round began). Returns the bytes grown, whether it asked to leave slow start,
    /// and when this round began (its first ACK).
    fn round(h: &mut HyStart, s: u64, rtt_ms: u64, n: u64) -> (u64, bool, u64) {
        let rtt = Duration::from_millis(rtt_ms);
        let (mut grown, mut avoid) = (0, false);
        for k in 0..n {
            let at = Instant::from_nanos((s + rtt_ms + k) * 1_000_000);
            let ack = AckSample::new(2 * SMSS, 0, None).with_rtt(Some(rtt));
            match h.on_ack(at, &ack, SMSS, 100 * SMSS) {
                SlowStartStep::Grow(b) => grown += b,
                SlowStartStep::Avoid => avoid = true,
            }
        }
        (grown, avoid, s + rtt_ms)
    }

    #[test]
    fn a_rising_rtt_enters_css_and_five_css_rounds_end_slow_start() {
        let mut h = HyStart::new(HyStartMode::Rfc9406, Instant::from_nanos(1_000_000_000));
        let mut s = 1000;
        // Flat RTT: standard slow start, each ACK of two segments adds two.
        for _ in 0..3 {
            let (grown, avoid, next) = round(&mut h, s, 100, 10);
            assert_eq!((grown, avoid), (20 * SMSS, false));
            s = next;
        }
        // The RTT rises by 12.5 ms, the threshold at 100 ms: CSS after the 8th
        // sample, a quarter of the growth from there.
        let (grown, _, next) = round(&mut h, s, 113, 10);
        assert!(h.in_css());
        assert_eq!(grown, 8 * 2 * SMSS + 2 * SMSS / 4 * 2);
        s = next;
        let mut ended = false;
        for r in 0..CSS_ROUNDS {
            let (_, avoid, next) = round(&mut h, s, 113, 10);
            s = next;
            if avoid {
                ended = true;
                assert_eq!(r + 1, CSS_ROUNDS, "CSS lasted {} rounds", r + 1);
                break;
            }
        }
        assert!(ended && !h.active());
    }

    #[test]
    fn a_spurious_rise_returns_to_slow_start() {
        let mut h = HyStart::new(HyStartMode::Rfc9406, Instant::from_nanos(1_000_000_000));
        let (_, _, s) = round(&mut h, 1000, 100, 10);
        let (_, _, s) = round(&mut h, s, 120, 10);
        assert!(h.in_css());
        // The next round's minimum is back below the CSS baseline (120 ms).
        round(&mut h, s, 101, 10);
        assert!(h.active() && !h.in_css());
    }

    #[test]
    fn a_small_rise_stays_in_slow_start() {
        let mut h = HyStart::new(HyStartMode::Rfc9406, Instant::from_nanos(1_000_000_000));
        let (_, _, s) = round(&mut h, 1000, 100, 10);
        // 100 ms / 8 = 12.5 ms is the threshold; 10 ms is below it.
        round(&mut h, s, 110, 10);
        assert!(!h.in_css());
    }

    #[test]
    fn linux_leaves_slow_start_at_once_when_a_round_starts_late() {
        let mut h = HyStart::new(HyStartMode::Linux, Instant::from_nanos(1_000_000_000));
        let (grown, avoid, s) = round(&mut h, 1000, 100, 10);
        // Every acknowledged byte, no cap.
        assert_eq!((grown, avoid), (20 * SMSS, false));
        // 110 ms is under 100 + 12.5: stay. 113 ms: out, at the 9th ACK (after the
        // round's first 8 samples), without a conservative phase.
        let (_, avoid, s) = round(&mut h, s, 110, 10);
        assert!(!avoid);
        let (grown, avoid, _) = round(&mut h, s, 113, 10);
        assert!(avoid && !h.active());
        assert_eq!(grown, 8 * 2 * SMSS);
    }

    #[test]
    fn linux_leaves_slow_start_when_an_ack_train_outlasts_half_the_rtt() {
        let mut h = HyStart::new(HyStartMode::Linux, Instant::from_nanos(1_000_000_000));
        let (_, _, s) = round(&mut h, 1000, 100, 10);
        // A round of ACKs 1 ms apart at a flat 100 ms: the train passes 50 ms at
        // its 52nd ACK (the first starts it at 0 ms).
        let (_, avoid, _) = round(&mut h, s, 100, 51);
        assert!(!avoid && h.active());
        let mut h = HyStart::new(HyStartMode::Linux, Instant::from_nanos(1_000_000_000));
        let (_, _, s) = round(&mut h, 1000, 100, 10);
        let (_, avoid, _) = round(&mut h, s, 100, 52);
        assert!(avoid && !h.active());
        // ACKs 3 ms apart are no train.
        let mut h = HyStart::new(HyStartMode::Linux, Instant::from_nanos(1_000_000_000));
        let (_, _, s) = round(&mut h, 1000, 100, 10);
        for k in 0..40u64 {
            let at = Instant::from_nanos((s + 100 + 3 * k) * 1_000_000);
            let ack = AckSample::new(2 * SMSS, 0, None).with_rtt(Some(Duration::from_millis(100)));
            assert_eq!(
                h.on_ack(at, &ack, SMSS, 100 * SMSS),
                SlowStartStep::Grow(2 * SMSS)
            );
        }
    }
}
