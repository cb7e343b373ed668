//! Transfers at run time: the sending application that cuts files into blocks and
//! writes them on whichever data channel has room, the control exchanges, the host
//! limits (disk and CPU as rates), and the receiving block manager.
//!
//! Content is elided, as everywhere in the simulator: a channel's stream is a byte
//! count, and the receiver learns each block's header from the sender's record of
//! what it framed at which stream offset (which is what parsing the real stream
//! gives; `longhaul_proto::transfer` tests that parsing on real bytes). A block is
//! taken from a channel once the channel has delivered its last byte in order.
//!
//! ```text
//!  sender                                               receiver
//!  files -> blocks -(room on a channel?)-> channel 0 ---> \
//!                 \                        channel 1 ---> -> block manager -> disk
//!                  `-(disk/CPU rates)      ...        ---> /  (in order per file)
//!  control: session request/reply; with pipelining off, one per file too
//! ```

use std::collections::VecDeque;

use longhaul_proto::cc::BbrGroup;
use longhaul_proto::names::Protocol;
use longhaul_proto::tcp::TcpConnection;
use longhaul_proto::transfer::{BlockRepr, Deframer, FileBlocks, Reassembler, HEADER_LEN};
use longhaul_proto::udt::{RateControl, UdtConnection};
use longhaul_proto::{Bandwidth, Duration, Instant};
use longhaul_wire::udp;

use super::{rearm, Endpoint, Simulation, IP_UDP};
use crate::app::{file_byte, Flow, TransferSpec};
use crate::metrics::TransferSummary;
use crate::packet::PacketId;
use crate::scheduler::Event;

/// UDP port of transfer `t`'s control channel, at both ends.
const CONTROL_PORT: u16 = 60000;
/// Marks an endpoint as a transfer's control channel rather than a flow.
pub(super) const CONTROL_FLAG: u32 = 1 << 31;
/// Control message kinds: a request, and its reply one above.
const SESSION: u8 = 1;
const FILE: u8 = 3;
/// What a disk reader or a core hands over at once, bytes.
const READ_CHUNK: u64 = 64 << 10;
/// The first control timeout (RFC 6298's initial RTO); later ones are twice the
/// measured round trip, at least 200 ms.
const CONTROL_RTO: Duration = Duration::from_secs(1);

/// A rate limit on bytes handed to channels: what a disk or a core can supply. A
/// token bucket: it fills at the rate up to `cap` (what a reader may have read
/// ahead into its buffers; a core cannot bank time) and empties as bytes are handed
/// over.
#[derive(Debug, Clone, Copy)]
struct Gate {
    /// Bytes per nanosecond; `None`: no limit.
    rate: Option<f64>,
    cap: f64,
    level: f64,
    last: Instant,
}

