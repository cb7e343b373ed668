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

use std::path::{Path, PathBuf};

use longhaul_proto::cc::{Avoidance, CcAlgorithm, CubicConfig};
use longhaul_proto::rtt::RtoConfig;
use longhaul_proto::tcp::{AckPolicy, InitialWindow, TcpConfig};
use longhaul_proto::{Duration, Instant};
use serde::Deserialize;

use crate::app::{
    Arrivals, Files, FlowSpec, SctpFlowSpec, TcpFlowSpec, TransferSpec, UdpFlowSpec, UdtFlowSpec,
};
use crate::basestation::{AdaptiveConfig, BaseStationSpec, SnoopMode};
use crate::diffserv::policy::{Action, Match, MeterSpec, PreColors, RuleSpec};
use crate::diffserv::sched::{ClassConfig, LlqConfig};
use crate::link::EgressSpec;
use crate::loss::LossModel;
use crate::simulation::RunConfig;
use crate::snoop::{Estimator, SnoopRules};
use crate::topology::{node_addr, LinkSpec, NodeKind, QueueSpec, Topology, MAX_NODES};
use longhaul_proto::cc::{ArUdtConfig, SpwScope, UdtConfig as UdtCcConfig, UdtProfile};
use longhaul_proto::sctp::SctpConfig;
use longhaul_proto::udt::{NakReport, RateControl, UdtConnConfig};

/// Largest application write (SCTP message) a scenario may ask for.
const MAX_MESSAGE: u32 = 1 << 20;
/// Most samples a series may hold (duration / interval).
const MAX_SAMPLES: u128 = 10_000_000;
/// The most flows a scenario may hold, transfer channels included: each flow gets
/// its own range of ports, and `check` and `run` both refuse more (one limit, one
/// place).
pub const MAX_FLOWS: usize = 10_000;
use crate::units::{parse_queue, parse_rate, parse_size, parse_time};

mod transfer;

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

// ---- the file format, as serde sees it ---------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    #[allow(dead_code)]
    description: Option<String>,
    duration: String,
    #[serde(default = "default_seed")]
    seed: u64,
    sample_interval: Option<String>,
    topology: TopologyFile,
    #[serde(default)]
    flow: Vec<FlowFile>,
    #[serde(default)]
    ingress: Vec<IngressFile>,
    #[serde(default)]
    base_station: Vec<BaseStationFile>,
    #[serde(default)]
    host: Vec<transfer::HostFile>,
    #[serde(default)]
    transfer: Vec<transfer::TransferFile>,
    #[serde(default)]
    stop_when_done: bool,
    #[serde(default)]
    outputs: OutputsFile,
}

/// A base station: processing budget and Snoop.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaseStationFile {
    node: String,
    forward_cost: Option<String>,
    snoop_cost: Option<String>,
    queue: Option<usize>,
    snoop: Option<String>,
    rules: Option<String>,
    retransmit_on_dupack: Option<u32>,
    stale_acks: Option<String>,
    estimator: Option<String>,
    gain: Option<f64>,
    f: Option<f64>,
    min_tick: Option<String>,
    cache: Option<usize>,
    max_local_rxmit: Option<u32>,
    adaptive: Option<AdaptiveFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdaptiveFile {
    interval: Option<String>,
    load_limit: Option<f64>,
    min_error: Option<f64>,
    lossy: Option<f64>,
    f_lossy: Option<f64>,
    f_clean: Option<f64>,
    smoothing: Option<f64>,
}

/// A DiffServ ingress rule at a router.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IngressFile {
    node: String,
    #[serde(default, rename = "match")]
    matches: MatchFile,
    set_dscp: Option<u8>,
    meter: Option<MeterFile>,
    conform: Option<ActionFile>,
    exceed: Option<ActionFile>,
    violate: Option<ActionFile>,
    /// Colour-aware metering: the DSCPs that arrive yellow and red.
    colors: Option<ColorsFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ColorsFile {
    #[serde(default)]
    yellow: Vec<u8>,
    #[serde(default)]
    red: Vec<u8>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchFile {
    from: Option<String>,
    to: Option<String>,
    protocol: Option<String>,
    src_port: Option<u16>,
    dst_port: Option<u16>,
    dscp: Option<u8>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum MeterFile {
    Car {
        rate: String,
        normal_burst: String,
        extended_burst: Option<String>,
    },
    Srtcm {
        cir: String,
        cbs: String,
        ebs: String,
    },
    Trtcm {
        pir: String,
        pbs: String,
        cir: String,
        cbs: String,
    },
}

/// "transmit", "drop", or a DSCP to re-mark to.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum ActionFile {
    Word(String),
    Remark(u8),
}

fn default_seed() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputsFile {
    #[serde(default = "yes")]
    plots: bool,
    #[serde(default)]
    trace: bool,
    trace_interval: Option<String>,
    #[serde(default)]
    pcap: Vec<String>,
}

impl Default for OutputsFile {
    fn default() -> Self {
        OutputsFile {
            plots: true,
            trace: false,
            trace_interval: None,
            pcap: vec![],
        }
    }
}

fn yes() -> bool {
    true
}

// Parsed once per file: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum TopologyFile {
    Chain {
        links: Vec<LinkFile>,
    },
    Dumbbell {
        #[serde(default = "one")]
        pairs: usize,
        access: LinkFile,
        /// Per-pair one-way delays of the access links (overrides `access.delay`).
        access_delays: Option<Vec<String>>,
        bottleneck: LinkFile,
        egress: Option<LinkFile>,
    },
}

