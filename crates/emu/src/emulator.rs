//! The real-time emulator: two namespaces joined by two TUN devices, and the loop
//! that carries packets between them through the [`Direction`] models.
//!
//! One thread runs both directions, so each direction is one ordered pipeline (no
//! reordering, as the design notes insist). Each turn of the loop reads up to
//! [`BATCH`] packets from each TUN, stamps them with the clock, asks the model their
//! fate, then writes every packet whose time has come. Between turns it sleeps in
//! `ppoll` with a nanosecond timeout until [`SPIN`] (on a timing core of its own;
//! [`SPIN_SHARED`] otherwise; [`SPIN_CONTENDED`] while another task competes for
//! the core) before the next departure, then busy-polls, so a
//! packet leaves within microseconds of its time; a late wake-up releases
//! everything due, in order (jitter, but no lost rate). How late each packet left
//! is recorded: it is the run's health.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use hdrhistogram::Histogram;
use longhaul_proto::Instant;
use longhaul_wire::pcap::PcapFile;
use longhaul_wire::Ipv4Packet;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeSpec;

use crate::clock::Clock;
use crate::config::EmuConfig;
use crate::cpu;
use crate::gso::{self, SegInfo, MAX_SUPER, VNET_HDR_LEN};
use crate::netns::{unique_name, Netns, NetnsError};
use crate::stats::{lateness_histogram, DirReport, DirStats, EmuReport, FlowId, Health};
use crate::tun::Tun;
use longhaul_model::fifo::{Arrival, Direction, Verdict};

/// Packets read from one TUN per turn of the loop, so one busy direction cannot
/// starve the other or delay due writes.
pub const BATCH: usize = 8;
/// How long before a departure the loop stops sleeping and busy-polls, when it
/// runs on a timing core of its own ([`cpu::timing_cpu`]).
///
/// Why so long: a sleeping core of a virtual machine is woken by the hypervisor,
/// and that wake-up can come 100-200 µs after the timer. With 50 µs here, a
/// 100 Mb/s kernel Reno run over 50 ms (`longhaul compare --schemes reno --rate
/// 100Mbps --rtt 50ms --loss 1e-3 --duration 10s`, 2-core VM, 2026-11-27; the
/// margin was read from the environment in a scratch build, so reproducing a
/// row means changing this constant) had
/// timer lateness p99 57-172 µs, invalid in 2 of 6 runs; with 100 µs, 54-115 µs
/// (1 of 3 invalid); with 200 µs, 18-45 µs in 6 runs; with 400 µs, 30-40 µs.
/// The price is spinning on a core nothing else of the run uses (the emulator's
/// CPU share at 100 Mb/s went from 0.08-0.23 to 0.18-0.31 of a core; the busy
/// share, which leaves idle spinning out, did not move).
pub const SPIN: StdDuration = StdDuration::from_micros(200);
/// The busy-poll margin when the loop shares its core with the applications
/// (one CPU, or steering refused): spinning there would take their time.
pub const SPIN_SHARED: StdDuration = StdDuration::from_micros(50);
/// The busy-poll margin while another process competes for the timing core
/// (see `Contention` in this file): sleeping lets it run in the gaps, and the
/// wake-up, at the timing thread's priority, takes the core back at once.
pub const SPIN_CONTENDED: StdDuration = StdDuration::from_micros(5);
/// The longest sleep, so a stop request is seen promptly.
const IDLE: StdDuration = StdDuration::from_millis(20);
/// Bytes of each packet kept in a capture.
const SNAPLEN: u32 = 128;

/// The client's address, inside its namespace.
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The server's address, inside its namespace.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The TUN device's name in both namespaces.
pub const TUN_NAME: &str = "lh0";

/// Why the emulator could not run.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The configuration is wrong.
    #[error("{0}")]
    Config(String),
    /// A namespace operation failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// A TUN device could not be made or used.
    #[error("TUN: {0}")]
    Tun(io::Error),
    /// The capture file could not be written.
    #[error("capture {path}: {err}")]
    Pcap {
        /// The file.
        path: PathBuf,
        /// The error.
        err: io::Error,
    },
}

