//! A sans-IO UDT connection, following UDT4 4.11 (`src/core.cpp`) and speaking its
//! wire format (`longhaul_wire::udt`).
//!
//! What it does: the SYN-cookie handshake (client and server); stream data in packets
//! of `mss - 44` bytes with 31-bit wrapping sequence numbers; a sender loss list with
//! retransmission priority; pacing at the rate controller's sending period with a
//! packet pair every 16 packets (time a packet leaves late is paid back, as 4.11
//! built without busy-waiting does, so a coarse driver keeps the rate); a receiver loss list with an immediate NAK on every
//! gap; a full ACK once per SYN and a light ACK every 64 packets; ACK2 and RTT/RTTVar
//! on both sides; the median-filtered receive-rate and bandwidth estimators; the flow
//! window from the receiver's free buffer; the EXP timer with go-back-N, keep-alive
//! and connection break; an orderly shutdown; counters; a payload-free ("virtual")
//! mode for the simulator. As an option ([`NakReport::Periodic`]), the receiver
//! re-reports losses on a NAK timer as the draft and the ns-2 model do; 4.11 does not.
//!
//! What it does not (yet): rendezvous, message (datagram) mode with TTL and message
//! drop requests, the peer cache.
//!
//! It is driven through [`Engine`]; its datagrams are UDP payloads. By concern:
//! `input` takes packets in (handshake, data, ACK/ACK2/NAK, shutdown), `timers` the
//! ACK, NAK and EXP timers, `output` what goes out (control first, then
//! retransmissions, then new data at the pacing rate), `estimator` the receiver's
//! rate and bandwidth estimates.

pub(crate) mod estimator;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use longhaul_wire::udt::{HandshakeRepr, HEADER_LEN};

use crate::cc::{
    ArUdt, ArUdtConfig, BbrConfig, BbrGroup, BbrUdt, Udt, UdtConfig as UdtCcConfig, UdtInputs,
    UdtRateControl, SELF_CLOCK, SYN_US,
};
use crate::engine::{Engine, Layer, Transmit};
use crate::seq::UdtSeqNumber;
use crate::time::{Duration, Instant};
pub use estimator::ArrivalClock;
use estimator::TimeWindow;

/// IP (20) and UDP (8) header bytes counted in the MSS.
const IP_UDP: u32 = 28;
/// The smallest MSS: a handshake must fit (UDT4 4.11's `UDT_MSS` floor,
/// `28 + CHandShake::m_iContentSize`).
pub const MIN_MSS: u32 = IP_UDP + longhaul_wire::udt::HANDSHAKE_LEN as u32;
/// SYN, µs.
const SYN: u64 = SYN_US as u64;
/// UDT4's timers tick in microseconds and fire strictly after their deadline
/// (`currtime > m_ullNextACKTime`), re-arming from the time they fired, so full ACKs
/// leave at least SYN + 1 µs apart. Firing exactly at the deadline instead would put
/// ACKs exactly SYN apart, and a few nanoseconds of jitter on the way back would then
/// make the sender's once-per-SYN rate control skip every other one.
const TIMER_TICK: Duration = Duration::from_micros(1);
/// Minimum EXP interval, µs.
const MIN_EXP_US: u64 = 300_000;
/// Handshake retransmission interval and give-up time.
const HANDSHAKE_RETRY: Duration = Duration::from_millis(250);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);
/// ACK history kept for ACK2 RTT samples.
const ACK_HISTORY: usize = 1024;

/// How the receiver reports losses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NakReport {
    /// UDT4 4.11: one NAK when a gap appears, and nothing more. A lost
    /// retransmission is recovered only by the sender's EXP timer (go-back-N), since
    /// 4.x comments the periodic NAK out ("rely on the sender's EXP").
    #[default]
    Once,
    /// A NAK timer, as in the ns-2 UDT module the AR-UDT study ran and in
    /// draft-gg-udt-03 §6.2: every max(RTT, SYN) (ns-2's period; the draft's
    /// 4·RTT + RTTVar + SYN would fire after the EXP timer), re-report every loss still
    /// missing whose last report is at least k·RTT old, k starting at 2 and growing
    /// by one per report (the draft's guard against re-reporting a retransmission
    /// that is still on its way).
    Periodic,
}

