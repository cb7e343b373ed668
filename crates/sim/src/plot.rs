//! The plots of a run (goodput, queues, cwnd against time), drawn with
//! `longhaul_output::chart`.

use std::path::Path;

use longhaul_output::chart::{draw_xy, Res, Series};

use crate::metrics::RunResult;

/// A chart against time.
fn draw(path: &Path, title: &str, y_label: &str, series: &[Series]) -> Res {
    draw_xy(path, title, "time (s)", y_label, series, true)
}

/// Goodput of every flow against time.
pub fn throughput(path: &Path, r: &RunResult) -> Res {
    let series: Vec<Series> = r
        .goodput_series
        .iter()
        .enumerate()
        .take(12)
        .map(|(i, s)| Series {
            label: format!("flow {i} ({})", r.summary.flows[i].protocol),
            points: r
                .sample_times
                .iter()
                .copied()
                .zip(s.iter().copied())
                .collect(),
        })
        .collect();
    draw(
        path,
        &format!("{}: goodput", r.summary.scenario),
        "goodput (Mb/s)",
        &series,
    )
}

/// Queue length of the busiest link directions against time.
pub fn queues(path: &Path, r: &RunResult) -> Res {
    let mut order: Vec<usize> = (0..r.link_names.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(r.queue_series[i].iter().copied().max().unwrap_or(0)));
    let series: Vec<Series> = order
        .into_iter()
        .take(4)
        .map(|i| Series {
            label: r.link_names[i].clone(),
            points: r
                .sample_times
                .iter()
                .copied()
                .zip(r.queue_series[i].iter().map(|&q| f64::from(q)))
                .collect(),
        })
        .collect();
    draw(
        path,
        &format!("{}: queue length", r.summary.scenario),
        "packets",
        &series,
    )
}

/// Congestion window of every traced TCP flow against time.
pub fn cwnd(path: &Path, r: &RunResult) -> Res {
    let flows = r.summary.flows.len();
    let series: Vec<Series> = (0..flows)
        .take(12)
        .filter(|i| r.trace.iter().any(|t| t.flow == *i))
        .map(|i| Series {
            label: format!("flow {i} cwnd"),
            points: r
                .trace
                .iter()
                .filter(|t| t.flow == i)
                .map(|t| (t.time_s, t.cwnd_bytes as f64 / 1e3))
                .collect(),
        })
        .collect();
    draw(
        path,
        &format!("{}: congestion window", r.summary.scenario),
        "cwnd (kB)",
        &series,
    )
}