/// Two namespaces, `client` and `server`, each with a TUN device `lh0` whose file
/// descriptor the emulator holds: the client is [`CLIENT_ADDR`], the server
/// [`SERVER_ADDR`], and each reaches the other only through the emulator. Dropping
/// the pair kills what runs inside and deletes both namespaces.
#[derive(Debug)]
pub struct Pair {
    // Field order is drop order: the TUNs close before their namespaces go.
    client_tun: Tun,
    server_tun: Tun,
    steering: Option<String>,
    /// The creating thread stays off the timing CPU while the pair lives.
    _kept_off: Option<cpu::KeptOff>,
    /// The client's namespace.
    pub client: Netns,
    /// The server's namespace.
    pub server: Netns,
}

impl Pair {
    /// Makes both namespaces and devices with an MTU of `mtu` bytes and a transmit
    /// queue of 10 000 packets (so the kernel holds bursts instead of dropping them
    /// while the emulator sleeps). On a machine of two or more CPUs it steers the
    /// devices' receive work off the timing CPU, and keeps the calling thread (and
    /// so what it spawns) off that CPU until the pair is dropped ([`cpu`]). With
    /// `offload`, the devices exchange TCP super-packets with the emulator
    /// ([`crate::gso`]); a kernel that refuses gets plain devices, which
    /// [`Pair::offload`] then reports.
    pub fn create(mtu: u16, offload: bool) -> Result<Pair, EmuError> {
        let client = Netns::create(&unique_name("c"))?;
        let server = Netns::create(&unique_name("s"))?;
        let mtu = mtu.to_string();
        let mut tuns = vec![];
        for (ns, me, peer) in [
            (&client, CLIENT_ADDR, SERVER_ADDR),
            (&server, SERVER_ADDR, CLIENT_ADDR),
        ] {
            let tun = ns
                .run(|| match Tun::create(TUN_NAME, offload) {
                    Err(_) if offload => Tun::create(TUN_NAME, false),
                    r => r,
                })?
                .map_err(EmuError::Tun)?;
            ns.ip(&[
                "addr",
                "add",
                &me.to_string(),
                "peer",
                &peer.to_string(),
                "dev",
                TUN_NAME,
            ])?;
            ns.ip(&[
                "link",
                "set",
                TUN_NAME,
                "mtu",
                &mtu,
                "txqueuelen",
                "10000",
                "up",
            ])?;
            tuns.push(tun);
        }
        // Steer the kernel's receive work for what the emulator writes away from
        // the timing thread's CPU ([`crate::cpu`]). Failing only costs timing.
        let steering = cpu::steering_mask().filter(|mask| {
            [&client, &server].iter().all(|ns| {
                ns.command(&format!(
                    "echo {mask} > /sys/class/net/{TUN_NAME}/queues/rx-0/rps_cpus"
                ))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
            })
        });
        let server_tun = tuns.pop().expect("two");
        let client_tun = tuns.pop().expect("two");
        if client_tun.offload() != server_tun.offload() {
            return Err(EmuError::Tun(io::Error::other(
                "one TUN device took offloads and the other did not",
            )));
        }
        // What this thread starts in the namespaces from now on stays off the
        // timing thread's CPU.
        let _kept_off = steering.is_some().then(cpu::KeptOff::new);
        Ok(Pair {
            client_tun,
            server_tun,
            steering,
            _kept_off,
            client,
            server,
        })
    }

    /// The CPUs the kernel's receive work for both devices is steered to (an
    /// `rps_cpus` mask), if it is.
    pub fn steering(&self) -> Option<&str> {
        self.steering.as_deref()
    }

    /// Whether the devices exchange super-packets with virtio-net headers.
    pub fn offload(&self) -> bool {
        self.client_tun.offload()
    }

    /// Packets the kernel dropped on each TUN device (client, server): its transmit
    /// queue toward us overflowed, or it dropped what we wrote.
    pub fn tun_drops(&self) -> [u64; 2] {
        [&self.client, &self.server].map(|ns| {
            let Ok(out) = ns.ip(&["-s", "-j", "link", "show", "dev", TUN_NAME]) else {
                return 0;
            };
            let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
            let s = &v[0]["stats64"];
            ["tx", "rx"]
                .iter()
                .map(|d| s[d]["dropped"].as_u64().unwrap_or(0))
                .sum()
        })
    }
}

/// A packet between its read and its write.
#[derive(Debug)]
struct InFlight {
    due: u64,
    arrived: u64,
    flow: FlowId,
    len: usize,
    buf: Vec<u8>,
}

