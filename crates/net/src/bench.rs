//! Memory-to-memory UDT over loopback: how fast the engine and its driver move
//! bytes when neither the network nor a disk is the limit.

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use longhaul_proto::udt::UdtConnConfig;

use crate::clock::Clock;
use crate::udt::{IoCounters, NetError, UdtListener, UdtSocket};

/// What one loopback run measured.
#[derive(Debug, Clone)]
pub struct LoopbackReport {
    /// Channels (connection pairs) run at once.
    pub channels: usize,
    /// Bytes the receivers read, per channel.
    pub bytes: Vec<u64>,
    /// Wall time from the first connection to the last byte read, s.
    pub seconds: f64,
    /// CPU time of the whole process (both ends), s.
    pub cpu_seconds: f64,
    /// CPU time of the senders' threads and of the receivers' threads, summed over
    /// the channels, s: each end's own share of `cpu_seconds`.
    pub cpu_each: [f64; 2],
    /// Data packets sent and retransmitted, over all channels.
    pub packets: (u64, u64),
    /// The senders' and the receivers' system calls and datagrams, summed over
    /// the channels.
    pub io: [IoCounters; 2],
}

impl LoopbackReport {
    /// Total goodput, Gb/s.
    pub fn gbps(&self) -> f64 {
        self.bytes.iter().sum::<u64>() as f64 * 8.0 / self.seconds / 1e9
    }
    /// CPU seconds spent per gigabit moved (both ends).
    pub fn cpu_per_gbit(&self) -> f64 {
        let gbit = self.bytes.iter().sum::<u64>() as f64 * 8.0 / 1e9;
        self.cpu_seconds / gbit.max(1e-9)
    }
    /// CPU seconds per gigabit at the senders and at the receivers: the cost that
    /// carries over to a machine where each end has its own cores.
    pub fn cpu_per_gbit_each(&self) -> (f64, f64) {
        let gbit = (self.bytes.iter().sum::<u64>() as f64 * 8.0 / 1e9).max(1e-9);
        (self.cpu_each[0] / gbit, self.cpu_each[1] / gbit)
    }
    /// CPU microseconds per data datagram at the senders (over those sent) and at the
    /// receivers (over those received).
    pub fn cpu_us_per_packet(&self) -> (f64, f64) {
        let [s, r] = self.io;
        (
            self.cpu_each[0] * 1e6 / s.datagrams_sent.max(1) as f64,
            self.cpu_each[1] * 1e6 / r.datagrams_received.max(1) as f64,
        )
    }
    /// System calls per data datagram at the senders (over those sent) and at the
    /// receivers (over those received).
    pub fn syscalls_per_packet(&self) -> (f64, f64) {
        let [s, r] = self.io;
        (
            s.syscalls() as f64 / s.datagrams_sent.max(1) as f64,
            r.syscalls() as f64 / r.datagrams_received.max(1) as f64,
        )
    }
}

/// User and system CPU time of this process so far, from /proc (Linux), s.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line (11 and 12 after ')').
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU time of the calling thread so far, s (each end of a channel runs its engine
/// and its socket on its own thread).
fn thread_cpu_seconds() -> f64 {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

/// Runs `channels` UDT connections over loopback at once, each writing
/// `bytes_per_channel` from memory as fast as it can, with `cfg` (socket IDs and
/// ISNs are set per channel); with `encrypt`, every datagram sealed as a
/// session's data channels seal them (keys drawn for the run).
pub fn loopback(
    channels: usize,
    bytes_per_channel: u64,
    cfg: UdtConnConfig,
    encrypt: bool,
) -> Result<LoopbackReport, NetError> {
    use crate::secure::{random_bytes, Dir, SessionKeys};
    let keys = SessionKeys::from_split(&random_bytes(), &random_bytes());
    let protection = |c: usize, sending: Dir| encrypt.then(|| keys.packet_protection(c, sending));
    const LIMIT: Duration = Duration::from_secs(120);
    let clock = Clock::new();
    let cpu0 = cpu_seconds();
    let start = clock.now();
    let mut servers = vec![];
    let mut clients = vec![];
    for c in 0..channels {
        let listener = UdtListener::bind("127.0.0.1:0".parse::<SocketAddr>().expect("literal"))?;
        let addr = listener.local_addr()?;
        let id = 2 * c as u32 + 1;
        let server_cfg = UdtConnConfig {
            socket_id: id + 1,
            ..cfg
        };
        let protect = protection(c, Dir::ToSender);
        servers.push(thread::spawn(
            move || -> Result<(u64, IoCounters, f64), NetError> {
                let mut s = listener.accept_protected(server_cfg, LIMIT, protect)?;
                let mut buf = vec![0u8; 1 << 20];
                let mut got = 0u64;
                loop {
                    let n = s.read(&mut buf)?;
                    if n == 0 {
                        return Ok((got, s.io_counters(), thread_cpu_seconds()));
                    }
                    got += n as u64;
                }
            },
        ));
        let client_cfg = UdtConnConfig {
            socket_id: id,
            isn: (id * 7919) & 0x3fff_ffff,
            ..cfg
        };
        let protect = protection(c, Dir::ToReceiver);
        clients.push(thread::spawn(
            move || -> Result<(u64, u64, IoCounters, f64), NetError> {
                let mut s = UdtSocket::connect_protected(addr, client_cfg, LIMIT, protect)?;
                // Written as `send` writes its blocks: shared with the send buffer,
                // not copied into it.
                let block: bytes::Bytes = (0..1 << 20).map(|i: u32| (i >> 3) as u8).collect();
                let mut left = bytes_per_channel;
                while left > 0 {
                    let n = left.min(block.len() as u64) as usize;
                    s.write_all_shared(&block.slice(..n))?;
                    left -= n as u64;
                }
                let st = *s.connection().stats();
                // Before the close, which consumes the socket (its few control
                // packets do not count).
                let io = s.io_counters();
                s.close(LIMIT)?;
                Ok((st.data_sent, st.retransmitted, io, thread_cpu_seconds()))
            },
        ));
    }
    let mut packets = (0, 0);
    let mut io = [IoCounters::default(); 2];
    let mut cpu_each = [0.0; 2];
    for c in clients {
        let (sent, rexmit, counters, cpu) = c.join().expect("client thread")?;
        packets.0 += sent;
        packets.1 += rexmit;
        io[0] += counters;
        cpu_each[0] += cpu;
    }
    let mut bytes = vec![];
    for s in servers {
        let (got, counters, cpu) = s.join().expect("server thread")?;
        bytes.push(got);
        io[1] += counters;
        cpu_each[1] += cpu;
    }
    let seconds = clock.now().saturating_duration_since(start).as_secs_f64();
    Ok(LoopbackReport {
        channels,
        bytes,
        seconds,
        cpu_seconds: cpu_seconds() - cpu0,
        cpu_each,
        packets,
        io,
    })
}
