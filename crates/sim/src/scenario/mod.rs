//! Scenario files: TOML in, a validated [`Scenario`] out, or an error that names the
//! file, the key and what to do.
//!
//! ```toml
//! name = "reference"
//! duration = "60s"
//! seed = 1
//! sample_interval = "1s"
//!
//! [topology]
//! kind = "chain"                       # or "dumbbell" (pairs, access, bottleneck, egress)
//! [[topology.links]]
//! rate = "10Gbps"
//! delay = "0ms"
//! [[topology.links]]
//! rate = "1Gbps"
//! delay = "50ms"
//! queue = "1bdp"                       # "100pkts", "1MB", "0.5bdp"
//! loss = 1e-5                          # forward direction; or a Gilbert-Elliott table
//!
//! [[flow]]
//! protocol = "tcp"                     # or "udp"
//! cc = "newreno"                       # "cubic"
//! size = "5GB"                         # omit for an endless backlog
//!
//! [outputs]
//! trace = true                         # cwnd/RTT trace
//! pcap = ["link1"]                     # link directions to capture
//! ```
//! `docs/scenarios.md` documents every key.
//!
//! By concern: `schema` is the file as serde reads it (and finds a wrong value's
//! full key path), `document` edits a document before loading (sweeps' key paths,
//! per-pair flows), `limits` holds every limit a scenario must keep, and the loader
//! here checks the run and the topology, handing links to `topology`, DiffServ to
//! `diffserv`, base stations to `station`, flows to `flows` and transfers to
//! `transfer`.

use std::path::{Path, PathBuf};

use longhaul_proto::blast::Scheme;
use longhaul_proto::{Duration, Instant};
use serde::Deserialize;

use crate::app::{FlowSpec, TransferSpec};
use crate::simulation::RunConfig;
use crate::topology::{LinkSpec, Topology, MAX_NODES};

use longhaul_model::units::{parse_rate, parse_size};

mod blast;
mod diffserv;
mod document;
mod flows;
mod limits;
mod schema;
mod station;
mod topology;
mod transfer;
use document::expand_per_pair;
pub use document::set_path;
pub use limits::{
    LONG_RUN_PACKETS, MAX_FILE_BYTES, MAX_FLOWS, MAX_MESSAGE, MAX_SAMPLES, PACKETS_PER_WALL_SECOND,
};
use schema::{ChainFile, DumbbellFile, File, FlowFile, TcpFlowFile, TopologyFile, UdtFlowFile};

/// A scenario that failed to load.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: cannot read: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Not TOML, or a key has the wrong type or an unknown name.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value is out of range or refers to something that does not exist.
    #[error("{path}: `{key}`: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Dotted key, e.g. `flow[1].to`.
        key: String,
        /// What is wrong and what to write instead.
        message: String,
    },
}

/// A loaded, validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Run parameters.
    pub run: RunConfig,
    /// The network.
    pub topology: Topology,
    /// The traffic.
    pub flows: Vec<FlowSpec>,
    /// Whether to draw PNG plots.
    pub plots: bool,
    /// Link directions to capture.
    pub pcap: Vec<String>,
    /// Transfers (their channels are flows too).
    pub transfers: Vec<TransferSpec>,
}

// ---- loading -------------------------------------------------------------------

/// Reads a scenario or sweep file with
/// [`read_small_file`](longhaul_output::input::read_small_file), the error naming it.
pub(crate) fn read_text(path: &Path) -> Result<String, ScenarioError> {
    longhaul_output::input::read_small_file(path, MAX_FILE_BYTES).map_err(|error| {
        ScenarioError::Io {
            path: path.to_owned(),
            error,
        }
    })
}