impl Gate {
    fn new(rate: Option<Bandwidth>, cap: u64) -> Self {
        Gate {
            rate: rate.map(|r| r.as_bps() as f64 / 8e9),
            cap: cap as f64,
            level: 0.0,
            last: Instant::ZERO,
        }
    }
    fn level_at(&self, now: Instant) -> f64 {
        let Some(r) = self.rate else {
            return f64::INFINITY;
        };
        let dt = now.saturating_duration_since(self.last).as_nanos() as f64;
        (self.level + dt * r).min(self.cap)
    }
    fn available(&self, now: Instant) -> u64 {
        let l = self.level_at(now);
        if l.is_infinite() {
            u64::MAX
        } else {
            l as u64
        }
    }
    fn take(&mut self, now: Instant, bytes: u64) {
        if self.rate.is_some() {
            self.level = (self.level_at(now) - bytes as f64).max(0.0);
            self.last = now;
        }
    }
    /// When `need` bytes will be available (the bucket holds at least that much).
    fn ready_at(&self, now: Instant, need: u64) -> Option<Instant> {
        let r = self.rate?;
        let short = (need as f64).min(self.cap) - self.level_at(now);
        Some(now + Duration::from_nanos((short.max(0.0) / r).ceil() as u64 + 1))
    }
    fn start(&mut self, now: Instant) {
        self.level = 0.0;
        self.last = now;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupState {
    /// Before the session reply.
    Waiting,
    /// A file request is out.
    Requesting(u32),
    /// Handing out the blocks of its file.
    Sending,
    /// No files left.
    Idle,
}

/// `parallelism` channels that move one file at a time.
#[derive(Debug)]
struct Group {
    state: GroupState,
    blocks: Option<FileBlocks>,
}

#[derive(Debug)]
struct ChannelRt {
    flow: usize,
    group: usize,
    /// The block being written, and its bytes (header included) not yet written.
    current: Option<(BlockRepr, u64)>,
    /// Bytes written on the channel's stream.
    written: u64,
    /// Blocks written and not yet delivered: (stream offset of their end, header).
    marks: VecDeque<(u64, BlockRepr)>,
    /// This channel's share of the sending host's CPU.
    gate: Gate,
    /// File bytes delivered.
    payload: u64,
    /// With content: splits what the channel delivers back into blocks.
    deframer: Deframer,
}

/// A control request awaiting its reply.
#[derive(Debug, Clone, Copy)]
struct Request {
    kind: u8,
    group: u16,
    file: u32,
    sent: Instant,
    retransmitted: bool,
}

/// A transfer's run-time state.
#[derive(Debug)]
pub(crate) struct TransferRt {
    pub spec: TransferSpec,
    started: bool,
    session_open: bool,
    next_file: u32,
    groups: Vec<Group>,
    channels: Vec<ChannelRt>,
    reasm: Reassembler,
    /// The source disk (and its reader threads).
    read_gate: Gate,
    /// When the destination disk has written everything handed to it.
    disk_free_at: Instant,
    pending: Vec<Request>,
    rto: Duration,
    ctl_timer_at: Option<Instant>,
    wake_at: Option<Instant>,
    exchanges: u64,
    ctl_retransmits: u64,
    completed_at: Option<Instant>,
    counted_done: bool,
    /// With content: bytes checked against the pattern, and those that differed.
    verified: u64,
    mismatched: u64,
}

impl TransferRt {
    pub fn new(spec: TransferSpec) -> Self {
        // A reader may read ahead a few blocks (at least 4 MiB) into its buffers.
        let block = HEADER_LEN as u64 + u64::from(spec.block_size);
        let pool = (4 * block * u64::from(spec.readers)).max(4 << 20);
        let src = spec.hosts[0];
        let n = spec.channels.len() as u64;
        // A reader thread moves data as fast as a core; the disk caps them all.
        let readers = src
            .core_rate
            .map(|c| Bandwidth::from_bps(c.as_bps() * u64::from(spec.readers)));
        let read_rate = match (src.disk_read, readers) {
            (Some(d), Some(r)) => Some(d.min(r)),
            (d, r) => d.or(r),
        };
        // Channels share the cores the readers leave (at least one).
        let cores = u64::from(src.cores.saturating_sub(u32::from(spec.readers)).max(1));
        let channel_rate = src.core_rate.map(|c| {
            if n <= cores {
                c
            } else {
                Bandwidth::from_bps(c.as_bps() * cores / n)
            }
        });
        let p = usize::from(spec.parallelism);
        let channels = spec
            .channels
            .iter()
            .enumerate()
            .map(|(i, &flow)| ChannelRt {
                flow,
                group: i / p,
                current: None,
                written: 0,
                marks: VecDeque::new(),
                gate: Gate::new(channel_rate, READ_CHUNK),
                payload: 0,
                deframer: Deframer::new(spec.block_size),
            })
            .collect();
        let groups = (0..spec.concurrency)
            .map(|_| Group {
                state: GroupState::Waiting,
                blocks: None,
            })
            .collect();
        TransferRt {
            reasm: Reassembler::new(spec.files.iter().copied()),
            read_gate: Gate::new(read_rate, pool),
            spec,
            started: false,
            session_open: false,
            next_file: 0,
            groups,
            channels,
            disk_free_at: Instant::ZERO,
            pending: vec![],
            rto: CONTROL_RTO,
            ctl_timer_at: None,
            wake_at: None,
            exchanges: 0,
            ctl_retransmits: 0,
            completed_at: None,
            counted_done: false,
            verified: 0,
            mismatched: 0,
        }
    }

    /// The next file with data for group `g`: straight on with pipelining (once the
    /// session is open), else after a request. Empty files need no data at all.
    fn next_file_for(&mut self, g: usize) -> Option<(u32, bool)> {
        while (self.next_file as usize) < self.spec.files.len() {
            let f = self.next_file;
            self.next_file += 1;
            if self.spec.files[f as usize] == 0 {
                continue;
            }
            if self.spec.pipelining {
                self.groups[g].state = GroupState::Sending;
                self.groups[g].blocks = Some(FileBlocks::new(
                    f,
                    self.spec.files[f as usize],
                    self.spec.block_size,
                ));
                return Some((f, false));
            }
            self.groups[g].state = GroupState::Requesting(f);
            self.groups[g].blocks = None;
            return Some((f, true));
        }
        self.groups[g].state = GroupState::Idle;
        self.groups[g].blocks = None;
        None
    }
}

impl Simulation {
    /// Adds transfers whose channels are flows already in this run.
    pub fn with_transfers(mut self, transfers: Vec<TransferSpec>) -> Result<Self, super::RunError> {
        let spec_err = super::RunError::Spec;
        if transfers.len() > 5000 {
            return Err(spec_err("at most 5000 transfers per scenario".into()));
        }
        for (t, spec) in transfers.into_iter().enumerate() {
            let want = usize::from(spec.parallelism) * usize::from(spec.concurrency);
            if spec.channels.len() != want || want == 0 || spec.block_size == 0 {
                return Err(spec_err(format!(
                    "transfer {t}: needs parallelism x concurrency channels and blocks of at least a byte"
                )));
            }
            for &f in &spec.channels {
                let ends = match self.flows.get(f) {
                    Some(Flow::Tcp(x)) => (x.spec.from, x.spec.to),
                    Some(Flow::Udt(x)) => (x.spec.from, x.spec.to),
                    _ => {
                        return Err(spec_err(format!(
                            "transfer {t}: channel flow {f} is not a TCP or UDT flow"
                        )))
                    }
                };
                if ends != (spec.from, spec.to) || self.channel_of[f].is_some() {
                    return Err(spec_err(format!(
                        "transfer {t}: flow {f} does not run between its hosts, or serves another transfer"
                    )));
                }
            }
            if spec.content
                && spec
                    .channels
                    .iter()
                    .any(|&f| !matches!(self.flows[f], Flow::Udt(_)))
            {
                return Err(spec_err(format!(
                    "transfer {t}: only UDT channels carry content (TCP here counts bytes)"
                )));
            }
            // With `couple`, UDT channels running BBR share one model: to the path
            // they are one flow.
            let group = match spec.channels.first().map(|&f| &self.flows[f]) {
                Some(Flow::Udt(u)) if spec.couple => match u.spec.config.rate_control {
                    RateControl::Bbr(b) => Some(BbrGroup::new(
                        b,
                        u.spec.config.mss,
                        spec.channels.len() as u32,
                        spec.start,
                    )),
                    _ => None,
                },
                _ => None,
            };
            for (i, &f) in spec.channels.iter().enumerate() {
                self.channel_of[f] = Some((t as u32, i as u16));
                self.content_flow[f] = spec.content;
                if let Flow::Udt(u) = &mut self.flows[f] {
                    u.unsent = 0; // its data comes from the transfer
                    if let Some(g) = &group {
                        u.ends[0].join_rate_group(g);
                    }
                }
            }
            let port = CONTROL_PORT + t as u16;
            for (node, side) in [(spec.from, 0), (spec.to, 1)] {
                self.nodes[node].add_endpoint(Endpoint {
                    protocol: 17,
                    port,
                    flow: CONTROL_FLAG | t as u32,
                    side,
                });
            }
            self.sched
                .schedule(spec.start, Event::TransferWake(t as u32));
            self.transfers.push(TransferRt::new(spec));
        }
        self.transfers_open = self.transfers.len();
        Ok(self)
    }

    /// A transfer's wake-up: its start, a rate limit that has let more bytes through,
    /// or the destination disk finishing.
    pub(super) fn on_transfer_wake(&mut self, now: Instant, t: usize) {
        let x = &mut self.transfers[t];
        if x.wake_at.is_some_and(|w| w <= now) {
            x.wake_at = None;
        }
        if !x.started {
            x.started = true;
            x.read_gate.start(now);
            for c in &mut x.channels {
                c.gate.start(now);
            }
            let files = x.spec.files.len() as u32;
            self.send_request(now, t, SESSION, u16::MAX, files);
            return;
        }
        self.check_done(now, t);
        for c in 0..self.transfers[t].channels.len() {
            self.drive_channel(now, t, c);
        }
    }

    fn drive_channel(&mut self, now: Instant, t: usize, c: usize) {
        let f = self.transfers[t].channels[c].flow;
        match self.flows[f] {
            Flow::Tcp(_) => self.drive::<TcpConnection>(now, f, 0),
            Flow::Udt(_) => self.drive::<UdtConnection>(now, f, 0),
            _ => unreachable!("channels are TCP or UDT flows"),
        }
    }

    /// The sending application: writes blocks on channel `c` of transfer `t` while
    /// its socket has room and the disk and CPU let it. Called before the channel's
    /// engine is polled for transmissions.
    pub(super) fn feed_channel(&mut self, now: Instant, t: usize, c: usize) {
        loop {
            let x = &mut self.transfers[t];
            if !x.session_open {
                return;
            }
            let ch = &mut x.channels[c];
            let g = ch.group;
            if ch.current.is_none() {
                let next = x.groups[g].blocks.as_mut().and_then(Iterator::next);
                match next {
                    Some(b) => {
                        x.channels[c].current = Some((b, HEADER_LEN as u64 + u64::from(b.len)));
                    }
                    None if x.groups[g].state == GroupState::Sending => {
                        // The file is all handed out: the group moves on.
                        if let Some((file, true)) = x.next_file_for(g) {
                            self.send_request(now, t, FILE, g as u16, file);
                            return;
                        }
                        continue;
                    }
                    None => return,
                }
            }
            let x = &mut self.transfers[t];
            let ch = &mut x.channels[c];
            let (block, left) = ch.current.expect("set above");
            let space = match &self.flows[ch.flow] {
                Flow::Tcp(tf) => tf.ends[0].send_space(),
                Flow::Udt(u) => {
                    if u.ends[0].state() != longhaul_proto::udt::State::Connected {
                        return;
                    }
                    u.ends[0].send_space_pkts() as u64 * u.ends[0].payload_size() as u64
                }
                _ => 0,
            };
            if space == 0 {
                return;
            }
            let allowed = x.read_gate.available(now).min(ch.gate.available(now));
            // A rate-limited source hands over whole reads, not a trickle of bytes
            // (which would cost an event each).
            let need = left.min(space).min(READ_CHUNK);
            if allowed < need {
                let at = [x.read_gate.ready_at(now, need), ch.gate.ready_at(now, need)]
                    .into_iter()
                    .flatten()
                    .max();
                if let Some(at) = at {
                    let at = at.max(now + Duration::from_nanos(1));
                    if x.wake_at.is_none_or(|w| w > at) {
                        x.wake_at = Some(at);
                        self.sched.schedule(at, Event::TransferWake(t as u32));
                    }
                }
                return;
            }
            let n = left.min(space).min(allowed);
            let taken = match &mut self.flows[ch.flow] {
                Flow::Tcp(tf) => tf.ends[0].send(n).map_or(0, |()| n),
                Flow::Udt(u) if x.spec.content => {
                    // The block's bytes from where the last write stopped: header,
                    // then file content.
                    let total = HEADER_LEN as u64 + u64::from(block.len);
                    let from = total - left;
                    let buf = &mut self.scratch;
                    buf.clear();
                    let mut h = [0u8; HEADER_LEN];
                    block.emit(&mut h);
                    for k in from..from + n {
                        buf.push(match k.checked_sub(HEADER_LEN as u64) {
                            None => h[k as usize],
                            Some(o) => file_byte(block.file, block.offset + o),
                        });
                    }
                    u.ends[0].send(buf).unwrap_or(0) as u64
                }
                Flow::Udt(u) => u.ends[0].send_virtual(n).unwrap_or(0),
                _ => 0,
            };
            if taken == 0 {
                return;
            }
            ch.written += taken;
            ch.gate.take(now, taken);
            x.read_gate.take(now, taken);
            if taken == left {
                ch.marks.push_back((ch.written, block));
                ch.current = None;
            } else {
                ch.current = Some((block, left - taken));
            }
        }
    }

    /// The receiving block manager: takes the blocks channel `c` has delivered whole.
    pub(super) fn channel_progress(&mut self, now: Instant, t: usize, c: usize) {
        if self.transfers[t].spec.content {
            self.channel_content(now, t, c);
            return;
        }
        let x = &mut self.transfers[t];
        let ch = &mut x.channels[c];
        let delivered = match &self.flows[ch.flow] {
            Flow::Tcp(tf) => tf.ends[1].delivered_bytes(),
            Flow::Udt(u) => u.ends[1].delivered_bytes(),
            _ => 0,
        };
        let mut any = false;
        while ch.marks.front().is_some_and(|&(end, _)| end <= delivered) {
            let (_, b) = ch.marks.pop_front().expect("checked");
            ch.payload += u64::from(b.len);
            let disk = x.spec.hosts[1].disk_write;
            let free = &mut x.disk_free_at;
            x.reasm
                .insert(b, None, |_, _, _, len| {
                    if let Some(w) = disk {
                        *free = (*free).max(now)
                            + Duration::from_nanos(w.tx_time_nanos(u64::from(len)));
                    }
                })
                .expect("the sender framed every block once, inside its file");
            any = true;
        }
        if any {
            self.after_blocks(now, t);
        }
    }

    /// The receiving application of a transfer that carries content: reads what
    /// channel `c` delivered, parses the blocks, reassembles and checks every byte.
    fn channel_content(&mut self, now: Instant, t: usize, c: usize) {
        let x = &mut self.transfers[t];
        let ch = &mut x.channels[c];
        let Flow::Udt(u) = &mut self.flows[ch.flow] else {
            return;
        };
        let buf = &mut self.scratch;
        buf.resize(1 << 16, 0);
        let mut any = false;
        loop {
            let n = u.ends[1].recv(buf);
            if n == 0 {
                break;
            }
            let disk = x.spec.hosts[1].disk_write;
            let (reasm, free) = (&mut x.reasm, &mut x.disk_free_at);
            let (verified, mismatched) = (&mut x.verified, &mut x.mismatched);
            let payload = &mut ch.payload;
            ch.deframer
                .push(&buf[..n], |b, data| {
                    *payload += u64::from(b.len);
                    reasm
                        .insert(b, Some(data), |file, offset, d, len| {
                            let d = d.expect("content carried");
                            *verified += u64::from(len);
                            *mismatched += d
                                .iter()
                                .enumerate()
                                .filter(|&(k, &v)| v != file_byte(file, offset + k as u64))
                                .count() as u64;
                            if let Some(w) = disk {
                                *free = (*free).max(now)
                                    + Duration::from_nanos(w.tx_time_nanos(u64::from(len)));
                            }
                        })
                        .expect("the sender framed every block once, inside its file");
                    any = true;
                })
                .expect("the sender frames every block");
        }
        if any {
            self.after_blocks(now, t);
        }
    }

    /// Once blocks were taken: whether the transfer is complete (when the
    /// destination disk has written the last byte).
    fn after_blocks(&mut self, now: Instant, t: usize) {
        let x = &mut self.transfers[t];
        if x.reasm.is_done() && x.completed_at.is_none() {
            let at = x.disk_free_at.max(now);
            x.completed_at = Some(at);
            if at > now {
                self.sched.schedule(at, Event::TransferWake(t as u32));
            } else {
                self.check_done(now, t);
            }
        }
    }

    fn check_done(&mut self, now: Instant, t: usize) {
        let x = &mut self.transfers[t];
        if !x.counted_done && x.completed_at.is_some_and(|at| at <= now) {
            x.counted_done = true;
            self.transfers_open -= 1;
        }
    }

    fn send_request(&mut self, now: Instant, t: usize, kind: u8, group: u16, file: u32) {
        let x = &mut self.transfers[t];
        x.pending.push(Request {
            kind,
            group,
            file,
            sent: now,
            retransmitted: false,
        });
        let (from, to) = (x.spec.from, x.spec.to);
        self.send_control(now, t, from, to, kind, group, file);
        self.rearm_control(t);
    }

    #[allow(clippy::too_many_arguments)]
    fn send_control(
        &mut self,
        now: Instant,
        t: usize,
        node: usize,
        dst: usize,
        kind: u8,
        group: u16,
        file: u32,
    ) {
        let bytes = self.transfers[t].spec.control_bytes as usize;
        let id = self.pool.alloc(now);
        let p = self.pool.get_mut(id);
        let port = CONTROL_PORT + t as u16;
        super::drive::udp_headers(&mut p.hdr, node, dst, [port, port], bytes - IP_UDP, 0);
        let m = &mut p.hdr[IP_UDP..IP_UDP + 8];
        m[0] = kind;
        m[1] = 0;
        m[2..4].copy_from_slice(&group.to_be_bytes());
        m[4..8].copy_from_slice(&file.to_be_bytes());
        p.hdr_len = (IP_UDP + 8) as u8;
        p.set_payload_len((bytes - IP_UDP - 8) as u32);
        debug_assert!(udp::HEADER_LEN + 8 <= bytes - 20);
        self.forward(now, node, dst, id);
    }

    /// A control message arrived at `side` of transfer `t`.
    pub(super) fn on_control(&mut self, now: Instant, t: usize, side: u8, pkt: PacketId) {
        let m = &self.pool.get(pkt).header()[IP_UDP..IP_UDP + 8];
        let kind = m[0];
        let group = u16::from_be_bytes([m[2], m[3]]);
        let file = u32::from_be_bytes([m[4], m[5], m[6], m[7]]);
        self.pool.free(pkt);
        let x = &mut self.transfers[t];
        if side == 1 {
            // The receiver answers every request, a repeated one too (its reply
            // may have been lost).
            if kind == SESSION || kind == FILE {
                let (from, to) = (x.spec.to, x.spec.from);
                self.send_control(now, t, from, to, kind + 1, group, file);
            }
            return;
        }
        let Some(i) = x
            .pending
            .iter()
            .position(|r| r.kind + 1 == kind && r.group == group && r.file == file)
        else {
            return; // a duplicate reply
        };
        let r = x.pending.swap_remove(i);
        x.exchanges += 1;
        if !r.retransmitted {
            // Karn: only unambiguous round trips set the timeout.
            let rtt = now.saturating_duration_since(r.sent);
            x.rto = (rtt * 2).max(Duration::from_millis(200));
        }
        self.rearm_control(t);
        let x = &mut self.transfers[t];
        if kind == SESSION + 1 {
            x.session_open = true;
            for g in 0..x.groups.len() {
                if let Some((file, true)) = self.transfers[t].next_file_for(g) {
                    self.send_request(now, t, FILE, g as u16, file);
                }
            }
        } else {
            let g = usize::from(group);
            if x.groups.get(g).map(|s| s.state) != Some(GroupState::Requesting(file)) {
                return;
            }
            x.groups[g].state = GroupState::Sending;
            x.groups[g].blocks = Some(FileBlocks::new(
                file,
                x.spec.files[file as usize],
                x.spec.block_size,
            ));
        }
        for c in 0..self.transfers[t].channels.len() {
            self.drive_channel(now, t, c);
        }
    }

    fn rearm_control(&mut self, t: usize) {
        let x = &mut self.transfers[t];
        let deadline = x.pending.iter().map(|r| r.sent + x.rto).min();
        rearm(
            &mut self.sched,
            &mut x.ctl_timer_at,
            deadline,
            Event::ControlTimer(t as u32),
        );
    }

    /// Requests without a reply in time are sent again, with the timeout doubled.
    pub(super) fn on_control_timer(&mut self, now: Instant, t: usize) {
        let x = &mut self.transfers[t];
        if x.ctl_timer_at != Some(now) {
            return;
        }
        x.ctl_timer_at = None;
        let rto = x.rto;
        let due: Vec<usize> = (0..x.pending.len())
            .filter(|&i| x.pending[i].sent + rto <= now)
            .collect();
        if !due.is_empty() {
            x.rto = (x.rto * 2).min(Duration::from_secs(60));
        }
        for i in due {
            let x = &mut self.transfers[t];
            let r = &mut x.pending[i];
            r.sent = now;
            r.retransmitted = true;
            x.ctl_retransmits += 1;
            let (kind, group, file) = (r.kind, r.group, r.file);
            let (from, to) = (x.spec.from, x.spec.to);
            self.send_control(now, t, from, to, kind, group, file);
        }
        self.rearm_control(t);
    }

    /// Whether every transfer has completed.
    pub(super) fn transfers_done(&self) -> bool {
        !self.transfers.is_empty() && self.transfers_open == 0
    }

    pub(super) fn transfer_summaries(&self, end: Instant) -> Vec<TransferSummary> {
        self.transfers
            .iter()
            .map(|x| {
                let s = &x.spec;
                let stop = x.completed_at.filter(|&c| c <= end).unwrap_or(end);
                let secs = stop.saturating_duration_since(s.start).as_secs_f64();
                let mbps = |bytes: u64| {
                    if secs > 0.0 {
                        bytes as f64 * 8.0 / secs / 1e6
                    } else {
                        0.0
                    }
                };
                let per_channel: Vec<f64> = x.channels.iter().map(|c| mbps(c.payload)).collect();
                let written: u64 = (0..s.files.len() as u32).map(|f| x.reasm.written(f)).sum();
                TransferSummary {
                    name: s.name.clone(),
                    transport: match self.flows[s.channels[0]] {
                        Flow::Tcp(_) => Protocol::Tcp.name().into(),
                        _ => Protocol::Udt.name().into(),
                    },
                    parallelism: s.parallelism,
                    concurrency: s.concurrency,
                    pipelining: s.pipelining,
                    channels: s.channels.clone(),
                    files: s.files.len(),
                    bytes: s.total_bytes(),
                    written_bytes: written,
                    start_s: s.start.as_secs_f64(),
                    completion_time_s: x
                        .completed_at
                        .filter(|&c| c <= end)
                        .map(|c| c.saturating_duration_since(s.start).as_secs_f64()),
                    throughput_mbps: mbps(written),
                    channel_goodput_mbps: per_channel.clone(),
                    jain_index: longhaul_model::jain(&per_channel).unwrap_or(1.0),
                    peak_held_bytes: x.reasm.peak_held_bytes(),
                    verified_bytes: s.content.then_some(x.verified),
                    mismatched_bytes: s.content.then_some(x.mismatched),
                    control_exchanges: x.exchanges,
                    control_retransmits: x.ctl_retransmits,
                }
            })
            .collect()
    }
}
