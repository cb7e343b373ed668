//! What `longhaul compare` writes: `summary.json`, `results.md` (a table per path,
//! with the simulator's figures and settings beside the real ones under `--sim`) and
//! the plots.

use std::path::Path;

use anyhow::{anyhow, bail};
use longhaul_output::chart::{draw_scatter, draw_xy, Series};

use super::{sim, Record, Scheme};

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 {
        xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, var.sqrt())
}

/// A series of 100 ms bins in b/s as (seconds, Mb/s) points.
fn mbps_points(series: &[f64]) -> Vec<(f64, f64)> {
    series
        .iter()
        .enumerate()
        .map(|(i, b)| (i as f64 * 0.1, b / 1e6))
        .collect()
}

/// Real over simulated throughput per second (ten 100 ms bins), where the
/// simulated run carried data.
fn ratio_points(real: &[f64], sim: &[f64]) -> Vec<(f64, f64)> {
    real.chunks(10)
        .zip(sim.chunks(10))
        .enumerate()
        .filter_map(|(i, (r, s))| {
            let s: f64 = s.iter().sum();
            (s > 0.0).then(|| (i as f64 + 1.0, r.iter().sum::<f64>() / s))
        })
        .collect()
}

/// results.md's account of how the simulated runs were set up: what matches the
/// kernel, and per scheme what could not.
fn sim_settings(records: &[Record]) -> String {
    let mut md = String::from(
        "## The simulator beside the real runs

Each real run has a simulated twin on          the same path (rate, RTT, queue in bytes, loss on the data direction, duration,          seed); both throughputs count IP bytes leaving the bottleneck. Matched to the          kernel's TCP:

",
    );
    for m in sim::KERNEL_MATCHED {
        md += &format!("- {m}\n");
    }
    md += "\nNot matched:\n\n";
    let mut seen: Vec<&str> = vec![];
    for r in records {
        if seen.contains(&r.scheme.as_str()) {
            continue;
        }
        seen.push(&r.scheme);
        if let Ok(scheme) = Scheme::parse(&r.scheme) {
            for u in sim::unmatched(&scheme) {
                md += &format!("- {}: {u}\n", r.scheme);
            }
        }
    }
    md + "\n"
}

