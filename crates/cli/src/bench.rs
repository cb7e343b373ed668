//! `longhaul sim bench`: simulator speed on the reference scenario, and on many
//! flows sharing its path (`--flows`) or a dumbbell of them (`--dumbbell`).
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
    #[arg(long, default_value_t = REFERENCE_SECONDS)]
    duration_s: f64,
    /// Runs per RTT, taken in turns (1 ms, 100 ms, 1 ms, ...) so that a machine whose
    /// speed drifts slows every RTT alike; the figures are the median run's, with the
    /// range beside them.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Flows sharing the bottleneck, one run each (e.g. 1,10,100,1000): the
    /// reference flow repeated, starts spread over the first second. 1 is the
    /// reference scenario itself.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1u32],
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    flows: Vec<u32>,
    /// The bottleneck's rate (the reference's is 1Gbps; many flows want more).
    #[arg(long)]
    rate: Option<String>,
    /// The flows' congestion control (the reference's is newreno).
    #[arg(long)]
    cc: Option<String>,
    /// A dumbbell: each flow from its own sender over its own access link (10 Gb/s)
    /// to its own receiver, instead of all flows between the chain's two hosts.
    #[arg(long)]
    dumbbell: bool,
    /// Do not run the reference flow beside points that are not the reference (for
    /// a profile of the points alone); no cost multiples are then printed.
    #[arg(long)]
    no_reference: bool,
}

/// Simulated seconds of the single-flow bench (`longhaul sim bench`), and of the
/// reference runs set beside other points whatever their `--duration-s`: a shorter
/// run of one flow is mostly its start, and would flatter the points against it.
const REFERENCE_SECONDS: f64 = 60.0;

/// Whether `flows` flows under `args` are the reference scenario itself: one flow,
/// the reference's rate, control and path.
fn is_reference(args: &BenchArgs, flows: u32) -> bool {
    flows == 1 && args.rate.is_none() && args.cc.is_none() && !args.dumbbell
}

/// The scenario of one bench point: the reference scenario (`flows` is `None`, or
/// names the reference itself), or (other flows, rate, control or topology) its
/// parameters written out with those changes.
fn scenario(
    args: &BenchArgs,
    rtt_ms: f64,
    flows: Option<u32>,
) -> Result<longhaul_sim::Scenario, Failure> {
    let one_way = format!("{}us", rtt_ms * 500.0);
    let flows = match flows {
        Some(n) if !is_reference(args, n) => n,
        _ => return reference(&one_way, args.loss).map_err(Failure::input),
    };
    let rate = args.rate.as_deref().unwrap_or("1Gbps");
    let cc = args.cc.as_deref().unwrap_or("newreno");
    let loss = args.loss;
    let topology = if args.dumbbell {
        format!(
            "kind = \"dumbbell\"\npairs = {flows}\naccess = {{ rate = \"10Gbps\", delay = \"0ms\" }}\n\
             bottleneck = {{ rate = \"{rate}\", delay = \"{one_way}\", queue = \"1bdp\", loss = {loss:e} }}\n"
        )
    } else {
        format!(
            "kind = \"chain\"\n[[topology.links]]\nrate = \"10Gbps\"\ndelay = \"0ms\"\nqueue = \"1bdp\"\n\
             [[topology.links]]\nrate = \"{rate}\"\ndelay = \"{one_way}\"\nqueue = \"1bdp\"\nloss = {loss:e}\n"
        )
    };
    let mut text = format!("name = \"bench\"\nduration = \"1s\"\nseed = 1\n[topology]\n{topology}");
    for i in 0..flows {
        let start_us = u64::from(i) * 1_000_000 / u64::from(flows);
        text += &format!(
            "[[flow]]\nprotocol = \"tcp\"\ncc = \"{cc}\"\nsack = true\nmss = 1448\nack_every = 1\nstart = \"{start_us}us\"\n"
        );
    }
    text += "[outputs]\nplots = false\n";
    longhaul_sim::Scenario::parse(&text, std::path::Path::new("<bench>"))
        .map_err(|e| Failure::input(anyhow::anyhow!("--rate/--cc: {e}")))
}

