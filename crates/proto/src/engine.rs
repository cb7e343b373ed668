//! The one interface every engine offers its driver (after quinn-proto's
//! `Connection`): datagrams and timeouts go in through `handle_*`, datagrams, events
//! and the next deadline come out through `poll_*`. The simulator drives TCP, UDT and
//! SCTP through it on one path, and `testkit` (feature `testkit`) runs any two of a
//! kind against each other.
//!
//! What an application does with a connection (open it, write, read, close) differs
//! by protocol (a byte stream, a stream of virtual bytes, messages on streams) and
//! stays on each engine's own type; so does its configuration.
//!
//! The call order after any `handle_*` or application command: drain
//! [`poll_transmit`](Engine::poll_transmit), then [`poll_event`](Engine::poll_event),
//! then re-arm one timer from [`poll_timeout`](Engine::poll_timeout).

use crate::time::Instant;

/// What an engine's datagrams are: where the driver puts them on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// Whole IPv4 packets: the engine writes the IP header itself (TCP and SCTP,
    /// which are IP protocols with checksums over a pseudo-header).
    Ip,
    /// UDP payloads: the driver adds the IP and UDP headers (UDT).
    Udp,
}

/// What one [`Engine::poll_transmit`] produced.
///
/// An engine may **elide** the end of a datagram: bytes that are on the wire but not
/// in the buffer, whose content nobody reads (the simulator's bulk data, counted but
/// not carried). The written bytes are then a prefix, and `wire_len` the whole
/// length; the receiving engine is handed the same prefix and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written at the start of the buffer.
    pub written: usize,
    /// Length of the datagram on the wire, `written` included (at least `written`).
    pub wire_len: usize,
    /// Whether another poll now might produce more. When false, a poll at the same
    /// time with nothing handled in between returns `None`, so a driver may stop
    /// asking (the pair tests check the promise).
    pub more: bool,
}

impl Transmit {
    /// Bytes on the wire beyond the buffer.
    pub fn elided(&self) -> usize {
        self.wire_len - self.written
    }
}

/// A sans-IO transport engine: a state machine its driver feeds with time and
/// datagrams and polls for what to send.
///
/// Engines never read a clock or the OS; `now` never goes backwards between calls.
/// Bad peer input is counted by the engine, never returned as an error.
pub trait Engine {
    /// What the engine tells its application (connected, readable, finished...).
    type Event;

    /// Where its datagrams go on the wire.
    const LAYER: Layer;

    /// A datagram arrived: `datagram` is what was written for it (see
    /// [`Transmit`]), `wire_len` its length on the wire (`datagram.len()` unless its
    /// end was elided).
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8], wire_len: usize);

    /// The deadline from [`poll_timeout`](Engine::poll_timeout) passed (an early
    /// call is harmless: nothing is due yet, so nothing happens).
    fn handle_timeout(&mut self, now: Instant);

    /// The next datagram to send, written into `buf`; `None` when there is nothing
    /// to send now. `buf` must hold the engine's largest datagram, or its largest
    /// header when the engine elides payloads.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;

    /// The next event for the application.
    fn poll_event(&mut self) -> Option<Self::Event>;

    /// When [`handle_timeout`](Engine::handle_timeout) is next due, if ever.
    fn poll_timeout(&self) -> Option<Instant>;
}
