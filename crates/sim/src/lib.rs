//! longhaul-sim: a deterministic packet-level network simulator.
//!
//! It runs the engines of `longhaul-proto` over simulated hosts, routers and links:
//! a scenario (TOML, see [`scenario`]) describes the network and the traffic, and a
//! run produces a summary, time series, plots and, on request, pcap captures.
//!
//! How it is fast: events are small `Copy` values in one event list ordered by
//! `(time, insertion sequence)`; a link direction computes each packet's departure
//! when it accepts it and keeps a FIFO of packets in flight, so it needs one event per
//! packet per hop, and none where a router only passes a link's packets on to links
//! nothing else feeds (cut-through, [`link`]), nor into a host of TCP receivers that
//! the link is the only way into (an "early host", which takes each packet at its
//! arrival time when it is sent: see `Simulation`): one event per data segment and
//! its ACK across a router. The list holds about one entry per link and per endpoint;
//! packets are fixed-size records (real header bytes, payload length only) in an arena
//! with a free list; timers are lazy (a deadline that moves later does not touch the
//! heap). Nothing allocates per packet once the pools have grown to the window.
//!
//! How it is deterministic: the simulation never reads a clock; every random stream
//! (loss per link direction, Poisson sources, initial sequence numbers) derives from
//! the scenario's seed; ties break by insertion order (samples and traces last). The
//! same scenario and seed give byte-identical outputs, whatever else runs on the
//! machine and however many threads a sweep uses.
//!
//! Protocols: TCP (NewReno, CUBIC), UDT and AR-UDT, SCTP (the `longhaul-proto`
//! engines), and UDP sources; applications send bulk data, a number of bytes, or
//! files round robin ([`app::Files`]). Transfers ([`app::TransferSpec`]) move files
//! the way bulk-transfer tools do: striped in blocks over parallel TCP or UDT
//! channels, several at once, pipelined or with a control exchange per file, within
//! the hosts' buffer, disk and CPU limits ([`app::HostLimits`]). Routers may run DiffServ ([`diffserv`]):
//! ingress rules and an egress scheduler per link. Links may be wireless hops, and a
//! router a base station with a processing budget that runs Snoop
//! ([`basestation`], [`snoop`]). Sweeps ([`sweep`]) run a grid of variants of a
//! scenario and write a report ([`report`]).
//!
//! What it does not do: shared wireless media (each wireless hop is its own
//! point-to-point link), mobility, link-layer retransmission. Payload content is not
//! carried, except that SCTP packets travel whole (their chunks and
//! CRC32c cover the data; the simulated applications write zeros) in side buffers of
//! the packet pool, as do the UDT channels of a transfer that asks for content.

#![warn(missing_docs)]

pub mod app;
pub mod basestation;
pub mod diffserv;
pub mod link;
pub mod metrics;
pub mod output;
pub mod packet;
pub mod pcap;
pub mod plot;
mod prefetch;
pub mod report;
mod ring;
pub mod scenario;
pub mod scheduler;
pub mod simulation;
pub mod snoop;
pub mod sweep;
pub mod topology;

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
    #[error("cannot write results to {path}: {error}")]
    Output {
        /// The folder.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
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
    Simulation::new(run, scenario.topology.clone(), scenario.flows.clone())?
        .with_transfers(scenario.transfers.clone())?
        .run()
}

/// Runs `scenario` and writes its results (and any pcap it asks for) into `dir`.
pub fn run_to_dir(scenario: &Scenario, dir: &Path) -> Result<RunResult, Error> {
    let out_err = |error| Error::Output {
        path: dir.to_owned(),
        error,
    };
    std::fs::create_dir_all(dir).map_err(out_err)?;
    let mut run = scenario.run.clone();
    run.pcap = scenario
        .pcap
        .iter()
        .map(|l| (l.clone(), dir.join(format!("{l}.pcap"))))
        .collect();
    let result = Simulation::new(run, scenario.topology.clone(), scenario.flows.clone())?
        .with_transfers(scenario.transfers.clone())?
        .run()?;
    let mut written = output::write_run(dir, &result, scenario.plots).map_err(out_err)?;
    written.extend(scenario.pcap.iter().map(|l| format!("{l}.pcap")));
    longhaul_output::folder::replace_outputs(dir, &written).map_err(out_err)?;
    Ok(result)
}

/// What `longhaul sim run PATH` will do.
#[derive(Debug, Clone)]
pub enum Job {
    /// Independent scenarios (a file, or every `*.toml` in a folder).
    Scenarios(Vec<Scenario>),
    /// Sweeps: a `sweep.toml`, or a folder's `sweep.toml` and `*.sweep.toml` files.
    /// One sweep writes into the output folder itself; several write into
    /// subfolders named after them.
    Sweeps(Vec<Sweep>),
}

