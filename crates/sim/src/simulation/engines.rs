//! What the simulator needs of each engine beyond [`Engine`]: where a flow keeps its
//! two ends and their timers, and what the flow's applications do around the
//! engine's I/O. One implementation per protocol, each a few lines; the driving
//! itself (`drive.rs`) is one generic path for all of them.

use longhaul_proto::sctp::{Event as SctpEvent, SctpAssociation};
use longhaul_proto::tcp::{Event as TcpEvent, TcpConnection};
use longhaul_proto::udt::{Event as UdtEvent, State as UdtState, UdtConnection};
use longhaul_proto::{Engine, Instant};

use super::{SCTP_BACKLOG, TCP_RECEIVER_PORT, TCP_SENDER_PORT, UDT_RECEIVER_PORT, UDT_SENDER_PORT};
use crate::app::{Flow, SctpFlow, TcpFlow, UdtFlow};

/// Whether an engine's packets carry their bytes through the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bytes {
    /// Never: headers travel, payloads are lengths (the packet pool's header slot).
    Elided,
    /// Always: the engine checksums or reads what it sends (SCTP).
    Whole,
    /// As the flow says (UDT channels of a transfer with content carry bytes).
    PerFlow,
}

/// An engine the simulator drives (see the module doc).
pub(super) trait Driven: Engine + Sized {
    /// The flow record holding the two ends.
    type Flow;
    /// Whether its packets carry bytes.
    const BYTES: Bytes;
    /// Port bases of the sending and the receiving end (plus the flow's index).
    const PORTS: [u16; 2];

    /// The record, if `flow` is of this protocol.
    fn record(flow: &mut Flow) -> Option<&mut Self::Flow>;
    /// Its two ends, sender first.
    fn ends(r: &mut Self::Flow) -> &mut [Self; 2];
    /// The instant each end's timer event is armed for.
    fn timers(r: &mut Self::Flow) -> &mut [Option<Instant>; 2];
    /// Sending and receiving host.
    fn hosts(r: &Self::Flow) -> (usize, usize);

    /// The sending application, before its end transmits. `zeros` is what it writes
    /// where it must write bytes.
    fn write(_r: &mut Self::Flow, _zeros: &[u8]) {}
    /// A datagram with `payload_len` bytes of payload is about to reach end `side`.
    fn arriving(_r: &mut Self::Flow, _side: usize, _now: Instant, _payload_len: u32) {}
    /// The application at `side` takes event `ev`; true if it read data, which may
    /// open the receive window (the end is then polled to transmit again).
    fn on_event(r: &mut Self::Flow, side: usize, now: Instant, ev: Self::Event) -> bool;
}

impl Driven for TcpConnection {
    type Flow = TcpFlow;
    const BYTES: Bytes = Bytes::Elided;
    const PORTS: [u16; 2] = [TCP_SENDER_PORT, TCP_RECEIVER_PORT];

    fn record(flow: &mut Flow) -> Option<&mut TcpFlow> {
        match flow {
            Flow::Tcp(t) => Some(t),
            _ => None,
        }
    }
    fn ends(r: &mut TcpFlow) -> &mut [Self; 2] {
        &mut r.ends
    }
    fn timers(r: &mut TcpFlow) -> &mut [Option<Instant>; 2] {
        &mut r.timer_at
    }
    fn hosts(r: &TcpFlow) -> (usize, usize) {
        (r.spec.from, r.spec.to)
    }
    /// The first and last data segment at the receiver (the transfer time of the
    /// SCTP study, for TCP).
    fn arriving(r: &mut TcpFlow, side: usize, now: Instant, payload_len: u32) {
        if side == 1 && payload_len > 0 {
            let first = r.data_arrivals.map_or(now, |(first, _)| first);
            r.data_arrivals = Some((first, now));
        }
    }
    fn on_event(r: &mut TcpFlow, _side: usize, now: Instant, ev: TcpEvent) -> bool {
        if let TcpEvent::PeerFinished { .. } = ev {
            r.completed_at.get_or_insert(now);
        }
        false
    }
}