impl Scenario {
    /// What is valid but makes the run take long: every flow whose packets, each
    /// simulated, add up past [`LONG_RUN_PACKETS`], with an estimate of the wall
    /// time. A flow's packets are estimated from its rate (UDP) or from the slowest
    /// link on its path (the others, which fill it at best), over its active time,
    /// and no more than its size needs.
    pub fn long_run_warnings(&self) -> Vec<String> {
        let end = Instant::ZERO + self.run.duration;
        let name = |n: usize| &self.topology.nodes[n].name;
        let routes = std::cell::OnceCell::new();
        // The slowest link direction on the way from `a` to `b`, b/s.
        let path_rate = |a: usize, b: usize| -> f64 {
            let routes: &crate::topology::Routes = routes.get_or_init(|| self.topology.routes());
            let (mut at, mut rate, mut hops) = (a, f64::INFINITY, 0);
            while at != b && hops < self.topology.nodes.len() {
                let Some(l) = routes.get(at, b) else { break };
                let (_, next, params) = &self.topology.links[l as usize];
                rate = rate.min(params.rate.as_bps() as f64);
                at = *next;
                hops += 1;
            }
            if rate.is_finite() {
                rate
            } else {
                0.0
            }
        };
        let active = |start: Instant| end.saturating_duration_since(start).as_secs_f64();
        let mut warnings = vec![];
        for (i, f) in self.flows.iter().enumerate() {
            let (from, to) = f.ends();
            let (what, pkts, secs) = match f {
                FlowSpec::Udp(u) => {
                    let stop = u.stop.map_or(end, |s| s.min(end));
                    let secs = stop.saturating_duration_since(u.start).as_secs_f64();
                    let pkts = u.rate.as_bps() as f64 * secs / (8.0 * f64::from(u.packet_size));
                    ("the UDP source", pkts, secs)
                }
                FlowSpec::Tcp(t) => {
                    let secs = active(t.start);
                    let mss = f64::from(t.config.mss);
                    let by_size = t
                        .size
                        .or(t.files.map(|f| f.total()))
                        .map(|b| b as f64 / mss);
                    let by_rate = path_rate(from, to) * secs / (8.0 * (mss + 52.0));
                    (
                        "the TCP flow",
                        by_size.map_or(by_rate, |s| s.min(by_rate)),
                        secs,
                    )
                }
                FlowSpec::Udt(u) => {
                    let secs = active(u.start);
                    let by_size = u.size.map(|b| b as f64 / 1456.0);
                    let by_rate = path_rate(from, to) * secs / (8.0 * 1500.0);
                    (
                        "the UDT flow",
                        by_size.map_or(by_rate, |s| s.min(by_rate)),
                        secs,
                    )
                }
                FlowSpec::Blast(b) => {
                    let secs = active(b.start);
                    let c = &b.config;
                    let by_size = c.size as f64 / c.block_len() as f64;
                    let rate = path_rate(from, to).min(c.rate.as_bps() as f64);
                    let by_rate = rate * secs / (8.0 * (f64::from(c.datagram) + 28.0));
                    ("the blast flow", by_size.min(by_rate), secs)
                }
                FlowSpec::Sctp(c) => {
                    let secs = active(c.start);
                    let by_size = c.files.map(|f| f.total() as f64 / 1452.0);
                    let by_rate = path_rate(from, to) * secs / (8.0 * 1500.0);
                    (
                        "the SCTP flow",
                        by_size.map_or(by_rate, |s| s.min(by_rate)),
                        secs,
                    )
                }
            };
            if pkts > LONG_RUN_PACKETS {
                let hours = pkts / PACKETS_PER_WALL_SECOND / 3600.0;
                let wall = if hours >= 1.0 {
                    format!("about {hours:.0} hours")
                } else {
                    format!("about {:.0} minutes", hours * 60.0)
                };
                warnings.push(format!(
                    "{}: flow[{i}], {what} {} -> {}, may send {pkts:.1e} packets in its \
                     {secs} s, each simulated: the run may take {wall}; lower the \
                     `duration` (or the flow's rate or size) if that was not meant",
                    self.run.name,
                    name(from),
                    name(to),
                ));
            }
        }
        warnings
    }

