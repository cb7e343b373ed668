//! A blocking UDT socket: the sans-IO engine driven over a connected UDP socket.

use std::io::{self, ErrorKind};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration as StdDuration;

use longhaul_proto::cc::BbrGroup;
use longhaul_proto::udt::{Direct, Event, State, UdtConnConfig, UdtConnection};
use longhaul_proto::{Engine, Instant};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;

use nix::errno::Errno;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};
use nix::sys::time::TimeSpec;

use crate::arrivals::Arrivals;
use crate::clock::Clock;
use crate::secure::{PacketProtection, PACKET_OVERHEAD};

mod buffers;
mod listener;

pub use buffers::socket_buffer_warning;
use buffers::{buffer_warning, udp_socket};
pub use listener::UdtListener;

/// The senders of one transfer's channels, one BBR model among them: the model and
/// the clock they all read it by (a model's times must come from one clock).
#[derive(Debug, Clone)]
pub struct RateGroup {
    /// The shared model.
    pub model: BbrGroup,
    /// The clock every member's connection runs on.
    pub clock: Clock,
}

/// The driver blocks in the kernel only when the engine's next deadline is further
/// than this; nearer deadlines are met by spinning.
pub const SPIN: StdDuration = StdDuration::from_micros(50);

/// The C `int` of socket options and control messages.
#[allow(non_camel_case_types)]
type libc_int = i32;

/// While datagrams keep coming (one within this long), a driver about to sleep first
/// polls the socket for up to [`RX_SPIN`], yielding the core between polls: on a
/// busy path the next datagram is nearly always that close, and a sleep and wake-up
/// per datagram costs more than the datagram itself. (It yields rather than spins
/// because a receiver that reads runs waits longer between them, and its peer's
/// sender may need the core: 2 channels on 2 cores, 7.1-7.2 Gb/s spinning, 9.4-10.5
/// yielding.)
const RX_BUSY: StdDuration = StdDuration::from_micros(200);
/// How long a busy receiver polls before sleeping.
const RX_SPIN: StdDuration = StdDuration::from_micros(30);

/// Most datagrams one UDP GSO send carries (the kernel's `UDP_MAX_SEGMENTS` is 64
/// on older kernels, 128 on newer), and most bytes.
const GSO_MAX_SEGMENTS: usize = 64;
const GSO_MAX_BYTES: usize = 65_000;
/// UDT's packet header, bytes: a full data datagram is the payload plus this.
const UDT_HEADER: usize = 16;

/// How long the peer's port may refuse datagrams (ICMP port unreachable), with
/// nothing received from it, before the connection counts as broken.
const PEER_GONE: StdDuration = StdDuration::from_secs(1);

/// What can go wrong with a UDT socket.
///
/// Each message includes its cause, so none is also given as a `source()` (a
/// report that prints the chain would say it twice).
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The socket failed.
    #[error("UDP socket: {0}")]
    Io(io::Error),
    /// The handshake timed out or was rejected.
    #[error("UDT handshake with {0} failed (no answer, or rejected)")]
    ConnectFailed(SocketAddr),
    /// Nothing came in time. (Shown to a tenth of a second: the time left of a
    /// step's wait, as passed on, is 29.99999997 s, not 30 s.)
    #[error("timed out after {:.1} s", .0.as_secs_f64())]
    Timeout(StdDuration),
    /// The peer stopped answering (UDT's EXP timer gave up).
    #[error("the connection broke: the peer stopped answering, or its port closed")]
    Broken,
    /// Writing after a close, or before the connection is up.
    #[error("the connection is not open for writing")]
    NotConnected,
}

impl From<io::Error> for NetError {
    fn from(e: io::Error) -> Self {
        NetError::Io(e)
    }
}

