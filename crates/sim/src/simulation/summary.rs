//! The end of a run: captures flushed, and the summary (per flow, link direction,
//! ingress rule, station and transfer) with the series assembled into a
//! [`RunResult`].

use crate::app::Flow;
use crate::metrics::{
    BaseStationSummary, FlowSummary, IngressSummary, LinkSummary, RunResult, Summary,
};
use crate::snoop::SnoopStats;
use crate::topology::Topology;
use longhaul_proto::names::Protocol;
use longhaul_proto::Instant;

use super::{RunError, Simulation};

impl Simulation {
    pub(super) fn finish(mut self, end: Instant) -> Result<RunResult, RunError> {
        for (i, w) in self.pcaps.iter_mut().enumerate() {
            if let Some(w) = w.take() {
                let path = self
                    .cfg
                    .pcap
                    .iter()
                    .find(|(n, _)| *n == self.links[i].params.name);
                w.finish().map_err(|error| RunError::Pcap {
                    path: path.map(|p| p.1.clone()).unwrap_or_default(),
                    error,
                })?;
            }
        }
        for l in &mut self.links {
            l.settle(end);
        }
        let dur = self.cfg.duration.as_secs_f64();
        let flows = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| flow_summary(i, f, &self.topo, end))
            .collect();
        let links = self
            .links
            .iter()
            .map(|l| LinkSummary {
                name: l.params.name.clone(),
                from: self.topo.nodes[l.from].name.clone(),
                to: self.topo.nodes[l.to].name.clone(),
                rate_mbps: l.params.rate.as_mbps_f64(),
                delay_ms: l.params.delay.as_secs_f64() * 1e3,
                utilisation: l.busy_ns_until(end) as f64 / self.cfg.duration.as_nanos() as f64,
                delivered_pkts: l.stats.delivered_pkts,
                delivered_bytes: l.stats.delivered_bytes,
                drops_queue: l.stats.drops_queue,
                drops_loss: l.stats.drops_loss,
                drops_policed: l.stats.drops_policed,
                drops_red: l.stats.drops_red,
                drops_af: l.stats.drops_af,
                mean_queue_waiting_pkts: l.stats.wait_ns as f64
                    / self.cfg.duration.as_nanos() as f64,
                max_queue_pkts: l.stats.max_queue_pkts,
            })
            .collect();
        let mut summary = Summary::new(
            self.cfg.name.clone(),
            self.cfg.seed,
            dur,
            self.sched.executed(),
            self.pool.capacity() as u64,
            self.unroutable,
            flows,
            links,
        );
        summary.ingress = self
            .ingress_order
            .iter()
            .map(|&(n, i)| {
                let s = self.ingress[n][i].stats;
                IngressSummary {
                    node: self.topo.nodes[n].name.clone(),
                    green: s.colored[0],
                    yellow: s.colored[1],
                    red: s.colored[2],
                    dropped: s.dropped,
                }
            })
            .collect();
        // Snoop's counts per flow: retired agents plus the live one.
        let mut snoop: Vec<Option<SnoopStats>> = vec![None; self.flows.len()];
        for (i, slot) in snoop.iter_mut().enumerate() {
            let mut st = self.retired[i];
            if let Some(a) = &self.agents[i] {
                st.merge(a.stats());
            }
            if st != SnoopStats::default() || self.agents[i].is_some() {
                *slot = Some(st);
            }
        }
        for (f, st) in summary.flows.iter_mut().zip(&snoop) {
            if let Some(st) = st {
                f.local_retransmits = Some(st.local_retransmits);
                f.suppressed_dupacks = Some(st.suppressed_dupacks);
                if st.rtt_samples > 0 {
                    f.snoop_rtt_ms = Some(st.rtt_sum_s / st.rtt_samples as f64 * 1e3);
                    f.snoop_rto_ms = Some(st.rto_sum_s / st.rtt_samples as f64 * 1e3);
                }
            }
        }
        summary.base_stations = self
            .stations
            .iter()
            .enumerate()
            .map(|(s, st)| {
                let mine: Vec<SnoopStats> = snoop
                    .iter()
                    .zip(&self.agent_station)
                    .filter_map(|(x, &at)| x.filter(|_| at == s))
                    .collect();
                BaseStationSummary {
                    node: self.topo.nodes[st.spec.node].name.clone(),
                    utilisation: st.busy_ns as f64 / self.cfg.duration.as_nanos() as f64,
                    processed: st.processed,
                    drops: st.drops,
                    max_queue_pkts: st.max_queue,
                    local_retransmits: mine.iter().map(|x| x.local_retransmits).sum(),
                    cache_max_pkts: mine.iter().map(|x| x.cache_max_pkts).max().unwrap_or(0),
                    cache_mean_pkts: st.cache_sum as f64 / st.cache_samples.max(1) as f64,
                }
            })
            .collect();
        summary.transfers = self.transfer_summaries(end);
        Ok(RunResult {
            decisions: std::mem::take(&mut self.decisions),
            summary,
            sample_times: self.sample_times,
            goodput_series: self.goodput_series,
            link_names: self.links.iter().map(|l| l.params.name.clone()).collect(),
            link_tput_series: self.link_tput_series,
            queue_series: self.queue_series,
            trace: self.trace,
        })
    }
}

