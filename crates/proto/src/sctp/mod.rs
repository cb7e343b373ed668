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
//! It is driven through [`Engine`]; datagrams in and out are whole IPv4 packets. By
//! concern: `input` takes packets in (the handshake with its cookie, DATA and SACK,
//! reassembly and ordered delivery, shutdown), `timers` runs T1, T2, T3 and the
//! delayed SACK, `output` bundles chunks into packets (control, SACK, then DATA as
//! the window allows).

mod input;
mod output;
#[cfg(test)]
mod tests;
mod timers;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use longhaul_wire::sctp::{self, ChunkRepr, DataFlags};
use longhaul_wire::{ipv4, Checksum, Ipv4Address};

use crate::cc::{SctpCc, SctpCcProfile};
use crate::engine::{Engine, Layer, Transmit};
use crate::rtt::{RtoConfig, RtoFormula, RttEstimator};
use crate::time::{Duration, Instant};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;

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
            formula: RtoFormula::Rfc6298,
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
            formula: RtoFormula::Rfc6298,
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
        // SplitMix64 spreads the seed into independent-looking words.
        let mut s = SplitMix64::seed_from_u64(seed);
        let local_tag = (s.next_u64() as u32).max(1);
        let next_tsn = s.next_u64() as u32;
        let mut cookie_key = [0u8; 32];
        for c in cookie_key.chunks_mut(8) {
            c.copy_from_slice(&s.next_u64().to_le_bytes());
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
}

impl Engine for SctpAssociation {
    type Event = Event;
    const LAYER: Layer = Layer::Ip;

    /// Processes an IPv4 datagram carrying SCTP. Anything malformed, with a bad
    /// checksum or a wrong verification tag is counted and dropped; so is a
    /// datagram whose end was elided (`wire_len` beyond its bytes), since SCTP
    /// carries real message bytes and checksums them.
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8], wire_len: usize) {
        if wire_len != datagram.len() {
            self.stats.bad_packets += 1;
            return;
        }
        self.input(now, datagram);
    }

    /// Runs whatever timers are due at `now`.
    fn handle_timeout(&mut self, now: Instant) {
        self.expire(now);
    }

    /// Writes the next whole IPv4 datagram into `buf` (at least the path MTU long).
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.transmit(now, buf).map(|n| Transmit {
            written: n,
            wire_len: n,
            more: true,
        })
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.t1_at, self.t2_at, self.t3_at, self.sack_at]
            .into_iter()
            .flatten()
            .min()
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
