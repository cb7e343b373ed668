//! The impairments netem users expect beyond loss: delay jitter, reordering and
//! duplication, applied after the link has serialised a packet. Each draws from
//! its own seeded stream, so a run repeats from its seed and adding one impairment
//! does not change another's draws.
//!
//! How they differ from netem (Linux `sch_netem`), on purpose:
//! - **Reorder** holds a chosen packet back by an extra `delay`, so the packets
//!   behind it within that time overtake it. netem's `reorder` does the opposite
//!   (the chosen packet skips the whole delay and jumps ahead of everything in
//!   flight), which on a 100 ms path reorders by 100 ms; holding back by a chosen
//!   gap is how a path change or a parallel router lane reorders.
//! - **Jitter** either keeps the link FIFO (a packet never leaves before the one
//!   ahead of it, as netem with a `pfifo` child or its `rate` option) or lets
//!   packets pass each other (netem's default since Linux 3.x); the user chooses.
//! - **Duplicate** sends a copy right behind the original, and the copy takes its
//!   own turn on the link (as netem's clone re-enqueued at the root).

use rand::Rng;
use rand_distr::{Distribution, Normal};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use longhaul_proto::Duration;

use crate::rng;
use crate::units::parse_time;

/// Salts of the impairments' streams.
const JITTER_SALT: u64 = 0x4a49_5454_4552_2121;
const REORDER_SALT: u64 = 0x5245_4f52_4445_5221;
const DUP_SALT: u64 = 0x4455_504c_4943_2121;

/// A duration in a report: milliseconds.
fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// How a packet's extra delay is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "distribution", rename_all = "kebab-case")]
pub enum JitterDist {
    /// Normal with this standard deviation (mean 0), cut at minus the base delay
    /// so no packet leaves before it arrived.
    Normal {
        /// Standard deviation.
        #[serde(rename = "sd_ms", serialize_with = "as_ms")]
        sd: Duration,
    },
    /// Uniform on [-half_width, +half_width].
    Uniform {
        /// Half the width.
        #[serde(rename = "half_width_ms", serialize_with = "as_ms")]
        half_width: Duration,
    },
}

/// Delay jitter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Jitter {
    /// The distribution of the extra delay.
    pub dist: JitterDist,
    /// Whether a packet may leave before one that arrived ahead of it.
    pub reorder: bool,
}

impl Jitter {
    /// Reads the command line's spelling: `SD` (normal with that standard
    /// deviation, e.g. `2ms`) or `SD,normal`, or `HALF_WIDTH,uniform`.
    pub fn parse(s: &str, reorder: bool) -> Result<Jitter, String> {
        let (amount, dist) = s.split_once(',').unwrap_or((s, "normal"));
        let d = parse_time(amount.trim())
            .map_err(|e| format!("`{s}`: {e}; write e.g. 2ms or 5ms,uniform"))?;
        let dist = match dist.trim() {
            "normal" => JitterDist::Normal { sd: d },
            "uniform" => JitterDist::Uniform { half_width: d },
            other => {
                return Err(format!(
                    "`{other}` is not a jitter distribution: write normal or uniform"
                ))
            }
        };
        Ok(Jitter { dist, reorder })
    }
}

impl Reorder {
    /// Reads the command line's spelling: `P` (held back 1 ms) or `P,DELAY`.
    pub fn parse(s: &str) -> Result<Reorder, String> {
        let (p, delay) = s.split_once(',').unwrap_or((s, "1ms"));
        let p: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: write a probability, e.g. 0.01 or 0.01,2ms"))?;
        let delay = parse_time(delay.trim()).map_err(|e| format!("`{s}`: {e}"))?;
        let r = Reorder { p, delay };
        Impairments {
            reorder: Some(r),
            ..Default::default()
        }
        .validate()?;
        Ok(r)
    }
}

/// Reordering: each packet is held back by `delay` with probability `p`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Reorder {
    /// Probability a packet is held back.
    pub p: f64,
    /// How long it is held back.
    #[serde(rename = "delay_ms", serialize_with = "as_ms")]
    pub delay: Duration,
}

