//! Random Early Detection (Floyd and Jacobson, "Random Early Detection Gateways for
//! Congestion Avoidance", IEEE/ACM Transactions on Networking, 1993), the active
//! queue management RFC 2309 (Braden et al., 1998) recommends in routers, with
//! Floyd's "gentle" extension (2000) and ECN marking (RFC 3168), and weighted
//! profiles per drop precedence (WRED) for the Assured Forwarding PHB (RFC 2597).
//!
//! This module decides; it holds no packets. The caller reports the instantaneous
//! queue at each arrival and whether the queue has been idle, and gets back whether
//! to enqueue, mark or drop. The simulator's routers and the emulator's links use
//! the same state machine.
//!
//! The paper's algorithm, quoted beside each step below:
//!
//! ```text
//! for each packet arrival
//!     calculate the new average queue size avg:
//!         if the queue is nonempty
//!             avg <- (1 - w_q) avg + w_q q
//!         else
//!             m <- f(time - q_time)
//!             avg <- (1 - w_q)^m avg
//!     if min_th <= avg < max_th
//!         increment count
//!         calculate probability p_a:
//!             p_b <- max_p (avg - min_th)/(max_th - min_th)
//!             p_a <- p_b/(1 - count . p_b)
//!         with probability p_a:
//!             mark the arriving packet
//!             count <- 0
//!     else if max_th <= avg
//!         mark the arriving packet
//!         count <- 0
//!     else count <- -1
//! when queue becomes empty
//!     q_time <- time
//! ```

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::rng;

/// Salt of the streams RED draws its drop decisions from.
const SALT: u64 = 0x5245_445f_5245_4421;

/// One RED profile: thresholds and the drop curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RedParams {
    /// Below this average queue nothing is dropped (packets, or bytes with `bytes`).
    pub min_th: f64,
    /// At this average the drop probability reaches `max_p`; above it every packet
    /// is dropped (or, with `gentle`, the probability rises to 1 at twice it).
    pub max_th: f64,
    /// Drop probability at `max_th`.
    pub max_p: f64,
    /// Weight of the average, w_q (the paper suggests 0.002).
    pub w_q: f64,
    /// Floyd's gentle mode: between `max_th` and `2 max_th` the probability rises
    /// linearly from `max_p` to 1 instead of jumping to 1.
    pub gentle: bool,
    /// Mark ECN-capable packets Congestion Experienced instead of dropping them,
    /// while the average is below `max_th` (RFC 3168 §7: above it, drop).
    pub ecn: bool,
    /// Thresholds and the average count bytes instead of packets.
    pub bytes: bool,
}

impl RedParams {
    /// A profile between `min_th` and `max_th` (packets) with the paper's other
    /// recommendations: max_p 0.1, w_q 0.002; Floyd's gentle mode on; no ECN.
    pub fn with_thresholds(min_th: f64, max_th: f64) -> RedParams {
        RedParams {
            min_th,
            max_th,
            max_p: 0.1,
            w_q: 0.002,
            gentle: true,
            ecn: false,
            bytes: false,
        }
    }

    /// The paper's recommended shape for a queue of `limit` packets: min_th a
    /// fifth of it, max_th three times min_th, and [`RedParams::with_thresholds`].
    pub fn for_limit(limit: f64) -> RedParams {
        let min_th = (limit / 5.0).max(1.0);
        RedParams::with_thresholds(min_th, 3.0 * min_th)
    }

