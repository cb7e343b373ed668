//! `longhaul report`: the studies' results as a static HTML site.

use std::path::PathBuf;

use clap::Args;

use crate::Failure;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The folder holding the studies' results, as `longhaul sim run studies/NAME`
    /// writes them (results/NAME).
    #[arg(default_value = "results")]
    results: PathBuf,
    /// The studies' folder (their READMEs: question, choices, findings).
    #[arg(long, default_value = "studies")]
    studies: PathBuf,
    /// Where the site goes (index.html, one folder per study).
    #[arg(long, default_value = "site")]
    out: PathBuf,
}

pub fn run(a: ReportArgs) -> Result<(), Failure> {
    let site = longhaul_output::site::build(&a.studies, &a.results, &a.out).map_err(|e| {
        if e.input {
            Failure::input(e)
        } else {
            e.into()
        }
    })?;
    outln!(
        "site: {} ({} study pages)",
        a.out.join("index.html").display(),
        site.pages.len()
    )?;
    if !site.not_run.is_empty() {
        outln!(
            "not run yet (listed with their commands): {}",
            site.not_run.join(", ")
        )?;
    }
    Ok(())
}