/// Which rate control a connection runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateControl {
    /// UDT's native control.
    Udt(UdtCcConfig),
    /// AR-UDT.
    ArUdt(UdtCcConfig, ArUdtConfig),
    /// BBR setting UDT's sending period and window ([`BbrUdt`]); UDT's loss
    /// recovery is unchanged.
    Bbr(BbrConfig),
}

impl RateControl {
    /// The same control with UDT's own random choices (the randomised decrease of
    /// its NAK response) drawn from `seed`. BBR's are its own (`BbrConfig::seed`).
    pub fn seeded(self, seed: u64) -> Self {
        match self {
            RateControl::Udt(u) => RateControl::Udt(UdtCcConfig { seed, ..u }),
            RateControl::ArUdt(u, a) => RateControl::ArUdt(UdtCcConfig { seed, ..u }, a),
            RateControl::Bbr(b) => RateControl::Bbr(b),
        }
    }
}

/// A connection's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdtConnConfig {
    /// Packet size, IP and UDP headers included (UDT4's MSS, default 1500; at least
    /// [`MIN_MSS`]).
    pub mss: u32,
    /// Largest flow window offered, packets (`m_iFlightFlagSize`, 25600).
    pub flight_flag_size: u32,
    /// Receive buffer, packets (8192).
    pub rcv_buf_pkts: u32,
    /// Send buffer, packets (8192).
    pub snd_buf_pkts: u32,
    /// Rate control.
    pub rate_control: RateControl,
    /// How losses are reported (a receiver-side choice).
    pub nak_report: NakReport,
    /// How arrivals are timed for the receive rate and link capacity in full ACKs
    /// (a receiver-side choice).
    pub arrival_clock: ArrivalClock,
    /// This side's socket ID (non-zero).
    pub socket_id: u32,
    /// Initial sequence number (the client's is used by both sides).
    pub isn: u32,
    /// Secret for SYN cookies (server side), for the simulator: a fixed value keeps
    /// runs reproducible, and no one forges packets there.
    pub cookie_secret: u64,
    /// A key for SYN cookies on a real network: with it a cookie is BLAKE3 keyed
    /// with it over the client's address (see [`UdtConnection::set_handshake_peer`]),
    /// socket ID and minute, which nobody without the key can compute, so a
    /// handshake from a spoofed address cannot complete. (UDT4 hashes
    /// host:port:minute with MD5 and a per-listener secret.) `longhaul-net` sets a
    /// random one per listener.
    pub cookie_key: Option<[u8; 32]>,
    /// A ceiling on the sending rate, b/s (UDT4's `UDT_MAXBW`; 4.11's `CCUpdate`
    /// floors the sending period at one MSS-sized packet per `mss / max_bw`). The
    /// rate controller still runs beneath it. `None`: no ceiling.
    pub max_bw_bps: Option<u64>,
}

impl Default for UdtConnConfig {
    fn default() -> Self {
        UdtConnConfig {
            mss: 1500,
            flight_flag_size: 25_600,
            rcv_buf_pkts: 8192,
            snd_buf_pkts: 8192,
            rate_control: RateControl::Udt(UdtCcConfig::default()),
            nak_report: NakReport::Once,
            arrival_clock: ArrivalClock::Udt4,
            socket_id: 1,
            isn: 0,
            cookie_secret: 0x5eed,
            cookie_key: None,
            max_bw_bps: None,
        }
    }
}

/// Connection states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not started.
    Init,
    /// Server: waiting for a request.
    Listening,
    /// Client: handshake in progress.
    Connecting,
    /// Data may flow.
    Connected,
    /// Shut down, broken or failed.
    Closed,
}

/// What the engine tells its application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// Data can be read.
    Readable,
    /// The peer shut the connection down.
    PeerShutdown,
    /// No response from the peer: the connection is broken (EXP timer).
    Broken,
    /// The handshake timed out or was rejected.
    ConnectFailed,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdtStats {
    /// Data packets sent (new and retransmitted).
    pub data_sent: u64,
    /// Data packets retransmitted.
    pub retransmitted: u64,
    /// Data packets received (duplicates included).
    pub data_received: u64,
    /// NAKs sent.
    pub naks_sent: u64,
    /// NAKs received.
    pub naks_received: u64,
    /// Full ACKs sent.
    pub acks_sent: u64,
    /// Light ACKs sent.
    pub light_acks_sent: u64,
    /// ACKs received.
    pub acks_received: u64,
    /// Loss events: NAKs starting a new congestion period are counted by the
    /// controller; here, every NAK'd range.
    pub loss_ranges: u64,
    /// EXP timer expirations.
    pub exp_timeouts: u64,
    /// Datagrams ignored as malformed or not for this connection.
    pub bad_datagrams: u64,
}

