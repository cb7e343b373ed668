//! A sans-IO TCP engine for simulation: RFC 9293 state machine (without urgent data
//! and simultaneous open), NewReno loss recovery (RFC 6582) and, with SACK (RFC
//! 2018), RFC 6675's pipe-based recovery; RFC 6298 retransmission timer; delayed
//! ACKs (RFC 1122/5681); window scaling (RFC 7323); initial windows of RFC 3390 or
//! RFC 6928; send and receive buffer limits.
//!
//! It tracks byte *counts*, not content: the application writes a number of bytes
//! (or an endless backlog) and the peer learns how many arrived in order. Datagrams
//! are IPv4 packets whose payload may be elided (see `longhaul-wire`). Real
//! transfers use the kernel's TCP, so this engine never touches a socket.
//!
//! Where it reads the RFCs as implementations do (each explained where it is made):
//! ssthresh is halved from FlightSize capped at cwnd ([`TcpConnection::flight_size`]);
//! an ACK that covers any retransmitted segment gives no RTT sample (Karn, as Linux
//! applies it to cumulative ACKs); a timeout inside a loss episode already answered
//! keeps ssthresh (RFC 5681 §3.1, and Linux for a timeout during a fast recovery).
//!
//! It is driven through [`Engine`], like every engine here. By concern: `input`
//! takes segments and timeouts in (the state machine, ACK processing, loss recovery,
//! the receive side), `output` writes segments out (what may be sent now, headers,
//! SACK blocks, the per-round log), `fast_path` is header prediction, and
//! `scoreboard` and `assembler` hold the sender's and the receiver's sequence
//! space.

mod assembler;
mod fast_path;
mod input;
mod output;
mod scoreboard;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use longhaul_wire::tcp::{MAX_HEADER_LEN, MAX_SACK_BLOCKS};
use longhaul_wire::{ipv4, Checksum, Ipv4Address, TcpSeqNumber};

use crate::cc::{AnyController, CcAlgorithm, CongestionControl};
use crate::engine::{Engine, Layer, Transmit};
use crate::rtt::{RtoConfig, RttEstimator};
use crate::time::{Duration, Instant};
use assembler::Assembler;
use scoreboard::Scoreboard;

/// Largest header [`TcpConnection::poll_transmit`] writes: IPv4 and TCP with options.
pub const MAX_TRANSMIT_HEADER: usize = ipv4::HEADER_LEN + MAX_HEADER_LEN;

/// The initial congestion window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialWindow {
    /// RFC 3390: `min(4*SMSS, max(2*SMSS, 4380))`.
    Rfc3390,
    /// RFC 6928: `min(10*MSS, max(2*MSS, 14600))`.
    Iw10,
    /// A fixed number of segments.
    Segments(u32),
}

impl InitialWindow {
    /// The window in bytes for a sender with maximum segment size `smss`.
    pub fn bytes(self, smss: u64) -> u64 {
        match self {
            InitialWindow::Rfc3390 => (4 * smss).min((2 * smss).max(4380)),
            InitialWindow::Iw10 => (10 * smss).min((2 * smss).max(14600)),
            InitialWindow::Segments(n) => u64::from(n) * smss,
        }
    }
}

/// When the receiver acknowledges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckPolicy {
    /// Acknowledge at once after this many in-order full segments (1: every segment,
    /// 2: RFC 1122's delayed ACK).
    pub every: u32,
    /// Otherwise acknowledge this long after the first unacknowledged segment.
    pub delay: Duration,
    /// The first this-many data segments of the connection are acknowledged at
    /// once whatever `every` says (Linux's quick-ACK mode at connection start).
    pub quick: u32,
}

impl AckPolicy {
    /// One ACK per segment.
    pub const EVERY_SEGMENT: AckPolicy = AckPolicy {
        every: 1,
        delay: Duration::ZERO,
        quick: 0,
    };
    /// RFC 1122 / RFC 5681: every second segment, within 200 ms (RFC 1122 allows 500).
    pub const DELAYED: AckPolicy = AckPolicy {
        every: 2,
        delay: Duration::from_millis(200),
        quick: 0,
    };
}

