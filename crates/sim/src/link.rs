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
//! **Cut-through.** When the far end is a router that only passes this link's packets
//! on (no endpoints, no base station, no policing) onto FIFO links that nothing else
//! feeds, even the arrival event is unnecessary: the packet's arrival time is known
//! on entry, so the simulation hands it straight to the next link, to be accepted
//! there at that future time ([`Link::enqueue_through`]). The next link's state then
//! runs ahead of the clock; [`Link::queue_pkts`] and [`Link::busy_ns_until`] read it
//! back at the time asked, and this link's own arrivals are counted lazily
//! ([`Link::settle`]). Because the next link has this one as its only feeder, it sees
//! the same packets at the same times in the same order as with an event per hop.
//! The far end may also be a host that takes its packets ahead of the clock (an
//! "early host", see `Simulation`): then no packet on the link is an event.
//!
//! A link direction may instead have an **egress scheduler** (DiffServ: a priority
//! queue and weighted classes, [`crate::diffserv::sched`]). Then the order of
//! departures is not known on arrival: packets wait in the scheduler, and the link
//! needs a second event per packet, when the transmitter frees up, to pick the next
//! one. Once picked, a packet joins the same ring of in-flight packets. FIFO links
//! are untouched by this.

use longhaul_proto::{Bandwidth, Duration, Instant};

use crate::diffserv::sched::{Admit, ClassConfig, LlqConfig, Scheduler};
use crate::packet::PacketId;
use crate::ring::Ring;
use longhaul_model::loss::{LossModel, LossProcess};
use longhaul_model::red::{af_drop_precedence, Red, RedParams};

pub use longhaul_model::QueueLimit;

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
    /// Classes that run RED (one profile) or WRED (one per AF drop precedence),
    /// by index.
    pub red: Vec<(usize, Vec<RedParams>)>,
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
    /// The egress of a link of `rate`; RED draws its decisions from stream
    /// `stream` of `seed` (each class its own).
    fn new(spec: &EgressSpec, rate: Bandwidth, seed: u64, stream: u64) -> Egress {
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
        let mut sched = Scheduler::new(
            spec.priority.as_ref().map(|p| p.1),
            &classes,
            1500,
            Instant::ZERO,
        );
        for (class, profiles) in &spec.red {
            // The idle decay counts typical packets: 1500 bytes at the link's rate.
            let red = Red::new(
                profiles.clone(),
                rate.tx_time_nanos(1500),
                seed,
                stream * 64 + *class as u64,
            );
            sched.set_red(*class, red);
        }
        Egress { slot, sched }
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
    /// Dropped early by the class's RED.
    Early,
}

#[derive(Debug, Clone, Copy, Default)]
struct InFlight {
    /// When the packet reached the link, finished transmission, and reaches the far
    /// end, ns. (It started `tx_ns(size)` before it finished.)
    reached: u64,
    finish: u64,
    arrive: u64,
    size: u32,
    pkt: PacketId,
}

/// Counters of one link direction. `repr(C)`, the ones every packet bumps first,
/// so that they share a line (see [`Link`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct LinkStats {
    /// Sum over accepted packets of the time spent waiting before transmission, ns.
    /// By Little's law, divided by the run time it is the mean number waiting.
    pub wait_ns: u128,
    /// Packets accepted into the queue.
    pub enqueued_pkts: u64,
    /// Packets delivered to the far end.
    pub delivered_pkts: u64,
    /// Bytes delivered to the far end.
    pub delivered_bytes: u64,
    /// Transmitter busy time scheduled so far, ns.
    pub busy_ns: u64,
    /// Largest queue seen at an arrival, packets.
    pub max_queue_pkts: u32,
    /// Packets dropped because the queue was full.
    pub drops_queue: u64,
    /// Packets dropped by the loss model.
    pub drops_loss: u64,
    /// Packets dropped by a priority queue's policer (scheduled links).
    pub drops_policed: u64,
    /// Packets RED dropped early at the egress.
    pub drops_red: u64,
    /// Packets of AF drop precedence 1, 2 and 3 (AFx1, AFx2, AFx3; RFC 2597)
    /// dropped at the egress, early by RED or by a full class queue.
    pub drops_af: [u64; 3],
}