    /// Loads and validates the scenario file at `path`.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        Self::parse(&read_text(path)?, path)
    }

    /// Parses scenario text; `path` is used in error messages and as the default name.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ScenarioError> {
        // Straight from text (not via `toml::Value`) so errors carry line and column,
        // unless a flow stands for one per pair and must be expanded first.
        let value: toml::Value = toml::from_str(text).map_err(|e| syntax(path, e))?;
        let per_pair = value
            .get("flow")
            .and_then(|f| f.as_array())
            .is_some_and(|a| a.iter().any(|f| f.get("per_pair").is_some()));
        if per_pair {
            return Self::from_value(value, path);
        }
        let file: File = toml::from_str(text).map_err(|e| type_error(path, text, &value, e))?;
        Loader { path }.build(file)
    }

    /// Builds a scenario from a parsed TOML document (sweeps edit the document first).
    pub fn from_value(mut value: toml::Value, path: &Path) -> Result<Self, ScenarioError> {
        expand_per_pair(&mut value).map_err(|m| ScenarioError::Invalid {
            path: path.to_owned(),
            key: "flow".into(),
            message: m,
        })?;
        // One read; the document is searched for the key only when it fails.
        let file = match File::deserialize(value.clone()) {
            Ok(file) => file,
            Err(e) => match schema::locate(&value) {
                Some((key, message)) => return Err(invalid(path, key, message)),
                None => return Err(syntax(path, e)),
            },
        };
        Loader { path }.build(file)
    }
}

/// A value of the wrong type (or an unknown key), by its full key path when
/// [`schema::locate`] finds it, with the line of the table that holds it.
fn type_error(path: &Path, text: &str, doc: &toml::Value, e: toml::de::Error) -> ScenarioError {
    let Some((key, message)) = schema::locate(doc) else {
        return syntax(path, e);
    };
    let line = e
        .span()
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let message = match line {
        Some(l) => format!("{message} (in the table at line {l})"),
        None => message,
    };
    invalid(path, key, message)
}

fn invalid(path: &Path, key: String, message: String) -> ScenarioError {
    ScenarioError::Invalid {
        path: path.to_owned(),
        key,
        message,
    }
}

fn syntax(path: &Path, e: impl std::fmt::Display) -> ScenarioError {
    ScenarioError::Syntax {
        path: path.to_owned(),
        message: e.to_string().trim_end().to_string(),
    }
}

struct Loader<'a> {
    path: &'a Path,
}

