//! Forwarding: a packet arriving over a link is captured, policed (DiffServ
//! ingress), handed to a base station, consumed at its host or routed on; routing is
//! one table lookup, and a link either queues it (FIFO, with its arrival as an event)
//! or schedules it (priority queues and policers, with an event per transmission).

use crate::link::{Enqueued, Scheduled};
use crate::packet::PacketId;
use crate::scheduler::Event;
use crate::topology::addr_node;
use longhaul_proto::Instant;

use super::Simulation;

impl Simulation {
    /// Writes packet `pkt` to link `l`'s capture, if any, as arriving at `at`.
    #[inline(always)]
    pub(super) fn capture(&mut self, l: usize, at: Instant, pkt: PacketId) {
        if self.any_pcap {
            self.write_capture(l, at, pkt);
        }
    }

    #[cold]
    pub(super) fn write_capture(&mut self, l: usize, at: Instant, pkt: PacketId) {
        if let Some(w) = &mut self.pcaps[l] {
            if self.pool.get(pkt).header()[9] == 132 {
                w.write_whole(at, self.pool.whole(pkt));
            } else {
                w.write(at, self.pool.get(pkt));
            }
        }
    }

    pub(super) fn on_link_arrival(&mut self, now: Instant, l: usize) {
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

    /// A node's ingress rules: the first that matches meters, marks or drops the
    /// packet. Returns false if it is dropped.
    pub(super) fn police(&mut self, now: Instant, node: usize, pkt: PacketId) -> bool {
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
    pub(super) fn on_tx_done(&mut self, now: Instant, l: u32) {
        if let Some((arrival, done)) = self.links[l as usize].start_next(now) {
            self.transmitting(l, arrival, done);
        }
    }

    /// A scheduled link started sending a packet: its arrival at the far end (if the
    /// link had nothing in flight) and the end of its transmission are events.
    pub(super) fn transmitting(&mut self, l: u32, arrival: Option<Instant>, done: Instant) {
        if let Some(t) = arrival {
            self.sched.schedule(t, Event::LinkArrival(l));
        }
        self.sched.schedule(done, Event::LinkTxDone(l));
    }

    /// The link `node` sends packets for `dst` on, if any.
    #[inline]
    pub(super) fn route(&self, node: usize, dst: usize) -> Option<u32> {
        self.next_hop.get(node, dst)
    }

    /// A packet reaches `node`: consume it there or forward it.
    pub(super) fn deliver(&mut self, now: Instant, node: usize, pkt: PacketId) {
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

    pub(super) fn forward(&mut self, now: Instant, node: usize, dst: usize, pkt: PacketId) {
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
                Scheduled::Lost | Scheduled::Overflow | Scheduled::Policed | Scheduled::Early => {
                    self.pool.free(pkt)
                }
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
    pub(super) fn offer(&mut self, at: Instant, l: u32, pkt: PacketId, size: u32) {
        match self.links[l as usize].enqueue(at, pkt, size) {
            Enqueued::Accepted(Some(t)) => self.sched.schedule(t, Event::LinkArrival(l)),
            Enqueued::Accepted(None) => {}
            Enqueued::Lost | Enqueued::Overflow => self.pool.free(pkt),
        }
    }
}
