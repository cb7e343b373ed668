//! `[[transfer]]` and `[[host]]`: parallel transfers and the limits of their hosts.
//!
//! ```toml
//! stop_when_done = true          # end the run when the last transfer completes
//!
//! [[host]]
//! name = "s0"
//! sysctl = "untuned"             # or "tuned" (the default); keys below override it
//! tcp_rmem_max = "6MiB"          # also rmem_max, wmem_max, tcp_wmem_max
//! tcp_adv_win_scale = 1
//! disk_read = "4Gbps"            # disk_write; cores; core_rate
//!
//! [[transfer]]
//! from = "s0"
//! to = "r0"
//! tool = "fdt"                   # a preset: fdt, globus, mdtmftp, udt-parallel
//! transport = "tcp"              # or "udt"; AR-UDT is udt = { cc = "ar-udt" }
//! parallelism = 8                # channels per file
//! concurrency = 1                # files at once
//! pipelining = true
//! block_size = "1MiB"
//! files = { count = 1, size = "5GB" }   # or sizes = ["1MB", "20kB"]
//! tcp = { cc = "cubic" }         # any TCP flow key but from, to, start, size, files
//! content = false                # UDT only: carry real bytes, and check them
//! couple = false                 # UDT with BBR: true, the channels share one model
//! ```

use serde::Deserialize;

use super::{parse_rate, parse_size, Loader, ScenarioError, TcpFlowFile, UdtFlowFile};
use crate::app::{FlowSpec, HostLimits, TcpFlowSpec, Tool, TransferSpec, UdtFlowSpec};
use crate::topology::Topology;
use longhaul_proto::udt::RateControl;
use longhaul_proto::{Bandwidth, Instant};

