//! A sans-IO SCTP association (RFC 9260), single-homed, over IPv4.
//!
//! What it does: the four-way handshake with a stateless, MAC-protected state cookie
//! (DATA may ride on COOKIE-ECHO); association-wide TSNs and per-stream SSNs; ordered
//! delivery per stream (a gap on one stream never holds another) and unordered
//! messages; fragmentation of messages larger than one DATA chunk (B/E flags) and
//! reassembly; bundling up to the path MTU with control chunks first and the SACK
//! piggy-backed; delayed SACK (every `sack_freq` packets or `sack_delay`, at once on
//! gaps, duplicates or a closed gap); fast retransmit on the third miss indication
//! counted with HTNA, and Fast Recovery; T3-rtx with an RFC 6298 estimator and
//! backoff; T1 timers for INIT and COOKIE-ECHO; graceful shutdown; ABORT; answers to
//! HEARTBEAT. Congestion control is [`crate::cc::SctpCc`], with the study's Linux
//! 2.6.15 profile and RFC 9260's.
//!
//! What it does not: multi-homing (one path, so no path failover or heartbeats of its
//! own), IPv6, partial reliability, stream reconfiguration, ECN, the restart and
//! tie-tag cases of §5.2 (an INIT for an established association is ignored) and
//! receive-window probing beyond RFC 9260 §6.1 rule A. Message data is real bytes:
//! this engine carries content, unlike the count-only TCP engine.
//!
//! Datagrams in and out are whole IPv4 packets. Call order, as for every engine:
//! after a `handle_*` or an application command, drain [`SctpAssociation::poll_transmit`],
//! then [`SctpAssociation::poll_event`], then re-arm a timer from
//! [`SctpAssociation::poll_timeout`].

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use longhaul_wire::sctp::{
    self, ChunkRepr, DataFlags, DupTsns, GapBlocks, InitRepr, PacketBuilder, SackRepr, SctpPacket,
    SctpRepr,
};
use longhaul_wire::{ipv4, Checksum, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr};

use crate::cc::{SctpCc, SctpCcProfile};
use crate::rtt::{RtoConfig, RttEstimator};
use crate::time::{Duration, Instant};

/// Bytes of a DATA chunk header.
const DATA_HDR: usize = sctp::DATA_HEADER_LEN;
/// Bytes of IPv4 and SCTP common headers.
const IP_SCTP: usize = ipv4::HEADER_LEN + sctp::HEADER_LEN;
/// Miss indications that trigger a fast retransmit (RFC 9260 §7.2.4).
const MISS_THRESHOLD: u32 = 3;
/// Most gap blocks and duplicate TSNs reported in one SACK.
const MAX_SACK_ENTRIES: usize = 32;
/// Length of the MAC that closes a state cookie.
const COOKIE_MAC_LEN: usize = 16;
/// Length of a state cookie: its fields and the MAC.
const COOKIE_LEN: usize = 36 + COOKIE_MAC_LEN;

/// An association's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SctpConfig {
    /// Path MTU, IP header included.
    pub mtu: u16,
    /// Congestion control rules.
    pub cc: SctpCcProfile,
    /// RTO bounds (RFC 9260 §16: initial 1 s, min 1 s, max 60 s).
    pub rto: RtoConfig,
    /// The longest a SACK may be delayed.
    pub sack_delay: Duration,
    /// SACK at once after this many packets with DATA (2: every second packet).
    pub sack_freq: u32,
    /// Max.Burst: new data sent in reply to one incoming packet or timer is held to
    /// this many MTUs above the flight size (RFC 9260 §6.1 D).
    pub max_burst: u32,
    /// Outbound streams requested and inbound streams allowed.
    pub streams: u16,
    /// Receive buffer, bytes: the largest window advertised.
    pub recv_buffer: u32,
    /// T1 expiries before the handshake gives up.
    pub max_init_retransmits: u32,
    /// Consecutive T3 expiries before the association is aborted.
    pub assoc_max_retrans: u32,
    /// How long a state cookie stays valid.
    pub cookie_life: Duration,
    /// Compute CRC32c on emit and verify it on receipt.
    pub checksum: Checksum,
    /// Bundle queued DATA with the COOKIE-ECHO (RFC 9260 §5.1 allows it; lksctp
    /// does it). Off: data waits for the COOKIE-ACK.
    pub data_on_cookie_echo: bool,
}

impl SctpConfig {
    /// RFC 9260 as written (its §16 protocol parameters).
    pub const RFC9260: SctpConfig = SctpConfig {
        mtu: 1500,
        cc: SctpCcProfile::Rfc9260,
        rto: RtoConfig {
            min_rto: Duration::from_secs(1),
            max_rto: Duration::from_secs(60),
            initial_rto: Duration::from_secs(1),
            granularity: Duration::from_millis(1),
        },
        sack_delay: Duration::from_millis(200),
        sack_freq: 2,
        max_burst: 4,
        streams: 10,
        recv_buffer: 1 << 20,
        max_init_retransmits: 8,
        assoc_max_retrans: 10,
        cookie_life: Duration::from_secs(60),
        checksum: Checksum::Both,
        data_on_cookie_echo: true,
    };
    /// Linux 2.6.15's lksctp, the study's stack: RFC 4960 + RFC 4460 congestion
    /// control, RTO.Initial 3 s, RTO.Min 1 s, SACK every second packet or 200 ms.
    /// The receive buffer is the kernel's default (`net.core.rmem_default`, 108 KiB
    /// on that kernel's era machines, of which lksctp advertised the whole).
    pub const LINUX_2_6_15: SctpConfig = SctpConfig {
        cc: SctpCcProfile::Rfc4960,
        rto: RtoConfig {
            min_rto: Duration::from_secs(1),
            max_rto: Duration::from_secs(60),
            initial_rto: Duration::from_secs(3),
            granularity: Duration::from_millis(1),
        },
        recv_buffer: 110_592,
        ..SctpConfig::RFC9260
    };
    /// Largest user data in one DATA chunk on this path.
    pub fn max_fragment(&self) -> usize {
        usize::from(self.mtu)
            .saturating_sub(IP_SCTP + DATA_HDR)
            .max(1)
    }
}

impl Default for SctpConfig {
    fn default() -> Self {
        SctpConfig::RFC9260
    }
}

/// Association states, with RFC 9260's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// CLOSED.
    Closed,
    /// Waiting for an INIT (a passive endpoint keeps no state per peer).
    Listen,
    /// COOKIE-WAIT.
    CookieWait,
    /// COOKIE-ECHOED.
    CookieEchoed,
    /// ESTABLISHED.
    Established,
    /// SHUTDOWN-PENDING.
    ShutdownPending,
    /// SHUTDOWN-SENT.
    ShutdownSent,
    /// SHUTDOWN-RECEIVED.
    ShutdownReceived,
    /// SHUTDOWN-ACK-SENT.
    ShutdownAckSent,
}