/// The emulated link: both directions' models and measurements.
#[derive(Debug)]
pub struct Emulator {
    cfg: EmuConfig,
    dirs: [Direction; 2],
    stats: [DirStats; 2],
    interval_ns: u64,
    pcap: Option<(PathBuf, PcapFile<BufWriter<File>>)>,
}

/// The narrowest interval the throughput series are binned at.
pub const MIN_INTERVAL: StdDuration = StdDuration::from_millis(1);

impl Emulator {
    /// An emulator for `cfg`, whose series are binned every `interval` (at least
    /// [`MIN_INTERVAL`]).
    pub fn new(cfg: EmuConfig, interval: StdDuration) -> Result<Self, EmuError> {
        cfg.validate().map_err(EmuError::Config)?;
        if interval < MIN_INTERVAL {
            return Err(EmuError::Config(format!(
                "interval {interval:?} is shorter than the series' {MIN_INTERVAL:?} \
                 resolution; give e.g. 100ms"
            )));
        }
        // Each direction draws its own stream from the seed.
        let dirs = [
            Direction::new(&cfg.up, cfg.seed),
            Direction::new(&cfg.down, cfg.seed ^ 0x9e37_79b9_7f4a_7c15),
        ];
        let interval_ns = interval.as_nanos() as u64;
        Ok(Emulator {
            cfg,
            dirs,
            stats: [DirStats::new(interval_ns), DirStats::new(interval_ns)],
            interval_ns,
            pcap: None,
        })
    }

    /// Also writes every delivered packet (its first 128 bytes) to a pcap file.
    pub fn capture(&mut self, path: &Path) -> Result<(), EmuError> {
        let err = |err| EmuError::Pcap {
            path: path.to_path_buf(),
            err,
        };
        let f = File::create(path).map_err(err)?;
        let pcap = PcapFile::new(BufWriter::new(f), SNAPLEN).map_err(err)?;
        self.pcap = Some((path.to_path_buf(), pcap));
        Ok(())
    }

