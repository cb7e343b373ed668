//! `longhaul sim bench`: simulator speed on the reference scenario.
//!
//! It reads the wall clock (so it allows `clippy::disallowed_methods`, as the
//! transfer timer in `transfer.rs` does); the simulation itself never does.

use clap::Args;
use longhaul_sim::scenario::reference;

use crate::Failure;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Round-trip times to measure, ms.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1.0, 100.0])]
    rtt_ms: Vec<f64>,
    /// Random loss on data packets.
    #[arg(long, default_value_t = 1e-5)]
    loss: f64,
    /// Simulated seconds per run.
    #[arg(long, default_value_t = 60.0)]
    duration_s: f64,
    /// Runs per RTT, taken in turns (1 ms, 100 ms, 1 ms, ...) so that a machine whose
    /// speed drifts slows every RTT alike; the figures are the median run's, with the
    /// range beside them.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
}

/// One RTT's runs.
struct Runs {
    rtt_ms: f64,
    goodput_mbps: f64,
    delivered: u64,
    events: u64,
    walls: Vec<f64>,
}

impl Runs {
    /// The runs' wall times, shortest first.
    fn sorted_walls(&self) -> Vec<f64> {
        let mut w = self.walls.clone();
        w.sort_by(f64::total_cmp);
        w
    }
    /// Delivered data segments per wall-second of the median, fastest and slowest runs.
    fn rates(&self) -> (f64, f64, f64) {
        let w = self.sorted_walls();
        let rate = |wall: f64| self.delivered as f64 / wall;
        (rate(median(&w)), rate(w[0]), rate(w[w.len() - 1]))
    }
    /// The median run's wall time, s (read directly: a run too short to deliver a
    /// segment has no rate to divide by).
    fn median_wall(&self) -> f64 {
        median(&self.sorted_walls())
    }
}

/// The median of sorted `v` (the mean of the middle two for an even count).
fn median(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The processor the figures were measured on, from /proc/cpuinfo (Linux): its name,
/// family, model and stepping, nominal clock and the CPUs online. The same kind of
/// virtual machine lands on different processors from one day to the next, and the
/// rate moves with them by a third or more, so figures are only comparable beside
/// this line.
fn cpu_line() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let field = |key: &str| {
        info.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
    };
    let cpus = info
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count();
    // x86 names the model; other architectures may not (then the fields below, or
    // at least the CPU count, still tell two machines apart).
    let mut line = field("model name").unwrap_or_else(|| "unnamed processor".into());
    if let (Some(family), Some(model)) = (field("cpu family"), field("model")) {
        line += &format!(" (family {family}, model {model}");
        if let Some(stepping) = field("stepping") {
            line += &format!(", stepping {stepping}");
        }
        line += ")";
    }
    if let Some(mhz) = field("cpu MHz").and_then(|m| m.parse::<f64>().ok()) {
        line += &format!(", {mhz:.0} MHz");
    }
    Some(format!("{line}, {cpus} CPUs online"))
}

/// Peak resident memory of this process, from /proc (Linux), in KiB.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[allow(clippy::disallowed_methods)] // the bench timer reads the wall clock
pub fn run(args: BenchArgs) -> Result<(), Failure> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    let bad = |msg: String| Failure::input(anyhow::anyhow!(msg));
    let duration = std::time::Duration::try_from_secs_f64(args.duration_s)
        .ok()
        .filter(|d| positive(args.duration_s) && !d.is_zero())
        .ok_or_else(|| {
            bad(format!(
                "--duration-s {}: give a finite number of seconds, at least 1 ns (e.g. 60)",
                args.duration_s
            ))
        })?;
    if !(0.0..1.0).contains(&args.loss) {
        return Err(bad(format!(
            "--loss {}: give a probability in [0, 1) (e.g. 0.00001)",
            args.loss
        )));
    }
    if let Some(r) = args.rtt_ms.iter().find(|&&r| !positive(r)) {
        return Err(bad(format!(
            "--rtt-ms {r}: give finite round-trip times above zero, in ms (e.g. 1,100)"
        )));
    }
    let mut runs: Vec<Runs> = vec![];
    for round in 0..args.repeat {
        for (i, &rtt) in args.rtt_ms.iter().enumerate() {
            let mut s =
                reference(&format!("{}us", rtt * 500.0), args.loss).map_err(Failure::input)?;
            s.run.duration = duration;
            s.run.trace_interval = None;
            // At most 10 000 samples, as the scenario loader allows.
            s.run.sample_interval = s.run.sample_interval.min(duration).max(duration / 10_000);
            let start = std::time::Instant::now();
            let r = longhaul_sim::simulate(&s)?;
            let wall = start.elapsed().as_secs_f64();
            let f = &r.summary.flows[0];
            let segs = f.data_segments_sent.unwrap_or(0) + f.retransmits.unwrap_or(0);
            let delivered = r.summary.link("link1").map_or(segs, |l| l.delivered_pkts);
            if round == 0 {
                runs.push(Runs {
                    rtt_ms: rtt,
                    goodput_mbps: f.goodput_mbps,
                    delivered,
                    events: r.summary.events,
                    walls: vec![wall],
                });
                continue;
            }
            let first = &mut runs[i];
            // Every run of a scenario is the same run: a difference is a bug worth
            // a loud stop, not a figure.
            if (first.delivered, first.events) != (delivered, r.summary.events) {
                return Err(Failure::from(anyhow::anyhow!(
                    "RTT {rtt} ms: run {} delivered {delivered} segments in {} events, \
                     run 1 {} in {}: the simulator is not deterministic",
                    round + 1,
                    r.summary.events,
                    first.delivered,
                    first.events
                )));
            }
            first.walls.push(wall);
        }
    }
    outln!(
        "{:>8} {:>10} {:>14} {:>12} {:>14} {:>16} {:>10} {:>12}   {}",
        "RTT ms",
        "goodput",
        "data segs",
        "events",
        "wall s",
        "data segs/s",
        "events/s",
        "wall/sim-s",
        "data segs/s, fastest to slowest run"
    )?;
    for r in &runs {
        let (rate, fastest, slowest) = r.rates();
        let wall = r.median_wall();
        outln!(
            "{:>8} {:>7.1} Mb/s {:>14} {:>12} {:>14.3} {:>14.2} M {:>8.2} M {:>12.5}   {:.2}-{:.2} M ({} runs)",
            r.rtt_ms,
            r.goodput_mbps,
            r.delivered,
            r.events,
            wall,
            rate / 1e6,
            r.events as f64 / wall / 1e6,
            wall / args.duration_s,
            fastest / 1e6,
            slowest / 1e6,
            r.walls.len(),
        )?;
    }
    if runs.len() > 1 {
        let medians = runs.iter().map(|r| r.rates().0);
        let hi = medians.clone().fold(f64::MIN, f64::max);
        let lo = medians.fold(f64::MAX, f64::min);
        outln!(
            "fastest / slowest RTT (median data segs/s): {:.2}x",
            hi / lo
        )?;
    }
    if let Some(cpu) = cpu_line() {
        outln!("cpu: {cpu}")?;
    }
    if let Some(kib) = peak_rss_kib() {
        outln!(
            "peak memory (VmHWM) of this process: {:.1} MiB",
            kib as f64 / 1024.0
        )?;
    }
    Ok(())
}