/// What the association tells its application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// A message can be read with [`SctpAssociation::recv`].
    Readable,
    /// The graceful shutdown completed.
    Closed,
    /// The association was aborted (by the peer, or after too many retransmissions).
    Aborted,
}

/// A message handed to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Stream it arrived on.
    pub stream: u16,
    /// Payload protocol identifier.
    pub ppid: u32,
    /// Whether it was sent unordered.
    pub unordered: bool,
    /// The bytes.
    pub data: Vec<u8>,
}

/// Errors of the application calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SctpError {
    /// Not allowed in this state (e.g. sending after shutdown).
    InvalidState,
    /// The stream does not exist.
    InvalidStream,
    /// Messages must hold at least one byte.
    EmptyMessage,
}

impl core::fmt::Display for SctpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            SctpError::InvalidState => "not allowed in this association state",
            SctpError::InvalidStream => "no such stream",
            SctpError::EmptyMessage => "a message must hold at least one byte",
        })
    }
}

impl std::error::Error for SctpError {}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SctpStats {
    /// Packets sent.
    pub packets_sent: u64,
    /// DATA chunks sent for the first time.
    pub data_chunks_sent: u64,
    /// DATA chunks retransmitted (fast or by T3).
    pub retransmits: u64,
    /// Fast retransmit episodes (entries into Fast Recovery).
    pub fast_retransmits: u64,
    /// T3-rtx expiries.
    pub t3_expiries: u64,
    /// T1 (INIT or COOKIE-ECHO) expiries.
    pub t1_expiries: u64,
    /// SACK chunks sent.
    pub sacks_sent: u64,
    /// DATA chunks received that were already received.
    pub duplicate_tsns: u64,
    /// Packets dropped: malformed, bad checksum, wrong tag, bad cookie.
    pub bad_packets: u64,
    /// User bytes delivered to the application.
    pub delivered_bytes: u64,
}

/// A DATA chunk waiting for its first transmission.
#[derive(Debug, Clone)]
struct Fragment {
    stream: u16,
    ssn: u16,
    ppid: u32,
    flags: DataFlags,
    data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    None,
    /// Fast retransmit: goes out ignoring cwnd.
    Fast,
    /// T3 expiry: goes out as cwnd allows.
    Timeout,
}

/// A DATA chunk sent and not cumulatively acknowledged.
#[derive(Debug, Clone)]
struct Sent {
    frag: Fragment,
    /// Bytes it counts in the window.
    bytes: u64,
    sent_at: Instant,
    retransmitted: bool,
    gap_acked: bool,
    /// Counts in the flight size (sent, not acknowledged, not marked after T3).
    in_flight: bool,
    misses: u32,
    mark: Mark,
    /// Already fast-retransmitted once (§7.2.4 step 5).
    fast_retransmitted: bool,
    /// Slow-start round it was first sent in (1: the initial window).
    round: u32,
}

/// What a pending INIT-ACK answers (a listener keeps nothing else).
#[derive(Debug, Clone, Copy)]
struct InitAckReply {
    peer_tag: u32,
    cookie: [u8; COOKIE_LEN],
    src_port: u16,
    dst_port: u16,
}

/// One SCTP association endpoint.
#[derive(Debug, Clone)]
pub struct SctpAssociation {
    cfg: SctpConfig,
    local: (Ipv4Address, u16),
    remote: (Ipv4Address, u16),
    state: State,
    cookie_key: [u8; 32],
    local_tag: u32,
    peer_tag: u32,
    streams_out: u16,
    streams_in: u16,

    // Handshake and shutdown.
    init_pending: bool,
    cookie: Option<[u8; COOKIE_LEN]>,
    cookie_echo_pending: bool,
    cookie_ack_pending: bool,
    init_ack_reply: Option<InitAckReply>,
    t1_at: Option<Instant>,
    t1_retries: u32,
    shutdown_pending: bool,
    shutdown_ack_pending: bool,
    shutdown_complete_pending: bool,
    t2_at: Option<Instant>,
    heartbeat_ack: Option<([u8; 64], usize)>,
    abort_pending: bool,

    // Sender.
    next_tsn: u32,
    /// Last TSN the peer acknowledged cumulatively.
    cum_acked: u32,
    ssn_out: Vec<u16>,
    pending: VecDeque<Fragment>,
    pending_bytes: u64,
    /// Outstanding chunks; entry `i` has TSN `cum_acked + 1 + i`.
    outstanding: VecDeque<Sent>,
    flight: u64,
    peer_rwnd: u64,
    cc: SctpCc,
    rtt: RttEstimator,
    t3_at: Option<Instant>,
    /// Exit point of Fast Recovery (highest TSN outstanding when it began).
    fast_recovery: Option<u32>,
    fast_rtx_now: bool,
    errors: u32,
    /// Flight size when the current burst began (reset by every input).
    burst_base: Option<u64>,
    send_round: u32,
    round_bytes: Vec<u64>,

    // Receiver.
    peer_initial_tsn: u32,
    /// Highest TSN received in order.
    cum_tsn: u32,
    /// TSNs received above `cum_tsn`, as distances from the peer's initial TSN (so
    /// wrap-around never reorders them).
    above: BTreeSet<u64>,
    dups: Vec<u32>,
    /// Fragments held for reassembly: (stream, TSN distance) for ordered ones.
    held: BTreeMap<(u16, u64), Fragment>,
    held_unordered: BTreeMap<u64, Fragment>,
    held_bytes: u64,
    /// Streams that got ordered DATA since the last delivery pass (a buffer kept
    /// between packets, so delivery costs what arrived, not the stream count).
    touched: Vec<u16>,
    ssn_in: Vec<u16>,
    readable: VecDeque<Message>,
    readable_bytes: u64,
    sack_now: bool,
    /// The window the last SACK advertised, and the user bytes received since.
    advertised_rwnd: u32,
    received_since_sack: u64,
    packets_unacked: u32,
    sack_at: Option<Instant>,
    first_data_at: Option<Instant>,
    last_data_at: Option<Instant>,

    events: VecDeque<Event>,
    stats: SctpStats,
}

/// SplitMix64: spreads a seed into independent-looking words (tags, TSN, key).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Distance of `tsn` above `base` in the peer's TSN space, unwrapped near `near`.
fn tsn_dist(tsn: u32, base: u32, near: u64) -> u64 {
    let near_tsn = base.wrapping_add(near as u32);
    let delta = i64::from(tsn.wrapping_sub(near_tsn) as i32);
    (near as i64 + delta).max(0) as u64
}

