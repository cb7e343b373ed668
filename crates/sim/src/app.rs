//! Traffic: what flows a scenario runs, and their per-run state.

use longhaul_proto::blast::{BlastConfig, BlastConnection};
use longhaul_proto::sctp::{SctpAssociation, SctpConfig};
use longhaul_proto::tcp::{TcpConfig, TcpConnection};
use longhaul_proto::udt::{UdtConnConfig, UdtConnection};
use longhaul_proto::{Bandwidth, Duration, Instant};
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

/// A UDP blast transfer (RBUDP, Tsunami or SABUL) of a finite size: data over UDP,
/// control over a TCP connection of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct BlastFlowSpec {
    /// Sending host.
    pub from: usize,
    /// Receiving host.
    pub to: usize,
    /// The protocol and its parameters (both ends).
    pub config: BlastConfig,
    /// The control connection's TCP.
    pub control: TcpConfig,
    /// When the receiver opens the control connection.
    pub start: Instant,
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
    /// RBUDP, Tsunami or SABUL.
    Blast(BlastFlowSpec),
}

impl FlowSpec {
    /// Sending and receiving host.
    pub fn ends(&self) -> (usize, usize) {
        match self {
            FlowSpec::Tcp(t) => (t.from, t.to),
            FlowSpec::Udp(u) => (u.from, u.to),
            FlowSpec::Udt(u) => (u.from, u.to),
            FlowSpec::Sctp(u) => (u.from, u.to),
            FlowSpec::Blast(u) => (u.from, u.to),
        }
    }
    /// Start time.
    pub fn start(&self) -> Instant {
        match self {
            FlowSpec::Tcp(t) => t.start,
            FlowSpec::Udp(u) => u.start,
            FlowSpec::Udt(u) => u.start,
            FlowSpec::Sctp(u) => u.start,
            FlowSpec::Blast(u) => u.start,
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

/// A blast transfer's run-time state: the data ends, and the control connection
/// with the messages on it.
///
/// The simulator's TCP carries byte counts, not bytes, so each control message
/// travels as its frame's length on the connection and its bytes wait here beside
/// it, taken by the peer once its TCP has delivered the frame's last byte in order
/// (what reading the stream would give; the engines parse real frames).
#[derive(Debug)]
pub(crate) struct BlastFlow {
    pub spec: BlastFlowSpec,
    /// `[sender, receiver]`.
    pub ends: [BlastConnection; 2],
    pub timer_at: [Option<Instant>; 2],
    /// The control connection, `[sender's end, receiver's end]`.
    pub control: [Control; 2],
    pub control_timer_at: [Option<Instant>; 2],
    /// Frames written by end `i` and not yet read by the other: the offset in
    /// `i`'s stream just past each, and its bytes.
    pub mail: [std::collections::VecDeque<(u64, Vec<u8>)>; 2],
    /// Bytes end `i` has written on the control connection.
    pub written: [u64; 2],
    /// Whether each end was told the control connection is up.
    pub connected: [bool; 2],
    /// Whether each side's blast end took control input not yet acted on.
    pub nudge: [bool; 2],
    pub completed_at: Option<Instant>,
}

/// A blast transfer's control connection (the simulator drives it as an engine of
/// its own; see `simulation::engines`).
#[derive(Debug)]
pub(crate) struct Control(pub TcpConnection);

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
        // "udp\0" in ASCII: the UDP sources' salt.
        let rng = longhaul_model::rng::long_stream(seed, 0x7564_7000, index);
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
    Blast(Box<BlastFlow>),
}

impl Flow {
    /// Payload bytes the receiving application has got so far.
    pub fn delivered_bytes(&self) -> u64 {
        match self {
            Flow::Tcp(t) => t.ends[1].delivered_bytes(),
            Flow::Udp(u) => u.recv_bytes,
            Flow::Udt(u) => u.ends[1].delivered_bytes(),
            Flow::Sctp(s) => s.delivered,
            Flow::Blast(b) => b.ends[1].received_bytes(),
        }
    }
}

/// A host's limits that decide what a transfer can reach: the kernel's socket buffer
/// caps, and optionally disk and CPU rates.
///
/// TCP channels get what Linux's autotuning gives: a send buffer of twice the
/// congestion window, capped by `tcp_wmem`'s maximum, and a receive window of
/// `tcp_rmem`'s maximum less the share `tcp_adv_win_scale` reserves for overhead.
/// (The receive buffer's growth from its default is not modelled: a long transfer
/// spends almost all its time at the cap.) `rmem_max`/`wmem_max` cap what an application may ask for with
/// `SO_RCVBUF`/`SO_SNDBUF`; a channel whose transport sets its own buffer gets the
/// smaller of the two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostLimits {
    /// `net.core.rmem_max`, bytes.
    pub rmem_max: u64,
    /// `net.core.wmem_max`, bytes.
    pub wmem_max: u64,
    /// `net.ipv4.tcp_rmem` maximum, bytes.
    pub tcp_rmem_max: u64,
    /// `net.ipv4.tcp_wmem` maximum, bytes.
    pub tcp_wmem_max: u64,
    /// `net.ipv4.tcp_adv_win_scale`: the window is `rmem - rmem / 2^scale` for a
    /// positive scale and `rmem / 2^-scale` otherwise (1 on the kernels of the
    /// study's time: half the buffer).
    pub tcp_adv_win_scale: i8,
    /// Sequential read rate of the source disk; `None`: not a limit.
    pub disk_read: Option<Bandwidth>,
    /// Sequential write rate of the destination disk; `None`: not a limit.
    pub disk_write: Option<Bandwidth>,
    /// Cores that move data (one channel or reader per core at a time).
    pub cores: u32,
    /// Bytes per second one core can move through a channel (copies, checksums,
    /// system calls); `None`: not a limit.
    pub core_rate: Option<Bandwidth>,
}

impl HostLimits {
    /// An untuned Linux host of the study's time (RHEL/CentOS 7, kernel 3.10):
    /// `rmem_max` = `wmem_max` = 212 992, `tcp_rmem` max 6 MiB, `tcp_wmem` max 4 MiB,
    /// `tcp_adv_win_scale` 1. The window is then 3 MiB, which over 150 ms is 168 Mb/s:
    /// the study's "under 200 Mb/s before tuning".
    pub const UNTUNED: HostLimits = HostLimits {
        rmem_max: 212_992,
        wmem_max: 212_992,
        tcp_rmem_max: 6 << 20,
        tcp_wmem_max: 4 << 20,
        tcp_adv_win_scale: 1,
        disk_read: None,
        disk_write: None,
        cores: 24,
        core_rate: None,
    };
    /// The study's tuned host (its Table 5, after ESnet's advice): `rmem_max` =
    /// `wmem_max` = 128 MiB, `tcp_rmem`/`tcp_wmem` max 64 MiB (a 32 MiB window, above
    /// the 18.75 MB of 1 Gb/s x 150 ms).
    pub const TUNED: HostLimits = HostLimits {
        rmem_max: 128 << 20,
        wmem_max: 128 << 20,
        tcp_rmem_max: 64 << 20,
        tcp_wmem_max: 64 << 20,
        ..HostLimits::UNTUNED
    };