    /// Checks the parameters make a curve, naming the one that does not.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.min_th >= 0.0 && self.min_th.is_finite()) {
            return Err(format!("RED min_th {} must be 0 or more", self.min_th));
        }
        if !(self.max_th > self.min_th && self.max_th.is_finite()) {
            return Err(format!(
                "RED max_th {} must be above min_th {}",
                self.max_th, self.min_th
            ));
        }
        if !(self.max_p > 0.0 && self.max_p <= 1.0) {
            return Err(format!("RED max_p {} must be in (0, 1]", self.max_p));
        }
        if !(self.w_q > 0.0 && self.w_q <= 1.0) {
            return Err(format!("RED w_q {} must be in (0, 1]", self.w_q));
        }
        Ok(())
    }

    /// p_b, the drop probability the curve gives for an average queue `avg`
    /// (before the paper's spreading by `count`).
    pub fn curve(&self, avg: f64) -> f64 {
        if avg < self.min_th {
            0.0
        } else if avg < self.max_th {
            // p_b <- max_p (avg - min_th)/(max_th - min_th)
            self.max_p * (avg - self.min_th) / (self.max_th - self.min_th)
        } else if self.gentle && avg < 2.0 * self.max_th {
            // Gentle: from max_p at max_th to 1 at 2 max_th.
            self.max_p + (1.0 - self.max_p) * (avg - self.max_th) / self.max_th
        } else {
            1.0
        }
    }

    /// The long-run fraction of packets the algorithm drops while the average
    /// holds at `avg`. Between the thresholds, spreading drops by `count` makes a
    /// gap of more than k packets after a drop have probability
    /// prod_{j=1..k} (1 - p_b / (1 - j p_b)) = (1 - (k+1) p_b) / (1 - p_b), so the
    /// gaps are near uniform up to 1/p_b (the paper's §7, "Method 2") and the rate is
    /// one over their mean, about 2 p_b; above max_th the curve is followed as is.
    pub fn drop_rate(&self, avg: f64) -> f64 {
        let pb = self.curve(avg);
        if avg >= self.max_th || pb <= 0.0 || pb >= 1.0 {
            return pb;
        }
        // E[gap] = sum over k >= 0 of P(gap > k).
        let mut mean_gap = 0.0;
        let mut k = 0.0;
        loop {
            let survive = (1.0 - (k + 1.0) * pb) / (1.0 - pb);
            if survive <= 0.0 {
                break;
            }
            mean_gap += survive;
            k += 1.0;
        }
        1.0 / mean_gap.max(1.0)
    }
}

/// The drop precedence (1, 2 or 3) of an Assured Forwarding codepoint: RFC 2597
/// §6 gives AFxy the DSCP 8x + 2y for class x in 1..=4 and precedence y in 1..=3.
pub fn af_drop_precedence(dscp: u8) -> Option<u8> {
    let (class, prec) = (dscp >> 3, (dscp >> 1) & 3);
    ((1..=4).contains(&class) && (1..=3).contains(&prec) && dscp & 1 == 0).then_some(prec)
}

/// What RED does with an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedVerdict {
    /// Enqueue it.
    Pass,
    /// Enqueue it marked Congestion Experienced.
    Mark,
    /// Drop it.
    Drop,
}

/// RED's state for one queue: the average, and per profile the count since the
/// last drop. With several profiles (WRED) they share the average, as the queue is
/// one, and each keeps its own count.
#[derive(Debug, Clone)]
pub struct Red {
    profiles: Vec<RedParams>,
    counts: Vec<i64>,
    avg: f64,
    /// When the queue last became empty, ns (the paper's q_time).
    idle_since: Option<u64>,
    /// The time one typical packet takes on the link, ns (the paper's s, for the
    /// idle decay m = (time - q_time) / s).
    typical_tx_ns: u64,
    rng: Xoshiro256PlusPlus,
}

impl Red {
    /// RED with one or more profiles (index 0 is the default), whose average
    /// decays through an idle period as if a packet of `typical_tx_ns` had left
    /// every so often; drop decisions draw from stream `index` of `seed`.
    pub fn new(profiles: Vec<RedParams>, typical_tx_ns: u64, seed: u64, index: u64) -> Red {
        assert!(!profiles.is_empty(), "RED needs at least one profile");
        Red {
            counts: vec![-1; profiles.len()],
            profiles,
            avg: 0.0,
            idle_since: Some(0),
            typical_tx_ns: typical_tx_ns.max(1),
            rng: rng::stream(seed, SALT, index),
        }
    }