/// A direction's impairments; the default has none.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Impairments {
    /// Delay jitter.
    pub jitter: Option<Jitter>,
    /// Reordering.
    pub reorder: Option<Reorder>,
    /// Probability a packet is sent twice.
    pub duplicate: f64,
}

impl Impairments {
    /// Checks the probabilities, naming the one that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let prob = |name: &str, p: f64| {
            if (0.0..=1.0).contains(&p) {
                Ok(())
            } else {
                Err(format!("{name} probability {p} is not in [0, 1]"))
            }
        };
        prob("duplicate", self.duplicate)?;
        if let Some(r) = self.reorder {
            prob("reorder", r.p)?;
            if r.delay.as_nanos() == 0 {
                return Err("a reorder needs a hold-back delay above 0, e.g. 1ms".into());
            }
        }
        Ok(())
    }
}

/// The impairments' random state for one direction.
#[derive(Debug, Clone)]
pub struct Impairer {
    cfg: Impairments,
    jitter: Xoshiro256PlusPlus,
    reorder: Xoshiro256PlusPlus,
    dup: Xoshiro256PlusPlus,
    /// The latest exit of a packet that was not held back, ns: without reordering
    /// no packet leaves before it.
    fifo_floor: u64,
}

/// What the impairments made of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Impaired {
    /// When it leaves, ns.
    pub exit: u64,
    /// Whether it was held back to be reordered.
    pub held: bool,
    /// Whether a copy follows it.
    pub duplicate: bool,
}

impl Impairer {
    /// The impairments of stream `index` under `seed`.
    pub fn new(cfg: Impairments, seed: u64, index: u64) -> Impairer {
        Impairer {
            cfg,
            jitter: rng::stream(seed, JITTER_SALT, index),
            reorder: rng::stream(seed, REORDER_SALT, index),
            dup: rng::stream(seed, DUP_SALT, index),
            fifo_floor: 0,
        }
    }

    /// A packet that finished serialisation at `serialised` would, unimpaired,
    /// leave at `serialised + delay`: when does it leave, and is it copied?
    /// `wire` is its time on the wire at the link's rate (0 where the link has no
    /// one rate, as a trace).
    pub fn apply(&mut self, serialised: u64, delay: u64, wire: u64) -> Impaired {
        let base = serialised + delay;
        let mut exit = base;
        if let Some(j) = self.cfg.jitter {
            let extra = match j.dist {
                JitterDist::Normal { sd } => {
                    let sd = sd.as_nanos() as f64;
                    if sd > 0.0 {
                        Normal::new(0.0, sd).map_or(0.0, |n| n.sample(&mut self.jitter))
                    } else {
                        0.0
                    }
                }
                JitterDist::Uniform { half_width } => {
                    let a = half_width.as_nanos() as f64;
                    if a > 0.0 {
                        self.jitter.gen_range(-a..=a)
                    } else {
                        0.0
                    }
                }
            };
            // No packet leaves before it finished serialisation.
            exit = (base as f64 + extra).max(serialised as f64) as u64;
        }
        // Unless jitter may reorder, no packet overtakes one ahead of it (which a
        // shorter delay after a schedule step could otherwise do). Nor does it
        // leave in the same instant: packets that jitter bunches behind a late one
        // leave one wire-time apart, as from the queue that held them. Packets
        // due at one nanosecond would otherwise leave as fast as the emulator can
        // write, and its lateness would measure that burst, not its timer.
        if !self.cfg.jitter.is_some_and(|j| j.reorder) && self.fifo_floor > 0 {
            exit = exit.max(self.fifo_floor + wire);
        }
        let held = self
            .cfg
            .reorder
            .is_some_and(|r| r.p > 0.0 && self.reorder.gen::<f64>() < r.p);
        if held {
            exit += self.cfg.reorder.map_or(0, |r| r.delay.as_nanos() as u64);
        } else {
            self.fifo_floor = self.fifo_floor.max(exit);
        }
        let duplicate = self.cfg.duplicate > 0.0 && self.dup.gen::<f64>() < self.cfg.duplicate;
        Impaired {
            exit,
            held,
            duplicate,
        }
    }