/// Errors of [`UdtConnection::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// Not connected (yet, or any more).
    NotConnected,
}

/// When a receiver loss-list entry was last reported, and the multiple of the RTT
/// that must pass before it is reported again (draft-gg-udt-03 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Feedback {
    last: Instant,
    k: u32,
}

/// A packet's payload: real bytes (copied in, or a slice of the writer's own
/// buffer), or (in the simulator) only a length.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Payload {
    Bytes(Vec<u8>),
    Shared(bytes::Bytes),
    Virtual(u32),
}

impl Payload {
    fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Shared(b) => b.len(),
            Payload::Virtual(n) => *n as usize,
        }
    }

    fn as_arrived(&self) -> Arrived<'_> {
        match self {
            Payload::Bytes(b) => Arrived::Bytes(b),
            Payload::Shared(b) => Arrived::Bytes(b),
            Payload::Virtual(n) => Arrived::Virtual(*n),
        }
    }
}

/// A data packet's payload as it arrives, borrowed from the datagram: in order it goes
/// straight to the reader, and only a packet that must wait for a gap before it is
/// copied (into a buffer from [`Spare`]).
#[derive(Debug, Clone, Copy)]
enum Arrived<'a> {
    Bytes(&'a [u8]),
    Virtual(u32),
}

impl Arrived<'_> {
    fn len(&self) -> usize {
        match self {
            Arrived::Bytes(b) => b.len(),
            Arrived::Virtual(n) => *n as usize,
        }
    }
}

/// A reader's buffer that in-order bytes go straight into as datagrams are
/// handled ([`UdtConnection::handle_datagram_reading`]), saving the copy through
/// the connection's own buffer; what does not fit, or arrives behind bytes
/// already waiting there, is kept for [`UdtConnection::recv`] as usual.
#[derive(Debug)]
pub struct Direct<'a> {
    buf: &'a mut [u8],
    filled: usize,
}

impl<'a> Direct<'a> {
    /// Bytes go into `buf`, from its start.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Direct { buf, filled: 0 }
    }

    /// No buffer: everything is kept for `recv`.
    pub fn none() -> Direct<'static> {
        Direct {
            buf: &mut [],
            filled: 0,
        }
    }

    /// How many bytes went in.
    pub fn filled(&self) -> usize {
        self.filled
    }

    /// Copies as much of `b` as fits; returns how much.
    fn fill(&mut self, b: &[u8]) -> usize {
        let n = b.len().min(self.buf.len() - self.filled);
        self.buf[self.filled..self.filled + n].copy_from_slice(&b[..n]);
        self.filled += n;
        n
    }
}

/// Packet buffers to use again: the sender's, freed when their packets are
/// acknowledged, and the receiver's, freed when a gap closes. Without them every
/// packet cost a `malloc` and a `free` at each end (measured with callgrind: a
/// quarter of all the instructions of a loopback transfer).
///
/// It keeps up to a buffer's worth (the larger of the send and receive buffers, in
/// packets): one ACK can free thousands of packets on a fast path, and the sender
/// refills them at once. That is memory the connection held at its peak anyway; an
/// idle connection keeps it until it closes.
#[derive(Debug, Clone)]
struct Spare {
    free: Vec<Vec<u8>>,
    max: usize,
}

impl Spare {
    fn new(max: usize) -> Self {
        Spare { free: vec![], max }
    }

    /// A buffer holding `bytes`.
    fn copy_of(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut v = self.free.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(bytes);
        v
    }

    /// `p`'s buffer, kept for later if there is room.
    fn keep(&mut self, p: Payload) {
        if let Payload::Bytes(v) = p {
            if self.free.len() < self.max {
                self.free.push(v);
            }
        }
    }
}

/// One of the rate controllers, dispatched by `match`.
#[derive(Debug, Clone)]
enum AnyRate {
    Udt(Udt),
    ArUdt(ArUdt),
    Bbr(Box<BbrUdt>),
}

