//! longhaul-model: one model of a network path, shared by the simulator
//! (`longhaul-sim`) and the emulator (`longhaul-emu`), so the two speak one
//! vocabulary and a scenario's link and `emu`'s command line mean the same thing.
//!
//! What is here: loss models and their seeded processes (Bernoulli,
//! Gilbert-Elliott), queue limits (packets, bytes, bandwidth-delay products), the
//! units scenario files and command lines write (`"1Gbps"`, `"50ms"`, `"64MiB"`,
//! `"1bdp"`), one direction of a link (loss, DropTail or RED/WRED, a constant rate
//! or a mahimahi trace, delay, jitter, reordering, duplication, and a schedule of
//! changes; sans-IO), Jain's fairness index, and the derivation
//! of independent random streams from one seed.
//!
//! What is not: anything that moves packets. The simulator's links (event-driven,
//! with cut-through) and the emulator's (real time, over TUN) each apply these
//! models in their own loop.

pub mod fairness;
pub mod fifo;
pub mod impair;
pub mod loss;
pub mod queue;
pub mod red;
pub mod rng;
pub mod schedule;
pub mod trace;
pub mod units;

pub use fairness::jain;
pub use loss::{LossModel, LossProcess};
pub use queue::{QueueLimit, QueueSpec};