    /// Carries packets between the pair's namespaces until `stop` is set; returns
    /// what the run measured.
    pub fn run(mut self, pair: &Pair, stop: &AtomicBool) -> Result<EmuReport, EmuError> {
        // Sleeps end up to the timer slack late (50 µs by default); ask for 1 ns so
        // a ppoll timeout means what it says. Failure only costs precision.
        let _ = nix::sys::prctl::set_timerslack(1);
        // Ahead of the host's other work on the timing core (`cpu` says why).
        let raised = cpu::Raised::new();
        // The CPU the steering left free (only if the pair was steered away from it).
        let timing_cpu = pair
            .steering()
            .and(cpu::timing_cpu())
            .filter(|&c| cpu::pin_to(c).is_ok());
        // Its CPU never idles, so a virtual machine's is never halted (`cpu`).
        let awake = timing_cpu.and_then(cpu::Awake::new);
        // The CPUs the applications run on, whose steal the report gives too.
        let apps_cpus: Vec<usize> = timing_cpu.map_or_else(Vec::new, |t| {
            cpu::allowed().into_iter().filter(|&c| c != t).collect()
        });
        let own_core_spin = if timing_cpu.is_some() {
            SPIN
        } else {
            SPIN_SHARED
        }
        .as_nanos() as u64;
        let mut contention = Contention::new();
        let steal0 = cpu::steal_ticks();
        let clock = Clock::new();
        let cpu0 = thread_cpu();
        let offload = pair.offload();
        // Where the IP packet starts in a frame.
        let off = if offload { VNET_HDR_LEN } else { 0 };
        let seg_size = off + usize::from(self.cfg.mtu);
        let tuns = [&pair.client_tun, &pair.server_tun];
        let mut io = Io {
            pool: Vec::new(),
            seg_size,
            off,
            // A super-packet read lands here before it is split.
            big: vec![0u8; if offload { VNET_HDR_LEN + MAX_SUPER } else { 0 }],
            joined: Vec::with_capacity(VNET_HDR_LEN + MAX_SUPER),
            segs: Vec::with_capacity(64),
            scratch: Vec::new(),
            lateness: lateness_histogram(),
            write_errors: 0,
            malformed: 0,
            super_reads: [0; 2],
            super_writes: [0; 2],
        };
        let mut queues: [VecDeque<InFlight>; 2] = [VecDeque::new(), VecDeque::new()];
        // Wall time in turns (sleeps left out), and in turns that moved no packet
        // and only spun: CPU time, but not work, so the busy figure leaves that
        // share out. A share, not a difference: the hypervisor's steal stretches
        // wall time but not the thread's CPU time.
        let mut turns_ns = 0u64;
        let mut idle_spin_ns = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let turn_start = clock.now().as_nanos();
            let mut moved = false;
            for d in 0..2 {
                // Read what has arrived (a few reads, so writes stay on time) ...
                for _ in 0..BATCH {
                    match self.read_one(&mut io, tuns[d], d, &clock, &mut queues[d]) {
                        Ok(true) => moved = true,
                        Ok(false) => break,
                        Err(e) => return Err(EmuError::Tun(e)),
                    }
                }
                // ... and write what is due, in order, to the other side.
                while queues[d]
                    .front()
                    .is_some_and(|p| p.due <= clock.now().as_nanos())
                {
                    self.write_due(&mut io, tuns[1 - d], d, &clock, &mut queues[d]);
                    moved = true;
                }
            }
            // Sleep until just before the next departure, or until a packet comes.
            let next = queues.iter().filter_map(|q| q.front().map(|p| p.due)).min();
            let now = clock.now().as_nanos();
            let spin = if contention.contended(now) {
                SPIN_CONTENDED.as_nanos() as u64
            } else {
                own_core_spin
            };
            let timeout = match next {
                Some(t) if t <= now + spin => None,
                Some(t) => Some(StdDuration::from_nanos(t - now - spin).min(IDLE)),
                None => Some(IDLE),
            };
            let turn_ns = clock.now().as_nanos() - turn_start;
            turns_ns += turn_ns;
            let Some(timeout) = timeout else {
                // Busy-poll: the next turn reads and writes again at once.
                std::hint::spin_loop();
                if !moved {
                    idle_spin_ns += turn_ns;
                }
                continue;
            };
            let mut fds = [
                PollFd::new(pair.client_tun.as_fd(), PollFlags::POLLIN),
                PollFd::new(pair.server_tun.as_fd(), PollFlags::POLLIN),
            ];
            match ppoll(&mut fds, Some(TimeSpec::from(timeout)), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(EmuError::Tun(e.into())),
            }
        }
        let wall = clock.now().as_secs_f64();
        let cpu = thread_cpu() - cpu0;
        let tun_drops = pair.tun_drops();
        if let Some((path, pcap)) = self.pcap.take() {
            pcap.finish().map_err(|err| EmuError::Pcap { path, err })?;
        }
        let busy = cpu * (1.0 - idle_spin_ns as f64 / turns_ns.max(1) as f64);
        // The timing CPU's steal; unpinned, the thread may have run on any. And
        // the most any CPU the applications ran on lost.
        let steal_cpus = timing_cpu.map_or_else(cpu::allowed, |c| vec![c]);
        let steal1 = cpu::steal_ticks();
        let apps_steal_s = cpu::busiest_steal_s(&steal0, &steal1, &apps_cpus);
        let mut health = Health::judge(
            &io.lateness,
            tun_drops,
            io.write_errors,
            [cpu / wall.max(1e-9), busy / wall.max(1e-9)],
            wall,
            [cpu::steal_s(&steal0, &steal1, &steal_cpus), apps_steal_s],
        );
        health.offload = offload;
        health.timing_cpu = timing_cpu;
        health.timing_nice = raised.nice();
        health.kept_awake = awake.is_some();
        health.contended_s = contention.contended_s();
        health.steering = pair.steering().map(str::to_string);
        health.malformed = io.malformed;
        health.super_reads = io.super_reads;
        health.super_writes = io.super_writes;
        Ok(EmuReport {
            seed: self.cfg.seed,
            interval_s: self.interval_ns as f64 * 1e-9,
            up: DirReport::new(
                "up",
                &self.cfg.up,
                &self.stats[0],
                self.dirs[0].peak_backlog_bytes,
            ),
            down: DirReport::new(
                "down",
                &self.cfg.down,
                &self.stats[1],
                self.dirs[1].peak_backlog_bytes,
            ),
            health,
        })
    }

    /// Reads one frame from `tun` (direction `d`) if one is waiting, splits a
    /// super-packet into segments, and hands each to the model. False when nothing
    /// was waiting.
    fn read_one(
        &mut self,
        io: &mut Io,
        tun: &Tun,
        d: usize,
        clock: &Clock,
        queue: &mut VecDeque<InFlight>,
    ) -> io::Result<bool> {
        if io.big.is_empty() {
            let mut buf = io.take();
            let n = match tun.recv(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    io.pool.push(buf);
                    return Ok(e.kind() == io::ErrorKind::Interrupted);
                }
                Err(e) => return Err(e),
            };
            self.admit(io, d, clock.now(), buf, n, queue);
            return Ok(true);
        }
        let n = match tun.recv(&mut io.big) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(true),
            Err(e) => return Err(e),
        };
        let now = clock.now();
        let big = std::mem::take(&mut io.big);
        let mut segs = std::mem::take(&mut io.segs);
        let mut scratch = std::mem::take(&mut io.scratch);
        let res = gso::split(&big[..n], &mut scratch, |seg| {
            if seg.len() <= io.seg_size {
                let mut b = io.take();
                b[..seg.len()].copy_from_slice(seg);
                segs.push((b, seg.len()));
            }
        });
        io.big = big;
        io.scratch = scratch;
        if res.is_err() {
            io.malformed += 1;
        }
        if segs.len() > 1 {
            io.super_reads[0] += 1;
            io.super_reads[1] += segs.len() as u64;
        }
        for (b, len) in segs.drain(..) {
            self.admit(io, d, now, b, len, queue);
        }
        io.segs = segs;
        Ok(true)
    }

    /// Counts a frame of `len` bytes in `buf` and asks the model its fate.
    fn admit(
        &mut self,
        io: &mut Io,
        d: usize,
        now: Instant,
        mut buf: Vec<u8>,
        len: usize,
        queue: &mut VecDeque<InFlight>,
    ) {
        let ip = &buf[io.off..len];
        let flow = self.stats[d].arrive(now.as_nanos(), ip);
        // Not IPv4 (nothing else crosses): best effort, not ECN-capable.
        let (dscp, ecn) = Ipv4Packet::new_checked(ip).map_or((0, 0), |p| (p.dscp(), p.ecn()));
        let pkt = Arrival {
            len: ip.len(),
            dscp,
            // ECT(1), ECT(0) and CE are all ECN-capable (RFC 3168 §5); marking a CE
            // packet leaves it CE rather than dropping it.
            ect: ecn != 0,
        };
        let v = match self.dirs[d].handle(now, pkt) {
            Verdict::Deliver(v) => v,
            Verdict::Lost => {
                self.stats[d].lost(flow);
                io.pool.push(buf);
                return;
            }
            Verdict::Overflow => {
                self.stats[d].overflow(flow);
                io.pool.push(buf);
                return;
            }
            Verdict::Aqm => {
                self.stats[d].aqm(flow);
                io.pool.push(buf);
                return;
            }
        };
        if v.ce {
            // Only an IPv4 packet can have been found ECN-capable.
            if let Ok(mut p) = Ipv4Packet::new_checked(&mut buf[io.off..len]) {
                p.set_ecn(3);
                p.fill_checksum();
            }
        }
        self.stats[d].impaired(flow, v.held, v.copy.is_some(), v.ce);
        if let Some(at) = v.copy {
            let mut copy = io.take();
            copy[..len].copy_from_slice(&buf[..len]);
            insert(
                queue,
                InFlight {
                    due: at.as_nanos(),
                    arrived: now.as_nanos(),
                    flow,
                    len,
                    buf: copy,
                },
            );
        }
        insert(
            queue,
            InFlight {
                due: v.at.as_nanos(),
                arrived: now.as_nanos(),
                flow,
                len,
                buf,
            },
        );
    }

    /// Writes the packet at the front of `queue`, which is due, to `tun`. With
    /// offloads, the due segments right behind it that continue the same TCP flow go
    /// in the same write, as one super-packet: a late turn catches up in fewer
    /// system calls.
    fn write_due(
        &mut self,
        io: &mut Io,
        tun: &Tun,
        d: usize,
        clock: &Clock,
        queue: &mut VecDeque<InFlight>,
    ) {
        let now = clock.now().as_nanos();
        let mut n = 1;
        if io.off > 0 {
            if let Some(mut prev) = SegInfo::of(&queue[0].buf[..queue[0].len]) {
                let mss = prev.payload();
                let mut bytes = queue[0].len;
                while let Some(p) = queue.get(n) {
                    if p.due > now || bytes + p.len > MAX_SUPER {
                        break;
                    }
                    match SegInfo::of(&p.buf[..p.len]) {
                        Some(next) if prev.continues(&next, mss) => {
                            prev = next;
                            bytes += p.len - io.off;
                            n += 1;
                        }
                        _ => break,
                    }
                }
            }
        }
        let res = if n == 1 {
            let p = &queue[0];
            tun.send(&p.buf[..p.len])
        } else {
            let frames: Vec<&[u8]> = queue.iter().take(n).map(|p| &p.buf[..p.len]).collect();
            gso::coalesce(&frames, &mut io.joined);
            io.super_writes[0] += 1;
            io.super_writes[1] += n as u64;
            tun.send(&io.joined)
        };
        let sent_at = clock.now().as_nanos();
        for _ in 0..n {
            let p = queue.pop_front().expect("counted above");
            match res {
                Ok(_) => {
                    let _ = io.lateness.record((now - p.due).max(1));
                    self.stats[d].deliver(p.flow, sent_at, p.arrived, p.len - io.off);
                    if let Some((_, pcap)) = &mut self.pcap {
                        let ip = &p.buf[io.off..p.len];
                        pcap.record(
                            sent_at,
                            &ip[..ip.len().min(SNAPLEN as usize)],
                            ip.len() as u32,
                        );
                    }
                }
                Err(_) => io.write_errors += 1,
            }
            io.pool.push(p.buf);
        }
    }
}