impl AnyRate {
    /// The controller `rc` names, started at `now` for a first packet `isn` of
    /// `mss` bytes; BBR as a member of `group`, if there is one.
    fn new(
        rc: RateControl,
        mss: u32,
        now: Instant,
        isn: UdtSeqNumber,
        group: Option<&BbrGroup>,
    ) -> Self {
        match (rc, group) {
            (RateControl::Udt(c), _) => AnyRate::Udt(Udt::new(c, now, isn.dec())),
            (RateControl::ArUdt(c, a), _) => {
                AnyRate::ArUdt(ArUdt::new(Udt::new(c, now, isn.dec()), a))
            }
            (RateControl::Bbr(_), Some(g)) => {
                AnyRate::Bbr(Box::new(BbrUdt::coupled(g, mss, isn.dec())))
            }
            (RateControl::Bbr(c), None) => {
                AnyRate::Bbr(Box::new(BbrUdt::new(c, mss, now, isn.dec())))
            }
        }
    }

    /// The controller, for reading its outputs.
    fn as_ref(&self) -> &dyn UdtRateControl {
        match self {
            AnyRate::Udt(c) => c,
            AnyRate::ArUdt(c) => c,
            AnyRate::Bbr(c) => c.as_ref(),
        }
    }
}

macro_rules! rate {
    ($self:expr, $c:ident => $e:expr) => {
        match &mut $self.cc {
            AnyRate::Udt($c) => $e,
            AnyRate::ArUdt($c) => $e,
            AnyRate::Bbr($c) => $e,
        }
    };
}

// After the macro: macro_rules! are in scope from their definition on.
mod input;
mod output;
mod timers;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PendingCtrl {
    Handshake,
    Ack2(u32),
    FullAck,
    LightAck,
    KeepAlive,
    Shutdown,
}

/// One UDT connection.
#[derive(Debug, Clone)]
pub struct UdtConnection {
    cfg: UdtConnConfig,
    state: State,
    is_server: bool,
    start: Instant,
    peer_id: u32,
    /// The address the handshake datagrams come from, as the caller tags it.
    handshake_peer: u64,
    isn: UdtSeqNumber,
    payload: usize,
    handshake: HandshakeRepr,
    handshake_started: Instant,
    next_handshake: Option<Instant>,
    ctrl: VecDeque<PendingCtrl>,
    naks: VecDeque<Vec<(UdtSeqNumber, UdtSeqNumber)>>,
    events: VecDeque<Event>,
    stats: UdtStats,

    // Sender. Packet index i has sequence number isn + i.
    snd_buf: VecDeque<Payload>,
    /// Buffers of acknowledged and delivered packets, to use again.
    spare: Spare,
    snd_last_ack: u64,
    snd_next: u64,
    snd_loss: BTreeSet<u64>,
    flow_window: u64,
    next_send: Instant,
    /// How late the sender is on its schedule (4.11's `m_ullTimeDiff`); `None` when
    /// there is no schedule (nothing could be sent).
    late_by: Option<Duration>,
    /// Whether the controller has been told the sender ran out of data since its
    /// last data packet ([`UdtRateControl::on_app_limited`]).
    app_limited_told: bool,
    cc: AnyRate,
    /// The group whose BBR model this connection's sender shares, if any.
    rate_group: Option<BbrGroup>,
    rtt_us: f64,
    rtt_var_us: f64,
    rcv_rate_pps: u32,
    bandwidth_pps: u32,
    closing: bool,

    // Receiver.
    rcv_next: u64,
    rcv_high: Option<u64>,
    rcv_ooo: BTreeMap<u64, Payload>,
    /// Missing packets, with when each was last reported and its next k.
    rcv_loss: BTreeMap<u64, Feedback>,
    next_nak_time: Instant,
    readable: VecDeque<u8>,
    /// Bytes delivered in order, real and virtual.
    delivered: u64,
    rcv_last_ack: u64,
    rcv_last_ack_ack: u64,
    last_ack_time: Option<Instant>,
    ack_seq_no: u32,
    ack_history: VecDeque<(u32, u64, Instant)>,
    next_ack_time: Instant,
    pkt_count: u32,
    light_ack_count: u32,
    window: TimeWindow,

