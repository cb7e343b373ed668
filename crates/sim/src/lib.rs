//! longhaul-sim: a deterministic packet-level network simulator.
//!
//! It runs the engines of `longhaul-proto` over simulated hosts, routers and links:
//! a scenario (TOML, see [`scenario`]) describes the network and the traffic, and a
//! run produces a summary, time series, plots and, on request, pcap captures.
//!
//! How it is fast: events are small `Copy` values in one binary heap ordered by
//! `(time, insertion sequence)`; a link direction computes each packet's departure
//! when it accepts it and keeps a FIFO of packets in flight, so it needs one event per
//! packet per hop and the heap holds about one entry per link and per endpoint;
//! packets are fixed-size records (real header bytes, payload length only) in an arena
//! with a free list; timers are lazy (a deadline that moves later does not touch the
//! heap). Nothing allocates per packet once the pools have grown to the window.
//!
//! How it is deterministic: the simulation never reads a clock; every random stream
//! (loss per link direction, Poisson sources, initial sequence numbers) derives from
//! the scenario's seed; ties break by insertion order. The same scenario and seed give
//! byte-identical outputs, whatever else runs on the machine and however many threads
//! a sweep uses.
//!
//! What it does not do (yet): UDT, SCTP, DiffServ routers and wireless hops come with
//! their own issues; TCP payload content is not carried.

#![warn(missing_docs)]

pub mod app;
pub mod link;
pub mod loss;
pub mod metrics;
pub mod output;
pub mod packet;
pub mod pcap;
mod plot;
pub mod scenario;
pub mod scheduler;
pub mod simulation;
pub mod sweep;
pub mod topology;
pub mod units;

use std::path::{Path, PathBuf};

pub use metrics::{RunResult, Summary};
pub use scenario::{Scenario, ScenarioError};
pub use simulation::{RunError, Simulation};
pub use sweep::Sweep;