impl SctpAssociation {
    /// A closed endpoint between `local` and `remote`. `seed` stands in for the
    /// random numbers RFC 9260 asks for (verification tag, initial TSN, cookie key),
    /// so runs are reproducible.
    pub fn new(
        cfg: SctpConfig,
        local: (Ipv4Address, u16),
        remote: (Ipv4Address, u16),
        seed: u64,
    ) -> Self {
        let mut s = seed;
        let local_tag = (splitmix(&mut s) as u32).max(1);
        let next_tsn = splitmix(&mut s) as u32;
        let mut cookie_key = [0u8; 32];
        for c in cookie_key.chunks_mut(8) {
            c.copy_from_slice(&splitmix(&mut s).to_le_bytes());
        }
        SctpAssociation {
            cfg,
            local,
            remote,
            state: State::Closed,
            cookie_key,
            local_tag,
            peer_tag: 0,
            streams_out: cfg.streams,
            streams_in: cfg.streams,
            init_pending: false,
            cookie: None,
            cookie_echo_pending: false,
            cookie_ack_pending: false,
            init_ack_reply: None,
            t1_at: None,
            t1_retries: 0,
            shutdown_pending: false,
            shutdown_ack_pending: false,
            shutdown_complete_pending: false,
            t2_at: None,
            heartbeat_ack: None,
            abort_pending: false,
            next_tsn,
            cum_acked: next_tsn.wrapping_sub(1),
            ssn_out: vec![0; usize::from(cfg.streams)],
            pending: VecDeque::new(),
            pending_bytes: 0,
            outstanding: VecDeque::new(),
            flight: 0,
            peer_rwnd: u64::from(cfg.recv_buffer),
            cc: SctpCc::new(cfg.cc, u64::from(cfg.mtu), u64::from(cfg.recv_buffer)),
            rtt: RttEstimator::new(cfg.rto),
            t3_at: None,
            fast_recovery: None,
            fast_rtx_now: false,
            errors: 0,
            burst_base: None,
            send_round: 1,
            round_bytes: vec![],
            peer_initial_tsn: 0,
            cum_tsn: 0,
            above: BTreeSet::new(),
            dups: vec![],
            held: BTreeMap::new(),
            held_unordered: BTreeMap::new(),
            held_bytes: 0,
            touched: vec![],
            ssn_in: vec![0; usize::from(cfg.streams)],
            readable: VecDeque::new(),
            readable_bytes: 0,
            sack_now: false,
            advertised_rwnd: cfg.recv_buffer,
            received_since_sack: 0,
            packets_unacked: 0,
            sack_at: None,
            first_data_at: None,
            last_data_at: None,
            events: VecDeque::new(),
            stats: SctpStats::default(),
        }
    }

    // ---- application side -------------------------------------------------------

    /// Starts the handshake: an INIT goes out on the next `poll_transmit`.
    pub fn connect(&mut self, now: Instant) -> Result<(), SctpError> {
        if self.state != State::Closed {
            return Err(SctpError::InvalidState);
        }
        self.state = State::CookieWait;
        self.init_pending = true;
        self.t1_at = Some(now.add_nanos(self.rtt.rto_nanos()));
        Ok(())
    }

    /// Waits for an INIT. Until a valid COOKIE-ECHO arrives the endpoint keeps no
    /// state about any peer (RFC 9260 §5.1.3).
    pub fn listen(&mut self) -> Result<(), SctpError> {
        if self.state != State::Closed {
            return Err(SctpError::InvalidState);
        }
        self.state = State::Listen;
        Ok(())
    }

    /// Queues a message on `stream`, cut into DATA chunks that fit the path MTU.
    /// Allowed from `connect` on (queued data rides on the COOKIE-ECHO).
    pub fn send(
        &mut self,
        stream: u16,
        ppid: u32,
        unordered: bool,
        data: &[u8],
    ) -> Result<(), SctpError> {
        match self.state {
            State::CookieWait | State::CookieEchoed | State::Established => {}
            _ => return Err(SctpError::InvalidState),
        }
        if self.shutdown_pending {
            return Err(SctpError::InvalidState);
        }
        if stream >= self.streams_out {
            return Err(SctpError::InvalidStream);
        }
        if data.is_empty() {
            return Err(SctpError::EmptyMessage);
        }
        let ssn = if unordered {
            0
        } else {
            let s = &mut self.ssn_out[usize::from(stream)];
            let v = *s;
            *s = s.wrapping_add(1);
            v
        };
        let max = self.cfg.max_fragment();
        let n = data.len().div_ceil(max);
        self.pending_bytes += data.len() as u64;
        for (i, piece) in data.chunks(max).enumerate() {
            self.pending.push_back(Fragment {
                stream,
                ssn,
                ppid,
                flags: DataFlags {
                    unordered,
                    beginning: i == 0,
                    ending: i + 1 == n,
                    immediate: false,
                },
                data: piece.to_vec(),
            });
        }
        Ok(())
    }

    /// Starts a graceful shutdown: SHUTDOWN once everything queued is acknowledged.
    pub fn shutdown(&mut self) -> Result<(), SctpError> {
        match self.state {
            State::Established | State::CookieEchoed | State::CookieWait => {
                self.shutdown_pending = true;
                Ok(())
            }
            _ => Err(SctpError::InvalidState),
        }
    }

    /// Aborts the association at once (an ABORT goes out).
    pub fn abort(&mut self) {
        if !matches!(self.state, State::Closed | State::Listen) {
            self.abort_pending = true;
        }
    }

    /// The next message received, in order per stream. Reading opens the receive
    /// window; once it is max(buffer/16, MTU) above what the peer believes it to be
    /// (the last advertised window less the data received since), a window-update
    /// SACK goes out (lksctp's `sctp_peer_needs_update` threshold), so drain
    /// `poll_transmit` after reading.
    pub fn recv(&mut self) -> Option<Message> {
        let m = self.readable.pop_front()?;
        self.readable_bytes -= m.data.len() as u64;
        let step = u64::from((self.cfg.recv_buffer / 16).max(u32::from(self.cfg.mtu)));
        let peer_view = u64::from(self.advertised_rwnd).saturating_sub(self.received_since_sack);
        if self.is_up() && u64::from(self.a_rwnd()).saturating_sub(peer_view) >= step {
            self.sack_now = true;
        }
        Some(m)
    }

    // ---- queries ----------------------------------------------------------------

