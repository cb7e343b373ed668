//! `longhaul emu`: run commands in two namespaces joined by the emulated link.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::Args;
use longhaul_emu::config::MTU_RANGE;
use longhaul_emu::emulator::{CLIENT_ADDR, SERVER_ADDR};
use longhaul_emu::stats::{DirReport, EmuReport};
use longhaul_emu::{netns, EmuConfig, Emulator, LinkRate, LossModel, Pair, QueueLimit};
use longhaul_model::fifo::Aqm;
use longhaul_model::impair::{Impairments, Jitter, Reorder};
use longhaul_model::schedule;
use longhaul_model::trace::Trace;
use longhaul_model::units::{parse_queue, parse_rate, parse_time};
use longhaul_model::QueueSpec;

use crate::Failure;

/// Options of `longhaul emu`.
#[derive(Debug, Args)]
#[command(after_help = "\
The client namespace is 10.77.0.1 and the server 10.77.0.2; both commands also see
them as $LONGHAUL_CLIENT and $LONGHAUL_SERVER. \"up\" is client to server.

Examples:
  longhaul emu --rate 100Mbps --rtt 100ms --server 'iperf3 -s' -- iperf3 -c 10.77.0.2 -t 20
  longhaul emu --rate 1Gbps --rtt 50ms --loss-up 1e-4 --json run.json --duration 30s

Exit codes: 0 done; 1 the run failed or the client command failed; 2 bad input;
130 interrupted (Ctrl-C), after cleaning up.")]
pub struct EmuArgs {
    /// Link rate, each way.
    #[arg(long, default_value = "100Mbps")]
    rate: String,
    /// Link rate server to client, if it differs.
    #[arg(long)]
    rate_down: Option<String>,
    /// One-way propagation delay, each way.
    #[arg(long, default_value = "25ms", conflicts_with = "rtt")]
    delay: String,
    /// Round-trip propagation delay (half each way), instead of --delay.
    #[arg(long)]
    rtt: Option<String>,
    /// Random loss each way: a probability (Bernoulli) or
    /// `ge:P_GOOD_TO_BAD,P_BAD_TO_GOOD[,LOSS_GOOD,LOSS_BAD]` (Gilbert-Elliott, per
    /// packet; loss 0 and 1 by default), the fields of a scenario's loss table.
    #[arg(long, default_value = "0")]
    loss: String,
    /// Random loss client to server, overriding --loss.
    #[arg(long)]
    loss_up: Option<String>,
    /// Random loss server to client, overriding --loss.
    #[arg(long)]
    loss_down: Option<String>,
    /// DropTail queue limit each way: `1bdp` (of rate × RTT), `100pkts`, `1MB`.
    #[arg(long, default_value = "1bdp")]
    queue: String,
    /// Queue discipline each way: `droptail`, `red[:min=N,max=N,maxp=P,wq=W,
    /// gentle=on|off,ecn,bytes]` (thresholds in packets; RED drops, or with `ecn`
    /// marks ECN-capable packets, before the --queue limit), or `wred[:p1=MIN/MAX,
    /// p2=..,p3=..]` with thresholds per AF drop precedence (DSCP AFx1..AFx3).
    #[arg(long, default_value = "droptail")]
    aqm: String,
    /// Delay jitter each way: a standard deviation (`2ms`, normal) or
    /// `HALF_WIDTH,uniform`. Packets keep their order unless --jitter-reorder.
    #[arg(long)]
    jitter: Option<String>,
    /// Let jitter reorder packets (as netem's default) instead of keeping them FIFO.
    #[arg(long, requires = "jitter")]
    jitter_reorder: bool,
    /// Reordering each way: `P[,DELAY]`, each packet held back DELAY (1ms by
    /// default) with probability P, so those behind it overtake it.
    #[arg(long)]
    reorder: Option<String>,
    /// Duplication each way: each packet sent twice with this probability.
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// A TOML file of steps that change rate, delay and loss over time
    /// (`[[step]] at = "10s" rate = "50Mbps" delay = "40ms" loss = "1e-3"`).
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// A mahimahi trace (one delivery opportunity of 1500 bytes per line, in ms)
    /// for client to server, instead of --rate.
    #[arg(long)]
    trace_up: Option<PathBuf>,
    /// A mahimahi trace for server to client, instead of --rate.
    #[arg(long)]
    trace_down: Option<PathBuf>,
    /// MTU of the emulated link.
    #[arg(long, default_value_t = 1500)]
    mtu: u16,
    /// Seed of the loss models (printed; the same seed drops the same packets of the
    /// same packet sequence).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this long (otherwise when the client command exits, or on Ctrl-C).
    #[arg(long)]
    duration: Option<String>,
    /// Width of the throughput series' intervals.
    #[arg(long, default_value = "100ms")]
    interval: String,
    /// A command to start in the server namespace first (through `sh -c`).
    #[arg(long)]
    server: Option<String>,
    /// How long to give the server command before starting the client.
    #[arg(long, default_value = "300ms")]
    server_wait: String,
    /// Write the run's report (per-flow throughput, delays, losses, health) as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Capture every packet leaving the emulator (first 128 bytes) to a pcap file.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Exchange one packet per read and write with the TUN devices, instead of TCP
    /// super-packets (virtio-net headers, TSO): slower, for comparison.
    #[arg(long)]
    no_offload: bool,
    /// Remove namespaces left by `longhaul emu` processes that no longer run (after a
    /// kill -9), then exit.
    #[arg(long)]
    cleanup: bool,
    /// The command to run in the client namespace; the run ends when it exits.
    #[arg(last = true)]
    command: Vec<String>,
}

