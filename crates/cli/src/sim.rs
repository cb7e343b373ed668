//! `longhaul sim ...`: run scenarios, check them, benchmark the simulator.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use longhaul_sim::{Job, Scenario, Summary};

use crate::Failure;

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    command: SimCommand,
}

#[derive(Debug, Subcommand)]
enum SimCommand {
    /// Run a scenario file, every scenario in a folder, or a folder's sweep.toml.
    /// Without a path, runs the built-in reference scenario.
    ///
    /// Sweeps run on this machine's cores. On a Ray cluster, the Python package runs
    /// them (`pip install './python[ray]'`, see docs/python.md):
    /// `python -m longhaul sweep PATH/sweep.toml --backend ray --address ADDRESS`.
    Run {
        /// Scenario .toml, sweep.toml, or a folder of scenarios.
        path: Option<PathBuf>,
        /// Results folder (default: results/<scenario or folder name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Threads for folders and sweeps, 1 to 1024 (default: all cores).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
        jobs: Option<u16>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// No progress bar and no summary table.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Validate scenario files without running them.
    Check {
        /// Scenario .toml, sweep.toml, or a folder of scenarios.
        path: PathBuf,
    },
    /// Print the built-in reference scenario (a starting point for your own).
    Example,
    /// Measure simulator speed on the reference scenario (one TCP NewReno+SACK flow,
    /// 1 Gb/s bottleneck, BDP buffer, random loss) at each RTT.
    Bench(crate::bench::BenchArgs),
}

pub fn run(args: SimArgs) -> Result<(), Failure> {
    match args.command {
        SimCommand::Run {
            path,
            out,
            jobs,
            seed,
            quiet,
        } => run_cmd(path, out, jobs, seed, quiet),
        SimCommand::Check { path } => {
            let job = load(&path)?;
            warn_long_runs(&job);
            outln!("{}: {} run(s), all valid", path.display(), job.len())?;
            Ok(())
        }
        SimCommand::Example => {
            out!("{}", longhaul_sim::scenario::REFERENCE)?;
            Ok(())
        }
        SimCommand::Bench(b) => crate::bench::run(b),
    }
}

/// Prints on stderr (the first few of) what is valid but makes runs very long.
fn warn_long_runs(job: &Job) {
    let scenarios: Box<dyn Iterator<Item = &Scenario>> = match job {
        Job::Scenarios(list) => Box::new(list.iter()),
        Job::Sweeps(sweeps) => Box::new(
            sweeps
                .iter()
                .flat_map(|s| s.points.iter().map(|p| &p.scenario)),
        ),
    };
    let warnings: Vec<String> = scenarios.flat_map(Scenario::long_run_warnings).collect();
    for w in warnings.iter().take(3) {
        eprintln!("warning: {w}");
    }
    if warnings.len() > 3 {
        eprintln!("warning: and {} more like these", warnings.len() - 3);
    }
}

fn load(path: &Path) -> Result<Job, Failure> {
    Job::load(path).map_err(|e| {
        if e.is_input_error() {
            Failure::input(e)
        } else {
            e.into()
        }
    })
}

fn run_cmd(
    path: Option<PathBuf>,
    out: Option<PathBuf>,
    jobs: Option<u16>,
    seed: Option<u64>,
    quiet: bool,
) -> Result<(), Failure> {
    let (mut job, default_out) = match &path {
        Some(p) => (load(p)?, PathBuf::from("results").join(run_name(p))),
        None => {
            let s = Scenario::parse(
                longhaul_sim::scenario::REFERENCE,
                Path::new("<built-in reference>"),
            )
            .map_err(Failure::input)?;
            (Job::Scenarios(vec![s]), PathBuf::from("results/reference"))
        }
    };
    if let Some(seed) = seed {
        job.set_seed(seed);
    }
    warn_long_runs(&job);
    let out = out.unwrap_or(default_out);
    // Before any run: a sweep of many minutes must not fail at its end for want of
    // a place to put its results.
    std::fs::create_dir_all(&out).map_err(|e| {
        Failure::input(anyhow::anyhow!(
            "results folder {}: cannot create it: {e}; give --out a folder you can write to",
            out.display()
        ))
    })?;
    // No more threads than runs: each is started up front. (0 is rayon's default,
    // a thread per core.)
    let threads = jobs.map_or(0, usize::from).min(job.len());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let bar = if quiet || job.len() < 2 {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(job.len() as u64).with_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed, ETA {eta}")
                .expect("static template"),
        )
    };
    let summaries = pool.install(|| job.run(&out, &|| bar.inc(1)))?;
    bar.finish_and_clear();
    if !quiet {
        print_table(&summaries)?;
        outln!("results: {}", out.display())?;
    }
    Ok(())
}

/// The default results folder name: the file's stem, or the folder's name for a
/// folder or its `sweep.toml`.
fn run_name(path: &Path) -> String {
    let abs = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let named = if abs.is_file() && abs.file_name().is_some_and(|n| n != "sweep.toml") {
        abs.file_stem()
    } else if abs.is_file() {
        abs.parent().and_then(Path::file_name)
    } else {
        abs.file_name()
    };
    named.map_or("run".into(), |s| s.to_string_lossy().into_owned())
}

fn print_table(summaries: &[Summary]) -> anyhow::Result<()> {
    outln!(
        "{:<24} {:>4} {:<5} {:>12} {:>12} {:>10} {:>8}",
        "scenario",
        "flow",
        "proto",
        "goodput Mb/s",
        "completion s",
        "retransmit",
        "timeouts"
    )?;
    for s in summaries.iter().take(200) {
        for f in &s.flows {
            outln!(
                "{:<24} {:>4} {:<5} {:>12.2} {:>12} {:>10} {:>8}",
                s.scenario,
                f.id,
                f.protocol,
                f.goodput_mbps,
                f.completion_time_s
                    .map_or("-".into(), |c| format!("{c:.3}")),
                f.retransmits.map_or("-".into(), |c| c.to_string()),
                f.timeouts.map_or("-".into(), |c| c.to_string()),
            )?;
        }
    }
    Ok(())
}
