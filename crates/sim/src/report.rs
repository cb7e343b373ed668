//! A sweep's own outputs, written after all its points ran: `sweep.csv` (one row per
//! flow and point), `results.md` (for sweeps with variants: goodput beside any
//! published figures, and a stability figure) and the plots its `[report]` asks for.
//!
//! Everything here reads finished runs; nothing feeds back into a simulation.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::metrics::{RunResult, Summary};
use crate::sweep::{self, as_number, same_value, Metric, Sweep};
use longhaul_output::chart::{draw_xy, Series};

/// What a sweep keeps of each finished run.
#[derive(Debug, Clone)]
pub struct PointResult {
    /// The run's summary.
    pub summary: Summary,
    /// Sample times, s.
    pub times: Vec<f64>,
    /// Goodput of all flows together per sample interval, Mb/s.
    pub total: Vec<f64>,
    /// Goodput of each flow per sample interval, Mb/s.
    pub flow_series: Vec<Vec<f64>>,
    /// Coefficient of variation of each flow's goodput series after the warm-up.
    pub flow_cv: Vec<Option<f64>>,
}

impl PointResult {
    /// Keeps what the report needs of `r`, leaving out the first `warmup_s` seconds
    /// from the coefficients of variation.
    pub fn new(r: RunResult, warmup_s: f64) -> Self {
        let bins = r.sample_times.len();
        let total = (0..bins)
            .map(|i| r.goodput_series.iter().map(|s| s[i]).sum())
            .collect();
        let flow_cv = r
            .goodput_series
            .iter()
            .map(|s| cv(&r.sample_times, s, warmup_s))
            .collect();
        PointResult {
            summary: r.summary,
            times: r.sample_times,
            total,
            flow_series: r.goodput_series,
            flow_cv,
        }
    }

    /// The coefficient of variation of the total goodput after the warm-up.
    pub fn total_cv(&self, warmup_s: f64) -> Option<f64> {
        cv(&self.times, &self.total, warmup_s)
    }

    /// Total goodput; for a run of transfers, their throughput (bytes written over
    /// the time to completion), which leaves out block headers and control.
    fn goodput(&self) -> f64 {
        if self.summary.transfers.is_empty() {
            self.summary.flows.iter().map(|f| f.goodput_mbps).sum()
        } else {
            self.summary
                .transfers
                .iter()
                .map(|t| t.throughput_mbps)
                .sum()
        }
    }

    /// `metric` of flow `flow`, or the total goodput for `None`.
    fn value(&self, flow: Option<usize>, metric: Metric) -> Option<f64> {
        let Some(i) = flow else {
            return (metric == Metric::Goodput).then(|| self.goodput());
        };
        let f = self.summary.flows.get(i)?;
        match metric {
            Metric::Goodput => Some(f.goodput_mbps),
            Metric::Loss => f.loss_rate,
            Metric::Completion => f.completion_time_s,
            Metric::TransferTime => f.transfer_time_s,
            Metric::SnoopRtt => f.snoop_rtt_ms,
            Metric::SnoopRto => f.snoop_rto_ms,
            Metric::LocalRetransmits => f.local_retransmits.map(|n| n as f64),
            Metric::FirstRound => f
                .round_bytes
                .as_ref()
                .and_then(|r| r.first())
                .map(|&b| b as f64),
            Metric::MeanDelay => f.mean_delay_ms,
            Metric::MaxDelay => f.max_delay_ms,
            Metric::Mathis => {
                let rtt_s = f.srtt_ms? / 1e3;
                let sent = f.data_segments_sent? as f64;
                let p = if sent > 0.0 {
                    f.retransmits? as f64 / sent
                } else {
                    0.0
                };
                let p = if p > 0.0 { p } else { 1e-6 };
                (rtt_s > 0.0).then(|| 0.866 * 1000.0 * 8.0 / (rtt_s * p.sqrt()) / 1e6)
            }
        }
    }

    fn series(&self, flow: Option<usize>) -> &[f64] {
        flow.and_then(|i| self.flow_series.get(i))
            .map_or(&self.total, |s| s)
    }
}

