//! A base station between the wired network and wireless hops: a router with a
//! finite processing budget that can run Snoop ([`crate::snoop`]) for the TCP
//! connections it carries to mobile hosts.
//!
//! Every packet that reaches the node waits in one FIFO for the processor, which
//! spends `forward_cost` on it, plus `snoop_cost` if Snoop handles it (a data segment
//! towards a wireless link, or an ACK coming off one, of a connection Snoop is on
//! for); a local retransmission costs another `snoop_cost`. A full FIFO drops. So
//! Snoop's work competes with forwarding, and under load it can cost more than it
//! saves, as the adaptive-Snoop study reports.
//!
//! Snoop is off, on for every connection, or adaptive: every `interval` the station
//! looks at the last interval's traffic and decides, per connection, whether Snoop
//! runs and with which `f` (see [`AdaptiveConfig`]); every decision is traced. When
//! Snoop is turned off for a connection its agent caches nothing more but keeps
//! handling the connection's ACKs until its cache drains, so the duplicates of a
//! repair under way never reach the sender at the switch.

use longhaul_proto::Duration;

use crate::snoop::SnoopRules;

/// When the station runs Snoop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SnoopMode {
    /// Never: the station only forwards.
    Off,
    /// For every TCP connection towards a wireless hop.
    On,
    /// Per connection, from measured load, loss and the predicted cost.
    Adaptive(AdaptiveConfig),
}

/// The adaptive policy (the study's Fig. 7, made concrete).
///
/// Each interval, for each connection *c* the station counts the data segments it
/// forwarded towards the mobile host (`n_c`) and the ACKs back (`a_c`), and keeps an
/// exponentially weighted error rate `p_c` of the wireless hop to *c*'s mobile host:
/// frames the hop lost over frames it carried, as a link layer that expects
/// acknowledgements knows them. (Duplicate-ACK runs would also count the station's
/// own queue overflows, which are congestion and not Snoop's to hide.)
/// It also books the rate at which *c*'s ACKs advanced to the mode *c* had (Snoop on
/// or off), smoothed: the history of Snoop's benefit, of which the mode not in use
/// is forgotten every 15 intervals so that it is tried again. It predicts the
/// processor's utilisation if Snoop ran for a set S of connections: `(sum of all
/// packets * forward_cost + sum over S of (n_c + a_c) * snoop_cost) / interval`.
/// Snoop is turned on for connections with `p_c >= min_error` whose history does not
/// show Snoop doing worse (on must beat off by 5 % once both were tried), the most
/// lossy first, as long as the prediction stays under `load_limit`; the rest go
/// unprotected. Each protected connection gets `f = f_lossy` if `p_c >= lossy` (the
/// wireless losses dominate, so a prompt local timeout pays) and `f_clean` otherwise.
/// The load prediction does not depend on the current decisions, so it does not
/// oscillate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveConfig {
    /// How often the station decides.
    pub interval: Duration,
    /// Largest predicted processor utilisation.
    pub load_limit: f64,
    /// Error rate below which Snoop brings nothing.
    pub min_error: f64,
    /// Error rate above which `f_lossy` is used.
    pub lossy: f64,
    /// `f` for lossy destinations.
    pub f_lossy: f64,
    /// `f` for the others.
    pub f_clean: f64,
    /// Weight of the newest interval in the error-rate average.
    pub smoothing: f64,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            interval: Duration::from_secs(2),
            load_limit: 0.85,
            min_error: 0.002,
            lossy: 0.02,
            f_lossy: 2.0,
            f_clean: 4.0,
            smoothing: 0.3,
        }
    }
}

/// A base station in a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct BaseStationSpec {
    /// The node.
    pub node: usize,
    /// Processor time to forward a packet.
    pub forward_cost: Duration,
    /// Extra processor time when Snoop handles a packet or retransmits one.
    pub snoop_cost: Duration,
    /// Packets that may wait for the processor.
    pub queue_pkts: usize,
    /// When Snoop runs.
    pub mode: SnoopMode,
    /// Snoop's rules.
    pub rules: SnoopRules,
}

