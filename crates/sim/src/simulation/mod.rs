//! The simulation loop: nodes forward, links carry, endpoints run their engines.
//!
//! [`Simulation`] is one struct whose methods live by concern in child modules:
//!
//! | module | what |
//! |---|---|
//! | `build` | a run's state from a checked scenario |
//! | (here) | the event loop and its dispatch |
//! | `forward` | link arrivals, policing, routing, queues |
//! | `fast` | the speed machinery (cut-through links, early hosts) and its invariants |
//! | `early` | early hosts kept in step: their timers, and what observations read of them |
//! | `station` | base stations and Snoop |
//! | `drive` | endpoints: packets into engines, engines drained, flows started |
//! | `transfer` | file transfers over many channels, and their control channel |
//! | `observe` | samples and traces |
//! | `summary` | the results at the end |

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;

use longhaul_proto::{Duration, Instant};
use rustc_hash::FxHashMap;

use crate::app::Flow;
use crate::basestation::{Decision, StationRt};
use crate::diffserv::policy::Rule;
use crate::link::Link;
use crate::metrics::{RunResult, TraceRow};
use crate::packet::{PacketId, PacketPool};
use crate::pcap::PcapWriter;
use crate::scheduler::{Event, Scheduler};
use crate::snoop::{SnoopAgent, SnoopStats};
use crate::topology::{NodeKind, Topology};

mod build;
mod drive;
mod early;
mod engines;
mod fast;
mod forward;
mod observe;
mod station;
mod summary;
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

/// An early host's receiver timers as `(deadline, flow)`, earliest first.
type HostTimers = BinaryHeap<Reverse<(Instant, u32)>>;

/// Up to this many endpoints a host compares them in turn rather than hash: the
/// reference run's hosts hold one each, and the hash cost it 46 instructions per
/// segment (2 %; cachegrind).
const SCAN_ENDPOINTS: usize = 4;

#[derive(Debug)]
struct NodeRt {
    kind: NodeKind,
    endpoints: Vec<Endpoint>,
    /// `endpoints` by `(protocol << 16) | port`, the first endpoint of a key only: a
    /// packet's endpoint is one hash probe away, however many flows the host holds.
    /// (A binary search here was a tenth of a 1000-flow run: ten dependent loads, the
    /// last ones missing the cache.)
    by_port: FxHashMap<u32, Endpoint>,
}

impl NodeRt {
    /// Adds an endpoint (the one way to: it keeps [`by_port`](Self::by_port)).
    fn add_endpoint(&mut self, e: Endpoint) {
        let key = (u32::from(e.protocol) << 16) | u32::from(e.port);
        self.by_port.entry(key).or_insert(e);
        self.endpoints.push(e);
    }

    /// The endpoint a packet of `protocol` to `port` is for.
    #[inline]
    fn endpoint(&self, protocol: u8, port: u16) -> Option<Endpoint> {
        if self.endpoints.len() <= SCAN_ENDPOINTS {
            return (self.endpoints.iter())
                .find(|e| e.protocol == protocol && e.port == port)
                .copied();
        }
        let key = (u32::from(protocol) << 16) | u32::from(port);
        self.by_port.get(&key).copied()
    }
}

/// One simulation run.
pub struct Simulation {
    cfg: RunConfig,
    topo: Topology,
    sched: Scheduler,
    pool: PacketPool,
    nodes: Vec<NodeRt>,
    /// Every node's routes ([`Topology::routes`]) in one table
    /// ([`route`](Self::route)): the per-packet lookup is one load from an address
    /// known at once, not a chain of loads through the node's record (which perf
    /// showed stalling the forwarding path).
    next_hop: crate::topology::Routes,
    links: Vec<Link>,
    flows: Vec<Flow>,
    /// Each flow's sending and receiving host ([`FlowSpec::ends`](crate::app::FlowSpec::ends)).
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
    /// By node, for early hosts only: every receiver timer armed there, as
    /// `(deadline, flow)`, earliest first. An entry is live while the flow's timer is
    /// still armed for that deadline; the others are dropped when they come to the
    /// top. [`catch_up`](Self::catch_up) reads the host's earliest timer here, where it
    /// once scanned all its receivers (a thousand cache misses per call with a
    /// thousand flows).
    host_timers: Vec<Option<HostTimers>>,
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
    /// Runs to the end and returns the results.
    pub fn run(mut self) -> Result<RunResult, RunError> {
        if self.cut_through {
            self.set_up_cut_through();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A host finds each endpoint by protocol and port, the first of a key where two
    /// share one, nothing for a port nobody holds: by comparing in turn up to
    /// [`SCAN_ENDPOINTS`], by hash beyond.
    #[test]
    fn a_host_finds_its_endpoints_by_protocol_and_port() {
        for n in [1, SCAN_ENDPOINTS, SCAN_ENDPOINTS + 1, 1000] {
            let mut node = NodeRt {
                kind: NodeKind::Host,
                endpoints: vec![],
                by_port: Default::default(),
            };
            let e = |protocol, port, flow| Endpoint {
                protocol,
                port,
                flow,
                side: 1,
            };
            for i in 0..n as u16 {
                node.add_endpoint(e(6, TCP_RECEIVER_PORT + i, u32::from(i)));
            }
            // The same port under another protocol, and a second endpoint on a key.
            node.add_endpoint(e(17, TCP_RECEIVER_PORT, 7777));
            node.add_endpoint(e(6, TCP_RECEIVER_PORT, 9999));
            for i in 0..n as u16 {
                let found = node.endpoint(6, TCP_RECEIVER_PORT + i).map(|e| e.flow);
                assert_eq!(found, Some(u32::from(i)), "{n} endpoints, port {i}");
            }
            assert_eq!(
                node.endpoint(17, TCP_RECEIVER_PORT).map(|e| e.flow),
                Some(7777)
            );
            assert!(node.endpoint(6, TCP_RECEIVER_PORT + n as u16).is_none());
            assert!(node.endpoint(17, TCP_RECEIVER_PORT + 1).is_none());
        }
    }

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