/// A column of the report: a variant, and a flow of it (or all flows).
struct Column {
    label: String,
    variant: usize,
    flow: Option<usize>,
}

fn columns(sw: &Sweep, t: &Table) -> Vec<Column> {
    let flows = &sw.report.flows;
    let mut cols = vec![];
    for (v, name) in t.variants.iter().enumerate() {
        if flows.is_empty() {
            cols.push(Column {
                label: name.clone(),
                variant: v,
                flow: None,
            });
        }
        for (label, i) in flows {
            cols.push(Column {
                label: if t.variants.len() == 1 {
                    label.clone()
                } else {
                    format!("{name} {label}")
                },
                variant: v,
                flow: Some(*i),
            });
        }
    }
    cols
}

/// Standard deviation over mean of the samples whose interval starts at or after
/// `warmup_s` (an interval ends at its time stamp, so it starts one step earlier).
/// `None` with fewer than two samples or a zero mean.
pub fn cv(times: &[f64], values: &[f64], warmup_s: f64) -> Option<f64> {
    let step = times.first().copied().unwrap_or(0.0);
    let v: Vec<f64> = times
        .iter()
        .zip(values)
        .filter(|(t, _)| **t - step >= warmup_s - 1e-9)
        .map(|(_, v)| *v)
        .collect();
    if v.len() < 2 {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return None;
    }
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    Some(var.sqrt() / mean)
}

/// Writes everything for `sw` into `out`; returns the names written there, as
/// [`replace_outputs`](longhaul_output::folder::replace_outputs) lists them (`plots/` for the plots folder,
/// which gets its own list).
pub fn write(out: &Path, sw: &Sweep, results: &[PointResult]) -> io::Result<Vec<String>> {
    std::fs::create_dir_all(out)?;
    write_csv(out, sw, results)?;
    let mut written = vec!["sweep.csv".to_string()];
    let Some(table) = Table::new(sw) else {
        return Ok(written);
    };
    let plots = write_plots(out, sw, &table, results)?;
    std::fs::write(
        out.join("results.md"),
        markdown(sw, &table, results, &plots),
    )?;
    written.push("results.md".into());
    if !plots.is_empty() {
        let names: Vec<String> = plots
            .iter()
            .filter_map(|p| p.strip_prefix("plots/").map(String::from))
            .collect();
        longhaul_output::folder::replace_outputs(&out.join("plots"), &names)?;
        written.push("plots/".into());
    }
    Ok(written)
}

fn write_csv(out: &Path, sw: &Sweep, results: &[PointResult]) -> io::Result<()> {
    let keys: Vec<&str> = sw.points.first().map_or(vec![], |p| {
        p.params.iter().map(|(k, _)| k.as_str()).collect()
    });
    let mut csv = csv_header(&keys);
    for (i, (p, r)) in sw.points.iter().zip(results).enumerate() {
        csv += &csv_rows(i, &p.params, r);
    }
    std::fs::write(out.join("sweep.csv"), csv)
}

/// The first line of `sweep.csv`, for a sweep whose points have these grid keys.
pub fn csv_header(keys: &[&str]) -> String {
    let mut csv = String::from("point,");
    for k in keys {
        let _ = write!(csv, "{k},");
    }
    csv.push_str(
        "flow,protocol,goodput_mbps,delivered_bytes,completion_time_s,retransmits,timeouts,goodput_cv,transfer_time_s,first_round_bytes\n",
    );
    csv
}

