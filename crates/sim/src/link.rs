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

use std::collections::VecDeque;

use longhaul_proto::{Bandwidth, Duration, Instant};

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
        let start = now.max(self.busy_until);
        // Round up; a shift, not a (slow) 128-bit division.
        let tx = ((u128::from(size) * self.ns_per_byte_fp + 0xffff_ffff) >> 32) as u64;
        let finish = start + tx;
        let arrive = finish + self.delay_ns;
        self.busy_until = finish;
        self.stats.enqueued_pkts += 1;
        self.stats.wait_ns += u128::from(start - now);
        self.stats.busy_ns += tx;
        self.queued_pkts += 1;
        self.queued_bytes += u64::from(size);
        self.stats.max_queue_pkts = self.stats.max_queue_pkts.max(self.queued_pkts);
        let was_empty = self.ring.is_empty();
        self.ring.push_back(InFlight {
            arrive,
            finish,
            size,
            pkt,
        });
        Enqueued::Accepted(was_empty.then(|| Instant::from_nanos(arrive)))
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
