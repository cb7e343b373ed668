//! longhaul-net: the only crate that touches the OS clock and sockets.
//!
//! It runs the sans-IO UDT engine of `longhaul-proto` (the same engine the simulator
//! runs) over a real UDP socket: [`UdtSocket`] is a blocking, connected UDT socket
//! (`connect`, `accept`, `write_all`, `read`, `close`) whose driver loop feeds the
//! engine the datagrams that arrive, sends what it is due to send, and keeps its
//! timers, reading the time from [`clock::Clock`].
//!
//! Pacing: UDT spaces its packets by a sending period of a few microseconds at
//! gigabit rates, which no sleeping timer honours. The driver blocks in the kernel
//! only when the next deadline is more than [`SPIN`] away, and spins (yielding the
//! core) the rest of the way, as UDT4 does with its TSC timer.
//!
//! Above the socket: [`doctor`] (`longhaul doctor`: audits a host's tuning for a
//! long fat path), [`transfer`] (`longhaul send`/`recv`: the control channel,
//! parallel data channels, resume, verification) and [`secure`] (the handshake and
//! the encryption of every channel; see `docs/security.md`).
//!
//! What it does not do: it implements no cryptographic primitive (`snow` and `ring`
//! do), and it is the only crate that reads the clock or touches sockets. One socket
//! per connection: a listener accepts one connection on its port (UDT4 multiplexes
//! by socket ID).

#![warn(missing_docs)]

mod arrivals;
pub mod bench;
pub mod clock;
pub mod doctor;
pub mod secure;
pub mod transfer;
mod udt;

pub use udt::{
    socket_buffer_warning, Impairment, IoCounters, NetError, UdtListener, UdtSocket, SPIN,
};