/// The lines of `sweep.csv` for point `n` (one per flow), which ran with `params`.
pub fn csv_rows(n: usize, params: &[(String, toml::Value)], r: &PointResult) -> String {
    let mut csv = String::new();
    for (f, cv) in r.summary.flows.iter().zip(&r.flow_cv) {
        let _ = write!(csv, "{n},");
        for (_, v) in params {
            let _ = write!(csv, "{},", sweep::value_str(v));
        }
        let _ = writeln!(
            csv,
            "{},{},{:.6},{},{},{},{},{},{},{}",
            f.id,
            f.protocol,
            f.goodput_mbps,
            f.delivered_bytes,
            f.completion_time_s
                .map_or(String::new(), |c| format!("{c:.6}")),
            f.retransmits.map_or(String::new(), |c| c.to_string()),
            f.timeouts.map_or(String::new(), |c| c.to_string()),
            cv.map_or(String::new(), |c| format!("{c:.6}")),
            f.transfer_time_s
                .map_or(String::new(), |c| format!("{c:.6}")),
            f.round_bytes
                .as_ref()
                .and_then(|r| r.first())
                .map_or(String::new(), |b| b.to_string()),
        );
    }
    csv
}

/// A sweep with variants as a table: one row per grid point, one column per variant,
/// each cell the indices of the points that ran it (several when the report averages
/// over a grid key, such as the seed).
struct Table {
    variants: Vec<String>,
    /// Grid values of each row (the variant and any averaged key left out).
    rows: Vec<Vec<(String, toml::Value)>>,
    cells: Vec<Vec<Vec<usize>>>,
}

impl Table {
    fn new(sw: &Sweep) -> Option<Table> {
        let mut t = Table {
            variants: vec![],
            rows: vec![],
            cells: vec![],
        };
        for (i, p) in sw.points.iter().enumerate() {
            let v = p.params.iter().find(|(k, _)| k == "variant")?;
            let v = sweep::value_str(&v.1);
            let col = t.variants.iter().position(|x| *x == v).unwrap_or_else(|| {
                t.variants.push(v);
                t.variants.len() - 1
            });
            let averaged = sw.report.average.as_deref();
            let grid: Vec<_> = p
                .params
                .iter()
                .filter(|(k, _)| k != "variant" && Some(k.as_str()) != averaged)
                .cloned()
                .collect();
            let row = t.rows.iter().position(|r| *r == grid).unwrap_or_else(|| {
                t.rows.push(grid);
                t.cells.push(vec![]);
                t.rows.len() - 1
            });
            let cells = &mut t.cells[row];
            if cells.len() <= col {
                cells.resize(col + 1, vec![]);
            }
            cells[col].push(i);
        }
        Some(t)
    }

    fn cell(&self, row: usize, col: usize) -> &[usize] {
        self.cells[row].get(col).map_or(&[], Vec::as_slice)
    }

