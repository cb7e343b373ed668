//! longhaul-emu: a user-space WAN link between network namespaces.
//!
//! This machine's kernel has no netem, so the emulator does netem's job in user
//! space, the way mahimahi and Pantheon do, but in one process with one ordered
//! pipeline per direction (mahimahi: Netravali et al., "Mahimahi: Accurate
//! Record-and-Replay for HTTP", USENIX ATC 2015; Pantheon: Yan et al., USENIX ATC
//! 2018):
//!
//! ```text
//!  client ns            emulator (this crate)                          server ns
//!  app -> lh0 (TUN) -> loss -> queue (DropTail/RED) -> link rate -> delay -> impairments -> lh0 (TUN) -> app
//!  app <- lh0 (TUN) <- impairments <- delay <- link rate <- queue <- loss <- lh0 (TUN) <- app
//! ```
//!
//! - The model of one direction is `longhaul_model::fifo` (shared with the
//!   simulator, with the loss models, queue limits and link traces): given a
//!   packet's length, codepoints and arrival time it decides loss, overflow or a
//!   RED drop, or returns the nanosecond at which the packet leaves the far end
//!   (with a copy, a CE mark, after jitter or a reordering hold-back), following a
//!   schedule of rate, delay and loss steps. It reads no clock and is tested on
//!   virtual time.
//! - [`netns`] makes the namespaces and runs commands (or threads) inside them;
//!   [`tun`] makes the TUN devices, whose file descriptors the emulator holds.
//! - [`emulator`] is the real-time loop: it reads packets from both TUNs, asks the
//!   models, and writes each packet to the other TUN when it is due (`ppoll` with a
//!   nanosecond timeout, then a busy-poll over the last 200 µs).
//! - [`cpu`] keeps the kernel's receive work for what the emulator writes off the
//!   timing thread's core (receive packet steering, and the thread pinned to the
//!   core the steering leaves out).
//! - [`gso`] lets the TUNs carry TCP super-packets (virtio-net headers): they are
//!   split into wire-sized segments for the model and due segments are coalesced
//!   again on write, so the kernel and the emulator pay per 64 KB, not per packet.
//! - [`stats`] measures what the emulator saw: per-flow throughput, one-way delay
//!   percentiles, loss by cause, utilisation, Jain's index, and the run's health
//!   (timer lateness, host-side TUN drops, the emulator's busy share of a core,
//!   what the hypervisor took from the timing and the applications' CPUs).
//! - [`quiet`] waits for a second in which the host keeps time, before a run that
//!   came out invalid is tried again.
//!
//! What it does not do: IPv6 (the namespaces have it off; TSO6 super-packets are not
//! split); UDP GSO super-packets (`USO`, which no sender here uses yet); more than one
//! client/server pair; CoDel, PIE or other AQM besides RED; reordering other than
//! by holding packets back (netem's "send early" form).

pub mod clock;
pub mod config;
pub mod cpu;
pub mod emulator;
pub mod gso;
pub mod netns;
pub mod quiet;
pub mod stats;
pub mod tun;

pub use config::{DirectionConfig, EmuConfig, LinkRate, LossModel, QueueLimit};
pub use emulator::{EmuError, Emulator, Pair, MIN_INTERVAL};
pub use stats::EmuReport;
