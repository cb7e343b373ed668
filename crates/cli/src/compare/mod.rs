//! `longhaul compare`: real stacks side by side over the same emulated link.
//!
//! Each scheme runs alone, as Pantheon runs them: one bulk transfer from the client
//! namespace to the server namespace for a fixed time, through a fresh emulated link
//! per run. The kernel's TCP is asked for a congestion controller by name
//! (`TCP_CONGESTION`); longhaul's UDT and AR-UDT run the same sans-IO engine as the
//! simulator, over UDP. Every figure is measured by the emulator, which sees every
//! packet, so all schemes are measured the same way.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::Args;
use longhaul_emu::clock::Clock;
use longhaul_emu::emulator::SERVER_ADDR;
use longhaul_emu::stats::EmuReport;
use longhaul_emu::{EmuConfig, Emulator, LossModel, Pair, QueueLimit};
use longhaul_model::jain;
use longhaul_model::units::{parse_queue, parse_rate, parse_time};
use longhaul_model::QueueSpec;
use longhaul_net::{UdtListener, UdtSocket};
use longhaul_proto::udt::{RateControl, UdtConnConfig};
use serde::Serialize;

use crate::Failure;

mod report;
mod sim;

use report::write_outputs;

/// Options of `longhaul compare`.
#[derive(Debug, Args)]
#[command(after_help = "\
Schemes: cubic, reno, bbr (the kernel's TCP, one stream); cubic-N, reno-N, bbr-N
(N parallel kernel TCP streams); udt, ar-udt (longhaul's UDT engine over UDP).
Random loss is applied to the data direction (client to server) only.

Writes OUT/summary.json (every run), OUT/results.md (a table per path) and per path
OUT/throughput-<rtt>-<loss>.png (throughput against time, first run of each scheme)
and OUT/delay-<rtt>-<loss>.png (throughput against p95 one-way delay, every run).
A run the emulator flags invalid (host drops, timer lateness) is run once more,
after waiting up to 30 s for a second in which the hypervisor took under 1 % of
every CPU and a timer kept time; if that one is invalid too it is kept, marked.
With --sim, the simulator runs the same path with the matching engine beside
each real run (kernel CUBIC <-> sim
CUBIC, Reno <-> NewReno, BBR <-> BBR, UDT <-> the same UDT engine); results.md
gains the simulated throughput, the real/sim ratio and the settings that could
not be matched; OUT/sim-<rtt>-<loss>.png plots real and simulated throughput
against time and OUT/ratio-<rtt>-<loss>.png their ratio per second.")]
pub struct CompareArgs {
    /// Comma-separated schemes.
    #[arg(long, default_value = "cubic,bbr,reno,udt,ar-udt,cubic-4")]
    schemes: String,
    /// Link rate, each way.
    #[arg(long, default_value = "100Mbps")]
    rate: String,
    /// Comma-separated round-trip propagation delays.
    #[arg(long, default_value = "50ms,100ms,200ms")]
    rtt: String,
    /// Comma-separated random loss rates of the data direction.
    #[arg(long, default_value = "0,1e-5,1e-4")]
    loss: String,
    /// DropTail limit: `1bdp`, `100pkts`, `1MB`.
    #[arg(long, default_value = "1bdp")]
    queue: String,
    /// How long each scheme sends.
    #[arg(long, default_value = "10s")]
    duration: String,
    /// Repetitions of every (path, scheme).
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Seed of the first run's loss model; run k uses seed + k.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory.
    #[arg(long, default_value = "results/compare")]
    out: PathBuf,
    /// One packet per TUN read and write instead of TCP super-packets.
    #[arg(long)]
    no_offload: bool,
    /// Also run the simulator on each path with the matching engine.
    #[arg(long)]
    sim: bool,
}

/// A transport to measure.
#[derive(Debug, Clone, PartialEq)]
enum Scheme {
    /// The kernel's TCP with congestion control `cc`, over `streams` connections.
    Kernel { cc: String, streams: u32 },
    /// longhaul's UDT engine with rate control `cc` (one of [`RateControl::NAMES`];
    /// the BBR ones are named `udt-bbr...` here, since `bbr` is the kernel's).
    Udt { cc: &'static str },
}

/// The name of UDT with rate control `cc` among the schemes: `udt` and `ar-udt` as
/// they are, `udt-` before the BBR family's (whose bare names are the kernel's).
fn udt_scheme_name(cc: &str) -> String {
    if cc.starts_with("bbr") {
        format!("udt-{cc}")
    } else {
        cc.to_string()
    }
}

impl Scheme {
    fn parse(s: &str) -> Result<Scheme, String> {
        let s = s.trim();
        if let Some(&cc) = RateControl::NAMES
            .iter()
            .find(|&&n| udt_scheme_name(n) == s)
        {
            return Ok(Scheme::Udt { cc });
        }
        let (cc, streams) = match s.split_once('-') {
            Some((cc, n)) => (cc, n.parse::<u32>().ok().filter(|n| (1..=64).contains(n))),
            None => (s, Some(1)),
        };
        match (cc, streams) {
            ("cubic" | "reno" | "bbr", Some(streams)) => Ok(Scheme::Kernel {
                cc: cc.to_string(),
                streams,
            }),
            _ => Err(format!(
                "`{s}` is not a scheme: use cubic, reno, bbr (optionally -N for N parallel \
                 streams, 1 to 64), or {}",
                RateControl::NAMES
                    .iter()
                    .map(|n| udt_scheme_name(n))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )),
        }
    }

    fn name(&self) -> String {
        match self {
            Scheme::Kernel { cc, streams: 1 } => cc.clone(),
            Scheme::Kernel { cc, streams } => format!("{cc}-{streams}"),
            Scheme::Udt { cc } => udt_scheme_name(cc),
        }
    }
}

/// One run's figures, as `summary.json` holds them.
#[derive(Debug, Clone, Serialize)]
struct Record {
    scheme: String,
    rtt_ms: f64,
    loss: f64,
    run: u32,
    seed: u64,
    /// Emulator-measured throughput of the data direction, first to last delivery.
    throughput_bps: f64,
    /// Bytes the receiving application read.
    app_bytes: u64,
    owd_p50_ms: f64,
    owd_p95_ms: f64,
    /// Packets dropped (random and queue) over packets offered, data direction.
    loss_rate: f64,
    queue_drops: u64,
    /// Packets the random loss model dropped over packets offered, data direction:
    /// the loss rate this run drew.
    random_loss: f64,
    /// Jain's index over the data flows (parallel streams), if more than one.
    jain: Option<f64>,
    valid: bool,
    problems: Vec<String>,
    lateness_us_p99: f64,
    /// Host-side drops at the client's and the server's TUN.
    tun_drops: u64,
    emulator_busy: f64,
    /// Emulator CPU share, busy-polling included.
    emulator_cpu: f64,
    series_bps: Vec<f64>,
    /// The problems of an invalid first attempt that this run replaced.
    rerun_of: Option<Vec<String>>,
    /// With --sim: the simulator's throughput on the same path, b/s.
    sim_throughput_bps: Option<f64>,
    /// With --sim: the simulator's per-interval throughput, b/s.
    sim_series_bps: Option<Vec<f64>>,
    /// With --sim: the random loss rate the simulated run drew.
    sim_random_loss: Option<f64>,
    /// With --sim: real over simulated throughput.
    real_over_sim: Option<f64>,
}

fn bad(flag: &str, msg: impl std::fmt::Display) -> Failure {
    Failure::input(anyhow!("--{flag}: {msg}"))
}

fn list<T>(flag: &str, s: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, Failure> {
    let v: Vec<T> = s
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| f(x.trim()))
        .collect::<Result<_, _>>()
        .map_err(|e| bad(flag, e))?;
    if v.is_empty() {
        return Err(bad(flag, "the list is empty"));
    }
    Ok(v)
}

/// Runs `longhaul compare`.
pub fn run(a: CompareArgs) -> Result<(), Failure> {
    let schemes = list("schemes", &a.schemes, Scheme::parse)?;
    let rate = parse_rate(&a.rate).map_err(|e| bad("rate", e))?;
    let rtts = list("rtt", &a.rtt, parse_time)?;
    let losses = list("loss", &a.loss, |s| {
        s.parse::<f64>()
            .ok()
            .filter(|p| (0.0..1.0).contains(p))
            .ok_or_else(|| format!("`{s}` is not a loss probability in [0, 1)"))
    })?;
    let queue = parse_queue(&a.queue).map_err(|e| bad("queue", e))?;
    let duration = parse_time(&a.duration).map_err(|e| bad("duration", e))?;
    if duration < Duration::from_secs(1) {
        return Err(bad("duration", "at least 1s"));
    }
    if a.runs == 0 {
        return Err(bad("runs", "at least 1"));
    }
    if a.out.exists() && !a.out.is_dir() {
        // (create_dir_all would say only "File exists".)
        return Err(bad(
            "out",
            format!("{} exists and is not a folder", a.out.display()),
        ));
    }
    std::fs::create_dir_all(&a.out).map_err(|e| {
        Failure::input(anyhow!(
            "--out {}: cannot create it: {e}; give a folder you can write to",
            a.out.display()
        ))
    })?;
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone()).context("signal handler")?;
    }
    let total = rtts.len() * losses.len() * schemes.len() * a.runs as usize;
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} runs, {elapsed} (ETA {eta}) {msg}",
        )
        .expect("valid template"),
    );
    let mut records = vec![];
    let mut k = 0u64;
    'all: for &rtt in &rtts {
        for &loss in &losses {
            for scheme in &schemes {
                for run in 0..a.runs {
                    if interrupted.load(Ordering::Relaxed) {
                        break 'all;
                    }
                    let seed = a.seed + k;
                    k += 1;
                    bar.set_message(format!("{} rtt {rtt:?} loss {loss}", scheme.name()));
                    let mut cfg = EmuConfig::symmetric(rate, rtt / 2, 0.0, seed);
                    if loss > 0.0 {
                        cfg.up.loss = LossModel::Bernoulli { p: loss };
                    }
                    let limit = match queue {
                        QueueSpec::Bdp(n) => {
                            QueueLimit::Bytes(((rate.bytes_in(rtt) as f64 * n) as u64).max(6000))
                        }
                        QueueSpec::Limit(limit) => limit,
                    };
                    cfg.up.queue = limit;
                    cfg.down.queue = limit;
                    let attempt = || {
                        one_run(cfg.clone(), !a.no_offload, scheme, duration, &interrupted)
                            .with_context(|| {
                                format!("{} over rtt {rtt:?}, loss {loss}", scheme.name())
                            })
                    };
                    let mut rec = attempt()?;
                    if !rec.valid && !interrupted.load(Ordering::Relaxed) {
                        // Once more: an invalid run measured the host, not the scheme.
                        // What made it invalid comes in spells of seconds, so the
                        // retry waits (up to half a minute) for a quiet second.
                        let first = rec.problems.clone();
                        let quiet = longhaul_emu::quiet::wait_for_quiet_host(
                            Duration::from_secs(30),
                            &interrupted,
                        );
                        let note = format!(
                            "{} rtt {rtt:?} loss {loss} run {run}: invalid ({}); running it \
                             once more ({quiet})",
                            scheme.name(),
                            first.join("; "),
                        );
                        if bar.is_hidden() {
                            eprintln!("{note}");
                        } else {
                            bar.println(note);
                        }
                        rec = attempt()?;
                        rec.rerun_of = Some(first);
                    }
                    rec.rtt_ms = rtt.as_secs_f64() * 1e3;
                    rec.loss = loss;
                    rec.run = run;
                    if a.sim {
                        let path = sim::SimPath {
                            rate,
                            rtt,
                            queue_bytes: match limit {
                                QueueLimit::Bytes(b) => b,
                                QueueLimit::Packets(n) => u64::from(n) * 1500,
                            },
                            loss,
                            duration,
                            seed,
                            udt_buffer_pkts: udt_buffer_pkts(rate.bytes_in(rtt)),
                        };
                        let f = sim::run(scheme, &path).with_context(|| {
                            format!("simulating {} over rtt {rtt:?}, loss {loss}", scheme.name())
                        })?;
                        rec.sim_throughput_bps = Some(f.throughput_bps);
                        rec.sim_series_bps = Some(f.series_bps);
                        rec.sim_random_loss = Some(f.random_loss);
                        if f.throughput_bps > 0.0 {
                            rec.real_over_sim = Some(rec.throughput_bps / f.throughput_bps);
                        }
                    }
                    let line = format!(
                        "{:<10} rtt {:>5.0} ms loss {:<7} run {run}: {:>9.2} Mb/s, p95 OWD {:>7.1} ms, loss {:.2e}{}{}",
                        rec.scheme,
                        rec.rtt_ms,
                        loss,
                        rec.throughput_bps / 1e6,
                        rec.owd_p95_ms,
                        rec.loss_rate,
                        rec.sim_throughput_bps
                            .map(|b| format!(", sim {:.2} Mb/s", b / 1e6))
                            .unwrap_or_default(),
                        if rec.valid { "" } else { "  [INVALID]" }
                    );
                    // A hidden bar (stderr is not a terminal) drops println.
                    if bar.is_hidden() {
                        eprintln!("{line}");
                    } else {
                        bar.println(line);
                    }
                    records.push(rec);
                    bar.inc(1);
                }
            }
        }
    }
    bar.finish_and_clear();
    write_outputs(&a.out, &records, rate.as_bps() as f64)?;
    eprintln!("wrote {}", a.out.join("results.md").display());
    if interrupted.load(Ordering::Relaxed) {
        eprintln!(
            "interrupted after {} runs; namespaces removed",
            records.len()
        );
        std::process::exit(130);
    }
    Ok(())
}

