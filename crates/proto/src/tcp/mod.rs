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
//! Call order, as for every engine: after [`TcpConnection::handle_datagram`],
//! [`TcpConnection::handle_timeout`] or an application command, drain
//! [`TcpConnection::poll_transmit`], then [`TcpConnection::poll_event`], then re-arm
//! a timer from [`TcpConnection::poll_timeout`].

mod assembler;
mod fast_path;
mod scoreboard;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use longhaul_wire::tcp::{self, MAX_HEADER_LEN, MAX_SACK_BLOCKS};
use longhaul_wire::{
    ipv4, Checksum, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr,
    TcpSeqNumber,
};

use crate::cc::{AckSample, AnyController, CcAlgorithm, CongestionControl};
use crate::rtt::{RtoConfig, RttEstimator};
use crate::seq::unwrap_tcp;
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
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpConfig {
    /// Largest payload per segment (SMSS), bytes; 1448 on a 1500-byte MTU with
    /// timestamps, 1460 without.
    pub mss: u16,
    /// Initial congestion window.
    pub initial_window: InitialWindow,
    /// Congestion control.
    pub cc: CcAlgorithm,
    /// RTO bounds.
    pub rto: RtoConfig,
    /// Whether to offer and use SACK.
    pub sack: bool,
    /// Receiver acknowledgement policy.
    pub ack: AckPolicy,
    /// Duplicate ACKs (or SACKed segments above a hole) that signal loss.
    pub dup_thresh: u32,
    /// Receive buffer, bytes: the largest window this side advertises.
    pub recv_buffer_bytes: u64,
    /// Send buffer, bytes: the most unacknowledged data this side keeps.
    pub send_buffer_bytes: u64,
    /// Linux's send-buffer autotuning: the buffer the application writes into
    /// grows with the window, to twice the congestion window (`tcp_sndbuf_expand`
    /// sizes it so), and `send_buffer_bytes` is only its cap (`tcp_wmem`'s maximum).
    /// So about a window of data waits unsent, however large the cap. Off: the
    /// buffer is `send_buffer_bytes` throughout (an application that set
    /// `SO_SNDBUF`).
    pub send_buffer_autotune: bool,
    /// Whether to offer window scaling (RFC 7323); without it the window is 64 KiB.
    pub window_scaling: bool,
    /// DSCP of outgoing packets.
    pub dscp: u8,
    /// Checksums on emit and parse (the simulator turns them off on its hot path).
    pub checksum: Checksum,
    /// Linux's Nagle with Minshall's change, for an application that writes a burst
    /// at once: the first write leaves at once, its tail as a short segment (no short
    /// segment is yet unacknowledged), and later bytes coalesce into full segments
    /// behind it. Off: every short segment waits for [`TcpConnection::close`].
    pub push_first_write: bool,
    /// Header prediction: handle the two common segments (in-order data, a plain
    /// cumulative ACK) without the general parser. Results are identical either way
    /// (a test holds them to that); the switch exists so that they can be compared.
    pub header_prediction: bool,
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

/// What [`TcpConnection::poll_transmit`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Header bytes written to the buffer (IPv4 and TCP).
    pub header_len: usize,
    /// Payload bytes that follow the header on the wire (elided from the buffer).
    pub payload_len: usize,
    /// Whether another poll now might send more. When false, a
    /// [`poll_transmit`](TcpConnection::poll_transmit) at the same time with nothing
    /// handled in between returns `None`, so a driver may stop asking (a receiver's
    /// ACK, or new data that filled the window: without the hint each cost a second
    /// poll that found nothing).
    pub more: bool,
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
#[derive(Debug, Clone)]
pub struct TcpConnection {
    cfg: TcpConfig,
    local: (Ipv4Address, u16),
    remote: (Ipv4Address, u16),
    state: State,

    iss: TcpSeqNumber,
    irs: TcpSeqNumber,
    syn_pending: bool,
    syn_sent_at: Option<Instant>,
    syn_retransmitted: bool,
    sack_ok: bool,
    ws_ok: bool,
    snd_wscale: u8,
    rcv_wscale: u8,
    smss: u64,

    // Sender. Offsets count stream bytes from 0; byte o has sequence iss + 1 + o.
    board: Scoreboard,
    written: u64,
    closed: bool,
    fin_sent: bool,
    fin_acked: bool,
    peer_window: u64,
    recovery: Option<u64>,
    recover: u64,
    /// `SND.UNA` at the last retransmission timeout: a timeout that finds it
    /// unchanged resends a segment the timer already resent, and holds ssthresh.
    rto_una: Option<u64>,
    fast_rtx_pending: bool,
    dup_acks: u32,
    reno_sacked: u64,
    rto_at: Option<Instant>,
    rtt: RttEstimator,
    cc: AnyController,

    // Receiver. Byte o has sequence irs + 1 + o.
    rcv_nxt: u64,
    asm: Assembler,
    fin_at: Option<u64>,
    fin_received: bool,
    unacked_segments: u32,
    quick_acks_left: u32,
    ack_now: bool,
    delack_at: Option<Instant>,

    events: VecDeque<Event>,
    stats: TcpStats,
    /// Slow-start rounds: the round new data is sent in now, the (end offset, round)
    /// of the data sent so far but not acknowledged, and bytes sent per round.
    send_round: u32,
    /// Length of the application's first write, with `push_first_write`.
    first_write: Option<u64>,
    round_marks: VecDeque<(u64, u32)>,
    round_front_start: u64,
    round_bytes: Vec<u64>,
    /// IPv4 and TCP headers of an option-less ACK-bearing segment of this
    /// connection, built once established: most segments are this template with
    /// the sequence, acknowledgement, window and length patched in.
    template: Option<[u8; TEMPLATE_LEN]>,
}

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
            rtt: RttEstimator::new(cfg.rto),
            cc: AnyController::new(cfg.cc, smss, cfg.initial_window.bytes(smss)),
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
        }
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

    // ---- network side -----------------------------------------------------------

    /// Processes an IPv4 datagram (payload may be elided). Anything that is not a
    /// valid TCP segment for this connection is counted and dropped.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        if self.cfg.header_prediction && self.try_fast_path(now, datagram) {
            return;
        }
        let Some(repr) = self.parse(datagram) else {
            self.stats.bad_datagrams += 1;
            return;
        };
        self.process(now, &repr);
    }

    fn parse(&mut self, datagram: &[u8]) -> Option<TcpRepr> {
        let ip = Ipv4Packet::new_checked(datagram).ok()?;
        let ip_repr = Ipv4Repr::parse(&ip, self.cfg.checksum).ok()?;
        if ip_repr.protocol != IpProtocol::Tcp || ip_repr.dst_addr != self.local.0 {
            return None;
        }
        let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
        let repr = TcpRepr::parse(
            &tcp,
            ip_repr.src_addr,
            ip_repr.dst_addr,
            ip_repr.payload_len,
            self.cfg.checksum,
        )
        .ok()?;
        if repr.dst_port != self.local.1 {
            return None;
        }
        if self.state == State::Listen {
            if repr.control != TcpControl::Syn {
                return None;
            }
            self.remote = (ip_repr.src_addr, repr.src_port);
        } else if (ip_repr.src_addr, repr.src_port) != self.remote {
            return None;
        }
        Some(repr)
    }

    fn process(&mut self, now: Instant, repr: &TcpRepr) {
        if repr.control == TcpControl::Rst {
            self.state = State::Closed;
            self.rto_at = None;
            self.delack_at = None;
            self.events.push_back(Event::Reset);
            return;
        }
        match self.state {
            State::Closed => {
                self.stats.bad_datagrams += 1;
            }
            State::Listen => {
                self.irs = repr.seq_number;
                self.take_syn_options(repr);
                self.peer_window = u64::from(repr.window_len);
                self.state = State::SynReceived;
                self.syn_pending = true;
            }
            State::SynSent => {
                let ok = repr.control == TcpControl::Syn && repr.ack_number == Some(self.iss + 1);
                if !ok {
                    self.stats.bad_datagrams += 1;
                    return;
                }
                self.irs = repr.seq_number;
                self.take_syn_options(repr);
                self.peer_window = u64::from(repr.window_len);
                self.establish(now);
                self.ack_now = true;
            }
            State::SynReceived => {
                if repr.control == TcpControl::Syn {
                    // Our SYN-ACK was lost: the peer retransmitted its SYN.
                    self.syn_pending = true;
                    return;
                }
                if repr.ack_number != Some(self.iss + 1) {
                    self.stats.bad_datagrams += 1;
                    return;
                }
                self.establish(now);
                self.process_established(now, repr);
            }
            State::Established => self.process_established(now, repr),
        }
    }

    fn take_syn_options(&mut self, repr: &TcpRepr) {
        self.sack_ok = self.cfg.sack && repr.sack_permitted;
        match (self.cfg.window_scaling, repr.window_scale) {
            (true, Some(ws)) => {
                self.snd_wscale = ws;
                self.ws_ok = true;
            }
            _ => {
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
            }
        }
        if let Some(mss) = repr.max_seg_size {
            self.smss = self.smss.min(u64::from(mss)).max(64);
        }
    }

    fn establish(&mut self, now: Instant) {
        self.state = State::Established;
        self.board = Scoreboard::new(self.smss);
        if let Some(w) = self.first_write {
            self.board.set_first_segment(w);
        }
        if self.closed {
            self.board.set_end(self.written);
        }
        self.cc = AnyController::new(
            self.cfg.cc,
            self.smss,
            self.cfg.initial_window.bytes(self.smss),
        );
        if let (Some(sent), false) = (self.syn_sent_at, self.syn_retransmitted) {
            self.rtt.on_sample_nanos(now.nanos_since(sent));
        }
        self.rto_at = None;
        self.events.push_back(Event::Connected);
        self.template = Some(self.build_template());
    }

    fn build_template(&self) -> [u8; TEMPLATE_LEN] {
        let mut t = [0u8; TEMPLATE_LEN];
        let repr = TcpRepr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            control: TcpControl::None,
            seq_number: TcpSeqNumber(0),
            ack_number: Some(TcpSeqNumber(0)),
            window_len: 0,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_ranges: [None; MAX_SACK_BLOCKS],
            push: false,
            payload_len: 0,
        };
        let ip = self.ip_repr(repr.segment_len());
        ip.emit(&mut t, Checksum::None);
        repr.emit(
            &mut t[ipv4::HEADER_LEN..],
            ip.src_addr,
            ip.dst_addr,
            Checksum::None,
        );
        t
    }

    fn ip_repr(&self, payload_len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: self.local.0,
            dst_addr: self.remote.0,
            protocol: IpProtocol::Tcp,
            payload_len,
            ttl: 64,
            dscp: self.cfg.dscp,
        }
    }

    fn process_established(&mut self, now: Instant, repr: &TcpRepr) {
        if repr.control == TcpControl::Syn {
            // A retransmitted SYN-ACK: our ACK of it was lost.
            self.ack_now = true;
            return;
        }
        if let Some(ack) = repr.ack_number {
            self.process_ack(now, repr, ack);
        }
        self.process_data(now, repr);
    }

    fn seq_of_snd(&self, offset: u64) -> TcpSeqNumber {
        self.iss + 1 + offset as u32
    }

    fn process_ack(&mut self, now: Instant, repr: &TcpRepr, ack: TcpSeqNumber) {
        let una = self.board.una();
        let mut ack_off = unwrap_tcp(ack, self.seq_of_snd(una), una);
        let end_with_fin = self.board.max() + u64::from(self.fin_sent);
        if ack_off < una as i64 || ack_off > end_with_fin as i64 {
            // Old or acknowledging what was never sent (RFC 9293: ignore).
            return;
        }
        if self.fin_sent && ack_off as u64 == end_with_fin {
            ack_off -= 1;
            if !self.fin_acked {
                self.fin_acked = true;
                self.events.push_back(Event::SendComplete);
            }
        }
        let ack_off = ack_off as u64;
        self.peer_window = u64::from(repr.window_len) << self.snd_wscale;
        let prior_in_flight = self.in_flight();

        let mut newly_sacked = 0;
        if self.sack_ok && repr.sack_ranges[0].is_some() {
            let mut blocks = [(0, 0); MAX_SACK_BLOCKS];
            let mut n = 0;
            for (l, r) in repr.sack_ranges.iter().flatten() {
                let l = unwrap_tcp(*l, self.seq_of_snd(una), una).max(0) as u64;
                let r = unwrap_tcp(*r, self.seq_of_snd(una), una).max(0) as u64;
                blocks[n] = (l, r);
                n += 1;
            }
            newly_sacked = self.board.on_sack_blocks(&blocks[..n]);
        }

        if ack_off > una {
            let cum = self.on_cumulative_ack(now, una, ack_off);
            match self.recovery {
                Some(point) if ack_off >= point => {
                    self.recovery = None;
                    self.cc.on_recovery_end(now);
                }
                Some(_) if !self.sack_ok => {
                    //= https://www.rfc-editor.org/rfc/rfc6582#section-3.2
                    //# If this ACK does *not* acknowledge all of the data up to and
                    //# including recover, then this is a partial ACK.  In this case,
                    //# retransmit the first unacknowledged segment.
                    self.board.mark_una_lost();
                    self.fast_rtx_pending = true;
                }
                Some(_) => {}
                None => {
                    let sample = AckSample::new(cum.newly_acked, prior_in_flight, self.rtt.srtt());
                    self.cc.on_ack(now, &sample);
                }
            }
        } else if repr.payload_len == 0 && self.board.outstanding() > 0 {
            self.dup_acks += 1;
            self.stats.dup_acks += 1;
            if !self.sack_ok {
                self.on_reno_dup_ack(now);
            }
        }

        if self.sack_ok && newly_sacked > 0 {
            let thresh = u64::from(self.cfg.dup_thresh) * self.smss;
            if self.board.detect_losses(thresh) > 0 && self.recovery.is_none() {
                self.enter_recovery(now);
            }
        }
        //# (5.2) When all outstanding data has been acknowledged, turn off the
        //# retransmission timer.
        if !self.has_unacked() {
            self.rto_at = None;
        }
    }

    /// The part of an ACK that moves `SND.UNA` from `una` to `ack_off`, shared by the
    /// general path and header prediction: scoreboard, RTT sample, timer.
    // Inlined into header prediction and the general ACK path: one call less per ACK.
    #[inline(always)]
    fn on_cumulative_ack(&mut self, now: Instant, una: u64, ack_off: u64) -> scoreboard::CumAck {
        let cum = self.board.on_cumulative_ack(ack_off);
        // The round of the newest byte acknowledged: data sent from now on belongs
        // to the round after it.
        let mut newest = None;
        while let Some(&(end, round)) = self.round_marks.front() {
            if end > ack_off {
                if self.round_front_start < ack_off {
                    newest = Some(round);
                }
                break;
            }
            newest = Some(round);
            self.round_front_start = end;
            self.round_marks.pop_front();
        }
        if let Some(r) = newest {
            self.send_round = self.send_round.max(r + 1);
        }
        if let Some(sent) = cum.rtt_sample_from {
            self.rtt.on_sample_nanos(now.nanos_since(sent));
        }
        if self.reno_sacked > 0 {
            let acked_segs = (ack_off - una).div_ceil(self.smss);
            self.reno_sacked = self.reno_sacked.saturating_sub(acked_segs * self.smss);
        }
        self.dup_acks = 0;
        //= https://www.rfc-editor.org/rfc/rfc6298#section-5
        //# (5.3) When an ACK is received that acknowledges new data, restart the
        //# retransmission timer so that it will expire after RTO seconds
        self.rto_at = self
            .has_unacked()
            .then(|| now.add_nanos(self.rtt.rto_nanos()));
        cum
    }

    /// NewReno without SACK: each duplicate ACK stands for one segment that left the
    /// network (Linux's "reno SACK" accounting, equivalent to RFC 5681's window
    /// inflation).
    fn on_reno_dup_ack(&mut self, now: Instant) {
        let cap = self.board.outstanding().saturating_sub(self.smss);
        self.reno_sacked = (self.reno_sacked + self.smss).min(cap);
        //= https://www.rfc-editor.org/rfc/rfc6582#section-3.2
        //# When the third duplicate ACK is received, the TCP sender first checks the
        //# value of recover to see if the Cumulative Acknowledgment field covers more
        //# than recover.  If so, the value of recover is incremented ...
        // `recover` is an offset one past the highest byte sent, so "covers more
        // than recover" (the highest sequence number) is `una > recover`; before any
        // recovery or timeout there is nothing to cover.
        if self.recovery.is_none()
            && self.dup_acks == self.cfg.dup_thresh
            && (self.recover == 0 || self.board.una() > self.recover)
        {
            self.board.mark_una_lost();
            self.enter_recovery(now);
        }
    }

    fn enter_recovery(&mut self, now: Instant) {
        self.recover = self.board.max();
        self.recovery = Some(self.recover);
        self.stats.fast_recoveries += 1;
        self.fast_rtx_pending = true;
        self.cc.on_loss(now, self.flight_size());
    }

    fn process_data(&mut self, now: Instant, repr: &TcpRepr) {
        let seq_nxt = self.irs + 1 + self.rcv_nxt as u32;
        let start = unwrap_tcp(repr.seq_number, seq_nxt, self.rcv_nxt);
        let len = repr.payload_len as u64;
        if start < 0 {
            self.stats.bad_datagrams += 1;
            return;
        }
        let start = start as u64;
        let end = start + len;
        if repr.control == TcpControl::Fin {
            self.fin_at = Some(end);
        }
        if len > 0 {
            if end > self.rcv_nxt + self.cfg.recv_buffer_bytes {
                // Beyond the window we offered: drop, and say where we are.
                self.ack_now = true;
                return;
            }
            if end <= self.rcv_nxt {
                self.stats.duplicates += 1;
                self.ack_now = true;
            } else if start <= self.rcv_nxt {
                let filled_hole = !self.asm.is_empty();
                self.rcv_nxt = end;
                if let Some(e) = self.asm.take_front(self.rcv_nxt) {
                    self.rcv_nxt = e;
                }
                //= https://www.rfc-editor.org/rfc/rfc5681#section-4.2
                //# an ACK SHOULD be generated for at least every second full-sized
                //# segment ... Out-of-order data segments SHOULD be acknowledged
                //# immediately ... A TCP receiver SHOULD send an immediate ACK when the
                //# incoming segment fills in all or part of a gap
                self.unacked_segments += 1;
                if filled_hole || self.unacked_segments >= self.cfg.ack.every {
                    self.ack_now = true;
                } else if self.quick_acks_left > 0 {
                    self.quick_acks_left -= 1;
                    self.ack_now = true;
                } else if self.delack_at.is_none() {
                    self.delack_at = Some(now + self.cfg.ack.delay);
                }
            } else {
                self.stats.out_of_order += 1;
                self.asm.insert(start, end);
                self.ack_now = true;
            }
        }
        if let Some(fin) = self.fin_at {
            if self.rcv_nxt == fin && !self.fin_received {
                self.fin_received = true;
                self.ack_now = true;
                self.events.push_back(Event::PeerFinished { bytes: fin });
            } else if self.fin_received && repr.control == TcpControl::Fin {
                self.ack_now = true; // retransmitted FIN
            }
        }
    }

    fn has_unacked(&self) -> bool {
        self.board.outstanding() > 0 || (self.fin_sent && !self.fin_acked)
    }

    /// Processes expired timers; calling it early is a no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.delack_at.is_some_and(|t| t <= now) {
            self.delack_at = None;
            self.ack_now = true;
        }
        if self.rto_at.is_some_and(|t| t <= now) {
            self.on_rto(now);
        }
    }

    fn on_rto(&mut self, now: Instant) {
        self.stats.timeouts += 1;
        self.rtt.on_timeout();
        match self.state {
            State::SynSent | State::SynReceived => {
                self.syn_pending = true;
                self.syn_retransmitted = true;
            }
            State::Established => {
                // A timeout inside an episode already answered (the same segment
                // again, or a recovery whose retransmission was lost) collapses the
                // window but keeps ssthresh: cutting it again would punish one
                // congestion event twice.
                let una = self.board.una();
                if self.rto_una == Some(una) || self.recovery.is_some() {
                    self.cc.on_timeout_in_episode(now, self.flight_size());
                } else {
                    self.cc.on_timeout(now, self.flight_size());
                }
                self.rto_una = Some(una);
                self.board.on_rto();
                //= https://www.rfc-editor.org/rfc/rfc6582#section-3.2
                //# After a retransmit timeout, record the highest sequence number
                //# transmitted in the variable recover, and exit the fast recovery
                //# procedure if applicable.
                self.recover = self.board.max();
                self.recovery = None;
                self.dup_acks = 0;
                self.reno_sacked = 0;
                if self.fin_sent && !self.fin_acked {
                    self.fin_sent = false;
                }
            }
            State::Closed | State::Listen => {
                self.rto_at = None;
                return;
            }
        }
        //# (5.6) Start the retransmission timer, such that it expires after RTO
        //# seconds (for the value of RTO after the doubling operation outlined in 5.5).
        self.rto_at = Some(now.add_nanos(self.rtt.rto_nanos()));
    }

    /// The next deadline at which [`handle_timeout`](Self::handle_timeout) has work.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.rto_at, self.delack_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next application event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Writes the next datagram's headers into `buf` (at least
    /// [`MAX_TRANSMIT_HEADER`] bytes), or returns `None` when there is nothing to
    /// send now.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        match self.state {
            State::SynSent | State::SynReceived if self.syn_pending => {
                self.syn_pending = false;
                self.syn_sent_at = Some(now);
                self.rto_at
                    .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
                let seq = self.iss;
                return Some(self.emit(buf, TcpControl::Syn, seq, 0));
            }
            State::Established => {}
            _ => return None,
        }

        let max = self.board.max();
        if max == self.written && self.board.outstanding() == 0 && (!self.closed || self.fin_sent) {
            // Nothing to retransmit, no new data, no FIN: all this end can owe is an
            // ACK (a receiver's every poll), so skip the sender's checks below. Once
            // it is sent the end owes nothing, until something arrives.
            return self.ack_now.then(|| Transmit {
                more: false,
                ..self.emit_ack(buf, max)
            });
        }

        let cwnd = self.cc.window();
        if let Some((off, len)) = self.board.next_retransmit() {
            if self.fast_rtx_pending || self.in_flight() + len <= cwnd {
                self.fast_rtx_pending = false;
                self.board.on_retransmit(now, off);
                self.cc.on_packet_sent(now, len, self.in_flight());
                self.stats.retransmits += 1;
                self.rto_at
                    .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
                let seq = self.seq_of_snd(off);
                return Some(self.emit(buf, TcpControl::None, seq, len as usize));
            }
        }

        // (Cheapest tests first: a bulk sender fails the second.)
        if !self.closed
            && self.written > max
            && self.written - max < self.board.next_new_room()
            && self.board.outstanding() == 0
            && self.written - max <= cwnd.min(self.peer_window)
        {
            // Nagle: a short segment may go when nothing is unacknowledged.
            self.board.rebase_short_segment(self.written);
        }
        let (len, room) = self.board.next_new();
        let full_or_last = len == room || (self.closed && max + len == self.written);
        if len > 0
            && full_or_last
            && max + len <= self.written
            && self.in_flight() + len <= cwnd
            && max + len <= self.board.una() + self.peer_window
            && max + len - self.board.una() <= self.cfg.send_buffer_bytes
        {
            self.board.on_send_new(now);
            self.cc.on_packet_sent(now, len, self.in_flight());
            self.stats.data_segments_sent += 1;
            if self.send_round <= crate::ROUND_LOG_ROUNDS {
                self.note_round(max + len, len);
            }
            self.rto_at
                .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
            let seq = self.seq_of_snd(max);
            let mut tx = self.emit(buf, TcpControl::None, seq, len as usize);
            tx.more = self.could_send_more();
            return Some(tx);
        }

        if self.closed && !self.fin_sent && max == self.written {
            self.fin_sent = true;
            self.rto_at
                .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
            let seq = self.seq_of_snd(max);
            return Some(self.emit(buf, TcpControl::Fin, seq, 0));
        }

        self.ack_now.then(|| self.emit_ack(buf, max))
    }

    /// After new data went out: whether the next poll could send anything. False
    /// only when it certainly could not (the promise of [`Transmit::more`]): no
    /// retransmission waiting, no room in the window for the next new segment, no
    /// FIN to send and no ACK owed. A sender clocked by its ACKs fills the window
    /// with each one, so this spares the poll after almost every segment.
    fn could_send_more(&self) -> bool {
        let (len, _) = self.board.next_new();
        self.fast_rtx_pending
            || self.board.may_retransmit()
            || self.ack_now
            || (self.closed && !self.fin_sent)
            || (len > 0 && self.in_flight() + len <= self.cc.window())
    }

    /// A bare ACK (the caller checked `ack_now`); `max` is `SND.MAX`.
    fn emit_ack(&mut self, buf: &mut [u8], max: u64) -> Transmit {
        self.stats.acks_sent += 1;
        let seq = self.seq_of_snd(max + u64::from(self.fin_sent));
        self.emit(buf, TcpControl::None, seq, 0)
    }

    /// Books `len` new bytes ending at `end` to the current round.
    // Inlined, with the first segment of a round out of line: a long-RTT flow books
    // its first 256 rounds, which at 100 ms is most segments of a minute's run, and
    // as a call this was 30 instructions a segment of the 100 ms reference bench.
    #[inline(always)]
    fn note_round(&mut self, end: u64, len: u64) {
        let r = self.send_round;
        match (self.round_marks.back_mut(), self.round_bytes.last_mut()) {
            (Some(last), Some(bytes)) if last.1 == r => {
                last.0 = end;
                *bytes += len;
            }
            _ => self.open_round(end, len),
        }
    }

    /// [`note_round`](Self::note_round) for the first bytes booked to a round since
    /// the last were acknowledged: a new mark, and the round's counter (rounds are
    /// numbered from 1, one counter each).
    #[cold]
    fn open_round(&mut self, end: u64, len: u64) {
        let r = self.send_round;
        match self.round_marks.back_mut() {
            Some(last) if last.1 == r => last.0 = end,
            _ => self.round_marks.push_back((end, r)),
        }
        let i = r as usize - 1;
        if self.round_bytes.len() <= i {
            self.round_bytes.resize(i + 1, 0);
        }
        self.round_bytes[i] += len;
    }

    // Inlined into each caller in `poll_transmit` (so into the simulator's driver):
    // as a call, its prologue, spills and the re-reads of fields the caller had in
    // registers were 2 % of the reference bench's instructions.
    #[inline(always)]
    fn emit(
        &mut self,
        buf: &mut [u8],
        control: TcpControl,
        seq: TcpSeqNumber,
        payload_len: usize,
    ) -> Transmit {
        let syn = control == TcpControl::Syn;
        let ack_number = match self.state {
            State::SynSent => None,
            _ => Some(self.irs + 1 + self.rcv_nxt as u32 + u32::from(self.fin_received)),
        };
        let free = self.cfg.recv_buffer_bytes.saturating_sub(self.asm.bytes());
        //= https://www.rfc-editor.org/rfc/rfc7323#section-2.2
        //# The window field in a segment where the SYN bit is set (i.e., a <SYN> or
        //# <SYN,ACK>) MUST NOT be scaled.
        let shift = if syn { 0 } else { self.rcv_wscale };
        let window_len = (free >> shift).min(65535) as u16;
        let with_sack = self.sack_ok && !syn && !self.asm.is_empty();
        let header_len = match (&self.template, ack_number) {
            (Some(template), Some(ack)) if !syn => {
                // Fast path: the prebuilt header, with the SACK option patched on
                // while out-of-order data is held. Same bytes as `TcpRepr::emit` would
                // write (a test holds the two paths to that).
                //
                // The fixed header is patched as an array of its own length, so the
                // field writes below need no bounds checks (on a slice of the
                // header's run-time length each one had its own).
                let (head, opts) = buf
                    .split_first_chunk_mut::<TEMPLATE_LEN>()
                    .expect("poll_transmit's buffer holds MAX_TRANSMIT_HEADER bytes");
                let opt_len = if with_sack {
                    tcp::emit_sack_option(opts, self.sack_seqs())
                } else {
                    0
                };
                let header_len = TEMPLATE_LEN + opt_len;
                *head = *template;
                let (ip_head, tcp_head) = head.split_at_mut(ipv4::HEADER_LEN);
                Ipv4Packet::new_unchecked(ip_head).set_total_len((header_len + payload_len) as u16);
                let mut tcp = TcpPacket::new_unchecked(tcp_head);
                if opt_len > 0 {
                    tcp.set_header_len(tcp::HEADER_LEN + opt_len);
                }
                tcp.set_seq_number(seq);
                tcp.set_ack_number(ack);
                tcp.set_window_len(window_len);
                tcp.set_fin(control == TcpControl::Fin);
                if self.cfg.checksum == Checksum::Both {
                    let b = &mut buf[..header_len];
                    Ipv4Packet::new_unchecked(&mut *b).fill_checksum();
                    let seg_len = tcp::HEADER_LEN + opt_len + payload_len;
                    TcpPacket::new_unchecked(&mut b[ipv4::HEADER_LEN..]).fill_checksum(
                        self.local.0,
                        self.remote.0,
                        seg_len,
                    );
                }
                header_len
            }
            _ => self.emit_with_options(
                buf,
                control,
                seq,
                ack_number,
                window_len,
                with_sack,
                payload_len,
            ),
        };
        if ack_number.is_some() {
            self.ack_now = false;
            self.unacked_segments = 0;
            self.delack_at = None;
        }
        self.stats.segments_sent += 1;
        Transmit {
            header_len,
            payload_len,
            more: true,
        }
    }

    /// The SACK blocks to send, in sequence numbers.
    fn sack_seqs(&self) -> impl Iterator<Item = (TcpSeqNumber, TcpSeqNumber)> + '_ {
        let base = self.irs + 1;
        self.asm
            .sack_blocks()
            .map(move |(l, r)| (base + l as u32, base + r as u32))
    }

    /// [`sack_seqs`](Self::sack_seqs) as a `TcpRepr` holds them.
    fn sack_ranges(&self) -> [Option<(TcpSeqNumber, TcpSeqNumber)>; MAX_SACK_BLOCKS] {
        let mut out = [None; MAX_SACK_BLOCKS];
        for (slot, b) in out.iter_mut().zip(self.sack_seqs()) {
            *slot = Some(b);
        }
        out
    }

    /// The general emit path: SYN options, or any segment before the template exists
    /// (with SACK blocks if asked: a test holds `emit`'s patched template to this).
    /// Returns the header length.
    #[allow(clippy::too_many_arguments)]
    fn emit_with_options(
        &self,
        buf: &mut [u8],
        control: TcpControl,
        seq: TcpSeqNumber,
        ack_number: Option<TcpSeqNumber>,
        window_len: u16,
        with_sack: bool,
        payload_len: usize,
    ) -> usize {
        let syn = control == TcpControl::Syn;
        let sack_ranges = if with_sack {
            self.sack_ranges()
        } else {
            [None; MAX_SACK_BLOCKS]
        };
        let repr = TcpRepr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            control,
            seq_number: seq,
            ack_number,
            window_len,
            max_seg_size: syn.then_some(self.cfg.mss),
            // RFC 7323 §2.2: a SYN-ACK carries the option only if the SYN did.
            window_scale: (syn
                && self.cfg.window_scaling
                && (self.state == State::SynSent || self.ws_ok))
                .then_some(self.rcv_wscale),
            sack_permitted: syn && self.cfg.sack,
            sack_ranges,
            push: false,
            payload_len,
        };
        let ip = self.ip_repr(repr.segment_len());
        ip.emit(buf, self.cfg.checksum);
        repr.emit(
            &mut buf[ipv4::HEADER_LEN..],
            ip.src_addr,
            ip.dst_addr,
            self.cfg.checksum,
        );
        ipv4::HEADER_LEN + repr.header_len()
    }
}