pub(super) fn write_outputs(out: &Path, records: &[Record], rate_bps: f64) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(records)?;
    std::fs::write(out.join("summary.json"), json + "\n")?;
    let mut written = vec!["summary.json".to_string(), "results.md".to_string()];
    let mut md = String::from("# longhaul compare\n\n");
    md += &format!(
        "Link {:.0} Mb/s each way; a fresh emulated link per run; throughput is the data \
         direction's, first to last delivery, measured by the emulator; delay is the \
         one-way delay inside the emulator (propagation + queue + serialisation).\n\n",
        rate_bps / 1e6
    );
    let mut paths: Vec<(f64, f64)> = vec![];
    for r in records {
        if !paths.iter().any(|&(a, b)| a == r.rtt_ms && b == r.loss) {
            paths.push((r.rtt_ms, r.loss));
        }
    }
    for &(rtt, loss) in &paths {
        md += &format!("## RTT {rtt:.0} ms, loss {loss}\n\n");
        let with_sim = records.iter().any(|r| r.sim_throughput_bps.is_some());
        md += "| scheme | throughput Mb/s (mean ± sd) | utilisation | p95 OWD ms | loss | Jain | runs valid |";
        md += if with_sim {
            " sim Mb/s | real/sim |\n"
        } else {
            "\n"
        };
        md += "|---|---:|---:|---:|---:|---:|---:|";
        md += if with_sim { "---:|---:|\n" } else { "\n" };
        let here: Vec<&Record> = records
            .iter()
            .filter(|r| r.rtt_ms == rtt && r.loss == loss)
            .collect();
        let mut names: Vec<&str> = vec![];
        for r in &here {
            if !names.contains(&r.scheme.as_str()) {
                names.push(&r.scheme);
            }
        }
        let mut tput_series = vec![];
        let mut sim_series = vec![];
        let mut ratio_series = vec![];
        let mut scatter = vec![];
        for name in &names {
            let rs: Vec<&&Record> = here.iter().filter(|r| r.scheme == *name).collect();
            let (m, sd) = mean_sd(
                &rs.iter()
                    .map(|r| r.throughput_bps / 1e6)
                    .collect::<Vec<_>>(),
            );
            let (d, _) = mean_sd(&rs.iter().map(|r| r.owd_p95_ms).collect::<Vec<_>>());
            let (l, _) = mean_sd(&rs.iter().map(|r| r.loss_rate).collect::<Vec<_>>());
            let j: Vec<f64> = rs.iter().filter_map(|r| r.jain).collect();
            let valid = rs.iter().filter(|r| r.valid).count();
            md += &format!(
                "| {name} | {m:.1} ± {sd:.1} | {:.1} % | {d:.1} | {l:.2e} | {} | {valid}/{} |",
                m * 1e6 / rate_bps * 100.0,
                if j.is_empty() {
                    "—".to_string()
                } else {
                    format!("{:.3}", mean_sd(&j).0)
                },
                rs.len()
            );
            if with_sim {
                let sims: Vec<f64> = rs.iter().filter_map(|r| r.sim_throughput_bps).collect();
                let (sm, _) = mean_sd(&sims.iter().map(|b| b / 1e6).collect::<Vec<_>>());
                let ratios: Vec<f64> = rs.iter().filter_map(|r| r.real_over_sim).collect();
                let ratio = if ratios.is_empty() {
                    "—".to_string()
                } else {
                    format!("{:.2}", mean_sd(&ratios).0)
                };
                md += &format!(" {sm:.1} | {ratio} |");
                sim_series.push(Series {
                    label: format!("{name} real"),
                    points: mbps_points(&rs[0].series_bps),
                });
                if let Some(ss) = &rs[0].sim_series_bps {
                    sim_series.push(Series {
                        label: format!("{name} sim"),
                        points: mbps_points(ss),
                    });
                    ratio_series.push(Series {
                        label: name.to_string(),
                        points: ratio_points(&rs[0].series_bps, ss),
                    });
                }
            }
            md += "\n";
            tput_series.push(Series {
                label: name.to_string(),
                points: mbps_points(&rs[0].series_bps),
            });
            scatter.push(Series {
                label: name.to_string(),
                points: rs
                    .iter()
                    .map(|r| (r.owd_p95_ms, r.throughput_bps / 1e6))
                    .collect(),
            });
        }
        let invalid: Vec<String> = here
            .iter()
            .filter(|r| !r.valid)
            .map(|r| format!("- {} run {}: {}", r.scheme, r.run, r.problems.join("; ")))
            .collect();
        if !invalid.is_empty() {
            md += "\nInvalid runs (kept above, to be read with care):\n\n";
            md += &invalid.join("\n");
            md += "\n";
        }
        let reruns: Vec<String> = here
            .iter()
            .filter_map(|r| {
                r.rerun_of.as_ref().map(|p| {
                    format!(
                        "- {} run {}: the first attempt was invalid ({})",
                        r.scheme,
                        r.run,
                        p.join("; ")
                    )
                })
            })
            .collect();
        if !reruns.is_empty() {
            md += "\nRun once more (the table holds the second attempt):\n\n";
            md += &reruns.join("\n");
            md += "\n";
        }
        md += "\n";
        let tag = format!("{rtt:.0}ms-{loss}");
        let title = format!("RTT {rtt:.0} ms, loss {loss}");
        written.extend([format!("throughput-{tag}.png"), format!("delay-{tag}.png")]);
        if with_sim {
            written.push(format!("ratio-{tag}.png"));
            draw_xy(
                &out.join(format!("ratio-{tag}.png")),
                &format!("Real over simulated throughput per second, {title}"),
                "time (s)",
                "real / sim",
                &ratio_series,
                true,
            )
            .map_err(|e| anyhow!("plot: {e}"))?;
            written.push(format!("sim-{tag}.png"));
            draw_xy(
                &out.join(format!("sim-{tag}.png")),
                &format!("Real and simulated throughput, {title}"),
                "time (s)",
                "Mb/s",
                &sim_series,
                true,
            )
            .map_err(|e| anyhow!("plot: {e}"))?;
        }
        draw_xy(
            &out.join(format!("throughput-{tag}.png")),
            &format!("Throughput, {title}"),
            "time (s)",
            "Mb/s",
            &tput_series,
            true,
        )
        .map_err(|e| anyhow!("plot: {e}"))?;
        draw_scatter(
            &out.join(format!("delay-{tag}.png")),
            &format!("Throughput against p95 one-way delay, {title}"),
            "p95 one-way delay (ms)",
            "throughput (Mb/s)",
            &scatter,
        )
        .map_err(|e| anyhow!("plot: {e}"))?;
    }
    if records.iter().any(|r| r.sim_throughput_bps.is_some()) {
        md += &sim_settings(records);
    }
    std::fs::write(out.join("results.md"), md)?;
    // Plots of another grid, from an earlier run into the same folder, go.
    longhaul_output::folder::replace_outputs(out, &written)?;
    if records.is_empty() {
        bail!("no run completed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rtt_ms: f64, loss: f64) -> Record {
        Record {
            scheme: "cubic".into(),
            rtt_ms,
            loss,
            run: 1,
            seed: 1,
            throughput_bps: 50e6,
            app_bytes: 1 << 20,
            owd_p50_ms: rtt_ms / 2.0,
            owd_p95_ms: rtt_ms / 2.0 + 1.0,
            loss_rate: loss,
            queue_drops: 0,
            jain: None,
            valid: true,
            problems: vec![],
            lateness_us_p99: 10.0,
            tun_drops: 0,
            emulator_busy: 0.1,
            emulator_cpu: 0.2,
            series_bps: vec![40e6, 50e6, 60e6],
            random_loss: loss,
            rerun_of: None,
            sim_throughput_bps: None,
            sim_series_bps: None,
            sim_random_loss: None,
            real_over_sim: None,
        }
    }

    /// Seconds where the simulated run carried nothing get no ratio.
    #[test]
    fn the_ratio_is_taken_per_second_where_the_simulator_carried_data() {
        let real = vec![2.0; 25];
        let mut sim = vec![1.0; 25];
        sim[10..20].fill(0.0);
        assert_eq!(ratio_points(&real, &sim), vec![(1.0, 2.0), (3.0, 2.0)]);
    }

    /// A second compare into the same folder, over another grid, leaves that grid's
    /// plots and not the first's beside them.
    #[test]
    fn plots_of_an_earlier_grid_do_not_stay() {
        let out = tempfile::tempdir().unwrap();
        write_outputs(out.path(), &[record(50.0, 0.0)], 100e6).unwrap();
        assert!(out.path().join("throughput-50ms-0.png").exists());
        write_outputs(out.path(), &[record(100.0, 1e-4)], 100e6).unwrap();
        assert!(out.path().join("throughput-100ms-0.0001.png").exists());
        assert!(out.path().join("delay-100ms-0.0001.png").exists());
        for stale in ["throughput-50ms-0.png", "delay-50ms-0.png"] {
            assert!(!out.path().join(stale).exists(), "{stale}");
        }
    }
}