    /// The average queue, in the profiles' unit.
    pub fn avg(&self) -> f64 {
        self.avg
    }

    /// The profiles.
    pub fn profiles(&self) -> &[RedParams] {
        &self.profiles
    }

    /// The queue became empty at `now` (the paper's "when queue becomes empty").
    pub fn queue_empty(&mut self, now: u64) {
        self.idle_since.get_or_insert(now);
    }

    /// Updates the average for a packet arriving at `now` to a queue holding `q`
    /// (packets or bytes), which is not empty unless [`Red::queue_empty`] said so
    /// since the last arrival.
    pub fn update_avg(&mut self, now: u64, q: f64) {
        let w = self.profiles[0].w_q;
        match self.idle_since.take() {
            // if the queue is nonempty: avg <- (1 - w_q) avg + w_q q
            None => self.avg = (1.0 - w) * self.avg + w * q,
            // else: m <- f(time - q_time); avg <- (1 - w_q)^m avg
            Some(since) => {
                let m = now.saturating_sub(since) as f64 / self.typical_tx_ns as f64;
                self.avg *= (1.0 - w).powf(m);
                if q > 0.0 {
                    self.avg = (1.0 - w) * self.avg + w * q;
                }
            }
        }
    }

    /// The verdict on a packet of `profile` (an index into the profiles; out of
    /// range means the default) arriving at `now` to a queue of `q`; `ect` says
    /// whether it may be marked instead of dropped.
    pub fn on_arrival(&mut self, now: u64, q: f64, profile: usize, ect: bool) -> RedVerdict {
        self.update_avg(now, q);
        let i = if profile < self.profiles.len() {
            profile
        } else {
            0
        };
        let p = self.profiles[i];
        let avg = self.avg;
        let early = avg >= p.min_th && avg < p.max_th;
        let forced_band = avg >= p.max_th;
        if !early && !forced_band {
            // else count <- -1
            self.counts[i] = -1;
            return RedVerdict::Pass;
        }
        let pb = p.curve(avg);
        let hit = if early {
            // increment count; p_a <- p_b/(1 - count . p_b)
            self.counts[i] += 1;
            let denom = 1.0 - self.counts[i] as f64 * pb;
            let pa = if denom <= 0.0 { 1.0 } else { pb / denom };
            self.rng.gen::<f64>() < pa
        } else if pb >= 1.0 {
            true
        } else {
            // Gentle region: the curve as it stands, no spreading.
            self.rng.gen::<f64>() < pb
        };
        if !hit {
            return RedVerdict::Pass;
        }
        self.counts[i] = 0;
        // RFC 3168 §7: mark rather than drop only while the average is below max_th.
        if p.ecn && ect && early {
            RedVerdict::Mark
        } else {
            RedVerdict::Drop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> RedParams {
        RedParams {
            min_th: 5.0,
            max_th: 15.0,
            max_p: 0.1,
            w_q: 0.002,
            gentle: false,
            ecn: false,
            bytes: false,
        }
    }

    #[test]
    fn the_average_follows_the_papers_ewma_and_idle_decay() {
        let mut red = Red::new(vec![params()], 1_000, 1, 0);
        // First arrival to an empty queue (idle since 0, at time 0): m = 0.
        red.update_avg(0, 0.0);
        assert_eq!(red.avg(), 0.0);
        let mut want = 0.0f64;
        for q in 1..=100 {
            red.update_avg(q * 10, q as f64);
            want = 0.998 * want + 0.002 * q as f64;
            assert!((red.avg() - want).abs() < 1e-12, "{q}");
        }
        // Idle for 500 typical packet times: avg <- (1 - w_q)^500 avg.
        red.queue_empty(2_000);
        red.update_avg(502_000, 0.0);
        want *= 0.998f64.powi(500);
        assert!((red.avg() - want).abs() < 1e-12);
    }

    #[test]
    fn the_curve_is_the_papers_and_gentle_extends_it() {
        let p = params();
        assert_eq!(p.curve(4.9), 0.0);
        assert!((p.curve(10.0) - 0.05).abs() < 1e-12);
        assert_eq!(p.curve(15.0), 1.0);
        let g = RedParams {
            gentle: true,
            ..params()
        };
        assert!((g.curve(15.0) - 0.1).abs() < 1e-12);
        assert!((g.curve(22.5) - 0.55).abs() < 1e-12);
        assert_eq!(g.curve(30.0), 1.0);
    }

    #[test]
    fn drops_spread_uniformly_at_the_papers_rate_for_a_held_average() {
        // Hold the average at 10 (p_b = 0.05) by giving w_q = 1 and q = 10: the
        // long-run drop rate is 2 p_b / (1 + p_b), gaps never longer than 1/p_b.
        let p = RedParams {
            w_q: 1.0,
            ..params()
        };
        let mut red = Red::new(vec![p], 1_000, 7, 0);
        let n = 200_000;
        let (mut drops, mut gap, mut longest) = (0, 0, 0);
        for i in 0..n {
            gap += 1;
            if red.on_arrival(i, 10.0, 0, false) == RedVerdict::Drop {
                drops += 1;
                longest = longest.max(gap);
                gap = 0;
            }
        }
        let want = p.drop_rate(10.0);
        let got = drops as f64 / n as f64;
        assert!((got / want - 1.0).abs() < 0.03, "{got} vs {want}");
        assert!(longest <= 20, "{longest}");
    }

    #[test]
    fn ecn_marks_below_max_th_and_drops_above() {
        let p = RedParams {
            w_q: 1.0,
            ecn: true,
            ..params()
        };
        let mut red = Red::new(vec![p], 1_000, 3, 0);
        let v: Vec<_> = (0..1000)
            .map(|i| red.on_arrival(i, 12.0, 0, true))
            .collect();
        assert!(v.contains(&RedVerdict::Mark));
        assert!(!v.contains(&RedVerdict::Drop));
        // Not ECN-capable: dropped instead.
        let v: Vec<_> = (0..1000)
            .map(|i| red.on_arrival(i, 12.0, 0, false))
            .collect();
        assert!(v.contains(&RedVerdict::Drop) && !v.contains(&RedVerdict::Mark));
        // Above max_th (not gentle): every packet dropped, ECN or not.
        assert!((0..100).all(|i| red.on_arrival(i, 16.0, 0, true) == RedVerdict::Drop));
    }

    #[test]
    fn af_codepoints_give_their_drop_precedence() {
        // AF11 = 10, AF12 = 12, AF13 = 14, AF41 = 34, AF43 = 38 (RFC 2597 §6).
        assert_eq!(af_drop_precedence(10), Some(1));
        assert_eq!(af_drop_precedence(12), Some(2));
        assert_eq!(af_drop_precedence(14), Some(3));
        assert_eq!(af_drop_precedence(34), Some(1));
        assert_eq!(af_drop_precedence(38), Some(3));
        // EF (46) and best effort (0) are not AF.
        assert_eq!(af_drop_precedence(46), None);
        assert_eq!(af_drop_precedence(0), None);
    }

    #[test]
    fn wred_drops_high_precedence_first() {
        // AF1x: AF13 (index 2) from 5 packets, AF12 from 10, AF11 from 15.
        let prof = |min_th: f64| RedParams {
            min_th,
            max_th: min_th + 10.0,
            w_q: 1.0,
            ..params()
        };
        let mut red = Red::new(vec![prof(15.0), prof(10.0), prof(5.0)], 1_000, 5, 0);
        let mut drops = [0u32; 3];
        for i in 0..30_000u64 {
            let class = (i % 3) as usize;
            if red.on_arrival(i, 12.0, class, false) == RedVerdict::Drop {
                drops[class] += 1;
            }
        }
        assert_eq!(drops[0], 0, "AF11 is below its min_th");
        assert!(drops[2] > drops[1] && drops[1] > 0, "{drops:?}");
    }
}
