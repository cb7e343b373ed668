//! Writing a run's results: `summary.json`, CSV series and PNG plots.
//!
//! Floats are printed with fixed precision, so equal runs give equal bytes.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::metrics::RunResult;
use crate::plot;

/// Writes `summary.json`, `flows.csv`, `links.csv`, `trace.csv` (if traced),
/// `decisions.csv` (adaptive Snoop) and,
/// with `plots`, `throughput.png`, `queue.png` and `cwnd.png` into `dir`; returns
/// the names written.
pub fn write_run(dir: &Path, r: &RunResult, plots: bool) -> io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut written = vec!["summary.json", "flows.csv", "links.csv"];
    let json = serde_json::to_string_pretty(&r.summary).map_err(io::Error::other)?;
    std::fs::write(dir.join("summary.json"), json + "\n")?;

    let mut flows = String::from("time_s,flow,goodput_mbps\n");
    for (i, series) in r.goodput_series.iter().enumerate() {
        for (t, v) in r.sample_times.iter().zip(series) {
            let _ = writeln!(flows, "{t:.6},{i},{v:.6}");
        }
    }
    std::fs::write(dir.join("flows.csv"), flows)?;

    let mut links = String::from("time_s,link,throughput_mbps,queue_pkts\n");
    for (i, name) in r.link_names.iter().enumerate() {
        for ((t, v), q) in r
            .sample_times
            .iter()
            .zip(&r.link_tput_series[i])
            .zip(&r.queue_series[i])
        {
            let _ = writeln!(links, "{t:.6},{name},{v:.6},{q}");
        }
    }
    std::fs::write(dir.join("links.csv"), links)?;

    if !r.decisions.is_empty() {
        let mut d = String::from("time_s,station,flow,snoop,f,error_rate,load_all,load_chosen\n");
        for x in &r.decisions {
            let _ = writeln!(
                d,
                "{:.6},{},{},{},{},{:.6},{:.6},{:.6}",
                x.time_s, x.station, x.flow, x.snoop, x.f, x.error, x.load_all, x.load_chosen
            );
        }
        std::fs::write(dir.join("decisions.csv"), d)?;
        written.push("decisions.csv");
    }

    if !r.trace.is_empty() {
        let mut tr = String::from(
            "time_s,flow,cwnd_bytes,ssthresh_bytes,srtt_ms,in_flight_bytes,delivered_bytes,send_period_us,recv_rate_pps,bandwidth_pps\n",
        );
        for row in &r.trace {
            let ss = if row.ssthresh_bytes == u64::MAX {
                String::new()
            } else {
                row.ssthresh_bytes.to_string()
            };
            let _ = writeln!(
                tr,
                "{:.6},{},{},{},{:.6},{},{},{:.6},{},{}",
                row.time_s,
                row.flow,
                row.cwnd_bytes,
                ss,
                row.srtt_ms,
                row.in_flight_bytes,
                row.delivered_bytes,
                row.send_period_us,
                row.recv_rate_pps,
                row.bandwidth_pps
            );
        }
        std::fs::write(dir.join("trace.csv"), tr)?;
        written.push("trace.csv");
    }

    if plots {
        plot::throughput(&dir.join("throughput.png"), r).map_err(io::Error::other)?;
        plot::queues(&dir.join("queue.png"), r).map_err(io::Error::other)?;
        written.extend(["throughput.png", "queue.png"]);
        if !r.trace.is_empty() {
            plot::cwnd(&dir.join("cwnd.png"), r).map_err(io::Error::other)?;
            written.push("cwnd.png");
        }
    }
    Ok(written.into_iter().map(String::from).collect())
}
