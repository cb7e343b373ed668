//! A point-to-point link direction: loss, a DropTail queue, a constant-rate
//! transmitter and a propagation delay, merged into one FIFO.
//!
//! ```text
//!  enqueue(now) --> [loss] --> [DropTail limit] --> transmitter (rate) --> delay --> far end
//!                                 \___________________ ring of in-flight packets ___________/
//! ```
//!
//! Because the queue is FIFO and the rate constant, a packet's departure time is known
//! the moment it is accepted: `start = max(now, busy_until)`, `finish = start + size /
//! rate`, `arrive = finish + delay`. The link therefore needs no event for
//! serialisation: it keeps accepted packets in arrival order and the scheduler holds a
//! single event for the head. One event per packet per hop, and queue occupancy is
//! read off the ring (packets whose transmission has not finished).
//!
//! A link direction may instead have an **egress scheduler** (DiffServ: a priority
//! queue and weighted classes, [`crate::diffserv::sched`]). Then the order of
//! departures is not known on arrival: packets wait in the scheduler, and the link
//! needs a second event per packet, when the transmitter frees up, to pick the next
//! one. Once picked, a packet joins the same ring of in-flight packets. FIFO links
//! are untouched by this.

use std::collections::VecDeque;

use longhaul_proto::{Bandwidth, Duration, Instant};

use crate::diffserv::sched::{Admit, ClassConfig, LlqConfig, Scheduler};
use crate::loss::{LossModel, LossProcess};
use crate::packet::PacketId;

/// How the DropTail queue is limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many packets in the queue (including the one being sent).
    Packets(u32),
    /// At most this many bytes in the queue (including the one being sent).
    Bytes(u64),
}

/// Static parameters of one link direction.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkParams {
    /// Name used in outputs (`bottleneck`, `bottleneck.rev`, ...).
    pub name: String,
    /// Transmission rate.
    pub rate: Bandwidth,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Queue limit.
    pub limit: QueueLimit,
    /// Loss on entry to the link.
    pub loss: LossModel,
    /// An egress scheduler in place of the DropTail FIFO (`limit` is then unused:
    /// each class has its own).
    pub egress: Option<EgressSpec>,
    /// A wireless hop: a base station at either end runs Snoop for TCP across it.
    pub wireless: bool,
}

/// Where DSCPs go at a scheduled link's egress.
#[derive(Debug, Clone, PartialEq)]
pub struct EgressSpec {
    /// The priority queue: its DSCPs and its rate and burst.
    pub priority: Option<(Vec<u8>, LlqConfig)>,
    /// The weighted classes and their DSCPs. The first is the default: DSCPs nothing
    /// names go there.
    pub classes: Vec<(Vec<u8>, ClassConfig)>,
}

/// A scheduled link's queue for one DSCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Priority,
    Class(u8),
}

#[derive(Debug)]
struct Egress {
    slot: [Slot; 64],
    /// Waiting packets, with the time they reached the link.
    sched: Scheduler<(PacketId, u64)>,
}

impl Egress {
    fn new(spec: &EgressSpec) -> Egress {
        let mut slot = [Slot::Class(0); 64];
        for (i, (dscps, _)) in spec.classes.iter().enumerate() {
            for &d in dscps {
                slot[usize::from(d & 63)] = Slot::Class(i as u8);
            }
        }
        if let Some((dscps, _)) = &spec.priority {
            for &d in dscps {
                slot[usize::from(d & 63)] = Slot::Priority;
            }
        }
        let classes: Vec<ClassConfig> = spec.classes.iter().map(|c| c.1).collect();
        Egress {
            slot,
            sched: Scheduler::new(
                spec.priority.as_ref().map(|p| p.1),
                &classes,
                1500,
                Instant::ZERO,
            ),
        }
    }
}

/// Outcome of [`Link::enqueue_scheduled`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduled {
    /// The transmitter was idle and took the packet: schedule the arrival event (if
    /// given) and a transmitter event at `done`.
    Started {
        /// When the packet reaches the far end, if the caller must schedule it.
        arrival: Option<Instant>,
        /// When the transmitter is free again.
        done: Instant,
    },
    /// Waiting in the scheduler.
    Queued,
    /// Dropped by the loss model.
    Lost,
    /// Dropped: its class queue was full.
    Overflow,
    /// Dropped by the priority queue's policer.
    Policed,
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    arrive: u64,
    finish: u64,
    size: u32,
    pkt: PacketId,
}

