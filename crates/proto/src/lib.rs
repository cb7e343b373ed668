//! longhaul-proto: sans-IO transport engines.
//!
//! Every engine here is a state machine driven by its caller (the simulator today, the
//! socket driver of `longhaul-net` for UDT later): it is handed datagrams and the
//! current time, and it is polled for datagrams to send, for its next deadline and for
//! events. The call order after any `handle_*` or application command is: drain
//! `poll_transmit`, then `poll_event`, then re-arm a timer from `poll_timeout`.
//!
//! Engines never read a clock, the OS or a global RNG: time is [`time::Instant`],
//! passed in; randomness comes from a seed given at construction. The same inputs give
//! the same bytes out. Bad peer input is counted, never returned as an error.
//!
//! What is here: time and rate types, an RFC 6298 RTT estimator, congestion control
//! (NewReno, CUBIC, UDT's and AR-UDT's rate control, SCTP's per-destination window),
//! a TCP engine with SACK (RFC 2018/6675) meant for simulation (it tracks byte counts,
//! not payload content), a UDT engine wire-compatible with UDT4 4.11, and an SCTP
//! association (RFC 9260) that carries real message bytes. The block manager of a parallel
//! transfer (striping files over channels, reassembling them in order) is here too,
//! for the simulator and the real transfer tool alike. What is not: I/O (the
//! simulator and, later, `longhaul-net` drive these engines).

#![warn(missing_docs)]

pub mod cc;
pub mod engine;
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