/// Most channels one transfer may open.
const MAX_CHANNELS: usize = 1000;
/// Most files one transfer may list.
const MAX_FILES: u64 = 1_000_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HostFile {
    name: String,
    sysctl: Option<String>,
    rmem_max: Option<String>,
    wmem_max: Option<String>,
    tcp_rmem_max: Option<String>,
    tcp_wmem_max: Option<String>,
    tcp_adv_win_scale: Option<i8>,
    disk_read: Option<String>,
    disk_write: Option<String>,
    cores: Option<u32>,
    core_rate: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TransferFilesFile {
    count: u64,
    size: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TransferFile {
    name: Option<String>,
    from: Option<String>,
    to: Option<String>,
    start: Option<String>,
    tool: Option<String>,
    transport: Option<String>,
    parallelism: Option<u16>,
    concurrency: Option<u16>,
    pipelining: Option<bool>,
    readers: Option<u16>,
    block_size: Option<String>,
    files: Option<TransferFilesFile>,
    sizes: Option<Vec<String>>,
    control_bytes: Option<u32>,
    content: Option<bool>,
    couple: Option<bool>,
    tcp: Option<toml::Value>,
    udt: Option<toml::Value>,
}

impl Loader<'_> {
    /// Host limits by node (`None`: the default, a tuned host).
    pub(super) fn hosts(
        &self,
        topo: &Topology,
        hosts: &[HostFile],
    ) -> Result<Vec<Option<HostLimits>>, ScenarioError> {
        let mut out = vec![None; topo.nodes.len()];
        for (i, h) in hosts.iter().enumerate() {
            let key = format!("host[{i}]");
            let node = self.host(topo, &format!("{key}.name"), &h.name)?;
            if out[node].is_some() {
                return Err(self.err(
                    format!("{key}.name"),
                    format!("`{}` already has a [[host]] entry", h.name),
                ));
            }
            let mut l = match h.sysctl.as_deref() {
                None | Some("tuned") => HostLimits::TUNED,
                Some("untuned") => HostLimits::UNTUNED,
                Some(o) => {
                    return Err(self.err(
                        format!("{key}.sysctl"),
                        format!("unknown `{o}`: use \"tuned\" (the study's Table 5) or \"untuned\" (Linux defaults)"),
                    ))
                }
            };
            let buf = |k: &str, v: &Option<String>, d: u64| -> Result<u64, ScenarioError> {
                match v {
                    None => Ok(d),
                    Some(s) => match parse_size(s) {
                        Ok(b) if (4096..=1 << 40).contains(&b) => Ok(b),
                        Ok(_) => Err(self.err(format!("{key}.{k}"), "must be from 4 KiB to 1 TiB")),
                        Err(m) => Err(self.err(format!("{key}.{k}"), m)),
                    },
                }
            };
            l.rmem_max = buf("rmem_max", &h.rmem_max, l.rmem_max)?;
            l.wmem_max = buf("wmem_max", &h.wmem_max, l.wmem_max)?;
            l.tcp_rmem_max = buf("tcp_rmem_max", &h.tcp_rmem_max, l.tcp_rmem_max)?;
            l.tcp_wmem_max = buf("tcp_wmem_max", &h.tcp_wmem_max, l.tcp_wmem_max)?;
            if let Some(s) = h.tcp_adv_win_scale {
                if !(-31..=31).contains(&s) {
                    return Err(self.err(
                        format!("{key}.tcp_adv_win_scale"),
                        "must be from -31 to 31, as Linux allows",
                    ));
                }
                l.tcp_adv_win_scale = s;
            }
            let rate = |k: &str, v: &Option<String>| -> Result<Option<Bandwidth>, ScenarioError> {
                v.as_deref()
                    .map(|s| parse_rate(s).map_err(|m| self.err(format!("{key}.{k}"), m)))
                    .transpose()
            };
            l.disk_read = rate("disk_read", &h.disk_read)?;
            l.disk_write = rate("disk_write", &h.disk_write)?;
            l.core_rate = rate("core_rate", &h.core_rate)?;
            if let Some(c) = h.cores {
                if !(1..=4096).contains(&c) {
                    return Err(self.err(format!("{key}.cores"), "must be from 1 to 4096"));
                }
                l.cores = c;
            }
            out[node] = Some(l);
        }
        Ok(out)
    }

    /// A transfer, and its channels appended to `flows`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn transfer(
        &self,
        i: usize,
        t: &TransferFile,
        topo: &Topology,
        hosts: &[Option<HostLimits>],
        default_ends: (String, String),
        seed: u64,
        flows: &mut Vec<FlowSpec>,
    ) -> Result<TransferSpec, ScenarioError> {
        let key = format!("transfer[{i}]");
        let k = |f: &str| format!("{key}.{f}");
        let from = self.host(
            topo,
            &k("from"),
            t.from.as_deref().unwrap_or(&default_ends.0),
        )?;
        let to = self.host(topo, &k("to"), t.to.as_deref().unwrap_or(&default_ends.1))?;
        if from == to {
            return Err(self.err(k("to"), "a transfer needs two different hosts"));
        }
        let start = match &t.start {
            Some(s) => Instant::ZERO + self.time(&k("start"), s)?,
            None => Instant::ZERO,
        };
        let tool = match t.tool.as_deref() {
            None => None,
            Some(name) => Some(
                Tool::ALL
                    .into_iter()
                    .find(|x| x.name() == name)
                    .ok_or_else(|| {
                        let names: Vec<&str> = Tool::ALL.iter().map(|x| x.name()).collect();
                        self.err(
                            k("tool"),
                            format!("unknown `{name}`: use one of {}", names.join(", ")),
                        )
                    })?,
            ),
        };
        let d = tool.map(Tool::defaults);
        let udt = match t.transport.as_deref() {
            None => d.is_some_and(|d| d.udt),
            Some("tcp") => false,
            Some("udt") => true,
            Some(o) => {
                return Err(self.err(
                    k("transport"),
                    format!(
                    "unknown `{o}`: use \"tcp\" or \"udt\" (AR-UDT: udt = {{ cc = \"ar-udt\" }})"
                ),
                ))
            }
        };
        let count = |name: &str, v: Option<u16>, d: u16, max: u16| match v {
            None => Ok(d),
            Some(n) if (1..=max).contains(&n) => Ok(n),
            Some(_) => Err(self.err(k(name), format!("must be from 1 to {max}"))),
        };
        let parallelism = count(
            "parallelism",
            t.parallelism,
            d.map_or(1, |d| d.parallelism),
            256,
        )?;
        let concurrency = count(
            "concurrency",
            t.concurrency,
            d.map_or(1, |d| d.concurrency),
            64,
        )?;
        let readers = count("readers", t.readers, d.map_or(1, |d| d.readers), 64)?;
        let pipelining = t.pipelining.unwrap_or(d.is_none_or(|d| d.pipelining));
        let channels = usize::from(parallelism) * usize::from(concurrency);
        if channels > MAX_CHANNELS {
            return Err(self.err(
                k("parallelism"),
                format!("parallelism x concurrency must be at most {MAX_CHANNELS}"),
            ));
        }
        let block_size = match &t.block_size {
            None => 1 << 20,
            Some(s) => match parse_size(s) {
                Ok(b) if (1..=1 << 30).contains(&b) => b as u32,
                Ok(_) => return Err(self.err(k("block_size"), "must be from 1 byte to 1 GiB")),
                Err(m) => return Err(self.err(k("block_size"), m)),
            },
        };
        let files: Vec<u64> = match (&t.files, &t.sizes) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(self.err(
                    k("files"),
                    "give `files = { count, size }` or `sizes = [...]`, one of the two",
                ))
            }
            (Some(f), None) => {
                if !(1..=MAX_FILES).contains(&f.count) {
                    return Err(
                        self.err(k("files.count"), format!("must be from 1 to {MAX_FILES}"))
                    );
                }
                let size = parse_size(&f.size).map_err(|m| self.err(k("files.size"), m))?;
                vec![size; f.count as usize]
            }
            (None, Some(v)) => {
                if v.is_empty() || v.len() as u64 > MAX_FILES {
                    return Err(self.err(k("sizes"), format!("must list 1 to {MAX_FILES} files")));
                }
                v.iter()
                    .enumerate()
                    .map(|(j, s)| {
                        parse_size(s).map_err(|m| self.err(format!("{key}.sizes[{j}]"), m))
                    })
                    .collect::<Result<_, _>>()?
            }
        };
        if files
            .iter()
            .try_fold(0u64, |a, &b| a.checked_add(b))
            .is_none()
        {
            return Err(self.err(k("files"), "the files add up to more than 2^64 bytes"));
        }
        let control_bytes = match t.control_bytes {
            None => 100,
            Some(b) if (36..=1500).contains(&b) => b,
            Some(_) => {
                return Err(self.err(
                    k("control_bytes"),
                    "must be from 36 (IP, UDP and an 8-byte message) to 1500 bytes",
                ))
            }
        };
        let content = t.content.unwrap_or(false);
        if content && !udt {
            return Err(self.err(
                k("content"),
                "only UDT channels carry content (TCP channels count bytes): set transport = \"udt\"",
            ));
        }
        let limits = [
            hosts[from].unwrap_or(HostLimits::TUNED),
            hosts[to].unwrap_or(HostLimits::TUNED),
        ];
        // Every channel runs the same configuration.
        let channel = if udt {
            if t.tcp.is_some() {
                return Err(self.err(
                    k("tcp"),
                    "the channels run UDT: set `udt`, or transport = \"tcp\"",
                ));
            }
            let u = self.sub_table::<UdtFlowFile>(&k("udt"), t.udt.as_ref())?;
            if u.from.is_some() || u.to.is_some() || u.start.is_some() || u.size.is_some() {
                return Err(self.err(
                    k("udt"),
                    "from, to, start and size are the transfer's own keys, not its channels'",
                ));
            }
            let spec = UdtFlowSpec {
                size: None,
                ..self.udt_flow(&k("udt"), &u, from, to, start, seed)?
            };
            if t.couple == Some(true) && !matches!(spec.config.rate_control, RateControl::Bbr(_)) {
                return Err(self.err(
                    k("couple"),
                    "only channels running BBR share a model: set udt = { cc = \"bbr-lh\" } (or \"bbr\", \"bbr-v3\"), or leave couple out",
                ));
            }
            FlowSpec::Udt(spec)
        } else {
            if t.couple == Some(true) {
                return Err(self.err(
                    k("couple"),
                    "only UDT channels running BBR share a model: set transport = \"udt\" and udt = { cc = \"bbr-lh\" }, or leave couple out",
                ));
            }
            if t.udt.is_some() {
                return Err(self.err(
                    k("udt"),
                    "the channels run TCP: set `tcp`, or transport = \"udt\"",
                ));
            }
            let tf = self.sub_table::<TcpFlowFile>(&k("tcp"), t.tcp.as_ref())?;
            if tf.from.is_some()
                || tf.to.is_some()
                || tf.start.is_some()
                || tf.size.is_some()
                || tf.files.is_some()
            {
                return Err(self.err(k("tcp"), "from, to, start, size and files are the transfer's own keys, not its channels'"));
            }
            let mut spec = self.tcp_flow(&k("tcp"), &tf, from, to, start)?;
            // A buffer the tool sets itself is capped by `rmem_max`/`wmem_max`;
            // otherwise autotuning sizes it, up to the `tcp_rmem`/`tcp_wmem`
            // maximum (the send buffer to twice the window).
            let c = &mut spec.config;
            c.recv_buffer_bytes = match tf.recv_buffer {
                Some(_) => c.recv_buffer_bytes.min(limits[1].rmem_max),
                None => limits[1].tcp_window(),
            }
            .max(2 * u64::from(c.mss));
            c.send_buffer_bytes = match tf.send_buffer {
                Some(_) => c.send_buffer_bytes.min(limits[0].wmem_max),
                None => limits[0].tcp_wmem_max,
            }
            .max(2 * u64::from(c.mss));
            c.send_buffer_autotune = tf.send_buffer.is_none();
            FlowSpec::Tcp(TcpFlowSpec {
                size: None,
                files: None,
                ..spec
            })
        };
        let first = flows.len();
        flows.extend(std::iter::repeat_n(channel, channels));
        Ok(TransferSpec {
            name: t.name.clone().unwrap_or_else(|| format!("transfer{i}")),
            from,
            to,
            start,
            files,
            block_size,
            parallelism,
            concurrency,
            pipelining,
            readers,
            hosts: limits,
            channels: (first..first + channels).collect(),
            control_bytes,
            content,
            couple: t.couple.unwrap_or(false),
        })
    }

    fn sub_table<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        v: Option<&toml::Value>,
    ) -> Result<T, ScenarioError> {
        let v = v
            .cloned()
            .unwrap_or_else(|| toml::Value::Table(Default::default()));
        T::deserialize(v).map_err(|e| self.err(key, e.to_string()))
    }
}