/// Faults the driver injects into the datagrams it sends, for tests: a seeded,
/// in-process lossy, duplicating and reordering link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impairment {
    /// Probability that a datagram is dropped.
    pub loss: f64,
    /// Probability that a datagram is sent twice.
    pub duplicate: f64,
    /// Probability that a datagram is held back and sent after the next one.
    pub reorder: f64,
    /// Probability that a data packet has a payload byte flipped (corruption that
    /// slipped past the link's and UDP's checks).
    pub corrupt: f64,
    /// Seed of the fault stream.
    pub seed: u64,
}

/// The impairment's state: its random stream and a held-back datagram.
#[derive(Debug)]
struct Faults {
    cfg: Impairment,
    rng: SplitMix64,
    held: Option<Vec<u8>>,
}

impl Faults {
    /// A uniform draw in [0, 1] from SplitMix64: a small, well-mixed stream,
    /// enough for fault injection.
    fn uniform(&mut self) -> f64 {
        self.rng.next_u64() as f64 / u64::MAX as f64
    }
}

/// A connected UDT socket.
#[derive(Debug)]
pub struct UdtSocket {
    faults: Option<Faults>,
    /// Each datagram sealed and opened under the session's keys (`None`: UDT4's
    /// wire format, in clear).
    protect: Option<PacketProtection>,
    sock: UdpSocket,
    peer: SocketAddr,
    conn: UdtConnection,
    clock: Clock,
    tx: Vec<u8>,
    /// Room for the largest read: one datagram, or a GRO run of them (at most
    /// 64 KiB), and for its control message (the run's segment size).
    rx: Vec<u8>,
    cmsg: Vec<u8>,
    arrivals: Arrivals,
    connected: bool,
    failed: bool,
    broken: bool,
    peer_shutdown: bool,
    /// Since when the peer's port has been refusing our datagrams (ICMP port
    /// unreachable, seen as ECONNREFUSED), with nothing received since.
    refused_since: Option<Instant>,
    buffers: [usize; 2],
    /// When the last datagram arrived.
    last_rx: Instant,
    /// UDP GSO: whether the kernel takes it, and the segment size set on the socket
    /// (0: none yet). Full data datagrams that are due together leave in one send.
    gso_ok: bool,
    gso_seg: usize,
    /// The system calls this driver made, and the datagrams they moved.
    io: IoCounters,
}

/// A driver's system calls, by kind, and the datagrams they moved: the cost of a
/// packet in kernel crossings, which `bench loopback` reports and a test bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// `send` calls (a GSO run is one; a call the kernel turned away as full and
    /// that was made again counts again).
    pub sends: u64,
    /// Datagrams those calls carried.
    pub datagrams_sent: u64,
    /// `recvmsg` calls, including the last of each drain, which finds nothing.
    pub recvs: u64,
    /// Datagrams they returned.
    pub datagrams_received: u64,
    /// The calls that returned any: with UDP GRO, one returns a run of datagrams
    /// (all of one GSO send, on loopback).
    pub runs_received: u64,
    /// Datagrams read alone and timed by the kernel's receive stamp (the others
    /// came in runs, or without a stamp, and are timed by the read).
    pub stamped: u64,
    /// `ppoll` sleeps.
    pub polls: u64,
    /// `sched_yield` calls (spinning toward a deadline, or waiting for room).
    pub yields: u64,
}

impl IoCounters {
    /// All system calls counted.
    pub fn syscalls(&self) -> u64 {
        self.sends + self.recvs + self.polls + self.yields
    }
}

impl core::ops::AddAssign for IoCounters {
    /// Sums two drivers' counts (a bench's channels).
    fn add_assign(&mut self, b: IoCounters) {
        self.sends += b.sends;
        self.datagrams_sent += b.datagrams_sent;
        self.recvs += b.recvs;
        self.datagrams_received += b.datagrams_received;
        self.runs_received += b.runs_received;
        self.stamped += b.stamped;
        self.polls += b.polls;
        self.yields += b.yields;
    }
}