/// A connection's parameters.
///
/// `repr(C)`, with the fields the per-segment paths read first, so that they
/// share a line with the connection's hot fields (see [`TcpConnection`]).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
pub struct TcpConfig {
    /// Checksums on emit and parse (the simulator turns them off on its hot path).
    pub checksum: Checksum,
    /// The timestamps option (RFC 7323) and where RTT samples come from.
    pub timestamps: Timestamps,
    /// Whether to offer and use SACK.
    pub sack: bool,
    /// Whether to offer window scaling (RFC 7323); without it the window is 64 KiB.
    pub window_scaling: bool,
    /// DSCP of outgoing packets.
    pub dscp: u8,
    /// Header prediction: handle the two common segments (in-order data, a plain
    /// cumulative ACK) without the general parser. Results are identical either way
    /// (a test holds them to that); the switch exists so that they can be compared.
    pub header_prediction: bool,
    /// Linux's Nagle with Minshall's change, for an application that writes a burst
    /// at once: the first write leaves at once, its tail as a short segment (no short
    /// segment is yet unacknowledged), and later bytes coalesce into full segments
    /// behind it. Off: every short segment waits for [`TcpConnection::close`].
    pub push_first_write: bool,
    /// Linux's send-buffer autotuning: the buffer the application writes into
    /// grows with the window, to twice the congestion window (`tcp_sndbuf_expand`
    /// sizes it so), and `send_buffer_bytes` is only its cap (`tcp_wmem`'s maximum).
    /// So about a window of data waits unsent, however large the cap. Off: the
    /// buffer is `send_buffer_bytes` throughout (an application that set
    /// `SO_SNDBUF`).
    pub send_buffer_autotune: bool,
    /// Largest payload per segment (SMSS), bytes; 1448 on a 1500-byte MTU with
    /// timestamps, 1460 without.
    pub mss: u16,
    /// Duplicate ACKs (or SACKed segments above a hole) that signal loss.
    pub dup_thresh: u32,
    /// Receiver acknowledgement policy.
    pub ack: AckPolicy,
    /// Receive buffer, bytes: the largest window this side advertises.
    pub recv_buffer_bytes: u64,
    /// Send buffer, bytes: the most unacknowledged data this side keeps.
    pub send_buffer_bytes: u64,
    /// Initial congestion window.
    pub initial_window: InitialWindow,
    /// RTO bounds.
    pub rto: RtoConfig,
    /// Congestion control.
    pub cc: CcAlgorithm,
}

impl Default for TcpConfig {
    /// Buffers of 64 MiB, so the window never limits a 1 Gb/s x 200 ms path (25 MB);
    /// SACK on; ACK every segment; RFC 6298 RTO (1 s minimum); RFC 3390 window.
    fn default() -> Self {
        TcpConfig {
            mss: 1448,
            initial_window: InitialWindow::Rfc3390,
            cc: CcAlgorithm::NewReno(Default::default()),
            rto: RtoConfig::RFC6298,
            sack: true,
            ack: AckPolicy::EVERY_SEGMENT,
            dup_thresh: 3,
            recv_buffer_bytes: 64 << 20,
            send_buffer_bytes: 64 << 20,
            send_buffer_autotune: false,
            window_scaling: true,
            dscp: 0,
            checksum: Checksum::Both,
            header_prediction: true,
            push_first_write: false,
            timestamps: Timestamps::Linux,
        }
    }
}