/// One direction of a link.
///
/// Laid out for the cache (`repr(C)`, hot fields first, each link on its own
/// lines): on a dumbbell of a thousand pairs every packet meets some access link
/// whose state went cold since its flow's last packet, and what one packet reads
/// of it (the ring, the queue counters, the transmitter's times, the counters it
/// bumps) fits the first three 64-byte lines. Left to the compiler's order those
/// fields were spread over six lines of 544 bytes.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Link {
    // First line: the ring and the transmitter.
    ring: Ring<InFlight>,
    /// Position in `ring` of the first packet whose transmission has not finished
    /// (as far as `advance` has looked): those before it left the queue. Never
    /// behind the ring's head.
    departed: u64,
    busy_until: u64,
    /// The latest time a packet was offered at: with an upstream cut-through link
    /// it runs ahead of the simulation clock.
    clock: u64,
    queued_bytes: u64,
    // Second line: what admission and timing read.
    /// `params.delay` in nanoseconds.
    delay_ns: u64,
    /// The last size [`transmit`](Self::transmit) timed and its serialisation time
    /// (`(0, 0)` at first, which is right: no bytes take no time). A link direction
    /// carries mostly one size, full segments or ACKs, so this spares the 128-bit
    /// multiply for nearly every packet.
    tx_memo: (u32, u64),
    /// `params.limit`, beside the counters it is checked against.
    limit: QueueLimit,
    egress: Option<Box<Egress>>,
    /// Node the link leads to.
    pub to: usize,
    queued_pkts: u32,
    /// Whether `loss` can lose anything (most links: no), so the per-packet path
    /// skips the call.
    lossy: bool,
    /// Arrivals are counted by [`settle`](Self::settle), not by events.
    cut_through: bool,
    // Third line on: the counters (their per-packet ones first).
    /// Counters.
    pub stats: LinkStats,
    // Cold.
    /// Serialisation time per byte, ns, in 32.32 fixed point (rounded up), so the
    /// per-packet path multiplies instead of dividing.
    ns_per_byte_fp: u128,
    loss: LossProcess,
    /// Node the link leads from.
    pub from: usize,
    /// Parameters.
    pub params: LinkParams,
}

