//! Traffic: what flows a scenario runs, and their per-run state.

use longhaul_proto::sctp::{SctpAssociation, SctpConfig};
use longhaul_proto::tcp::{TcpConfig, TcpConnection};
use longhaul_proto::udt::{UdtConnConfig, UdtConnection};
use longhaul_proto::{Bandwidth, Duration, Instant};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The SCTP study's workload: `count` files of `size` bytes, sent round robin one
/// `message`-byte write at a time (a file's last write is what is left of it). Over
/// SCTP each file has its own stream; over TCP the same writes share the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Files {
    /// Number of files.
    pub count: u32,
    /// Bytes per file.
    pub size: u64,
    /// Bytes per write.
    pub message: u32,
}

impl Files {
    /// All the bytes.
    pub fn total(&self) -> u64 {
        u64::from(self.count) * self.size
    }
    /// Number of writes.
    pub fn write_count(&self) -> u64 {
        self.size.div_ceil(u64::from(self.message)) * u64::from(self.count)
    }
    /// Write `k` (from 0) as (file, bytes): round `k / count` of file `k % count`.
    pub fn write(&self, k: u64) -> (u32, u64) {
        let m = u64::from(self.message);
        let round = k / u64::from(self.count);
        let file = (k % u64::from(self.count)) as u32;
        (file, (self.size - round * m).min(m))
    }
}

/// A TCP transfer: an endless backlog (bulk) or a finite number of bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpFlowSpec {
    /// Sending host.
    pub from: usize,
    /// Receiving host.
    pub to: usize,
    /// Connection parameters (both ends).
    pub config: TcpConfig,
    /// When the client opens the connection.
    pub start: Instant,
    /// Bytes to send; `None` for an endless backlog.
    pub size: Option<u64>,
    /// Round-robin files instead of one block of `size` bytes (then `size` is their
    /// total): the first write matters to Linux's Nagle.
    pub files: Option<Files>,
}

/// An SCTP association carrying round-robin files (one stream each) or a bulk
/// transfer on stream 0.
#[derive(Debug, Clone, PartialEq)]
pub struct SctpFlowSpec {
    /// Sending host.
    pub from: usize,
    /// Receiving host.
    pub to: usize,
    /// Association parameters (both ends).
    pub config: SctpConfig,
    /// When the client sends its INIT.
    pub start: Instant,
    /// What to send: files, or `None` for an endless backlog of messages.
    pub files: Option<Files>,
    /// Message size of the endless backlog.
    pub message: u32,
}

/// A UDT (or AR-UDT) transfer over UDP: endless or a finite number of bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct UdtFlowSpec {
    /// Sending host.
    pub from: usize,
    /// Receiving host.
    pub to: usize,
    /// Connection parameters (both ends; socket IDs and ISN are set per flow).
    pub config: UdtConnConfig,
    /// When the client starts the handshake.
    pub start: Instant,
    /// Bytes to send; `None` for an endless backlog.
    pub size: Option<u64>,
}

/// How a UDP source spaces its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Constant bit rate: fixed spacing.
    Cbr,
    /// Poisson: exponential spacing with the same mean.
    Poisson,
}

/// A UDP source and its sink.
#[derive(Debug, Clone, PartialEq)]
pub struct UdpFlowSpec {
    /// Sending host.
    pub from: usize,
    /// Receiving host.
    pub to: usize,
    /// Mean sending rate, counting IP and UDP headers.
    pub rate: Bandwidth,
    /// IP packet size, bytes (headers included).
    pub packet_size: u32,
    /// Spacing.
    pub arrivals: Arrivals,
    /// First packet.
    pub start: Instant,
    /// No packets after this time.
    pub stop: Option<Instant>,
    /// DSCP to mark.
    pub dscp: u8,
}

/// Any flow.
#[derive(Debug, Clone, PartialEq)]
pub enum FlowSpec {
    /// TCP.
    Tcp(TcpFlowSpec),
    /// UDP.
    Udp(UdpFlowSpec),
    /// UDT.
    Udt(UdtFlowSpec),
    /// SCTP.
    Sctp(SctpFlowSpec),
}