/// The loop's buffers and counters.
struct Io {
    /// Segment buffers not in use.
    pool: Vec<Vec<u8>>,
    /// Bytes of a segment buffer: a frame of one MTU.
    seg_size: usize,
    /// Where the IP packet starts in a frame (the virtio-net header's length, or 0).
    off: usize,
    /// The read buffer for super-packets (empty without offloads).
    big: Vec<u8>,
    /// The write buffer for coalesced super-packets.
    joined: Vec<u8>,
    /// The segments of the super-packet being admitted.
    segs: Vec<(Vec<u8>, usize)>,
    /// Working space of the splitter.
    scratch: Vec<u8>,
    lateness: Histogram<u64>,
    write_errors: u64,
    /// Super-packets that could not be split (dropped, counted).
    malformed: u64,
    super_reads: [u64; 2],
    super_writes: [u64; 2],
}

impl Io {
    fn take(&mut self) -> Vec<u8> {
        self.pool
            .pop()
            .unwrap_or_else(|| vec![0; self.seg_size + 1])
    }
}

/// Queues `p` behind every packet due no later than it: in arrival order while
/// the link is FIFO (a push at the back), by departure once impairments reorder.
fn insert(queue: &mut VecDeque<InFlight>, p: InFlight) {
    let mut i = queue.len();
    while i > 0 && queue[i - 1].due > p.due {
        i -= 1;
    }
    queue.insert(i, p);
}