fn one() -> usize {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkFile {
    rate: String,
    delay: String,
    queue: Option<String>,
    loss: Option<LossFile>,
    loss_reverse: Option<LossFile>,
    egress: Option<EgressFile>,
    #[serde(default)]
    wireless: bool,
}

/// A DiffServ egress scheduler on a link's forward direction.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct EgressFile {
    priority: Option<PriorityFile>,
    classes: Vec<ClassFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriorityFile {
    dscp: Vec<u8>,
    rate: String,
    burst: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassFile {
    #[serde(default)]
    dscp: Vec<u8>,
    bandwidth: String,
    limit: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum LossFile {
    Bernoulli(f64),
    Table(LossTable),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
enum LossTable {
    Bernoulli {
        p: f64,
    },
    GilbertElliott {
        p_good_to_bad: f64,
        p_bad_to_good: f64,
        loss_good: Option<f64>,
        loss_bad: Option<f64>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "protocol", rename_all = "lowercase", deny_unknown_fields)]
enum FlowFile {
    Tcp(Box<TcpFlowFile>),
    Udp(UdpFlowFile),
    Udt(Box<UdtFlowFile>),
    Sctp(Box<SctpFlowFile>),
}

/// `files = { count, size, message }`: the SCTP study's round-robin writer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesFile {
    count: u32,
    size: String,
    message: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SctpFlowFile {
    from: Option<String>,
    to: Option<String>,
    start: Option<String>,
    profile: Option<String>,
    files: Option<FilesFile>,
    message: Option<u32>,
    mtu: Option<u16>,
    streams: Option<u16>,
    sack_delay: Option<String>,
    sack_freq: Option<u32>,
    max_burst: Option<u32>,
    recv_buffer: Option<String>,
    min_rto: Option<String>,
    initial_rto: Option<String>,
    data_on_cookie_echo: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UdtFlowFile {
    from: Option<String>,
    to: Option<String>,
    start: Option<String>,
    size: Option<String>,
    cc: Option<String>,
    profile: Option<String>,
    fix_inverted_fallback: Option<bool>,
    nak_report: Option<String>,
    mss: Option<u32>,
    flight_flag_size: Option<u32>,
    recv_buffer_pkts: Option<u32>,
    send_buffer_pkts: Option<u32>,
    w1: Option<f64>,
    w2: Option<f64>,
    alpha: Option<f64>,
    beta: Option<f64>,
    spw_scope: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TcpFlowFile {
    from: Option<String>,
    to: Option<String>,
    start: Option<String>,
    size: Option<String>,
    files: Option<FilesFile>,
    profile: Option<String>,
    cc: Option<String>,
    avoidance: Option<String>,
    mss: Option<u16>,
    sack: Option<bool>,
    ack_every: Option<u32>,
    delayed_ack_timeout: Option<String>,
    min_rto: Option<String>,
    initial_window: Option<toml::Value>,
    recv_buffer: Option<String>,
    send_buffer: Option<String>,
    window_scaling: Option<bool>,
    dscp: Option<u8>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UdpFlowFile {
    from: Option<String>,
    to: Option<String>,
    start: Option<String>,
    stop: Option<String>,
    rate: String,
    packet_size: Option<u32>,
    arrivals: Option<String>,
    dscp: Option<u8>,
}

// ---- loading -------------------------------------------------------------------

/// Largest scenario or sweep file read, bytes. Scenarios are a few kilobytes; the
/// limit keeps a key that names a device or a huge file (`scenario = "/dev/zero"` in
/// a sweep) from reading until memory runs out.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads a scenario or sweep file with [`read_small_file`], the error naming it.
pub(crate) fn read_text(path: &Path) -> Result<String, ScenarioError> {
    read_small_file(path, MAX_FILE_BYTES).map_err(|error| ScenarioError::Io {
        path: path.to_owned(),
        error,
    })
}

/// Reads a text file that must be a regular file of at most `max` bytes. Anything
/// else is an `InvalidInput` error saying which: a folder, a device that never ends
/// (`/dev/zero`), a FIFO (whose open would block), a file over the limit. The
/// command line reads the other small files its flags name (traces, tokens) with it.
pub fn read_small_file(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    if !std::fs::metadata(path)?.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a folder, device or pipe)",
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > max {
        let size = if max.is_multiple_of(1 << 20) {
            format!("{} MiB", max >> 20)
        } else {
            format!("{max} bytes")
        };
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("larger than {size}"),
        ));
    }
    Ok(text)
}

/// A UDP source offering more packets than this makes a run of minutes or more:
/// each packet is simulated, at a few events apiece (about 10 M events a second).
pub const LONG_RUN_UDP_PACKETS: f64 = 1e9;

impl Scenario {
    /// Warnings for what is valid but makes the run very long: UDP sources that
    /// offer more than [`LONG_RUN_UDP_PACKETS`] packets (rate × sending time ÷
    /// packet size), most likely a slip of units.
    pub fn long_run_warnings(&self) -> Vec<String> {
        let end = Instant::ZERO + self.run.duration;
        let name = |n: usize| &self.topology.nodes[n].name;
        self.flows
            .iter()
            .filter_map(|f| match f {
                FlowSpec::Udp(u) => Some(u),
                _ => None,
            })
            .filter_map(|u| {
                let stop = u.stop.map_or(end, |s| s.min(end));
                let secs = stop.saturating_duration_since(u.start).as_secs_f64();
                let pkts = u.rate.as_bps() as f64 * secs / (8.0 * f64::from(u.packet_size));
                (pkts > LONG_RUN_UDP_PACKETS).then(|| {
                    format!(
                        "{}: the UDP source {} -> {} offers {pkts:.1e} packets ({:.3e} b/s for \
                         {secs} s), each simulated: the run will take long; lower its `rate` or \
                         the `duration` if that was not meant",
                        self.run.name,
                        name(u.from),
                        name(u.to),
                        u.rate.as_bps() as f64,
                    )
                })
            })
            .collect()
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
        let file: File = toml::from_str(text).map_err(|e| syntax(path, e))?;
        Loader { path }.build(file)
    }

    /// Builds a scenario from a parsed TOML document (sweeps edit the document first).
    pub fn from_value(mut value: toml::Value, path: &Path) -> Result<Self, ScenarioError> {
        expand_per_pair(&mut value).map_err(|m| ScenarioError::Invalid {
            path: path.to_owned(),
            key: "flow".into(),
            message: m,
        })?;
        let file: File = File::deserialize(value).map_err(|e| syntax(path, e))?;
        Loader { path }.build(file)
    }
}

/// `per_pair = true` in a `[[flow]]` of a dumbbell stands for one such flow per pair,
/// `s<i>` to `r<i>`, in pair order (so a sweep over `topology.pairs` needs no list).
fn expand_per_pair(doc: &mut toml::Value) -> Result<(), String> {
    let pairs = doc
        .get("topology")
        .filter(|t| t.get("kind").and_then(|k| k.as_str()) == Some("dumbbell"))
        .and_then(|t| t.get("pairs"))
        .and_then(|p| p.as_integer());
    let Some(flows) = doc.get_mut("flow").and_then(|f| f.as_array_mut()) else {
        return Ok(());
    };
    let mut out = Vec::with_capacity(flows.len());
    for (i, f) in flows.drain(..).enumerate() {
        let mut t = match f {
            toml::Value::Table(t) => t,
            other => {
                out.push(other);
                continue;
            }
        };
        match t.remove("per_pair") {
            None | Some(toml::Value::Boolean(false)) => out.push(toml::Value::Table(t)),
            Some(toml::Value::Boolean(true)) => {
                let Some(n) = pairs.filter(|&n| (1..=1000).contains(&n)) else {
                    return Err(format!(
                        "flow[{i}].per_pair needs a dumbbell topology with `pairs`"
                    ));
                };
                if t.contains_key("from") || t.contains_key("to") {
                    return Err(format!(
                        "flow[{i}]: `per_pair` sets `from` and `to` (s<i> to r<i>); remove them"
                    ));
                }
                for p in 0..n {
                    let mut c = t.clone();
                    c.insert("from".into(), toml::Value::String(format!("s{p}")));
                    c.insert("to".into(), toml::Value::String(format!("r{p}")));
                    out.push(toml::Value::Table(c));
                }
            }
            Some(_) => return Err(format!("flow[{i}].per_pair must be true or false")),
        }
    }
    *flows = out;
    Ok(())
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

    fn time(&self, key: &str, s: &str) -> Result<Duration, ScenarioError> {
        parse_time(s).map_err(|m| self.err(key, m))
    }

    fn prob(&self, key: &str, p: f64) -> Result<f64, ScenarioError> {
        if (0.0..=1.0).contains(&p) {
            Ok(p)
        } else {
            Err(self.err(
                key,
                format!("{p} is not a probability: use a number from 0 to 1"),
            ))
        }
    }

    fn loss(&self, key: &str, l: &Option<LossFile>) -> Result<LossModel, ScenarioError> {
        Ok(match l {
            None => LossModel::None,
            Some(LossFile::Bernoulli(p)) | Some(LossFile::Table(LossTable::Bernoulli { p })) => {
                match self.prob(key, *p)? {
                    0.0 => LossModel::None,
                    p => LossModel::Bernoulli { p },
                }
            }
            Some(LossFile::Table(LossTable::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            })) => LossModel::GilbertElliott {
                p_good_to_bad: self.prob(&format!("{key}.p_good_to_bad"), *p_good_to_bad)?,
                p_bad_to_good: self.prob(&format!("{key}.p_bad_to_good"), *p_bad_to_good)?,
                loss_good: self.prob(&format!("{key}.loss_good"), loss_good.unwrap_or(0.0))?,
                loss_bad: self.prob(&format!("{key}.loss_bad"), loss_bad.unwrap_or(1.0))?,
            },
        })
    }

    fn link(&self, key: &str, l: &LinkFile) -> Result<LinkSpec, ScenarioError> {
        let rate = parse_rate(&l.rate).map_err(|m| self.err(format!("{key}.rate"), m))?;
        let delay = self.time(&format!("{key}.delay"), &l.delay)?;
        let queue = match &l.queue {
            None => QueueSpec::Bdp(1.0),
            Some(q) => parse_queue(q).map_err(|m| self.err(format!("{key}.queue"), m))?,
        };
        let egress = match &l.egress {
            None => None,
            Some(e) => Some(self.egress(&format!("{key}.egress"), e)?),
        };
        Ok(LinkSpec {
            rate,
            delay,
            queue,
            loss: self.loss(&format!("{key}.loss"), &l.loss)?,
            loss_reverse: self.loss(&format!("{key}.loss_reverse"), &l.loss_reverse)?,
            egress,
            wireless: l.wireless,
        })
    }

    fn egress(&self, key: &str, e: &EgressFile) -> Result<EgressSpec, ScenarioError> {
        if e.classes.is_empty() {
            return Err(self.err(
                format!("{key}.classes"),
                "needs at least one class (the first is the default for unnamed DSCPs)",
            ));
        }
        let mut seen = [false; 64];
        let mut dscps = |k: String, list: &[u8]| -> Result<Vec<u8>, ScenarioError> {
            for &d in list {
                if d >= 64 {
                    return Err(self.err(k, format!("{d} is not a DSCP: they are 6 bits, 0 to 63")));
                }
                if std::mem::replace(&mut seen[usize::from(d)], true) {
                    return Err(self.err(k, format!("DSCP {d} is given to two queues")));
                }
            }
            Ok(list.to_vec())
        };
        let priority = match &e.priority {
            None => None,
            Some(p) => {
                let k = format!("{key}.priority");
                let rate = parse_rate(&p.rate).map_err(|m| self.err(format!("{k}.rate"), m))?;
                let mut llq = LlqConfig::with_default_burst(rate);
                if let Some(b) = &p.burst {
                    llq.burst = parse_size(b).ok().filter(|&b| b > 0).ok_or_else(|| {
                        self.err(
                            format!("{k}.burst"),
                            format!("`{b}` is not a size above zero: write e.g. \"125KB\""),
                        )
                    })?;
                }
                Some((dscps(format!("{k}.dscp"), &p.dscp)?, llq))
            }
        };
        let mut classes = vec![];
        for (i, c) in e.classes.iter().enumerate() {
            let k = format!("{key}.classes[{i}]");
            let bandwidth =
                parse_rate(&c.bandwidth).map_err(|m| self.err(format!("{k}.bandwidth"), m))?;
            if bandwidth.as_bps() == 0 {
                return Err(self.err(format!("{k}.bandwidth"), "must be above zero"));
            }
            let limit_pkts = match c.limit {
                None => 64,
                Some(n) if (1..=1_000_000).contains(&n) => n,
                Some(_) => {
                    return Err(self.err(format!("{k}.limit"), "must be from 1 to 1000000 packets"))
                }
            };
            classes.push((
                dscps(format!("{k}.dscp"), &c.dscp)?,
                ClassConfig {
                    bandwidth,
                    limit_pkts,
                },
            ));
        }
        Ok(EgressSpec { priority, classes })
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
            TopologyFile::Chain { links } => {
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
            TopologyFile::Dumbbell {
                pairs,
                access,
                access_delays,
                bottleneck,
                egress,
            } => {
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
                TopologyFile::Chain { links } => ("n0".into(), format!("n{}", links.len())),
                TopologyFile::Dumbbell { .. } => (format!("s{i}"), format!("r{i}")),
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

    fn base_station(
        &self,
        topo: &Topology,
        key: &str,
        b: &BaseStationFile,
    ) -> Result<BaseStationSpec, ScenarioError> {
        let k = |f: &str| format!("{key}.{f}");
        let node = self.any_node(topo, &k("node"), &b.node)?;
        if topo.nodes[node].kind != NodeKind::Router {
            return Err(self.err(
                k("node"),
                format!("`{}` is a host: a base station is a router", b.node),
            ));
        }
        let cost = |name: &str, v: &Option<String>, d: Duration| match v {
            None => Ok(d),
            Some(s) => self.time(&k(name), s),
        };
        let forward_cost = cost("forward_cost", &b.forward_cost, Duration::ZERO)?;
        let snoop_cost = cost("snoop_cost", &b.snoop_cost, Duration::ZERO)?;
        let queue_pkts = b.queue.unwrap_or(1000);
        if queue_pkts == 0 {
            return Err(self.err(k("queue"), "must hold at least one packet"));
        }
        let mut rules = match b.rules.as_deref() {
            None | Some("paper") => SnoopRules::PAPER,
            Some("ns2") => SnoopRules::NS2,
            Some(o) => {
                return Err(self.err(
                    k("rules"),
                    format!("unknown `{o}`: use \"paper\" or \"ns2\""),
                ))
            }
        };
        if let Some(n) = b.retransmit_on_dupack {
            if !(1..=2).contains(&n) {
                return Err(self.err(
                    k("retransmit_on_dupack"),
                    "must be 1 (the paper) or 2 (ns-2)",
                ));
            }
            rules.retransmit_on_dupack = n;
        }
        match b.stale_acks.as_deref() {
            None => {}
            Some("drop") => rules.forward_stale_acks = false,
            Some("forward") => rules.forward_stale_acks = true,
            Some(o) => {
                return Err(self.err(
                    k("stale_acks"),
                    format!("unknown `{o}`: use \"drop\" (the paper) or \"forward\" (ns-2)"),
                ))
            }
        }
        match b.estimator.as_deref() {
            None => {}
            Some("tcp") => rules.estimator = Estimator::Tcp,
            Some("ns2") => rules.estimator = Estimator::Ns2,
            Some(o) => {
                return Err(self.err(
                    k("estimator"),
                    format!("unknown `{o}`: use \"tcp\" or \"ns2\""),
                ))
            }
        }
        if let Some(g) = b.gain {
            if !(g > 0.0 && g < 0.5) {
                return Err(self.err(k("gain"), "must be between 0 and 0.5"));
            }
            rules.gain = g;
        }
        if let Some(f) = b.f {
            if !(0.0..=64.0).contains(&f) {
                return Err(self.err(k("f"), "must be from 0 to 64"));
            }
            rules.f = f;
        }
        rules.min_tick = cost("min_tick", &b.min_tick, rules.min_tick)?;
        if let Some(c) = b.cache {
            if c == 0 {
                return Err(self.err(
                    k("cache"),
                    "must hold at least one segment (or set snoop = \"off\")",
                ));
            }
            rules.cache_pkts = c;
        }
        if let Some(m) = b.max_local_rxmit {
            rules.max_local_rxmit = m;
        }
        let mode = match (b.snoop.as_deref(), &b.adaptive) {
            (Some("adaptive"), a) => {
                let d = AdaptiveConfig::default();
                let a = a.as_ref();
                let get = |v: Option<f64>, dv: f64| v.unwrap_or(dv);
                let interval = match a.and_then(|a| a.interval.as_ref()) {
                    Some(s) => self.time(&k("adaptive.interval"), s)?,
                    None => d.interval,
                };
                if interval.is_zero() {
                    return Err(self.err(k("adaptive.interval"), "must be above zero"));
                }
                let cfg = AdaptiveConfig {
                    interval,
                    load_limit: get(a.and_then(|a| a.load_limit), d.load_limit),
                    min_error: get(a.and_then(|a| a.min_error), d.min_error),
                    lossy: get(a.and_then(|a| a.lossy), d.lossy),
                    f_lossy: get(a.and_then(|a| a.f_lossy), d.f_lossy),
                    f_clean: get(a.and_then(|a| a.f_clean), d.f_clean),
                    smoothing: get(a.and_then(|a| a.smoothing), d.smoothing),
                };
                if !(cfg.load_limit > 0.0 && cfg.smoothing > 0.0 && cfg.smoothing <= 1.0) {
                    return Err(
                        self.err(k("adaptive"), "need load_limit > 0 and 0 < smoothing <= 1")
                    );
                }
                SnoopMode::Adaptive(cfg)
            }
            (_, Some(_)) => {
                return Err(self.err(k("adaptive"), "applies to snoop = \"adaptive\" only"))
            }
            (None | Some("off"), None) => SnoopMode::Off,
            (Some("on"), None) => SnoopMode::On,
            (Some(o), None) => {
                return Err(self.err(
                    k("snoop"),
                    format!("unknown `{o}`: use \"off\", \"on\" or \"adaptive\""),
                ))
            }
        };
        Ok(BaseStationSpec {
            node,
            forward_cost,
            snoop_cost,
            queue_pkts,
            mode,
            rules,
        })
    }

    fn any_node(&self, topo: &Topology, key: &str, name: &str) -> Result<usize, ScenarioError> {
        topo.node(name).ok_or_else(|| {
            let names: Vec<&str> = topo.nodes.iter().map(|n| n.name.as_str()).collect();
            self.err(
                key,
                format!("no node named `{name}`; nodes are: {}", names.join(", ")),
            )
        })
    }

    fn ingress_rule(
        &self,
        topo: &Topology,
        key: &str,
        r: &IngressFile,
    ) -> Result<RuleSpec, ScenarioError> {
        let node = self.any_node(topo, &format!("{key}.node"), &r.node)?;
        let m = &r.matches;
        let addr = |k: &str, n: &Option<String>| -> Result<Option<u32>, ScenarioError> {
            n.as_ref()
                .map(|n| {
                    self.any_node(topo, &format!("{key}.match.{k}"), n)
                        .map(|i| node_addr(i).to_bits())
                })
                .transpose()
        };
        let protocol = match m.protocol.as_deref() {
            None => None,
            Some("tcp") => Some(6),
            Some("udp") => Some(17),
            Some("sctp") => Some(132),
            Some(o) => {
                return Err(self.err(
                    format!("{key}.match.protocol"),
                    format!("unknown `{o}`: use \"tcp\", \"udp\" or \"sctp\""),
                ))
            }
        };
        let dscp = |k: String, d: Option<u8>| -> Result<Option<u8>, ScenarioError> {
            d.map(|d| self.dscp(&k, d)).transpose()
        };
        let matches = Match {
            src: addr("from", &m.from)?,
            dst: addr("to", &m.to)?,
            protocol,
            src_port: m.src_port,
            dst_port: m.dst_port,
            dscp: dscp(format!("{key}.match.dscp"), m.dscp)?,
        };
        let rate =
            |k: &str, v: &str| parse_rate(v).map_err(|e| self.err(format!("{key}.meter.{k}"), e));
        let size = |k: &str, v: &str| {
            parse_size(v).ok().filter(|&b| b > 0).ok_or_else(|| {
                self.err(
                    format!("{key}.meter.{k}"),
                    format!("`{v}` is not a size above zero: write e.g. \"10000B\" or \"10KB\""),
                )
            })
        };
        let meter = match &r.meter {
            None => None,
            Some(MeterFile::Car {
                rate: r,
                normal_burst,
                extended_burst,
            }) => {
                let normal_burst = size("normal_burst", normal_burst)?;
                let extended_burst = match extended_burst {
                    None => normal_burst,
                    Some(e) => size("extended_burst", e)?,
                };
                if extended_burst < normal_burst {
                    return Err(self.err(
                        format!("{key}.meter.extended_burst"),
                        "must be at least the normal burst",
                    ));
                }
                Some(MeterSpec::Car {
                    rate: rate("rate", r)?,
                    normal_burst,
                    extended_burst,
                })
            }
            Some(MeterFile::Srtcm { cir, cbs, ebs }) => Some(MeterSpec::SrTcm {
                cir: rate("cir", cir)?,
                cbs: size("cbs", cbs)?,
                ebs: size("ebs", ebs)?,
            }),
            Some(MeterFile::Trtcm { pir, pbs, cir, cbs }) => {
                let (pir, cir) = (rate("pir", pir)?, rate("cir", cir)?);
                if pir < cir {
                    return Err(self.err(format!("{key}.meter.pir"), "must be at least cir"));
                }
                Some(MeterSpec::TrTcm {
                    pir,
                    pbs: size("pbs", pbs)?,
                    cir,
                    cbs: size("cbs", cbs)?,
                })
            }
        };
        let action = |k: &str,
                      a: &Option<ActionFile>,
                      d: Action|
         -> Result<Action, ScenarioError> {
            match a {
                None => Ok(d),
                Some(ActionFile::Word(w)) if w == "transmit" => Ok(Action::Transmit),
                Some(ActionFile::Word(w)) if w == "drop" => Ok(Action::Drop),
                Some(ActionFile::Remark(x)) => {
                    Ok(Action::Remark(self.dscp(&format!("{key}.{k}"), *x)?))
                }
                Some(ActionFile::Word(w)) => Err(self.err(
                    format!("{key}.{k}"),
                    format!("unknown `{w}`: use \"transmit\", \"drop\" or a DSCP to re-mark to"),
                )),
            }
        };
        let conform = action("conform", &r.conform, Action::Transmit)?;
        let exceed = action("exceed", &r.exceed, Action::Drop)?;
        // CAR has two outcomes: its "exceed" is the meter's red.
        let actions = match r.meter {
            Some(MeterFile::Car { .. }) => {
                if r.violate.is_some() {
                    return Err(self.err(
                        format!("{key}.violate"),
                        "CAR has only conform and exceed; use srtcm or trtcm for three colours",
                    ));
                }
                [conform, exceed, exceed]
            }
            _ => [conform, exceed, action("violate", &r.violate, exceed)?],
        };
        let aware = match &r.colors {
            None => None,
            Some(c) => {
                if !matches!(
                    r.meter,
                    Some(MeterFile::Srtcm { .. } | MeterFile::Trtcm { .. })
                ) {
                    return Err(self.err(
                        format!("{key}.colors"),
                        "colour-aware metering needs an srtcm or trtcm meter",
                    ));
                }
                for (k, list) in [("yellow", &c.yellow), ("red", &c.red)] {
                    for &d in list.iter() {
                        self.dscp(&format!("{key}.colors.{k}"), d)?;
                    }
                }
                Some(PreColors {
                    yellow: c.yellow.clone(),
                    red: c.red.clone(),
                })
            }
        };
        Ok(RuleSpec {
            node,
            matches,
            set_dscp: dscp(format!("{key}.set_dscp"), r.set_dscp)?,
            meter,
            actions,
            aware,
        })
    }

    fn host(&self, topo: &Topology, key: &str, name: &str) -> Result<usize, ScenarioError> {
        match topo.node(name) {
            Some(n) if topo.nodes[n].kind == NodeKind::Host => Ok(n),
            Some(_) => Err(self.err(
                key,
                format!("`{name}` is a router; flows run between hosts"),
            )),
            None => {
                let hosts: Vec<&str> = topo
                    .nodes
                    .iter()
                    .filter(|n| n.kind == NodeKind::Host)
                    .map(|n| n.name.as_str())
                    .collect();
                Err(self.err(
                    key,
                    format!("no host named `{name}`; hosts are: {}", hosts.join(", ")),
                ))
            }
        }
    }

    fn tcp_flow(
        &self,
        key: &str,
        t: &TcpFlowFile,
        from: usize,
        to: usize,
        start: Instant,
    ) -> Result<TcpFlowSpec, ScenarioError> {
        let mut c = match t.profile.as_deref() {
            None | Some("default") => TcpConfig::default(),
            Some("linux-2.6.15") => TcpConfig::linux_2_6_15(),
            Some(o) => {
                return Err(self.err(
                    format!("{key}.profile"),
                    format!("unknown `{o}`: use \"default\" or \"linux-2.6.15\""),
                ))
            }
        };
        if let Some(cc) = &t.cc {
            c.cc = match cc.as_str() {
                "newreno" | "reno" => CcAlgorithm::NewReno(Default::default()),
                "cubic" => CcAlgorithm::Cubic(CubicConfig::default()),
                other => {
                    return Err(self.err(
                        format!("{key}.cc"),
                        format!("unknown `{other}`: use \"newreno\" or \"cubic\""),
                    ))
                }
            };
        }
        if let Some(a) = &t.avoidance {
            let avoidance = match a.as_str() {
                "byte-counting" => Avoidance::ByteCounting,
                "per-ack" => Avoidance::PerAck,
                other => {
                    return Err(self.err(
                        format!("{key}.avoidance"),
                        format!("unknown `{other}`: use \"byte-counting\" or \"per-ack\""),
                    ))
                }
            };
            match &mut c.cc {
                CcAlgorithm::NewReno(cfg) => cfg.avoidance = avoidance,
                CcAlgorithm::Cubic(_) => {
                    return Err(self.err(
                        format!("{key}.avoidance"),
                        "applies to cc = \"newreno\" only",
                    ))
                }
            }
        }
        if let Some(mss) = t.mss {
            if !(64..=65000).contains(&mss) {
                return Err(self.err(format!("{key}.mss"), "must be from 64 to 65000 bytes"));
            }
            c.mss = mss;
        }
        if let Some(s) = t.sack {
            c.sack = s;
        }
        if let Some(n) = t.ack_every {
            if !(1..=64).contains(&n) {
                return Err(self.err(format!("{key}.ack_every"), "must be from 1 to 64 segments"));
            }
            c.ack = AckPolicy {
                every: n,
                delay: AckPolicy::DELAYED.delay,
                quick: c.ack.quick,
            };
        }
        if let Some(d) = &t.delayed_ack_timeout {
            c.ack.delay = self.time(&format!("{key}.delayed_ack_timeout"), d)?;
        }
        if let Some(m) = &t.min_rto {
            let m = self.time(&format!("{key}.min_rto"), m)?;
            c.rto = RtoConfig {
                min_rto: m,
                ..RtoConfig::RFC6298
            };
        }
        if let Some(iw) = &t.initial_window {
            c.initial_window = match iw {
                toml::Value::String(s) if s == "rfc3390" => InitialWindow::Rfc3390,
                toml::Value::String(s) if s == "iw10" => InitialWindow::Iw10,
                toml::Value::Integer(n) if (1..=1000).contains(n) => {
                    InitialWindow::Segments(*n as u32)
                }
                _ => {
                    return Err(self.err(
                        format!("{key}.initial_window"),
                        "use \"rfc3390\", \"iw10\" or a number of segments from 1 to 1000",
                    ))
                }
            };
        }
        let buf = |k: &str, v: &Option<String>, d: u64| -> Result<u64, ScenarioError> {
            match v {
                None => Ok(d),
                Some(s) => match parse_size(s) {
                    Ok(b) if b >= 2 * u64::from(c.mss) => Ok(b),
                    Ok(_) => Err(self.err(format!("{key}.{k}"), "must hold at least two segments")),
                    Err(m) => Err(self.err(format!("{key}.{k}"), m)),
                },
            }
        };
        c.recv_buffer_bytes = buf("recv_buffer", &t.recv_buffer, c.recv_buffer_bytes)?;
        c.send_buffer_bytes = buf("send_buffer", &t.send_buffer, c.send_buffer_bytes)?;
        if let Some(w) = t.window_scaling {
            c.window_scaling = w;
        }
        if let Some(d) = t.dscp {
            c.dscp = self.dscp(&format!("{key}.dscp"), d)?;
        }
        let files = match &t.files {
            Some(fl) => Some(self.files(&format!("{key}.files"), fl, u32::MAX)?),
            None => None,
        };
        let size = match (&t.size, files) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    format!("{key}.size"),
                    "give `size` or `files`, not both (files set the size)",
                ))
            }
            (None, Some(f)) => Some(f.total()),
            (None, None) => None,
            (Some(s), None) => match parse_size(s) {
                Ok(0) => {
                    return Err(self.err(
                        format!("{key}.size"),
                        "must be above zero; omit it for an endless backlog",
                    ))
                }
                Ok(n) => Some(n),
                Err(m) => return Err(self.err(format!("{key}.size"), m)),
            },
        };
        Ok(TcpFlowSpec {
            from,
            to,
            config: c,
            start,
            size,
            files,
        })
    }

    fn files(&self, key: &str, f: &FilesFile, max_count: u32) -> Result<Files, ScenarioError> {
        if f.count == 0 || f.count > max_count {
            return Err(self.err(
                format!("{key}.count"),
                format!("must be from 1 to {max_count}"),
            ));
        }
        let size = match parse_size(&f.size) {
            Ok(0) => return Err(self.err(format!("{key}.size"), "must be above zero")),
            Ok(n) => n,
            Err(m) => return Err(self.err(format!("{key}.size"), m)),
        };
        let message = f.message.unwrap_or(1460);
        if !(1..=MAX_MESSAGE).contains(&message) {
            return Err(self.err(
                format!("{key}.message"),
                format!("must be from 1 to {MAX_MESSAGE} bytes"),
            ));
        }
        Ok(Files {
            count: f.count,
            size,
            message,
        })
    }

    fn sctp_flow(
        &self,
        key: &str,
        u: &SctpFlowFile,
        from: usize,
        to: usize,
        start: Instant,
    ) -> Result<SctpFlowSpec, ScenarioError> {
        let k = |f: &str| format!("{key}.{f}");
        let mut c = match u.profile.as_deref() {
            None | Some("rfc9260") => SctpConfig::RFC9260,
            Some("linux-2.6.15") => SctpConfig::LINUX_2_6_15,
            Some(o) => {
                return Err(self.err(
                    k("profile"),
                    format!("unknown `{o}`: use \"rfc9260\" or \"linux-2.6.15\" (RFC 4960 + RFC 4460, the SCTP study's stack)"),
                ))
            }
        };
        if let Some(m) = u.mtu {
            if !(576..=65535).contains(&m) {
                return Err(self.err(k("mtu"), "must be from 576 to 65535 bytes"));
            }
            c.mtu = m;
        }
        if let Some(d) = &u.sack_delay {
            let d = self.time(&k("sack_delay"), d)?;
            if d > Duration::from_millis(500) {
                return Err(self.err(k("sack_delay"), "must be at most 500ms (RFC 9260 §6.2)"));
            }
            c.sack_delay = d;
        }
        if let Some(n) = u.sack_freq {
            if !(1..=64).contains(&n) {
                return Err(self.err(k("sack_freq"), "must be from 1 to 64 packets"));
            }
            c.sack_freq = n;
        }
        if let Some(n) = u.max_burst {
            if !(1..=1_000_000).contains(&n) {
                return Err(self.err(k("max_burst"), "must be from 1 to 1000000 packets"));
            }
            c.max_burst = n;
        }
        if let Some(b) = &u.recv_buffer {
            c.recv_buffer = match parse_size(b) {
                Ok(n) if (u64::from(c.mtu)..=u64::from(u32::MAX)).contains(&n) => n as u32,
                Ok(_) => {
                    return Err(self.err(
                        k("recv_buffer"),
                        "must hold at least one MTU and at most 4GB",
                    ))
                }
                Err(m) => return Err(self.err(k("recv_buffer"), m)),
            };
        }
        if let Some(m) = &u.min_rto {
            c.rto.min_rto = self.time(&k("min_rto"), m)?;
        }
        if let Some(b) = u.data_on_cookie_echo {
            c.data_on_cookie_echo = b;
        }
        if let Some(m) = &u.initial_rto {
            c.rto.initial_rto = self.time(&k("initial_rto"), m)?;
            if c.rto.initial_rto.is_zero() {
                return Err(self.err(k("initial_rto"), "must be above zero"));
            }
        }
        let files = match &u.files {
            Some(fl) => {
                if u.message.is_some() {
                    return Err(self.err(
                        k("message"),
                        "sets the endless backlog's message size; with `files`, write `files.message`",
                    ));
                }
                Some(self.files(&k("files"), fl, 65535)?)
            }
            None => None,
        };
        // One stream per file.
        c.streams = match (u.streams, files) {
            (Some(0), _) => return Err(self.err(k("streams"), "must be at least 1")),
            (Some(n), Some(f)) if u32::from(n) < f.count => {
                return Err(self.err(
                    k("streams"),
                    format!(
                        "{n} streams cannot carry {} files (one stream each)",
                        f.count
                    ),
                ))
            }
            (Some(n), _) => n,
            (None, Some(f)) => c.streams.max(f.count as u16),
            (None, None) => c.streams,
        };
        let message = u.message.unwrap_or(1460);
        if !(1..=MAX_MESSAGE).contains(&message) {
            return Err(self.err(
                k("message"),
                format!("must be from 1 to {MAX_MESSAGE} bytes"),
            ));
        }
        Ok(SctpFlowSpec {
            from,
            to,
            config: c,
            start,
            files,
            message,
        })
    }

    fn udt_flow(
        &self,
        key: &str,
        u: &UdtFlowFile,
        from: usize,
        to: usize,
        start: Instant,
        seed: u64,
    ) -> Result<UdtFlowSpec, ScenarioError> {
        let k = |f: &str| format!("{key}.{f}");
        let profile = match u.profile.as_deref() {
            None | Some("udt4") => UdtProfile::Udt4,
            Some("paper") => UdtProfile::Paper,
            Some(o) => {
                return Err(self.err(
                    k("profile"),
                    format!("unknown `{o}`: use \"udt4\" or \"paper\""),
                ))
            }
        };
        let udt = UdtCcConfig {
            profile,
            fix_inverted_fallback: u.fix_inverted_fallback.unwrap_or(false),
            seed,
        };
        let ar_keys = [
            ("w1", u.w1),
            ("w2", u.w2),
            ("alpha", u.alpha),
            ("beta", u.beta),
        ];
        let rate_control = match u.cc.as_deref() {
            None | Some("udt") => {
                if let Some((name, _)) = ar_keys.iter().find(|(_, v)| v.is_some()) {
                    return Err(self.err(k(name), "applies to cc = \"ar-udt\" only"));
                }
                if u.spw_scope.is_some() {
                    return Err(self.err(k("spw_scope"), "applies to cc = \"ar-udt\" only"));
                }
                RateControl::Udt(udt)
            }
            Some("ar-udt") => {
                let d = ArUdtConfig::default();
                let scope = match u.spw_scope.as_deref() {
                    None | Some("persistent") => SpwScope::Persistent,
                    Some("syn") => SpwScope::Syn,
                    Some(o) => {
                        return Err(self.err(
                            k("spw_scope"),
                            format!("unknown `{o}`: use \"persistent\" or \"syn\""),
                        ))
                    }
                };
                let a = ArUdtConfig {
                    w1: u.w1.unwrap_or(d.w1),
                    w2: u.w2.unwrap_or(d.w2),
                    alpha: u.alpha.unwrap_or(d.alpha),
                    beta: u.beta.unwrap_or(d.beta),
                    factors: d.factors,
                    scope,
                };
                if !(a.w1 >= 0.0 && a.w2 > a.w1 && (a.w1 + a.w2 - 1.0).abs() < 1e-9) {
                    return Err(self.err(
                        k("w2"),
                        "need 0 <= w1 < w2 and w1 + w2 = 1 (the paper's constraint)",
                    ));
                }
                // Each bound names the key that breaks it (a bad beta was reported as
                // `alpha`).
                if !(a.alpha > 0.0 && a.alpha <= 1.0) {
                    return Err(self.err(
                        k("alpha"),
                        format!("is {}; need 0 < alpha <= 1 < beta", a.alpha),
                    ));
                }
                if !(a.beta > 1.0 && a.beta.is_finite()) {
                    return Err(self.err(
                        k("beta"),
                        format!("is {}; need 0 < alpha <= 1 < beta, finite", a.beta),
                    ));
                }
                RateControl::ArUdt(udt, a)
            }
            Some(o) => {
                return Err(self.err(k("cc"), format!("unknown `{o}`: use \"udt\" or \"ar-udt\"")))
            }
        };
        let nak_report = match u.nak_report.as_deref() {
            None | Some("once") => NakReport::Once,
            Some("periodic") => NakReport::Periodic,
            Some(o) => {
                return Err(self.err(
                    k("nak_report"),
                    format!(
                        "unknown `{o}`: use \"once\" (UDT4 4.11) or \"periodic\" (the draft's NAK timer, as in ns-2)"
                    ),
                ))
            }
        };
        let mut c = UdtConnConfig {
            rate_control,
            nak_report,
            ..UdtConnConfig::default()
        };
        if let Some(m) = u.mss {
            if !(longhaul_proto::udt::MIN_MSS..=9000).contains(&m) {
                return Err(self.err(
                    k("mss"),
                    format!(
                        "must be from {} to 9000 bytes (IP and UDP headers included)",
                        longhaul_proto::udt::MIN_MSS
                    ),
                ));
            }
            c.mss = m;
        }
        let pkts = |name: &str, v: Option<u32>, d: u32| match v {
            None => Ok(d),
            Some(n) if (2..=1_000_000).contains(&n) => Ok(n),
            Some(_) => Err(self.err(k(name), "must be from 2 to 1000000 packets")),
        };
        c.flight_flag_size = pkts("flight_flag_size", u.flight_flag_size, c.flight_flag_size)?;
        c.rcv_buf_pkts = pkts("recv_buffer_pkts", u.recv_buffer_pkts, c.rcv_buf_pkts)?;
        c.snd_buf_pkts = pkts("send_buffer_pkts", u.send_buffer_pkts, c.snd_buf_pkts)?;
        let size = match &u.size {
            None => None,
            Some(s) => match parse_size(s) {
                Ok(0) => {
                    return Err(self.err(
                        k("size"),
                        "must be above zero; omit it for an endless backlog",
                    ))
                }
                Ok(n) => Some(n),
                Err(m) => return Err(self.err(k("size"), m)),
            },
        };
        Ok(UdtFlowSpec {
            from,
            to,
            config: c,
            start,
            size,
        })
    }

    fn dscp(&self, key: &str, d: u8) -> Result<u8, ScenarioError> {
        if d < 64 {
            Ok(d)
        } else {
            Err(self.err(key, "a DSCP is 6 bits: 0 to 63"))
        }
    }

    /// A flow or transfer that starts at or after the end of the run would never send
    /// (most likely a unit slip, "100s" for "100ms"): an error, not an empty result.
    fn starts_in_run(
        &self,
        key: &str,
        start: Instant,
        duration: Duration,
        written: &str,
    ) -> Result<(), ScenarioError> {
        if start < Instant::ZERO + duration {
            return Ok(());
        }
        Err(self.err(
            key,
            format!(
                "is not before the end of the run (`duration` = \"{written}\"), so it would \
                 never send: start it earlier or make the run longer"
            ),
        ))
    }

    fn udp_flow(
        &self,
        key: &str,
        u: &UdpFlowFile,
        from: usize,
        to: usize,
        start: Instant,
    ) -> Result<UdpFlowSpec, ScenarioError> {
        let rate = parse_rate(&u.rate).map_err(|m| self.err(format!("{key}.rate"), m))?;
        let packet_size = u.packet_size.unwrap_or(1500);
        if !(29..=65535).contains(&packet_size) {
            return Err(self.err(
                format!("{key}.packet_size"),
                "must be from 29 to 65535 bytes (IP and UDP headers included)",
            ));
        }
        let arrivals = match u.arrivals.as_deref() {
            None | Some("cbr") => Arrivals::Cbr,
            Some("poisson") => Arrivals::Poisson,
            Some(o) => {
                return Err(self.err(
                    format!("{key}.arrivals"),
                    format!("unknown `{o}`: use \"cbr\" or \"poisson\""),
                ))
            }
        };
        let stop = match &u.stop {
            None => None,
            Some(s) => {
                let t = Instant::ZERO + self.time(&format!("{key}.stop"), s)?;
                if t <= start {
                    return Err(self.err(format!("{key}.stop"), "must be after `start`"));
                }
                Some(t)
            }
        };
        Ok(UdpFlowSpec {
            from,
            to,
            rate,
            packet_size,
            arrivals,
            start,
            stop,
            dscp: self.dscp(&format!("{key}.dscp"), u.dscp.unwrap_or(0))?,
        })
    }
}

/// The built-in reference scenario (`longhaul sim run` without a file): one NewReno
/// flow with SACK over a 1 Gb/s, 100 ms, one-BDP DropTail bottleneck with random loss
/// 1e-5, for 60 s.
pub const REFERENCE: &str = include_str!("../scenarios/reference.toml");

/// The reference scenario with the bottleneck's one-way delay and loss changed (the
/// `bench` variants).
pub fn reference(one_way_delay: &str, loss: f64) -> Result<Scenario, ScenarioError> {
    let mut v: toml::Value =
        toml::from_str(REFERENCE).map_err(|e| syntax(Path::new("<reference>"), e))?;
    crate::sweep::set_path(
        &mut v,
        "topology.links.1.delay",
        toml::Value::String(one_way_delay.into()),
    )
    .and_then(|_| crate::sweep::set_path(&mut v, "topology.links.1.loss", toml::Value::Float(loss)))
    .map_err(|m| syntax(Path::new("<reference>"), m))?;
    Scenario::from_value(v, Path::new("<reference>"))
}