impl Job {
    /// Loads and validates everything under `path` before anything runs.
    pub fn load(path: &Path) -> Result<Job, Error> {
        if path.is_file() {
            if is_sweep_file(path) {
                return Ok(Job::Sweeps(vec![Sweep::load(path)?]));
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
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| Error::Input {
                path: path.to_owned(),
                message: e.to_string(),
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        // `sweep.toml` first, then the others by name.
        files.sort_by_key(|f| (f.file_name().is_none_or(|n| n != "sweep.toml"), f.clone()));
        let sweep_files: Vec<&PathBuf> = files.iter().filter(|f| is_sweep_file(f)).collect();
        if !sweep_files.is_empty() {
            // The folder's other .toml files are the sweeps' base scenarios.
            let sweeps = sweep_files
                .iter()
                .map(|f| Sweep::load(f))
                .collect::<Result<Vec<_>, _>>()?;
            for (i, a) in sweeps.iter().enumerate() {
                if let Some(j) = sweeps[..i].iter().position(|b| b.name == a.name) {
                    return Err(Error::Input {
                        path: sweep_files[i].clone(),
                        message: format!(
                            "`name = \"{}\"` is also the name of {}; sweeps write into \
                             folders named after them, so give each its own",
                            a.name,
                            sweep_files[j].display()
                        ),
                    });
                }
            }
            return Ok(Job::Sweeps(sweeps));
        }
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
                let folder = |i: usize, s: &Scenario| {
                    if unique_names {
                        s.run.name.clone()
                    } else {
                        format!("{i:03}-{}", s.run.name)
                    }
                };
                let summaries = list
                    .par_iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let dir = if list.len() == 1 {
                            out.to_owned()
                        } else {
                            out.join(folder(i, s))
                        };
                        let r = run_to_dir(s, &dir).map(|r| r.summary);
                        progress();
                        r
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if list.len() > 1 {
                    let names: Vec<String> = list
                        .iter()
                        .enumerate()
                        .map(|(i, s)| folder(i, s) + "/")
                        .collect();
                    longhaul_output::folder::replace_outputs(out, &names).map_err(|error| {
                        Error::Output {
                            path: out.to_owned(),
                            error,
                        }
                    })?;
                }
                Ok(summaries)
            }
            Job::Sweeps(sweeps) => {
                let dir = |sw: &Sweep| sweep_dir(out, sweeps.len(), sw);
                // All points of all sweeps in one pool, so the cores stay busy.
                let all: Vec<(usize, usize)> = sweeps
                    .iter()
                    .enumerate()
                    .flat_map(|(s, sw)| (0..sw.points.len()).map(move |i| (s, i)))
                    .collect();
                let point = |i: usize| format!("point-{i:04}");
                let mut results = all
                    .par_iter()
                    .map(|&(s, i)| {
                        let sw = &sweeps[s];
                        let point_dir = dir(sw).join(point(i));
                        let r = run_to_dir(&sw.points[i].scenario, &point_dir)
                            .map(|r| report::PointResult::new(r, sw.report.warmup_s));
                        progress();
                        r
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .into_iter();
                let mut summaries = vec![];
                for sw in sweeps {
                    let mine: Vec<_> = results.by_ref().take(sw.points.len()).collect();
                    let d = dir(sw);
                    let out_err = |error| Error::Output {
                        path: d.clone(),
                        error,
                    };
                    let mut written = report::write(&d, sw, &mine).map_err(out_err)?;
                    written.extend((0..sw.points.len()).map(|i| point(i) + "/"));
                    longhaul_output::folder::replace_outputs(&d, &written).map_err(out_err)?;
                    summaries.extend(mine.into_iter().map(|r| r.summary));
                }
                if sweeps.len() > 1 {
                    let names: Vec<String> =
                        sweeps.iter().map(|sw| format!("{}/", sw.name)).collect();
                    longhaul_output::folder::replace_outputs(out, &names).map_err(|error| {
                        Error::Output {
                            path: out.to_owned(),
                            error,
                        }
                    })?;
                }
                Ok(summaries)
            }
        }
    }

    /// Where [`Job::run`] puts each sweep's results (`sweep.csv`, `results.md`):
    /// `(sweep name, folder)`, in order; empty for scenarios.
    pub fn sweep_folders(&self, out: &Path) -> Vec<(String, PathBuf)> {
        match self {
            Job::Scenarios(_) => vec![],
            Job::Sweeps(sweeps) => sweeps
                .iter()
                .map(|sw| (sw.name.clone(), sweep_dir(out, sweeps.len(), sw)))
                .collect(),
        }
    }

    /// Gives every run `seed` (`longhaul sim run --seed`), in place of its own.
    pub fn set_seed(&mut self, seed: u64) {
        match self {
            Job::Scenarios(list) => list.iter_mut().for_each(|s| s.run.seed = seed),
            Job::Sweeps(sweeps) => sweeps
                .iter_mut()
                .flat_map(|sw| sw.points.iter_mut())
                .for_each(|p| p.scenario.run.seed = seed),
        }
    }

    /// Number of runs.
    pub fn len(&self) -> usize {
        match self {
            Job::Scenarios(s) => s.len(),
            Job::Sweeps(s) => s.iter().map(|s| s.points.len()).sum(),
        }
    }

    /// Whether there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One sweep writes into the output folder itself; several into subfolders named
/// after them.
fn sweep_dir(out: &Path, sweeps: usize, sw: &Sweep) -> PathBuf {
    if sweeps == 1 {
        out.to_owned()
    } else {
        out.join(&sw.name)
    }
}

/// `sweep.toml` or `*.sweep.toml`.
fn is_sweep_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "sweep.toml" || n.ends_with(".sweep.toml"))
}