/// Per-connection counts over one adaptive interval.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FlowWindow {
    pub data: u64,
    pub acks: u64,
    /// Bytes the connection's ACKs advanced by in this interval.
    pub acked_bytes: u64,
    /// Smoothed acknowledged rate (bytes/s) seen with Snoop on and off: the history
    /// of Snoop's benefit for this connection.
    pub rate_on: Option<f64>,
    pub rate_off: Option<f64>,
    /// Intervals since the mode not in use was last tried.
    pub age: u32,
    /// The wireless link's (lost, carried) frame counts at the last decision.
    pub link_seen: (u64, u64),
    /// Smoothed error rate.
    pub error: f64,
}

/// One adaptive decision, for `decisions.csv`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// When, seconds.
    pub time_s: f64,
    /// Base station node index in the scenario's list.
    pub station: usize,
    /// Flow.
    pub flow: usize,
    /// Snoop on for it.
    pub snoop: bool,
    /// Its `f`.
    pub f: f64,
    /// Its smoothed wireless error rate.
    pub error: f64,
    /// Predicted processor utilisation with every lossy connection protected.
    pub load_all: f64,
    /// Predicted utilisation with the chosen set.
    pub load_chosen: f64,
}

/// Picks who gets Snoop: returns (flow, on, f) for every flow in `windows`.
pub(crate) fn decide(
    cfg: &AdaptiveConfig,
    forward_cost: Duration,
    snoop_cost: Duration,
    other_pkts: u64,
    windows: &[(usize, FlowWindow)],
) -> (Vec<(usize, bool, f64)>, f64, f64) {
    let secs = cfg.interval.as_secs_f64();
    let fwd = forward_cost.as_secs_f64();
    let snp = snoop_cost.as_secs_f64();
    let all_pkts: u64 = other_pkts + windows.iter().map(|(_, w)| w.data + w.acks).sum::<u64>();
    let base = all_pkts as f64 * fwd / secs;
    // Worth protecting: errors on its hop, and Snoop not seen to do worse than no
    // Snoop for it (a mode not yet tried counts as promising).
    let benefit = |w: &FlowWindow| match (w.rate_on, w.rate_off) {
        (Some(on), Some(off)) => on >= 1.05 * off,
        _ => true,
    };
    let mut order: Vec<&(usize, FlowWindow)> = windows
        .iter()
        .filter(|(_, w)| w.error >= cfg.min_error && benefit(w))
        .collect();
    order.sort_by(|a, b| b.1.error.total_cmp(&a.1.error).then(a.0.cmp(&b.0)));
    let load_all = base
        + order
            .iter()
            .map(|(_, w)| (w.data + w.acks) as f64 * snp / secs)
            .sum::<f64>();
    let mut load = base;
    let mut on = vec![];
    for (flow, w) in order {
        let extra = (w.data + w.acks) as f64 * snp / secs;
        if load + extra <= cfg.load_limit {
            load += extra;
            on.push(*flow);
        }
    }
    let out = windows
        .iter()
        .map(|(flow, w)| {
            let f = if w.error >= cfg.lossy {
                cfg.f_lossy
            } else {
                cfg.f_clean
            };
            (*flow, on.contains(flow), f)
        })
        .collect();
    (out, load_all, load)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(data: u64, error: f64) -> FlowWindow {
        FlowWindow {
            data,
            acks: data,
            error,
            ..Default::default()
        }
    }

    #[test]
    fn the_most_lossy_connections_get_snoop_within_the_budget() {
        let cfg = AdaptiveConfig {
            interval: Duration::from_millis(500),
            load_limit: 0.85,
            ..AdaptiveConfig::default()
        };
        let fwd = Duration::from_micros(100);
        let snp = Duration::from_micros(500);
        // 0.5 s intervals; each flow 100 data + 100 ACKs: 0.04 forwarding and 0.2 of
        // Snoop work each.
        let flows = [
            (0, w(100, 0.01)),
            (1, w(100, 0.05)),
            (2, w(100, 0.0)),
            (3, w(100, 0.03)),
            (4, w(100, 0.05)),
        ];
        let (d, all, chosen) = decide(&cfg, fwd, snp, 0, &flows);
        assert!((all - (0.2 + 4.0 * 0.2)).abs() < 1e-9);
        // Base 0.2; three at 0.2 each fit under 0.85 (0.8); the least lossy does not.
        assert!((chosen - 0.8).abs() < 1e-9);
        let on: Vec<usize> = d.iter().filter(|x| x.1).map(|x| x.0).collect();
        assert_eq!(on, vec![1, 3, 4]);
        assert_eq!(d[1].2, 2.0, "lossy: f = 2");
        assert_eq!(d[0].2, 4.0);
        assert!(!d[2].1, "no errors, no Snoop");
    }
}