    /// The receive window a TCP socket on this host advertises at most.
    pub fn tcp_window(&self) -> u64 {
        let s = u32::from(self.tcp_adv_win_scale.unsigned_abs()).min(63);
        if self.tcp_adv_win_scale > 0 {
            self.tcp_rmem_max - (self.tcp_rmem_max >> s)
        } else {
            self.tcp_rmem_max >> s
        }
    }
}

/// What a transfer's data channels run.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// TCP streams (NewReno or CUBIC).
    Tcp(TcpConfig),
    /// UDT connections (UDT or AR-UDT rate control).
    Udt(UdtConnConfig),
}

/// A transfer of files between two hosts with the techniques of bulk-transfer tools:
/// parallelism (a file striped over `parallelism` channels in blocks), concurrency
/// (`concurrency` files at once, each on its own group of channels) and pipelining
/// (a group moves on to its next file without a control round trip).
///
/// Data channels are ordinary flows of the scenario ([`channels`](Self::channels));
/// the control channel carries a request and a reply per exchange: one to open the
/// session, and one before each file when pipelining is off.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferSpec {
    /// Name, for outputs.
    pub name: String,
    /// Sending host.
    pub from: usize,
    /// Receiving host.
    pub to: usize,
    /// When the session opens.
    pub start: Instant,
    /// The files' sizes, bytes.
    pub files: Vec<u64>,
    /// Bytes of file data per block (each block also carries a 16-byte header).
    pub block_size: u32,
    /// Channels per file.
    pub parallelism: u16,
    /// Files in flight at once.
    pub concurrency: u16,
    /// Whether a channel group moves to its next file without a control exchange.
    pub pipelining: bool,
    /// Disk reader threads at the sender (each on a core of its own).
    pub readers: u16,
    /// Limits of the sending and the receiving host.
    pub hosts: [HostLimits; 2],
    /// The data channels' flow indices, `concurrency` groups of `parallelism`.
    pub channels: Vec<usize>,
    /// Bytes of a control message (request or reply), IP and UDP headers included.
    pub control_bytes: u32,
    /// Whether UDT channels carry real bytes (block headers and file content from
    /// [`file_byte`]), which the receiver parses, reassembles and checks; otherwise
    /// only byte counts travel, as everywhere else in the simulator.
    pub content: bool,
    /// Whether UDT channels whose control is BBR share one model, so that to the
    /// path they are one flow ([`longhaul_proto::cc::BbrGroup`]), as `longhaul
    /// send`'s do by default.
    pub couple: bool,
}

