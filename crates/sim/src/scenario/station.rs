//! Base stations in a scenario: a node's processing costs and queue, and the Snoop
//! agent it runs (mode, rules, estimator, cache, adaptive on/off), checked.

use crate::basestation::{AdaptiveConfig, BaseStationSpec, SnoopMode};
use crate::snoop::{Estimator, SnoopRules};
use crate::topology::{NodeKind, Topology};
use longhaul_proto::Duration;

use super::schema::BaseStationFile;
use super::{Loader, ScenarioError};

impl Loader<'_> {
    pub(super) fn base_station(
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
}