    // EXP.
    last_rsp: Instant,
    exp_count: u64,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl UdtConnection {
    /// A connection that has not started.
    ///
    /// # Panics
    /// If `cfg.mss` is below [`MIN_MSS`] (callers validate their input against it).
    pub fn new(cfg: UdtConnConfig, now: Instant) -> Self {
        assert!(cfg.mss >= MIN_MSS, "UDT MSS {} is below {MIN_MSS}", cfg.mss);
        let isn = UdtSeqNumber::new(cfg.isn);
        let cc = AnyRate::new(cfg.rate_control, cfg.mss, now, isn, None);
        UdtConnection {
            cfg,
            state: State::Init,
            is_server: false,
            start: now,
            peer_id: 0,
            handshake_peer: 0,
            isn,
            payload: (cfg.mss - IP_UDP) as usize - HEADER_LEN,
            handshake: HandshakeRepr {
                version: 4,
                socket_type: 1,
                initial_seq: isn,
                mss: cfg.mss,
                flight_flag_size: cfg.flight_flag_size.min(cfg.rcv_buf_pkts),
                request_type: 1,
                socket_id: cfg.socket_id,
                cookie: 0,
                peer_ip: [0; 4],
            },
            handshake_started: now,
            next_handshake: None,
            ctrl: VecDeque::new(),
            naks: VecDeque::new(),
            events: VecDeque::new(),
            stats: UdtStats::default(),
            snd_buf: VecDeque::new(),
            snd_last_ack: 0,
            snd_next: 0,
            snd_loss: BTreeSet::new(),
            flow_window: 16,
            next_send: now,
            late_by: None,
            app_limited_told: false,
            cc,
            rate_group: None,
            rtt_us: 100_000.0,
            rtt_var_us: 50_000.0,
            rcv_rate_pps: 16,
            bandwidth_pps: 1,
            closing: false,
            rcv_next: 0,
            rcv_high: None,
            rcv_ooo: BTreeMap::new(),
            spare: Spare::new(cfg.snd_buf_pkts.max(cfg.rcv_buf_pkts) as usize),
            rcv_loss: BTreeMap::new(),
            next_nak_time: now,
            readable: VecDeque::new(),
            delivered: 0,
            rcv_last_ack: 0,
            rcv_last_ack_ack: 0,
            last_ack_time: None,
            ack_seq_no: 0,
            ack_history: VecDeque::new(),
            next_ack_time: now,
            pkt_count: 0,
            light_ack_count: 1,
            window: TimeWindow::new(cfg.arrival_clock),
            last_rsp: now,
            exp_count: 1,
        }
    }

    // ---- application side ---------------------------------------------------------

    /// Starts the client handshake.
    pub fn connect(&mut self, now: Instant) {
        self.state = State::Connecting;
        self.handshake_started = now;
        self.ctrl.push_back(PendingCtrl::Handshake);
        self.next_handshake = Some(now + HANDSHAKE_RETRY);
    }

    /// Waits for a client.
    pub fn listen(&mut self) {
        self.state = State::Listening;
        self.is_server = true;
    }

    /// Queues bytes for sending; returns how many fit in the send buffer.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        if self.state != State::Connected || self.closing {
            return Err(SendError::NotConnected);
        }
        let mut taken = 0;
        for chunk in data.chunks(self.payload) {
            if self.snd_buf.len() >= self.cfg.snd_buf_pkts as usize {
                break;
            }
            let b = self.spare.copy_of(chunk);
            self.snd_buf.push_back(Payload::Bytes(b));
            taken += chunk.len();
        }
        Ok(taken)
    }

    /// Queues `data` for sending as slices of itself, without copying it: the send
    /// buffer holds a reference to `data` until its last packet is acknowledged,
    /// so a writer that wants its buffer back waits for it to be unique
    /// (`Bytes::try_into_mut`). Returns how many bytes fit in the send buffer.
    pub fn send_shared(&mut self, data: &bytes::Bytes) -> Result<usize, SendError> {
        if self.state != State::Connected || self.closing {
            return Err(SendError::NotConnected);
        }
        let mut taken = 0;
        while taken < data.len() && self.snd_buf.len() < self.cfg.snd_buf_pkts as usize {
            let end = (taken + self.payload).min(data.len());
            self.snd_buf
                .push_back(Payload::Shared(data.slice(taken..end)));
            taken = end;
        }
        Ok(taken)
    }

    /// Queues `bytes` of payload that exists only as a length (the simulator's mode:
    /// packets carry headers, and the peer counts bytes instead of storing them).
    /// Returns how many fit in the send buffer.
    pub fn send_virtual(&mut self, bytes: u64) -> Result<u64, SendError> {
        if self.state != State::Connected || self.closing {
            return Err(SendError::NotConnected);
        }
        let mut taken = 0;
        while taken < bytes && self.snd_buf.len() < self.cfg.snd_buf_pkts as usize {
            let n = (bytes - taken).min(self.payload as u64);
            self.snd_buf.push_back(Payload::Virtual(n as u32));
            taken += n;
        }
        Ok(taken)
    }

    /// [`handle_datagram`](Engine::handle_datagram), with in-order bytes going
    /// straight into `reader` while nothing is waiting for [`recv`](Self::recv)
    /// ahead of them: the reader's bytes come before anything `recv` then returns.
    pub fn handle_datagram_reading(
        &mut self,
        now: Instant,
        datagram: &[u8],
        wire_len: usize,
        reader: &mut Direct<'_>,
    ) {
        self.input(now, datagram, wire_len, reader);
    }

    /// Reads received bytes in order; returns how many were copied.
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.readable.len());
        // Two slice copies (the ring may wrap), not a byte at a time.
        let (a, b) = self.readable.as_slices();
        let from_a = n.min(a.len());
        buf[..from_a].copy_from_slice(&a[..from_a]);
        buf[from_a..n].copy_from_slice(&b[..n - from_a]);
        self.readable.drain(..n);
        n
    }

    /// Sends a shutdown once everything written has been acknowledged.
    pub fn close(&mut self) {
        self.closing = true;
    }

    // ---- queries --------------------------------------------------------------------

    /// The state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Counters.
    pub fn stats(&self) -> &UdtStats {
        &self.stats
    }
    /// RTT estimate, µs.
    pub fn rtt_us(&self) -> f64 {
        self.rtt_us
    }
    /// The sending period, µs.
    pub fn pkt_snd_period_us(&self) -> f64 {
        self.cc.as_ref().pkt_snd_period_us()
    }
    /// Bytes received in order and not yet read.
    pub fn readable_len(&self) -> usize {
        self.readable.len()
    }
    /// Bytes delivered in order so far, real and virtual.
    pub fn delivered_bytes(&self) -> u64 {
        self.delivered
    }
    /// Free space in the send buffer, packets.
    pub fn send_space_pkts(&self) -> usize {
        (self.cfg.snd_buf_pkts as usize).saturating_sub(self.snd_buf.len())
    }
    /// Payload bytes per packet.
    pub fn payload_size(&self) -> usize {
        self.payload
    }
    /// The rate controller's window, packets.
    pub fn cwnd_pkts(&self) -> f64 {
        rate_cwnd(&self.cc)
    }
    /// Link capacity and receive rate the peer reports (7/8 EWMAs), packets/s.
    pub fn peer_rates_pps(&self) -> (u32, u32) {
        (self.rcv_rate_pps, self.bandwidth_pps)
    }
    /// AR-UDT's PktSPW class counts, if this connection runs AR-UDT.
    pub fn ar_udt_class_counts(&self) -> Option<[u64; 4]> {
        match &self.cc {
            AnyRate::ArUdt(a) => Some(a.class_counts()),
            AnyRate::Udt(_) | AnyRate::Bbr(_) => None,
        }
    }
    /// Packets written and not yet acknowledged.
    pub fn unacked_pkts(&self) -> usize {
        self.snd_buf.len()
    }
    /// Packets sent and not yet acknowledged (the written ones less those never
    /// sent).
    pub fn in_flight_pkts(&self) -> usize {
        self.snd_next.saturating_sub(self.snd_last_ack) as usize
    }
    /// Packets written and never sent yet (what a writer has queued ahead of the
    /// rate control; retransmissions waiting are not counted).
    pub fn unsent_pkts(&self) -> usize {
        (self.snd_last_ack + self.snd_buf.len() as u64).saturating_sub(self.snd_next) as usize
    }

    // ---- helpers --------------------------------------------------------------------

    fn ts(&self, now: Instant) -> u32 {
        micros(now.saturating_duration_since(self.start)) as u32
    }
    fn seq_of(&self, index: u64) -> UdtSeqNumber {
        self.isn.add(index as u32)
    }
    /// The index of `seq`, taking the nearest one to `reference`.
    fn index_of(&self, seq: UdtSeqNumber, reference: u64) -> Option<u64> {
        let off = i64::from(self.seq_of(reference).offset_to(seq));
        u64::try_from(reference as i64 + off).ok()
    }
    fn inputs(&self) -> UdtInputs {
        UdtInputs {
            rtt_us: self.rtt_us,
            rcv_rate_pps: self.rcv_rate_pps,
            bandwidth_pps: self.bandwidth_pps,
            mss: self.cfg.mss,
            max_cwnd_pkts: f64::from(self.cfg.flight_flag_size),
            snd_curr_seq: self.seq_of(self.snd_next).dec(),
            ack_rtt_us: 0.0,
            ack_recv_rate_pps: 0,
            ack_bandwidth_pps: 0,
        }
    }
    fn cookie(&self, peer_id: u32, now: Instant) -> u32 {
        // UDT4 hashes host:port:minute; any server-side secret works, as only the
        // server checks its own cookies. This minute and the last are accepted.
        let minute = now.as_nanos() / 60_000_000_000;
        self.cookie_for(peer_id, minute)
    }
    fn cookie_for(&self, peer_id: u32, minute: u64) -> u32 {
        if let Some(key) = &self.cfg.cookie_key {
            let mut h = blake3::Hasher::new_keyed(key);
            h.update(&self.handshake_peer.to_be_bytes());
            h.update(&peer_id.to_be_bytes());
            h.update(&minute.to_be_bytes());
            let b = h.finalize();
            return u32::from_be_bytes(b.as_bytes()[..4].try_into().expect("4 bytes"));
        }
        let mut z = self.cfg.cookie_secret ^ (u64::from(peer_id) << 32) ^ minute;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u32
    }

    /// Names the address the next handshake datagrams come from (a hash of it, as
    /// the caller likes), so that a cookie is good only for the address it was
    /// given to. Used only with [`UdtConnConfig::cookie_key`].
    pub fn set_handshake_peer(&mut self, tag: u64) {
        self.handshake_peer = tag;
    }

    /// Makes this connection's sender, once connected, a member of `group`: it
    /// runs the group's BBR model with the other members rather than one of its
    /// own (see [`BbrGroup`]). For the parallel channels of one transfer, which
    /// cross one path and as separate BBR flows overshoot it together. Only a
    /// connection whose control is [`RateControl::Bbr`] joins; call it before the
    /// connection is established.
    pub fn join_rate_group(&mut self, group: &BbrGroup) {
        if matches!(self.cfg.rate_control, RateControl::Bbr(_)) {
            self.rate_group = Some(group.clone());
        }
    }
}

