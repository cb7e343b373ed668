//! The speed machinery, fenced here: cut-through links and early hosts. Both
//! replace events by arithmetic where the order of what happens cannot differ from
//! an event per hop; the rest of the simulator only asks
//! [`is_cut_through`](crate::link::Link::is_cut_through) and `into_early` on its
//! per-packet path.
//!
//! The invariants, written once (the tests in `tests/determinism.rs` hold a run with
//! them to the same bits as the same run with an event per hop,
//! [`Simulation::with_cut_through`]`(false)`):
//! - **A cut-through link** ends at a node that only forwards, and every link it
//!   forwards onto is a FIFO that nothing else feeds (or leads into an early host).
//!   Its packets are placed on the next link at the instant they would arrive, so the
//!   next link sees them in the same order and at the same times.
//! - **Nothing upstream of a cut-through link is cut-through**: the link downstream
//!   runs ahead of the clock, and may only be fed by one that does not.
//! - **An early host** is reached only over one FIFO link and holds only TCP
//!   receivers; a receiver's inputs are then its packets in link order and its own
//!   timers. It takes each packet when offered, at its arrival time, after firing its
//!   timers due by then ([`Simulation::catch_up`]); what it sends goes on links it
//!   alone feeds, in time order.
//! - **Observations see the past**: a sample or trace an early host has run past
//!   reads what the host had at that instant, recorded as it passed
//!   ([`Simulation::delivered_as_of`]).
//! - Not with transfers (their channels are also driven by the transfer) nor base
//!   stations (Snoop reads and writes both directions in the middle).
//!
//! One limit is for speed, not correctness: a link is cut through onto at most
//! [`FAN_OUT_MAX`] links (see there).

use crate::app::Flow;
use crate::packet::PacketId;
use longhaul_proto::Instant;

use super::{HostTimers, Simulation, CONTROL_FLAG};

/// The most links a cut-through link may hand its packets on to.
///
/// Cutting a link through onto its next links costs no event, but it moves its
/// packets, a one-way delay ahead of the clock, into the next links' rings, and an
/// early host behind them answers as far ahead. A bottleneck that fans out to a
/// thousand access links thus scatters the path's in-flight packets over a thousand
/// rings, read back one packet per ring at a time, each line cold; a bottleneck with
/// an event per arrival is read in order from one ring, with the next packet
/// prefetched, and what it passes on is read again while still cached. CUBIC over a
/// 10 Gb/s × 100 ms dumbbell, 10 s (`longhaul sim bench --dumbbell --rate 10Gbps
/// --cc cubic --rtt-ms 100 --duration-s 10 --repeat 3 --flows N`), Intel Xeon
/// (family 6, model 167), 2026-11-27, segments per wall-second cut through against
/// not: N = 32, 4.35 M against 3.97 M; N = 64, 2.66 M against 3.93 M; N = 1000,
/// 1.77 M against 2.89 M. The cliff between 32 and 64 is likely where the
/// processor's hardware prefetcher loses track of the rings (Intel documents its L2
/// streamer as following 32 streams). Every study's dumbbell has at most five
/// pairs, so none changes.
pub(super) const FAN_OUT_MAX: usize = 32;