impl TcpConfig {
    /// The study's Linux 2.6.15 sender (SCTP slow-start study): MSS 1448
    /// (timestamps on), an initial window of 3 segments (`tcp_init_cwnd` rounds RFC
    /// 3390's 4380 bytes down to whole 1448-byte segments), slow start adding one
    /// segment per ACK (`tcp_abc` off), a receiver that quick-ACKs its first 2
    /// segments (`tcp_incr_quickack`: the initial 5840-byte receive window over two
    /// MSS) and then ACKs every second segment or after 40 ms (`TCP_ATO_MIN`, where
    /// the ACK timer starts), a 200 ms minimum RTO, and Minshall's Nagle
    /// ([`push_first_write`](Self::push_first_write)). Congestion avoidance was BIC on
    /// that kernel; the study never leaves slow start, so NewReno stands in.
    pub fn linux_2_6_15() -> Self {
        TcpConfig {
            mss: 1448,
            initial_window: InitialWindow::Segments(3),
            cc: CcAlgorithm::NewReno(crate::cc::NewRenoConfig {
                slow_start: crate::cc::SlowStart::PerAck,
                ..Default::default()
            }),
            rto: RtoConfig::LINUX,
            ack: AckPolicy {
                every: 2,
                delay: Duration::from_millis(40),
                quick: 2,
            },
            push_first_write: true,
            ..TcpConfig::default()
        }
    }
}

/// The timestamps option (RFC 7323): whether it is offered, and what the RTT
/// estimator is fed. Both ends must offer it for segments to carry it (12 bytes
/// each: a 1448-byte payload makes a 1500-byte packet, as Linux's and ns-3's do).
/// TSval ticks in milliseconds, as Linux's and ns-3's do. PAWS (RFC 7323 §5) is
/// not implemented: the simulator neither wraps sequence numbers within a
/// connection's life nor duplicates old segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamps {
    /// Not offered.
    Off,
    /// As Linux (`tcp_ack_update_rtt`): offered and echoed; RTT samples come from the
    /// send time of the segment an ACK covers where Karn's rule allows (microsecond
    /// precision), and from the echo where it does not (an ACK covering retransmitted
    /// data).
    Linux,
    /// RFC 7323 §4.1 (RTTM), as ns-3 does: every ACK of new data is timed from its
    /// echo, retransmitted data included, in whole milliseconds.
    Rfc7323,
}

/// Connection states, with RFC 9293's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// CLOSED.
    Closed,
    /// LISTEN.
    Listen,
    /// SYN-SENT.
    SynSent,
    /// SYN-RECEIVED.
    SynReceived,
    /// ESTABLISHED (also covers the half-closed states; FIN progress is tracked apart).
    Established,
}

impl core::fmt::Display for State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            State::Closed => "CLOSED",
            State::Listen => "LISTEN",
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
        })
    }
}

/// What the engine tells its application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// The peer's FIN arrived and every byte before it was received in order.
    PeerFinished {
        /// Bytes received in order.
        bytes: u64,
    },
    /// Everything this side wrote, and its FIN, was acknowledged.
    SendComplete,
    /// The peer reset the connection.
    Reset,
}

/// Per-connection counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Segments sent, all kinds.
    pub segments_sent: u64,
    /// Segments carrying new data.
    pub data_segments_sent: u64,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Recovery episodes entered by fast retransmit.
    pub fast_recoveries: u64,
    /// Retransmission timeouts (handshake included).
    pub timeouts: u64,
    /// Duplicate ACKs received.
    pub dup_acks: u64,
    /// Pure ACKs sent.
    pub acks_sent: u64,
    /// Datagrams dropped as malformed or not for this connection.
    pub bad_datagrams: u64,
    /// Data segments received out of order.
    pub out_of_order: u64,
    /// Data segments received that were wholly duplicates.
    pub duplicates: u64,
}

/// Errors of [`TcpConnection::connect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectError {
    /// The connection is not closed.
    InvalidState,
}

/// Errors of [`TcpConnection::send`] and [`TcpConnection::close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The application already closed its side.
    Closed,
}