    /// The mean of `f` over the cell's points that have a value.
    fn mean(
        &self,
        row: usize,
        col: usize,
        results: &[PointResult],
        f: impl Fn(&PointResult) -> Option<f64>,
    ) -> Option<f64> {
        let v: Vec<f64> = self
            .cell(row, col)
            .iter()
            .filter_map(|&i| f(&results[i]))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// `label=value, ...` of a row, with the report's labels.
fn row_name(sw: &Sweep, row: &[(String, toml::Value)]) -> String {
    if row.is_empty() {
        return "(all)".into();
    }
    row.iter()
        .map(|(k, v)| format!("{}={}", sw.report.label(k), sweep::value_str(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A file-name-safe form of `s`.
fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._=-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .replace("__", "_")
}

fn matches(row: &[(String, toml::Value)], filter: &[(String, toml::Value)]) -> bool {
    filter.iter().all(|(k, v)| {
        row.iter()
            .find(|(rk, _)| rk == k)
            .is_some_and(|(_, rv)| same_value(rv, v))
    })
}

/// Draws the plots the report asks for; returns their paths relative to `out`.
fn write_plots(
    out: &Path,
    sw: &Sweep,
    t: &Table,
    results: &[PointResult],
) -> io::Result<Vec<String>> {
    let mut written = vec![];
    let dir = out.join("plots");
    let rep = &sw.report;
    let cols = columns(sw, t);
    if let Some(filter) = &rep.timeseries {
        for (r, row) in t.rows.iter().enumerate() {
            if !matches(row, filter) {
                continue;
            }
            let series: Vec<Series> = cols
                .iter()
                .filter_map(|col| {
                    // Averaged over the cell's points, sample by sample.
                    let cell = t.cell(r, col.variant);
                    let first = &results[*cell.first()?];
                    let points = first
                        .times
                        .iter()
                        .enumerate()
                        .map(|(k, &time)| {
                            let sum: f64 = cell
                                .iter()
                                .map(|&i| {
                                    results[i].series(col.flow).get(k).copied().unwrap_or(0.0)
                                })
                                .sum();
                            (time, sum / cell.len() as f64)
                        })
                        .collect();
                    Some(Series {
                        label: col.label.clone(),
                        points,
                    })
                })
                .collect();
            let name = row_name(sw, row);
            let file = format!("plots/timeseries-{}.png", file_safe(&name));
            std::fs::create_dir_all(&dir)?;
            draw_xy(
                &out.join(&file),
                &format!("{}: goodput, {name}", sw.name),
                "time (s)",
                "goodput (Mb/s)",
                &series,
                true,
            )
            .map_err(io::Error::other)?;
            written.push(file);
        }
    }
    if let Some(x) = &rep.x {
        // One plot per combination of the other grid keys.
        let mut groups: Vec<Vec<(String, toml::Value)>> = vec![];
        for row in &t.rows {
            let others: Vec<_> = row.iter().filter(|(k, _)| k != x).cloned().collect();
            if !groups.contains(&others) {
                groups.push(others);
            }
        }
        // Each metric alone, then each group the report wants drawn together.
        let sets: Vec<Vec<Metric>> = rep
            .metrics
            .iter()
            .map(|m| vec![*m])
            .chain(rep.together.iter().cloned())
            .collect();
        for set in &sets {
            for g in &groups {
                let series: Vec<Series> = set
                    .iter()
                    .flat_map(|metric| cols.iter().map(move |col| (metric, col)))
                    .map(|(metric, col)| {
                        let mut points: Vec<(f64, f64)> = t
                            .rows
                            .iter()
                            .enumerate()
                            .filter(|(_, row)| matches(row, g))
                            .filter_map(|(r, row)| {
                                let xv = as_number(&row.iter().find(|(k, _)| k == x)?.1)?;
                                let y = t.mean(r, col.variant, results, |p| {
                                    p.value(col.flow, *metric)
                                })?;
                                if rep.log_x {
                                    (xv > 0.0).then(|| (xv.log10(), y))
                                } else {
                                    Some((xv, y))
                                }
                            })
                            .collect();
                        points.sort_by(|a, b| a.0.total_cmp(&b.0));
                        Series {
                            label: if set.len() == 1 {
                                col.label.clone()
                            } else {
                                format!("{} {}", col.label, metric.name())
                            },
                            points,
                        }
                    })
                    .collect();
                let xl = rep.label(x);
                let what: Vec<&str> = set.iter().map(|m| m.describe()).collect();
                let what = what.join(", ");
                // Total goodput keeps the short names; per-flow metrics say which.
                let m = if rep.flows.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = set.iter().map(|m| m.name()).collect();
                    format!("{}-", names.join("+"))
                };
                let (file, title) = if g.is_empty() {
                    (
                        format!("plots/{m}vs-{}.png", file_safe(xl)),
                        format!("{}: {what} against {xl}", sw.name),
                    )
                } else {
                    let name = row_name(sw, g);
                    (
                        format!("plots/{m}vs-{}-{}.png", file_safe(xl), file_safe(&name)),
                        format!("{}: {what} against {xl}, {name}", sw.name),
                    )
                };
                let x_label = if rep.log_x {
                    format!("log10({xl})")
                } else {
                    xl.to_string()
                };
                std::fs::create_dir_all(&dir)?;
                draw_xy(&out.join(&file), &title, &x_label, &what, &series, false)
                    .map_err(io::Error::other)?;
                written.push(file);
            }
        }
        if rep.by_variant {
            for (c, v) in t.variants.iter().enumerate() {
                let series: Vec<Series> = groups
                    .iter()
                    .map(|g| Series {
                        label: if g.is_empty() {
                            v.clone()
                        } else {
                            row_name(sw, g)
                        },
                        points: x_points(sw, t, results, g, c),
                    })
                    .collect();
                let xl = rep.label(x);
                let file = format!("plots/vs-{}-{}.png", file_safe(xl), file_safe(v));
                std::fs::create_dir_all(&dir)?;
                draw_xy(
                    &out.join(&file),
                    &format!("{}: {v}, throughput against {xl}", sw.name),
                    xl,
                    "throughput (Mb/s)",
                    &series,
                    false,
                )
                .map_err(io::Error::other)?;
                written.push(file);
            }
        }
    }
    Ok(written)
}

/// (x, mean total) of variant column `c` over the rows that match `group`, by x.
fn x_points(
    sw: &Sweep,
    t: &Table,
    results: &[PointResult],
    group: &[(String, toml::Value)],
    c: usize,
) -> Vec<(f64, f64)> {
    let Some(x) = &sw.report.x else {
        return vec![];
    };
    let mut points: Vec<(f64, f64)> = t
        .rows
        .iter()
        .enumerate()
        .filter(|(_, row)| matches(row, group))
        .filter_map(|(r, row)| {
            let xv = as_number(&row.iter().find(|(k, _)| k == x)?.1)?;
            Some((xv, t.mean(r, c, results, |p| Some(p.goodput()))?))
        })
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points
}

/// The optimum per variant and point of the other grid keys: the `x` with the
/// highest total, and the first `x` within 5 % of it (where a plateau starts),
/// beside any published optimum.
fn best_table(md: &mut String, sw: &Sweep, t: &Table, results: &[PointResult]) {
    let rep = &sw.report;
    let Some(x) = &rep.x else {
        return;
    };
    let xl = rep.label(x);
    let mut groups: Vec<Vec<(String, toml::Value)>> = vec![];
    for row in &t.rows {
        let others: Vec<_> = row.iter().filter(|(k, _)| k != x).cloned().collect();
        if !groups.contains(&others) {
            groups.push(others);
        }
    }
    let _ = write!(
        md,
        "\n## Optimum\n\nPer variant: the {xl} with the highest value, that value, and the \
         first {xl} within 5 % of it (where the plateau starts)"
    );
    if !rep.published_best.is_empty() {
        md.push_str("; then the published optimum");
        if let Some(s) = &rep.source {
            let _ = write!(md, " ({s})");
        }
    }
    md.push_str(".\n\n| variant | point | best ");
    let _ = write!(md, "{xl} | value | within 5 % from |");
    if !rep.published_best.is_empty() {
        let _ = write!(md, " published | its {xl} | its value |");
    }
    md.push_str("\n|---|---|---:|---:|---:|");
    if !rep.published_best.is_empty() {
        md.push_str("---|---:|---:|");
    }
    md.push('\n');
    for (c, v) in t.variants.iter().enumerate() {
        for g in &groups {
            let points = x_points(sw, t, results, g, c);
            let Some(&(bx, by)) = points.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
                continue;
            };
            let knee = points.iter().find(|p| p.1 >= 0.95 * by).map_or(bx, |p| p.0);
            let ours = format!(
                "| {v} | {} | {bx} | {by:.1} | {knee} |",
                if g.is_empty() {
                    "-".to_string()
                } else {
                    row_name(sw, g)
                }
            );
            if rep.published_best.is_empty() {
                let _ = writeln!(md, "{ours}");
                continue;
            }
            // A row per published figure this variant stands for.
            let pubs: Vec<String> = rep
                .published_best
                .iter()
                .filter(|b| b.0 == *v)
                .map(|b| format!(" {} | {} | {:.1} |", b.1, b.2, b.3))
                .collect();
            if pubs.is_empty() {
                let _ = writeln!(md, "{ours} - | - | - |");
            }
            for p in pubs {
                let _ = writeln!(md, "{ours}{p}");
            }
        }
    }
}

fn markdown(sw: &Sweep, t: &Table, results: &[PointResult], plots: &[String]) -> String {
    let rep = &sw.report;
    let mut md = format!("# {}\n\n", sw.name);
    if let Some(p) = &rep.preface {
        md.push_str(p.trim_end());
        md.push_str("\n\n");
    }
    if !rep.flows.is_empty() {
        per_flow_tables(&mut md, sw, t, results);
        plot_list(&mut md, plots);
        return md;
    }
    let header = |md: &mut String| {
        md.push_str("| point |");
        for v in &t.variants {
            let _ = write!(md, " {v} |");
        }
        md.push_str("\n|---|");
        md.push_str(&"---:|".repeat(t.variants.len()));
        md.push('\n');
    };
    let transfers = results.iter().any(|p| !p.summary.transfers.is_empty());
    md.push_str(if transfers {
        "Transfer throughput of each run (bytes written over the time to completion), Mb/s"
    } else {
        "Total goodput of each run, Mb/s"
    });
    if !rep.expected.is_empty() {
        md.push_str("; in brackets, the published figure");
        if let Some(s) = &rep.source {
            let _ = write!(md, " ({s})");
        }
    }
    md.push_str(".\n\n");
    header(&mut md);
    for (r, row) in t.rows.iter().enumerate() {
        let expected = rep
            .expected
            .iter()
            .find(|e| e.point.len() == row.len() && matches(row, &e.point));
        let _ = write!(md, "| {} |", row_name(sw, row));
        for (c, v) in t.variants.iter().enumerate() {
            match t.mean(r, c, results, |p| Some(p.goodput())) {
                Some(g) => {
                    let _ = write!(md, " {g:.1}");
                }
                None => md.push_str(" -"),
            }
            if let Some(x) = expected.and_then(|e| e.values.get(v)) {
                let _ = write!(md, " ({x:.0})");
            }
            md.push_str(" |");
        }
        md.push('\n');
    }
    if rep.best {
        best_table(&mut md, sw, t, results);
    }
    let _ = write!(
        md,
        "\n## Stability\n\nCoefficient of variation (standard deviation / mean) of each run's total \
         goodput per sample interval, leaving out the first {} s; lower is steadier.\n\n",
        rep.warmup_s
    );
    header(&mut md);
    for (r, row) in t.rows.iter().enumerate() {
        let _ = write!(md, "| {} |", row_name(sw, row));
        for c in 0..t.variants.len() {
            match t.mean(r, c, results, |p| p.total_cv(rep.warmup_s)) {
                Some(cv) => {
                    let _ = write!(md, " {cv:.3} |");
                }
                None => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
    plot_list(&mut md, plots);
    md
}

/// One table per metric: a row per grid point, a column per variant and flow.
fn per_flow_tables(md: &mut String, sw: &Sweep, t: &Table, results: &[PointResult]) {
    let cols = columns(sw, t);
    let flows: Vec<String> = sw
        .report
        .flows
        .iter()
        .map(|(l, i)| format!("{l} = flow {i}"))
        .collect();
    let _ = writeln!(md, "Flows: {}.", flows.join(", "));
    if let Some(a) = &sw.report.average {
        let _ = writeln!(md, "\nEach figure is the mean over the values of `{a}`.");
    }
    for metric in &sw.report.metrics {
        let _ = write!(md, "\n## {}\n\n| point |", metric.describe());
        for c in &cols {
            let _ = write!(md, " {} |", c.label);
        }
        // With `gain`, one more column per flow: how much lower `of` is.
        let gains: Vec<(usize, usize)> = match &sw.report.gain {
            Some((of, over)) if metric.is_time() => sw
                .report
                .flows
                .iter()
                .filter_map(|(_, flow)| {
                    let find = |v: &str| {
                        cols.iter()
                            .position(|c| t.variants[c.variant] == v && c.flow == Some(*flow))
                    };
                    find(of).zip(find(over))
                })
                .collect(),
            _ => vec![],
        };
        if let Some((of, over)) = &sw.report.gain {
            for _ in &gains {
                let _ = write!(md, " {of} below {over} (%) |");
            }
        }
        md.push_str("\n|---|");
        md.push_str(&"---:|".repeat(cols.len() + gains.len()));
        md.push('\n');
        for (r, row) in t.rows.iter().enumerate() {
            let _ = write!(md, "| {} |", row_name(sw, row));
            for c in &cols {
                let cell = t.cell(r, c.variant);
                let have = cell
                    .iter()
                    .filter(|&&i| results[i].value(c.flow, *metric).is_some())
                    .count();
                match t.mean(r, c.variant, results, |p| p.value(c.flow, *metric)) {
                    Some(v) if *metric == Metric::Loss => {
                        let _ = write!(md, " {v:.4}");
                    }
                    Some(v) if *metric == Metric::FirstRound => {
                        let _ = write!(md, " {v:.0}");
                    }
                    Some(v) => {
                        let _ = write!(md, " {v:.3}");
                    }
                    None => md.push_str(" -"),
                }
                // A mean over fewer runs than the cell has (say, transfers that did
                // not complete) says so.
                if have > 0 && have < cell.len() {
                    let _ = write!(md, " ({have} of {} runs)", cell.len());
                }
                md.push_str(" |");
            }
            for &(of, over) in &gains {
                let mean = |c: &Column| t.mean(r, c.variant, results, |p| p.value(c.flow, *metric));
                match (mean(&cols[of]), mean(&cols[over])) {
                    (Some(a), Some(b)) if b != 0.0 => {
                        let _ = write!(md, " {:.0} |", (b - a) / b * 100.0);
                    }
                    _ => md.push_str(" - |"),
                }
            }
            md.push('\n');
        }
    }
    if sw.report.rounds {
        rounds_table(md, sw, t, results, &cols);
    }
}

/// Bytes each flow sent per slow-start round (the study's Table 2), from the first
/// run of each cell; "varies" if the runs of a cell disagree.
fn rounds_table(md: &mut String, sw: &Sweep, t: &Table, results: &[PointResult], cols: &[Column]) {
    md.push_str("\n## Bytes sent per round (first round = initial window)\n\n| point |");
    for c in cols {
        let _ = write!(md, " {} |", c.label);
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(cols.len()));
    md.push('\n');
    for (r, row) in t.rows.iter().enumerate() {
        let _ = write!(md, "| {} |", row_name(sw, row));
        for c in cols {
            let of = |i: &usize| {
                c.flow
                    .and_then(|f| results[*i].summary.flows.get(f))
                    .and_then(|f| f.round_bytes.clone())
            };
            let runs: Vec<Option<Vec<u64>>> = t.cell(r, c.variant).iter().map(of).collect();
            match runs.first() {
                Some(Some(first)) if runs.iter().all(|x| x.as_ref() == Some(first)) => {
                    let list: Vec<String> = first.iter().map(u64::to_string).collect();
                    let _ = write!(md, " {} |", list.join(", "));
                }
                Some(Some(_)) => md.push_str(" varies |"),
                _ => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
}

fn plot_list(md: &mut String, plots: &[String]) {
    if !plots.is_empty() {
        md.push_str("\n## Plots\n\n");
        for p in plots {
            let _ = writeln!(md, "- [{p}]({p})");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cv_leaves_out_the_warmup() {
        let t = [1.0, 2.0, 3.0, 4.0, 5.0];
        // The first interval (0-1 s) is the warm-up; the rest is constant.
        assert_eq!(cv(&t, &[0.0, 10.0, 10.0, 10.0, 10.0], 1.0), Some(0.0));
        // 10 and 30: mean 20, standard deviation 10.
        let c = cv(&t, &[0.0, 10.0, 30.0, 10.0, 30.0], 1.0).unwrap();
        assert!((c - 0.5).abs() < 1e-12, "{c}");
        assert_eq!(cv(&t, &[1.0; 5], 4.5), None, "one sample is not enough");
        assert_eq!(cv(&t, &[0.0; 5], 0.0), None, "zero mean");
    }

    #[test]
    fn file_names_are_safe() {
        assert_eq!(file_safe("delay=0.5ms, loss=0.0"), "delay=0.5ms_loss=0.0");
        assert_eq!(file_safe("a/b"), "a_b");
    }
}