impl Simulation {
    /// Marks the links [`cut_through_links`](Self::cut_through_links) finds, before
    /// the first event.
    pub(super) fn set_up_cut_through(&mut self) {
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
            self.host_timers[self.links[l].to] = Some(HostTimers::new());
        }
    }

    /// The links that can be cut-through (see [`crate::link`]): the far end is a node
    /// that only forwards (no endpoints, no base station, no ingress rules), and every
    /// link it forwards this link's packets onto is a FIFO that nothing else feeds, or
    /// leads into an early host. A link downstream of a cut-through link runs ahead of
    /// the clock, so it is not cut-through itself, and nothing upstream of it is
    /// either. Nor is a link that forwards onto more than [`FAN_OUT_MAX`] links.
    /// Each comes with the one link its packets go on to, if there is only one.
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
    ///
    /// Senders are not early hosts, though they could be (their inputs are as
    /// few). Tried on 2026-11-28, with their timers and flow starts fired by
    /// `catch_up` and their trace rows recorded: on a 1000-pair CUBIC dumbbell
    /// (`longhaul sim bench --dumbbell --flows 1000 --rate 10Gbps --cc cubic
    /// --rtt-ms 100 --duration-s 10`) events per segment fell from 5.0 to 4.0, but
    /// segments per wall-second did not move (median of 5 alternated runs 1.11 M
    /// against 1.12 M; cachegrind: 3 % fewer instructions, as many L1 misses), and
    /// the run parted from the event-per-hop one on simultaneous events. Behind a
    /// cut-through bottleneck (a 4-pair dumbbell, 3 events per segment to 2) it was
    /// slower (median 1.32 M against 1.46 M; 13 % more L1 misses: a sender a one-way
    /// delay ahead leaves its packets in its access link's ring to be read cold),
    /// and a `tcp-bbr` two-RTT study run parted on its pacing timer's ties with its
    /// ACKs. An event costs little here; the cache misses on each flow's state are
    /// what a thousand flows cost.
    pub(super) fn cut_through_links(&self) -> (Vec<(usize, Option<u32>)>, Vec<usize>) {
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
                if came < nl {
                    next[came].push(out);
                }
                came = out;
                node = self.links[out].to;
                if node == d {
                    break;
                }
            }
        }
        // Each link's next links as a set. (Deduplicated once here: a bottleneck
        // before a thousand access links would otherwise search its list on every
        // route's step.)
        for n in &mut next {
            n.sort_unstable();
            n.dedup();
        }
        let mut cut = vec![false; nl];
        for l in 0..nl {
            let link = &self.links[l];
            let r = link.to;
            let plain_router = self.nodes[r].endpoints.is_empty()
                && self.station_of[r].is_none()
                && self.ingress[r].is_empty();
            let passes_on = !next[l].is_empty()
                && next[l].len() <= FAN_OUT_MAX
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
        // How many links that carry anything lead into each node, and the last.
        let mut ways_in = vec![(0u32, 0usize); self.nodes.len()];
        for (i, link) in self.links.iter().enumerate() {
            if feed[i] != Feed::Nothing {
                let w = &mut ways_in[link.to];
                *w = (w.0 + 1, i);
            }
        }
        let mut early = vec![];
        if self.transfers.is_empty() && !self.any_station {
            for l in 0..nl {
                let only_way_in = ways_in[self.links[l].to] == (1, l);
                if only_way_in
                    && next[l].is_empty()
                    && !cut[l]
                    && !self.links[l].is_scheduled()
                    && early_host(self.links[l].to)
                {
                    early.push(l);
                }
            }
        }
        (through, early)
    }

    /// Offers `pkt` to cut-through link `l` at `now`; returns when it reaches the far
    /// end, captured there, or `None` (its slot freed) if the link drops it or it
    /// would arrive after the run ends.
    #[inline(always)]
    pub(super) fn cross(
        &mut self,
        now: Instant,
        l: usize,
        pkt: PacketId,
        size: u32,
    ) -> Option<Instant> {
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
    pub(super) fn cut_through(
        &mut self,
        now: Instant,
        l: usize,
        dst: usize,
        pkt: PacketId,
        size: u32,
    ) {
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
    pub(super) fn through_to_host(&mut self, now: Instant, l: usize, pkt: PacketId, size: u32) {
        let Some(at) = self.cross(now, l, pkt, size) else {
            return;
        };
        // Taken once the current event is done: a host's packets reach it in the
        // order they are offered here, and nothing between now and then reads it.
        // (Taking it here would make the forwarding path recursive, through the
        // host's answer, and the compiler would no longer inline it.)
        self.early_pending.push((at, self.links[l].to as u32, pkt));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    /// `pairs` TCP flows over a dumbbell, each from its own sender to its own
    /// receiver, and whether its bottleneck is cut through.
    fn bottleneck_cut(pairs: usize) -> bool {
        let mut text = format!(
            "duration = \"1s\"\nseed = 1\n[topology]\nkind = \"dumbbell\"\npairs = {pairs}\n\
             access = {{ rate = \"10Gbps\", delay = \"0ms\" }}\n\
             bottleneck = {{ rate = \"1Gbps\", delay = \"5ms\", queue = \"1bdp\" }}\n"
        );
        for _ in 0..pairs {
            text += "[[flow]]\nprotocol = \"tcp\"\n";
        }
        let s = Scenario::parse(&text, std::path::Path::new("<test>")).unwrap();
        let sim = Simulation::new(s.run, s.topology, s.flows).unwrap();
        let (through, early) = sim.cut_through_links();
        let name = |l: usize| sim.links[l].params.name.as_str();
        // The receivers are early hosts either way.
        assert_eq!(early.len(), pairs, "{pairs} pairs: early hosts");
        through.iter().any(|&(l, _)| name(l) == "bottleneck")
    }

    /// A bottleneck is cut through onto as many access links as [`FAN_OUT_MAX`], and
    /// no more: beyond, its arrivals are events.
    #[test]
    fn a_link_is_cut_through_onto_at_most_fan_out_max_links() {
        assert!(bottleneck_cut(1));
        assert!(bottleneck_cut(FAN_OUT_MAX));
        assert!(!bottleneck_cut(FAN_OUT_MAX + 1));
        assert!(!bottleneck_cut(200));
    }
}