/// Where the engine writes a datagram in a buffer: after the room for the counter
/// when it is to be sealed ([`crate::secure::SEALED_OFFSET`]).
fn offset_for(protect: &Option<PacketProtection>) -> usize {
    protect.as_ref().map_or(0, |_| crate::secure::SEALED_OFFSET)
}

/// A tag of an address (IP and port) for the engine's cookies.
fn address_tag(a: SocketAddr) -> u64 {
    let h = blake3::hash(a.to_string().as_bytes());
    u64::from_be_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// A protected socket's engine makes its datagrams [`PACKET_OVERHEAD`] shorter, so
/// that sealed they are the size asked for (both ends do, so they agree).
fn room_for_protection(cfg: UdtConnConfig, protect: &Option<PacketProtection>) -> UdtConnConfig {
    match protect {
        None => cfg,
        Some(_) => UdtConnConfig {
            mss: (cfg.mss.saturating_sub(PACKET_OVERHEAD as u32)).max(longhaul_proto::udt::MIN_MSS),
            ..cfg
        },
    }
}

impl UdtSocket {
    fn new(
        sock: UdpSocket,
        peer: SocketAddr,
        conn: UdtConnection,
        clock: Clock,
        buffers: [usize; 2],
    ) -> Self {
        // UDP GRO (Linux 5.0 and later): a run of equal-sized datagrams from the
        // peer comes up in one read. Refused, each comes alone, as before.
        let _ = setsockopt(&sock, sockopt::UdpGroSegment, &true);
        // The kernel's receive time of each datagram (or run), for UDT's rate
        // estimates (see `arrivals`). Refused, datagrams are timed when read.
        let _ = setsockopt(&sock, sockopt::ReceiveTimestampns, &true);
        UdtSocket {
            faults: None,
            protect: None,
            buffers,
            sock,
            peer,
            conn,
            clock,
            tx: vec![0u8; 1 << 16],
            rx: vec![0u8; 1 << 16],
            cmsg: nix::cmsg_space!(libc_int, TimeSpec),
            arrivals: Arrivals::default(),
            connected: false,
            failed: false,
            broken: false,
            peer_shutdown: false,
            refused_since: None,
            last_rx: Instant::ZERO,
            gso_ok: true,
            gso_seg: 0,
            io: IoCounters::default(),
        }
    }

    /// Connects to a UDT server (ours or UDT4's) at `addr`.
    pub fn connect(
        addr: SocketAddr,
        cfg: UdtConnConfig,
        timeout: StdDuration,
    ) -> Result<Self, NetError> {
        Self::connect_protected(addr, cfg, timeout, None)
    }

    /// [`connect`](Self::connect), every datagram protected by `protect` (if any).
    pub fn connect_protected(
        addr: SocketAddr,
        cfg: UdtConnConfig,
        timeout: StdDuration,
        protect: Option<PacketProtection>,
    ) -> Result<Self, NetError> {
        Self::connect_member(addr, cfg, timeout, protect, None)
    }

    /// [`connect_protected`](Self::connect_protected), the sender a member of
    /// `group` if there is one: its BBR runs the group's model (see
    /// [`BbrGroup`]), on the group's clock.
    pub fn connect_member(
        addr: SocketAddr,
        cfg: UdtConnConfig,
        timeout: StdDuration,
        protect: Option<PacketProtection>,
        group: Option<&RateGroup>,
    ) -> Result<Self, NetError> {
        let cfg = room_for_protection(cfg, &protect);
        let bind: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0".parse().expect("literal")
        } else {
            "[::]:0".parse().expect("literal")
        };
        let (sock, buffers) = udp_socket(bind)?;
        sock.connect(addr)?;
        let clock = group.map_or_else(Clock::new, |g| g.clock);
        let mut conn = UdtConnection::new(cfg, clock.now());
        if let Some(g) = group {
            conn.join_rate_group(&g.model);
        }
        conn.connect(clock.now());
        let mut s = UdtSocket::new(sock, addr, conn, clock, buffers);
        s.protect = protect;
        let give_up = clock.now() + to_proto(timeout);
        s.wait_connected(give_up, timeout)?;
        Ok(s)
    }

    fn wait_connected(&mut self, give_up: Instant, timeout: StdDuration) -> Result<(), NetError> {
        while !self.connected {
            if self.failed {
                return Err(NetError::ConnectFailed(self.peer));
            }
            if self.clock.now() >= give_up {
                return Err(NetError::Timeout(timeout));
            }
            self.step(true)?;
        }
        Ok(())
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }
    /// The kernel's send and receive buffers, bytes, as granted; below what a
    /// burst needs (`net.core.wmem_max`/`rmem_max` too small) a fast sender's
    /// datagrams may be dropped by the kernel, which UDT then repairs.
    pub fn socket_buffers(&self) -> [usize; 2] {
        self.buffers
    }
    /// Whether the kernel granted less than the buffers asked for, and so what to
    /// raise.
    pub fn buffer_warning(&self) -> Option<String> {
        buffer_warning(self.buffers)
    }
    /// Injects faults into every datagram this side sends from now on.
    pub fn impair(&mut self, cfg: Impairment) {
        self.faults = Some(Faults {
            rng: SplitMix64::seed_from_u64(cfg.seed),
            cfg,
            held: None,
        });
    }

    /// Takes the packet protection out (for a connection turned away, so that the
    /// next socket under the same keys counts on from where this one stopped).
    pub fn take_protection(&mut self) -> Option<PacketProtection> {
        self.protect.take()
    }

    /// The engine, for its statistics and state.
    pub fn connection(&self) -> &UdtConnection {
        &self.conn
    }

    /// Writes some of `data` (blocking until the send buffer has room) and says how
    /// much.
    pub fn write(&mut self, data: &[u8]) -> Result<usize, NetError> {
        loop {
            if self.broken {
                return Err(NetError::Broken);
            }
            let n = self.conn.send(data).map_err(|_| NetError::NotConnected)?;
            if n > 0 || data.is_empty() {
                self.step(false)?;
                return Ok(n);
            }
            self.step(true)?;
        }
    }

    /// Writes all of `data`.
    pub fn write_all(&mut self, mut data: &[u8]) -> Result<(), NetError> {
        while !data.is_empty() {
            let n = self.write(data)?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Writes all of `data` without copying it: the send buffer holds slices of
    /// it until they are acknowledged (`UdtConnection::send_shared`), one copy per
    /// byte fewer than [`write_all`](Self::write_all). The caller has its buffer
    /// back when `data` is unique again.
    pub fn write_all_shared(&mut self, data: &bytes::Bytes) -> Result<(), NetError> {
        let mut off = 0;
        while off < data.len() {
            if self.broken {
                return Err(NetError::Broken);
            }
            let n = self
                .conn
                .send_shared(&data.slice(off..))
                .map_err(|_| NetError::NotConnected)?;
            off += n;
            self.step(n == 0)?;
        }
        Ok(())
    }

    /// Reads into `buf`; 0 once the peer has shut down and everything is read.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize, NetError> {
        Ok(self.read_until(buf, None)?.expect("no deadline"))
    }

    /// Like [`read`](Self::read), but gives up after `max` with `Ok(None)`: for a
    /// reader that must also watch something else (a stop request, a deadline).
    pub fn read_within(
        &mut self,
        buf: &mut [u8],
        max: StdDuration,
    ) -> Result<Option<usize>, NetError> {
        let give_up = self.clock.now() + to_proto(max);
        self.read_until(buf, Some(give_up))
    }

    fn read_until(
        &mut self,
        buf: &mut [u8],
        give_up: Option<Instant>,
    ) -> Result<Option<usize>, NetError> {
        loop {
            let n = self.conn.recv(buf);
            if n > 0 || buf.is_empty() {
                return Ok(Some(n));
            }
            if self.broken {
                return Err(NetError::Broken);
            }
            if self.peer_shutdown || self.conn.state() == State::Closed {
                return Ok(Some(0));
            }
            if give_up.is_some_and(|t| self.clock.now() >= t) {
                return Ok(None);
            }
            // Nothing waits in the connection: what arrives in order goes straight
            // into `buf` (one copy of each byte fewer).
            let mut reader = Direct::new(buf);
            self.step_within(true, StdDuration::MAX, &mut reader)?;
            let n = reader.filled();
            if n > 0 {
                return Ok(Some(n));
            }
        }
    }

    /// Keeps answering the peer (acknowledging what it sends) until it shuts down
    /// or `max` passes: a reader that has all it wants stays until its last
    /// acknowledgements have been heard, so that the peer's close completes.
    pub fn linger(&mut self, max: StdDuration) -> Result<(), NetError> {
        let give_up = self.clock.now() + to_proto(max);
        while !self.peer_shutdown
            && !self.broken
            && self.conn.state() != State::Closed
            && self.clock.now() < give_up
        {
            self.step(true)?;
        }
        Ok(())
    }

    /// Sends a shutdown once everything written is acknowledged, and waits for that
    /// (at most `timeout`).
    pub fn close(mut self, timeout: StdDuration) -> Result<(), NetError> {
        self.conn.close();
        let give_up = self.clock.now() + to_proto(timeout);
        while self.conn.state() != State::Closed {
            if self.broken {
                return Err(NetError::Broken);
            }
            if self.clock.now() >= give_up {
                return Err(NetError::Timeout(timeout));
            }
            self.step(true)?;
        }
        Ok(())
    }

    /// One round of the driver: send what is due, take what arrived, run the
    /// timers; with `wait`, then wait for a datagram or the next deadline.
    fn step(&mut self, wait: bool) -> Result<(), NetError> {
        self.step_within(wait, StdDuration::MAX, &mut Direct::none())
    }

    /// Keeps the connection going until less than `cushion` of the written data is
    /// still unsent, or `cushion_time` of sending at the current rate if that is
    /// more: a writer that hands out work by how fast each connection drains asks
    /// for more only then, so no connection holds a queue of it when the work runs
    /// out (the time keeps a fast connection from running dry while the next
    /// piece is prepared).
    pub fn drain_below(
        &mut self,
        cushion: usize,
        cushion_time: StdDuration,
    ) -> Result<(), NetError> {
        loop {
            if self.broken {
                return Err(NetError::Broken);
            }
            let c = &self.conn;
            // The rate it sends at: its pacing, or its window per round trip if
            // that is less. (A window-limited control such as BBR's may leave
            // the period near zero: by the period alone, 20 ms would be tens of
            // megabytes, and a channel would take several blocks at once.)
            let payload = c.payload_size() as f64;
            let per_sec = (payload * 1e6 / c.pkt_snd_period_us().max(1e-3))
                .min(c.cwnd_pkts() * payload * 1e6 / c.rtt_us().max(1.0));
            let limit = (cushion as f64).max(per_sec * cushion_time.as_secs_f64());
            if ((c.unsent_pkts() * c.payload_size()) as f64) < limit {
                return Ok(());
            }
            self.step(true)?;
        }
    }

    /// Keeps the connection going (sends what is due, answers the peer) for `max`:
    /// for a writer that must wait for something else without starving its peer of
    /// acknowledgements or leaving its own buffered data unsent.
    pub fn idle(&mut self, max: StdDuration) -> Result<(), NetError> {
        let give_up = self.clock.now() + to_proto(max);
        loop {
            if self.broken {
                return Err(NetError::Broken);
            }
            let now = self.clock.now();
            if now >= give_up {
                return Ok(());
            }
            let left =
                StdDuration::from_nanos(give_up.saturating_duration_since(now).as_nanos() as u64);
            self.step_within(true, left, &mut Direct::none())?;
        }
    }

    /// [`step`](Self::step), waiting at most `cap`, with in-order bytes that
    /// arrive going into `reader` while none wait in the connection.
    fn step_within(
        &mut self,
        wait: bool,
        cap: StdDuration,
        reader: &mut Direct<'_>,
    ) -> Result<(), NetError> {
        let now = self.clock.now();
        if self.faults.is_none() && self.gso_ok {
            self.send_batched(now)?;
        }
        let at = offset_for(&self.protect);
        while let Some(t) = self.conn.poll_transmit(now, &mut self.tx[at..]) {
            let n = match &mut self.protect {
                None => t.written,
                Some(p) => p.seal(&mut self.tx, t.written),
            };
            self.io.datagrams_sent += 1;
            match &mut self.faults {
                None => send_one(&self.sock, &self.tx[..n], &mut self.io)?,
                Some(f) => {
                    if f.uniform() < f.cfg.loss {
                        continue;
                    }
                    // A data packet (first bit 0) with a payload after its 16-byte header.
                    // (Sealed, the header starts after the counter.)
                    if self.tx[at] & 0x80 == 0 && n > at + 16 && f.uniform() < f.cfg.corrupt {
                        let at = at + 16 + (f.uniform() * (n - at - 16) as f64) as usize;
                        self.tx[at.min(n - 1)] ^= 0x40;
                    }
                    if f.held.is_none() && f.uniform() < f.cfg.reorder {
                        f.held = Some(self.tx[..n].to_vec());
                        continue;
                    }
                    send_one(&self.sock, &self.tx[..n], &mut self.io)?;
                    if f.uniform() < f.cfg.duplicate {
                        send_one(&self.sock, &self.tx[..n], &mut self.io)?;
                    }
                    if let Some(h) = f.held.take() {
                        send_one(&self.sock, &h, &mut self.io)?;
                    }
                }
            }
        }
        let mut got = self.drain(reader)?;
        self.conn.handle_timeout(self.clock.now());
        self.events();
        if !wait || got {
            return Ok(());
        }
        let now = self.clock.now();
        let until = self
            .conn
            .poll_timeout()
            .map_or(StdDuration::from_millis(100), |t| {
                StdDuration::from_nanos(t.saturating_duration_since(now).as_nanos() as u64)
            })
            .min(cap);
        if until > SPIN {
            // Datagrams are flowing: poll a little before paying for a sleep.
            let busy = now.saturating_duration_since(self.last_rx) < to_proto(RX_BUSY);
            if busy {
                let give_up = now + to_proto(RX_SPIN.min(until - SPIN / 2));
                while !got && self.clock.now() < give_up {
                    got = self.drain(reader)?;
                    self.io.yields += 1;
                    std::thread::yield_now();
                }
            }
            if !got {
                // Sleep in the kernel until a datagram comes or shortly before the
                // deadline. The socket stays non-blocking; ppoll does the waiting.
                let now = self.clock.now();
                let left = StdDuration::from_nanos(
                    give_up_at(now, until)
                        .saturating_duration_since(now)
                        .as_nanos() as u64,
                );
                let mut fds = [PollFd::new(self.sock.as_fd(), PollFlags::POLLIN)];
                self.io.polls += 1;
                match ppoll(&mut fds, Some(TimeSpec::from(left)), None) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(io::Error::from(e).into()),
                }
                self.drain(reader)?;
            }
        } else {
            self.io.yields += 1;
            std::thread::yield_now();
        }
        self.conn.handle_timeout(self.clock.now());
        self.events();
        Ok(())
    }

    /// Sends everything due with UDP GSO: runs of full data datagrams (and one
    /// shorter datagram to end a run) go in one `send`, which the kernel cuts at the
    /// segment size. Leaves nothing due unless the kernel refuses GSO, in which case
    /// GSO is off from then on and the caller's plain loop sends the rest.
    fn send_batched(&mut self, now: Instant) -> Result<(), NetError> {
        let plain = self.conn.payload_size() + UDT_HEADER;
        let seg = plain + self.protect.as_ref().map_or(0, |_| PACKET_OVERHEAD);
        if seg != self.gso_seg {
            if setsockopt(&self.sock, sockopt::UdpGsoSegment, &(seg as libc_int)).is_err() {
                self.gso_ok = false;
                return Ok(());
            }
            self.gso_seg = seg;
        }
        let max = (GSO_MAX_BYTES / seg).clamp(1, GSO_MAX_SEGMENTS) * seg;
        let at = offset_for(&self.protect);
        let mut len = 0;
        loop {
            let t = self
                .conn
                .poll_transmit(now, &mut self.tx[len + at..len + at + plain]);
            if let Some(t) = t {
                len += match &mut self.protect {
                    None => t.written,
                    Some(p) => p.seal(&mut self.tx[len..len + seg], t.written),
                };
                if t.written == plain && len + seg <= max {
                    continue;
                }
            }
            if len > 0 {
                self.send_run(len, seg)?;
                len = 0;
            }
            if t.is_none() {
                return Ok(());
            }
        }
    }

    /// The system calls so far, and the datagrams they moved: with UDP GSO, a
    /// busy sender's datagrams are several times its sends.
    pub fn io_counters(&self) -> IoCounters {
        self.io
    }

    /// Sends `tx[..len]`, a run of `seg`-byte datagrams (the last may be shorter).
    fn send_run(&mut self, len: usize, seg: usize) -> Result<(), NetError> {
        self.io.datagrams_sent += len.div_ceil(seg) as u64;
        match send_one(&self.sock, &self.tx[..len], &mut self.io) {
            Err(NetError::Io(e)) if len > seg && matches!(e.raw_os_error(), Some(5 | 22)) => {
                // EIO or EINVAL: this path cannot segment (quinn-udp meets the same
                // on some NICs). Send this run one datagram at a time, and no more
                // runs.
                self.gso_ok = false;
                for d in self.tx[..len].chunks(seg) {
                    send_one(&self.sock, d, &mut self.io)?;
                }
                Ok(())
            }
            r => r,
        }
    }

    /// Hands every datagram already queued to the engine (in-order bytes into
    /// `reader` while none wait in the connection).
    fn drain(&mut self, reader: &mut Direct<'_>) -> Result<bool, NetError> {
        let mut any = false;
        loop {
            // One read takes one datagram, or with UDP GRO a run of equal-sized
            // datagrams (the segment size in a control message): on loopback, all
            // of one GSO send, which the kernel then never cuts up at all.
            self.io.recvs += 1;
            let began = self.clock.now();
            let got = {
                let mut iov = [io::IoSliceMut::new(&mut self.rx)];
                recvmsg::<()>(
                    self.sock.as_raw_fd(),
                    &mut iov,
                    Some(&mut self.cmsg),
                    MsgFlags::MSG_DONTWAIT,
                )
                .map(|m| {
                    let (mut seg, mut stamp) = (None, None);
                    for c in m.cmsgs().into_iter().flatten() {
                        match c {
                            ControlMessageOwned::UdpGroSegments(s) => seg = usize::try_from(s).ok(),
                            ControlMessageOwned::ScmTimestampns(t) => stamp = Some(t),
                            _ => {}
                        }
                    }
                    (m.bytes, seg, stamp, m.flags.contains(MsgFlags::MSG_TRUNC))
                })
            };
            match got {
                Ok((n, seg, stamp, truncated)) => {
                    let now = self.clock.now();
                    let stamp = stamp.map(|t| self.clock.from_wall(StdDuration::from(t)));
                    let seg = seg.filter(|&s| s > 0).unwrap_or(n.max(1));
                    if truncated {
                        // Longer than any datagram UDT sends: not from our peer.
                        continue;
                    }
                    // A run's datagrams came together; `Arrivals` says when, for
                    // UDT's rate estimates.
                    let k = n.div_ceil(seg);
                    self.io.runs_received += 1;
                    if k == 1 && stamp.is_some() {
                        self.io.stamped += 1;
                    }
                    let times = self.arrivals.run(now, k, stamp);
                    for (i, at) in (0..n).step_by(seg).enumerate() {
                        let len = seg.min(n - at);
                        self.io.datagrams_received += 1;
                        let d = &mut self.rx[at..at + len];
                        let plain = match &mut self.protect {
                            None => 0..len,
                            // Forged, damaged or replayed: as if it never came.
                            Some(p) => match p.open(d, len) {
                                Some(r) => r,
                                None => continue,
                            },
                        };
                        self.conn.handle_datagram_reading(
                            times.at(i),
                            &d[plain.clone()],
                            plain.len(),
                            reader,
                        );
                        self.last_rx = now;
                        self.refused_since = None;
                        any = true;
                    }
                    self.arrivals.took(began, self.clock.now(), k);
                }
                Err(Errno::EAGAIN) => return Ok(any),
                Err(Errno::EINTR) => {}
                Err(Errno::ECONNREFUSED) => {
                    // The peer's host says nothing listens on its port any more: the
                    // peer process is gone. UDT4 ignores this and waits for its EXP
                    // timer, 16 expirations of growing length (about 41 s); refusals
                    // for PEER_GONE with nothing received in between end the
                    // connection here instead. (Before it is up, the peer may not
                    // have bound yet: the handshake's own timeout applies.)
                    if self.connected {
                        let now = self.clock.now();
                        let since = *self.refused_since.get_or_insert(now);
                        if now.saturating_duration_since(since) >= to_proto(PEER_GONE) {
                            self.broken = true;
                        }
                    }
                    return Ok(any);
                }
                Err(e) => return Err(io::Error::from(e).into()),
            }
        }
    }

    fn events(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::Connected => self.connected = true,
                Event::ConnectFailed => self.failed = true,
                Event::Broken => self.broken = true,
                Event::PeerShutdown => self.peer_shutdown = true,
                Event::Readable => {}
            }
        }
    }
}

