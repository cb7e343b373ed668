//! Errors as the Python package's exception classes (`longhaul/_errors.py`), carrying
//! the CLI's messages and, for a scenario, the file and the key.

use longhaul_sim::{Error, RunError, ScenarioError};
use pyo3::prelude::*;

/// An instance of `longhaul._errors.<class>(*args)`, raised.
fn raise<'py, A>(py: Python<'py>, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = py
        .import("longhaul._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1(args));
    match made {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}

/// A scenario or sweep that is not valid: `ScenarioError(message, key, path)`.
pub fn scenario(py: Python<'_>, e: &ScenarioError) -> PyErr {
    let (key, path) = match e {
        ScenarioError::Invalid { key, path, .. } => (Some(key.clone()), path),
        ScenarioError::Syntax { path, .. } | ScenarioError::Io { path, .. } => (None, path),
    };
    raise(
        py,
        "ScenarioError",
        (e.to_string(), key, path.display().to_string()),
    )
}

/// Anything `longhaul-sim` returns, as the class that fits it.
pub fn sim(py: Python<'_>, e: &Error) -> PyErr {
    match e {
        Error::Scenario(s) => scenario(py, s),
        Error::Input { path, .. } => raise(
            py,
            "ScenarioError",
            (e.to_string(), None::<String>, path.display().to_string()),
        ),
        Error::Run(r) => run(py, r),
        Error::Output { .. } => raise(py, "OutputError", (e.to_string(),)),
    }
}

/// A run that failed: inconsistent references are the user's (`ScenarioError`), a
/// capture that could not be written is the system's (`OutputError`).
pub fn run(py: Python<'_>, e: &RunError) -> PyErr {
    match e {
        RunError::Spec(_) => raise(py, "ScenarioError", (e.to_string(),)),
        RunError::Pcap { .. } => raise(py, "OutputError", (e.to_string(),)),
    }
}
