//! Loss models, one vocabulary for scenario files and the emulator's command line,
//! and their processes, each drawing from its own seeded stream.

use rand::{Rng, RngCore};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// A packet-loss process, applied as each packet enters a link direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum LossModel {
    /// Nothing is lost.
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// The two-state Gilbert-Elliott chain: before each packet the chain moves from
    /// good to bad with probability `p_good_to_bad` and back with `p_bad_to_good`
    /// (the literature's p and r); the packet is then lost with probability
    /// `loss_good` or `loss_bad` (1 - k and 1 - h; the classic Gilbert model is
    /// `loss_good = 0`, `loss_bad = 1`, the defaults).
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
    /// The long-run loss rate (the chain's stationary mix of its two states).
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p_good_to_bad: p,
                p_bad_to_good: r,
                loss_good,
                loss_bad,
            } => {
                if p + r == 0.0 {
                    // The chain never moves: it stays good.
                    loss_good
                } else {
                    (r * loss_good + p * loss_bad) / (p + r)
                }
            }
        }
    }

    /// Checks every probability is in [0, 1], naming the one that is not.
    pub fn validate(&self) -> Result<(), String> {
        let probs: &[(&str, f64)] = match self {
            LossModel::None => &[],
            LossModel::Bernoulli { p } => &[("p", *p)],
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => &[
                ("p_good_to_bad", *p_good_to_bad),
                ("p_bad_to_good", *p_bad_to_good),
                ("loss_good", *loss_good),
                ("loss_bad", *loss_bad),
            ],
        };
        for (name, v) in probs {
            if !(0.0..=1.0).contains(v) {
                return Err(format!("loss {name} = {v} is not a probability in [0, 1]"));
            }
        }
        Ok(())
    }

    /// Reads the command line's spelling: a probability (`1e-4`: Bernoulli, `0`:
    /// none) or `ge:P_GOOD_TO_BAD,P_BAD_TO_GOOD[,LOSS_GOOD,LOSS_BAD]`
    /// (Gilbert-Elliott, the loss probabilities 0 and 1 unless given): the same
    /// fields, in the same order, as a scenario's `{ model = "gilbert-elliott" }`.
    pub fn parse(s: &str) -> Result<LossModel, String> {
        let m = if let Some(rest) = s.strip_prefix("ge:") {
            let v: Vec<f64> = rest
                .split(',')
                .map(|x| x.trim().parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|_| {
                    format!(
                        "`{s}`: write ge:P_GOOD_TO_BAD,P_BAD_TO_GOOD or \
                         ge:P_GOOD_TO_BAD,P_BAD_TO_GOOD,LOSS_GOOD,LOSS_BAD with numbers"
                    )
                })?;
            let (p_good_to_bad, p_bad_to_good, loss_good, loss_bad) = match v[..] {
                [p, r] => (p, r, 0.0, 1.0),
                [p, r, g, b] => (p, r, g, b),
                _ => return Err(format!("`{s}`: ge: takes 2 or 4 numbers")),
            };
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            }
        } else {
            let p: f64 = s.trim().parse().map_err(|_| {
                format!("`{s}` is not a probability (e.g. 1e-4) or ge:P_GOOD_TO_BAD,P_BAD_TO_GOOD")
            })?;
            if p == 0.0 {
                LossModel::None
            } else {
                LossModel::Bernoulli { p }
            }
        };
        m.validate()?;
        Ok(m)
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
    /// A process for `model` drawing from loss stream `stream` (the link
    /// direction's index) under `seed`, so adding a link never changes another's
    /// draws.
    pub fn new(model: LossModel, seed: u64, stream: u64) -> Self {
        // "longhaul" in ASCII: the loss streams' salt.
        let rng: Xoshiro256PlusPlus = crate::rng::stream(seed, 0x6c6f_6e67_6861_756c, stream);
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

    /// The command line's spelling reads as the scenario's fields, in order, and
    /// bad input says what to write.
    #[test]
    fn parses_the_command_line_spelling() {
        assert_eq!(LossModel::parse("0").unwrap(), LossModel::None);
        assert_eq!(
            LossModel::parse("1e-4").unwrap(),
            LossModel::Bernoulli { p: 1e-4 }
        );
        assert_eq!(
            LossModel::parse("ge:0.01,0.2").unwrap(),
            LossModel::GilbertElliott {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.2,
                loss_good: 0.0,
                loss_bad: 1.0
            }
        );
        assert_eq!(
            LossModel::parse("ge:0.01,0.2,0.001,0.5").unwrap(),
            LossModel::GilbertElliott {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.2,
                loss_good: 0.001,
                loss_bad: 0.5
            }
        );
        assert!(LossModel::parse("ge:0.1").unwrap_err().contains("2 or 4"));
        assert!(LossModel::parse("lots")
            .unwrap_err()
            .contains("not a probability"));
        assert!(LossModel::parse("1.5").unwrap_err().contains("p = 1.5"));
        assert!(LossModel::parse("ge:0.1,2")
            .unwrap_err()
            .contains("p_bad_to_good"));
    }

    /// The chain's stationary loss: pi_bad = p / (p + r).
    #[test]
    fn mean_loss_of_the_chain() {
        let m = LossModel::GilbertElliott {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.09,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        assert!((m.mean_loss() - 0.1).abs() < 1e-12);
        let stuck = LossModel::GilbertElliott {
            p_good_to_bad: 0.0,
            p_bad_to_good: 0.0,
            loss_good: 0.25,
            loss_bad: 1.0,
        };
        assert_eq!(stuck.mean_loss(), 0.25);
    }

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