/// Counters of one link direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets accepted into the queue.
    pub enqueued_pkts: u64,
    /// Packets delivered to the far end.
    pub delivered_pkts: u64,
    /// Bytes delivered to the far end.
    pub delivered_bytes: u64,
    /// Packets dropped because the queue was full.
    pub drops_queue: u64,
    /// Packets dropped by the loss model.
    pub drops_loss: u64,
    /// Packets dropped by a priority queue's policer (scheduled links).
    pub drops_policed: u64,
    /// Sum over accepted packets of the time spent waiting before transmission, ns.
    /// By Little's law, divided by the run time it is the mean number waiting.
    pub wait_ns: u128,
    /// Transmitter busy time scheduled so far, ns.
    pub busy_ns: u64,
    /// Largest queue seen at an arrival, packets.
    pub max_queue_pkts: u32,
}

/// One direction of a link.
#[derive(Debug)]
pub struct Link {
    /// Parameters.
    pub params: LinkParams,
    /// Node the link leads from.
    pub from: usize,
    /// Node the link leads to.
    pub to: usize,
    loss: LossProcess,
    ring: VecDeque<InFlight>,
    /// Entries at the front of `ring` whose transmission has finished.
    departed: usize,
    queued_pkts: u32,
    queued_bytes: u64,
    busy_until: u64,
    /// Serialisation time per byte, ns, in 32.32 fixed point (rounded up), so the
    /// per-packet path multiplies instead of dividing.
    ns_per_byte_fp: u128,
    /// `params.delay` in nanoseconds.
    delay_ns: u64,
    egress: Option<Box<Egress>>,
    /// Counters.
    pub stats: LinkStats,
}

/// Outcome of [`Link::enqueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// Accepted; `Some(t)` if the ring was empty and the caller must schedule the
    /// arrival event at `t`.
    Accepted(Option<Instant>),
    /// Dropped by the loss model.
    Lost,
    /// Dropped: the queue was full.
    Overflow,
}

impl Link {
    /// A link direction from node `from` to node `to`; `stream` selects its RNG stream.
    pub fn new(params: LinkParams, from: usize, to: usize, seed: u64, stream: u64) -> Self {
        Link {
            ns_per_byte_fp: (8_000_000_000u128 << 32)
                .div_ceil(u128::from(params.rate.as_bps().max(1))),
            delay_ns: u64::try_from(params.delay.as_nanos()).unwrap_or(u64::MAX / 2),
            egress: params.egress.as_ref().map(|e| Box::new(Egress::new(e))),
            loss: LossProcess::new(params.loss, seed, stream),
            params,
            from,
            to,
            ring: VecDeque::new(),
            departed: 0,
            queued_pkts: 0,
            queued_bytes: 0,
            busy_until: 0,
            stats: LinkStats::default(),
        }
    }

    /// Moves packets whose transmission finished by `now` out of the queue count.
    #[inline]
    fn advance(&mut self, now: u64) {
        while let Some(e) = self.ring.get(self.departed) {
            if e.finish > now {
                break;
            }
            self.queued_pkts -= 1;
            self.queued_bytes -= u64::from(e.size);
            self.departed += 1;
        }
    }

    /// Offers packet `pkt` of `size` bytes at `now`.
    #[inline]
    pub fn enqueue(&mut self, now: Instant, pkt: PacketId, size: u32) -> Enqueued {
        if self.loss.lose() {
            self.stats.drops_loss += 1;
            return Enqueued::Lost;
        }
        let now = now.as_nanos();
        self.advance(now);
        let full = match self.params.limit {
            QueueLimit::Packets(n) => self.queued_pkts >= n,
            QueueLimit::Bytes(b) => self.queued_bytes + u64::from(size) > b,
        };
        if full {
            self.stats.drops_queue += 1;
            return Enqueued::Overflow;
        }
        self.stats.enqueued_pkts += 1;
        self.queued_pkts += 1;
        self.queued_bytes += u64::from(size);
        self.stats.max_queue_pkts = self.stats.max_queue_pkts.max(self.queued_pkts);
        let start = now.max(self.busy_until);
        Enqueued::Accepted(self.transmit(now, start, pkt, size))
    }

