//! Writing a run's results: `summary.json`, CSV series and PNG plots.
//!
//! Floats are printed with fixed precision, so equal runs give equal bytes.

use std::ffi::OsStr;
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

/// The file in a results folder that lists what the last run wrote there.
pub const MANIFEST: &str = ".longhaul-outputs";

/// Records `written` as the outputs of `dir`, and removes every output that the
/// previous run listed there and this one did not write again. So a folder given
/// again holds one run's results, not a mix: no `trace.csv` from a run that traced
/// beside the `summary.json` of one that did not, no plots of another grid, no
/// `point-0042/` of a sweep that now has 40 points.
///
/// A name is a plain file name inside `dir`, or a plain folder name with a trailing
/// `/` (`point-0042/`, `plots/`): a folder that holds its own list. A stale folder
/// loses what its list names (its own stale folders likewise), then the list, and
/// goes if that leaves it empty. Only what longhaul itself listed goes; any other
/// file, in `dir` or in a stale folder, is left alone, and so is any other name a
/// doctored list holds (`../x`, `a/b`).
pub fn replace_outputs(dir: &Path, written: &[String]) -> io::Result<()> {
    if let Some(previous) = read_manifest(dir)? {
        for name in previous.lines() {
            if !written.iter().any(|w| w == name) {
                remove_output(dir, name)?;
            }
        }
    }
    let mut list = written.join("\n");
    list.push('\n');
    std::fs::write(dir.join(MANIFEST), list)
}

/// The list of `dir`, if it has one.
fn read_manifest(dir: &Path) -> io::Result<Option<String>> {
    match std::fs::read_to_string(dir.join(MANIFEST)) {
        Ok(list) => Ok(Some(list)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes output `name` of `dir` (see [`replace_outputs`]); names of any other form
/// are ignored, and what is already gone is no error.
fn remove_output(dir: &Path, name: &str) -> io::Result<()> {
    let plain = |n: &str| !n.is_empty() && Path::new(n).file_name() == Some(OsStr::new(n));
    let gone = |r: io::Result<()>| match r {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    if let Some(folder) = name.strip_suffix('/') {
        if !plain(folder) {
            return Ok(());
        }
        let sub = dir.join(folder);
        // A symbolic link in the folder's place is not longhaul's folder.
        if !std::fs::symlink_metadata(&sub).is_ok_and(|m| m.is_dir()) {
            return Ok(());
        }
        if let Some(list) = read_manifest(&sub)? {
            for inner in list.lines() {
                remove_output(&sub, inner)?;
            }
            gone(std::fs::remove_file(sub.join(MANIFEST)))?;
        }
        // Left in place if anything else is in it: not ours to remove.
        let _ = std::fs::remove_dir(&sub);
        return Ok(());
    }
    let path = dir.join(name);
    // A folder where a file was listed is not longhaul's file.
    if plain(name) && !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
        gone(std::fs::remove_file(path))?;
    }
    Ok(())
}