/// When a driver that started waiting at `now` for a deadline `until` away should
/// wake: half a spin early, so the deadline is met by polling, not by a late wake-up.
fn give_up_at(now: Instant, until: StdDuration) -> Instant {
    now + to_proto(until - SPIN / 2)
}

/// Sends one datagram (or a GSO run) on the connected socket, counting the calls.
fn send_one(sock: &UdpSocket, datagram: &[u8], io: &mut IoCounters) -> Result<(), NetError> {
    loop {
        io.sends += 1;
        match sock.send(datagram) {
            Ok(_) => return Ok(()),
            // The kernel's buffer is full: wait for it rather than lose the packet
            // the engine already counts as sent.
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                io.yields += 1;
                std::thread::yield_now();
            }
            // The peer's port is closed (ICMP): UDT's timers decide.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

fn to_proto(d: StdDuration) -> longhaul_proto::Duration {
    longhaul_proto::Duration::from_nanos(d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

#[cfg(test)]
mod error_tests {
    use super::NetError;
    use std::time::Duration;

    /// A timeout reads as the step's wait, not as the nanoseconds left of it.
    #[test]
    fn a_timeout_says_its_seconds_to_a_tenth() {
        let e = NetError::Timeout(Duration::from_nanos(29_999_999_970));
        assert_eq!(e.to_string(), "timed out after 30.0 s");
        let e = NetError::Timeout(Duration::from_millis(1500));
        assert_eq!(e.to_string(), "timed out after 1.5 s");
    }
}
