//! The built-in studies (the repository's `studies/`, embedded when the extension is
//! built), listed and run as `longhaul sim run studies/<name>` runs them.

use std::path::PathBuf;

use longhaul_sim::Job;
use pyo3::prelude::*;

use crate::errors;

include!(concat!(env!("OUT_DIR"), "/studies.rs"));

/// `(name, title)` of each built-in study; the title is its README's first heading.
#[pyfunction]
pub fn studies() -> Vec<(&'static str, String)> {
    STUDIES
        .iter()
        .map(|(name, files)| {
            let title = files
                .iter()
                .find(|(f, _)| *f == "README.md")
                .and_then(|(_, text)| text.lines().find(|l| l.starts_with('#')))
                .map_or(String::new(), |l| l.trim_start_matches('#').trim().into());
            (*name, title)
        })
        .collect()
}

/// Runs study `name` into `out` (its sweeps, their reports and plots, as the CLI
/// writes them), on `jobs` threads (all cores when `None`), with the GIL released;
/// `seed` replaces every point's seed. Returns `(sweep name, folder)` for each of its
/// sweeps, in the order the CLI runs them (every built-in study is sweeps).
#[pyfunction]
#[pyo3(signature = (name, out, jobs=None, seed=None))]
pub fn run_study(
    py: Python<'_>,
    name: &str,
    out: PathBuf,
    jobs: Option<usize>,
    seed: Option<u64>,
) -> PyResult<Vec<(String, String)>> {
    let Some((_, files)) = STUDIES.iter().find(|(n, _)| *n == name) else {
        let known: Vec<&str> = STUDIES.iter().map(|(n, _)| *n).collect();
        let e = longhaul_sim::Error::Input {
            path: name.into(),
            message: format!("no such study; the built-in ones are {}", known.join(", ")),
        };
        return Err(errors::sim(py, &e));
    };
    // The sweeps name their base scenario by a path beside them: a folder of the files.
    let src = tempfile::Builder::new()
        .prefix("longhaul-study-")
        .tempdir()?;
    let dir = src.path().join(name);
    std::fs::create_dir(&dir)?;
    for (file, text) in files.iter() {
        std::fs::write(dir.join(file), text)?;
    }
    let mut job = Job::load(&dir).map_err(|e| errors::sim(py, &e))?;
    if let Some(seed) = seed {
        job.set_seed(seed);
    }
    let folders: Vec<(String, String)> = job
        .sweep_folders(&out)
        .into_iter()
        .map(|(n, dir)| (n, dir.display().to_string()))
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.unwrap_or(0).min(job.len()))
        .build()
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    py.detach(|| pool.install(|| job.run(&out, &|| ())))
        .map_err(|e| errors::sim(py, &e))?;
    Ok(folders)
}