/// What a packet is to the station's Snoop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Role {
    /// A TCP data segment of `flow` towards a wireless hop.
    Data {
        flow: usize,
        seq: longhaul_wire::TcpSeqNumber,
        len: u32,
    },
    /// A TCP ACK of `flow` that came off a wireless hop.
    Ack {
        flow: usize,
        ack: longhaul_wire::TcpSeqNumber,
    },
    /// Anything else: forwarded only.
    Other,
}

/// A packet waiting for the processor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job {
    pub pkt: crate::packet::PacketId,
    pub role: Role,
    pub snooped: bool,
    pub cost_ns: u64,
}

/// A base station's run-time state.
#[derive(Debug)]
pub(crate) struct StationRt {
    pub spec: BaseStationSpec,
    pub queue: std::collections::VecDeque<Job>,
    pub busy: bool,
    /// Processor time owed for work done outside a job (local retransmissions).
    pub debt_ns: u64,
    pub busy_ns: u64,
    pub processed: u64,
    pub drops: u64,
    pub max_queue: usize,
    /// Per flow: Snoop on (adaptive), its `f`, this interval's counts, the last ACK.
    pub snoop_on: Vec<bool>,
    pub f: Vec<f64>,
    pub windows: Vec<FlowWindow>,
    pub last_ack: Vec<Option<longhaul_wire::TcpSeqNumber>>,
    pub other_pkts: u64,
    /// Sum over samples of the segments cached, and the number of samples.
    pub cache_sum: u64,
    pub cache_samples: u64,
}

impl StationRt {
    pub fn new(spec: BaseStationSpec, flows: usize) -> Self {
        let f = spec.rules.f;
        StationRt {
            spec,
            queue: Default::default(),
            busy: false,
            debt_ns: 0,
            busy_ns: 0,
            processed: 0,
            drops: 0,
            max_queue: 0,
            // Adaptive Snoop starts on: until the first interval there is nothing to
            // decide from, and an early timeout (with its backoff) costs more than a
            // moment of Snoop work.
            snoop_on: vec![false; flows],
            f: vec![f; flows],
            windows: vec![FlowWindow::default(); flows],
            last_ack: vec![None; flows],
            other_pkts: 0,
            cache_sum: 0,
            cache_samples: 0,
        }
    }

    /// Whether Snoop handles `flow` now.
    pub fn snoops(&self, flow: usize) -> bool {
        match self.spec.mode {
            SnoopMode::Off => false,
            SnoopMode::On => true,
            SnoopMode::Adaptive(_) => self.snoop_on[flow],
        }
    }

    /// Counts a packet for the adaptive policy (whatever the mode, so that the
    /// figures do not depend on the decisions they feed).
    pub fn count(&mut self, role: Role) {
        match role {
            Role::Data { flow, .. } => self.windows[flow].data += 1,
            Role::Ack { flow, ack } => {
                let w = &mut self.windows[flow];
                w.acks += 1;
                match self.last_ack[flow] {
                    Some(last) if ack <= last => {}
                    last => {
                        if let Some(last) = last {
                            w.acked_bytes += u64::from(ack.0.wrapping_sub(last.0));
                        }
                        self.last_ack[flow] = Some(ack);
                    }
                }
            }
            Role::Other => self.other_pkts += 1,
        }
    }
}