    /// Puts a packet that reached the link at `reached` on the wire at `start`; returns
    /// its arrival time if the ring was empty (the caller schedules it). The packet is
    /// already counted in the queue.
    #[inline]
    fn transmit(&mut self, reached: u64, start: u64, pkt: PacketId, size: u32) -> Option<Instant> {
        // Round up; a shift, not a (slow) 128-bit division.
        let tx = ((u128::from(size) * self.ns_per_byte_fp + 0xffff_ffff) >> 32) as u64;
        let finish = start + tx;
        let arrive = finish + self.delay_ns;
        self.busy_until = finish;
        self.stats.wait_ns += u128::from(start - reached);
        self.stats.busy_ns += tx;
        let was_empty = self.ring.is_empty();
        self.ring.push_back(InFlight {
            arrive,
            finish,
            size,
            pkt,
        });
        was_empty.then(|| Instant::from_nanos(arrive))
    }

    /// Whether the link has an egress scheduler (then use
    /// [`enqueue_scheduled`](Self::enqueue_scheduled)).
    pub fn is_scheduled(&self) -> bool {
        self.egress.is_some()
    }

    /// Offers packet `pkt` of `size` bytes and DSCP `dscp` to a scheduled link.
    ///
    /// # Panics
    /// If the link has no egress scheduler.
    pub fn enqueue_scheduled(
        &mut self,
        now: Instant,
        pkt: PacketId,
        size: u32,
        dscp: u8,
    ) -> Scheduled {
        if self.loss.lose() {
            self.stats.drops_loss += 1;
            return Scheduled::Lost;
        }
        let t = now.as_nanos();
        self.advance(t);
        let busy = self.busy_until > t;
        let eg = self.egress.as_mut().expect("not a scheduled link");
        let admit = match eg.slot[usize::from(dscp & 63)] {
            Slot::Priority => eg.sched.offer_priority(now, (pkt, t), size, busy),
            Slot::Class(c) => eg.sched.offer(usize::from(c), (pkt, t), size),
        };
        match admit {
            Admit::Policed => {
                self.stats.drops_policed += 1;
                return Scheduled::Policed;
            }
            Admit::Full => {
                self.stats.drops_queue += 1;
                return Scheduled::Overflow;
            }
            Admit::Queued => {}
        }
        self.stats.enqueued_pkts += 1;
        self.queued_pkts += 1;
        self.queued_bytes += u64::from(size);
        self.stats.max_queue_pkts = self.stats.max_queue_pkts.max(self.queued_pkts);
        if busy {
            return Scheduled::Queued;
        }
        match self.start_next(now) {
            Some((arrival, done)) => Scheduled::Started { arrival, done },
            None => unreachable!("a packet was just queued"),
        }
    }

    /// The transmitter of a scheduled link is free at `now`: puts the next waiting
    /// packet on the wire. Returns the arrival event to schedule (if the ring was
    /// empty) and when the transmitter is free again; `None` if nothing waits.
    pub fn start_next(&mut self, now: Instant) -> Option<(Option<Instant>, Instant)> {
        let ((pkt, reached), size) = self.egress.as_mut()?.sched.dequeue()?;
        let t = now.as_nanos();
        let arrival = self.transmit(reached, t, pkt, size);
        Some((arrival, Instant::from_nanos(self.busy_until)))
    }

    /// Removes the head packet, which arrives at `now`; returns it and the arrival time
    /// of the new head, if any (the caller schedules it).
    #[inline]
    pub fn pop_arrival(&mut self, now: Instant) -> (PacketId, Option<Instant>) {
        let head = self
            .ring
            .pop_front()
            .expect("arrival event without a packet");
        debug_assert_eq!(head.arrive, now.as_nanos());
        // The head finished transmission before it arrived. If `advance` has not
        // counted it out of the queue yet, do it here instead of running the loop.
        if self.departed > 0 {
            self.departed -= 1;
        } else {
            self.queued_pkts -= 1;
            self.queued_bytes -= u64::from(head.size);
        }
        self.stats.delivered_pkts += 1;
        self.stats.delivered_bytes += u64::from(head.size);
        (
            head.pkt,
            self.ring.front().map(|e| Instant::from_nanos(e.arrive)),
        )
    }