/// Whether another task has been taking the timing thread's core.
///
/// A loop that busy-polls never sleeps, so the scheduler cannot preempt anything
/// on its behalf: another process's fair share then arrives as whole time
/// slices, a millisecond or so during which nothing leaves. The sign is the
/// time the thread spent runnable but waiting for the core (the second field of
/// `/proc/thread-self/schedstat`, `Documentation/scheduler/sched-stats.rst`):
/// when it grows by more than [`Contention::WAITED`] between two readings, the
/// loop sleeps up to [`SPIN_CONTENDED`] before a departure instead of spinning,
/// so the other task runs in the gaps and each wake-up takes the core back; a
/// second without such growth restores the long margin. The count of
/// involuntary switches was tried first: a kernel worker's brief turn raised it
/// on a quiet host too, and the short margin then cost a 1 Gb/s run up to a
/// fifth of a core for nothing.
struct Contention {
    schedstat: Option<File>,
    next_check: u64,
    waited_ns: u64,
    until: u64,
    /// Readings that found the core contended, each standing for [`Self::EVERY`].
    contended_checks: u64,
}

impl Contention {
    /// How often the wait is read, ns (a `pread` each time).
    const EVERY: u64 = 10_000_000;
    /// Waiting for the core longer than this between readings means contention,
    /// ns: a time slice of another task's (4 ms here, a tick at 250 Hz, beside a
    /// nice-0 hog). Shorter waits are brief turns of higher-priority work (on the
    /// 2-core VM, the VM agent at nice -10: 150-600 µs about every 0.4 s, read
    /// with a scratch print of each reading) that no
    /// margin prevents. With 100 µs here those turns kept the short margin on
    /// for most of a run, each departure then met a wake-up's delay, and where
    /// the CPU was not kept awake ([`cpu::Awake`]) the hypervisor took the
    /// halted CPU in the sleeps.
    const WAITED: u64 = 1_000_000;
    /// How long one sign of contention keeps the short margin, ns. Beside a
    /// nice-0 hog each hold ends in one of its time slices (a burst of late
    /// packets): with 250 ms, a 2000-packet/s run met 12 in 4.5 s and its
    /// lateness p99 was 1.1 ms; with a second, 11-28 µs (2026-11-29; the 250 ms
    /// hold was a scratch patch, not kept).
    const HOLD: u64 = 1_000_000_000;

