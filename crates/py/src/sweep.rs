//! Sweeps: expanded here by the parser `sweep.toml` uses; each point runs on its own
//! (`run_point`), wherever the Python side's backend puts it.

use std::collections::BTreeMap;
use std::path::Path;

use longhaul_sim::report::{self, PointResult};
use longhaul_sim::{Scenario, ScenarioError, Sweep};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;
use crate::run;

/// A loaded sweep as plain data: `name`, `warmup_s`, `seed` (the override, or None),
/// `header` (the first line of `sweep.csv`) and `points`, each `(params_json,
/// document_json, label)`, which with the seed is all [`run_point`] needs, in
/// another process or on another machine.
fn to_dict<'py>(py: Python<'py>, sw: &Sweep, seed: Option<u64>) -> PyResult<Bound<'py, PyDict>> {
    let keys: Vec<&str> = sw.points.first().map_or(vec![], |p| {
        p.params.iter().map(|(k, _)| k.as_str()).collect()
    });
    let mut points = Vec::with_capacity(sw.points.len());
    for (n, p) in sw.points.iter().enumerate() {
        let (doc, label) = sw
            .document(n)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(n))?;
        points.push((json(&p.params)?, json(&doc)?, label));
    }
    let d = PyDict::new(py);
    d.set_item("name", &sw.name)?;
    d.set_item("warmup_s", sw.report.warmup_s)?;
    d.set_item("seed", seed)?;
    d.set_item("header", report::csv_header(&keys))?;
    d.set_item("points", points)?;
    Ok(d)
}

fn json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// Loads `sweep.toml` (or a `*.sweep.toml`) and every point, as `longhaul sim run`
/// would; see [`to_dict`] for what it returns.
#[pyfunction]
#[pyo3(signature = (path, seed=None))]
pub fn load_sweep<'py>(
    py: Python<'py>,
    path: &str,
    seed: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let sw = Sweep::load(Path::new(path)).map_err(|e| errors::scenario(py, &e))?;
    to_dict(py, &sw, seed)
}

/// A sweep from values: the base scenario (see `run::parse` for `source`/`kind`),
/// and `grid` and `variants` as JSON of the shapes `sweep.toml`'s `[grid]` and
/// `[[variant]]` have.
#[pyfunction]
#[pyo3(signature = (source, kind, label, grid_json, variants_json, name=None, seed=None))]
#[allow(clippy::too_many_arguments)]
pub fn make_sweep<'py>(
    py: Python<'py>,
    source: &str,
    kind: &str,
    label: &str,
    grid_json: &str,
    variants_json: &str,
    name: Option<String>,
    seed: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let origin = Path::new("<sweep>");
    let base = match kind {
        "path" => {
            // Bounded, as every scenario file is read.
            let max = longhaul_sim::scenario::MAX_FILE_BYTES;
            let text = longhaul_output::input::read_small_file(Path::new(source), max).map_err(
                |error| {
                    errors::scenario(
                        py,
                        &ScenarioError::Io {
                            path: source.into(),
                            error,
                        },
                    )
                },
            )?;
            toml::from_str(&text).map_err(|e| {
                errors::scenario(
                    py,
                    &ScenarioError::Syntax {
                        path: source.into(),
                        message: e.to_string(),
                    },
                )
            })?
        }
        "toml" => toml::from_str(source).map_err(|e| {
            errors::scenario(
                py,
                &ScenarioError::Syntax {
                    path: label.into(),
                    message: e.to_string(),
                },
            )
        })?,
        _ => run::document(source, Path::new(label)).map_err(|e| errors::scenario(py, &e))?,
    };
    let base_label = if kind == "path" { source } else { label };
    let values = |json: &str, what: &str| {
        run::document(json, Path::new(what)).map_err(|e| errors::scenario(py, &e))
    };
    let shape = |what: &str, should: &str| {
        errors::scenario(
            py,
            &ScenarioError::Invalid {
                path: origin.to_owned(),
                key: what.into(),
                message: format!("must be {should}"),
            },
        )
    };
    let grid: BTreeMap<String, Vec<toml::Value>> = match values(grid_json, "grid")? {
        toml::Value::Table(t) => t
            .into_iter()
            .map(|(k, v)| match v {
                toml::Value::Array(a) => Ok((k, a)),
                _ => Err(shape(&format!("grid.{k}"), "a list of the values to try")),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(shape("grid", "a dict of key: [values]")),
    };
    let variants = match values(variants_json, "variants")? {
        toml::Value::Array(a) => a
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                toml::Value::Table(t) => Ok(t),
                _ => Err(shape(
                    &format!("variant[{i}]"),
                    "a dict with a name and the edits",
                )),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(shape("variant", "a list of dicts")),
    };
    let sw = Sweep::from_parts(origin, base, Path::new(base_label), grid, variants, name)
        .map_err(|e| errors::scenario(py, &e))?;
    to_dict(py, &sw, seed)
}

/// Runs one point (as [`to_dict`] gave it) with the GIL released and returns its
/// lines of `sweep.csv` (point `n`), exactly as the CLI writes them; `seed` replaces
/// the point's, as `longhaul sim run --seed` does (any u64, which a TOML document
/// could not hold).
#[pyfunction]
#[pyo3(signature = (n, params_json, document_json, label, warmup_s, seed=None))]
pub fn run_point(
    py: Python<'_>,
    n: usize,
    params_json: &str,
    document_json: &str,
    label: &str,
    warmup_s: f64,
    seed: Option<u64>,
) -> PyResult<String> {
    let bad = |e: serde_json::Error| pyo3::exceptions::PyValueError::new_err(e.to_string());
    let params: Vec<(String, toml::Value)> = serde_json::from_str(params_json).map_err(bad)?;
    let doc =
        run::document(document_json, Path::new(label)).map_err(|e| errors::scenario(py, &e))?;
    let mut scenario =
        Scenario::from_value(doc, Path::new(label)).map_err(|e| errors::scenario(py, &e))?;
    if let Some(seed) = seed {
        scenario.run.seed = seed;
    }
    let result = py
        .detach(|| longhaul_sim::simulate(&scenario))
        .map_err(|e| errors::run(py, &e))?;
    Ok(report::csv_rows(
        n,
        &params,
        &PointResult::new(result, warmup_s),
    ))
}
