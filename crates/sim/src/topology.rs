//! Networks as data: nodes, bidirectional links, and builders for a chain and a
//! dumbbell. Routing is static: shortest path in hops, computed once.
//!
//! ```text
//!  chain:     n0 --link0-- n1 --link1-- n2 ... nK
//!
//!  dumbbell:  s0 --access0--\                           /--egress0-- r0
//!             s1 --access1--- left ==bottleneck== right --egress1--- r1
//!             ...          /                           \            ...
//! ```
//! Addresses: node `i` is `10.0.0.0 + i + 1`.

use longhaul_proto::{Bandwidth, Duration};
use longhaul_wire::Ipv4Address;

use crate::basestation::BaseStationSpec;
use crate::diffserv::policy::RuleSpec;
use crate::link::{EgressSpec, LinkParams, QueueLimit};
use longhaul_model::loss::LossModel;

/// Whether a node ends flows or only forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// An end host: runs applications.
    Host,
    /// A router: forwards by destination address.
    Router,
}

/// A node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Name used in scenarios and outputs.
    pub name: String,
    /// Host or router.
    pub kind: NodeKind,
}

pub use longhaul_model::QueueSpec;

/// One bidirectional link as written in a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// Rate in each direction.
    pub rate: Bandwidth,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Queue limit in each direction.
    pub queue: QueueSpec,
    /// Loss on the forward direction (away from the first node).
    pub loss: LossModel,
    /// Loss on the reverse direction.
    pub loss_reverse: LossModel,
    /// An egress scheduler on the forward direction (DiffServ), instead of DropTail.
    pub egress: Option<EgressSpec>,
    /// A wireless hop (its error models are `loss` and `loss_reverse`); base
    /// stations run Snoop for TCP across it.
    pub wireless: bool,
}

impl LinkSpec {
    /// A lossless link with a queue of one BDP.
    pub fn new(rate: Bandwidth, delay: Duration) -> Self {
        LinkSpec {
            rate,
            delay,
            queue: QueueSpec::Bdp(1.0),
            loss: LossModel::None,
            loss_reverse: LossModel::None,
            egress: None,
            wireless: false,
        }
    }
}

/// A network: nodes and link directions (forward and reverse of each link are
/// separate entries, `2i` and `2i + 1`).
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Link directions with their endpoints.
    pub links: Vec<(usize, usize, LinkParams)>,
    /// DiffServ ingress rules (classify, meter, mark or drop), each at its node, in
    /// the order they are tried.
    pub ingress: Vec<RuleSpec>,
    /// Base stations (processing budget, Snoop), at most one per node.
    pub base_stations: Vec<BaseStationSpec>,
}

/// The address of node `i`.
pub fn node_addr(i: usize) -> Ipv4Address {
    Ipv4Address::from_bits(0x0a00_0001 + i as u32)
}

/// The node with address `bits`, if the address is in longhaul's plan.
pub fn addr_node(bits: u32, nodes: usize) -> Option<usize> {
    let i = bits.checked_sub(0x0a00_0001)? as usize;
    (i < nodes).then_some(i)
}

impl Topology {
    /// An empty network.
    pub fn new() -> Self {
        Topology {
            nodes: vec![],
            links: vec![],
            ingress: vec![],
            base_stations: vec![],
        }
    }

    /// Adds a node; returns its index.
    pub fn add_node(&mut self, name: impl Into<String>, kind: NodeKind) -> usize {
        self.nodes.push(Node {
            name: name.into(),
            kind,
        });
        self.nodes.len() - 1
    }