impl Driven for UdtConnection {
    type Flow = UdtFlow;
    const BYTES: Bytes = Bytes::PerFlow;
    const PORTS: [u16; 2] = [UDT_SENDER_PORT, UDT_RECEIVER_PORT];

    fn record(flow: &mut Flow) -> Option<&mut UdtFlow> {
        match flow {
            Flow::Udt(u) => Some(u),
            _ => None,
        }
    }
    fn ends(r: &mut UdtFlow) -> &mut [Self; 2] {
        &mut r.ends
    }
    fn timers(r: &mut UdtFlow) -> &mut [Option<Instant>; 2] {
        &mut r.timer_at
    }
    fn hosts(r: &UdtFlow) -> (usize, usize) {
        (r.spec.from, r.spec.to)
    }
    /// Keeps the send buffer full, as a bulk application would; closes after the
    /// last byte of a finite flow.
    fn write(r: &mut UdtFlow, _zeros: &[u8]) {
        let sender = &mut r.ends[0];
        if r.unsent == 0 || sender.state() != UdtState::Connected {
            return;
        }
        let space = sender.send_space_pkts() as u64 * sender.payload_size() as u64;
        if space > 0 {
            let n = sender.send_virtual(r.unsent.min(space)).unwrap_or(0);
            if r.unsent != u64::MAX {
                r.unsent -= n;
                if r.unsent == 0 {
                    sender.close();
                }
            }
        }
    }
    fn on_event(r: &mut UdtFlow, side: usize, now: Instant, ev: UdtEvent) -> bool {
        if let (UdtEvent::Readable, 1, Some(size)) = (ev, side, r.spec.size) {
            if r.ends[1].delivered_bytes() >= size {
                r.completed_at.get_or_insert(now);
            }
        }
        false
    }
}

impl Driven for SctpAssociation {
    type Flow = SctpFlow;
    const BYTES: Bytes = Bytes::Whole;
    // SCTP shares the TCP port ranges: endpoints match on protocol too.
    const PORTS: [u16; 2] = [TCP_SENDER_PORT, TCP_RECEIVER_PORT];

    fn record(flow: &mut Flow) -> Option<&mut SctpFlow> {
        match flow {
            Flow::Sctp(s) => Some(s),
            _ => None,
        }
    }
    fn ends(r: &mut SctpFlow) -> &mut [Self; 2] {
        &mut r.ends
    }
    fn timers(r: &mut SctpFlow) -> &mut [Option<Instant>; 2] {
        &mut r.timer_at
    }
    fn hosts(r: &SctpFlow) -> (usize, usize) {
        (r.spec.from, r.spec.to)
    }
    /// Writes as long as the sender's queue has room, as a blocking `sctp_sendmsg`
    /// loop would: the files' writes (a stream per file), or an endless backlog of
    /// messages.
    fn write(s: &mut SctpFlow, zeros: &[u8]) {
        let sender = &mut s.ends[0];
        match s.spec.files {
            Some(files) => {
                let n = files.write_count();
                while s.next_write < n && sender.queued_bytes() < SCTP_BACKLOG {
                    let (file, len) = files.write(s.next_write);
                    // Streams were checked against the file count by the loader.
                    let stream = file as u16;
                    if sender
                        .send(stream, 0, false, &zeros[..len as usize])
                        .is_err()
                    {
                        break;
                    }
                    s.next_write += 1;
                    if s.next_write == n {
                        let _ = sender.shutdown();
                    }
                }
            }
            None => {
                let m = s.spec.message as usize;
                while sender.queued_bytes() < SCTP_BACKLOG
                    && sender.send(0, 0, false, &zeros[..m]).is_ok()
                {}
            }
        }
    }
    fn on_event(s: &mut SctpFlow, side: usize, now: Instant, ev: SctpEvent) -> bool {
        if ev != SctpEvent::Readable {
            return false;
        }
        let mut read = false;
        while let Some(m) = s.ends[side].recv() {
            s.delivered += m.data.len() as u64;
            read = true;
        }
        if s.spec.files.is_some_and(|fl| s.delivered >= fl.total()) {
            s.completed_at.get_or_insert(now);
        }
        read
    }
}