impl FlowSpec {
    /// Sending and receiving host.
    pub fn ends(&self) -> (usize, usize) {
        match self {
            FlowSpec::Tcp(t) => (t.from, t.to),
            FlowSpec::Udp(u) => (u.from, u.to),
            FlowSpec::Udt(u) => (u.from, u.to),
            FlowSpec::Sctp(u) => (u.from, u.to),
        }
    }
    /// Start time.
    pub fn start(&self) -> Instant {
        match self {
            FlowSpec::Tcp(t) => t.start,
            FlowSpec::Udp(u) => u.start,
            FlowSpec::Udt(u) => u.start,
            FlowSpec::Sctp(u) => u.start,
        }
    }
}

/// A TCP flow's run-time state.
#[derive(Debug)]
pub(crate) struct TcpFlow {
    pub spec: TcpFlowSpec,
    /// `[sender, receiver]`.
    pub ends: [TcpConnection; 2],
    /// Live timer event per end, if any.
    pub timer_at: [Option<Instant>; 2],
    pub completed_at: Option<Instant>,
    /// First and last arrival of a data segment at the receiver.
    pub data_arrivals: Option<(Instant, Instant)>,
}

/// An SCTP flow's run-time state.
#[derive(Debug)]
pub(crate) struct SctpFlow {
    pub spec: SctpFlowSpec,
    /// `[sender, receiver]`.
    pub ends: [SctpAssociation; 2],
    pub timer_at: [Option<Instant>; 2],
    pub completed_at: Option<Instant>,
    /// Bytes the receiving application has read.
    pub delivered: u64,
    /// The next of `spec.files`' writes to hand to the sender.
    pub next_write: u64,
}

/// A UDT flow's run-time state.
#[derive(Debug)]
pub(crate) struct UdtFlow {
    pub spec: UdtFlowSpec,
    /// `[sender, receiver]`.
    pub ends: [UdtConnection; 2],
    pub timer_at: [Option<Instant>; 2],
    pub completed_at: Option<Instant>,
    /// Bytes not yet handed to the sender (`u64::MAX`: endless).
    pub unsent: u64,
}

/// A UDP flow's run-time state.
#[derive(Debug)]
pub(crate) struct UdpFlow {
    pub spec: UdpFlowSpec,
    pub rng: Xoshiro256PlusPlus,
    pub mean_gap: Duration,
    pub sent_pkts: u64,
    pub recv_pkts: u64,
    pub recv_bytes: u64,
    pub delay_sum_ns: u128,
    pub delay_max_ns: u64,
    pub last_delay_ns: Option<u64>,
    /// RFC 3550 interarrival jitter estimate, ns.
    pub jitter_ns: f64,
}

impl UdpFlow {
    pub fn new(spec: UdpFlowSpec, seed: u64, index: u64) -> Self {
        let mean_gap = Duration::from_nanos(spec.rate.tx_time_nanos(u64::from(spec.packet_size)));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7564_7000);
        for _ in 0..=index {
            rng.long_jump();
        }
        UdpFlow {
            spec,
            rng,
            mean_gap,
            sent_pkts: 0,
            recv_pkts: 0,
            recv_bytes: 0,
            delay_sum_ns: 0,
            delay_max_ns: 0,
            last_delay_ns: None,
            jitter_ns: 0.0,
        }
    }
}

/// A flow's run-time state.
#[derive(Debug)]
pub(crate) enum Flow {
    Tcp(Box<TcpFlow>),
    Udp(Box<UdpFlow>),
    Udt(Box<UdtFlow>),
    Sctp(Box<SctpFlow>),
}

impl Flow {
    /// Payload bytes the receiving application has got so far.
    pub fn delivered_bytes(&self) -> u64 {
        match self {
            Flow::Tcp(t) => t.ends[1].delivered_bytes(),
            Flow::Udp(u) => u.recv_bytes,
            Flow::Udt(u) => u.ends[1].delivered_bytes(),
            Flow::Sctp(s) => s.delivered,
        }
    }
}