/// Anything that can go wrong running scenarios.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A scenario or sweep file is invalid (the user's input: exit code 2).
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The path given is not a scenario file or a folder of them.
    #[error("{path}: {message}")]
    Input {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A run failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Results could not be written.
    #[error("cannot write results to {path}: {source}")]
    Output {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl Error {
    /// Whether the error is the user's input (exit code 2) rather than the system.
    pub fn is_input_error(&self) -> bool {
        matches!(self, Error::Scenario(_) | Error::Input { .. })
            || matches!(self, Error::Run(RunError::Spec(_)))
    }
}

/// Runs `scenario` in memory, without writing anything (pcap captures are skipped).
pub fn simulate(scenario: &Scenario) -> Result<RunResult, RunError> {
    let mut run = scenario.run.clone();
    run.pcap.clear();
    Simulation::new(run, scenario.topology.clone(), scenario.flows.clone())?.run()
}

/// Runs `scenario` and writes its results (and any pcap it asks for) into `dir`.
pub fn run_to_dir(scenario: &Scenario, dir: &Path) -> Result<RunResult, Error> {
    let out_err = |source| Error::Output {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(out_err)?;
    let mut run = scenario.run.clone();
    run.pcap = scenario
        .pcap
        .iter()
        .map(|l| (l.clone(), dir.join(format!("{l}.pcap"))))
        .collect();
    let result = Simulation::new(run, scenario.topology.clone(), scenario.flows.clone())?.run()?;
    output::write_run(dir, &result, scenario.plots).map_err(out_err)?;
    Ok(result)
}

/// What `longhaul sim run PATH` will do.
#[derive(Debug, Clone)]
pub enum Job {
    /// Independent scenarios (a file, or every `*.toml` in a folder).
    Scenarios(Vec<Scenario>),
    /// A sweep (`sweep.toml` in the folder).
    Sweep(Sweep),
}

impl Job {
    /// Loads and validates everything under `path` before anything runs.
    pub fn load(path: &Path) -> Result<Job, Error> {
        if path.is_file() {
            if path.file_name().is_some_and(|n| n == "sweep.toml") {
                return Ok(Job::Sweep(Sweep::load(path)?));
            }
            return Ok(Job::Scenarios(vec![Scenario::load(path)?]));
        }
        if !path.is_dir() {
            let what = if path.exists() {
                "is neither a file nor a folder"
            } else {
                "no such file or folder"
            };
            return Err(Error::Input {
                path: path.to_owned(),
                message: format!("{what}; give a scenario .toml file or a folder of them"),
            });
        }
        let sweep = path.join("sweep.toml");
        if sweep.is_file() {
            return Ok(Job::Sweep(Sweep::load(&sweep)?));
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| Error::Input {
                path: path.to_owned(),
                message: e.to_string(),
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(Error::Input {
                path: path.to_owned(),
                message: "holds no *.toml scenario files and no sweep.toml".into(),
            });
        }
        let scenarios = files
            .iter()
            .map(|f| Scenario::load(f))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Job::Scenarios(scenarios))
    }

    /// Runs it: every scenario or sweep point in parallel (rayon), results under
    /// `out`. `progress` is called once per finished run. Returns the summaries in
    /// input order.
    pub fn run(&self, out: &Path, progress: &(dyn Fn() + Sync)) -> Result<Vec<Summary>, Error> {
        use rayon::prelude::*;
        match self {
            Job::Scenarios(list) => {
                let unique_names = {
                    let mut n: Vec<&str> = list.iter().map(|s| s.run.name.as_str()).collect();
                    n.sort_unstable();
                    n.windows(2).all(|w| w[0] != w[1])
                };
                list.par_iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let dir = if list.len() == 1 {
                            out.to_owned()
                        } else if unique_names {
                            out.join(&s.run.name)
                        } else {
                            out.join(format!("{i:03}-{}", s.run.name))
                        };
                        let r = run_to_dir(s, &dir).map(|r| r.summary);
                        progress();
                        r
                    })
                    .collect()
            }
            Job::Sweep(sw) => {
                let summaries = sw
                    .points
                    .par_iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let r = run_to_dir(&p.scenario, &out.join(format!("point-{i:04}")))
                            .map(|r| r.summary);
                        progress();
                        r
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                write_sweep_csv(out, sw, &summaries)
                    .and_then(|_| write_variant_table(out, sw, &summaries))
                    .map_err(|source| Error::Output {
                        path: out.to_owned(),
                        source,
                    })?;
                Ok(summaries)
            }
        }
    }

    /// Number of runs.
    pub fn len(&self) -> usize {
        match self {
            Job::Scenarios(s) => s.len(),
            Job::Sweep(s) => s.points.len(),
        }
    }

    /// Whether there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// For a sweep with variants, `results.md`: one row per grid point, one column per
/// variant, each cell the point's total goodput (all flows), Mb/s.
fn write_variant_table(out: &Path, sw: &Sweep, summaries: &[Summary]) -> std::io::Result<()> {
    use std::fmt::Write as _;
    let variant_of = |p: &sweep::Point| {
        p.params
            .iter()
            .find(|(k, _)| k == "variant")
            .map(|(_, v)| sweep::value_str(v))
    };
    let mut variants: Vec<String> = vec![];
    let mut rows: Vec<(String, Vec<Option<f64>>)> = vec![];
    for (p, s) in sw.points.iter().zip(summaries) {
        let Some(v) = variant_of(p) else {
            return Ok(());
        };
        let col = variants.iter().position(|x| *x == v).unwrap_or_else(|| {
            variants.push(v.clone());
            variants.len() - 1
        });
        let grid: Vec<_> = p
            .params
            .iter()
            .filter(|(k, _)| k != "variant")
            .cloned()
            .collect();
        let key = if grid.is_empty() {
            "(all)".to_string()
        } else {
            sweep::describe(&grid)
        };
        let row = match rows.iter().position(|(k, _)| *k == key) {
            Some(r) => r,
            None => {
                rows.push((key, vec![]));
                rows.len() - 1
            }
        };
        let cells = &mut rows[row].1;
        if cells.len() <= col {
            cells.resize(col + 1, None);
        }
        cells[col] = Some(s.flows.iter().map(|f| f.goodput_mbps).sum());
    }
    let mut md = format!(
        "# {}\n\nTotal goodput of each run, Mb/s.\n\n| point |",
        sw.name
    );
    for v in &variants {
        let _ = write!(md, " {v} |");
    }
    md.push_str("\n|---|");
    md.push_str(&"---:|".repeat(variants.len()));
    md.push('\n');
    for (key, cells) in &rows {
        let _ = write!(md, "| {key} |");
        for c in 0..variants.len() {
            match cells.get(c).copied().flatten() {
                Some(g) => {
                    let _ = write!(md, " {g:.1} |");
                }
                None => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
    std::fs::write(out.join("results.md"), md)
}

fn write_sweep_csv(out: &Path, sw: &Sweep, summaries: &[Summary]) -> std::io::Result<()> {
    use std::fmt::Write as _;
    let keys: Vec<&str> = sw.points.first().map_or(vec![], |p| {
        p.params.iter().map(|(k, _)| k.as_str()).collect()
    });
    let mut csv = String::from("point,");
    for k in &keys {
        let _ = write!(csv, "{k},");
    }
    csv.push_str(
        "flow,protocol,goodput_mbps,delivered_bytes,completion_time_s,retransmits,timeouts\n",
    );
    for (i, (p, s)) in sw.points.iter().zip(summaries).enumerate() {
        for f in &s.flows {
            let _ = write!(csv, "{i},");
            for (_, v) in &p.params {
                let _ = write!(csv, "{},", sweep::value_str(v));
            }
            let _ = writeln!(
                csv,
                "{},{},{:.6},{},{},{},{}",
                f.id,
                f.protocol,
                f.goodput_mbps,
                f.delivered_bytes,
                f.completion_time_s
                    .map_or(String::new(), |c| format!("{c:.6}")),
                f.retransmits.map_or(String::new(), |c| c.to_string()),
                f.timeouts.map_or(String::new(), |c| c.to_string()),
            );
        }
    }
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("sweep.csv"), csv)
}