    /// Adds a bidirectional link between `a` and `b`, named `name` (forward, a to b)
    /// and `name.rev`; `rtt` is the base RTT used to size a queue given in BDPs.
    pub fn add_link(&mut self, name: &str, a: usize, b: usize, spec: &LinkSpec, rtt: Duration) {
        let limit = match spec.queue {
            QueueSpec::Limit(l) => l,
            QueueSpec::Bdp(f) => {
                let bytes = (spec.rate.bytes_in(rtt) as f64 * f).round() as u64;
                // Never less than two full packets, or nothing could be queued at all.
                QueueLimit::Bytes(bytes.max(3000))
            }
        };
        let dir = |name: String, loss, egress| LinkParams {
            name,
            rate: spec.rate,
            delay: spec.delay,
            limit,
            loss,
            egress,
            wireless: spec.wireless,
        };
        self.links
            .push((a, b, dir(name.to_string(), spec.loss, spec.egress.clone())));
        self.links
            .push((b, a, dir(format!("{name}.rev"), spec.loss_reverse, None)));
    }

    /// The parameters of the link direction called `name`.
    pub fn link(&self, name: &str) -> Option<&LinkParams> {
        self.links
            .iter()
            .map(|(_, _, p)| p)
            .find(|p| p.name == name)
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// A chain `n0 - n1 - ... - nK` of `links.len()` links; the ends are hosts and
    /// the inner nodes routers. Queues given in BDPs use the end-to-end base RTT.
    pub fn chain(links: &[LinkSpec]) -> Self {
        let mut t = Topology::new();
        let rtt = links.iter().map(|l| l.delay).sum::<Duration>() * 2;
        for i in 0..=links.len() {
            let kind = if i == 0 || i == links.len() {
                NodeKind::Host
            } else {
                NodeKind::Router
            };
            t.add_node(format!("n{i}"), kind);
        }
        for (i, l) in links.iter().enumerate() {
            t.add_link(&format!("link{i}"), i, i + 1, l, rtt);
        }
        t
    }

    /// A dumbbell of `pairs` sender/receiver pairs (`s0..`, `r0..`) around routers
    /// `left` and `right`. `access` holds one spec per pair (the last one repeats if
    /// there are fewer), so pairs may have different RTTs. Queues given in BDPs use
    /// each path's base RTT; the bottleneck's uses the first pair's.
    pub fn dumbbell(
        pairs: usize,
        access: &[LinkSpec],
        bottleneck: &LinkSpec,
        egress: &LinkSpec,
    ) -> Self {
        let mut t = Topology::new();
        let access_of = |i: usize| &access[i.min(access.len() - 1)];
        let rtt_of = |i: usize| (access_of(i).delay + bottleneck.delay + egress.delay) * 2;
        let left = t.add_node("left", NodeKind::Router);
        let right = t.add_node("right", NodeKind::Router);
        t.add_link("bottleneck", left, right, bottleneck, rtt_of(0));
        for i in 0..pairs {
            let s = t.add_node(format!("s{i}"), NodeKind::Host);
            let r = t.add_node(format!("r{i}"), NodeKind::Host);
            t.add_link(&format!("access{i}"), s, left, access_of(i), rtt_of(i));
            t.add_link(&format!("egress{i}"), right, r, egress, rtt_of(i));
        }
        t
    }

    /// Next-hop link direction from every node towards every node (`None` where
    /// unreachable or local): [`Routes::get`]`(from, to)`. Breadth-first, so shortest
    /// in hops; ties go to the link added first.
    pub fn routes(&self) -> Routes {
        let n = self.nodes.len();
        // Outgoing link directions per node, in the order they were added.
        let mut out_links: Vec<Vec<(usize, u32)>> = vec![vec![]; n];
        for (li, (a, b, _)) in self.links.iter().enumerate() {
            out_links[*a].push((*b, li as u32));
        }
        // One table written in place, and one frontier reused from source to
        // source: a 1000-pair dumbbell has 2002 nodes, and a table of rows built
        // apart and then joined took a quarter of its set-up (perf) and twice the
        // memory.
        let mut next = vec![Routes::NONE; n * n];
        let mut frontier = Vec::with_capacity(n);
        for (src, row) in next.chunks_exact_mut(n.max(1)).enumerate().take(n) {
            // BFS from src, remembering the first link taken. A node is seen once
            // its first link is set (src itself is never set, and never queued
            // twice: it starts the frontier and is skipped below).
            frontier.clear();
            frontier.push(src);
            let mut head = 0;
            while let Some(&u) = frontier.get(head) {
                head += 1;
                for &(b, li) in &out_links[u] {
                    if b != src && row[b] == Routes::NONE {
                        row[b] = if u == src { li } else { row[u] };
                        frontier.push(b);
                    }
                }
            }
        }
        Routes { nodes: n, next }
    }
}

/// Every node's next hop towards every node, in one table: `nodes × nodes` link
/// indices, four bytes each (an `Option<u32>` takes eight).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    nodes: usize,
    next: Vec<u32>,
}