/// One point's runs.
struct Runs {
    rtt_ms: f64,
    /// `None` for the reference flow run beside the points (see [`run`]).
    flows: Option<u32>,
    /// Simulated seconds per run.
    duration_s: f64,
    goodput_mbps: f64,
    delivered: u64,
    events: u64,
    walls: Vec<f64>,
}

impl Runs {
    /// What the point runs: "the reference flow", "N flows" or "N pairs (dumbbell)".
    fn label(&self, dumbbell: bool) -> String {
        match self.flows {
            None => "the reference flow".into(),
            Some(1) if dumbbell => "1 pair (dumbbell)".into(),
            Some(n) if dumbbell => format!("{n} pairs (dumbbell)"),
            Some(1) => "1 flow".into(),
            Some(n) => format!("{n} flows"),
        }
    }
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

/// `a / b` as "1.23x", or "-" when a run too short to deliver a segment leaves
/// nothing to divide.
fn multiple(a: f64, b: f64) -> String {
    if a > 0.0 && b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

/// The same multiple taken round by round: in each round the point's wall time per
/// delivered segment over the reference's in that round, which ran just before it,
/// as "; by round 2.20x median, 1.90-2.60x" (median, lowest, highest). Pairing the
/// runs of a round cancels what drifts slowly (another tenant, the host's clock
/// speed), which the ratio of two medians taken over the whole invocation does not;
/// where the two figures part, the rounds were uneven and more of them are wanted.
/// Empty with one round (the two are then the same) or nothing delivered.
fn by_round(reference: &Runs, point: &Runs) -> String {
    if point.walls.len() < 2 || reference.delivered == 0 || point.delivered == 0 {
        return String::new();
    }
    let mut m: Vec<f64> = reference
        .walls
        .iter()
        .zip(&point.walls)
        .map(|(r, p)| (p / point.delivered as f64) / (r / reference.delivered as f64))
        .filter(|m| m.is_finite())
        .collect();
    if m.is_empty() {
        return String::new();
    }
    m.sort_by(f64::total_cmp);
    format!(
        "; by round {:.2}x median, {:.2}-{:.2}x",
        median(&m),
        m[0],
        m[m.len() - 1]
    )
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
    let points_duration = std::time::Duration::try_from_secs_f64(args.duration_s)
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
    // Points that are not the reference are set against it (the cost per segment
    // the issue holds within 2x of the single-flow bench): unless `--flows` names
    // the reference itself, the reference flow runs first at each RTT, in the same
    // rounds, so that a machine whose speed drifts slows both alike, and for the
    // single-flow bench's 60 simulated seconds.
    let add_reference = !args.no_reference && !args.flows.iter().any(|&n| is_reference(&args, n));
    let per_rtt: Vec<Option<u32>> = add_reference
        .then_some(None)
        .into_iter()
        .chain(args.flows.iter().map(|&n| Some(n)))
        .collect();
    let points: Vec<(f64, Option<u32>)> = args
        .rtt_ms
        .iter()
        .flat_map(|&r| per_rtt.iter().map(move |&n| (r, n)))
        .collect();
    let mut runs: Vec<Runs> = vec![];
    for round in 0..args.repeat {
        for (i, &(rtt, flows)) in points.iter().enumerate() {
            let mut s = scenario(&args, rtt, flows)?;
            // The added reference runs as the single-flow bench does.
            let duration = match flows {
                None => std::time::Duration::from_secs_f64(REFERENCE_SECONDS),
                Some(_) => points_duration,
            };
            s.run.duration = duration;
            s.run.trace_interval = None;
            // At most 10 000 samples, as the scenario loader allows.
            s.run.sample_interval = s.run.sample_interval.min(duration).max(duration / 10_000);
            let start = std::time::Instant::now();
            let r = longhaul_sim::simulate(&s)?;
            let wall = start.elapsed().as_secs_f64();
            let f = &r.summary.flows;
            let segs: u64 = f
                .iter()
                .map(|f| f.data_segments_sent.unwrap_or(0) + f.retransmits.unwrap_or(0))
                .sum();
            let dumbbell = args.dumbbell && flows.is_some();
            let bottleneck = if dumbbell { "bottleneck" } else { "link1" };
            let delivered = r
                .summary
                .link(bottleneck)
                .map_or(segs, |l| l.delivered_pkts);
            let goodput = f.iter().map(|f| f.goodput_mbps).sum();
            if round == 0 {
                runs.push(Runs {
                    rtt_ms: rtt,
                    flows,
                    duration_s: duration.as_secs_f64(),
                    goodput_mbps: goodput,
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
                    "RTT {rtt} ms, {}: run {} delivered {delivered} segments in {} events, \
                     run 1 {} in {}: the simulator is not deterministic",
                    first.label(args.dumbbell),
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
        "{:>8} {:>10} {:>14} {:>12} {:>14} {:>16} {:>10} {:>12} {:>10} {:>6}   {}",
        "RTT ms",
        "goodput",
        "data segs",
        "events",
        "wall s",
        "data segs/s",
        "events/s",
        "wall/sim-s",
        "events/seg",
        "flows",
        "data segs/s, fastest to slowest run"
    )?;
    for r in &runs {
        let (rate, fastest, slowest) = r.rates();
        let wall = r.median_wall();
        let per_seg = if r.delivered > 0 {
            format!("{:.2}", r.events as f64 / r.delivered as f64)
        } else {
            "-".into()
        };
        outln!(
            "{:>8} {:>7.1} Mb/s {:>14} {:>12} {:>14.3} {:>14.2} M {:>8.2} M {:>12.5} {:>10} {:>6}   {:.2}-{:.2} M ({} runs)",
            r.rtt_ms,
            r.goodput_mbps,
            r.delivered,
            r.events,
            wall,
            rate / 1e6,
            r.events as f64 / wall / 1e6,
            wall / r.duration_s,
            per_seg,
            r.flows.map_or("ref".into(), |n| n.to_string()),
            fastest / 1e6,
            slowest / 1e6,
            r.walls.len(),
        )?;
    }
    let is_ref = |r: &Runs| r.flows.is_none_or(|n| is_reference(&args, n));
    for chunk in runs.chunks(per_rtt.len()) {
        // Each RTT's many-flow points against its first (the reference run beside
        // them aside).
        let points = &chunk[usize::from(add_reference)..];
        let base = points[0].rates().0;
        for r in &points[1..] {
            outln!(
                "RTT {} ms: {} flows / {} (median data segs/s): {}",
                r.rtt_ms,
                r.flows.unwrap_or(1),
                points[0].flows.unwrap_or(1),
                multiple(r.rates().0, base)
            )?;
        }
        // Each point that is not the reference against the reference: wall time per
        // delivered segment, medians, so the multiple is the reference's rate over
        // the point's.
        let Some(reference) = chunk.iter().find(|r| is_ref(r)) else {
            continue;
        };
        for r in chunk.iter().filter(|r| !is_ref(r)) {
            outln!(
                "RTT {} ms, {}: cost per data segment {} the reference flow's (median wall time per segment){}",
                r.rtt_ms,
                r.label(args.dumbbell),
                multiple(reference.rates().0, r.rates().0),
                by_round(reference, r)
            )?;
        }
    }
    if args.flows.len() == 1 && !add_reference && runs.len() > 1 {
        let medians = runs.iter().map(|r| r.rates().0);
        let hi = medians.clone().fold(f64::MIN, f64::max);
        let lo = medians.fold(f64::MAX, f64::min);
        outln!(
            "fastest / slowest RTT (median data segs/s): {}",
            multiple(hi, lo)
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