    /// The association state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Counters.
    pub fn stats(&self) -> &SctpStats {
        &self.stats
    }
    /// The congestion window, bytes (in the profile's accounting).
    pub fn cwnd(&self) -> u64 {
        self.cc.cwnd()
    }
    /// The slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u64 {
        self.cc.ssthresh()
    }
    /// Bytes outstanding, in the window's accounting.
    pub fn flight_size(&self) -> u64 {
        self.flight
    }
    /// The RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }
    /// User bytes queued and not yet sent once.
    pub fn queued_bytes(&self) -> u64 {
        self.pending_bytes
    }
    /// Whether every queued message has been sent and acknowledged.
    pub fn all_acked(&self) -> bool {
        self.pending.is_empty() && self.outstanding.is_empty()
    }
    /// User bytes first sent in each slow-start round: entry 0 is the initial
    /// window, entry k the data released by acknowledgements of round k's data.
    /// Only the first [`ROUND_LOG_ROUNDS`](crate::ROUND_LOG_ROUNDS) rounds are booked.
    pub fn round_bytes(&self) -> &[u64] {
        &self.round_bytes
    }
    /// When the first and the last packet carrying DATA arrived.
    pub fn data_arrivals(&self) -> Option<(Instant, Instant)> {
        self.first_data_at.zip(self.last_data_at)
    }
    /// Streams negotiated (outbound, inbound).
    pub fn streams(&self) -> (u16, u16) {
        (self.streams_out, self.streams_in)
    }

    // ---- timers -----------------------------------------------------------------

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.t1_at, self.t2_at, self.t3_at, self.sack_at]
            .into_iter()
            .flatten()
            .min()
    }

    /// Runs whatever timers are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.burst_base = None;
        if self.sack_at.is_some_and(|t| t <= now) {
            self.sack_at = None;
            self.sack_now = true;
        }
        if self.t1_at.is_some_and(|t| t <= now) {
            self.on_t1(now);
        }
        if self.t2_at.is_some_and(|t| t <= now) {
            // Resend SHUTDOWN or SHUTDOWN-ACK with backoff.
            self.rtt.on_timeout();
            self.errors += 1;
            if self.errors > self.cfg.assoc_max_retrans {
                self.fail();
                return;
            }
            match self.state {
                State::ShutdownSent => self.shutdown_pending = true,
                State::ShutdownAckSent => self.shutdown_ack_pending = true,
                _ => {}
            }
            self.t2_at = Some(now.add_nanos(self.rtt.rto_nanos()));
        }
        if self.t3_at.is_some_and(|t| t <= now) {
            self.on_t3(now);
        }
    }

    fn on_t1(&mut self, now: Instant) {
        self.stats.t1_expiries += 1;
        self.t1_retries += 1;
        if self.t1_retries > self.cfg.max_init_retransmits {
            self.fail();
            return;
        }
        self.rtt.on_timeout();
        match self.state {
            State::CookieWait => self.init_pending = true,
            State::CookieEchoed => self.cookie_echo_pending = true,
            _ => {
                self.t1_at = None;
                return;
            }
        }
        self.t1_at = Some(now.add_nanos(self.rtt.rto_nanos()));
    }

    fn on_t3(&mut self, _now: Instant) {
        self.t3_at = None;
        if self.outstanding.iter().all(|s| s.gap_acked) {
            return;
        }
        self.stats.t3_expiries += 1;
        self.errors += 1;
        if self.errors > self.cfg.assoc_max_retrans {
            self.fail();
            return;
        }
        //= RFC 9260 §6.3.3: E1 cut the window, E2 back off the RTO, E3 mark every
        //= outstanding chunk for retransmission (it leaves the flight).
        self.cc.on_t3_expiry();
        self.rtt.on_timeout();
        for s in self.outstanding.iter_mut().filter(|s| !s.gap_acked) {
            if s.in_flight {
                s.in_flight = false;
                self.flight -= s.bytes;
            }
            s.mark = Mark::Timeout;
        }
        self.fast_recovery = None;
        self.fast_rtx_now = false;
    }

    fn fail(&mut self) {
        self.state = State::Closed;
        self.abort_pending = true;
        self.clear_timers();
        self.events.push_back(Event::Aborted);
    }

    fn clear_timers(&mut self) {
        self.t1_at = None;
        self.t2_at = None;
        self.t3_at = None;
        self.sack_at = None;
    }

    // ---- network side -----------------------------------------------------------

    /// Processes an IPv4 datagram carrying SCTP. Anything malformed, with a bad
    /// checksum or a wrong verification tag is counted and dropped.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        if self.process(now, datagram).is_none() {
            self.stats.bad_packets += 1;
        }
    }

    fn process(&mut self, now: Instant, datagram: &[u8]) -> Option<()> {
        let ip = Ipv4Packet::new_checked(datagram).ok()?;
        let ip_repr = Ipv4Repr::parse(&ip, self.cfg.checksum).ok()?;
        if ip_repr.protocol != IpProtocol::Sctp {
            return None;
        }
        let hl = ip.header_len();
        let end = (hl + ip_repr.payload_len).min(datagram.len());
        let pkt = SctpPacket::new_checked(&datagram[hl..end]).ok()?;
        let hdr = SctpRepr::parse(&pkt, self.cfg.checksum == Checksum::Both).ok()?;
        if hdr.dst_port != self.local.1 {
            return None;
        }
        // Validate every chunk before acting on any (a malformed packet is dropped
        // whole, as RFC 9260 §3.2 and §8.5 suggest).
        if pkt.chunks().any(|c| c.is_err()) {
            return None;
        }
        let first = pkt.chunks().next()?.ok()?;
        // §8.5.1: INIT must travel alone with tag 0; ABORT and SHUTDOWN-COMPLETE with
        // the T bit carry the sender's own tag; everything else carries ours.
        let tag_ok = match first {
            ChunkRepr::Init(_) => hdr.verification_tag == 0,
            ChunkRepr::Abort {
                tag_reflected: true,
                ..
            }
            | ChunkRepr::ShutdownComplete {
                tag_reflected: true,
            } => hdr.verification_tag == self.peer_tag,
            ChunkRepr::CookieEcho { .. } if self.state == State::Listen => true,
            _ => hdr.verification_tag == self.local_tag,
        };
        if !tag_ok {
            return None;
        }
        self.burst_base = None;
        let mut had_data = false;
        let mut sack_at_once = false;
        for chunk in pkt.chunks().flatten() {
            match chunk {
                ChunkRepr::Init(init) => self.on_init(&hdr, init),
                ChunkRepr::InitAck(init) => self.on_init_ack(now, init),
                ChunkRepr::CookieEcho { cookie } => {
                    if !self.on_cookie_echo(now, &hdr, cookie) {
                        return None;
                    }
                }
                ChunkRepr::CookieAck => self.on_cookie_ack(),
                ChunkRepr::Data {
                    tsn,
                    stream_id,
                    ssn,
                    ppid,
                    flags,
                    data,
                } => {
                    if !self.is_up() {
                        continue;
                    }
                    had_data = true;
                    sack_at_once |= flags.immediate;
                    sack_at_once |= self.on_data(tsn, stream_id, ssn, ppid, flags, data);
                }
                ChunkRepr::Sack(sack) => self.on_sack(now, &sack),
                ChunkRepr::Heartbeat { info } => {
                    let mut b = [0u8; 64];
                    let n = info.len().min(64);
                    b[..n].copy_from_slice(&info[..n]);
                    self.heartbeat_ack = Some((b, n));
                }
                ChunkRepr::HeartbeatAck { .. } => {}
                ChunkRepr::Abort { .. } => {
                    self.state = State::Closed;
                    self.clear_timers();
                    self.events.push_back(Event::Aborted);
                    return Some(());
                }
                ChunkRepr::Shutdown { cum_tsn } => self.on_shutdown(now, cum_tsn),
                ChunkRepr::ShutdownAck => self.on_shutdown_ack(),
                ChunkRepr::ShutdownComplete { .. } => {
                    if self.state == State::ShutdownAckSent {
                        self.close();
                    }
                }
                ChunkRepr::Error { .. } | ChunkRepr::Unknown { .. } => {}
            }
        }
        if had_data {
            let t = now;
            self.first_data_at.get_or_insert(t);
            self.last_data_at = Some(t);
            self.schedule_sack(now, sack_at_once);
        }
        self.deliver();
        self.advance_shutdown(now);
        Some(())
    }

    fn is_up(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
        )
    }

    fn on_init(&mut self, hdr: &SctpRepr, init: InitRepr<'_>) {
        if self.state != State::Listen {
            // Restart and collision handling (§5.2) are not modelled.
            return;
        }
        // Stateless: everything needed later goes into the cookie.
        let mut c = [0u8; COOKIE_LEN];
        c[0..4].copy_from_slice(&init.initiate_tag.to_be_bytes());
        c[4..8].copy_from_slice(&self.local_tag.to_be_bytes());
        c[8..12].copy_from_slice(&init.initial_tsn.to_be_bytes());
        c[12..16].copy_from_slice(&self.next_tsn.to_be_bytes());
        c[16..20].copy_from_slice(&init.a_rwnd.to_be_bytes());
        c[20..22].copy_from_slice(&init.outbound_streams.to_be_bytes());
        c[22..24].copy_from_slice(&init.max_inbound_streams.to_be_bytes());
        // The creation time is filled in at transmission (see poll_transmit).
        self.init_ack_reply = Some(InitAckReply {
            peer_tag: init.initiate_tag,
            cookie: c,
            src_port: hdr.dst_port,
            dst_port: hdr.src_port,
        });
    }

    fn seal_cookie(&self, c: &mut [u8; COOKIE_LEN]) {
        let mac = blake3::keyed_hash(&self.cookie_key, &c[..COOKIE_LEN - COOKIE_MAC_LEN]);
        c[COOKIE_LEN - COOKIE_MAC_LEN..].copy_from_slice(&mac.as_bytes()[..COOKIE_MAC_LEN]);
    }

    fn on_init_ack(&mut self, now: Instant, init: InitRepr<'_>) {
        if self.state != State::CookieWait {
            return;
        }
        let Some(cookie) = init.cookie.filter(|c| c.len() <= COOKIE_LEN) else {
            // Only our own cookies are short enough to keep inline; a longer one
            // from another implementation is not supported.
            return;
        };
        let mut c = [0u8; COOKIE_LEN];
        c[..cookie.len()].copy_from_slice(cookie);
        self.cookie = Some(c);
        self.peer_tag = init.initiate_tag;
        self.set_peer(
            init.initial_tsn,
            init.a_rwnd,
            init.outbound_streams,
            init.max_inbound_streams,
        );
        self.state = State::CookieEchoed;
        self.init_pending = false;
        self.cookie_echo_pending = true;
        self.t1_retries = 0;
        self.t1_at = Some(now.add_nanos(self.rtt.rto_nanos()));
    }

    fn set_peer(&mut self, initial_tsn: u32, a_rwnd: u32, os: u16, mis: u16) {
        self.peer_initial_tsn = initial_tsn;
        self.cum_tsn = initial_tsn.wrapping_sub(1);
        self.peer_rwnd = u64::from(a_rwnd);
        self.cc = SctpCc::new(self.cfg.cc, u64::from(self.cfg.mtu), u64::from(a_rwnd));
        //= §5.1.2: streams in use are min(our OS, peer MIS) and min(peer OS, our MIS).
        self.streams_out = self.cfg.streams.min(mis);
        self.streams_in = self.cfg.streams.min(os);
        self.ssn_in = vec![0; usize::from(self.streams_in)];
    }

    /// Returns false if the cookie is invalid (the packet is then dropped).
    fn on_cookie_echo(&mut self, now: Instant, hdr: &SctpRepr, cookie: &[u8]) -> bool {
        if self.state != State::Listen {
            // A duplicate COOKIE-ECHO (our COOKIE-ACK was lost): acknowledge again.
            if self.is_up() && hdr.verification_tag == self.local_tag {
                self.cookie_ack_pending = true;
                return true;
            }
            return false;
        }
        if cookie.len() != COOKIE_LEN {
            return false;
        }
        let mut c = [0u8; COOKIE_LEN];
        c.copy_from_slice(cookie);
        let mut check = c;
        self.seal_cookie(&mut check);
        // Constant-time comparison is not needed in a simulator, but costs nothing.
        let diff = check[COOKIE_LEN - COOKIE_MAC_LEN..]
            .iter()
            .zip(&c[COOKIE_LEN - COOKIE_MAC_LEN..])
            .fold(0u8, |a, (x, y)| a | (x ^ y));
        let be32 = |i: usize| u32::from_be_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
        let be16 = |i: usize| u16::from_be_bytes([c[i], c[i + 1]]);
        let created = u64::from_be_bytes(c[24..32].try_into().expect("8 bytes"));
        let fresh =
            now.as_nanos().saturating_sub(created) <= self.cfg.cookie_life.as_nanos() as u64;
        if diff != 0 || !fresh || hdr.verification_tag != be32(4) {
            return false;
        }
        self.peer_tag = be32(0);
        self.next_tsn = be32(12);
        self.cum_acked = self.next_tsn.wrapping_sub(1);
        self.set_peer(be32(8), be32(16), be16(20), be16(22));
        self.remote.1 = hdr.src_port;
        self.state = State::Established;
        self.cookie_ack_pending = true;
        self.events.push_back(Event::Connected);
        true
    }

    fn on_cookie_ack(&mut self) {
        if self.state == State::CookieEchoed {
            self.state = State::Established;
            self.t1_at = None;
            self.cookie_echo_pending = false;
            self.events.push_back(Event::Connected);
        }
    }

    /// A DATA chunk. Returns whether the SACK should go at once (a duplicate, a new
    /// gap or a closed gap).
    fn on_data(
        &mut self,
        tsn: u32,
        stream: u16,
        ssn: u16,
        ppid: u32,
        flags: DataFlags,
        data: &[u8],
    ) -> bool {
        let base = self.peer_initial_tsn;
        let cum = self.cum_tsn.wrapping_sub(base).wrapping_add(1) as u64; // TSNs received in order
        let d = tsn_dist(tsn, base, cum);
        if d < cum || self.above.contains(&d) {
            self.stats.duplicate_tsns += 1;
            if self.dups.len() < MAX_SACK_ENTRIES {
                self.dups.push(tsn);
            }
            return true;
        }
        if stream >= self.streams_in {
            // §6.5: an invalid stream gets an ERROR; the TSN is still acknowledged.
            self.above.insert(d);
            self.advance_cum();
            return true;
        }
        let had_gap = !self.above.is_empty();
        self.above.insert(d);
        self.advance_cum();
        let frag = Fragment {
            stream,
            ssn,
            ppid,
            flags,
            data: data.to_vec(),
        };
        self.held_bytes += data.len() as u64;
        self.received_since_sack += data.len() as u64;
        if flags.unordered {
            self.held_unordered.insert(d, frag);
        } else {
            self.held.insert((stream, d), frag);
            if !self.touched.contains(&stream) {
                self.touched.push(stream);
            }
        }
        //= §6.7: with gaps, SACK every packet; usrsctp also when a gap just closed.
        had_gap || !self.above.is_empty()
    }

    fn advance_cum(&mut self) {
        let base = self.peer_initial_tsn;
        let mut next = self.cum_tsn.wrapping_sub(base).wrapping_add(1) as u64;
        while self.above.first() == Some(&next) {
            self.above.pop_first();
            next += 1;
        }
        self.cum_tsn = base.wrapping_add(next as u32).wrapping_sub(1);
    }

    fn schedule_sack(&mut self, now: Instant, at_once: bool) {
        self.packets_unacked += 1;
        if at_once || self.packets_unacked >= self.cfg.sack_freq || self.state != State::Established
        {
            self.sack_now = true;
            self.sack_at = None;
        } else if self.sack_at.is_none() {
            self.sack_at = Some(now + self.cfg.sack_delay);
        }
    }

    /// Moves complete messages to the application.
    fn deliver(&mut self) {
        // Unordered: any complete B..E run of consecutive TSNs.
        while let Some(run) = complete_run(&self.held_unordered) {
            let msg = take_run(&mut self.held_unordered, run);
            self.push_message(msg);
        }
        // Ordered: per stream that got data, the message with the next SSN, if
        // complete.
        let touched = std::mem::take(&mut self.touched);
        for &stream in &touched {
            loop {
                let expected = self.ssn_in[usize::from(stream)];
                let range = self.held.range((stream, 0)..=(stream, u64::MAX));
                let mut it = range.clone();
                let Some((&(_, first), f)) = it.next() else {
                    break;
                };
                if !f.flags.beginning || f.ssn != expected {
                    break;
                }
                let mut last = first;
                let mut complete = f.flags.ending;
                for (&(_, d), g) in it {
                    if complete || d != last + 1 || g.ssn != expected {
                        break;
                    }
                    last = d;
                    complete = g.flags.ending;
                }
                if !complete {
                    break;
                }
                let mut data = vec![];
                let mut ppid = 0;
                for d in first..=last {
                    let g = self.held.remove(&(stream, d)).expect("run is held");
                    ppid = g.ppid;
                    data.extend_from_slice(&g.data);
                }
                self.ssn_in[usize::from(stream)] = expected.wrapping_add(1);
                self.push_message(Message {
                    stream,
                    ppid,
                    unordered: false,
                    data,
                });
            }
        }
        // Keep the buffer's capacity; streams still waiting on a gap are touched
        // again when the chunk that fills it arrives.
        self.touched = touched;
        self.touched.clear();
    }

    fn push_message(&mut self, m: Message) {
        let n = m.data.len() as u64;
        self.held_bytes -= n;
        self.readable_bytes += n;
        self.stats.delivered_bytes += n;
        self.readable.push_back(m);
        self.events.push_back(Event::Readable);
    }

    fn a_rwnd(&self) -> u32 {
        u64::from(self.cfg.recv_buffer)
            .saturating_sub(self.held_bytes + self.readable_bytes)
            .min(u64::from(u32::MAX)) as u32
    }

    fn on_sack(&mut self, now: Instant, sack: &SackRepr<'_>) {
        if !self.is_up() {
            return;
        }
        let base = self.cum_acked;
        let adv = sack.cum_tsn.wrapping_sub(base) as i32;
        //= §6.2.1 D i): a SACK whose cumulative TSN is behind the ack point is old.
        if adv < 0 || adv as usize > self.outstanding.len() {
            return;
        }
        let flight_before = self.flight;
        let mut bytes_acked = 0;
        let mut newest_round = 0;
        let mut htna: Option<usize> = None; // index in the pre-SACK outstanding list
        let mut rtt_sample = None;
        // Cumulatively acknowledged chunks.
        for i in 0..adv as usize {
            let s = &self.outstanding[i];
            if !s.gap_acked {
                bytes_acked += s.bytes;
                htna = Some(i);
            }
            if s.in_flight {
                self.flight -= s.bytes;
            }
            if !s.retransmitted {
                rtt_sample = Some(s.sent_at);
            }
            newest_round = newest_round.max(s.round);
        }
        // Gap-acknowledged chunks.
        for (start, end) in sack.gap_blocks.iter() {
            for off in start..=end.max(start) {
                let Some(i) = (adv as usize + usize::from(off)).checked_sub(1) else {
                    continue;
                };
                if off == 0 || i >= self.outstanding.len() {
                    continue;
                }
                let s = &mut self.outstanding[i];
                if !s.gap_acked {
                    s.gap_acked = true;
                    s.mark = Mark::None;
                    bytes_acked += s.bytes;
                    htna = Some(htna.map_or(i, |h| h.max(i)));
                    newest_round = newest_round.max(s.round);
                    if s.in_flight {
                        s.in_flight = false;
                        self.flight -= s.bytes;
                    }
                }
            }
        }
        let cum_advanced = adv > 0;
        // One RTT sample per SACK that advances the cumulative TSN, from the newest
        // chunk it covers, never a retransmitted one (Karn).
        if cum_advanced {
            if let Some(t) = rtt_sample {
                self.rtt.on_sample_nanos(now.nanos_since(t));
            }
            self.errors = 0;
        }
        //= §7.2.4: miss indications (HTNA): every chunk below the highest TSN newly
        //= acknowledged that is still missing; in Fast Recovery a SACK that advances
        //= the cumulative TSN counts every missing chunk below the highest gap-acked.
        let limit = match (self.fast_recovery.is_some() && cum_advanced, htna) {
            (true, _) => self.outstanding.iter().rposition(|s| s.gap_acked),
            (false, h) => h,
        };
        let mut new_fast = false;
        if let Some(limit) = limit {
            for s in self.outstanding.iter_mut().take(limit).skip(adv as usize) {
                if s.gap_acked || s.mark != Mark::None || s.fast_retransmitted {
                    continue;
                }
                s.misses += 1;
                if s.misses >= MISS_THRESHOLD {
                    s.mark = Mark::Fast;
                    s.fast_retransmitted = true;
                    if s.in_flight {
                        s.in_flight = false;
                        self.flight -= s.bytes;
                    }
                    new_fast = true;
                }
            }
        }
        // Pop the cumulatively acknowledged chunks.
        self.outstanding.drain(..adv as usize);
        self.cum_acked = sack.cum_tsn;
        let in_fr = self.fast_recovery.is_some();
        if bytes_acked > 0 {
            self.cc
                .on_sack(bytes_acked, flight_before, cum_advanced, in_fr);
        }
        if let Some(exit) = self.fast_recovery {
            if (sack.cum_tsn.wrapping_sub(exit) as i32) >= 0 {
                self.fast_recovery = None;
            }
        }
        if new_fast {
            self.fast_rtx_now = true;
            if self.fast_recovery.is_none() {
                self.stats.fast_retransmits += 1;
                self.cc.on_fast_retransmit();
                self.fast_recovery = Some(self.next_tsn.wrapping_sub(1));
            }
        }
        if newest_round > 0 {
            self.send_round = self.send_round.max(newest_round + 1);
        }
        if self.outstanding.is_empty() {
            self.cc.on_all_acked();
        }
        //= §6.2.1 D iv): peer rwnd = a_rwnd less the bytes still outstanding.
        self.peer_rwnd = u64::from(sack.a_rwnd).saturating_sub(self.flight);
        //= §6.3.2 R2/R3: stop T3 when nothing is outstanding; restart it when the
        //= earliest outstanding TSN is acknowledged.
        if self.outstanding.iter().all(|s| s.gap_acked) {
            self.t3_at = None;
        } else if cum_advanced {
            self.t3_at = Some(now.add_nanos(self.rtt.rto_nanos()));
        }
    }

    fn on_shutdown(&mut self, now: Instant, cum_tsn: u32) {
        if !self.is_up() {
            return;
        }
        // The SHUTDOWN's cumulative TSN acknowledges like a SACK without gaps.
        let a_rwnd = self.peer_rwnd.min(u64::from(u32::MAX)) as u32;
        self.on_sack(
            now,
            &SackRepr {
                cum_tsn,
                a_rwnd,
                gap_blocks: GapBlocks::List(&[]),
                dup_tsns: DupTsns::List(&[]),
            },
        );
        if matches!(self.state, State::Established | State::ShutdownPending) {
            self.state = State::ShutdownReceived;
        }
    }

    fn on_shutdown_ack(&mut self) {
        if matches!(self.state, State::ShutdownSent | State::ShutdownAckSent) {
            self.shutdown_complete_pending = true;
            self.close();
        } else if self.state == State::Closed && self.peer_tag != 0 {
            // Our SHUTDOWN-COMPLETE was lost and the peer's T2 resent its ACK.
            self.shutdown_complete_pending = true;
        }
    }

    fn close(&mut self) {
        self.state = State::Closed;
        self.clear_timers();
        self.events.push_back(Event::Closed);
    }

    /// Moves the shutdown forward once the data allows it.
    fn advance_shutdown(&mut self, now: Instant) {
        if self.shutdown_pending && self.state == State::Established {
            self.state = State::ShutdownPending;
        }
        let drained = self.all_acked();
        match self.state {
            State::ShutdownPending if drained => {
                self.state = State::ShutdownSent;
                self.shutdown_pending = true;
                self.t2_at = Some(now.add_nanos(self.rtt.rto_nanos()));
            }
            State::ShutdownReceived if drained => {
                self.state = State::ShutdownAckSent;
                self.shutdown_ack_pending = true;
                self.t2_at = Some(now.add_nanos(self.rtt.rto_nanos()));
            }
            _ => {}
        }
    }

    // ---- output -----------------------------------------------------------------

    /// The next application event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Writes the next IPv4 datagram into `buf` (at least the path MTU long) and
    /// returns its length, or `None` when there is nothing to send now.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.advance_shutdown(now);
        let mtu = usize::from(self.cfg.mtu).min(buf.len());
        if let Some(r) = self.init_ack_reply.take() {
            return Some(self.emit_init_ack(now, buf, r));
        }
        let vtag = if self.init_pending { 0 } else { self.peer_tag };
        let header = SctpRepr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            verification_tag: vtag,
        };
        let (ip_buf, sctp_buf) = buf[..mtu].split_at_mut(ipv4::HEADER_LEN);
        let mut b = PacketBuilder::new(sctp_buf, header);

        if self.abort_pending {
            // An ABORT travels alone; nothing follows it.
            self.abort_pending = false;
            self.state = State::Closed;
            self.clear_timers();
            self.pending.clear();
            self.pending_bytes = 0;
            b.push(&ChunkRepr::Abort {
                tag_reflected: false,
                causes: &[],
            });
            return Some(self.finish(ip_buf, b));
        }
        if self.shutdown_complete_pending {
            self.shutdown_complete_pending = false;
            b.push(&ChunkRepr::ShutdownComplete {
                tag_reflected: false,
            });
            return Some(self.finish(ip_buf, b));
        }
        if self.init_pending {
            self.init_pending = false;
            b.push(&ChunkRepr::Init(InitRepr {
                initiate_tag: self.local_tag,
                a_rwnd: self.a_rwnd(),
                outbound_streams: self.cfg.streams,
                max_inbound_streams: self.cfg.streams,
                initial_tsn: self.next_tsn,
                cookie: None,
            }));
            // An INIT travels alone.
            return Some(self.finish(ip_buf, b));
        }
        let mut cookie_echo = false;
        if self.cookie_echo_pending {
            if let Some(c) = self.cookie {
                self.cookie_echo_pending = false;
                cookie_echo = b.push(&ChunkRepr::CookieEcho { cookie: &c });
            }
        }
        if self.cookie_ack_pending {
            self.cookie_ack_pending = false;
            b.push(&ChunkRepr::CookieAck);
        }
        if let Some((info, n)) = self.heartbeat_ack.take() {
            b.push(&ChunkRepr::HeartbeatAck { info: &info[..n] });
        }
        if self.shutdown_ack_pending {
            self.shutdown_ack_pending = false;
            b.push(&ChunkRepr::ShutdownAck);
        }
        if self.state == State::ShutdownSent && self.shutdown_pending {
            self.shutdown_pending = false;
            b.push(&ChunkRepr::Shutdown {
                cum_tsn: self.cum_tsn,
            });
            self.sack_now = false;
        }
        //= §5.1: until the COOKIE-ACK, DATA may only ride on the COOKIE-ECHO.
        let sending_data = self.can_send_data()
            && (self.state != State::CookieEchoed || (cookie_echo && self.cfg.data_on_cookie_echo));
        if self.sack_now || (self.sack_at.is_some() && sending_data) {
            self.push_sack(&mut b);
        }
        if sending_data {
            self.push_data(now, &mut b);
        }
        if b.is_empty() {
            return None;
        }
        Some(self.finish(ip_buf, b))
    }

    fn can_send_data(&self) -> bool {
        matches!(
            self.state,
            State::CookieEchoed
                | State::Established
                | State::ShutdownPending
                | State::ShutdownReceived
        ) && (self.fast_rtx_now
            || self.outstanding.iter().any(|s| s.mark != Mark::None)
            || !self.pending.is_empty())
    }

    fn push_sack(&mut self, b: &mut PacketBuilder<'_>) {
        let mut gaps = [(0u16, 0u16); MAX_SACK_ENTRIES];
        let mut n = 0;
        let cum = self
            .cum_tsn
            .wrapping_sub(self.peer_initial_tsn)
            .wrapping_add(1) as u64;
        for &d in &self.above {
            let off = (d + 1 - cum).min(u64::from(u16::MAX)) as u16;
            if n > 0 && gaps[n - 1].1.wrapping_add(1) == off {
                gaps[n - 1].1 = off;
            } else if n < MAX_SACK_ENTRIES {
                gaps[n] = (off, off);
                n += 1;
            } else {
                break;
            }
        }
        let dups = std::mem::take(&mut self.dups);
        let a_rwnd = self.a_rwnd();
        let sack = ChunkRepr::Sack(SackRepr {
            cum_tsn: self.cum_tsn,
            a_rwnd,
            gap_blocks: GapBlocks::List(&gaps[..n]),
            dup_tsns: DupTsns::List(&dups),
        });
        if b.push(&sack) {
            self.advertised_rwnd = a_rwnd;
            self.received_since_sack = 0;
            self.stats.sacks_sent += 1;
            self.sack_now = false;
            self.sack_at = None;
            self.packets_unacked = 0;
        } else {
            self.dups = dups;
        }
    }

    /// Adds retransmissions, then new chunks, as the window allows. Returns whether
    /// any DATA went in.
    fn push_data(&mut self, now: Instant, b: &mut PacketBuilder<'_>) -> bool {
        let mut any = false;
        let cwnd = self.cc.cwnd();
        // Fast retransmissions first: one packet's worth, ignoring cwnd (§7.2.4 3).
        let fast = std::mem::take(&mut self.fast_rtx_now);
        for i in 0..self.outstanding.len() {
            let s = &self.outstanding[i];
            if s.mark == Mark::None {
                continue;
            }
            if !(fast && s.mark == Mark::Fast) && self.flight >= cwnd {
                break;
            }
            let tsn = self.cum_acked.wrapping_add(1 + i as u32);
            if !b.push(&data_chunk(tsn, &s.frag)) {
                break;
            }
            let s = &mut self.outstanding[i];
            s.mark = Mark::None;
            s.retransmitted = true;
            s.sent_at = now;
            s.in_flight = true;
            self.flight += s.bytes;
            self.stats.retransmits += 1;
            any = true;
            //= §7.2.4 4: restart T3 only if the lowest outstanding TSN is resent.
            if i == 0 || self.t3_at.is_none() {
                self.t3_at = Some(now.add_nanos(self.rtt.rto_nanos()));
            }
        }
        if any && fast {
            return true;
        }
        // New data: rule B of §6.1 (no new data with cwnd or more outstanding),
        // rule A (peer window) and rule D, Max.Burst, applied as RFC 9260 suggests:
        // as if cwnd were at most the flight size at the start of this burst plus
        // Max.Burst MTUs.
        let base = *self.burst_base.get_or_insert(self.flight);
        let burst_cap = base + u64::from(self.cfg.max_burst) * u64::from(self.cfg.mtu);
        while let Some(f) = self.pending.front() {
            let zero_window_probe = self.flight == 0;
            if self.flight >= cwnd.min(burst_cap) || (self.peer_rwnd == 0 && !zero_window_probe) {
                break;
            }
            let tsn = self.next_tsn;
            if !b.push(&data_chunk(tsn, f)) {
                break;
            }
            let frag = self.pending.pop_front().expect("front exists");
            self.pending_bytes -= frag.data.len() as u64;
            let bytes = self.cfg.cc.chunk_bytes(frag.data.len());
            if self.send_round <= crate::ROUND_LOG_ROUNDS {
                let round = self.send_round as usize;
                if self.round_bytes.len() < round {
                    self.round_bytes.resize(round, 0);
                }
                self.round_bytes[round - 1] += frag.data.len() as u64;
            }
            self.outstanding.push_back(Sent {
                frag,
                bytes,
                sent_at: now,
                retransmitted: false,
                gap_acked: false,
                in_flight: true,
                misses: 0,
                mark: Mark::None,
                fast_retransmitted: false,
                round: self.send_round,
            });
            self.flight += bytes;
            self.peer_rwnd = self.peer_rwnd.saturating_sub(bytes);
            self.next_tsn = tsn.wrapping_add(1);
            self.stats.data_chunks_sent += 1;
            self.t3_at
                .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
            any = true;
        }
        any
    }

    fn emit_init_ack(&mut self, now: Instant, buf: &mut [u8], mut r: InitAckReply) -> usize {
        r.cookie[24..32].copy_from_slice(&now.as_nanos().to_be_bytes());
        self.seal_cookie(&mut r.cookie);
        let header = SctpRepr {
            src_port: r.src_port,
            dst_port: r.dst_port,
            verification_tag: r.peer_tag,
        };
        let mtu = usize::from(self.cfg.mtu).min(buf.len());
        let (ip_buf, sctp_buf) = buf[..mtu].split_at_mut(ipv4::HEADER_LEN);
        let mut b = PacketBuilder::new(sctp_buf, header);
        b.push(&ChunkRepr::InitAck(InitRepr {
            initiate_tag: self.local_tag,
            a_rwnd: self.a_rwnd(),
            outbound_streams: self.cfg.streams,
            max_inbound_streams: self.cfg.streams,
            initial_tsn: self.next_tsn,
            cookie: Some(&r.cookie),
        }));
        self.finish(ip_buf, b)
    }

    fn finish(&mut self, ip_buf: &mut [u8], b: PacketBuilder<'_>) -> usize {
        let n = b.finish(self.cfg.checksum == Checksum::Both);
        Ipv4Repr {
            src_addr: self.local.0,
            dst_addr: self.remote.0,
            protocol: IpProtocol::Sctp,
            payload_len: n,
            ttl: 64,
            dscp: 0,
        }
        .emit(ip_buf, self.cfg.checksum);
        self.stats.packets_sent += 1;
        ipv4::HEADER_LEN + n
    }
}