/// `longhaul bench emu`: one CUBIC flow per run at each rate; prints lateness,
/// busy share and validity, then the highest rate whose runs were all valid.
pub fn bench(
    rates: &[String],
    rtt: &str,
    duration: &str,
    runs: u32,
    offload: bool,
) -> Result<(), Failure> {
    let rtt = parse_time(rtt).map_err(|e| bad("rtt", e))?;
    let duration = parse_time(duration).map_err(|e| bad("duration", e))?;
    // As for `longhaul compare`. With no runs, every rate would pass vacuously.
    if duration < Duration::from_secs(1) {
        return Err(bad("duration", "at least 1s"));
    }
    if runs == 0 {
        return Err(bad("runs", "at least 1"));
    }
    let rates = rates
        .iter()
        .map(|r| parse_rate(r).map_err(|e| bad("rates", e)))
        .collect::<Result<Vec<_>, _>>()?;
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone()).context("signal handler")?;
    }
    outln!(
        "offloads {}, RTT {rtt:?}, one kernel CUBIC flow, {duration:?} per run",
        if offload { "on" } else { "off" }
    )?;
    outln!(
        "{:>10} {:>4} {:>12} {:>14} {:>12} {:>8} {:>9} {:>6}",
        "rate Mb/s",
        "run",
        "got Mb/s",
        "lateness p99",
        "TUN drops",
        "busy",
        "CPU+spin",
        "valid"
    )?;
    let mut best = None;
    for rate in rates {
        let mut all_valid = true;
        for run in 0..runs {
            let cfg = EmuConfig::symmetric(rate, rtt / 2, 0.0, 1 + u64::from(run));
            let scheme = Scheme::Kernel {
                cc: "cubic".into(),
                streams: 1,
            };
            let r = one_run(cfg, offload, &scheme, duration, &interrupted)?;
            outln!(
                "{:>10.0} {:>4} {:>12.1} {:>11.1} µs {:>12} {:>7.0}% {:>8.0}% {:>6}",
                rate.as_mbps_f64(),
                run,
                r.throughput_bps / 1e6,
                r.lateness_us_p99,
                r.tun_drops,
                r.emulator_busy * 100.0,
                r.emulator_cpu * 100.0,
                if r.valid { "yes" } else { "NO" }
            )?;
            all_valid &= r.valid;
            if interrupted.load(Ordering::Relaxed) {
                std::process::exit(130);
            }
        }
        if all_valid {
            best = Some(rate);
        }
    }
    match best {
        Some(b) => outln!(
            "highest rate with every run valid: {:.0} Mb/s",
            b.as_mbps_f64()
        )?,
        None => outln!("no rate had every run valid")?,
    }
    Ok(())
}

