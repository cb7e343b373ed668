//! The receiver's data channels: taking the sender's connection on each port
//! (turning strangers away), and reading blocks off it and off the control channel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use longhaul_proto::transfer::{BlockRepr, HEADER_LEN};
use longhaul_proto::udt::UdtConnConfig;
use longhaul_wire::block::BlockPacket;

use super::super::channel::{DataChannel, Listener, Seal};
use super::super::control::{ControlReader, Msg};
use super::super::{TransferError, END_OF_CHANNEL, PIECE_FOLLOWS};
use super::incoming::{store, Arrival, Incoming, Sink};
use super::pieces::store_piece;
use super::session::Event;
use crate::clock::Clock;
use crate::Impairment;

/// How long a connection to a data port has to present its ticket. The sender
/// writes it first thing, so this is many round trips even at 200 ms; it bounds
/// how long a connection that says nothing (a port scanner's connect) keeps the
/// sender waiting behind it.
pub(super) const TICKET_WAIT: Duration = Duration::from_secs(5);

/// What a data channel's port needs to take its sender's connection.
pub(super) struct Door {
    pub(super) cfg: UdtConnConfig,
    /// How long to wait in all.
    pub(super) timeout: Duration,
    pub(super) impair: Option<Impairment>,
    /// The channel's index.
    pub(super) c: usize,
    /// What the sender's connection opens with.
    pub(super) ticket: [u8; 32],
    pub(super) seal: Seal,
}

/// Waits, at most `timeout`, for the sender's connection on data channel `c`: the
/// first that opens with the channel's ticket. Any other (a port scanner's
/// connect, a stranger, a sender of another session) is closed unread, counted in
/// `turned_away`, and the wait goes on: whoever finds a data port can neither put a
/// block into a file nor end the session.
pub(super) fn accept_sender(
    mut l: Listener,
    door: Door,
    turned_away: &AtomicU64,
) -> Result<DataChannel, TransferError> {
    let Door {
        cfg,
        timeout,
        impair,
        c,
        ticket,
        mut seal,
    } = door;
    let clock = Clock::new();
    let elapsed = || Duration::from_nanos(clock.now().as_nanos());
    let mut refused = 0;
    loop {
        let left = timeout.saturating_sub(elapsed());
        let accepted = match l.accept(cfg, left, &mut seal) {
            Ok(s) => Some(s),
            // Out of time after turning connections away: say so.
            Err(_) if refused > 0 && elapsed() >= timeout => None,
            Err(e) => return Err(e),
        };
        let Some(mut s) = accepted else {
            return Err(TransferError::Protocol(format!(
                "data channel {c}: no connection opened with this session's ticket within \
                 {timeout:?}; {refused} that did not were closed unread (not this \
                 session's sender, or the ticket was damaged in transit)"
            )));
        };
        if let (Some(i), Some(u)) = (impair, s.udt()) {
            u.impair(Impairment {
                seed: i.seed ^ ((c as u64) << 32) ^ (refused << 48),
                ..i
            });
        }
        let mut got = [0u8; 32];
        // blake3::Hash compares in constant time: no timing says how much matched.
        if read_exact_within(&mut s, &mut got, TICKET_WAIT.min(left))
            && blake3::Hash::from(got) == blake3::Hash::from(ticket)
        {
            return Ok(s);
        }
        seal.restore(&mut s);
        refused += 1;
        turned_away.fetch_add(1, Ordering::Relaxed);
    }
}

/// Fills `buf` from `s` within about `max`; false if the connection ends, fails
/// or stays silent first.
pub(super) fn read_exact_within(s: &mut DataChannel, buf: &mut [u8], max: Duration) -> bool {
    let clock = Clock::new();
    let mut got = 0;
    while got < buf.len() {
        let left = max.saturating_sub(Duration::from_nanos(clock.now().as_nanos()));
        match s.read_within(&mut buf[got..], left) {
            Ok(Some(n)) if n > 0 => got += n,
            _ => return false,
        }
    }
    true
}

/// One data channel, from its sender's first block to its end marker.
pub(super) fn serve_channel(
    mut s: DataChannel,
    sink: &Sink,
    incoming: &Mutex<Vec<Incoming>>,
    events: &mpsc::Sender<Event>,
) -> Result<(), TransferError> {
    let block_size = sink.block_size;
    let mut hdr = [0u8; HEADER_LEN];
    let mut buf = vec![0u8; block_size as usize + 32];
    while read_exact(&mut s, &mut hdr)? {
        if hdr == END_OF_CHANNEL {
            // Everything before it has arrived (the channel is in order). Stay a
            // little to acknowledge, but not for the transport's shutdown, which
            // UDT sends once and may lose.
            s.linger(Duration::from_secs(3))?;
            return Ok(());
        }
        let piece = hdr == PIECE_FOLLOWS;
        if piece && !read_exact(&mut s, &mut hdr)? {
            return Err(TransferError::Protocol(
                "a data channel ended after announcing a piece".into(),
            ));
        }
        let b = BlockRepr::parse(&BlockPacket::new_unchecked(&hdr[..]))
            .map_err(|_| TransferError::Protocol("a malformed block header".into()))?;
        if b.len > block_size {
            return Err(TransferError::Protocol(format!(
                "a block of {} bytes; the session's are {block_size}",
                b.len
            )));
        }
        let n = b.len as usize;
        if !read_exact(&mut s, &mut buf[..n + 32])? {
            return Err(TransferError::Protocol(
                "a data channel ended inside a block".into(),
            ));
        }
        let (data, trailer) = buf[..n + 32].split_at(n);
        if piece {
            store_piece(incoming, events, sink, b, data, trailer)?;
        } else {
            store(incoming, events, sink, b, data, trailer, Arrival::Sent)?;
        }
    }
    Err(TransferError::Protocol(
        "a data channel ended before its end marker".into(),
    ))
}

/// The control channel's reading side: digests go to the session; blocks sent
/// again (after `Resend`) are checked and stored here.
pub(super) fn serve_control(
    mut reader: ControlReader,
    sink: &Sink,
    incoming: &Mutex<Vec<Incoming>>,
    events: &mpsc::Sender<Event>,
) {
    let block_size = sink.block_size;
    let mut buf = vec![0u8; block_size as usize + 32];
    let r = (|| -> Result<(), TransferError> {
        loop {
            match reader.recv()? {
                Msg::Block { file, offset, len } if len <= block_size => {
                    let n = len as usize;
                    reader.recv_raw(&mut buf[..n + 32])?;
                    let (data, trailer) = buf[..n + 32].split_at(n);
                    let b = BlockRepr { file, offset, len };
                    store(incoming, events, sink, b, data, trailer, Arrival::Resent)?;
                }
                m => {
                    if events.send(Event::Ctl(Ok(m))).is_err() {
                        return Ok(());
                    }
                }
            }
        }
    })();
    if let Err(e) = r {
        let _ = events.send(Event::Ctl(Err(e)));
    }
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` if the stream ended before the
/// first byte.
pub(super) fn read_exact(s: &mut DataChannel, buf: &mut [u8]) -> Result<bool, TransferError> {
    let mut got = 0;
    while got < buf.len() {
        let n = s.read(&mut buf[got..])?;
        if n == 0 {
            if got == 0 {
                return Ok(false);
            }
            return Err(TransferError::Protocol(
                "a data channel ended inside a block".into(),
            ));
        }
        got += n;
    }
    Ok(true)
}