pub(super) fn flow_summary(i: usize, f: &Flow, topo: &Topology, end: Instant) -> FlowSummary {
    let mut s = FlowSummary {
        id: i,
        protocol: String::new(),
        from: String::new(),
        to: String::new(),
        start_s: 0.0,
        delivered_bytes: f.delivered_bytes(),
        goodput_mbps: 0.0,
        completion_time_s: None,
        cc: None,
        retransmits: None,
        timeouts: None,
        fast_recoveries: None,
        data_segments_sent: None,
        srtt_ms: None,
        min_rtt_ms: None,
        sent_pkts: None,
        received_pkts: None,
        loss_rate: None,
        mean_delay_ms: None,
        max_delay_ms: None,
        jitter_ms: None,
        naks: None,
        ar_udt_classes: None,
        transfer_time_s: None,
        round_bytes: None,
        local_retransmits: None,
        suppressed_dupacks: None,
        snoop_rtt_ms: None,
        snoop_rto_ms: None,
    };
    let (start, stop) = match f {
        Flow::Tcp(t) => {
            let c = &t.ends[0];
            s.protocol = Protocol::Tcp.name().into();
            s.from = topo.nodes[t.spec.from].name.clone();
            s.to = topo.nodes[t.spec.to].name.clone();
            s.cc = Some(t.spec.config.cc.name().into());
            let st = c.stats();
            s.retransmits = Some(st.retransmits);
            s.timeouts = Some(st.timeouts);
            s.fast_recoveries = Some(st.fast_recoveries);
            s.data_segments_sent = Some(st.data_segments_sent);
            s.srtt_ms = c.rtt().srtt().map(|d| d.as_secs_f64() * 1e3);
            s.min_rtt_ms = c
                .rtt()
                .srtt()
                .map(|_| c.rtt().min_rtt().as_secs_f64() * 1e3);
            s.completion_time_s = t.completed_at.map(|c| (c - t.spec.start).as_secs_f64());
            s.transfer_time_s = t.data_arrivals.map(|(a, b)| (b - a).as_secs_f64());
            if t.spec.files.is_some() {
                s.round_bytes = Some(c.round_bytes().to_vec());
            }
            (t.spec.start, t.completed_at.unwrap_or(end))
        }
        Flow::Sctp(a) => {
            let c = &a.ends[0];
            let st = c.stats();
            s.protocol = Protocol::Sctp.name().into();
            s.from = topo.nodes[a.spec.from].name.clone();
            s.to = topo.nodes[a.spec.to].name.clone();
            s.cc = Some(match a.spec.config.cc {
                longhaul_proto::cc::SctpCcProfile::Rfc4960 => "rfc4960".into(),
                longhaul_proto::cc::SctpCcProfile::Rfc9260 => "rfc9260".into(),
            });
            s.retransmits = Some(st.retransmits);
            s.timeouts = Some(st.t3_expiries);
            s.fast_recoveries = Some(st.fast_retransmits);
            s.data_segments_sent = Some(st.data_chunks_sent);
            s.srtt_ms = c.rtt().srtt().map(|d| d.as_secs_f64() * 1e3);
            s.completion_time_s = a.completed_at.map(|c| (c - a.spec.start).as_secs_f64());
            s.transfer_time_s = a.ends[1]
                .data_arrivals()
                .map(|(x, y)| (y - x).as_secs_f64());
            if a.spec.files.is_some() {
                s.round_bytes = Some(c.round_bytes().to_vec());
            }
            (a.spec.start, a.completed_at.unwrap_or(end))
        }
        Flow::Udp(u) => {
            s.protocol = Protocol::Udp.name().into();
            s.from = topo.nodes[u.spec.from].name.clone();
            s.to = topo.nodes[u.spec.to].name.clone();
            s.sent_pkts = Some(u.sent_pkts);
            s.received_pkts = Some(u.recv_pkts);
            s.loss_rate = (u.sent_pkts > 0).then(|| 1.0 - u.recv_pkts as f64 / u.sent_pkts as f64);
            if u.recv_pkts > 0 {
                s.mean_delay_ms = Some(u.delay_sum_ns as f64 / u.recv_pkts as f64 * 1e-6);
                s.max_delay_ms = Some(u.delay_max_ns as f64 * 1e-6);
                s.jitter_ms = Some(u.jitter_ns * 1e-6);
            }
            (u.spec.start, u.spec.stop.unwrap_or(end).min(end))
        }
        Flow::Blast(b) => {
            let (s0, s1) = (b.ends[0].stats(), b.ends[1].stats());
            s.protocol = Protocol::Blast(b.spec.config.scheme).name().into();
            s.from = topo.nodes[b.spec.from].name.clone();
            s.to = topo.nodes[b.spec.to].name.clone();
            s.retransmits = Some(s0.retransmitted);
            s.data_segments_sent = Some(s0.originals);
            s.sent_pkts = Some(s0.originals + s0.retransmitted);
            s.received_pkts = Some(s1.received);
            s.loss_rate = s
                .sent_pkts
                .filter(|&n| n > 0)
                .map(|n| 1.0 - s1.received as f64 / n as f64);
            s.srtt_ms = b.control[0].0.rtt().srtt().map(|d| d.as_secs_f64() * 1e3);
            s.completion_time_s = b.completed_at.map(|c| (c - b.spec.start).as_secs_f64());
            (b.spec.start, b.completed_at.unwrap_or(end))
        }
        Flow::Udt(u) => {
            let c = &u.ends[0];
            let st = c.stats();
            s.protocol = Protocol::Udt.name().into();
            s.from = topo.nodes[u.spec.from].name.clone();
            s.to = topo.nodes[u.spec.to].name.clone();
            s.cc = Some(u.spec.config.rate_control.name().into());
            s.retransmits = Some(st.retransmitted);
            s.timeouts = Some(st.exp_timeouts);
            s.data_segments_sent = Some(st.data_sent - st.retransmitted);
            s.naks = Some(u.ends[1].stats().naks_sent);
            s.srtt_ms = Some(c.rtt_us() / 1e3);
            s.ar_udt_classes = c.ar_udt_class_counts();
            s.completion_time_s = u.completed_at.map(|c| (c - u.spec.start).as_secs_f64());
            (u.spec.start, u.completed_at.unwrap_or(end))
        }
    };
    s.start_s = start.as_secs_f64();
    let active = stop.saturating_duration_since(start).as_secs_f64();
    if active > 0.0 {
        s.goodput_mbps = s.delivered_bytes as f64 * 8e-6 / active;
    }
    s
}
