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
    let duration = std::time::Duration::try_from_secs_f64(args.duration_s)
        .ok()
        .filter(|d| positive(args.duration_s) && !d.is_zero());
    let (Some(duration), true, true) = (
        duration,
        (0.0..1.0).contains(&args.loss),
        args.rtt_ms.iter().all(|&r| positive(r)),
    ) else {
        return Err(Failure::input(anyhow::anyhow!(
            "--loss must be in [0, 1), --duration-s finite and at least 1 ns, and every \
             --rtt-ms finite and above zero"
        )));
    };
    outln!(
        "{:>8} {:>10} {:>14} {:>12} {:>14} {:>16} {:>10} {:>12}",
        "RTT ms",
        "goodput",
        "data segs",
        "events",
        "wall s",
        "data segs/s",
        "events/s",
        "wall/sim-s"
    )?;
    for &rtt in &args.rtt_ms {
        let mut s = reference(&format!("{}us", rtt * 500.0), args.loss).map_err(Failure::input)?;
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
        outln!(
            "{:>8} {:>7.1} Mb/s {:>14} {:>12} {:>14.3} {:>14.2} M {:>8.2} M {:>12.5}",
            rtt,
            f.goodput_mbps,
            delivered,
            r.summary.events,
            wall,
            delivered as f64 / wall / 1e6,
            r.summary.events as f64 / wall / 1e6,
            wall / args.duration_s,
        )?;
    }
    if let Some(kib) = peak_rss_kib() {
        outln!(
            "peak memory (VmHWM) of this process: {:.1} MiB",
            kib as f64 / 1024.0
        )?;
    }
    Ok(())
}