fn bad(flag: &str, msg: impl std::fmt::Display) -> Failure {
    Failure::input(anyhow!("--{flag}: {msg}"))
}

fn parse_loss(flag: &str, s: &str) -> Result<LossModel, Failure> {
    LossModel::parse(s).map_err(|e| bad(flag, e))
}

fn parse_trace(flag: &str, path: &Path) -> Result<LinkRate, Failure> {
    // A trace is a few thousand lines; 64 MiB is far beyond any.
    let text = crate::read_small_file(path, 64 << 20).map_err(|e| bad(flag, e))?;
    let t = Trace::parse(&text, &path.display().to_string()).map_err(|e| bad(flag, e))?;
    Ok(LinkRate::Trace(t))
}

/// Builds the link from the flags.
fn config(a: &EmuArgs) -> Result<EmuConfig, Failure> {
    let rate = parse_rate(&a.rate).map_err(|e| bad("rate", e))?;
    let rate_down = match &a.rate_down {
        Some(r) => parse_rate(r).map_err(|e| bad("rate-down", e))?,
        None => rate,
    };
    let delay = match &a.rtt {
        Some(r) => parse_time(r).map_err(|e| bad("rtt", e))? / 2,
        None => parse_time(&a.delay).map_err(|e| bad("delay", e))?,
    };
    let mut cfg = EmuConfig::symmetric(rate, delay, 0.0, a.seed);
    cfg.mtu = a.mtu;
    cfg.down.rate = LinkRate::Constant(rate_down);
    let both = parse_loss("loss", &a.loss)?;
    cfg.up.loss = match &a.loss_up {
        Some(s) => parse_loss("loss-up", s)?,
        None => both,
    };
    cfg.down.loss = match &a.loss_down {
        Some(s) => parse_loss("loss-down", s)?,
        None => both,
    };
    if let Some(p) = &a.trace_up {
        cfg.up.rate = parse_trace("trace-up", p)?;
    }
    if let Some(p) = &a.trace_down {
        cfg.down.rate = parse_trace("trace-down", p)?;
    }
    if !MTU_RANGE.contains(&a.mtu) {
        // (`validate` below would say so too, without the flag's name.)
        return Err(bad(
            "mtu",
            format!("{} is outside {MTU_RANGE:?} bytes", a.mtu),
        ));
    }
    let q = parse_queue(&a.queue).map_err(|e| bad("queue", e))?;
    for d in [&mut cfg.up, &mut cfg.down] {
        d.queue = match q {
            QueueSpec::Bdp(n) => {
                let rtt = delay + delay;
                let bdp = d.rate.mean().bytes_in(rtt) as f64 * n;
                // Never less than a few full packets, so a short path still works.
                QueueLimit::Bytes((bdp as u64).max(4 * u64::from(a.mtu)))
            }
            QueueSpec::Limit(limit) => limit,
        };
    }
    impairments(a, &mut cfg)?;
    cfg.validate().map_err(|e| Failure::input(anyhow!(e)))?;
    Ok(cfg)
}

/// Adds the queue discipline, impairments and schedule from the flags.
fn impairments(a: &EmuArgs, cfg: &mut EmuConfig) -> Result<(), Failure> {
    let jitter = a
        .jitter
        .as_deref()
        .map(|j| Jitter::parse(j, a.jitter_reorder).map_err(|e| bad("jitter", e)))
        .transpose()?;
    let reorder = a
        .reorder
        .as_deref()
        .map(|r| Reorder::parse(r).map_err(|e| bad("reorder", e)))
        .transpose()?;
    let schedule = match &a.schedule {
        Some(p) => {
            let text = crate::read_small_file(p, 1 << 20).map_err(|e| bad("schedule", e))?;
            schedule::parse(&text).map_err(|e| bad("schedule", format!("{}: {e}", p.display())))?
        }
        None => [vec![], vec![]],
    };
    let mtu = f64::from(cfg.mtu);
    for (d, steps) in [&mut cfg.up, &mut cfg.down].into_iter().zip(schedule) {
        let limit = match d.queue {
            QueueLimit::Packets(n) => f64::from(n),
            QueueLimit::Bytes(b) => b as f64 / mtu,
        };
        d.aqm = Aqm::parse(&a.aqm, limit).map_err(|e| bad("aqm", e))?;
        d.impair = Impairments {
            jitter,
            reorder,
            duplicate: a.duplicate,
        };
        d.impair.validate().map_err(|e| bad("duplicate", e))?;
        d.schedule = steps;
        d.validate().map_err(|e| bad("schedule", e))?;
    }
    Ok(())
}