impl Routes {
    /// No route: the destination is the node itself, or unreachable.
    const NONE: u32 = u32::MAX;

    /// The link direction `from` sends packets for `to` on, if any.
    #[inline]
    pub fn get(&self, from: usize, to: usize) -> Option<u32> {
        let l = self.next[from * self.nodes + to];
        (l != Self::NONE).then_some(l)
    }
}

/// Most nodes a topology may have: the routing table is nodes x nodes.
pub const MAX_NODES: usize = 4096;

impl Default for Topology {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumbbell_routes_through_the_bottleneck() {
        let l = LinkSpec::new(Bandwidth::from_mbps(100), Duration::from_millis(1));
        let t = Topology::dumbbell(2, std::slice::from_ref(&l), &l, &l);
        let routes = t.routes();
        let s1 = t.node("s1").unwrap();
        let r0 = t.node("r0").unwrap();
        let left = t.node("left").unwrap();
        let first = routes.get(s1, r0).unwrap() as usize;
        assert_eq!(t.links[first].2.name, "access1");
        let second = routes.get(left, r0).unwrap() as usize;
        assert_eq!(t.links[second].2.name, "bottleneck");
        assert_eq!(routes.get(s1, s1), None);
        // 1 BDP at 100 Mb/s and a 6 ms RTT = 75 000 bytes.
        assert_eq!(t.links[0].2.limit, QueueLimit::Bytes(75_000));
    }

    /// Shortest in hops, ties to the link added first, `None` to itself and to
    /// what cannot be reached: a diamond a-b-d, a-c-d (b's links added first), a
    /// spur a-e, and an island f.
    #[test]
    fn routes_are_shortest_with_ties_to_the_first_link() {
        let l = LinkSpec::new(Bandwidth::from_mbps(100), Duration::from_millis(1));
        let rtt = Duration::from_millis(10);
        let mut t = Topology::new();
        let [a, b, c, d, e, f] =
            ["a", "b", "c", "d", "e", "f"].map(|n| t.add_node(n, NodeKind::Router));
        t.add_link("ae", a, e, &l, rtt);
        t.add_link("ab", a, b, &l, rtt);
        t.add_link("ac", a, c, &l, rtt);
        t.add_link("bd", b, d, &l, rtt);
        t.add_link("cd", c, d, &l, rtt);
        let r = t.routes();
        let name = |from, to| r.get(from, to).map(|i| t.links[i as usize].2.name.clone());
        assert_eq!(name(a, d).as_deref(), Some("ab"));
        // c-a-b and c-d-b tie; ac was added before cd.
        assert_eq!(name(c, b).as_deref(), Some("ac.rev"));
        assert_eq!(name(e, d).as_deref(), Some("ae.rev"));
        assert_eq!(name(d, e).as_deref(), Some("bd.rev"));
        assert_eq!(name(a, a), None);
        assert_eq!(name(a, f), None);
        assert_eq!(name(f, a), None);
    }

    #[test]
    fn addresses_round_trip() {
        assert_eq!(node_addr(0), Ipv4Address::new(10, 0, 0, 1));
        assert_eq!(addr_node(node_addr(7).to_bits(), 8), Some(7));
        assert_eq!(addr_node(node_addr(8).to_bits(), 8), None);
        assert_eq!(addr_node(5, 8), None);
    }
}