/// Byte `offset` of file `file` in a transfer that carries content: a pattern that
/// differs per file and per offset, so that a byte written to the wrong place or
/// file shows.
pub fn file_byte(file: u32, offset: u64) -> u8 {
    let x = offset
        .wrapping_add(u64::from(file) << 40)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8
}

impl TransferSpec {
    /// All the files' bytes.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().sum()
    }
}

/// Named transfer presets: each tool's documented defaults, as parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// FDT: TCP, 4 streams (`-P`), 2 reader threads, files streamed back to back
    /// through its buffer pool.
    Fdt,
    /// Globus Transfer: TCP (GridFTP), 4 streams per file, 2 files at once,
    /// pipelining on.
    Globus,
    /// mdtmFTP: TCP with parallelism, concurrency and pipelining, and dedicated I/O
    /// threads; its manual documents no default stream count, so one stream per file
    /// (`globus-url-copy`'s `-p` default), pipelining on, 2 readers.
    Mdtmftp,
    /// The UDT parallel tool of the study: UDT channels, parallelism only (a control
    /// exchange before each file), 4 channels (the study suggests 4 to 8).
    UdtParallel,
}

/// What a preset sets: (UDT rather than TCP, parallelism, concurrency, pipelining,
/// readers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolDefaults {
    /// Channels over UDT instead of TCP.
    pub udt: bool,
    /// Channels per file.
    pub parallelism: u16,
    /// Files at once.
    pub concurrency: u16,
    /// Pipelining.
    pub pipelining: bool,
    /// Disk reader threads.
    pub readers: u16,
}

impl Tool {
    /// The preset's settings.
    pub fn defaults(self) -> ToolDefaults {
        let (udt, parallelism, concurrency, pipelining, readers) = match self {
            Tool::Fdt => (false, 4, 1, true, 2),
            Tool::Globus => (false, 4, 2, true, 2),
            Tool::Mdtmftp => (false, 1, 1, true, 2),
            Tool::UdtParallel => (true, 4, 1, false, 1),
        };
        ToolDefaults {
            udt,
            parallelism,
            concurrency,
            pipelining,
            readers,
        }
    }
    /// The name scenarios use.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Fdt => "fdt",
            Tool::Globus => "globus",
            Tool::Mdtmftp => "mdtmftp",
            Tool::UdtParallel => "udt-parallel",
        }
    }
    /// Every preset.
    pub const ALL: [Tool; 4] = [Tool::Fdt, Tool::Globus, Tool::Mdtmftp, Tool::UdtParallel];
}
