//! The simulation loop: nodes forward, links carry, endpoints run their engines.

use std::path::PathBuf;

use longhaul_proto::tcp::{Event as TcpEvent, TcpConnection};
use longhaul_proto::{Duration, Instant};
use longhaul_wire::{udp, Checksum, IpProtocol, Ipv4Repr, UdpRepr};
use rand::Rng;

use crate::app::{Arrivals, Flow, FlowSpec, SctpFlow, TcpFlow, UdpFlow, UdtFlow};
use crate::basestation::{decide, Decision, Job, Role, SnoopMode, StationRt};
use crate::diffserv::policy::Rule;
use crate::link::{Enqueued, Link, QueueLimit, Scheduled};
use crate::metrics::{
    BaseStationSummary, FlowSummary, IngressSummary, LinkSummary, RunResult, Summary, TraceRow,
};
use crate::packet::{PacketId, PacketPool};
use crate::pcap::PcapWriter;
use crate::scheduler::{Event, Scheduler};
use crate::snoop::{AckAction, DataAction, SnoopAgent, SnoopStats};
use crate::topology::{addr_node, node_addr, NodeKind, Topology};
use longhaul_proto::sctp::{Event as SctpEvent, SctpAssociation};
use longhaul_proto::udt::{Event as UdtEvent, UdtConnConfig, UdtConnection};

mod transfer;
use transfer::{TransferRt, CONTROL_FLAG};

/// Everything a run needs besides the network and the flows.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// Scenario name (for outputs).
    pub name: String,
    /// Simulated time.
    pub duration: Duration,
    /// Seed of every random stream in the run.
    pub seed: u64,
    /// Interval of the goodput and queue series.
    pub sample_interval: Duration,
    /// Interval of the cwnd/RTT trace; `None` turns the trace off.
    pub trace_interval: Option<Duration>,
    /// Link directions to capture, with the pcap file for each.
    pub pcap: Vec<(String, PathBuf)>,
    /// End the run when the last transfer completes (`duration` is then a limit).
    pub stop_when_done: bool,
}

const TCP_SENDER_PORT: u16 = 10000;
const TCP_RECEIVER_PORT: u16 = 20000;
const UDP_PORT: u16 = 30000;
const UDT_SENDER_PORT: u16 = 40000;
const UDT_RECEIVER_PORT: u16 = 50000;
/// IPv4 and UDP headers in front of a UDT packet.
const IP_UDP: usize = 28;
/// Bytes of an SCTP flow's endless backlog kept queued in its sender.
const SCTP_BACKLOG: u64 = 1 << 20;

#[derive(Debug, Clone, Copy)]
struct Endpoint {
    protocol: u8,
    port: u16,
    flow: u32,
    side: u8,
}

#[derive(Debug)]
struct NodeRt {
    kind: NodeKind,
    endpoints: Vec<Endpoint>,
}

/// One simulation run.
pub struct Simulation {
    cfg: RunConfig,
    topo: Topology,
    sched: Scheduler,
    pool: PacketPool,
    nodes: Vec<NodeRt>,
    /// Every node's routes ([`Topology::routes`]) in one table, `next_hop[node *
    /// nodes + dst]` ([`route`](Self::route)): the per-packet lookup is one load from
    /// an address known at once, not a chain of loads through the node's record
    /// (which perf showed stalling the forwarding path).
    next_hop: Vec<Option<u32>>,
    links: Vec<Link>,
    flows: Vec<Flow>,
    /// Each flow's sending and receiving host ([`FlowSpec::ends`]).
    flow_ends: Vec<(usize, usize)>,
    pcaps: Vec<Option<PcapWriter>>,
    /// Whether any link is captured (one flag on the per-packet path).
    any_pcap: bool,
    /// DiffServ ingress rules by node (empty for most), and every rule in scenario
    /// order as (node, index in that node's list).
    ingress: Vec<Vec<Rule>>,
    ingress_order: Vec<(usize, usize)>,
    /// Whether any node has rules (one flag on the per-packet path).
    any_ingress: bool,
    /// Base stations: which node has one, their state, whether there are any.
    station_of: Vec<Option<u16>>,
    stations: Vec<StationRt>,
    any_station: bool,
    /// No capture, no ingress rules and no base station anywhere: an arriving packet
    /// goes straight to its node (one test per arrival instead of three).
    plain_arrivals: bool,
    /// Snoop agents by flow, the station each belongs to, its timer, and the counts
    /// of agents already retired (adaptive Snoop turned off).
    agents: Vec<Option<SnoopAgent>>,
    agent_station: Vec<usize>,
    agent_timer_at: Vec<Option<Instant>>,
    retired: Vec<SnoopStats>,
    decisions: Vec<Decision>,
    /// Transfers, the (transfer, channel) each flow serves if any, and how many
    /// transfers have not completed.
    transfers: Vec<TransferRt>,
    channel_of: Vec<Option<(u32, u16)>>,
    transfers_open: usize,
    /// UDT flows whose packets carry real bytes (channels of a transfer with
    /// content): they travel whole, in the pool's side buffers.
    content_flow: Vec<bool>,
    /// Scratch space for an application's bytes.
    scratch: Vec<u8>,
    /// Drops at nodes: no route, or a packet for an address nobody listens on.
    unroutable: u64,
    /// Whether links may be cut-through (see [`crate::link`]).
    cut_through: bool,
    /// For a cut-through link whose packets all leave its far end on one link, that
    /// link: the per-packet path skips the route lookup, whose chain of dependent
    /// loads (link, far end, table) perf showed stalling forwarding.
    onward: Vec<Option<u32>>,
    /// When the run ends (`cfg.duration` as an instant, for the per-packet path).
    end: Instant,
    /// Cut-through links into an early host (see
    /// [`cut_through_links`](Self::cut_through_links)): a packet is handed to the host
    /// when it is offered, at the time it will arrive.
    into_early: Vec<bool>,
    /// By node, for early hosts: the next observation (sample or trace) the host has
    /// not yet been read for. A host about to run past it first records what the
    /// observation will read (`snaps`).
    host_next_obs: Vec<Instant>,
    /// By node, for early hosts: a time by which nothing is due there (no timer, no
    /// observation), so a packet arriving before it needs no
    /// [`catch_up`](Self::catch_up). Timers armed later lower it.
    host_wake: Vec<Instant>,
    /// Packets handed to early hosts during the current event, for them to take
    /// when it is done: (arrival time, host, packet).
    early_pending: Vec<(Instant, u32, PacketId)>,
    /// By flow, for a receiver on an early host: its delivered bytes at observation
    /// times the clock has not reached yet, as `(time, bytes)`, oldest first.
    snaps: Vec<std::collections::VecDeque<(Instant, u64)>>,
    /// Scratch space for engines that write whole datagrams (SCTP).
    datagram: Vec<u8>,
    /// Zero bytes that simulated applications write (their content is not studied).
    zeros: Vec<u8>,
    // Series.
    last_delivered: Vec<u64>,
    last_link_bytes: Vec<u64>,
    goodput_series: Vec<Vec<f64>>,
    link_tput_series: Vec<Vec<f64>>,
    queue_series: Vec<Vec<u32>>,
    sample_times: Vec<f64>,
    trace: Vec<TraceRow>,
}

/// Errors a run can meet (bad specs are caught earlier, by the scenario loader).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A pcap file could not be written.
    #[error("cannot write pcap {path}: {error}")]
    Pcap {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The flow or link references are inconsistent.
    #[error("{0}")]
    Spec(String),
}

