//! Per-direction loss models, each with its own seeded RNG stream.

use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A packet-loss process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossModel {
    /// Nothing is lost.
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert-Elliott: a two-state Markov chain, evaluated per packet.
    GilbertElliott {
        /// P(good -> bad) per packet.
        p_good_to_bad: f64,
        /// P(bad -> good) per packet.
        p_bad_to_good: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
}

impl LossModel {
    /// The long-run loss rate.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => {
                let pi_bad = p_good_to_bad / (p_good_to_bad + p_bad_to_good);
                (1.0 - pi_bad) * loss_good + pi_bad * loss_bad
            }
        }
    }
}

/// A loss model with its state and RNG.
#[derive(Debug, Clone)]
pub struct LossProcess {
    model: LossModel,
    rng: Xoshiro256PlusPlus,
    bad: bool,
    /// Bernoulli `p` as a threshold on a uniform `u64`: one integer comparison per
    /// packet instead of a float conversion.
    threshold: u64,
}

/// `p` in [0, 1] as a threshold `t` with P(uniform u64 < t) = p (to 2^-64).
fn threshold(p: f64) -> u64 {
    if p >= 1.0 {
        u64::MAX
    } else {
        (p * 18_446_744_073_709_551_616.0) as u64
    }
}

impl LossProcess {
    /// A process for `model` whose RNG stream is derived from `seed` and `stream`
    /// (the link direction's index), so adding a link never changes another's draws.
    pub fn new(model: LossModel, seed: u64, stream: u64) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6c6f_6e67_6861_756c);
        for _ in 0..=stream {
            rng.jump();
        }
        let threshold = match model {
            LossModel::Bernoulli { p } => threshold(p),
            _ => 0,
        };
        LossProcess {
            model,
            rng,
            bad: false,
            threshold,
        }
    }

    /// Whether the next packet is lost.
    // Bernoulli inline (one draw and a compare, on every packet of a lossy link: as
    // a call it was 27 instructions a segment of the reference bench); the
    // Gilbert-Elliott chain out of line.
    #[inline(always)]
    pub fn lose(&mut self) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli { .. } => self.rng.next_u64() < self.threshold,
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => self.lose_gilbert_elliott([p_good_to_bad, p_bad_to_good], [loss_good, loss_bad]),
        }
    }

    /// The Gilbert-Elliott chain: the state moves (`flip`: leave good, leave bad),
    /// then the packet is lost with the new state's probability (`loss`: good, bad).
    #[inline(never)]
    fn lose_gilbert_elliott(&mut self, flip: [f64; 2], loss: [f64; 2]) -> bool {
        let state = usize::from(self.bad);
        if self.rng.gen::<f64>() < flip[state] {
            self.bad = !self.bad;
        }
        self.rng.gen::<f64>() < loss[usize::from(self.bad)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measured rate lies inside a 99.9 % binomial interval (±3.3 sigma).
    #[test]
    fn bernoulli_rate_is_binomial() {
        let p = 0.01;
        let n = 1_000_000;
        let mut l = LossProcess::new(LossModel::Bernoulli { p }, 7, 0);
        let lost = (0..n).filter(|_| l.lose()).count() as f64;
        let sigma = (n as f64 * p * (1.0 - p)).sqrt();
        assert!((lost - n as f64 * p).abs() < 3.3 * sigma, "{lost}");
    }

    #[test]
    fn gilbert_elliott_mean_and_burstiness() {
        let m = LossModel::GilbertElliott {
            p_good_to_bad: 0.001,
            p_bad_to_good: 0.1,
            loss_good: 0.0,
            loss_bad: 0.5,
        };
        let mut l = LossProcess::new(m, 1, 0);
        let n = 2_000_000;
        let draws: Vec<bool> = (0..n).map(|_| l.lose()).collect();
        let rate = draws.iter().filter(|&&x| x).count() as f64 / n as f64;
        assert!((rate - m.mean_loss()).abs() / m.mean_loss() < 0.1, "{rate}");
        // Losses cluster: P(loss | previous lost) far above the mean.
        let pairs = draws.windows(2).filter(|w| w[0]).count() as f64;
        let both = draws.windows(2).filter(|w| w[0] && w[1]).count() as f64;
        assert!(both / pairs > 10.0 * rate);
    }

    #[test]
    fn streams_differ_and_repeat() {
        let m = LossModel::Bernoulli { p: 0.5 };
        let a: Vec<bool> = {
            let mut l = LossProcess::new(m, 3, 0);
            (0..64).map(|_| l.lose()).collect()
        };
        let b: Vec<bool> = {
            let mut l = LossProcess::new(m, 3, 1);
            (0..64).map(|_| l.lose()).collect()
        };
        let c: Vec<bool> = {
            let mut l = LossProcess::new(m, 3, 0);
            (0..64).map(|_| l.lose()).collect()
        };
        assert_ne!(a, b);
        assert_eq!(a, c);
    }
}