/// One TCP connection.
///
/// Laid out for the cache (`repr(C)`, fields in the order below, each connection
/// on its own lines): a simulation of many flows comes back to each connection only
/// after the others' segments, so every line a per-segment path reads is likely a
/// miss. Those paths (header prediction, the cumulative ACK, sending a segment or an
/// ACK) read the first three lines, the template and the configuration's leading
/// fields before they reach the scoreboard, the RTT estimator and the controller.
/// With Rust's default layout the fields header prediction reads were spread over
/// about ten of the connection's 22 lines. On 1000 flows sharing a 1 ms path
/// (`longhaul sim bench --flows 1000 --rtt-ms 1 --duration-s 10 --repeat 1` under
/// `valgrind --tool=cachegrind --cache-sim=yes --D1=49152,12,64`) this layout took
/// the run's L1 data misses from 32.5 M to 30.9 M.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct TcpConnection {
    // Line 0: flags, addresses and 32-bit sequence state.
    state: State,
    snd_wscale: u8,
    rcv_wscale: u8,
    sack_ok: bool,
    ws_ok: bool,
    /// Timestamps negotiated (both SYNs carried the option).
    ts_ok: bool,
    closed: bool,
    fin_sent: bool,
    fin_acked: bool,
    fin_received: bool,
    fast_rtx_pending: bool,
    /// Whether the controller models the path from delivery rates and paces (BBR):
    /// only then does the engine sample rates and pace, so the others pay nothing.
    model_based: bool,
    /// Whether data waits for `next_send_at` (then a timer is due at it).
    pacing_wait: bool,
    ack_now: bool,
    syn_pending: bool,
    syn_retransmitted: bool,
    local: (Ipv4Address, u16),
    remote: (Ipv4Address, u16),
    iss: TcpSeqNumber,
    irs: TcpSeqNumber,
    /// RFC 7323's TS.Recent: the TSval to echo.
    ts_recent: u32,
    /// RFC 7323's Last.ACK.sent.
    last_ack_sent: TcpSeqNumber,
    /// Added to the millisecond clock in TSval (Linux offsets each connection's).
    ts_offset: u32,
    unacked_segments: u32,
    quick_acks_left: u32,
    dup_acks: u32,
    /// Slow-start rounds: the round new data is sent in now, the (end offset, round)
    /// of the data sent so far but not acknowledged (`round_marks`), and bytes sent
    /// per round (`round_bytes`).
    send_round: u32,

    // Line 1: stream offsets. Sender offsets count stream bytes from 0 (byte o has
    // sequence iss + 1 + o); receiver offsets too (byte o has sequence irs + 1 + o).
    rcv_nxt: u64,
    peer_window: u64,
    smss: u64,
    written: u64,
    recover: u64,
    reno_sacked: u64,
    /// A pacing controller's earliest departure time for the next data segment.
    next_send_at: Instant,
    round_front_start: u64,

    // Line 2: the states and deadlines every segment checks.
    recovery: Option<u64>,
    rto_at: Option<Instant>,
    delack_at: Option<Instant>,
    fin_at: Option<u64>,

    /// IPv4 and TCP headers of an option-less ACK-bearing segment of this
    /// connection, built once established: most segments are this template with
    /// the sequence, acknowledgement, window and length patched in.
    template: Option<[u8; TEMPLATE_LEN]>,
    cfg: TcpConfig,
    board: Scoreboard,
    rtt: RttEstimator,
    cc: AnyController,
    asm: Assembler,
    stats: TcpStats,
    round_marks: VecDeque<(u64, u32)>,
    round_bytes: Vec<u64>,
    events: VecDeque<Event>,

    // Rarely read.
    /// `SND.UNA` at the last retransmission timeout: a timeout that finds it
    /// unchanged resends a segment the timer already resent, and holds ssthresh.
    rto_una: Option<u64>,
    syn_sent_at: Option<Instant>,
    /// Length of the application's first write, with `push_first_write`.
    first_write: Option<u64>,
}

// The three hot lines stay where the layout above puts them.
const _: () = assert!(std::mem::offset_of!(TcpConnection, rcv_nxt) == 64);
const _: () = assert!(std::mem::offset_of!(TcpConnection, recovery) == 128);
const _: () = assert!(std::mem::offset_of!(TcpConnection, template) == 192);

const TEMPLATE_LEN: usize = ipv4::HEADER_LEN + longhaul_wire::tcp::HEADER_LEN;

