//! longhaul-py: the native core of the Python package `longhaul` (`python/`).
//!
//! It is a thin layer over `longhaul-sim`: scenarios are parsed, validated and run by
//! the same code as `longhaul sim run`, and sweeps are expanded by the same parser as
//! `sweep.toml`, so a result from Python is the CLI's result for the same input. Runs
//! release the GIL. What this crate returns is plain data (JSON text, lists, CSV
//! text); the Python side (`python/longhaul/`) turns it into DataFrames and runs
//! sweeps on a backend.
//!
//! What it does not do: hold state between calls, start threads of its own outside a
//! call, or talk to a network. The transfer tool and the emulator are not bound.

mod errors;
mod run;
mod study;
mod sweep;

use pyo3::prelude::*;

/// `longhaul._longhaul`: see `python/longhaul/_longhaul.pyi` for each function.
#[pymodule]
fn _longhaul(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run::run, m)?)?;
    m.add_function(wrap_pyfunction!(run::example, m)?)?;
    m.add_function(wrap_pyfunction!(sweep::load_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(sweep::make_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(sweep::run_point, m)?)?;
    m.add_function(wrap_pyfunction!(study::studies, m)?)?;
    m.add_function(wrap_pyfunction!(study::run_study, m)?)?;
    Ok(())
}
