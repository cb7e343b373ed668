//! Building a run: the network's runtime state, every flow's engines and ports,
//! stations, ingress rules, captures and the packet pool, from a checked scenario.
//! Nothing here runs; [`Simulation::run`] starts the clock.

use crate::app::{BlastFlow, Control, Flow, FlowSpec, SctpFlow, TcpFlow, UdpFlow, UdtFlow};
use crate::basestation::{SnoopMode, StationRt};
use crate::diffserv::policy::Rule;
use crate::link::{Link, QueueLimit};
use crate::packet::PacketPool;
use crate::pcap::PcapWriter;
use crate::scheduler::{Event, Scheduler};
use crate::snoop::SnoopStats;
use crate::topology::{node_addr, NodeKind, Topology};
use longhaul_proto::blast::BlastConnection;
use longhaul_proto::sctp::SctpAssociation;
use longhaul_proto::tcp::TcpConfig;
use longhaul_proto::tcp::TcpConnection;
use longhaul_proto::udt::{UdtConnConfig, UdtConnection};
use longhaul_proto::Instant;
use longhaul_wire::Checksum;

use super::{
    Endpoint, NodeRt, RunConfig, RunError, Simulation, TCP_RECEIVER_PORT, TCP_SENDER_PORT,
    UDP_PORT, UDT_RECEIVER_PORT, UDT_SENDER_PORT,
};

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
        let next_hop = topo.routes();
        let mut nodes: Vec<NodeRt> = topo
            .nodes
            .iter()
            .map(|n| NodeRt {
                kind: n.kind,
                endpoints: vec![],
                by_port: Default::default(),
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
            if next_hop.get(from, to).is_none() {
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
                    let [sender, receiver] =
                        tcp_pair(spec.config, &mut nodes, (from, to), port_off, cfg.seed);
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
                        nodes[node].add_endpoint(Endpoint {
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
                FlowSpec::Blast(spec) => {
                    let [a, b] = tcp_pair(spec.control, &mut nodes, (from, to), port_off, cfg.seed);
                    let (sp, rp) = (UDT_SENDER_PORT + port_off, UDT_RECEIVER_PORT + port_off);
                    for (node, port, side) in [(from, sp, 0), (to, rp, 1)] {
                        nodes[node].add_endpoint(Endpoint {
                            protocol: 17,
                            port,
                            flow: fi,
                            side,
                        });
                    }
                    rt_flows.push(Flow::Blast(Box::new(BlastFlow {
                        ends: [
                            BlastConnection::sender(spec.config),
                            BlastConnection::receiver(spec.config),
                        ],
                        spec,
                        timer_at: [None; 2],
                        control: [Control(a), Control(b)],
                        control_timer_at: [None; 2],
                        mail: Default::default(),
                        written: [0; 2],
                        connected: [false; 2],
                        nudge: [false; 2],
                        completed_at: None,
                    })));
                }
                FlowSpec::Udp(spec) => {
                    nodes[to].add_endpoint(Endpoint {
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
                    // The run's seed, not the one the scenario was loaded with, so
                    // `sim run --seed` re-seeds UDT's randomised decrease too.
                    let rate_control = spec.config.rate_control.seeded(cfg.seed);
                    let mk = |id: u32| UdtConnConfig {
                        socket_id: id,
                        isn,
                        rate_control,
                        ..spec.config
                    };
                    let sender = UdtConnection::new(mk(2 * fi + 1), Instant::ZERO);
                    let receiver = UdtConnection::new(mk(2 * fi + 2), Instant::ZERO);
                    nodes[from].add_endpoint(Endpoint {
                        protocol: 17,
                        port: sp,
                        flow: fi,
                        side: 0,
                    });
                    nodes[to].add_endpoint(Endpoint {
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
            host_timers: vec![None; nodes_len],
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
}

/// About how many packets the links can hold at once, to size the packet pool: each
/// direction's bandwidth-delay product and queue in 1500-byte packets (a window's
/// worth of data one way and its ACKs the other), at most 2^18 (32 MiB of slots).
pub(super) fn packets_in_flight(links: &[Link]) -> usize {
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

/// The two ends of flow `fi`'s TCP connection (`port_off` its index) from
/// `ends.0` to `ends.1`, registered at their hosts: a TCP flow, or a blast
/// transfer's control connection (the flow index tells the protocols' ports apart).
fn tcp_pair(
    mut c: TcpConfig,
    nodes: &mut [NodeRt],
    (from, to): (usize, usize),
    port_off: u16,
    seed: u64,
) -> [TcpConnection; 2] {
    c.checksum = Checksum::None;
    let fi = u32::from(port_off);
    let (sp, rp) = (TCP_SENDER_PORT + port_off, TCP_RECEIVER_PORT + port_off);
    // Initial sequence numbers from the seed: deterministic, but not all zero, so
    // wrap-around is exercised.
    let iss = (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32;
    let sender = TcpConnection::new(
        c,
        (node_addr(from), sp),
        (node_addr(to), rp),
        iss.wrapping_add(fi.wrapping_mul(7919)),
    );
    let receiver = TcpConnection::new(
        c,
        (node_addr(to), rp),
        (node_addr(from), sp),
        iss.wrapping_add(fi.wrapping_mul(104_729)),
    );
    for (node, port, side) in [(from, sp, 0), (to, rp, 1)] {
        nodes[node].add_endpoint(Endpoint {
            protocol: 6,
            port,
            flow: fi,
            side,
        });
    }
    [sender, receiver]
}
