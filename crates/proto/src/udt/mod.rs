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
//! The call order is the usual one: after `handle_datagram`, `handle_timeout` or an
//! application call, drain `poll_transmit`, then `poll_event`, then re-arm a timer
//! from `poll_timeout`. Datagrams are UDP payloads.

mod estimator;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use longhaul_wire::udt::{
    AckInfo, Boundary, Control, HandshakeRepr, LossList, UdtPacket, UdtRepr, HEADER_LEN,
};

use crate::cc::{
    ArUdt, ArUdtConfig, Udt, UdtConfig as UdtCcConfig, UdtInputs, UdtRateControl, SYN_US,
};
use crate::seq::UdtSeqNumber;
use crate::time::{Duration, Instant};
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
/// Light ACK every this many packets (`m_iSelfClockInterval`).
const SELF_CLOCK: u32 = 64;
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

/// A packet's payload: real bytes, or (in the simulator) only a length.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Payload {
    Bytes(Vec<u8>),
    Virtual(u32),
}

impl Payload {
    fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Virtual(n) => *n as usize,
        }
    }
}

/// What [`UdtConnection::poll_transmit`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written to the buffer.
    pub written: usize,
    /// Length of the UDP payload on the wire (larger than `written` when a virtual
    /// payload was left out).
    pub wire_len: usize,
}

/// Either rate controller, dispatched by `match`.
#[derive(Debug, Clone)]
enum AnyRate {
    Udt(Udt),
    ArUdt(ArUdt),
}