    /// For the calling thread (without `schedstat`, never contended).
    fn new() -> Contention {
        let schedstat = File::open("/proc/thread-self/schedstat").ok();
        let mut c = Contention {
            schedstat,
            next_check: 0,
            waited_ns: 0,
            until: 0,
            contended_checks: 0,
        };
        c.waited_ns = c.waited().unwrap_or(0);
        c
    }

    /// The thread's time runnable but not running so far, ns.
    fn waited(&self) -> Option<u64> {
        let mut buf = [0u8; 96];
        let n = self.schedstat.as_ref()?.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_whitespace().nth(1)?.parse().ok()
    }

    /// Whether the core is contended at `now` (ns on the run's clock).
    fn contended(&mut self, now: u64) -> bool {
        if now >= self.next_check {
            self.next_check = now + Self::EVERY;
            if let Some(w) = self.waited() {
                if w.saturating_sub(self.waited_ns) > Self::WAITED {
                    self.until = now + Self::HOLD;
                    self.contended_checks += 1;
                }
                self.waited_ns = w;
            }
        }
        now < self.until
    }

    /// About how long another task took the core from the timing thread, s.
    fn contended_s(&self) -> f64 {
        (self.contended_checks * Self::EVERY) as f64 * 1e-9
    }
}

/// CPU time of the calling thread, s.
fn thread_cpu() -> f64 {
    getrusage(UsageWho::RUSAGE_THREAD)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 * 1e-6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins on `cpu` for `ms` and returns how long the thread waited for the
    /// core meanwhile, as [`Contention`] reads it, ms; `peers` other threads
    /// spin there too.
    fn waited_while_spinning(cpu: usize, peers: usize, ms: u64) -> f64 {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let others: Vec<_> = (0..peers)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    cpu::pin_to(cpu).unwrap();
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let me = std::thread::spawn(move || {
            cpu::pin_to(cpu).unwrap();
            let c = Contention::new();
            let before = c.waited().expect("schedstat is readable");
            let clock = Clock::new();
            while clock.now().as_nanos() < ms * 1_000_000 {
                std::hint::spin_loop();
            }
            (c.waited().unwrap() - before) as f64 * 1e-6
        })
        .join()
        .unwrap();
        stop.store(true, Ordering::Relaxed);
        for o in others {
            o.join().unwrap();
        }
        me
    }

    /// What [`Contention`] reads is time spent waiting for the core, not time
    /// on it: beside three spinners at the same priority a spinning thread
    /// waits about three quarters of the time, alone (or beside whatever else
    /// the host runs there, such as another test) far less. Cumulative time on
    /// the CPU would fall instead. Tolerance: 40 ms of 200, where the expected
    /// difference is about 150 ms alone and 50 ms beside one outside spinner.
    #[test]
    fn contention_reads_the_time_spent_waiting_for_the_core() {
        let _one = cpu::spinning_test();
        let cpu = *cpu::allowed().last().expect("a CPU");
        let alone = waited_while_spinning(cpu, 0, 200);
        let shared = waited_while_spinning(cpu, 3, 200);
        assert!(
            shared > alone + 40.0,
            "waited {alone:.1} ms of 200 alone, {shared:.1} beside three spinners"
        );
    }

    #[test]
    fn insertion_keeps_departures_in_order_and_ties_in_arrival_order() {
        let mut q = VecDeque::new();
        for (i, due) in [10u64, 30, 20, 30, 5].into_iter().enumerate() {
            insert(
                &mut q,
                InFlight {
                    due,
                    arrived: i as u64,
                    flow: None,
                    len: 0,
                    buf: vec![],
                },
            );
        }
        let order: Vec<(u64, u64)> = q.iter().map(|p| (p.due, p.arrived)).collect();
        assert_eq!(order, [(5, 4), (10, 0), (20, 2), (30, 1), (30, 3)]);
    }
}