impl Loader<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.path.to_owned(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn build(&self, f: File) -> Result<Scenario, ScenarioError> {
        let duration = self.time("duration", &f.duration)?;
        if duration.is_zero() {
            return Err(self.err("duration", "must be longer than zero, e.g. \"60s\""));
        }
        let sample_interval = match &f.sample_interval {
            Some(s) => self.time("sample_interval", s)?,
            None => Duration::from_secs(1).min(duration),
        };
        if sample_interval.is_zero() || sample_interval > duration {
            return Err(self.err(
                "sample_interval",
                "must be above zero and at most `duration`",
            ));
        }
        // Series are kept in memory: bound their length.
        let samples = |i: Duration| duration.as_nanos() / i.as_nanos().max(1);
        if samples(sample_interval) > MAX_SAMPLES {
            return Err(self.err(
                "sample_interval",
                format!(
                    "would record {} samples; at most {MAX_SAMPLES}: use a longer interval",
                    samples(sample_interval)
                ),
            ));
        }
        let topology = match &f.topology {
            TopologyFile::Chain(ChainFile { links }) => {
                if links.len() >= MAX_NODES {
                    return Err(self.err(
                        "topology.links",
                        format!("at most {} links in a chain", MAX_NODES - 1),
                    ));
                }
                if links.is_empty() {
                    return Err(self.err(
                        "topology.links",
                        "a chain needs at least one [[topology.links]]",
                    ));
                }
                let specs = links
                    .iter()
                    .enumerate()
                    .map(|(i, l)| self.link(&format!("topology.links[{i}]"), l))
                    .collect::<Result<Vec<_>, _>>()?;
                Topology::chain(&specs)
            }
            TopologyFile::Dumbbell(DumbbellFile {
                pairs,
                access,
                access_delays,
                bottleneck,
                egress,
            }) => {
                if *pairs == 0 || 2 * *pairs + 2 > MAX_NODES {
                    return Err(self.err(
                        "topology.pairs",
                        format!("must be from 1 to {}", (MAX_NODES - 2) / 2),
                    ));
                }
                let access = self.link("topology.access", access)?;
                let bottleneck = self.link("topology.bottleneck", bottleneck)?;
                let egress = match egress {
                    Some(e) => self.link("topology.egress", e)?,
                    None => access.clone(),
                };
                let per_pair = match access_delays {
                    None => vec![access],
                    Some(d) if d.len() == *pairs => d
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            let delay = self.time(&format!("topology.access_delays[{i}]"), s)?;
                            Ok(LinkSpec {
                                delay,
                                ..access.clone()
                            })
                        })
                        .collect::<Result<Vec<_>, ScenarioError>>()?,
                    Some(d) => {
                        return Err(self.err(
                            "topology.access_delays",
                            format!(
                                "has {} entries for {pairs} pairs: give one delay per pair",
                                d.len()
                            ),
                        ))
                    }
                };
                Topology::dumbbell(*pairs, &per_pair, &bottleneck, &egress)
            }
        };
        let default_ends = |i: usize| -> (String, String) {
            match &f.topology {
                TopologyFile::Chain(ChainFile { links }) => {
                    ("n0".into(), format!("n{}", links.len()))
                }
                TopologyFile::Dumbbell(_) => (format!("s{i}"), format!("r{i}")),
            }
        };
        let too_many = |n: usize, what: &str| {
            self.err(
                "flow",
                format!(
                    "{n} {what}; a scenario holds at most {MAX_FLOWS} (each flow has its own \
                     ports): split it into several scenarios, or sweep over the flow count"
                ),
            )
        };
        if f.flow.len() > MAX_FLOWS {
            return Err(too_many(f.flow.len(), "[[flow]] tables"));
        }
        let mut flows = vec![];
        for (i, fl) in f.flow.iter().enumerate() {
            let key = format!("flow[{i}]");
            let (from, to, start) = match fl {
                FlowFile::Tcp(t) => (&t.from, &t.to, &t.start),
                FlowFile::Udp(u) => (&u.from, &u.to, &u.start),
                FlowFile::Udt(u) => (&u.from, &u.to, &u.start),
                FlowFile::Sctp(u) => (&u.from, &u.to, &u.start),
                FlowFile::Rbudp(b) | FlowFile::Tsunami(b) | FlowFile::Sabul(b) => {
                    (&b.from, &b.to, &b.start)
                }
            };
            let (dfrom, dto) = default_ends(i);
            let from = self.host(
                &topology,
                &format!("{key}.from"),
                from.as_deref().unwrap_or(&dfrom),
            )?;
            let to = self.host(
                &topology,
                &format!("{key}.to"),
                to.as_deref().unwrap_or(&dto),
            )?;
            if from == to {
                return Err(self.err(format!("{key}.to"), "a flow needs two different hosts"));
            }
            let start = match start {
                Some(s) => Instant::ZERO + self.time(&format!("{key}.start"), s)?,
                None => Instant::ZERO,
            };
            self.starts_in_run(&format!("{key}.start"), start, duration, &f.duration)?;
            flows.push(match fl {
                FlowFile::Tcp(t) => FlowSpec::Tcp(self.tcp_flow(&key, t, from, to, start)?),
                FlowFile::Udp(u) => FlowSpec::Udp(self.udp_flow(&key, u, from, to, start)?),
                FlowFile::Udt(u) => FlowSpec::Udt(self.udt_flow(&key, u, from, to, start, f.seed)?),
                FlowFile::Sctp(u) => FlowSpec::Sctp(self.sctp_flow(&key, u, from, to, start)?),
                FlowFile::Rbudp(b) => {
                    FlowSpec::Blast(self.blast_flow(&key, Scheme::Rbudp, b, from, to, start)?)
                }
                FlowFile::Tsunami(b) => {
                    FlowSpec::Blast(self.blast_flow(&key, Scheme::Tsunami, b, from, to, start)?)
                }
                FlowFile::Sabul(b) => {
                    FlowSpec::Blast(self.blast_flow(&key, Scheme::Sabul, b, from, to, start)?)
                }
            });
        }
        let hosts = self.hosts(&topology, &f.host)?;
        let mut transfers = vec![];
        for (i, t) in f.transfer.iter().enumerate() {
            let x = self.transfer(i, t, &topology, &hosts, default_ends(i), f.seed, &mut flows)?;
            self.starts_in_run(
                &format!("transfer[{i}].start"),
                x.start,
                duration,
                &f.duration,
            )?;
            transfers.push(x);
        }
        if flows.len() > MAX_FLOWS {
            return Err(too_many(flows.len(), "flows with the transfers' channels"));
        }
        if f.stop_when_done && transfers.is_empty() {
            return Err(self.err(
                "stop_when_done",
                "needs a [[transfer]]: the run ends when the last transfer completes",
            ));
        }
        let mut topology = topology;
        for (i, r) in f.ingress.iter().enumerate() {
            let rule = self.ingress_rule(&topology, &format!("ingress[{i}]"), r)?;
            topology.ingress.push(rule);
        }
        for (i, b) in f.base_station.iter().enumerate() {
            let bs = self.base_station(&topology, &format!("base_station[{i}]"), b)?;
            if topology.base_stations.iter().any(|o| o.node == bs.node) {
                return Err(self.err(
                    format!("base_station[{i}].node"),
                    format!("`{}` already has a base station", b.node),
                ));
            }
            topology.base_stations.push(bs);
        }
        let trace_interval = match (&f.outputs.trace, &f.outputs.trace_interval) {
            (false, _) => None,
            (true, None) => Some(sample_interval),
            (true, Some(s)) => {
                let t = self.time("outputs.trace_interval", s)?;
                if t.is_zero() || samples(t) > MAX_SAMPLES {
                    return Err(self.err(
                        "outputs.trace_interval",
                        format!("must be above zero and record at most {MAX_SAMPLES} samples: use a longer interval"),
                    ));
                }
                Some(t)
            }
        };
        for (i, name) in f.outputs.pcap.iter().enumerate() {
            if !topology.links.iter().any(|(_, _, p)| &p.name == name) {
                let names: Vec<&str> = topology
                    .links
                    .iter()
                    .map(|(_, _, p)| p.name.as_str())
                    .collect();
                return Err(self.err(
                    format!("outputs.pcap[{i}]"),
                    format!(
                        "no link direction named `{name}`; this topology has: {}",
                        names.join(", ")
                    ),
                ));
            }
        }
        let name = f.name.clone().unwrap_or_else(|| {
            self.path
                .file_stem()
                .map_or("scenario".into(), |s| s.to_string_lossy().into_owned())
        });
        Ok(Scenario {
            run: RunConfig {
                name,
                duration,
                seed: f.seed,
                sample_interval,
                trace_interval,
                pcap: vec![],
                stop_when_done: f.stop_when_done,
            },
            topology,
            flows,
            plots: f.outputs.plots,
            pcap: f.outputs.pcap,
            transfers,
        })
    }
}

/// The built-in reference scenario (`longhaul sim run` without a file): one NewReno
/// flow with SACK over a 1 Gb/s, 100 ms, one-BDP DropTail bottleneck with random loss
/// 1e-5, for 60 s.
pub const REFERENCE: &str = include_str!("../../scenarios/reference.toml");

/// The reference scenario with the bottleneck's one-way delay and loss changed (the
/// `bench` variants).
pub fn reference(one_way_delay: &str, loss: f64) -> Result<Scenario, ScenarioError> {
    let mut v: toml::Value =
        toml::from_str(REFERENCE).map_err(|e| syntax(Path::new("<reference>"), e))?;
    set_path(
        &mut v,
        "topology.links.1.delay",
        toml::Value::String(one_way_delay.into()),
    )
    .and_then(|_| set_path(&mut v, "topology.links.1.loss", toml::Value::Float(loss)))
    .map_err(|m| syntax(Path::new("<reference>"), m))?;
    Scenario::from_value(v, Path::new("<reference>"))
}