impl Engine for UdtConnection {
    type Event = Event;
    const LAYER: Layer = Layer::Udp;

    /// Processes a UDP payload of `wire_len` bytes of which only the first
    /// `datagram.len()` are present (a data payload the simulator left out counts
    /// as virtual).
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8], wire_len: usize) {
        self.input(now, datagram, wire_len, &mut Direct::none());
    }

    /// Processes expired timers; early calls do nothing.
    fn handle_timeout(&mut self, now: Instant) {
        self.expire(now);
    }

    /// The next packet, paced at the rate controller's sending period. A data
    /// packet of a virtual stream is written without its payload.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.transmit(now, buf)
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Connecting => self.next_handshake,
            State::Connected => {
                let mut t = self.exp_deadline().min(self.next_ack_time + TIMER_TICK);
                if self.cfg.nak_report == NakReport::Periodic && !self.rcv_loss.is_empty() {
                    t = t.min(self.next_nak_time);
                }
                if self.has_data_to_send() {
                    t = t.min(self.next_send);
                }
                Some(t)
            }
            _ => None,
        }
    }
}

/// Keeps in `ranges` as many as fit in `words` 32-bit words (a single number takes
/// one, a range two; a range may be cut) and returns the rest.
fn split_loss_list(
    ranges: &mut Vec<(UdtSeqNumber, UdtSeqNumber)>,
    words: usize,
) -> Vec<(UdtSeqNumber, UdtSeqNumber)> {
    let mut used = 0;
    for i in 0..ranges.len() {
        let (a, b) = ranges[i];
        let cost = if a == b { 1 } else { 2 };
        if used + cost <= words {
            used += cost;
            continue;
        }
        let mut rest = ranges.split_off(i);
        if used < words && words > 0 {
            // One word left and a range next: send its first number alone.
            ranges.push((a, a));
            rest[0].0 = a.inc();
        }
        return rest;
    }
    Vec::new()
}

fn rate_cwnd(cc: &AnyRate) -> f64 {
    cc.as_ref().cwnd_pkts()
}