    /// Keeps later packets from leaving before `exit` (a packet the link sent
    /// without drawing impairments, such as a duplicate's copy).
    pub fn hold_floor(&mut self, exit: u64) {
        self.fifo_floor = self.fifo_floor.max(exit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn normal_jitter_has_the_configured_mean_and_sd() {
        let cfg = Impairments {
            jitter: Some(Jitter {
                dist: JitterDist::Normal { sd: ms(2) },
                reorder: true,
            }),
            ..Default::default()
        };
        let mut imp = Impairer::new(cfg, 1, 0);
        let n = 100_000u64;
        let d: Vec<f64> = (0..n)
            .map(|i| (imp.apply(i * 1_000_000, 20_000_000, 0).exit - i * 1_000_000) as f64)
            .collect();
        let mean = d.iter().sum::<f64>() / n as f64;
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((mean / 20e6 - 1.0).abs() < 0.002, "{mean}");
        assert!((sd / 2e6 - 1.0).abs() < 0.02, "{sd}");
    }

    #[test]
    fn fifo_jitter_never_reorders() {
        let cfg = Impairments {
            jitter: Some(Jitter {
                dist: JitterDist::Uniform { half_width: ms(5) },
                reorder: false,
            }),
            ..Default::default()
        };
        let mut imp = Impairer::new(cfg, 2, 0);
        // 100 µs apart on a link where each packet takes 40 µs on the wire: the
        // jitter bunches packets behind late ones, and they leave 40 µs apart.
        let wire = 40_000;
        let mut last = None;
        let mut bunched = 0;
        for i in 0..10_000u64 {
            let e = imp.apply(i * 100_000, 10_000_000, wire).exit;
            assert!(e >= i * 100_000);
            if let Some(l) = last {
                assert!(
                    e >= l + wire,
                    "packet {i} left {} ns after the one ahead",
                    e - l
                );
                bunched += u32::from(e == l + wire);
            }
            last = Some(e);
        }
        assert!(bunched > 1000, "the jitter bunched only {bunched} packets");
    }

    #[test]
    fn reorder_holds_back_the_configured_share() {
        let p = 0.05;
        let cfg = Impairments {
            reorder: Some(Reorder { p, delay: ms(1) }),
            ..Default::default()
        };
        let mut imp = Impairer::new(cfg, 3, 0);
        let n = 50_000u64;
        let mut held = 0;
        for i in 0..n {
            let r = imp.apply(i * 100_000, 0, 0);
            if r.held {
                held += 1;
                assert_eq!(r.exit, i * 100_000 + 1_000_000);
            }
        }
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!((held as f64 - n as f64 * p).abs() < 2.576 * sd, "{held}");
    }

    #[test]
    fn the_command_line_spellings_parse() {
        assert_eq!(
            Jitter::parse("2ms", false).unwrap().dist,
            JitterDist::Normal { sd: ms(2) }
        );
        assert_eq!(
            Jitter::parse("5ms,uniform", true).unwrap().dist,
            JitterDist::Uniform { half_width: ms(5) }
        );
        assert!(Jitter::parse("5ms,pareto", false)
            .unwrap_err()
            .contains("pareto"));
        assert_eq!(Reorder::parse("0.01").unwrap().delay, ms(1));
        assert_eq!(Reorder::parse("0.5,3ms").unwrap().p, 0.5);
        assert!(Reorder::parse("1.5").is_err());
        assert!(Reorder::parse("0.1,0ms").is_err());
    }

    #[test]
    fn streams_repeat_from_the_seed() {
        let cfg = Impairments {
            jitter: Some(Jitter {
                dist: JitterDist::Normal { sd: ms(1) },
                reorder: true,
            }),
            reorder: Some(Reorder {
                p: 0.1,
                delay: ms(1),
            }),
            duplicate: 0.1,
        };
        let run = |seed| {
            let mut imp = Impairer::new(cfg, seed, 0);
            (0..100)
                .map(|i| imp.apply(i * 1000, 5_000_000, 0))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(4), run(4));
        assert_ne!(run(4), run(5));
    }
}
