//! The scenario file as serde sees it: one struct per table, checked for unknown
//! keys, values still as written (units are parsed by the loader, which names the
//! key of anything it refuses). [`locate`] finds the full key path of a value of
//! the wrong type, which serde cannot give for tagged tables (`[[flow]]` by
//! `protocol`, `[topology]` by `kind`).

use longhaul_proto::names::Protocol;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// The key path (`flow[3].mss`) and the message of the first value `doc` holds
/// that does not fit the schema, or `None` if it all fits.
///
/// Serde reads a tagged table whole before it knows its variant, so its errors
/// stop at the table (`flow[3]`); for those, the variant is read again on its own to
/// find the key inside.
pub(super) fn locate(doc: &toml::Value) -> Option<(String, String)> {
    let (path, message) = first_error::<File>(doc.clone())?;
    let inner = |table: &toml::Value, tag: &str| -> Option<(String, String)> {
        let mut t = table.as_table()?.clone();
        let kind = t.remove(tag)?;
        let t = toml::Value::Table(t);
        let kind = kind.as_str()?;
        if tag == "protocol" {
            return match kind.parse().ok()? {
                Protocol::Tcp => first_error::<TcpFlowFile>(t),
                Protocol::Udp => first_error::<UdpFlowFile>(t),
                Protocol::Udt => first_error::<UdtFlowFile>(t),
                Protocol::Sctp => first_error::<SctpFlowFile>(t),
                Protocol::Blast(_) => first_error::<BlastFlowFile>(t),
            };
        }
        match (tag, kind) {
            ("kind", "chain") => first_error::<ChainFile>(t),
            ("kind", "dumbbell") => first_error::<DumbbellFile>(t),
            _ => None,
        }
    };
    let deeper = if path == "topology" {
        doc.get("topology").and_then(|t| inner(t, "kind"))
    } else if let Some(i) = path
        .strip_prefix("flow[")
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|i| i.parse::<usize>().ok())
    {
        doc.get("flow")
            .and_then(|f| f.get(i))
            .and_then(|f| inner(f, "protocol"))
    } else {
        None
    };
    Some(match deeper {
        Some((p, m)) if p.is_empty() || p == "?" => (path, m),
        Some((p, m)) => (format!("{path}.{p}"), m),
        None => (path, message),
    })
}