/// One scheme over one fresh emulated link.
fn one_run(
    cfg: EmuConfig,
    offload: bool,
    scheme: &Scheme,
    duration: Duration,
    interrupted: &Arc<AtomicBool>,
) -> anyhow::Result<Record> {
    let seed = cfg.seed;
    let bdp = cfg.up.rate.mean().bytes_in(cfg.up.delay + cfg.down.delay);
    let emu = Emulator::new(cfg, Duration::from_millis(100))?;
    let pair = Pair::create(1500, offload)?;
    let stop = AtomicBool::new(false);
    let (report, app_bytes) = std::thread::scope(|s| -> anyhow::Result<(EmuReport, u64)> {
        let h = s.spawn(|| emu.run(&pair, &stop));
        let work = workload(&pair, scheme, duration, bdp, interrupted);
        stop.store(true, Ordering::Relaxed);
        let report = h
            .join()
            .map_err(|_| anyhow!("the emulator thread panicked"))??;
        Ok((report, work?))
    })?;
    drop(pair);
    let up = &report.up;
    let data: Vec<f64> = up
        .flows
        .iter()
        .filter(|f| f.packets_out >= 100)
        .map(|f| f.throughput_bps)
        .collect();
    Ok(Record {
        scheme: scheme.name(),
        rtt_ms: 0.0,
        loss: 0.0,
        run: 0,
        seed,
        throughput_bps: up.throughput_bps,
        app_bytes,
        owd_p50_ms: up.owd_ms.map_or(0.0, |o| o.p50),
        owd_p95_ms: up.owd_ms.map_or(0.0, |o| o.p95),
        loss_rate: (up.lost_random + up.lost_queue) as f64 / up.packets_in.max(1) as f64,
        random_loss: up.lost_random as f64 / up.packets_in.max(1) as f64,
        queue_drops: up.lost_queue,
        jain: if data.len() > 1 { jain(&data) } else { None },
        valid: report.health.valid,
        problems: report.health.problems.clone(),
        lateness_us_p99: report.health.lateness_us_p99,
        tun_drops: report.health.tun_drops.iter().sum(),
        emulator_busy: report.health.busy_fraction,
        emulator_cpu: report.health.cpu_fraction,
        series_bps: up.series_bps.clone(),
        rerun_of: None,
        sim_throughput_bps: None,
        sim_series_bps: None,
        sim_random_loss: None,
        real_over_sim: None,
    })
}