impl Simulation {
    /// Builds a run of `flows` over `topo`.
    pub fn new(cfg: RunConfig, topo: Topology, flows: Vec<FlowSpec>) -> Result<Self, RunError> {
        // (The scenario loader checks these; a caller building a `RunConfig` by hand
        // gets the same answer instead of a run that samples forever at one instant.)
        if cfg.sample_interval.is_zero() || cfg.trace_interval.is_some_and(|t| t.is_zero()) {
            return Err(RunError::Spec(
                "the sample and trace intervals must be above zero".into(),
            ));
        }
        let next_hop: Vec<Option<u32>> = topo.routes().into_iter().flatten().collect();
        let mut nodes: Vec<NodeRt> = topo
            .nodes
            .iter()
            .map(|n| NodeRt {
                kind: n.kind,
                endpoints: vec![],
            })
            .collect();
        let links: Vec<Link> = topo
            .links
            .iter()
            .enumerate()
            .map(|(i, (a, b, p))| Link::new(p.clone(), *a, *b, cfg.seed, i as u64))
            .collect();
        let mut pcaps: Vec<Option<PcapWriter>> = (0..links.len()).map(|_| None).collect();
        for (name, path) in &cfg.pcap {
            let i = links
                .iter()
                .position(|l| &l.params.name == name)
                .ok_or_else(|| RunError::Spec(format!("pcap: no link direction named `{name}`")))?;
            let w = PcapWriter::create(path).map_err(|error| RunError::Pcap {
                path: path.clone(),
                error,
            })?;
            pcaps[i] = Some(w);
        }
        let mut sched = Scheduler::new();
        let mut rt_flows = Vec::with_capacity(flows.len());
        let flow_ends = flows.iter().map(FlowSpec::ends).collect();
        for (i, f) in flows.into_iter().enumerate() {
            let (from, to) = f.ends();
            for n in [from, to] {
                if n >= nodes.len() || nodes[n].kind != NodeKind::Host {
                    return Err(RunError::Spec(format!("flow {i}: node {n} is not a host")));
                }
            }
            if next_hop[from * nodes.len() + to].is_none() {
                return Err(RunError::Spec(format!(
                    "flow {i}: no path from {} to {}",
                    topo.nodes[from].name, topo.nodes[to].name
                )));
            }
            let fi = i as u32;
            // The loader refuses more flows (`scenario::MAX_FLOWS`): a scenario
            // built in code is held to the same limit.
            let port_off = u16::try_from(i)
                .ok()
                .filter(|&p| usize::from(p) < crate::scenario::MAX_FLOWS)
                .ok_or_else(|| {
                    RunError::Spec(format!(
                        "at most {} flows per scenario",
                        crate::scenario::MAX_FLOWS
                    ))
                })?;
            sched.schedule(f.start(), Event::FlowStart(fi));
            match f {
                FlowSpec::Tcp(spec) => {
                    let mut cfg_tcp = spec.config;
                    cfg_tcp.checksum = Checksum::None;
                    let (sp, rp) = (TCP_SENDER_PORT + port_off, TCP_RECEIVER_PORT + port_off);
                    // Initial sequence numbers from the seed: deterministic, but not
                    // all zero, so wrap-around is exercised.
                    let iss = (cfg.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32;
                    let sender = TcpConnection::new(
                        cfg_tcp,
                        (node_addr(from), sp),
                        (node_addr(to), rp),
                        iss.wrapping_add(fi.wrapping_mul(7919)),
                    );
                    let receiver = TcpConnection::new(
                        cfg_tcp,
                        (node_addr(to), rp),
                        (node_addr(from), sp),
                        iss.wrapping_add(fi.wrapping_mul(104_729)),
                    );
                    nodes[from].endpoints.push(Endpoint {
                        protocol: 6,
                        port: sp,
                        flow: fi,
                        side: 0,
                    });
                    nodes[to].endpoints.push(Endpoint {
                        protocol: 6,
                        port: rp,
                        flow: fi,
                        side: 1,
                    });
                    rt_flows.push(Flow::Tcp(Box::new(TcpFlow {
                        spec,
                        ends: [sender, receiver],
                        timer_at: [None; 2],
                        completed_at: None,
                        data_arrivals: None,
                    })));
                }
                FlowSpec::Sctp(spec) => {
                    let mut c = spec.config;
                    c.checksum = Checksum::None;
                    // SCTP shares the TCP port ranges: endpoints match on protocol too.
                    let (sp, rp) = (TCP_SENDER_PORT + port_off, TCP_RECEIVER_PORT + port_off);
                    let seed = cfg.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(fi);
                    let sender =
                        SctpAssociation::new(c, (node_addr(from), sp), (node_addr(to), rp), seed);
                    let receiver = SctpAssociation::new(
                        c,
                        (node_addr(to), rp),
                        (node_addr(from), sp),
                        seed ^ 0x5c7b,
                    );
                    for (node, port, side) in [(from, sp, 0), (to, rp, 1)] {
                        nodes[node].endpoints.push(Endpoint {
                            protocol: 132,
                            port,
                            flow: fi,
                            side,
                        });
                    }
                    rt_flows.push(Flow::Sctp(Box::new(SctpFlow {
                        spec,
                        ends: [sender, receiver],
                        timer_at: [None; 2],
                        completed_at: None,
                        delivered: 0,
                        next_write: 0,
                    })));
                }
                FlowSpec::Udp(spec) => {
                    nodes[to].endpoints.push(Endpoint {
                        protocol: 17,
                        port: UDP_PORT + port_off,
                        flow: fi,
                        side: 1,
                    });
                    rt_flows.push(Flow::Udp(Box::new(UdpFlow::new(spec, cfg.seed, i as u64))));
                }
                FlowSpec::Udt(spec) => {
                    let (sp, rp) = (UDT_SENDER_PORT + port_off, UDT_RECEIVER_PORT + port_off);
                    // Socket IDs and the ISN from the seed and the flow index: distinct
                    // per flow, reproducible per run.
                    let isn = (cfg.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33) as u32
                        ^ (fi.wrapping_mul(2_654_435_761));
                    let mk = |id: u32| UdtConnConfig {
                        socket_id: id,
                        isn,
                        ..spec.config
                    };
                    let sender = UdtConnection::new(mk(2 * fi + 1), Instant::ZERO);
                    let receiver = UdtConnection::new(mk(2 * fi + 2), Instant::ZERO);
                    nodes[from].endpoints.push(Endpoint {
                        protocol: 17,
                        port: sp,
                        flow: fi,
                        side: 0,
                    });
                    nodes[to].endpoints.push(Endpoint {
                        protocol: 17,
                        port: rp,
                        flow: fi,
                        side: 1,
                    });
                    let unsent = spec.size.unwrap_or(u64::MAX);
                    rt_flows.push(Flow::Udt(Box::new(UdtFlow {
                        spec,
                        ends: [sender, receiver],
                        timer_at: [None; 2],
                        completed_at: None,
                        unsent,
                    })));
                }
            }
        }
        sched.schedule_last(Instant::ZERO + cfg.sample_interval, Event::Sample);
        if let Some(ti) = cfg.trace_interval {
            sched.schedule_last(Instant::ZERO + ti, Event::Trace);
        }
        let nf = rt_flows.len();
        let nl = links.len();
        let max_message = rt_flows
            .iter()
            .map(|f| match f {
                Flow::Sctp(s) => s.spec.files.map_or(s.spec.message, |f| f.message) as usize,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let mut ingress: Vec<Vec<Rule>> = vec![vec![]; nodes.len()];
        let mut ingress_order = vec![];
        for r in &topo.ingress {
            ingress_order.push((r.node, ingress[r.node].len()));
            ingress[r.node].push(Rule::new(r.clone(), Instant::ZERO));
        }
        let mut station_of = vec![None; nodes.len()];
        let mut stations = vec![];
        for (i, b) in topo.base_stations.iter().enumerate() {
            station_of[b.node] = Some(i as u16);
            if let SnoopMode::Adaptive(a) = b.mode {
                sched.schedule(Instant::ZERO + a.interval, Event::StationAdapt(i as u16));
            }
            stations.push(StationRt::new(b.clone(), nf));
        }
        let any_pcap = pcaps.iter().any(Option::is_some);
        let nodes_len = nodes.len();
        let end = Instant::ZERO + cfg.duration;
        Ok(Simulation {
            plain_arrivals: !any_pcap && ingress_order.is_empty() && stations.is_empty(),
            any_station: !stations.is_empty(),
            station_of,
            stations,
            agents: vec![None; nf],
            agent_station: vec![0; nf],
            agent_timer_at: vec![None; nf],
            retired: vec![SnoopStats::default(); nf],
            decisions: vec![],
            transfers: vec![],
            channel_of: vec![None; nf],
            transfers_open: 0,
            content_flow: vec![false; nf],
            scratch: vec![],
            any_ingress: !ingress_order.is_empty(),
            ingress,
            ingress_order,
            cfg,
            topo,
            sched,
            pool: PacketPool::with_capacity(packets_in_flight(&links)),
            next_hop,
            nodes,
            links,
            flows: rt_flows,
            flow_ends,
            any_pcap,
            pcaps,
            unroutable: 0,
            cut_through: true,
            onward: vec![None; nl],
            end,
            into_early: vec![false; nl],
            host_next_obs: vec![Instant::MAX; nodes_len],
            host_wake: vec![Instant::MAX; nodes_len],
            early_pending: vec![],
            snaps: vec![std::collections::VecDeque::new(); nf],
            datagram: vec![0; 65535],
            zeros: vec![0; max_message],
            last_delivered: vec![0; nf],
            last_link_bytes: vec![0; nl],
            goodput_series: vec![vec![]; nf],
            link_tput_series: vec![vec![]; nl],
            queue_series: vec![vec![]; nl],
            sample_times: vec![],
            trace: vec![],
        })
    }

    /// With `false`, every hop is an event, as before cut-through links existed: the
    /// results are the same (tests hold the two to that), only slower to get.
    #[must_use]
    pub fn with_cut_through(mut self, on: bool) -> Self {
        self.cut_through = on;
        self
    }

    /// Runs to the end and returns the results.
    pub fn run(mut self) -> Result<RunResult, RunError> {
        if self.cut_through {
            let (through, early) = self.cut_through_links();
            for (l, onward) in through {
                self.links[l].set_cut_through();
                self.onward[l] = onward;
            }
            let first_obs = self.next_observation_after(Instant::ZERO);
            for l in early {
                self.links[l].set_cut_through();
                self.into_early[l] = true;
                self.host_next_obs[self.links[l].to] = first_obs;
                self.host_wake[self.links[l].to] = first_obs;
            }
        }
        let mut end = self.end;
        while let Some(ev) = self.sched.peek_until(end) {
            let now = self.sched.now();
            if let Event::LinkArrival(l) = ev {
                self.on_link_arrival(now, l as usize);
            } else {
                self.sched.pop_current();
                self.dispatch(now, ev);
            }
            if !self.early_pending.is_empty() {
                self.take_early_arrivals();
            }
            if self.cfg.stop_when_done && self.transfers_done() {
                end = now;
                self.cfg.duration = now - Instant::ZERO;
                break;
            }
        }
        self.finish(end)
    }

    /// Runs one event other than a link arrival.
    #[inline]
    fn dispatch(&mut self, now: Instant, ev: Event) {
        match ev {
            Event::LinkArrival(_) => unreachable!("handled above"),
            Event::Timer(f, side) => self.on_timer(now, f as usize, usize::from(side)),
            Event::LinkTxDone(l) => self.on_tx_done(now, l),
            Event::FlowStart(f) => self.on_flow_start(now, f as usize),
            Event::UdpSend(f) => self.on_udp_send(now, f as usize),
            Event::Sample => self.on_sample(now),
            Event::Trace => self.on_trace(now),
            Event::StationDone(s) => self.on_station_done(now, usize::from(s)),
            Event::StationAdapt(s) => self.on_station_adapt(now, usize::from(s)),
            Event::SnoopTimer(f) => self.on_snoop_timer(now, f as usize),
            Event::TransferWake(t) => self.on_transfer_wake(now, t as usize),
            Event::ControlTimer(t) => self.on_control_timer(now, t as usize),
        }
    }

    /// The links that can be cut-through (see [`crate::link`]): the far end is a node
    /// that only forwards (no endpoints, no base station, no ingress rules), and every
    /// link it forwards this link's packets onto is a FIFO that nothing else feeds, or
    /// leads into an early host. A link downstream of a cut-through link runs ahead of
    /// the clock, so it is not cut-through itself, and nothing upstream of it is
    /// either. Each comes with the one link its packets go on to, if there is only
    /// one.
    ///
    /// Then, apart, the links into **early hosts**: a FIFO link is the only way into
    /// a host whose endpoints are all TCP receivers, and every packet on it is for
    /// that host. A receiver's inputs are then its packets, in the order the link
    /// delivers them, and its own timers, and nothing else in the run reads or
    /// changes it but the metric samples and traces; so the host can take each
    /// packet as it is offered to the link, at the time it will arrive, its timers
    /// first if they are due by then, and send what it answers into the network at
    /// that time, ahead of the clock. What it sends goes out on links it alone feeds,
    /// in time order, as with an event per arrival: the run is the same, one event
    /// per data segment cheaper, and a data segment is read while it is still in the
    /// cache rather than one window later. Observations the host runs past see what
    /// it had at their time ([`catch_up`](Self::catch_up)). Not with transfers
    /// (their channels' ends are driven by the transfer too) or base stations.
    fn cut_through_links(&self) -> (Vec<(usize, Option<u32>)>, Vec<usize>) {
        let nl = self.links.len();
        // Who sends to whom: the two ends of every flow and transfer, both ways, and
        // base stations (Snoop's local retransmissions) to either end of any flow.
        let mut pairs: Vec<(usize, usize)> = vec![];
        for (a, b) in self
            .flow_ends
            .iter()
            .copied()
            .chain(self.transfers.iter().map(|t| (t.spec.from, t.spec.to)))
        {
            pairs.extend([(a, b), (b, a)]);
            for st in &self.stations {
                pairs.extend([(st.spec.node, a), (st.spec.node, b)]);
            }
        }
        // What feeds each link, and where each link's packets go next, from those
        // routes walked hop by hop. Feeders are links, or (`nl + node`) the node a
        // route starts at.
        #[derive(Clone, Copy, PartialEq)]
        enum Feed {
            Nothing,
            Only(usize),
            Several,
        }
        let mut feed = vec![Feed::Nothing; nl];
        let mut next: Vec<Vec<usize>> = vec![vec![]; nl];
        for (s, d) in pairs.into_iter().filter(|(s, d)| s != d) {
            let (mut node, mut came) = (s, nl + s);
            for _ in 0..self.nodes.len() {
                let Some(out) = self.route(node, d) else {
                    break;
                };
                let out = out as usize;
                feed[out] = match feed[out] {
                    Feed::Nothing => Feed::Only(came),
                    Feed::Only(x) if x == came => Feed::Only(came),
                    _ => Feed::Several,
                };
                if came < nl && !next[came].contains(&out) {
                    next[came].push(out);
                }
                came = out;
                node = self.links[out].to;
                if node == d {
                    break;
                }
            }
        }
        let mut cut = vec![false; nl];
        for l in 0..nl {
            let link = &self.links[l];
            let r = link.to;
            let plain_router = self.nodes[r].endpoints.is_empty()
                && self.station_of[r].is_none()
                && self.ingress[r].is_empty();
            let passes_on = !next[l].is_empty()
                && next[l]
                    .iter()
                    .all(|&o| feed[o] == Feed::Only(l) && !self.links[o].is_scheduled() && !cut[o]);
            let fed_ahead = matches!(feed[l], Feed::Only(u) if u < nl && cut[u]);
            if plain_router && passes_on && !link.is_scheduled() && !fed_ahead {
                cut[l] = true;
            }
        }
        let through = (0..nl)
            .filter(|&l| cut[l])
            .map(|l| (l, (next[l].len() == 1).then(|| next[l][0] as u32)))
            .collect();
        let early_host = |r: usize| {
            let n = &self.nodes[r];
            !n.endpoints.is_empty()
                && n.endpoints.iter().all(|e| {
                    e.side == 1
                        && e.flow & CONTROL_FLAG == 0
                        && matches!(self.flows.get(e.flow as usize), Some(Flow::Tcp(_)))
                })
                && self.ingress[r].is_empty()
        };
        let mut early = vec![];
        if self.transfers.is_empty() && !self.any_station {
            for l in 0..nl {
                let r = self.links[l].to;
                let only_way_in = (0..nl)
                    .filter(|&i| self.links[i].to == r && feed[i] != Feed::Nothing)
                    .eq([l]);
                if only_way_in
                    && next[l].is_empty()
                    && !cut[l]
                    && !self.links[l].is_scheduled()
                    && early_host(r)
                {
                    early.push(l);
                }
            }
        }
        (through, early)
    }

    /// Writes packet `pkt` to link `l`'s capture, if any, as arriving at `at`.
    #[inline(always)]
    fn capture(&mut self, l: usize, at: Instant, pkt: PacketId) {
        if self.any_pcap {
            self.write_capture(l, at, pkt);
        }
    }

    #[cold]
    fn write_capture(&mut self, l: usize, at: Instant, pkt: PacketId) {
        if let Some(w) = &mut self.pcaps[l] {
            if self.pool.get(pkt).header()[9] == 132 {
                w.write_whole(at, self.pool.whole(pkt));
            } else {
                w.write(at, self.pool.get(pkt));
            }
        }
    }

    fn on_link_arrival(&mut self, now: Instant, l: usize) {
        // The link's event is still at the top of the heap: hand it to the link's
        // next packet, or retire it, before anything else is scheduled.
        let (pkt, next) = self.links[l].pop_arrival(now);
        match next {
            Some((t, soon)) => {
                self.sched.replace_current(t, Event::LinkArrival(l as u32));
                // The next packet to arrive here was written when it was sent, a
                // round trip's worth of packets ago on a long path, and is read cold
                // at its arrival: start loading it now, while this one is handled.
                // The reference bench at 100 ms ran 3.5 % faster (the read of its
                // destination had been the hottest instruction of `deliver`), at 1 ms
                // as fast as before.
                crate::prefetch::prefetch(self.pool.get(soon));
            }
            None => self.sched.pop_current(),
        }
        let node = self.links[l].to;
        if self.plain_arrivals {
            self.deliver(now, node, pkt);
            return;
        }
        self.capture(l, now, pkt);
        if self.any_ingress && !self.police(now, node, pkt) {
            self.pool.free(pkt);
            return;
        }
        if self.any_station {
            if let Some(s) = self.station_of[node] {
                self.station_arrive(now, usize::from(s), pkt, l);
                return;
            }
        }
        self.deliver(now, node, pkt);
    }

    // ---- base stations and Snoop ------------------------------------------------

    /// What a packet arriving at a station's node over link direction `from` is to
    /// Snoop: read off its real TCP header.
    fn classify(&self, node: usize, pkt: PacketId, from: usize) -> Role {
        let p = self.pool.get(pkt);
        let h = p.header();
        if h.len() < 20 || h[9] != 6 {
            return Role::Other;
        }
        let ihl = usize::from(h[0] & 0x0f) * 4;
        let Ok(tcp) = longhaul_wire::TcpPacket::new_checked(&h[ihl.min(h.len())..]) else {
            return Role::Other;
        };
        let is_tcp_flow = |f: usize| matches!(self.flows.get(f), Some(Flow::Tcp(_)));
        if p.payload_len > 0 {
            let Some(dst) = addr_node(p.dst_bits(), self.nodes.len()) else {
                return Role::Other;
            };
            let towards_wireless = self
                .route(node, dst)
                .is_some_and(|l| self.links[l as usize].params.wireless);
            let flow = usize::from(tcp.src_port().wrapping_sub(TCP_SENDER_PORT));
            if towards_wireless && is_tcp_flow(flow) {
                return Role::Data {
                    flow,
                    seq: tcp.seq_number(),
                    len: p.payload_len,
                };
            }
        } else if self.links[from].params.wireless
            && tcp.ack()
            && !tcp.syn()
            && !tcp.fin()
            && !tcp.rst()
        {
            let flow = usize::from(tcp.src_port().wrapping_sub(TCP_RECEIVER_PORT));
            if is_tcp_flow(flow) {
                return Role::Ack {
                    flow,
                    ack: tcp.ack_number(),
                };
            }
        }
        Role::Other
    }

    /// A packet reaches a base station: it waits for the processor.
    fn station_arrive(&mut self, now: Instant, s: usize, pkt: PacketId, from: usize) {
        let role = self.classify(self.stations[s].spec.node, pkt, from);
        let st = &mut self.stations[s];
        st.count(role);
        // A connection Snoop was just turned off for keeps its agent for ACKs until
        // the cache drains, so the duplicates of a repair under way stay hidden.
        let snooped = match role {
            Role::Data { flow, .. } => st.snoops(flow),
            Role::Ack { flow, .. } => st.snoops(flow) || self.agents[flow].is_some(),
            Role::Other => false,
        };
        if st.queue.len() >= st.spec.queue_pkts {
            st.drops += 1;
            self.pool.free(pkt);
            return;
        }
        let mut cost = st.spec.forward_cost.as_nanos() as u64;
        if snooped {
            cost += st.spec.snoop_cost.as_nanos() as u64;
        }
        st.queue.push_back(Job {
            pkt,
            role,
            snooped,
            cost_ns: cost,
        });
        st.max_queue = st.max_queue.max(st.queue.len());
        if !st.busy {
            self.station_start(now, s);
        }
    }

    fn station_start(&mut self, now: Instant, s: usize) {
        let st = &mut self.stations[s];
        let Some(job) = st.queue.front() else {
            st.busy = false;
            return;
        };
        let work = job.cost_ns + std::mem::take(&mut st.debt_ns);
        st.busy = true;
        st.busy_ns += work;
        self.sched
            .schedule(now.add_nanos(work), Event::StationDone(s as u16));
    }

    fn on_station_done(&mut self, now: Instant, s: usize) {
        let Some(job) = self.stations[s].queue.pop_front() else {
            return;
        };
        self.stations[s].processed += 1;
        self.station_process(now, s, job);
        self.station_start(now, s);
    }

    /// The processor is done with a packet: Snoop acts on it, then it goes on (or
    /// not).
    fn station_process(&mut self, now: Instant, s: usize, job: Job) {
        let node = self.stations[s].spec.node;
        if !job.snooped {
            self.deliver(now, node, job.pkt);
            return;
        }
        let pkt = *self.pool.get(job.pkt);
        // (forward the packet, a packet of the station's own to send)
        let (flow, forward, extra) = match job.role {
            Role::Other => unreachable!("only TCP data and ACKs are snooped"),
            Role::Data { flow, seq, len } => {
                let no_room = addr_node(pkt.dst_bits(), self.nodes.len())
                    .and_then(|d| self.route(node, d))
                    .is_some_and(|l| self.links[l as usize].nearly_full(now, pkt.wire_len()));
                let agent = self.agent(s, flow);
                match agent.on_data(now, seq, len, &pkt, no_room) {
                    DataAction::Forward => (flow, true, None),
                    DataAction::DropAndReAck => (flow, false, agent.last_ack_packet().copied()),
                }
            }
            Role::Ack { flow, ack } => match self.agent(s, flow).on_ack(now, ack, &pkt) {
                AckAction::Forward => (flow, true, None),
                AckAction::Suppress => (flow, false, None),
                AckAction::Retransmit(p) => (flow, false, Some(*p)),
            },
        };
        if forward {
            self.deliver(now, node, job.pkt);
        } else {
            self.pool.free(job.pkt);
        }
        if let Some(p) = extra {
            self.station_send(now, s, p);
        }
        if !self.stations[s].snoops(flow)
            && self.agents[flow].as_ref().is_some_and(|a| a.cached() == 0)
        {
            if let Some(a) = self.agents[flow].take() {
                self.retired[flow].merge(a.stats());
            }
        }
        self.rearm_agent(flow);
    }

    /// The agent of `flow` at station `s`, created on first use.
    fn agent(&mut self, s: usize, flow: usize) -> &mut SnoopAgent {
        let mut rules = self.stations[s].spec.rules;
        rules.f = self.stations[s].f[flow];
        self.agent_station[flow] = s;
        self.agents[flow].get_or_insert_with(|| SnoopAgent::new(rules))
    }

    /// The station sends a packet of its own making (a local retransmission or a
    /// regenerated ACK): it costs Snoop's work on the processor.
    fn station_send(&mut self, now: Instant, s: usize, p: crate::packet::Packet) {
        let st = &mut self.stations[s];
        st.debt_ns += st.spec.snoop_cost.as_nanos() as u64;
        let node = st.spec.node;
        let id = self.pool.alloc(now);
        *self.pool.get_mut(id) = crate::packet::Packet { sent_at: now, ..p };
        self.deliver(now, node, id);
    }

    fn rearm_agent(&mut self, flow: usize) {
        let deadline = self.agents[flow].as_ref().and_then(SnoopAgent::timer);
        rearm(
            &mut self.sched,
            &mut self.agent_timer_at[flow],
            deadline,
            Event::SnoopTimer(flow as u32),
        );
    }

    fn on_snoop_timer(&mut self, now: Instant, flow: usize) {
        if self.agent_timer_at[flow] != Some(now) {
            return;
        }
        self.agent_timer_at[flow] = None;
        let s = self.agent_station[flow];
        let Some(agent) = self.agents[flow].as_mut() else {
            return;
        };
        if let Some(p) = agent.on_timer(now) {
            self.station_send(now, s, p);
        }
        self.rearm_agent(flow);
    }

    /// Adaptive Snoop: decide who gets Snoop for the next interval.
    fn on_station_adapt(&mut self, now: Instant, s: usize) {
        let node = self.stations[s].spec.node;
        let st = &mut self.stations[s];
        let SnoopMode::Adaptive(cfg) = st.spec.mode else {
            return;
        };
        let mut windows = vec![];
        for (flow, w) in st.windows.iter_mut().enumerate() {
            if w.data == 0 && w.acks == 0 {
                continue;
            }
            // The wireless hop towards this flow's receiver: its frame losses.
            let link = match &self.flows[flow] {
                // (`route` would borrow all of `self`, and `st` holds the stations.)
                Flow::Tcp(t) => self.next_hop[node * self.nodes.len() + t.spec.to],
                _ => None,
            };
            // The benefit history: this interval's acknowledged rate, booked to the
            // mode the connection had; every 15 intervals the other mode is
            // forgotten, to be tried again.
            let rate = w.acked_bytes as f64 / cfg.interval.as_secs_f64();
            let slot = if st.snoop_on[flow] {
                &mut w.rate_on
            } else {
                &mut w.rate_off
            };
            *slot = Some(slot.map_or(rate, |r| 0.5 * rate + 0.5 * r));
            w.age += 1;
            if w.age >= 15 {
                w.age = 0;
                if st.snoop_on[flow] {
                    w.rate_off = None;
                } else {
                    w.rate_on = None;
                }
            }
            if let Some(l) = link {
                let ls = &self.links[l as usize].stats;
                let (lost, carried) = (ls.drops_loss, ls.enqueued_pkts);
                let (dl, dc) = (lost - w.link_seen.0, carried - w.link_seen.1);
                w.link_seen = (lost, carried);
                if dl + dc > 0 {
                    let e = dl as f64 / (dl + dc) as f64;
                    w.error = cfg.smoothing * e + (1.0 - cfg.smoothing) * w.error;
                }
            }
            windows.push((flow, *w));
        }
        let (choice, load_all, load_chosen) = decide(
            &cfg,
            st.spec.forward_cost,
            st.spec.snoop_cost,
            st.other_pkts,
            &windows,
        );
        for &(flow, on, f) in &choice {
            // Off: the agent caches nothing more and goes once its cache has drained
            // (see `station_process`).
            if st.snoop_on[flow]
                && !on
                && self.agents[flow].as_ref().is_some_and(|a| a.cached() == 0)
            {
                if let Some(a) = self.agents[flow].take() {
                    self.retired[flow].merge(a.stats());
                }
            }
            st.snoop_on[flow] = on;
            st.f[flow] = f;
            if let Some(a) = self.agents[flow].as_mut() {
                a.set_f(f);
            }
            self.decisions.push(Decision {
                time_s: now.as_secs_f64(),
                station: s,
                flow,
                snoop: on,
                f,
                error: st.windows[flow].error,
                load_all,
                load_chosen,
            });
        }
        for w in &mut st.windows {
            w.data = 0;
            w.acks = 0;
            w.acked_bytes = 0;
        }
        st.other_pkts = 0;
        self.sched
            .schedule(now + cfg.interval, Event::StationAdapt(s as u16));
    }

    /// A node's ingress rules: the first that matches meters, marks or drops the
    /// packet. Returns false if it is dropped.
    fn police(&mut self, now: Instant, node: usize, pkt: PacketId) -> bool {
        let p = self.pool.get_mut(pkt);
        let bytes = p.wire_len();
        match self.ingress[node]
            .iter_mut()
            .find(|r| r.spec.matches.matches(&p.hdr))
        {
            Some(rule) => rule.apply(now, &mut p.hdr, bytes),
            None => true,
        }
    }

    /// A scheduled link's transmitter is free: the next waiting packet goes.
    fn on_tx_done(&mut self, now: Instant, l: u32) {
        if let Some((arrival, done)) = self.links[l as usize].start_next(now) {
            self.transmitting(l, arrival, done);
        }
    }

    /// A scheduled link started sending a packet: its arrival at the far end (if the
    /// link had nothing in flight) and the end of its transmission are events.
    fn transmitting(&mut self, l: u32, arrival: Option<Instant>, done: Instant) {
        if let Some(t) = arrival {
            self.sched.schedule(t, Event::LinkArrival(l));
        }
        self.sched.schedule(done, Event::LinkTxDone(l));
    }

    /// The link `node` sends packets for `dst` on, if any.
    #[inline]
    fn route(&self, node: usize, dst: usize) -> Option<u32> {
        self.next_hop[node * self.nodes.len() + dst]
    }

    /// A packet reaches `node`: consume it there or forward it.
    fn deliver(&mut self, now: Instant, node: usize, pkt: PacketId) {
        let dst = addr_node(self.pool.get(pkt).dst_bits(), self.nodes.len());
        match dst {
            Some(d) if d == node => self.consume(now, node, pkt),
            Some(d) => self.forward(now, node, d, pkt),
            None => {
                self.unroutable += 1;
                self.pool.free(pkt);
            }
        }
    }

    fn forward(&mut self, now: Instant, node: usize, dst: usize, pkt: PacketId) {
        let Some(l) = self.route(node, dst) else {
            self.unroutable += 1;
            self.pool.free(pkt);
            return;
        };
        let p = self.pool.get(pkt);
        let size = p.wire_len();
        if self.links[l as usize].is_scheduled() {
            let dscp = p.dscp();
            match self.links[l as usize].enqueue_scheduled(now, pkt, size, dscp) {
                Scheduled::Started { arrival, done } => self.transmitting(l, arrival, done),
                Scheduled::Queued => {}
                Scheduled::Lost | Scheduled::Overflow | Scheduled::Policed => self.pool.free(pkt),
            }
            return;
        }
        if self.links[l as usize].is_cut_through() {
            if self.into_early[l as usize] {
                self.through_to_host(now, l as usize, pkt, size);
            } else {
                self.cut_through(now, l as usize, dst, pkt, size);
            }
            return;
        }
        self.offer(now, l, pkt, size);
    }

    /// Offers `pkt` to FIFO link `l` at `at`: the link's arrival event if it was idle,
    /// or the packet's end if it is dropped.
    #[inline(always)]
    fn offer(&mut self, at: Instant, l: u32, pkt: PacketId, size: u32) {
        match self.links[l as usize].enqueue(at, pkt, size) {
            Enqueued::Accepted(Some(t)) => self.sched.schedule(t, Event::LinkArrival(l)),
            Enqueued::Accepted(None) => {}
            Enqueued::Lost | Enqueued::Overflow => self.pool.free(pkt),
        }
    }

    /// Offers `pkt` to cut-through link `l` at `now`; returns when it reaches the far
    /// end, captured there, or `None` (its slot freed) if the link drops it or it
    /// would arrive after the run ends.
    #[inline(always)]
    fn cross(&mut self, now: Instant, l: usize, pkt: PacketId, size: u32) -> Option<Instant> {
        let Ok(at) = self.links[l].enqueue_through(now, self.sched.now(), pkt, size) else {
            self.pool.free(pkt);
            return None;
        };
        if at > self.end {
            // Still on the wire when the run ends: the far end never sees it. (A run
            // that stops when its transfers finish learns its end only then, so the
            // next link's counters may include the few packets that would have
            // reached it within this link's delay after the stop.)
            self.pool.free(pkt);
            return None;
        }
        self.capture(l, at, pkt);
        Some(at)
    }

    /// Sends `pkt` over cut-through link `l` and, at the moment it will arrive, on
    /// from the router at its far end: what `on_link_arrival`, `deliver` and
    /// `forward` would do there, without the event.
    fn cut_through(&mut self, now: Instant, l: usize, dst: usize, pkt: PacketId, size: u32) {
        let Some(at) = self.cross(now, l, pkt, size) else {
            return;
        };
        // Every packet that can cross `l` is between two of the ends the route walk
        // in `cut_through_links` followed, so `onward` is the route for each.
        let out = self.onward[l].or_else(|| self.route(self.links[l].to, dst));
        debug_assert_eq!(out, self.route(self.links[l].to, dst));
        let Some(out) = out else {
            // For the router itself (which listens on nothing) or unreachable.
            self.unroutable += 1;
            self.pool.free(pkt);
            return;
        };
        if self.into_early[out as usize] {
            self.through_to_host(at, out as usize, pkt, size);
        } else {
            self.offer(at, out, pkt, size);
        }
    }

    /// Sends `pkt` over link `l` into an early host (see
    /// [`cut_through_links`](Self::cut_through_links)), which takes it at once, at
    /// the time it will arrive.
    #[inline(always)]
    fn through_to_host(&mut self, now: Instant, l: usize, pkt: PacketId, size: u32) {
        let Some(at) = self.cross(now, l, pkt, size) else {
            return;
        };
        // Taken once the current event is done: a host's packets reach it in the
        // order they are offered here, and nothing between now and then reads it.
        // (Taking it here would make the forwarding path recursive, through the
        // host's answer, and the compiler would no longer inline it.)
        self.early_pending.push((at, self.links[l].to as u32, pkt));
    }

    /// Early hosts take the packets sent to them during the last event.
    #[inline(always)]
    fn take_early_arrivals(&mut self) {
        let mut i = 0;
        while let Some(&(at, node, pkt)) = self.early_pending.get(i) {
            i += 1;
            let node = node as usize;
            if at >= self.host_wake[node] {
                self.catch_up(node, at);
            }
            self.consume(at, node, pkt);
        }
        self.early_pending.clear();
    }

    /// Brings early host `node` up to just before a packet arriving at `at`: its
    /// timers due by then fire, and the observations it is about to run past are
    /// recorded, all in time order. A timer due at `at` itself fires before the
    /// packet (with an event per arrival, whichever was scheduled first would go
    /// first; this is a choice as good as that one); an observation at `at` itself
    /// needs no record, since observers go last at their instant.
    #[cold]
    fn catch_up(&mut self, node: usize, at: Instant) {
        loop {
            // The host's earliest receiver timer (the first flow's, on a tie).
            let timer = self.nodes[node]
                .endpoints
                .iter()
                .filter_map(|e| match &self.flows[e.flow as usize] {
                    Flow::Tcp(t) => t.timer_at[1].map(|d| (d, e.flow as usize)),
                    _ => None,
                })
                .min_by_key(|&(d, _)| d);
            let obs = self.host_next_obs[node];
            match timer {
                Some((d, f)) if d <= at && d <= obs => self.fire_early_timer(d, f),
                _ if obs < at => self.record_observation(node, obs),
                _ => {
                    // Nothing due by `at`: the host next needs a look at its next
                    // observation or its earliest timer.
                    self.host_wake[node] = timer.map_or(obs, |(d, _)| d.min(obs));
                    return;
                }
            }
        }
    }

    /// Fires the receiver timer of flow `f`, due at `d`, ahead of the clock (the
    /// event already scheduled for it will find it no longer armed for `d`).
    #[cold]
    fn fire_early_timer(&mut self, d: Instant, f: usize) {
        if let Flow::Tcp(t) = &mut self.flows[f] {
            t.timer_at[1] = None;
            t.ends[1].handle_timeout(d);
        }
        self.drive_tcp(d, f, 1);
    }

    /// Records what observation `obs` will read of early host `node`'s receivers,
    /// and moves the host on to the next observation.
    #[cold]
    fn record_observation(&mut self, node: usize, obs: Instant) {
        for e in &self.nodes[node].endpoints {
            let f = e.flow as usize;
            self.snaps[f].push_back((obs, self.flows[f].delivered_bytes()));
        }
        self.host_next_obs[node] = self.next_observation_after(obs);
    }

    /// The first sample or trace after `t` (they fall on multiples of their
    /// intervals).
    fn next_observation_after(&self, t: Instant) -> Instant {
        let after = |every: Duration| {
            let every = (every.as_nanos() as u64).max(1);
            Instant::from_nanos((t.as_nanos() / every + 1).saturating_mul(every))
        };
        let s = after(self.cfg.sample_interval);
        self.cfg.trace_interval.map_or(s, |ti| s.min(after(ti)))
    }

    /// Flow `f`'s delivered bytes as an observation at `now` sees them: recorded, if
    /// its receiver is an early host that has run past `now`.
    fn delivered_as_of(&mut self, f: usize, now: Instant) -> u64 {
        let q = &mut self.snaps[f];
        while q.front().is_some_and(|&(t, _)| t < now) {
            q.pop_front();
        }
        match q.front() {
            Some(&(t, d)) if t == now => d,
            _ => self.flows[f].delivered_bytes(),
        }
    }

    #[inline(always)]
    fn consume(&mut self, now: Instant, node: usize, pkt: PacketId) {
        let p = self.pool.get(pkt);
        let hdr = p.header();
        let ihl = usize::from(hdr[0] & 0x0f) * 4;
        let protocol = hdr[9];
        let port = hdr
            .get(ihl + 2..ihl + 4)
            .map(|b| u16::from_be_bytes([b[0], b[1]]));
        let ep = port.and_then(|port| {
            self.nodes[node]
                .endpoints
                .iter()
                .find(|e| e.protocol == protocol && e.port == port)
                .copied()
        });
        let Some(ep) = ep else {
            self.unroutable += 1;
            self.pool.free(pkt);
            return;
        };
        if ep.flow & CONTROL_FLAG != 0 {
            let t = (ep.flow & !CONTROL_FLAG) as usize;
            self.on_control(now, t, ep.side, pkt);
            return;
        }
        let f = ep.flow as usize;
        match &mut self.flows[f] {
            Flow::Tcp(t) => {
                if ep.side == 1 && p.payload_len > 0 {
                    let first = t.data_arrivals.map_or(now, |(first, _)| first);
                    t.data_arrivals = Some((first, now));
                }
                t.ends[usize::from(ep.side)].handle_datagram(now, p.header());
                self.pool.free(pkt);
                self.drive_tcp(now, f, usize::from(ep.side));
            }
            Flow::Udt(u) if self.content_flow[f] => {
                u.ends[usize::from(ep.side)].handle_datagram(now, &self.pool.whole(pkt)[IP_UDP..]);
                self.pool.free(pkt);
                self.drive_udt(now, f, usize::from(ep.side));
            }
            Flow::Udt(u) => {
                let hdr = p.header();
                let wire_len = usize::from(u16::from_be_bytes([hdr[2], hdr[3]])) - IP_UDP;
                u.ends[usize::from(ep.side)].handle_datagram_elided(now, &hdr[IP_UDP..], wire_len);
                self.pool.free(pkt);
                self.drive_udt(now, f, usize::from(ep.side));
            }
            Flow::Sctp(s) => {
                s.ends[usize::from(ep.side)].handle_datagram(now, self.pool.whole(pkt));
                self.pool.free(pkt);
                self.drive_sctp(now, f, usize::from(ep.side));
            }
            Flow::Udp(u) => {
                let d = now.saturating_duration_since(p.sent_at).as_nanos() as u64;
                u.recv_pkts += 1;
                u.recv_bytes += u64::from(p.payload_len);
                u.delay_sum_ns += u128::from(d);
                u.delay_max_ns = u.delay_max_ns.max(d);
                if let Some(prev) = u.last_delay_ns {
                    // RFC 3550 §6.4.1: J += (|D(i-1,i)| - J) / 16
                    u.jitter_ns += ((d as f64 - prev as f64).abs() - u.jitter_ns) / 16.0;
                }
                u.last_delay_ns = Some(d);
                self.pool.free(pkt);
            }
        }
    }

    /// Drains a TCP end: transmissions, events, then its timer.
    fn drive_tcp(&mut self, now: Instant, f: usize, side: usize) {
        // Only a transfer's flows are channels; most runs have no transfer.
        let channel = if self.transfers.is_empty() {
            None
        } else {
            self.channel_of[f]
        };
        if let (Some((t, c)), 0) = (channel, side) {
            self.feed_channel(now, t as usize, usize::from(c));
        }
        let Flow::Tcp(t) = &self.flows[f] else {
            return;
        };
        let node = if side == 0 { t.spec.from } else { t.spec.to };
        let dst = if side == 0 { t.spec.to } else { t.spec.from };
        loop {
            let Flow::Tcp(t) = &mut self.flows[f] else {
                unreachable!()
            };
            let slot = self.pool.peek_free();
            let Some(tx) = t.ends[side].poll_transmit(now, &mut slot.hdr) else {
                break;
            };
            slot.stamp(now, tx.header_len as u8, tx.payload_len as u32);
            let id = self.pool.take_peeked();
            self.forward(now, node, dst, id);
            if !tx.more {
                break; // the engine's word that a poll now would find nothing
            }
        }
        let Flow::Tcp(t) = &mut self.flows[f] else {
            unreachable!()
        };
        while let Some(ev) = t.ends[side].poll_event() {
            if let TcpEvent::PeerFinished { .. } = ev {
                t.completed_at.get_or_insert(now);
            }
        }
        let deadline = t.ends[side].poll_timeout();
        rearm(
            &mut self.sched,
            &mut t.timer_at[side],
            deadline,
            Event::Timer(f as u32, side as u8),
        );
        if let (Some(d), 1) = (t.timer_at[1], side) {
            // (Read only for early hosts: see `catch_up`.)
            let wake = &mut self.host_wake[t.spec.to];
            *wake = (*wake).min(d);
        }
        if let (Some((t, c)), 1) = (channel, side) {
            self.channel_progress(now, t as usize, usize::from(c));
        }
    }

    fn on_timer(&mut self, now: Instant, f: usize, side: usize) {
        match &mut self.flows[f] {
            Flow::Tcp(t) => {
                if t.timer_at[side] != Some(now) {
                    return; // superseded by an earlier event that already re-armed
                }
                t.timer_at[side] = None;
                t.ends[side].handle_timeout(now);
                self.drive_tcp(now, f, side);
            }
            Flow::Udt(u) => {
                if u.timer_at[side] != Some(now) {
                    return;
                }
                u.timer_at[side] = None;
                u.ends[side].handle_timeout(now);
                self.drive_udt(now, f, side);
            }
            Flow::Sctp(s) => {
                if s.timer_at[side] != Some(now) {
                    return;
                }
                s.timer_at[side] = None;
                s.ends[side].handle_timeout(now);
                self.drive_sctp(now, f, side);
            }
            Flow::Udp(_) => {}
        }
    }

    fn on_flow_start(&mut self, now: Instant, f: usize) {
        match &mut self.flows[f] {
            Flow::Tcp(t) => {
                let [sender, receiver] = &mut t.ends;
                receiver.listen().expect("fresh connection");
                sender.connect(now).expect("fresh connection");
                // A transfer's channel gets its data from the transfer.
                let channel = self.channel_of[f].is_some();
                match (t.spec.files, t.spec.size) {
                    _ if channel => {}
                    (Some(files), _) => {
                        // The first write on its own: Linux's Nagle treats it apart.
                        let first = files.write(0).1;
                        sender.send(first).expect("open");
                        sender.send(files.total() - first).expect("open");
                        sender.close().expect("open");
                    }
                    (None, Some(n)) => {
                        sender.send(n).expect("open");
                        sender.close().expect("open");
                    }
                    (None, None) => sender.send(u64::MAX).expect("open"),
                }
                self.drive_tcp(now, f, 0);
            }
            Flow::Udp(_) => self.on_udp_send(now, f),
            Flow::Udt(u) => {
                u.ends[1].listen();
                u.ends[0].connect(now);
                self.drive_udt(now, f, 0);
            }
            Flow::Sctp(s) => {
                s.ends[1].listen().expect("fresh association");
                s.ends[0].connect(now).expect("fresh association");
                self.drive_sctp(now, f, 0);
            }
        }
    }

    /// Drains an SCTP end: keeps a bulk sender's queue full, sends, reads, re-arms.
    fn drive_sctp(&mut self, now: Instant, f: usize, side: usize) {
        let Flow::Sctp(s) = &mut self.flows[f] else {
            return;
        };
        let node = if side == 0 { s.spec.from } else { s.spec.to };
        let dst = if side == 0 { s.spec.to } else { s.spec.from };
        // The application writes as long as the sender's queue has room, as a
        // blocking `sctp_sendmsg` loop would.
        if side == 0 {
            let sender = &mut s.ends[0];
            match s.spec.files {
                Some(files) => {
                    let n = files.write_count();
                    while s.next_write < n && sender.queued_bytes() < SCTP_BACKLOG {
                        let (file, len) = files.write(s.next_write);
                        // Streams were checked against the file count by the loader.
                        let stream = file as u16;
                        if sender
                            .send(stream, 0, false, &self.zeros[..len as usize])
                            .is_err()
                        {
                            break;
                        }
                        s.next_write += 1;
                        if s.next_write == n {
                            let _ = sender.shutdown();
                        }
                    }
                }
                None => {
                    let m = s.spec.message as usize;
                    while sender.queued_bytes() < SCTP_BACKLOG
                        && sender.send(0, 0, false, &self.zeros[..m]).is_ok()
                    {}
                }
            }
        }
        // Send, then let the application read; reading may open the window enough
        // for a window update, so send again until nothing more is read.
        loop {
            loop {
                let Flow::Sctp(s) = &mut self.flows[f] else {
                    unreachable!()
                };
                let Some(n) = s.ends[side].poll_transmit(now, &mut self.datagram) else {
                    break;
                };
                let id = self.pool.alloc(now);
                self.pool.set_whole(id, &self.datagram[..n]);
                self.forward(now, node, dst, id);
            }
            let Flow::Sctp(s) = &mut self.flows[f] else {
                unreachable!()
            };
            let mut read = false;
            while let Some(ev) = s.ends[side].poll_event() {
                if ev == SctpEvent::Readable {
                    while let Some(m) = s.ends[side].recv() {
                        s.delivered += m.data.len() as u64;
                        read = true;
                    }
                    if s.spec.files.is_some_and(|fl| s.delivered >= fl.total()) {
                        s.completed_at.get_or_insert(now);
                    }
                }
            }
            if !read {
                break;
            }
        }
        let Flow::Sctp(s) = &mut self.flows[f] else {
            unreachable!()
        };
        let deadline = s.ends[side].poll_timeout();
        rearm(
            &mut self.sched,
            &mut s.timer_at[side],
            deadline,
            Event::Timer(f as u32, side as u8),
        );
    }

    /// Drains a UDT end: feeds the sender, transmissions, events, then its timer.
    fn drive_udt(&mut self, now: Instant, f: usize, side: usize) {
        let channel = self.channel_of[f];
        if let (Some((t, c)), 0) = (channel, side) {
            self.feed_channel(now, t as usize, usize::from(c));
        }
        let Flow::Udt(u) = &mut self.flows[f] else {
            return;
        };
        let node = if side == 0 { u.spec.from } else { u.spec.to };
        let dst = if side == 0 { u.spec.to } else { u.spec.from };
        let (src_port, dst_port) = if side == 0 {
            (UDT_SENDER_PORT + f as u16, UDT_RECEIVER_PORT + f as u16)
        } else {
            (UDT_RECEIVER_PORT + f as u16, UDT_SENDER_PORT + f as u16)
        };
        loop {
            let Flow::Udt(u) = &mut self.flows[f] else {
                unreachable!()
            };
            if side == 0
                && u.unsent > 0
                && u.ends[0].state() == longhaul_proto::udt::State::Connected
            {
                // Keep the send buffer full, as a bulk application would.
                let space = u.ends[0].send_space_pkts() as u64 * u.ends[0].payload_size() as u64;
                if space > 0 {
                    let n = u.ends[0].send_virtual(u.unsent.min(space)).unwrap_or(0);
                    if u.unsent != u64::MAX {
                        u.unsent -= n;
                        if u.unsent == 0 {
                            u.ends[0].close();
                        }
                    }
                }
            }
            let id = self.pool.alloc(now);
            let Flow::Udt(u) = &mut self.flows[f] else {
                unreachable!()
            };
            let content = self.content_flow[f];
            let p = self.pool.get_mut(id);
            // Packets with content are built whole in scratch space.
            let buf = if content {
                &mut self.datagram[..]
            } else {
                &mut p.hdr[..]
            };
            let Some(tx) = u.ends[side].poll_transmit(now, &mut buf[IP_UDP..]) else {
                self.pool.free(id);
                break;
            };
            let ip = Ipv4Repr {
                src_addr: node_addr(node),
                dst_addr: node_addr(dst),
                protocol: IpProtocol::Udp,
                payload_len: udp::HEADER_LEN + tx.wire_len,
                ttl: 64,
                dscp: 0,
            };
            ip.emit(buf, Checksum::None);
            UdpRepr {
                src_port,
                dst_port,
                payload_len: tx.wire_len,
            }
            .emit(
                &mut buf[20..IP_UDP],
                ip.src_addr,
                ip.dst_addr,
                Checksum::None,
            );
            if content {
                debug_assert_eq!(tx.written, tx.wire_len, "content channels carry bytes");
                self.pool
                    .set_whole(id, &self.datagram[..IP_UDP + tx.written]);
            } else {
                p.hdr_len = (IP_UDP + tx.written) as u8;
                p.payload_len = (tx.wire_len - tx.written) as u32;
            }
            self.forward(now, node, dst, id);
        }
        let Flow::Udt(u) = &mut self.flows[f] else {
            unreachable!()
        };
        while let Some(ev) = u.ends[side].poll_event() {
            if matches!(ev, UdtEvent::Readable) && side == 1 {
                if let Some(size) = u.spec.size {
                    if u.ends[1].delivered_bytes() >= size {
                        u.completed_at.get_or_insert(now);
                    }
                }
            }
        }
        let deadline = u.ends[side].poll_timeout();
        rearm(
            &mut self.sched,
            &mut u.timer_at[side],
            deadline,
            Event::Timer(f as u32, side as u8),
        );
        if let (Some((t, c)), 1) = (channel, side) {
            self.channel_progress(now, t as usize, usize::from(c));
        }
    }

    fn on_udp_send(&mut self, now: Instant, f: usize) {
        let Flow::Udp(u) = &mut self.flows[f] else {
            return;
        };
        if u.spec.stop.is_some_and(|s| now >= s) {
            return;
        }
        let (from, to) = (u.spec.from, u.spec.to);
        let payload_len = u.spec.packet_size as usize - 20 - udp::HEADER_LEN;
        let id = self.pool.alloc(now);
        let p = self.pool.get_mut(id);
        let ip = Ipv4Repr {
            src_addr: node_addr(from),
            dst_addr: node_addr(to),
            protocol: IpProtocol::Udp,
            payload_len: udp::HEADER_LEN + payload_len,
            ttl: 64,
            dscp: u.spec.dscp,
        };
        ip.emit(&mut p.hdr, Checksum::None);
        let port = UDP_PORT + f as u16;
        UdpRepr {
            src_port: port,
            dst_port: port,
            payload_len,
        }
        .emit(&mut p.hdr[20..28], ip.src_addr, ip.dst_addr, Checksum::None);
        p.hdr_len = 28;
        p.payload_len = payload_len as u32;
        u.sent_pkts += 1;
        let gap = match u.spec.arrivals {
            Arrivals::Cbr => u.mean_gap,
            Arrivals::Poisson => {
                let x: f64 = u.rng.gen::<f64>();
                u.mean_gap.mul_f64(-(1.0 - x).ln())
            }
        };
        self.sched.schedule(now + gap, Event::UdpSend(f as u32));
        self.forward(now, from, to, id);
    }

    fn on_sample(&mut self, now: Instant) {
        let secs = self.cfg.sample_interval.as_secs_f64();
        self.sample_times.push(now.as_secs_f64());
        for i in 0..self.flows.len() {
            let d = self.delivered_as_of(i, now);
            self.goodput_series[i].push((d - self.last_delivered[i]) as f64 * 8e-6 / secs);
            self.last_delivered[i] = d;
        }
        for (i, l) in self.links.iter_mut().enumerate() {
            l.settle(now);
            let b = l.stats.delivered_bytes;
            self.link_tput_series[i].push((b - self.last_link_bytes[i]) as f64 * 8e-6 / secs);
            self.last_link_bytes[i] = b;
            self.queue_series[i].push(l.queue_pkts(now));
        }
        for (s, st) in self.stations.iter_mut().enumerate() {
            let cached: usize = self
                .agents
                .iter()
                .zip(&self.agent_station)
                .filter(|(a, &at)| a.is_some() && at == s)
                .map(|(a, _)| a.as_ref().map_or(0, SnoopAgent::cached))
                .sum();
            st.cache_sum += cached as u64;
            st.cache_samples += 1;
        }
        self.sched
            .schedule_last(now + self.cfg.sample_interval, Event::Sample);
    }

    fn on_trace(&mut self, now: Instant) {
        for i in 0..self.flows.len() {
            let delivered = self.delivered_as_of(i, now);
            let f = &self.flows[i];
            if let Flow::Udt(u) = f {
                let c = &u.ends[0];
                self.trace.push(TraceRow {
                    time_s: now.as_secs_f64(),
                    flow: i,
                    cwnd_bytes: (c.cwnd_pkts() * c.payload_size() as f64) as u64,
                    ssthresh_bytes: u64::MAX,
                    srtt_ms: c.rtt_us() / 1e3,
                    in_flight_bytes: (c.unacked_pkts() * c.payload_size()) as u64,
                    delivered_bytes: u.ends[1].delivered_bytes(),
                    send_period_us: c.pkt_snd_period_us(),
                    recv_rate_pps: c.peer_rates_pps().0,
                    bandwidth_pps: c.peer_rates_pps().1,
                });
            }
            if let Flow::Sctp(s) = f {
                let c = &s.ends[0];
                self.trace.push(TraceRow::window_based(
                    now.as_secs_f64(),
                    i,
                    c.cwnd(),
                    c.ssthresh(),
                    c.rtt().srtt(),
                    c.flight_size(),
                    s.delivered,
                ));
            }
            if let Flow::Tcp(t) = f {
                let c = &t.ends[0];
                self.trace.push(TraceRow::window_based(
                    now.as_secs_f64(),
                    i,
                    c.cwnd(),
                    c.ssthresh(),
                    c.rtt().srtt(),
                    c.in_flight(),
                    delivered,
                ));
            }
        }
        if let Some(ti) = self.cfg.trace_interval {
            self.sched.schedule_last(now + ti, Event::Trace);
        }
    }

    fn finish(mut self, end: Instant) -> Result<RunResult, RunError> {
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

/// About how many packets the links can hold at once, to size the packet pool: each
/// direction's bandwidth-delay product and queue in 1500-byte packets (a window's
/// worth of data one way and its ACKs the other), at most 2^18 (32 MiB of slots).
fn packets_in_flight(links: &[Link]) -> usize {
    const MTU: u128 = 1500;
    let n: u128 = links
        .iter()
        .map(|l| {
            let p = &l.params;
            let bdp = u128::from(p.rate.as_bps()) * p.delay.as_nanos() / 8_000_000_000 / MTU;
            let queue = match p.limit {
                QueueLimit::Packets(n) => u128::from(n),
                QueueLimit::Bytes(b) => u128::from(b) / MTU,
            };
            bdp + queue
        })
        .sum();
    n.min(1 << 18) as usize
}

/// Lazy timers: an endpoint has at most one live timer event. An earlier event is
/// kept (it fires early, which engines treat as a no-op, and the endpoint re-arms);
/// a new one is pushed only when the deadline moved earlier, so a deadline that keeps
/// moving later (an RTO restarted by every ACK) costs nothing per packet.
fn rearm(sched: &mut Scheduler, live: &mut Option<Instant>, deadline: Option<Instant>, ev: Event) {
    match (*live, deadline) {
        (_, None) => {}
        (Some(at), Some(d)) if at <= d => {}
        (_, Some(d)) => {
            *live = Some(d);
            sched.schedule(d, ev);
        }
    }
}

fn flow_summary(i: usize, f: &Flow, topo: &Topology, end: Instant) -> FlowSummary {
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
            s.protocol = "tcp".into();
            s.from = topo.nodes[t.spec.from].name.clone();
            s.to = topo.nodes[t.spec.to].name.clone();
            s.cc = Some(match t.spec.config.cc {
                longhaul_proto::cc::CcAlgorithm::NewReno(_) => "newreno".into(),
                longhaul_proto::cc::CcAlgorithm::Cubic(_) => "cubic".into(),
            });
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
            s.protocol = "sctp".into();
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
            s.protocol = "udp".into();
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
        Flow::Udt(u) => {
            let c = &u.ends[0];
            let st = c.stats();
            s.protocol = "udt".into();
            s.from = topo.nodes[u.spec.from].name.clone();
            s.to = topo.nodes[u.spec.to].name.clone();
            s.cc = Some(match u.spec.config.rate_control {
                longhaul_proto::udt::RateControl::Udt(_) => "udt".into(),
                longhaul_proto::udt::RateControl::ArUdt(..) => "ar-udt".into(),
            });
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The packet pool is sized from the links, so the reference run at 100 ms,
    /// through its slow-start overshoot (some 17 000 segments in flight and 16 801
    /// dropped), never grows it: growing copies every slot.
    #[test]
    fn the_pool_is_sized_for_the_reference_overshoot() {
        let mut s = crate::scenario::reference("50ms", 1e-5).unwrap();
        s.run.duration = Duration::from_secs(4);
        let sim = Simulation::new(s.run.clone(), s.topology.clone(), s.flows.clone()).unwrap();
        let room = sim.pool.room();
        let r = sim.run().unwrap();
        let peak = r.summary.peak_packets;
        assert!(peak > 10_000, "no overshoot: {peak} packets at most");
        assert!(peak <= room as u64, "{peak} packets alive, room for {room}");
    }
}