macro_rules! rate {
    ($self:expr, $c:ident => $e:expr) => {
        match &mut $self.cc {
            AnyRate::Udt($c) => $e,
            AnyRate::ArUdt($c) => $e,
        }
    };
}

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
    snd_last_ack: u64,
    snd_next: u64,
    snd_loss: BTreeSet<u64>,
    flow_window: u64,
    next_send: Instant,
    /// How late the sender is on its schedule (4.11's `m_ullTimeDiff`); `None` when
    /// there is no schedule (nothing could be sent).
    late_by: Option<Duration>,
    cc: AnyRate,
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
        let cc = match cfg.rate_control {
            RateControl::Udt(c) => AnyRate::Udt(Udt::new(c, now, isn.dec())),
            RateControl::ArUdt(c, a) => AnyRate::ArUdt(ArUdt::new(Udt::new(c, now, isn.dec()), a)),
        };
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
            cc,
            rtt_us: 100_000.0,
            rtt_var_us: 50_000.0,
            rcv_rate_pps: 16,
            bandwidth_pps: 1,
            closing: false,
            rcv_next: 0,
            rcv_high: None,
            rcv_ooo: BTreeMap::new(),
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
            window: TimeWindow::default(),
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
            self.snd_buf.push_back(Payload::Bytes(chunk.to_vec()));
            taken += chunk.len();
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
        match &self.cc {
            AnyRate::Udt(c) => c.pkt_snd_period_us(),
            AnyRate::ArUdt(c) => c.pkt_snd_period_us(),
        }
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
            AnyRate::Udt(_) => None,
        }
    }
    /// Packets written and not yet acknowledged.
    pub fn unacked_pkts(&self) -> usize {
        self.snd_buf.len()
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

    // ---- network side ---------------------------------------------------------------

    /// Processes one UDP payload.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        self.handle_datagram_elided(now, datagram, datagram.len());
    }

    /// Processes a UDP payload of `wire_len` bytes of which only the first
    /// `datagram.len()` are present (a data payload left out by the simulator counts
    /// as virtual).
    pub fn handle_datagram_elided(&mut self, now: Instant, datagram: &[u8], wire_len: usize) {
        let Ok(packet) = UdtPacket::new_checked(datagram) else {
            self.stats.bad_datagrams += 1;
            return;
        };
        let Ok(repr) = UdtRepr::parse(&packet, wire_len) else {
            self.stats.bad_datagrams += 1;
            return;
        };
        match repr {
            UdtRepr::Control {
                control: Control::Handshake(h),
                ..
            } => self.on_handshake(now, h),
            _ if self.state != State::Connected => self.stats.bad_datagrams += 1,
            UdtRepr::Control { dest_socket_id, .. } | UdtRepr::Data { dest_socket_id, .. }
                if dest_socket_id != self.cfg.socket_id =>
            {
                self.stats.bad_datagrams += 1
            }
            UdtRepr::Data {
                seq, payload_len, ..
            } => {
                self.on_response(now);
                let body = packet.body();
                let payload = if body.len() == payload_len {
                    Payload::Bytes(body.to_vec())
                } else {
                    Payload::Virtual(payload_len as u32)
                };
                self.on_data(now, seq, payload);
            }
            UdtRepr::Control { control, .. } => {
                self.on_response(now);
                self.on_control(now, control);
            }
        }
    }

    fn on_response(&mut self, now: Instant) {
        self.exp_count = 1;
        self.last_rsp = now;
    }

    fn on_handshake(&mut self, now: Instant, h: HandshakeRepr) {
        match (self.state, self.is_server) {
            (State::Listening, true) | (State::Connected, true) => {
                if h.request_type == 1 {
                    // First request: answer with a cookie, keep no state.
                    self.handshake = HandshakeRepr {
                        cookie: self.cookie(h.socket_id, now),
                        ..h
                    };
                    self.peer_id = h.socket_id;
                    self.ctrl.push_back(PendingCtrl::Handshake);
                } else if h.request_type == -1 {
                    let minute = now.as_nanos() / 60_000_000_000;
                    let ok = h.cookie == self.cookie_for(h.socket_id, minute)
                        || h.cookie == self.cookie_for(h.socket_id, minute.wrapping_sub(1));
                    if !ok {
                        self.stats.bad_datagrams += 1;
                        return;
                    }
                    if self.state == State::Listening {
                        // Adopt the client's ISN; negotiate MSS and window.
                        if !self.adopt_peer_terms(&h) {
                            return;
                        }
                        self.isn = h.initial_seq;
                        self.establish(now);
                    }
                    self.handshake = HandshakeRepr {
                        version: 4,
                        socket_type: 1,
                        initial_seq: self.isn,
                        mss: self.cfg.mss,
                        flight_flag_size: self.cfg.flight_flag_size.min(self.cfg.rcv_buf_pkts),
                        request_type: -1,
                        socket_id: self.cfg.socket_id,
                        cookie: h.cookie,
                        peer_ip: h.peer_ip,
                    };
                    self.ctrl.push_back(PendingCtrl::Handshake);
                }
            }
            (State::Connecting, false) => {
                if self.handshake.request_type == 1 && h.request_type == 1 && h.cookie != 0 {
                    // The server's cookie: resend the request with it.
                    self.handshake.cookie = h.cookie;
                    self.handshake.request_type = -1;
                    self.ctrl.push_back(PendingCtrl::Handshake);
                } else if self.handshake.request_type == -1 && h.request_type == -1 {
                    if !self.adopt_peer_terms(&h) {
                        return;
                    }
                    self.establish(now);
                } else if h.request_type == 1002 {
                    self.state = State::Closed;
                    self.events.push_back(Event::ConnectFailed);
                }
            }
            _ => self.stats.bad_datagrams += 1,
        }
    }

    /// Takes the peer's socket ID, MSS (the smaller of the two) and flow window from
    /// its handshake. A handshake whose MSS is below [`MIN_MSS`] is refused and
    /// counted bad: taken, it made the payload size wrap to some gigabytes (the
    /// subtraction below) and the next data packet overran the caller's buffer. So
    /// is one whose flight flag size is 0: taken, the sender could never have a
    /// packet in flight, and the connection stalled with nothing said (UDT4's
    /// `UDT_FC` option is at least 1 for the same reason).
    fn adopt_peer_terms(&mut self, h: &HandshakeRepr) -> bool {
        if h.mss < MIN_MSS || h.flight_flag_size == 0 {
            self.stats.bad_datagrams += 1;
            return false;
        }
        self.peer_id = h.socket_id;
        self.cfg.mss = self.cfg.mss.min(h.mss);
        self.payload = (self.cfg.mss - IP_UDP) as usize - HEADER_LEN;
        self.flow_window = u64::from(h.flight_flag_size);
        true
    }

    fn establish(&mut self, now: Instant) {
        self.state = State::Connected;
        self.next_handshake = None;
        self.start = now;
        self.next_ack_time = now + Duration::from_micros(SYN);
        self.last_rsp = now;
        self.next_send = now;
        let isn = self.isn;
        self.cc = match self.cfg.rate_control {
            RateControl::Udt(c) => AnyRate::Udt(Udt::new(c, now, isn.dec())),
            RateControl::ArUdt(c, a) => AnyRate::ArUdt(ArUdt::new(Udt::new(c, now, isn.dec()), a)),
        };
        self.events.push_back(Event::Connected);
    }

    fn on_data(&mut self, now: Instant, seq: UdtSeqNumber, payload: Payload) {
        self.stats.data_received += 1;
        let now_us = micros(now.saturating_duration_since(Instant::ZERO));
        self.window.on_arrival(now_us);
        match seq.value() & 0xF {
            0 => self.window.on_probe1(now_us),
            1 => self.window.on_probe2(now_us),
            _ => {}
        }
        let reference = self.rcv_high.unwrap_or(0);
        let Some(idx) = self.index_of(seq, reference) else {
            return;
        };
        if idx < self.rcv_next || self.rcv_ooo.contains_key(&idx) {
            return; // duplicate
        }
        if idx >= self.rcv_next + u64::from(self.cfg.rcv_buf_pkts) {
            return; // beyond the buffer we advertised
        }
        self.pkt_count += 1;
        let high = self.rcv_high.map_or(0, |h| h + 1);
        if idx > high {
            // A gap: everything between is lost; report it at once.
            let (first, last) = (self.seq_of(high), self.seq_of(idx - 1));
            if self.rcv_loss.is_empty() {
                self.next_nak_time = now + self.nak_period();
            }
            let fed_back = Feedback { last: now, k: 2 };
            self.rcv_loss.extend((high..idx).map(|i| (i, fed_back)));
            self.naks.push_back(vec![(first, last)]);
        } else {
            self.rcv_loss.remove(&idx);
        }
        self.rcv_high = Some(self.rcv_high.map_or(idx, |h| h.max(idx)));
        if idx == self.rcv_next {
            self.deliver(payload);
            self.rcv_next += 1;
            while let Some(data) = self.rcv_ooo.remove(&self.rcv_next) {
                self.deliver(data);
                self.rcv_next += 1;
            }
            self.events.push_back(Event::Readable);
        } else {
            self.rcv_ooo.insert(idx, payload);
        }
        if self.pkt_count >= SELF_CLOCK * self.light_ack_count {
            if self.ack_index() != self.rcv_last_ack_ack {
                self.ctrl.push_back(PendingCtrl::LightAck);
            }
            self.light_ack_count += 1;
        }
    }

    fn deliver(&mut self, p: Payload) {
        self.delivered += p.len() as u64;
        if let Payload::Bytes(b) = p {
            self.readable.extend(b.iter().copied());
        }
    }

    fn on_control(&mut self, now: Instant, control: Control<'_>) {
        match control {
            Control::Ack {
                ack_seq_no,
                ack,
                info,
            } => self.on_ack(now, ack_seq_no, ack, info),
            Control::Ack2 { ack_seq_no } => {
                if let Some(pos) = self
                    .ack_history
                    .iter()
                    .position(|(n, _, _)| *n == ack_seq_no)
                {
                    let (_, ack_idx, sent) = self.ack_history[pos];
                    self.rcv_last_ack_ack = self.rcv_last_ack_ack.max(ack_idx);
                    let rtt = micros(now.saturating_duration_since(sent)) as f64;
                    self.update_rtt(rtt);
                }
            }
            Control::Nak(list) => self.on_nak(now, list),
            Control::Shutdown => {
                self.state = State::Closed;
                self.events.push_back(Event::PeerShutdown);
            }
            // Keep-alive: its arrival (on_response) is its whole purpose. A delay
            // warning: 4.11 scales its packet interval by 1.125, but `CCUpdate`
            // overwrites the interval from the controller at the next timer check,
            // so the warning has no lasting effect there, nor here.
            Control::KeepAlive | Control::CongestionWarning => {}
            _ => {}
        }
    }

    fn update_rtt(&mut self, rtt: f64) {
        // RTTVar = (3 RTTVar + |rtt - RTT|) / 4;  RTT = (7 RTT + rtt) / 8
        self.rtt_var_us = (self.rtt_var_us * 3.0 + (rtt - self.rtt_us).abs()) / 4.0;
        self.rtt_us = (self.rtt_us * 7.0 + rtt) / 8.0;
    }

    fn on_ack(&mut self, now: Instant, ack_seq_no: u32, ack: UdtSeqNumber, info: AckInfo) {
        self.stats.acks_received += 1;
        let Some(ack_idx) = self.index_of(ack, self.snd_last_ack) else {
            return;
        };
        if ack_idx > self.snd_next {
            self.stats.bad_datagrams += 1; // acknowledges what was never sent
            return;
        }
        if let AckInfo::Light = info {
            if ack_idx > self.snd_last_ack {
                let acked = ack_idx - self.snd_last_ack;
                self.flow_window = self.flow_window.saturating_sub(acked);
                self.release(ack_idx);
            }
            return;
        }
        self.ctrl.push_back(PendingCtrl::Ack2(ack_seq_no));
        let (rtt, avail, rates) = match info {
            AckInfo::Short {
                rtt_us,
                avail_buf_pkts,
                ..
            } => (rtt_us, avail_buf_pkts, None),
            AckInfo::Full {
                rtt_us,
                avail_buf_pkts,
                recv_rate_pps,
                bandwidth_pps,
                ..
            } => (rtt_us, avail_buf_pkts, Some((recv_rate_pps, bandwidth_pps))),
            AckInfo::Light => unreachable!("handled above"),
        };
        self.flow_window = u64::from(avail);
        self.release(ack_idx);
        self.update_rtt(f64::from(rtt));
        if let Some((r, b)) = rates {
            if r > 0 {
                self.rcv_rate_pps = ((u64::from(self.rcv_rate_pps) * 7 + u64::from(r)) / 8) as u32;
            }
            if b > 0 {
                self.bandwidth_pps =
                    ((u64::from(self.bandwidth_pps) * 7 + u64::from(b)) / 8) as u32;
            }
        }
        let mut inputs = self.inputs();
        inputs.ack_rtt_us = f64::from(rtt);
        rate!(self, c => c.on_ack(now, ack, &inputs));
    }

    fn release(&mut self, ack_idx: u64) {
        while self.snd_last_ack < ack_idx && !self.snd_buf.is_empty() {
            self.snd_buf.pop_front();
            self.snd_loss.remove(&self.snd_last_ack);
            self.snd_last_ack += 1;
        }
        self.snd_last_ack = self.snd_last_ack.max(ack_idx.min(self.snd_next));
    }

    fn on_nak(&mut self, now: Instant, list: LossList<'_>) {
        self.stats.naks_received += 1;
        let Some((first, _)) = list.ranges().next() else {
            return;
        };
        let inputs = self.inputs();
        rate!(self, c => c.on_loss(now, first, &inputs));
        for (a, b) in list.ranges() {
            let (Some(ia), Some(ib)) = (
                self.index_of(a, self.snd_last_ack),
                self.index_of(b, self.snd_last_ack),
            ) else {
                continue;
            };
            if ia > ib || ib >= self.snd_next {
                self.stats.bad_datagrams += 1;
                continue;
            }
            self.stats.loss_ranges += 1;
            for i in ia.max(self.snd_last_ack)..=ib {
                self.snd_loss.insert(i);
            }
        }
    }

    // ---- timers ---------------------------------------------------------------------

    fn exp_deadline(&self) -> Instant {
        let base = self.exp_count * (self.rtt_us + 4.0 * self.rtt_var_us) as u64 + SYN;
        self.last_rsp + Duration::from_micros(base.max(self.exp_count * MIN_EXP_US))
    }

    /// The next deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
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

    /// Processes expired timers; early calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Connecting => {
                if now.saturating_duration_since(self.handshake_started) >= HANDSHAKE_TIMEOUT {
                    self.state = State::Closed;
                    self.events.push_back(Event::ConnectFailed);
                } else if self.next_handshake.is_some_and(|t| t <= now) {
                    self.ctrl.push_back(PendingCtrl::Handshake);
                    self.next_handshake = Some(now + HANDSHAKE_RETRY);
                }
            }
            State::Connected => {
                if now > self.next_ack_time {
                    if self.full_ack_due(now) {
                        self.ctrl.push_back(PendingCtrl::FullAck);
                    }
                    self.next_ack_time = now + Duration::from_micros(SYN);
                    self.pkt_count = 0;
                    self.light_ack_count = 1;
                }
                if self.cfg.nak_report == NakReport::Periodic
                    && !self.rcv_loss.is_empty()
                    && now >= self.next_nak_time
                {
                    self.report_losses(now);
                    self.next_nak_time = now + self.nak_period();
                }
                if now >= self.exp_deadline() {
                    self.on_exp(now);
                }
            }
            _ => {}
        }
    }

    /// The ACK number to send: the first lost packet, or one past the highest received.
    fn ack_index(&self) -> u64 {
        self.rcv_loss
            .first_key_value()
            .map(|(&i, _)| i)
            .unwrap_or(self.rcv_high.map_or(0, |h| h + 1))
    }

    /// The NAK timer period, max(RTT, SYN).
    fn nak_period(&self) -> Duration {
        Duration::from_micros((self.rtt_us as u64).max(SYN))
    }

    /// The periodic NAK: every entry whose last report is at least k·RTT old, in
    /// ranges, as many as one NAK carries (UDT4 caps the list at payload/4 words).
    fn report_losses(&mut self, now: Instant) {
        let rtt = self.rtt_us.max(1.0);
        let mut words = self.payload / 4;
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (&i, fb) in self.rcv_loss.iter_mut() {
            let age = micros(now.saturating_duration_since(fb.last)) as f64;
            if age < f64::from(fb.k) * rtt {
                continue;
            }
            // A single number costs one word, a range two.
            match ranges.last_mut() {
                Some((first, last)) if *last + 1 == i => {
                    if *first == *last {
                        if words == 0 {
                            break;
                        }
                        words -= 1;
                    }
                    *last = i;
                }
                _ => {
                    if words == 0 {
                        break;
                    }
                    words -= 1;
                    ranges.push((i, i));
                }
            }
            fb.last = now;
            fb.k += 1;
        }
        if !ranges.is_empty() {
            let seqs = ranges
                .iter()
                .map(|&(a, b)| (self.seq_of(a), self.seq_of(b)))
                .collect();
            self.naks.push_back(seqs);
        }
    }

    /// 4.11's `sendCtrl(2)` rules: no ACK for what the sender has confirmed with ACK2,
    /// none going backwards, and a repeat only after RTT + 4 RTTVar.
    fn full_ack_due(&self, now: Instant) -> bool {
        let ack = self.ack_index();
        if ack == self.rcv_last_ack_ack || ack < self.rcv_last_ack {
            return false;
        }
        if ack == self.rcv_last_ack {
            let quiet = Duration::from_micros((self.rtt_us + 4.0 * self.rtt_var_us) as u64);
            if self
                .last_ack_time
                .is_some_and(|t| now.saturating_duration_since(t) < quiet)
            {
                return false;
            }
        }
        true
    }

    fn on_exp(&mut self, now: Instant) {
        self.stats.exp_timeouts += 1;
        if self.exp_count > 16
            && now.saturating_duration_since(self.last_rsp) > Duration::from_secs(5)
        {
            self.state = State::Closed;
            self.events.push_back(Event::Broken);
            return;
        }
        if self.snd_next > self.snd_last_ack {
            if self.snd_loss.is_empty() {
                // Go-back-N: everything unacknowledged is resent.
                for i in self.snd_last_ack..self.snd_next {
                    self.snd_loss.insert(i);
                }
            }
            let inputs = self.inputs();
            rate!(self, c => c.on_timeout(now, &inputs));
        } else {
            self.ctrl.push_back(PendingCtrl::KeepAlive);
        }
        self.exp_count += 1;
        // 4.11: "Reset last response time since we just sent a heart-beat." The next
        // expiry is then exp_count intervals after this one, so the intervals grow
        // (0.3, 0.6, 0.9 s ...). Without it they would stay 0.3 s apart, and a
        // receiver's keep-alives would keep resetting a stalled sender's timer,
        // which then never fires to resend a lost retransmission.
        self.last_rsp = now;
    }

    // ---- output ---------------------------------------------------------------------

    fn has_data_to_send(&self) -> bool {
        let window = self.flow_window.min(rate_cwnd(&self.cc) as u64).max(2);
        !self.snd_loss.is_empty()
            || (self.snd_next < self.snd_last_ack + self.snd_buf.len() as u64
                && self.snd_next - self.snd_last_ack < window)
    }

    /// Writes the next UDP payload into `buf` (at least `mss - 28` bytes, or 64 in
    /// virtual mode) and says how much, or returns `None` when nothing is due.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(c) = self.ctrl.pop_front() {
            let n = self.emit_ctrl(now, c, buf);
            return Some(Transmit {
                written: n,
                wire_len: n,
            });
        }
        if let Some(mut ranges) = self.naks.pop_front() {
            // A NAK carries as much of the list as `buf` holds; the rest goes next.
            let rest = split_loss_list(&mut ranges, buf.len().saturating_sub(HEADER_LEN) / 4);
            if !rest.is_empty() {
                self.naks.push_front(rest);
            }
            self.stats.naks_sent += 1;
            let mut lbuf = vec![0u8; LossList::encoded_len(&ranges)];
            let list = LossList::encode(&ranges, &mut lbuf);
            let r = UdtRepr::Control {
                timestamp: self.ts(now),
                dest_socket_id: self.peer_id,
                control: Control::Nak(list),
            };
            r.emit(buf);
            return Some(Transmit {
                written: r.wire_len(),
                wire_len: r.wire_len(),
            });
        }
        if self.state != State::Connected {
            return None;
        }
        if self.closing && self.snd_buf.is_empty() {
            self.closing = false;
            self.state = State::Closed;
            let n = self.emit_ctrl(now, PendingCtrl::Shutdown, buf);
            return Some(Transmit {
                written: n,
                wire_len: n,
            });
        }
        if !self.has_data_to_send() {
            // 4.11 forgets the schedule when it has nothing it may send
            // (`m_ullTargetTime = 0`): sending resumes without a debt.
            self.late_by = None;
            return None;
        }
        if now < self.next_send {
            return None;
        }
        let (idx, retransmit) = match self.snd_loss.pop_first() {
            Some(i) => (i, true),
            None => (self.snd_next, false),
        };
        let data = self.snd_buf.get((idx - self.snd_last_ack) as usize)?;
        let seq = self.seq_of(idx);
        let r = UdtRepr::Data {
            seq,
            boundary: Boundary::Solo,
            in_order: true,
            msg_number: 1,
            timestamp: self.ts(now),
            dest_socket_id: self.peer_id,
            payload_len: data.len(),
        };
        r.emit(buf);
        let written = match data {
            Payload::Bytes(b) => {
                buf[HEADER_LEN..HEADER_LEN + b.len()].copy_from_slice(b);
                HEADER_LEN + b.len()
            }
            Payload::Virtual(_) => HEADER_LEN,
        };
        let tx = Transmit {
            written,
            wire_len: r.wire_len(),
        };
        self.stats.data_sent += 1;
        if retransmit {
            self.stats.retransmitted += 1;
        } else {
            self.snd_next += 1;
        }
        rate!(self, c => c.on_packet_sent(now, seq));
        // A driver cannot busy-wait as UDT4's sender thread does, so the engine keeps
        // the schedule as 4.11 built with NO_BUSY_WAITING does (`m_ullTimeDiff`): time
        // a packet leaves late is paid back by sending the next ones early. A
        // simulator calls on time, so there this changes nothing.
        let mut late = self.late_by.map_or(Duration::ZERO, |d| {
            d + now.saturating_duration_since(self.next_send)
        });
        // Packet pair: a packet whose sequence number is a multiple of 16 is followed
        // at once by the next.
        let mut period = Duration::from_nanos((self.pkt_snd_period_us() * 1000.0) as u64);
        if let Some(bw) = self.cfg.max_bw_bps.filter(|&b| b > 0) {
            let floor = u64::from(self.cfg.mss) * 8 * 1_000_000_000 / bw;
            period = period.max(Duration::from_nanos(floor));
        }
        self.next_send = if seq.value() & 0xF == 0 {
            now
        } else if late >= period {
            late -= period;
            now
        } else {
            let t = now + (period - late);
            late = Duration::ZERO;
            t
        };
        self.late_by = Some(late);
        Some(tx)
    }

    fn emit_ctrl(&mut self, now: Instant, c: PendingCtrl, buf: &mut [u8]) -> usize {
        let control = match c {
            PendingCtrl::Handshake => Control::Handshake(self.handshake),
            PendingCtrl::Ack2(n) => Control::Ack2 { ack_seq_no: n },
            PendingCtrl::KeepAlive => Control::KeepAlive,
            PendingCtrl::Shutdown => Control::Shutdown,
            PendingCtrl::LightAck | PendingCtrl::FullAck => {
                // ACK number: the first lost packet, or one past the highest received.
                let ack_idx = self.ack_index();
                let ack = self.seq_of(ack_idx);
                if c == PendingCtrl::LightAck {
                    self.stats.light_acks_sent += 1;
                    Control::Ack {
                        ack_seq_no: 0,
                        ack,
                        info: AckInfo::Light,
                    }
                } else {
                    self.ack_seq_no = self.ack_seq_no.wrapping_add(1);
                    self.rcv_last_ack = ack_idx;
                    let avail = u64::from(self.cfg.rcv_buf_pkts)
                        .saturating_sub(
                            self.rcv_ooo.len() as u64 + (self.readable.len() / self.payload) as u64,
                        )
                        .max(2) as u32;
                    let info = if self.last_ack_time.is_none_or(|t| {
                        now.saturating_duration_since(t) > Duration::from_micros(SYN)
                    }) {
                        self.last_ack_time = Some(now);
                        AckInfo::Full {
                            rtt_us: self.rtt_us as u32,
                            rtt_var_us: self.rtt_var_us as u32,
                            avail_buf_pkts: avail,
                            recv_rate_pps: self.window.recv_rate_pps(),
                            bandwidth_pps: self.window.bandwidth_pps(),
                        }
                    } else {
                        AckInfo::Short {
                            rtt_us: self.rtt_us as u32,
                            rtt_var_us: self.rtt_var_us as u32,
                            avail_buf_pkts: avail,
                        }
                    };
                    self.ack_history.push_back((self.ack_seq_no, ack_idx, now));
                    if self.ack_history.len() > ACK_HISTORY {
                        self.ack_history.pop_front();
                    }
                    self.stats.acks_sent += 1;
                    Control::Ack {
                        ack_seq_no: self.ack_seq_no,
                        ack,
                        info,
                    }
                }
            }
        };
        let dest =
            if c == PendingCtrl::Handshake && !self.is_server && self.state == State::Connecting {
                0
            } else {
                self.peer_id
            };
        let r = UdtRepr::Control {
            timestamp: self.ts(now),
            dest_socket_id: dest,
            control,
        };
        r.emit(buf);
        r.wire_len()
    }

    /// The next application event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
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
    match cc {
        AnyRate::Udt(c) => c.cwnd_pkts(),
        AnyRate::ArUdt(c) => c.cwnd_pkts(),
    }
}
