//! longhaul-proto: sans-IO transport engines.
//!
//! Every engine here implements one interface, [`Engine`] (after quinn-proto's
//! `Connection`): its driver (the simulator, or `longhaul-net`'s UDT socket) hands it
//! datagrams and the current time through `handle_*`, and polls it for datagrams to
//! send, for events and for its next deadline through `poll_*`. The call order after
//! any `handle_*` or application command is: drain `poll_transmit`, then
//! `poll_event`, then re-arm one timer from `poll_timeout`. `testkit` (feature
//! `testkit`) runs two ends of any engine against each other over a path with delay,
//! rate, loss, reordering and damage.
//!
//! Engines never read a clock, the OS or a global RNG: time is [`time::Instant`],
//! passed in; randomness comes from a seed given at construction. The same inputs give
//! the same bytes out. Bad peer input is counted, never returned as an error.
//!
//! What is here: time and rate types, an RFC 6298 RTT estimator, congestion control
//! (NewReno, CUBIC, BBR with its delivery-rate sampler for TCP and UDT, UDT's and
//! AR-UDT's rate control, SCTP's per-destination window),
//! a TCP engine with SACK (RFC 2018/6675) meant for simulation (it tracks byte counts,
//! not payload content), a UDT engine wire-compatible with UDT4 4.11, and an SCTP
//! association (RFC 9260) that carries real message bytes, and the UDP blast protocols
//! RBUDP, Tsunami and SABUL (data over UDP, control as a byte stream for a TCP
//! connection). The block manager of a
//! parallel transfer (striping files over channels, reassembling them in order) is
//! here too, for the simulator and the real transfer tool alike. What is not: I/O
//! (the simulator and `longhaul-net` drive these engines), and what an application
//! does with a connection, which stays on each engine's own type.

#![warn(missing_docs)]

pub mod blast;
pub mod cc;
pub mod engine;
pub mod names;
pub mod rtt;
pub mod sctp;
pub mod seq;
pub mod tcp;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

pub mod time;
pub mod transfer;
pub mod udt;

pub use engine::{Engine, Layer, Transmit};
pub use time::{Bandwidth, Duration, Instant};

/// Slow-start rounds whose bytes an engine books (`round_bytes` of TCP and SCTP).
///
/// The per-round log serves the study of a connection's first rounds (how much the
/// initial window and each round of acknowledgements release); slow start from one
/// segment reaches any window a long fat network needs within 40 rounds. Booking
/// stops after this many rounds so that a flow's state stays proportional to its
/// window, not to how long it runs (a 1 ms RTT flow would otherwise add 1 000
/// entries a second).
pub const ROUND_LOG_ROUNDS: u32 = 256;