/// Deletes namespaces whose `longhaul emu` process is gone.
fn cleanup() -> Result<(), Failure> {
    let mut removed = 0;
    for name in netns::list() {
        let Some(rest) = name.strip_prefix(netns::PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let ns = netns::Netns::adopt(&name);
        drop(ns); // kills what runs inside, deletes the namespace
        eprintln!("removed stale namespace {name}");
        removed += 1;
    }
    eprintln!("{removed} stale namespace(s) removed");
    Ok(())
}

fn spawn(ns: &netns::Netns, shell: &str, what: &str) -> Result<Child, Failure> {
    ns.command(shell)
        .env("LONGHAUL_CLIENT", CLIENT_ADDR.to_string())
        .env("LONGHAUL_SERVER", SERVER_ADDR.to_string())
        .stdin(if what == "client" {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .with_context(|| format!("cannot start the {what} command"))
        .map_err(Failure::from)
}

fn shell_quote(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `longhaul emu`.
pub fn run(a: EmuArgs) -> Result<(), Failure> {
    if a.cleanup {
        return cleanup();
    }
    let cfg = config(&a)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_time(d).map_err(|e| bad("duration", e)))
        .transpose()?;
    if duration.is_some_and(|d| d.is_zero()) {
        // Zero stopped the run before a packet crossed, and wrote an empty report.
        return Err(bad(
            "duration",
            "0 stops before anything runs; give a time above zero (e.g. 30s), or leave \
             it out to stop when the client command exits",
        ));
    }
    let interval = parse_time(&a.interval).map_err(|e| bad("interval", e))?;
    if interval < longhaul_emu::MIN_INTERVAL {
        return Err(bad(
            "interval",
            format!(
                "{} is shorter than the {:?} the series resolve; give e.g. 100ms",
                a.interval,
                longhaul_emu::MIN_INTERVAL
            ),
        ));
    }
    let server_wait = parse_time(&a.server_wait).map_err(|e| bad("server-wait", e))?;
    if let Some(p) = &a.json {
        crate::writable("json", p)?;
    }
    if a.command.is_empty() && duration.is_none() {
        eprintln!("no client command and no --duration: running until Ctrl-C");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone()).context("signal handler")?;
    }
    let mut emu = Emulator::new(cfg.clone(), interval).map_err(|e| Failure::input(anyhow!(e)))?;
    if let Some(p) = &a.pcap {
        emu.capture(p).map_err(|e| Failure::input(anyhow!(e)))?;
    }
    let pair = Pair::create(cfg.mtu, !a.no_offload).context("cannot set up the emulated link")?;
    if !a.no_offload && !pair.offload() {
        eprintln!("warning: the kernel refused TUN offloads; one packet per read and write");
    }
    eprintln!(
        "longhaul emu: client {} (netns {}) <-> server {} (netns {}); up {} / down {}, \
         one-way delay {:?}, seed {}",
        CLIENT_ADDR,
        pair.client.name(),
        SERVER_ADDR,
        pair.server.name(),
        describe_rate(&cfg.up.rate),
        describe_rate(&cfg.down.rate),
        cfg.up.delay,
        cfg.seed
    );
    let outcome = std::thread::scope(|s| -> Result<(EmuReport, Option<ExitStatus>), Failure> {
        let h = s.spawn(|| emu.run(&pair, &stop));
        let r = supervise(&a, &pair, duration, server_wait, &interrupted, &h);
        stop.store(true, Ordering::Relaxed);
        // Stop what runs inside before the namespaces go, and reap it.
        pair.client.kill_all(Duration::from_millis(500));
        pair.server.kill_all(Duration::from_millis(500));
        let mut children = r?;
        for c in children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let report = h
            .join()
            .map_err(|_| anyhow!("the emulator thread panicked"))??;
        Ok((report, children.client_status))
    });
    drop(pair);
    let (report, client_status) = outcome?;
    print_report(&report);
    if let Some(p) = &a.json {
        let text = serde_json::to_string_pretty(&report).context("report")?;
        std::fs::write(p, text + "\n").with_context(|| format!("cannot write {}", p.display()))?;
    }
    if interrupted.load(Ordering::Relaxed) {
        eprintln!("interrupted; namespaces removed");
        std::process::exit(130);
    }
    match client_status {
        Some(s) if !s.success() => Err(anyhow!("the client command failed ({s})").into()),
        _ => Ok(()),
    }
}

/// The server and client processes of a run.
struct Children {
    server: Option<Child>,
    client: Option<Child>,
    client_status: Option<ExitStatus>,
}

impl Children {
    fn iter_mut(&mut self) -> impl Iterator<Item = Option<&mut Child>> {
        [self.server.as_mut(), self.client.as_mut()].into_iter()
    }
}

/// Starts the commands and waits for the end of the run: the client exits, the
/// duration passes, a signal comes, or the emulator fails.
fn supervise(
    a: &EmuArgs,
    pair: &Pair,
    duration: Option<Duration>,
    server_wait: Duration,
    interrupted: &AtomicBool,
    emu: &std::thread::ScopedJoinHandle<'_, Result<EmuReport, longhaul_emu::EmuError>>,
) -> Result<Children, Failure> {
    let mut ch = Children {
        server: None,
        client: None,
        client_status: None,
    };
    if let Some(cmd) = &a.server {
        ch.server = Some(spawn(&pair.server, cmd, "server")?);
        std::thread::sleep(server_wait);
    }
    if !a.command.is_empty() {
        ch.client = Some(spawn(&pair.client, &shell_quote(&a.command), "client")?);
    }
    let step = Duration::from_millis(20);
    let mut waited = Duration::ZERO;
    loop {
        if interrupted.load(Ordering::Relaxed) || emu.is_finished() {
            break;
        }
        if duration.is_some_and(|d| waited >= d) {
            break;
        }
        if let Some(c) = &mut ch.client {
            if let Some(st) = c.try_wait().context("client command")? {
                ch.client_status = Some(st);
                break;
            }
        }
        std::thread::sleep(step);
        waited += step;
    }
    Ok(ch)
}

fn describe_rate(r: &LinkRate) -> String {
    match r {
        LinkRate::Constant(b) => format!("{:.3} Mb/s", b.as_mbps_f64()),
        LinkRate::Trace(t) => format!("trace ({:.3} Mb/s mean)", t.mean_rate().as_mbps_f64()),
    }
}

fn print_dir(d: &DirReport) {
    let owd = d
        .owd_ms
        .map(|o| {
            format!(
                "OWD p50 {:.2} / p95 {:.2} / p99 {:.2} ms",
                o.p50, o.p95, o.p99
            )
        })
        .unwrap_or_else(|| "no packets".into());
    eprintln!(
        "{:>4}: {:.3} Mb/s, utilisation {:.1} %, {owd}; lost {} random, {} queue; peak queue {} B",
        d.name,
        d.throughput_bps / 1e6,
        d.utilisation * 100.0,
        d.lost_random,
        d.lost_queue,
        d.peak_queue_bytes
    );
    if d.lost_aqm + d.reordered + d.duplicated + d.ce_marked > 0 {
        eprintln!(
            "      RED dropped {}, marked CE {}; reordered {}, duplicated {}",
            d.lost_aqm, d.ce_marked, d.reordered, d.duplicated
        );
    }
    let mut flows: Vec<_> = d.flows.iter().collect();
    flows.sort_by_key(|f| std::cmp::Reverse(f.bytes_out));
    for f in flows.iter().take(8) {
        eprintln!(
            "      {:<44} {:>10.3} Mb/s {:>10} pkts  lost {}/{}",
            f.flow,
            f.throughput_bps / 1e6,
            f.packets_out,
            f.lost_random,
            f.lost_queue
        );
    }
    if flows.len() > 8 {
        eprintln!("      … and {} more flows", flows.len() - 8);
    }
}

fn print_report(r: &EmuReport) {
    print_dir(&r.up);
    print_dir(&r.down);
    let h = &r.health;
    eprintln!(
        "health: {} (lateness p99 {:.1} µs, TUN drops {:?}, emulator busy {:.0} % of a core, \
         {:.0} % with busy-polling)",
        if h.valid { "valid" } else { "INVALID" },
        h.lateness_us_p99,
        h.tun_drops,
        h.busy_fraction * 100.0,
        h.cpu_fraction * 100.0
    );
    for p in &h.problems {
        eprintln!("  - {p}");
    }
    if h.steal_s > 0.0 || h.apps_steal_s > 0.0 {
        eprintln!(
            "  the hypervisor took {:.2} s from the timing thread's CPUs and up to {:.2} s \
             from a CPU of the applications' (steal)",
            h.steal_s, h.apps_steal_s
        );
    }
    if h.contended_s > 0.0 {
        eprintln!(
            "  another process took the timing thread's core for about {:.2} s of {:.1} s",
            h.contended_s, h.wall_s
        );
    }
}