    /// Packets in the queue at `now` (waiting or being sent).
    pub fn queue_pkts(&mut self, now: Instant) -> u32 {
        self.advance(now.as_nanos());
        self.queued_pkts
    }

    /// Whether the DropTail queue at `now` could not take a packet of `size` bytes
    /// and one more after it (ns-2's Snoop caches only below `limit - 1`). Scheduled
    /// links answer for their total backlog against the limit.
    pub fn nearly_full(&mut self, now: Instant, size: u32) -> bool {
        self.advance(now.as_nanos());
        match self.params.limit {
            QueueLimit::Packets(n) => self.queued_pkts + 1 >= n,
            QueueLimit::Bytes(b) => self.queued_bytes + 2 * u64::from(size) > b,
        }
    }

    /// Bytes in the queue at `now`.
    pub fn queue_bytes(&mut self, now: Instant) -> u64 {
        self.advance(now.as_nanos());
        self.queued_bytes
    }

    /// Transmitter busy time up to `end`, ns (for utilisation).
    pub fn busy_ns_until(&self, end: Instant) -> u64 {
        self.stats.busy_ns - self.busy_until.saturating_sub(end.as_nanos())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(limit: QueueLimit) -> Link {
        let params = LinkParams {
            name: "l".into(),
            rate: Bandwidth::from_mbps(8), // 1 byte per microsecond
            delay: Duration::from_micros(100),
            limit,
            loss: LossModel::None,
            egress: None,
            wireless: false,
        };
        Link::new(params, 0, 1, 1, 0)
    }

    #[test]
    fn fifo_timing_and_one_event_per_busy_period() {
        let mut l = link(QueueLimit::Packets(10));
        let t0 = Instant::ZERO;
        assert_eq!(
            l.enqueue(t0, 1, 1000),
            Enqueued::Accepted(Some(Instant::from_nanos(1_100_000)))
        );
        assert_eq!(l.enqueue(t0, 2, 500), Enqueued::Accepted(None));
        assert_eq!(l.queue_pkts(t0), 2);
        assert_eq!(l.queue_pkts(Instant::from_nanos(1_000_000)), 1);
        let (p, next) = l.pop_arrival(Instant::from_nanos(1_100_000));
        assert_eq!((p, next), (1, Some(Instant::from_nanos(1_600_000))));
        assert_eq!(l.stats.wait_ns, 1_000_000);
        let (p, next) = l.pop_arrival(Instant::from_nanos(1_600_000));
        assert_eq!((p, next), (2, None));
        assert_eq!(l.queue_pkts(Instant::from_nanos(1_600_000)), 0);
    }

    #[test]
    fn droptail_in_packets_and_bytes() {
        let mut l = link(QueueLimit::Packets(2));
        assert!(matches!(
            l.enqueue(Instant::ZERO, 1, 100),
            Enqueued::Accepted(_)
        ));
        assert!(matches!(
            l.enqueue(Instant::ZERO, 2, 100),
            Enqueued::Accepted(_)
        ));
        assert_eq!(l.enqueue(Instant::ZERO, 3, 100), Enqueued::Overflow);
        // After the first has been sent there is room again.
        assert!(matches!(
            l.enqueue(Instant::from_nanos(100_000), 4, 100),
            Enqueued::Accepted(_)
        ));
        let mut l = link(QueueLimit::Bytes(1500));
        assert!(matches!(
            l.enqueue(Instant::ZERO, 1, 1000),
            Enqueued::Accepted(_)
        ));
        assert_eq!(l.enqueue(Instant::ZERO, 2, 1000), Enqueued::Overflow);
        assert!(matches!(
            l.enqueue(Instant::ZERO, 3, 500),
            Enqueued::Accepted(_)
        ));
        assert_eq!(l.stats.drops_queue, 1);
    }
}
