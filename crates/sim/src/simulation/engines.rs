//! What the simulator needs of each engine beyond [`Engine`]: where a flow keeps its
//! two ends and their timers, and what the flow's applications do around the
//! engine's I/O. One implementation per protocol, each a few lines; the driving
//! itself (`drive.rs`) is one generic path for all of them. A blast transfer
//! (RBUDP, Tsunami, SABUL) is the one flow with two engines, its data ends and its
//! TCP control connection, which hand each other what they produce (`hand_over`).

use longhaul_proto::blast::{BlastConnection, Event as BlastEvent};
use longhaul_proto::sctp::{Event as SctpEvent, SctpAssociation};
use longhaul_proto::tcp::{Event as TcpEvent, TcpConnection};
use longhaul_proto::udt::{Event as UdtEvent, State as UdtState, UdtConnection};
use longhaul_proto::{Engine, Instant, Layer, Transmit};

use super::{SCTP_BACKLOG, TCP_RECEIVER_PORT, TCP_SENDER_PORT, UDT_RECEIVER_PORT, UDT_SENDER_PORT};
use crate::app::{BlastFlow, Control, Flow, SctpFlow, TcpFlow, UdtFlow};

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
    /// Which of its flow's engines this is: 0, or 1 for the second engine of a flow
    /// with two (a blast transfer's control connection). Its ends' timer events
    /// are numbered `2 * ENGINE + side`.
    const ENGINE: u8 = 0;
    /// Whether its flow has a second engine ([`hand_over`](Self::hand_over) is
    /// asked only then).
    const PAIRED: bool = false;

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
    /// In a flow with two engines, hands what end `side` of this one produced for
    /// the other engine's end at the same side across; true if that end must now be
    /// driven.
    fn hand_over(_r: &mut Self::Flow, _side: usize, _now: Instant) -> bool {
        false
    }
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

/// The record of a blast transfer, whose two engines share it.
fn blast_flow(flow: &mut Flow) -> Option<&mut BlastFlow> {
    match flow {
        Flow::Blast(b) => Some(b),
        _ => None,
    }
}

impl Driven for BlastConnection {
    type Flow = BlastFlow;
    const BYTES: Bytes = Bytes::Elided;
    // UDP, like UDT's: the flow index keeps the two apart.
    const PORTS: [u16; 2] = [UDT_SENDER_PORT, UDT_RECEIVER_PORT];
    const PAIRED: bool = true;

    fn record(flow: &mut Flow) -> Option<&mut BlastFlow> {
        blast_flow(flow)
    }
    fn ends(r: &mut BlastFlow) -> &mut [Self; 2] {
        &mut r.ends
    }
    fn timers(r: &mut BlastFlow) -> &mut [Option<Instant>; 2] {
        &mut r.timer_at
    }
    fn hosts(r: &BlastFlow) -> (usize, usize) {
        (r.spec.from, r.spec.to)
    }
    fn on_event(r: &mut BlastFlow, side: usize, now: Instant, ev: BlastEvent) -> bool {
        if (side, ev) == (1, BlastEvent::Complete) {
            r.completed_at.get_or_insert(now);
        }
        false
    }
    /// Control frames this end wrote go on its TCP connection: their lengths as
    /// bytes to send, their bytes into the mailbox.
    fn hand_over(r: &mut BlastFlow, side: usize, _now: Instant) -> bool {
        let mut any = false;
        let mut frame = vec![];
        while r.ends[side].poll_control(&mut frame) {
            let len = core::mem::take(&mut frame);
            r.written[side] += len.len() as u64;
            // The connection is never closed, so a write cannot fail.
            let _ = r.control[side].0.send(len.len() as u64);
            r.mail[side].push_back((r.written[side], len));
            any = true;
        }
        any
    }
}

/// A blast transfer's control connection: the simulator's TCP, driven as the
/// flow's second engine.
impl Engine for Control {
    type Event = TcpEvent;
    const LAYER: Layer = Layer::Ip;

    fn handle_datagram(&mut self, now: Instant, datagram: &[u8], wire_len: usize) {
        self.0.handle_datagram(now, datagram, wire_len)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.0.handle_timeout(now)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.0.poll_transmit(now, buf)
    }
    fn poll_event(&mut self) -> Option<TcpEvent> {
        self.0.poll_event()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.0.poll_timeout()
    }
}

impl Driven for Control {
    type Flow = BlastFlow;
    const BYTES: Bytes = Bytes::Elided;
    const PORTS: [u16; 2] = [TCP_SENDER_PORT, TCP_RECEIVER_PORT];
    const ENGINE: u8 = 1;
    const PAIRED: bool = true;

    fn record(flow: &mut Flow) -> Option<&mut BlastFlow> {
        blast_flow(flow)
    }
    fn ends(r: &mut BlastFlow) -> &mut [Self; 2] {
        &mut r.control
    }
    fn timers(r: &mut BlastFlow) -> &mut [Option<Instant>; 2] {
        &mut r.control_timer_at
    }
    fn hosts(r: &BlastFlow) -> (usize, usize) {
        (r.spec.from, r.spec.to)
    }
    fn on_event(r: &mut BlastFlow, side: usize, now: Instant, ev: TcpEvent) -> bool {
        if ev == TcpEvent::Connected && !r.connected[side] {
            r.connected[side] = true;
            r.ends[side].control_connected(now);
            r.nudge[side] = true;
        }
        false
    }
    /// Frames the peer wrote whose last byte this end's TCP has now delivered in
    /// order go to this side's blast end.
    fn hand_over(r: &mut BlastFlow, side: usize, now: Instant) -> bool {
        let delivered = r.control[side].0.delivered_bytes();
        let inbox = &mut r.mail[1 - side];
        while inbox.front().is_some_and(|(end, _)| *end <= delivered) {
            let (_, bytes) = inbox.pop_front().expect("just seen");
            r.ends[side].handle_control(now, &bytes);
            r.nudge[side] = true;
        }
        core::mem::take(&mut r.nudge[side])
    }
}
