//! Random loss: a seeded generator per direction, so a run's drop pattern follows
//! from its seed and the packet order alone.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::config::LossModel;

/// The state of one direction's loss model.
#[derive(Debug, Clone)]
pub struct Loss {
    model: LossModel,
    rng: Xoshiro256PlusPlus,
    bad: bool,
}

impl Loss {
    /// A model seeded with `seed` (each direction passes its own).
    pub fn new(model: LossModel, seed: u64) -> Self {
        Loss {
            model,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            bad: false,
        }
    }

    /// Decides the fate of the next packet: true to drop it.
    pub fn drop_next(&mut self) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0 && self.rng.gen::<f64>() < p,
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.bad { r } else { p };
                if self.rng.gen::<f64>() < flip {
                    self.bad = !self.bad;
                }
                let l = if self.bad { loss_bad } else { loss_good };
                l > 0.0 && self.rng.gen::<f64>() < l
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Binomial 99 % interval half-width around n·p.
    fn within_99(k: u64, n: u64, p: f64) -> bool {
        let mean = n as f64 * p;
        (k as f64 - mean).abs() <= 2.576 * (mean * (1.0 - p)).sqrt()
    }

    #[test]
    fn bernoulli_rate_is_in_the_binomial_interval() {
        for (p, seed) in [(0.01, 1), (0.1, 2), (1e-3, 3)] {
            let mut l = Loss::new(LossModel::Bernoulli { p }, seed);
            let n = 200_000;
            let k = (0..n).filter(|_| l.drop_next()).count() as u64;
            assert!(within_99(k, n, p), "p {p}: {k} of {n}");
        }
    }

    #[test]
    fn gilbert_elliott_mean_and_burstiness() {
        let model = LossModel::GilbertElliott {
            p: 0.01,
            r: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let mut l = Loss::new(model, 7);
        let n = 400_000;
        let drops: Vec<bool> = (0..n).map(|_| l.drop_next()).collect();
        let k = drops.iter().filter(|&&d| d).count() as f64;
        let mean = model.mean(); // 0.01 / 0.26
        assert!((k / n as f64 / mean - 1.0).abs() < 0.05, "{k} vs {mean}");
        // Mean burst length of a Gilbert chain is 1/r = 4 packets.
        let bursts = drops.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
        let burst_len = k / bursts;
        assert!((burst_len - 4.0).abs() < 0.3, "burst length {burst_len}");
    }

    #[test]
    fn the_same_seed_drops_the_same_packets() {
        let run = |seed| {
            let mut l = Loss::new(LossModel::Bernoulli { p: 0.2 }, seed);
            (0..1000).map(|_| l.drop_next()).collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