/// UDT's buffers and flow window for a path of `bdp` bytes, packets: twice the
/// BDP, never below UDT4's defaults (8192 packets cap a 1 Gb/s x 200 ms path at
/// half its rate), as a user tuning UDT4 would set them; the kernel's TCP
/// autotunes to the same.
fn udt_buffer_pkts(bdp: u64) -> u32 {
    ((2 * bdp / 1500) as u32).max(8192)
}

const PORT: u16 = 5201;

/// Runs the scheme's senders in the client namespace for `duration` and its
/// receivers in the server namespace; returns the bytes the receivers read.
fn workload(
    pair: &Pair,
    scheme: &Scheme,
    duration: Duration,
    bdp: u64,
    interrupted: &Arc<AtomicBool>,
) -> anyhow::Result<u64> {
    let clock = Clock::new();
    let end = clock.now().as_nanos() + duration.as_nanos() as u64;
    let done = Arc::new(AtomicBool::new(false));
    let over = {
        let interrupted = interrupted.clone();
        let done = done.clone();
        move || {
            done.load(Ordering::Relaxed)
                || interrupted.load(Ordering::Relaxed)
                || clock.now().as_nanos() >= end
        }
    };
    let addr = SocketAddr::from((SERVER_ADDR, PORT));
    match scheme {
        Scheme::Kernel { cc, streams } => {
            let listener = pair.server.run(|| TcpListener::bind(addr))??;
            let n = *streams;
            let stop_rx = done.clone();
            let rx = pair.server.spawn(move || -> anyhow::Result<u64> {
                let mut readers = vec![];
                for _ in 0..n {
                    let (mut s, _) = listener.accept()?;
                    s.set_read_timeout(Some(Duration::from_millis(100)))?;
                    let stop = stop_rx.clone();
                    readers.push(std::thread::spawn(move || -> u64 {
                        let mut buf = vec![0u8; 1 << 20];
                        let mut got = 0;
                        loop {
                            match s.read(&mut buf) {
                                Ok(0) => return got,
                                Ok(k) => got += k as u64,
                                Err(_) if !stop.load(Ordering::Relaxed) => {}
                                Err(_) => return got,
                            }
                        }
                    }));
                }
                Ok(readers.into_iter().map(|r| r.join().unwrap_or(0)).sum())
            });
            let senders: Vec<_> = (0..n)
                .map(|_| {
                    let cc = cc.clone();
                    let over = over.clone();
                    pair.client.spawn(move || -> anyhow::Result<()> {
                        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
                        sock.set_tcp_congestion(cc.as_bytes()).with_context(|| {
                            format!("the kernel refused congestion control `{cc}` (see /proc/sys/net/ipv4/tcp_available_congestion_control)")
                        })?;
                        sock.connect(&addr.into())?;
                        let mut s: TcpStream = sock.into();
                        s.set_write_timeout(Some(Duration::from_millis(100)))?;
                        let buf = vec![0x5au8; 1 << 16];
                        while !over() {
                            match s.write(&buf) {
                                Ok(_) => {}
                                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                                Err(e) => return Err(e.into()),
                            }
                        }
                        let _ = s.shutdown(std::net::Shutdown::Both);
                        Ok(())
                    })
                })
                .collect();
            let mut first_err = None;
            for h in senders {
                if let Err(e) = h
                    .join()
                    .map_err(|_| anyhow!("a sender panicked"))?
                    .map_err(anyhow::Error::from)
                    .and_then(|r| r)
                {
                    first_err.get_or_insert(e);
                }
            }
            done.store(true, Ordering::Relaxed);
            if let Some(e) = first_err {
                // Unblock the acceptor if a sender never connected.
                for _ in 0..n {
                    let _ = pair
                        .server
                        .run(|| TcpStream::connect_timeout(&addr, Duration::from_millis(100)));
                }
                let _ = rx.join();
                return Err(e);
            }
            rx.join().map_err(|_| anyhow!("the receiver panicked"))??
        }
        Scheme::Udt { cc } => {
            let pkts = udt_buffer_pkts(bdp);
            let mut cfg = UdtConnConfig {
                rcv_buf_pkts: pkts,
                snd_buf_pkts: pkts,
                flight_flag_size: pkts.max(25_600),
                ..UdtConnConfig::default()
            };
            cfg.rate_control = RateControl::from_name(cc, cfg.rate_control.udt_config())
                .expect("one of the names listed");
            let listener = pair.server.run(|| UdtListener::bind(addr))??;
            let server_cfg = UdtConnConfig {
                socket_id: 2,
                ..cfg
            };
            let stop_rx = done.clone();
            let rx = pair.server.spawn(move || -> anyhow::Result<u64> {
                let mut s = listener.accept(server_cfg, Duration::from_secs(10))?;
                let mut buf = vec![0u8; 1 << 20];
                let mut got = 0;
                loop {
                    match s.read_within(&mut buf, Duration::from_millis(100))? {
                        Some(0) => return Ok(got),
                        Some(k) => got += k as u64,
                        None if stop_rx.load(Ordering::Relaxed) => return Ok(got),
                        None => {}
                    }
                }
            });
            let client_cfg = UdtConnConfig {
                socket_id: 1,
                isn: 7919,
                ..cfg
            };
            let tx = pair.client.spawn(move || -> anyhow::Result<()> {
                let mut s = UdtSocket::connect(addr, client_cfg, Duration::from_secs(10))?;
                let buf = vec![0x5au8; 1 << 16];
                while !over() {
                    s.write_all(&buf)?;
                }
                // Dropped unclosed: what is still buffered is not part of the run.
                Ok(())
            });
            let sent = tx.join().map_err(|_| anyhow!("the sender panicked"))?;
            done.store(true, Ordering::Relaxed);
            let got = rx
                .join()
                .map_err(|_| anyhow!("the receiver panicked"))???;
            sent??;
            Ok(got)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bbr` is the kernel's TCP BBR; UDT driven by BBR is `udt-bbr` (and the
    /// other BBR names likewise), and each name reads back as itself.
    #[test]
    fn kernel_and_udt_bbr_are_told_apart() {
        assert_eq!(
            Scheme::parse("bbr").unwrap(),
            Scheme::Kernel {
                cc: "bbr".into(),
                streams: 1
            }
        );
        assert_eq!(
            Scheme::parse("udt-bbr-lh").unwrap(),
            Scheme::Udt { cc: "bbr-lh" }
        );
        for n in [
            "udt",
            "ar-udt",
            "udt-bbr",
            "udt-bbr-v3",
            "udt-bbr-lh",
            "bbr-4",
            "cubic",
        ] {
            assert_eq!(Scheme::parse(n).unwrap().name(), n);
        }
        let e = Scheme::parse("bbr-lh").unwrap_err();
        assert!(e.contains("udt-bbr-lh"), "{e}");
    }
}