impl TcpConnection {
    /// A closed connection between `local` and `remote`; `iss` is the initial send
    /// sequence number (the caller draws it from its seeded RNG).
    pub fn new(
        cfg: TcpConfig,
        local: (Ipv4Address, u16),
        remote: (Ipv4Address, u16),
        iss: u32,
    ) -> Self {
        let smss = u64::from(cfg.mss);
        let rcv_wscale = if cfg.window_scaling {
            (0..14u8)
                .find(|s| cfg.recv_buffer_bytes >> s <= 65535)
                .unwrap_or(14)
        } else {
            0
        };
        TcpConnection {
            cfg,
            local,
            remote,
            state: State::Closed,
            iss: TcpSeqNumber(iss),
            irs: TcpSeqNumber(0),
            syn_pending: false,
            syn_sent_at: None,
            syn_retransmitted: false,
            sack_ok: false,
            ws_ok: false,
            snd_wscale: 0,
            rcv_wscale,
            smss,
            board: Scoreboard::new(smss),
            written: 0,
            closed: false,
            fin_sent: false,
            fin_acked: false,
            peer_window: 65535,
            recovery: None,
            recover: 0,
            rto_una: None,
            fast_rtx_pending: false,
            dup_acks: 0,
            reno_sacked: 0,
            rto_at: None,
            model_based: false,
            next_send_at: Instant::ZERO,
            pacing_wait: false,
            rtt: RttEstimator::new(cfg.rto),
            // Replaced when the connection is established, with the time.
            cc: AnyController::new(cfg.cc, smss, cfg.initial_window.bytes(smss), Instant::ZERO),
            rcv_nxt: 0,
            asm: Assembler::default(),
            fin_at: None,
            fin_received: false,
            unacked_segments: 0,
            quick_acks_left: cfg.ack.quick,
            ack_now: false,
            delack_at: None,
            events: VecDeque::new(),
            stats: TcpStats::default(),
            send_round: 1,
            first_write: None,
            round_marks: VecDeque::new(),
            round_front_start: 0,
            round_bytes: vec![],
            template: None,
            ts_ok: false,
            ts_recent: 0,
            last_ack_sent: TcpSeqNumber(0),
            ts_offset: iss.rotate_left(11),
        }
    }

    /// TSval at `now`: milliseconds since the simulation began, plus the offset.
    fn tsval(&self, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }

    /// Option bytes the configuration puts in each segment (and Linux leaves out of
    /// the MSS it advertises).
    fn timestamp_bytes_configured(&self) -> u16 {
        if self.cfg.timestamps == Timestamps::Off {
            0
        } else {
            longhaul_wire::tcp::TIMESTAMP_OPTION_LEN as u16
        }
    }

    /// Whether the connection's segments carry timestamps.
    pub fn timestamps_negotiated(&self) -> bool {
        self.ts_ok
    }

    // ---- application side -------------------------------------------------------

    /// Actively opens the connection (sends a SYN on the next `poll_transmit`).
    pub fn connect(&mut self, _now: Instant) -> Result<(), ConnectError> {
        if self.state != State::Closed {
            return Err(ConnectError::InvalidState);
        }
        self.state = State::SynSent;
        self.syn_pending = true;
        Ok(())
    }

    /// Passively opens the connection: accept the first SYN from any address.
    pub fn listen(&mut self) -> Result<(), ConnectError> {
        if self.state != State::Closed {
            return Err(ConnectError::InvalidState);
        }
        self.state = State::Listen;
        Ok(())
    }

    /// Queues `bytes` more bytes of (virtual) data. `u64::MAX` means an endless
    /// backlog. Data goes out in full segments; a short last segment waits for
    /// [`close`](Self::close), as Nagle's algorithm would hold it.
    pub fn send(&mut self, bytes: u64) -> Result<(), SendError> {
        if self.closed {
            return Err(SendError::Closed);
        }
        if self.cfg.push_first_write && self.written == 0 && bytes > 0 && bytes != u64::MAX {
            // The scoreboard is rebuilt with the negotiated MSS at establishment;
            // it learns the first write then (or now, if already established).
            self.first_write = Some(bytes);
            self.board.set_first_segment(bytes);
        }
        self.written = self.written.saturating_add(bytes);
        Ok(())
    }

    /// Closes the sending side: a FIN follows the last byte written.
    pub fn close(&mut self) -> Result<(), SendError> {
        if self.closed {
            return Err(SendError::Closed);
        }
        self.closed = true;
        self.board.set_end(self.written);
        Ok(())
    }