fn data_chunk(tsn: u32, f: &Fragment) -> ChunkRepr<'_> {
    ChunkRepr::Data {
        tsn,
        stream_id: f.stream,
        ssn: f.ssn,
        ppid: f.ppid,
        flags: f.flags,
        data: &f.data,
    }
}

/// The first complete B..E run of consecutive keys in `held`, if any.
fn complete_run(held: &BTreeMap<u64, Fragment>) -> Option<(u64, u64)> {
    let mut start = None;
    let mut prev = 0;
    for (&d, g) in held {
        match start {
            Some(s) if d == prev + 1 => {
                if g.flags.ending {
                    return Some((s, d));
                }
            }
            _ => {
                start = None;
                if g.flags.beginning {
                    if g.flags.ending {
                        return Some((d, d));
                    }
                    start = Some(d);
                }
            }
        }
        prev = d;
    }
    None
}

fn take_run(held: &mut BTreeMap<u64, Fragment>, (a, b): (u64, u64)) -> Message {
    let mut data = vec![];
    let mut stream = 0;
    let mut ppid = 0;
    for d in a..=b {
        let g = held.remove(&d).expect("run is held");
        stream = g.stream;
        ppid = g.ppid;
        data.extend_from_slice(&g.data);
    }
    Message {
        stream,
        ppid,
        unordered: true,
        data,
    }
}
