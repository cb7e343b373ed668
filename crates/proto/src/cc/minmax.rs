//! A windowed running maximum (or minimum) in constant space: Kathleen Nichols'
//! algorithm, as Linux keeps BBR's bandwidth filter (`lib/win_minmax.c`).
//!
//! It keeps the best, second-best and third-best samples, each the best of a later
//! part of the window, so when the best ages out the second is already the best of
//! what remains. The result is exact when samples arrive at least a third of a window
//! apart and within a third of a window of exact otherwise, which is all a
//! congestion controller needs (Linux's comment: "an estimate of the best … within
//! 1/4 of a window").
//!
//! Time is whatever the caller counts in: BBR's bandwidth filter counts round trips,
//! so its window is ten rounds whatever the RTT.

/// One sample: when, and what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Sample {
    t: u64,
    v: u64,
}

/// A windowed running maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WindowedMax {
    s: [Sample; 3],
}

impl WindowedMax {
    /// The best sample in the window (0 before the first).
    pub fn get(&self) -> u64 {
        self.s[0].v
    }

    /// Forgets everything and starts again from `v` at `t`.
    pub fn reset(&mut self, t: u64, v: u64) -> u64 {
        self.s = [Sample { t, v }; 3];
        v
    }

    /// Lowers every kept sample above `v` to `v`: a bound learned from outside
    /// the samples (their times, and so the window, are kept).
    pub fn limit(&mut self, v: u64) {
        for s in &mut self.s {
            s.v = s.v.min(v);
        }
    }

    /// Adds the sample `v` taken at `t`, for a window of `win`, and returns the
    /// maximum over the window.
    pub fn update(&mut self, win: u64, t: u64, v: u64) -> u64 {
        let new = Sample { t, v };
        // A new best, or nothing left in the window: start again from this sample.
        if v >= self.s[0].v || t.saturating_sub(self.s[2].t) > win {
            return self.reset(t, v);
        }
        if v >= self.s[1].v {
            self.s[1] = new;
            self.s[2] = new;
        } else if v >= self.s[2].v {
            self.s[2] = new;
        }
        self.subwin_update(win, new)
    }

    /// As the window slides, promotes the second and third choices when the best
    /// ages out, and keeps the choices spread over the window.
    fn subwin_update(&mut self, win: u64, new: Sample) -> u64 {
        let dt = new.t.saturating_sub(self.s[0].t);
        if dt > win {
            // The best is older than the window: the second takes its place, the
            // third the second's, and the new sample the third's. The second may be
            // out of the window too, so check once more.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = new;
            if new.t.saturating_sub(self.s[0].t) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = new;
            }
        } else if self.s[1].t == self.s[0].t && dt > win / 4 {
            // A quarter of the window passed with no second choice: take one, so a
            // fall of the best is not seen a whole window late.
            self.s[1] = new;
            self.s[2] = new;
        } else if self.s[2].t == self.s[1].t && dt > win / 2 {
            // Half of the window passed with no third choice: take one.
            self.s[2] = new;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-worked: a window of 10, a peak at t=2 that ages out at t=13, after
    /// which the best of the later samples rules.
    #[test]
    fn a_peak_ages_out_of_the_window() {
        let mut m = WindowedMax::default();
        assert_eq!(m.update(10, 0, 50), 50);
        assert_eq!(m.update(10, 2, 100), 100);
        // Lower samples do not displace the peak while it is in the window.
        for t in 3..=12 {
            assert_eq!(m.update(10, t, 60 + t), 100, "t={t}");
        }
        // At t=13 the peak is 11 old: the best of what came after rules (72 at t=12
        // or later, within a quarter window of the true maximum's time).
        let after = m.update(10, 13, 61);
        assert!((70..=72).contains(&after), "{after}");
    }

    /// A new maximum replaces everything at once.
    #[test]
    fn a_new_best_resets() {
        let mut m = WindowedMax::default();
        m.update(10, 0, 5);
        m.update(10, 1, 3);
        assert_eq!(m.update(10, 2, 9), 9);
        assert_eq!(m.s, [Sample { t: 2, v: 9 }; 3]);
    }

    /// A bound lowers the samples above it and keeps their times: the bounded
    /// peak still ages out when the peak would have.
    #[test]
    fn a_limit_lowers_what_is_held() {
        let mut m = WindowedMax::default();
        m.update(10, 0, 50);
        m.update(10, 2, 400);
        m.limit(100);
        assert_eq!(m.get(), 100);
        assert_eq!(m.update(10, 3, 80), 100);
        assert!(
            m.update(10, 13, 60) <= 80,
            "the bounded peak aged out at t=13"
        );
    }

    /// Against a brute-force maximum over random sample streams: never above the
    /// true maximum of the last `win`, and never below the true maximum of the last
    /// `win / 2` (the estimate's promise with one sample per time step).
    #[test]
    fn tracks_the_brute_force_maximum() {
        let mut state = 0x1234_5678_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % 1000
        };
        let win = 12;
        let mut m = WindowedMax::default();
        let mut history = Vec::new();
        for t in 0..5000u64 {
            let v = next();
            history.push(v);
            let got = m.update(win, t, v);
            let lo = t.saturating_sub(win) as usize;
            let full = *history[lo..].iter().max().unwrap();
            let half = *history[t.saturating_sub(win / 2) as usize..]
                .iter()
                .max()
                .unwrap();
            assert!(
                got <= full && got >= half,
                "t={t} got {got} in [{half}, {full}]"
            );
        }
    }
}
