//! DiffServ in a scenario: egress schedulers (priority queues with policers,
//! class weights) on links, and ingress rules at nodes (match, meter, colour, mark
//! or drop), each checked against the topology it names.

use crate::diffserv::policy::{Action, Match, MeterSpec, PreColors, RuleSpec};
use crate::diffserv::sched::{ClassConfig, LlqConfig};
use crate::link::EgressSpec;
use crate::topology::{node_addr, Topology};
use longhaul_model::units::{parse_rate, parse_size};

use super::schema::{ActionFile, EgressFile, IngressFile, MeterFile, RedFile, RedTable};
use super::{Loader, ScenarioError};
use longhaul_model::red::RedParams;

impl Loader<'_> {
    pub(super) fn egress(&self, key: &str, e: &EgressFile) -> Result<EgressSpec, ScenarioError> {
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
        let mut red = vec![];
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
            if let Some(r) = &c.red {
                red.push((i, self.red(&format!("{k}.red"), r)?));
            }
            classes.push((
                dscps(format!("{k}.dscp"), &c.dscp)?,
                ClassConfig {
                    bandwidth,
                    limit_pkts,
                },
            ));
        }
        Ok(EgressSpec {
            priority,
            classes,
            red,
        })
    }

    /// A class's RED profiles: one, or three for WRED (AFx1, AFx2, AFx3). Thresholds
    /// in packets; the rest as [`RedParams::with_thresholds`] unless given.
    fn red(&self, key: &str, r: &RedFile) -> Result<Vec<RedParams>, ScenarioError> {
        let tables: Vec<(String, &RedTable)> =
            match r {
                RedFile::One(t) => vec![(key.to_string(), t)],
                RedFile::PerPrecedence(v) if (1..=3).contains(&v.len()) => v
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (format!("{key}[{i}]"), t))
                    .collect(),
                RedFile::PerPrecedence(_) => return Err(self.err(
                    key,
                    "WRED takes one to three profiles, for drop precedences 1 to 3 (AFx1..AFx3)",
                )),
            };
        tables
            .into_iter()
            .map(|(k, t)| {
                let mut p = RedParams::with_thresholds(t.min_th, t.max_th);
                p.max_p = t.max_p.unwrap_or(p.max_p);
                p.w_q = t.w_q.unwrap_or(p.w_q);
                p.gentle = t.gentle.unwrap_or(p.gentle);
                p.validate().map_err(|m| self.err(k, m))?;
                Ok(p)
            })
            .collect()
    }

    pub(super) fn any_node(
        &self,
        topo: &Topology,
        key: &str,
        name: &str,
    ) -> Result<usize, ScenarioError> {
        topo.node(name).ok_or_else(|| {
            let names: Vec<&str> = topo.nodes.iter().map(|n| n.name.as_str()).collect();
            self.err(
                key,
                format!("no node named `{name}`; nodes are: {}", names.join(", ")),
            )
        })
    }

    pub(super) fn ingress_rule(
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

    pub(super) fn dscp(&self, key: &str, d: u8) -> Result<u8, ScenarioError> {
        if d < 64 {
            Ok(d)
        } else {
            Err(self.err(key, "a DSCP is 6 bits: 0 to 63"))
        }
    }
}