    // ---- queries ----------------------------------------------------------------

    /// The connection state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Counters.
    pub fn stats(&self) -> &TcpStats {
        &self.stats
    }
    /// Bytes received in order (what the application has read).
    pub fn delivered_bytes(&self) -> u64 {
        self.rcv_nxt
    }
    /// Bytes of this side's stream cumulatively acknowledged by the peer.
    pub fn acked_bytes(&self) -> u64 {
        self.board.una()
    }
    /// Room in the send buffer: what a blocking `write` would take now without
    /// waiting (the buffer holds written bytes until they are acknowledged).
    pub fn send_space(&self) -> u64 {
        let held = self.written.saturating_sub(self.board.una());
        let limit = if self.cfg.send_buffer_autotune {
            // Linux starts from tcp_wmem's default, 16 KiB.
            (2 * self.cc.window())
                .max(16 << 10)
                .min(self.cfg.send_buffer_bytes)
        } else {
            self.cfg.send_buffer_bytes
        };
        limit.saturating_sub(held)
    }
    /// The congestion window, bytes.
    pub fn cwnd(&self) -> u64 {
        self.cc.window()
    }
    /// The slow-start threshold, bytes (`u64::MAX` until the first loss).
    pub fn ssthresh(&self) -> u64 {
        self.cc.ssthresh()
    }
    /// The RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }
    /// Bytes believed to be in the network (RFC 6675 pipe).
    pub fn in_flight(&self) -> u64 {
        self.board.pipe().saturating_sub(self.reno_sacked)
    }
    /// RFC 5681's FlightSize, the basis of ssthresh on a loss: bytes sent and not
    /// cumulatively acknowledged (`SND.MAX - SND.UNA`), but no more than cwnd.
    ///
    /// The cap matters without SACK. A NewReno recovery repairs one hole per RTT,
    /// and each duplicate ACK meanwhile clocks out a new segment, so after a long
    /// recovery, or a retransmission lost in one, thousands of segments the
    /// receiver already holds above a hole count as outstanding; halving that
    /// would set ssthresh far above any window the path carried (measured: 13 MB
    /// on a path whose loss rate allows 25 kB). BSD and Linux halve cwnd instead;
    /// the minimum keeps RFC 5681's reason for FlightSize, a window that grew
    /// beyond what the sender had to send.
    pub fn flight_size(&self) -> u64 {
        self.board.outstanding().min(self.cc.window())
    }
    /// Whether a loss-recovery episode is under way.
    pub fn in_recovery(&self) -> bool {
        self.recovery.is_some()
    }
    /// Bytes of new data sent in each slow-start round: entry 0 is the initial
    /// window, entry k the data released by acknowledgements of round k's data.
    /// Only the first [`ROUND_LOG_ROUNDS`](crate::ROUND_LOG_ROUNDS) rounds are
    /// booked; data sent after them is not.
    pub fn round_bytes(&self) -> &[u64] {
        &self.round_bytes
    }
    /// Segments held on the sender's scoreboard (memory follows the window).
    pub fn scoreboard_len(&self) -> usize {
        self.board.len()
    }
}

impl Engine for TcpConnection {
    type Event = Event;
    const LAYER: Layer = Layer::Ip;

    /// Processes an IPv4 datagram whose payload may be elided (its total length
    /// field says how long it was; `wire_len` is the same number). Anything that is
    /// not a valid TCP segment for this connection is counted and dropped.
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8], _wire_len: usize) {
        self.input(now, datagram);
    }

    /// Processes expired timers; calling it early is a no-op.
    fn handle_timeout(&mut self, now: Instant) {
        self.expire(now);
    }

    /// Writes the next datagram's headers into `buf` (at least
    /// [`MAX_TRANSMIT_HEADER`] bytes); its payload is elided.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.transmit(now, buf)
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let timers = match (self.rto_at, self.delack_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if !self.pacing_wait {
            return timers;
        }
        Some(timers.map_or(self.next_send_at, |t| t.min(self.next_send_at)))
    }
}
