//! `run()`: one scenario, in memory or into a results folder.

use std::path::{Path, PathBuf};

use longhaul_sim::{RunResult, Scenario, ScenarioError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;

/// Parses a scenario given as `kind`: `"path"` (a file), `"toml"` (its text) or
/// `"json"` (a document of the same schema, as a Python dict becomes), named `label`
/// in messages and as its default name.
pub fn parse(source: &str, kind: &str, label: &str) -> Result<Scenario, ScenarioError> {
    let label = Path::new(label);
    match kind {
        "path" => Scenario::load(Path::new(source)),
        "toml" => Scenario::parse(source, label),
        "json" => Scenario::from_value(document(source, label)?, label),
        other => Err(ScenarioError::Syntax {
            path: label.to_owned(),
            message: format!("unknown source kind {other:?} (path, toml or json)"),
        }),
    }
}

/// A JSON document as the TOML document it stands for.
pub fn document(json: &str, label: &Path) -> Result<toml::Value, ScenarioError> {
    serde_json::from_str(json).map_err(|e| ScenarioError::Syntax {
        path: label.to_owned(),
        message: format!(
            "{e}; values must be strings, numbers, booleans, lists or dicts (None has no \
             TOML form: leave the key out instead)"
        ),
    })
}

/// Runs a scenario (see [`parse`] for `source`, `kind`, `label`) with the GIL
/// released; `seed` replaces its seed; with `outdir`, writes what `longhaul sim run`
/// writes there (and any pcap the scenario asks for). Returns a dict of plain data:
/// `summary` (the JSON text of `summary.json`), `times`, `flow_goodput`,
/// `link_names`, `link_throughput`, `link_queue`, `trace` (rows of tuples), `pcap`
/// (link to file) and `outdir`.
#[pyfunction]
#[pyo3(signature = (source, kind, label, seed=None, outdir=None))]
pub fn run<'py>(
    py: Python<'py>,
    source: &str,
    kind: &str,
    label: &str,
    seed: Option<u64>,
    outdir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut scenario = parse(source, kind, label).map_err(|e| errors::scenario(py, &e))?;
    if let Some(seed) = seed {
        scenario.run.seed = seed;
    }
    let result = match &outdir {
        Some(dir) => py
            .detach(|| longhaul_sim::run_to_dir(&scenario, dir))
            .map_err(|e| errors::sim(py, &e))?,
        None => py
            .detach(|| longhaul_sim::simulate(&scenario))
            .map_err(|e| errors::run(py, &e))?,
    };
    let pcap: Vec<(String, String)> = match &outdir {
        Some(dir) => scenario
            .pcap
            .iter()
            .map(|l| {
                (
                    l.clone(),
                    dir.join(format!("{l}.pcap")).display().to_string(),
                )
            })
            .collect(),
        None => vec![],
    };
    to_dict(py, result, pcap, outdir)
}

fn to_dict(
    py: Python<'_>,
    r: RunResult,
    pcap: Vec<(String, String)>,
    outdir: Option<PathBuf>,
) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    // The same serialiser and settings as summary.json, so the values are its values.
    let summary = serde_json::to_string_pretty(&r.summary)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    d.set_item("summary", summary)?;
    d.set_item("times", r.sample_times)?;
    d.set_item("flow_goodput", r.goodput_series)?;
    d.set_item("link_names", r.link_names)?;
    d.set_item("link_throughput", r.link_tput_series)?;
    d.set_item("link_queue", r.queue_series)?;
    let trace: Vec<_> = r
        .trace
        .iter()
        .map(|t| {
            (
                t.time_s,
                t.flow,
                t.cwnd_bytes,
                // "No threshold yet" is u64::MAX in the engine; None for Python.
                (t.ssthresh_bytes != u64::MAX).then_some(t.ssthresh_bytes),
                t.srtt_ms,
                t.in_flight_bytes,
                t.delivered_bytes,
                t.send_period_us,
                t.recv_rate_pps,
                t.bandwidth_pps,
            )
        })
        .collect();
    d.set_item("trace", trace)?;
    d.set_item("pcap", pcap.into_iter().collect::<Vec<_>>())?;
    d.set_item("outdir", outdir.map(|p| p.display().to_string()))?;
    Ok(d)
}

/// The built-in reference scenario's text (`longhaul sim example`).
#[pyfunction]
pub fn example() -> &'static str {
    longhaul_sim::scenario::REFERENCE
}