// The layout above: what one packet reads of a link in its first three lines.
const _: () = assert!(std::mem::offset_of!(Link, cut_through) < 128);
const _: () = assert!(std::mem::offset_of!(Link, stats) == 128);
const _: () = assert!(std::mem::offset_of!(LinkStats, max_queue_pkts) + 4 <= 64);

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
            tx_memo: (0, 0),
            limit: params.limit,
            egress: params
                .egress
                .as_ref()
                .map(|e| Box::new(Egress::new(e, params.rate, seed, stream))),
            loss: LossProcess::new(params.loss, seed, stream),
            lossy: params.loss != LossModel::None,
            params,
            from,
            to,
            ring: Ring::new(),
            departed: 0,
            queued_pkts: 0,
            queued_bytes: 0,
            busy_until: 0,
            clock: 0,
            cut_through: false,
            stats: LinkStats::default(),
        }
    }

    /// Moves packets whose transmission finished by `now` out of the queue count.
    #[inline]
    fn advance(&mut self, now: u64) {
        self.clock = self.clock.max(now);
        if now >= self.busy_until && self.egress.is_none() {
            // The transmitter of a FIFO link is idle: everything it holds has left
            // the queue (a link that never queues, as most do not, takes this way
            // every time). Not so on a scheduled link: packets may wait in its
            // classes, outside the ring, for the event that starts the next one.
            self.departed = self.ring.tail();
            self.queued_pkts = 0;
            self.queued_bytes = 0;
            return;
        }
        while let Some(e) = self.ring.get(self.departed) {
            if e.finish > now {
                break;
            }
            self.queued_pkts -= 1;
            self.queued_bytes -= u64::from(e.size);
            self.departed += 1;
        }
    }

    /// Offers packet `pkt` of `size` bytes at `now` (which, downstream of a
    /// cut-through link, may be ahead of the simulation clock; offers come in time
    /// order either way).
    #[inline(always)]
    pub fn enqueue(&mut self, now: Instant, pkt: PacketId, size: u32) -> Enqueued {
        let now = now.as_nanos();
        match self.admit(now, size) {
            Ok(()) => {
                let was_empty = self.ring.is_empty();
                let arrive = self.transmit(now, now.max(self.busy_until), pkt, size);
                Enqueued::Accepted(was_empty.then(|| Instant::from_nanos(arrive)))
            }
            Err(e) => e,
        }
    }

    /// Makes this a cut-through link: the caller passes its packets on at once, with
    /// [`enqueue_through`](Self::enqueue_through), and schedules no arrival events.
    /// Call before the first packet.
    pub fn set_cut_through(&mut self) {
        debug_assert!(self.ring.is_empty() && self.egress.is_none());
        self.cut_through = true;
    }

    /// Whether this is a cut-through link.
    pub fn is_cut_through(&self) -> bool {
        self.cut_through
    }

    /// Offers packet `pkt` of `size` bytes at `now` to a cut-through link; returns
    /// when it reaches the far end, or why it was dropped. The packet's arrival is
    /// counted once the clock has got there ([`settle`](Self::settle), which readers
    /// of the counters call first). An offer settles only when the ring is full, to
    /// make room without growing it, and then up to `clock`, the simulation's time.
    /// (A ring that has filled stays nearly full, so in a long run this is about one
    /// settle per offer, as before; what it spares is the walk while the ring has
    /// room. `now` may be ahead of `clock` when an upstream cut-through link feeds
    /// this one: counting up to `now` would show a sample taken in between arrivals
    /// that have not happened yet.)
    #[inline(always)]
    pub fn enqueue_through(
        &mut self,
        now: Instant,
        clock: Instant,
        pkt: PacketId,
        size: u32,
    ) -> Result<Instant, Enqueued> {
        debug_assert!(self.cut_through && clock <= now);
        let now = now.as_nanos();
        if self.ring.is_full() {
            self.settle_ns(clock.as_nanos());
        }
        self.admit(now, size)?;
        Ok(Instant::from_nanos(self.transmit(
            now,
            now.max(self.busy_until),
            pkt,
            size,
        )))
    }

    /// Counts the arrivals of a cut-through link up to `now` (a no-op on other links,
    /// whose arrivals are events).
    pub fn settle(&mut self, now: Instant) {
        if self.cut_through {
            self.settle_ns(now.as_nanos());
        }
    }

    #[inline(always)]
    fn settle_ns(&mut self, now: u64) {
        while self.ring.front().is_some_and(|e| e.arrive <= now) {
            self.retire_head();
        }
    }

    /// Loss, then the DropTail limit, for a packet of `size` bytes offered at `now`;
    /// on success the packet is counted in the queue.
    // Forced inline: with the idle-transmitter shortcut in `advance` LLVM stopped
    // inlining it, and the call (one per link a packet crosses) cost 3 % of the
    // reference bench's instructions.
    #[inline(always)]
    fn admit(&mut self, now: u64, size: u32) -> Result<(), Enqueued> {
        if self.lossy && self.loss.lose() {
            self.stats.drops_loss += 1;
            return Err(Enqueued::Lost);
        }
        self.advance(now);
        let full = match self.limit {
            QueueLimit::Packets(n) => self.queued_pkts >= n,
            QueueLimit::Bytes(b) => self.queued_bytes + u64::from(size) > b,
        };
        if full {
            self.stats.drops_queue += 1;
            return Err(Enqueued::Overflow);
        }
        self.stats.enqueued_pkts += 1;
        self.queued_pkts += 1;
        self.queued_bytes += u64::from(size);
        self.stats.max_queue_pkts = self.stats.max_queue_pkts.max(self.queued_pkts);
        Ok(())
    }

    /// Puts a packet that reached the link at `reached` on the wire at `start`; returns
    /// when it reaches the far end. The packet is already counted in the queue.
    #[inline(always)]
    fn transmit(&mut self, reached: u64, start: u64, pkt: PacketId, size: u32) -> u64 {
        let tx = if size == self.tx_memo.0 {
            self.tx_memo.1
        } else {
            let tx = self.tx_ns(size);
            self.tx_memo = (size, tx);
            tx
        };
        let finish = start + tx;
        let arrive = finish + self.delay_ns;
        self.busy_until = finish;
        self.stats.wait_ns += u128::from(start - reached);
        self.stats.busy_ns += finish - start;
        self.ring.push_back(InFlight {
            reached,
            finish,
            arrive,
            size,
            pkt,
        });
        arrive
    }

    /// Serialisation time of `size` bytes, ns, rounded up: a shift, not a (slow)
    /// 128-bit division.
    #[inline]
    fn tx_ns(&self, size: u32) -> u64 {
        ((u128::from(size) * self.ns_per_byte_fp + 0xffff_ffff) >> 32) as u64
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
        if self.lossy && self.loss.lose() {
            self.stats.drops_loss += 1;
            return Scheduled::Lost;
        }
        let t = now.as_nanos();
        self.advance(t);
        let busy = self.busy_until > t;
        let eg = self.egress.as_mut().expect("not a scheduled link");
        let admit = match eg.slot[usize::from(dscp & 63)] {
            Slot::Priority => eg.sched.offer_priority(now, (pkt, t), size, busy),
            Slot::Class(c) => eg.sched.offer(now, usize::from(c), (pkt, t), size, dscp),
        };
        match admit {
            Admit::Policed => {
                self.stats.drops_policed += 1;
                return Scheduled::Policed;
            }
            Admit::Full => {
                self.stats.drops_queue += 1;
                self.count_af_drop(dscp);
                return Scheduled::Overflow;
            }
            Admit::Early => {
                self.stats.drops_red += 1;
                self.count_af_drop(dscp);
                return Scheduled::Early;
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

    /// Counts an egress drop of a packet of DSCP `dscp` by its AF drop precedence.
    fn count_af_drop(&mut self, dscp: u8) {
        if let Some(p) = af_drop_precedence(dscp) {
            self.stats.drops_af[usize::from(p) - 1] += 1;
        }
    }

    /// The transmitter of a scheduled link is free at `now`: puts the next waiting
    /// packet on the wire. Returns the arrival event to schedule (if the ring was
    /// empty) and when the transmitter is free again; `None` if nothing waits.
    pub fn start_next(&mut self, now: Instant) -> Option<(Option<Instant>, Instant)> {
        let ((pkt, reached), size) = self.egress.as_mut()?.sched.dequeue(now)?;
        let t = now.as_nanos();
        let was_empty = self.ring.is_empty();
        let arrive = self.transmit(reached, t, pkt, size);
        Some((
            was_empty.then(|| Instant::from_nanos(arrive)),
            Instant::from_nanos(self.busy_until),
        ))
    }

    /// Removes the head packet, which arrives at `now`; returns it and the new head, if
    /// any: its arrival time (the caller schedules it) and its packet (which the caller
    /// will read then).
    #[inline]
    pub fn pop_arrival(&mut self, now: Instant) -> (PacketId, Option<(Instant, PacketId)>) {
        debug_assert!(!self.cut_through);
        let head = self.retire_head();
        debug_assert_eq!(head.arrive, now.as_nanos());
        (
            head.pkt,
            self.ring
                .front()
                .map(|e| (Instant::from_nanos(e.arrive), e.pkt)),
        )
    }

    /// Takes the head off the ring and counts it delivered.
    #[inline]
    fn retire_head(&mut self) -> InFlight {
        let at = self.ring.head();
        let head = self.ring.pop_front().expect("arrival without a packet");
        // The head finished transmission before it arrived. If `advance` has not
        // counted it out of the queue yet, do it here instead of running the loop.
        if self.departed == at {
            self.departed = at + 1;
            self.queued_pkts -= 1;
            self.queued_bytes -= u64::from(head.size);
        }
        self.stats.delivered_pkts += 1;
        self.stats.delivered_bytes += u64::from(head.size);
        head
    }

    /// Packets and bytes in the queue (waiting or being sent) at `now`. When offers
    /// have run ahead of `now` (downstream of a cut-through link) the counters hold a
    /// future state, so the ring is read instead: every packet that left it had
    /// arrived by `now`.
    fn occupancy(&mut self, now: u64) -> (u32, u64) {
        if now >= self.clock {
            self.advance(now);
            return (self.queued_pkts, self.queued_bytes);
        }
        self.ring
            .iter()
            .filter(|e| e.reached <= now && now < e.finish)
            .fold((0, 0), |(p, b), e| (p + 1, b + u64::from(e.size)))
    }

    /// Packets in the queue at `now` (waiting or being sent).
    pub fn queue_pkts(&mut self, now: Instant) -> u32 {
        self.occupancy(now.as_nanos()).0
    }

    /// Whether the DropTail queue at `now` could not take a packet of `size` bytes
    /// and one more after it (ns-2's Snoop caches only below `limit - 1`). Scheduled
    /// links answer for their total backlog against the limit.
    pub fn nearly_full(&mut self, now: Instant, size: u32) -> bool {
        let (pkts, bytes) = self.occupancy(now.as_nanos());
        match self.limit {
            QueueLimit::Packets(n) => pkts + 1 >= n,
            QueueLimit::Bytes(b) => bytes + 2 * u64::from(size) > b,
        }
    }

    /// Bytes in the queue at `now`.
    pub fn queue_bytes(&mut self, now: Instant) -> u64 {
        self.occupancy(now.as_nanos()).1
    }

    /// Transmitter busy time up to `end`, ns (for utilisation).
    pub fn busy_ns_until(&self, end: Instant) -> u64 {
        let end = end.as_nanos();
        if end >= self.clock {
            // Every packet was offered by `end`, so the transmitter is busy without a
            // break from `end` to `busy_until`.
            return self.stats.busy_ns - self.busy_until.saturating_sub(end);
        }
        // Offers ran ahead of `end`: subtract what the ring sends after it (every
        // packet that left the ring finished before `end`).
        let after: u64 = self
            .ring
            .iter()
            .filter(|e| e.finish > end)
            .map(|e| e.finish - (e.finish - self.tx_ns(e.size)).max(end))
            .sum();
        self.stats.busy_ns - after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The simulator's link and the shared FIFO model (`longhaul_model::fifo`, which
    /// the emulator runs) are one model: offered the same packets at the same times,
    /// with the same loss stream, they deliver each at the same nanosecond and drop
    /// the same ones, for either kind of queue limit.
    #[test]
    fn the_simulators_link_is_the_shared_fifo_model() {
        use longhaul_model::fifo::{Direction, DirectionConfig, LinkRate, Verdict};
        use rand::{Rng, SeedableRng};
        for limit in [QueueLimit::Packets(8), QueueLimit::Bytes(9_000)] {
            let rate = Bandwidth::from_mbps(100);
            let delay = Duration::from_micros(2_500);
            let loss = LossModel::Bernoulli { p: 0.02 };
            let params = LinkParams {
                name: "l".into(),
                rate,
                delay,
                limit,
                loss,
                egress: None,
                wireless: false,
            };
            let mut sim = Link::new(params, 0, 1, 42, 0);
            sim.set_cut_through();
            let mut model = Direction::new(
                &DirectionConfig::fifo(LinkRate::Constant(rate), delay, loss, limit),
                42,
            );
            // Bursts that overflow the queue, with gaps that let it drain.
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
            let mut at = 0u64;
            let (mut delivered, mut lost, mut overflowed) = (0, 0, 0);
            for i in 0..20_000u32 {
                at += if rng.gen_bool(0.1) {
                    rng.gen_range(0..2_000_000)
                } else {
                    rng.gen_range(0..60_000)
                };
                let size = rng.gen_range(40..=1500u32);
                let now = Instant::from_nanos(at);
                let ours = sim.enqueue_through(now, now, i, size);
                match (ours, model.handle_arrival(now, size as usize)) {
                    (Ok(a), Verdict::Deliver(b)) => {
                        assert_eq!(a, b.at, "packet {i} ({limit:?})");
                        delivered += 1;
                    }
                    (Err(Enqueued::Lost), Verdict::Lost) => lost += 1,
                    (Err(Enqueued::Overflow), Verdict::Overflow) => overflowed += 1,
                    (a, b) => panic!("packet {i} ({limit:?}): simulator {a:?}, model {b:?}"),
                }
            }
            // Every fate was exercised.
            assert!(
                delivered > 10_000 && lost > 100 && overflowed > 100,
                "{delivered} {lost} {overflowed}"
            );
        }
    }

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

    /// A packet offered to a scheduled link at the very nanosecond its transmitter
    /// frees up (before the event for the end of that transmission has run) finds
    /// the packets waiting in its classes still counted.
    #[test]
    fn a_scheduled_link_counts_what_waits_in_its_classes() {
        use crate::diffserv::sched::ClassConfig;
        let mut l = link(QueueLimit::Packets(100));
        l.params.egress = Some(EgressSpec {
            priority: None,
            classes: vec![(
                vec![],
                ClassConfig {
                    bandwidth: Bandwidth::from_mbps(8),
                    limit_pkts: 10,
                },
            )],
            red: vec![],
        });
        l = Link::new(l.params.clone(), 0, 1, 1, 0);
        let t0 = Instant::from_nanos(0);
        let done = match l.enqueue_scheduled(t0, 1, 1000, 0) {
            Scheduled::Started { done, .. } => done,
            other => panic!("{other:?}"),
        };
        assert_eq!(l.enqueue_scheduled(t0, 2, 1000, 0), Scheduled::Queued);
        assert_eq!(l.enqueue_scheduled(t0, 3, 1000, 0), Scheduled::Queued);
        assert_eq!(l.queue_pkts(t0), 3);
        // At `done`: packet 1 has left, 4 joins, and the free transmitter takes 2.
        assert!(matches!(
            l.enqueue_scheduled(done, 4, 1000, 0),
            Scheduled::Started { .. }
        ));
        assert_eq!(l.queue_pkts(done), 3, "2 on the wire, 3 and 4 waiting");
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
        assert_eq!((p, next), (1, Some((Instant::from_nanos(1_600_000), 2))));
        assert_eq!(l.stats.wait_ns, 1_000_000);
        let (p, next) = l.pop_arrival(Instant::from_nanos(1_600_000));
        assert_eq!((p, next), (2, None));
        assert_eq!(l.queue_pkts(Instant::from_nanos(1_600_000)), 0);
    }

    /// Offers that run ahead of the clock (after a cut-through hop) are read back at
    /// the time asked: the queue then, and the busy time up to then.
    #[test]
    fn state_read_behind_the_latest_offer() {
        let mut l = link(QueueLimit::Packets(10));
        // 1000-byte packets take 1 ms; offered at 0, 0.5 and 5 ms.
        for (t, p) in [(0, 1), (500_000, 2), (5_000_000, 3)] {
            assert!(matches!(
                l.enqueue(Instant::from_nanos(t), p, 1000),
                Enqueued::Accepted(_)
            ));
        }
        let at = |ms: f64| Instant::from_nanos((ms * 1e6) as u64);
        assert_eq!(l.queue_pkts(at(0.25)), 1);
        assert_eq!(l.queue_pkts(at(0.75)), 2);
        assert_eq!(l.queue_bytes(at(1.5)), 1000);
        assert_eq!(l.queue_pkts(at(3.0)), 0);
        assert_eq!(l.busy_ns_until(at(1.5)), 1_500_000);
        assert_eq!(l.busy_ns_until(at(4.0)), 2_000_000);
        assert_eq!(l.busy_ns_until(at(5.5)), 2_500_000);
        // Caught up with the latest offer, the counters answer directly.
        assert_eq!(l.queue_pkts(at(5.5)), 1);
        assert_eq!(l.queue_pkts(at(6.0)), 0);
    }

    /// A cut-through link returns each packet's arrival time and counts it delivered
    /// only once the clock has got there.
    #[test]
    fn cut_through_counts_arrivals_when_they_happen() {
        let mut l = link(QueueLimit::Packets(2));
        l.set_cut_through();
        let t0 = Instant::ZERO;
        assert_eq!(
            l.enqueue_through(t0, t0, 1, 1000),
            Ok(Instant::from_nanos(1_100_000))
        );
        assert_eq!(
            l.enqueue_through(t0, t0, 2, 500),
            Ok(Instant::from_nanos(1_600_000))
        );
        assert_eq!(l.enqueue_through(t0, t0, 3, 500), Err(Enqueued::Overflow));
        l.settle(Instant::from_nanos(1_599_999));
        assert_eq!(l.stats.delivered_pkts, 1);
        l.settle(Instant::from_nanos(1_600_000));
        assert_eq!((l.stats.delivered_pkts, l.stats.delivered_bytes), (2, 1500));
        assert_eq!(l.queue_pkts(Instant::from_nanos(1_600_000)), 0);
        // The queue has room again: its packets have left.
        let us = |x: u64| Instant::from_nanos(x * 1000);
        assert_eq!(l.enqueue_through(us(2000), us(2000), 4, 1000), Ok(us(3100)));
        assert_eq!(l.stats.drops_queue, 1);
    }

    /// A cut-through link settles its arrivals on an offer only once its ring is
    /// full, and then only up to the clock: an offer ahead of the clock (from an
    /// upstream cut-through link) must not count an arrival a sample taken in
    /// between would then see.
    #[test]
    fn a_full_cut_through_ring_settles_up_to_the_clock() {
        let mut l = link(QueueLimit::Packets(100));
        l.set_cut_through();
        let ms = |x: u64| Instant::from_nanos(x * 1_000_000);
        // Eight packets 2 ms apart, each arriving 1.1 ms after it is offered: the
        // ring (eight slots) fills, and nothing is counted yet.
        for i in 0..8 {
            let arrive = l.enqueue_through(ms(2 * i), ms(2 * i), i as u32, 1000);
            assert_eq!(arrive, Ok(ms(2 * i) + Duration::from_micros(1100)));
        }
        assert_eq!(l.stats.delivered_pkts, 0);
        // The clock is at 15 ms, the offer at 16.5 ms: packets 0-6 arrived by
        // 13.1 ms, packet 7 arrives at 15.1 ms, between the two.
        let at = l.enqueue_through(ms(16) + Duration::from_micros(500), ms(15), 8, 1000);
        assert_eq!(at, Ok(ms(17) + Duration::from_micros(600)));
        assert_eq!(l.stats.delivered_pkts, 7);
        l.settle(ms(15) + Duration::from_micros(100));
        assert_eq!(l.stats.delivered_pkts, 8);
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