fn first_error<T: DeserializeOwned>(v: toml::Value) -> Option<(String, String)> {
    serde_path_to_error::deserialize::<_, T>(v).err().map(|e| {
        // (toml adds a line naming the key: the path says it, whole.)
        let message = e.inner().to_string();
        let first = message.lines().next().unwrap_or_default().to_string();
        (e.path().to_string(), first)
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) name: Option<String>,
    #[allow(dead_code)]
    pub(super) description: Option<String>,
    pub(super) duration: String,
    #[serde(default = "default_seed")]
    pub(super) seed: u64,
    pub(super) sample_interval: Option<String>,
    pub(super) topology: TopologyFile,
    #[serde(default)]
    pub(super) flow: Vec<FlowFile>,
    #[serde(default)]
    pub(super) ingress: Vec<IngressFile>,
    #[serde(default)]
    pub(super) base_station: Vec<BaseStationFile>,
    #[serde(default)]
    pub(super) host: Vec<super::transfer::HostFile>,
    #[serde(default)]
    pub(super) transfer: Vec<super::transfer::TransferFile>,
    #[serde(default)]
    pub(super) stop_when_done: bool,
    #[serde(default)]
    pub(super) outputs: OutputsFile,
}

/// A base station: processing budget and Snoop.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BaseStationFile {
    pub(super) node: String,
    pub(super) forward_cost: Option<String>,
    pub(super) snoop_cost: Option<String>,
    pub(super) queue: Option<usize>,
    pub(super) snoop: Option<String>,
    pub(super) rules: Option<String>,
    pub(super) retransmit_on_dupack: Option<u32>,
    pub(super) stale_acks: Option<String>,
    pub(super) estimator: Option<String>,
    pub(super) gain: Option<f64>,
    pub(super) f: Option<f64>,
    pub(super) min_tick: Option<String>,
    pub(super) cache: Option<usize>,
    pub(super) max_local_rxmit: Option<u32>,
    pub(super) adaptive: Option<AdaptiveFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AdaptiveFile {
    pub(super) interval: Option<String>,
    pub(super) load_limit: Option<f64>,
    pub(super) min_error: Option<f64>,
    pub(super) lossy: Option<f64>,
    pub(super) f_lossy: Option<f64>,
    pub(super) f_clean: Option<f64>,
    pub(super) smoothing: Option<f64>,
}

/// A DiffServ ingress rule at a router.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct IngressFile {
    pub(super) node: String,
    #[serde(default, rename = "match")]
    pub(super) matches: MatchFile,
    pub(super) set_dscp: Option<u8>,
    pub(super) meter: Option<MeterFile>,
    pub(super) conform: Option<ActionFile>,
    pub(super) exceed: Option<ActionFile>,
    pub(super) violate: Option<ActionFile>,
    /// Colour-aware metering: the DSCPs that arrive yellow and red.
    pub(super) colors: Option<ColorsFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ColorsFile {
    #[serde(default)]
    pub(super) yellow: Vec<u8>,
    #[serde(default)]
    pub(super) red: Vec<u8>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MatchFile {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) src_port: Option<u16>,
    pub(super) dst_port: Option<u16>,
    pub(super) dscp: Option<u8>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub(super) enum MeterFile {
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
pub(super) enum ActionFile {
    Word(String),
    Remark(u8),
}

pub(super) fn default_seed() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OutputsFile {
    #[serde(default = "yes")]
    pub(super) plots: bool,
    #[serde(default)]
    pub(super) trace: bool,
    pub(super) trace_interval: Option<String>,
    #[serde(default)]
    pub(super) pcap: Vec<String>,
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

pub(super) fn yes() -> bool {
    true
}

// Parsed once per file: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub(super) enum TopologyFile {
    Chain(ChainFile),
    Dumbbell(DumbbellFile),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChainFile {
    pub(super) links: Vec<LinkFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DumbbellFile {
    #[serde(default = "one")]
    pub(super) pairs: usize,
    pub(super) access: LinkFile,
    /// Per-pair one-way delays of the access links (overrides `access.delay`).
    pub(super) access_delays: Option<Vec<String>>,
    pub(super) bottleneck: LinkFile,
    pub(super) egress: Option<LinkFile>,
}

pub(super) fn one() -> usize {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LinkFile {
    pub(super) rate: String,
    pub(super) delay: String,
    pub(super) queue: Option<String>,
    pub(super) loss: Option<LossFile>,
    pub(super) loss_reverse: Option<LossFile>,
    pub(super) egress: Option<EgressFile>,
    #[serde(default)]
    pub(super) wireless: bool,
}

/// A DiffServ egress scheduler on a link's forward direction.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EgressFile {
    pub(super) priority: Option<PriorityFile>,
    pub(super) classes: Vec<ClassFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PriorityFile {
    pub(super) dscp: Vec<u8>,
    pub(super) rate: String,
    pub(super) burst: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClassFile {
    #[serde(default)]
    pub(super) dscp: Vec<u8>,
    pub(super) bandwidth: String,
    pub(super) limit: Option<u32>,
    pub(super) red: Option<RedFile>,
}

/// RED on a class: one profile, or WRED's three (AFx1, AFx2, AFx3).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RedFile {
    One(RedTable),
    PerPrecedence(Vec<RedTable>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RedTable {
    pub(super) min_th: f64,
    pub(super) max_th: f64,
    pub(super) max_p: Option<f64>,
    pub(super) w_q: Option<f64>,
    pub(super) gentle: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum LossFile {
    Bernoulli(f64),
    Table(LossTable),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
pub(super) enum LossTable {
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
pub(super) enum FlowFile {
    Tcp(Box<TcpFlowFile>),
    Udp(UdpFlowFile),
    Udt(Box<UdtFlowFile>),
    Sctp(Box<SctpFlowFile>),
    Rbudp(Box<BlastFlowFile>),
    Tsunami(Box<BlastFlowFile>),
    Sabul(Box<BlastFlowFile>),
}

/// `protocol = "rbudp" | "tsunami" | "sabul"`: a UDP blast transfer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BlastFlowFile {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) start: Option<String>,
    pub(super) size: Option<String>,
    /// RBUDP's blast rate, Tsunami's target rate, SABUL's fastest rate.
    pub(super) rate: Option<String>,
    /// UDP payload per datagram, bytes.
    pub(super) datagram: Option<u16>,
    /// Tsunami: the loss it accepts before slowing, percent.
    pub(super) error_rate: Option<f64>,
    /// Tsunami: the client's update period.
    pub(super) update: Option<String>,
    /// SABUL: blocks in flight at most.
    pub(super) window: Option<u32>,
}

/// `files = { count, size, message }`: the SCTP study's round-robin writer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilesFile {
    pub(super) count: u32,
    pub(super) size: String,
    pub(super) message: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SctpFlowFile {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) start: Option<String>,
    pub(super) profile: Option<String>,
    pub(super) files: Option<FilesFile>,
    pub(super) message: Option<u32>,
    pub(super) mtu: Option<u16>,
    pub(super) streams: Option<u16>,
    pub(super) sack_delay: Option<String>,
    pub(super) sack_freq: Option<u32>,
    pub(super) max_burst: Option<u32>,
    pub(super) recv_buffer: Option<String>,
    pub(super) min_rto: Option<String>,
    pub(super) initial_rto: Option<String>,
    pub(super) data_on_cookie_echo: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UdtFlowFile {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) start: Option<String>,
    pub(super) size: Option<String>,
    pub(super) cc: Option<String>,
    pub(super) profile: Option<String>,
    pub(super) fix_inverted_fallback: Option<bool>,
    pub(super) nak_report: Option<String>,
    pub(super) arrival_clock: Option<String>,
    pub(super) mss: Option<u32>,
    pub(super) flight_flag_size: Option<u32>,
    pub(super) recv_buffer_pkts: Option<u32>,
    pub(super) send_buffer_pkts: Option<u32>,
    pub(super) w1: Option<f64>,
    pub(super) w2: Option<f64>,
    pub(super) alpha: Option<f64>,
    pub(super) beta: Option<f64>,
    pub(super) spw_scope: Option<String>,
    pub(super) bbr: Option<BbrFile>,
}

/// BBR's knobs (`cc = "bbr"`, `"bbr-v3"` or `"bbr-lh"`), over the named preset's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BbrFile {
    /// v3's loss threshold; 0 turns the loss bound off.
    pub(super) loss_threshold: Option<f64>,
    pub(super) min_rtt_confirm: Option<f64>,
    /// 0 turns the early exit off.
    pub(super) startup_queue_exit: Option<f64>,
    pub(super) startup_growth: Option<f64>,
    pub(super) pacing_margin: Option<f64>,
    pub(super) cwnd_gain: Option<f64>,
    /// 0 lets every lossy round bound inflight (v3), a coupled group's too.
    pub(super) loss_needs_queue: Option<f64>,
    pub(super) drain_holds_bw: Option<bool>,
    pub(super) nak_rtt: Option<bool>,
    /// false keeps a coupled group's pacing from making up for random loss.
    pub(super) pace_over_loss: Option<bool>,
    /// true: room for what UDT's receivers hold (as `longhaul send`).
    pub(super) ack_hold: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TcpFlowFile {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) start: Option<String>,
    pub(super) size: Option<String>,
    pub(super) files: Option<FilesFile>,
    pub(super) profile: Option<String>,
    pub(super) cc: Option<String>,
    pub(super) avoidance: Option<String>,
    pub(super) hystart: Option<String>,
    pub(super) bbr: Option<BbrFile>,
    pub(super) mss: Option<u16>,
    pub(super) sack: Option<bool>,
    pub(super) ack_every: Option<u32>,
    pub(super) delayed_ack_timeout: Option<String>,
    pub(super) rto: Option<String>,
    pub(super) min_rto: Option<String>,
    pub(super) initial_window: Option<toml::Value>,
    pub(super) recv_buffer: Option<String>,
    pub(super) send_buffer: Option<String>,
    pub(super) window_scaling: Option<bool>,
    pub(super) timestamps: Option<String>,
    pub(super) dscp: Option<u8>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UdpFlowFile {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) start: Option<String>,
    pub(super) stop: Option<String>,
    pub(super) rate: String,
    pub(super) packet_size: Option<u32>,
    pub(super) arrivals: Option<String>,
    pub(super) dscp: Option<u8>,
}
