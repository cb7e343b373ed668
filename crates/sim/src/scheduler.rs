//! The event list, ordered by `(time, insertion sequence)`: two queues, one for the
//! links' events and one for everything else, each a sorted list while it is short
//! (as a packet-level run keeps it), a binary heap when it grows long.
//!
//! Ties always break in insertion order, so a run is a pure function of its inputs,
//! except that observers (samples, traces) go after every other event of their
//! instant ([`Scheduler::schedule_last`]).
//! The scheduler is a plain value owned by one [`crate::Simulation`]; nothing is
//! global, and many simulations run side by side on different threads.
//!
//! The list stays small by design: a link keeps its in-flight packets in its own FIFO
//! and has at most one event here (for its head packet), and each endpoint has at
//! most one live timer event. So the list holds about one entry per link and per
//! endpoint, whatever the window sizes (four or five in the reference scenario).
//!
//! **Why two queues.** With many flows the list is long, but not with link events:
//! a thousand TCP senders keep a thousand retransmission timers pending, each due a
//! timeout away and re-armed lazily, while the links with a packet on the way are a
//! handful. A link event is nearly always due before every timer, so in one heap it
//! sifted up past all of them when scheduled and its successor sifted down again
//! when it ran: on a 1000-pair dumbbell, a fifth of the run. Apart, link events
//! stay in a short sorted list and the timers' heap is touched only by timers. Both
//! queues order by the same `(time, seq)` key and the next event is the earlier of
//! their two heads, so events come out in exactly the order one list gives.

use longhaul_proto::Instant;

/// What happens when an event fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The head packet of a link arrives at the far end.
    LinkArrival(u32),
    /// A scheduled link's transmitter is free (DiffServ egress).
    LinkTxDone(u32),
    /// An endpoint's timer: flow index and side (0 = sender, 1 = receiver).
    Timer(u32, u8),
    /// A flow starts.
    FlowStart(u32),
    /// A UDP source sends its next packet.
    UdpSend(u32),
    /// Metrics are sampled.
    Sample,
    /// A trace sample (cwnd, RTT) is taken.
    Trace,
    /// A base station's processor finished its current packet.
    StationDone(u16),
    /// A base station's adaptive policy decides.
    StationAdapt(u16),
    /// A Snoop agent's local timer (by flow).
    SnoopTimer(u32),
    /// A transfer starts, or its disk or CPU let more bytes through, or its
    /// destination disk has written the last byte.
    TransferWake(u32),
    /// A transfer's control request may need sending again.
    ControlTimer(u32),
}

/// A heap entry. `key` packs `(time, seq)` into one integer (time in the high 64
/// bits) so that ordering is a single comparison; the event never takes part.
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: u128,
    event: Event,
}

impl Entry {
    fn time(&self) -> u64 {
        (self.key >> 64) as u64
    }
}

fn key(time: Instant, seq: u64) -> u128 {
    (u128::from(time.as_nanos()) << 64) | u128::from(seq)
}

/// The sequence bit of events scheduled with [`Scheduler::schedule_last`].
const OBSERVER: u64 = 1 << 63;

/// Lists up to this long are kept sorted; a list that grows past it becomes a heap.
const SORTED_MAX: usize = 32;
/// A heap that shrinks to this is sorted again (well below [`SORTED_MAX`], so a list
/// near the boundary does not switch back and forth).
const SORTED_AGAIN: usize = 8;

/// A deterministic event queue in one of two shapes, chosen by its length.
///
/// **Short queues are sorted**, earliest first from a moving front (`list[front..]`),
/// so the next event is at the front and taking it only moves the front on. A
/// packet-level run keeps its queues short by design (one entry per link and
/// endpoint, see the module notes), and what it schedules is mostly due after
/// everything already pending: on a 1000-pair dumbbell the links' queue holds four
/// or five entries, and a new one (a link passing the turn to its next packet, a
/// packet crossing a hop) goes behind three of them in most insertions. So inserting
/// scans from the back, past the entries due after it (none or one, mostly), and
/// moves as many. A binary heap pays a full sift-down (two or three levels, each a
/// pair of loads and compares) for every such event instead.
///
/// **Long queues are a binary min-heap**, fronted by a one-entry "next" slot that
/// holds an entry earlier than everything in the heap: events due before anything
/// pending go to the slot and out of it again without touching the heap. A sorted
/// list would cost a scan and a move proportional to its length per insertion.
///
/// Both order entries by the same unique `(time, seq)` key, so events come out in
/// the same order whichever shape the queue has, and switching shapes (a sorted
/// list, earliest first, is a valid heap) changes nothing a run can observe.
///
/// The heap is hand-written rather than `std`'s `BinaryHeap<Reverse<_>>` because a
/// link passing the turn to its next packet wants an in-place replace of the top with
/// one sift-down, and the single-integer key keeps every comparison one instruction.
#[derive(Debug, Default)]
struct Queue {
    /// Heap shape only: an entry earlier than everything in `list`.
    next: Option<Entry>,
    /// Sorted earliest first from `front`, or a binary min-heap (see `heap`).
    list: Vec<Entry>,
    /// Sorted shape: where the entries start (those before it were taken). Zero in
    /// the heap shape.
    front: usize,
    /// Whether `list` is a heap.
    heap: bool,
}

/// A sorted list's taken entries are dropped from its start once this many have
/// gathered, moving the few pending ones back to the beginning.
const FRONT_MAX: usize = 64;

impl Queue {
    /// The earliest entry.
    #[inline(always)]
    fn head(&self) -> Option<&Entry> {
        if self.heap {
            self.next.as_ref().or(self.list.first())
        } else {
            self.list.get(self.front)
        }
    }

    #[inline(always)]
    fn insert(&mut self, key: u128, event: Event) {
        if self.heap {
            self.insert_heap(key, event);
        } else {
            self.insert_sorted(key, event);
        }
    }

    /// Sorted shape: the entry goes before every later one, found by scanning from
    /// the back (most new events are due after everything pending).
    #[inline(always)]
    fn insert_sorted(&mut self, key: u128, event: Event) {
        if self.list.len() - self.front == SORTED_MAX {
            self.become_heap();
            self.insert_heap(key, event);
            return;
        }
        self.list.push(Entry { key, event });
        let list = &mut self.list[..];
        let mut at = list.len() - 1;
        while at > self.front && list[at - 1].key > key {
            list[at] = list[at - 1];
            at -= 1;
        }
        list[at].key = key;
        list[at].event = event;
    }

    // The new entry's fields are written straight into their slot rather than built in
    // a temporary and copied: the copy's wide loads would read back narrower stores
    // still in flight, a store-forwarding stall that perf showed as the hottest
    // instruction of the forwarding path.
    #[inline(always)]
    fn insert_heap(&mut self, key: u128, event: Event) {
        match &mut self.next {
            Some(n) if key < n.key => {
                let old = *n;
                n.key = key;
                n.event = event;
                self.push_heap(old);
            }
            Some(_) => self.push_heap(Entry { key, event }),
            None if self.list.first().is_none_or(|h| key < h.key) => {
                self.next = Some(Entry { key, event });
            }
            None => self.push_heap(Entry { key, event }),
        }
    }

    /// A full sorted list becomes a heap: earliest first, it already is one.
    #[cold]
    fn become_heap(&mut self) {
        self.compact();
        self.heap = true;
    }

    /// A heap that has shrunk is sorted again, the slot's entry with the rest.
    #[cold]
    fn become_sorted(&mut self) {
        self.list.extend(self.next.take());
        self.list.sort_unstable_by_key(|e| e.key);
        self.heap = false;
    }

    /// Sorted shape: drops the entries already taken from the start of `list`.
    #[cold]
    fn compact(&mut self) {
        self.list.drain(..self.front);
        self.front = 0;
    }

    /// Removes the earliest entry.
    #[inline(always)]
    fn pop_head(&mut self) {
        if !self.heap {
            self.front += 1;
            if self.front == self.list.len() {
                self.list.clear();
                self.front = 0;
            } else if self.front == FRONT_MAX {
                self.compact();
            }
            return;
        }
        if self.next.take().is_none() {
            let Some(last) = self.list.pop() else { return };
            if !self.list.is_empty() {
                self.list[0] = last;
                self.sift_down(0);
            }
        }
        if self.list.len() <= SORTED_AGAIN {
            self.become_sorted();
        }
    }

    /// Replaces the earliest entry with `(key, event)`, which is due after it: in a
    /// heap, at most one sift instead of a pop and a push.
    #[inline(always)]
    fn replace_head(&mut self, key: u128, event: Event) {
        if !self.heap {
            debug_assert!(
                self.front < self.list.len(),
                "replace_current without an event"
            );
            self.pop_head();
            self.insert_sorted(key, event);
        } else if self.next.take().is_some() {
            self.insert_heap(key, event);
        } else if let Some(top) = self.list.first_mut() {
            top.key = key;
            top.event = event;
            self.sift_down(0);
        }
    }

    fn push_heap(&mut self, e: Entry) {
        self.list.push(e);
        self.sift_up(self.list.len() - 1);
    }

    fn sift_up(&mut self, mut i: usize) {
        let e = self.list[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.list[parent].key <= e.key {
                break;
            }
            self.list[i] = self.list[parent];
            i = parent;
        }
        self.list[i] = e;
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.list.len();
        let e = self.list[i];
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.list[r].key < self.list[l].key {
                r
            } else {
                l
            };
            if e.key <= self.list[c].key {
                break;
            }
            self.list[i] = self.list[c];
            i = c;
        }
        self.list[i] = e;
    }

    fn len(&self) -> usize {
        self.list.len() - self.front + usize::from(self.next.is_some())
    }
}

/// The simulation's event list: the links' events and the rest, in two queues
/// (see the module notes), with one clock and one sequence.
#[derive(Debug, Default)]
pub struct Scheduler {
    /// Link arrivals and transmitters freeing up.
    links: Queue,
    /// Every other event.
    rest: Queue,
    /// Whether the current event (the last [`peek_until`](Self::peek_until)
    /// returned) is the head of `links`.
    current_in_links: bool,
    seq: u64,
    now: Instant,
    executed: u64,
}

/// Whether `event` belongs in the links' queue.
#[inline(always)]
fn is_link_event(event: Event) -> bool {
    matches!(event, Event::LinkArrival(_) | Event::LinkTxDone(_))
}

impl Scheduler {
    /// An empty scheduler at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The time of the event being executed.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events popped so far.
    pub fn executed(&self) -> u64 {
        self.executed
    }

    /// Schedules `event` at `time` (never before now).
    pub fn schedule(&mut self, time: Instant, event: Event) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        self.seq += 1;
        self.insert(key(time, self.seq), event);
    }

    /// Schedules `event` at `time` after every other event at that time, whenever
    /// they were scheduled: for observers (metric samples, traces), which then see the
    /// state once everything due at their instant has happened. A host that runs
    /// ahead of the clock (see `Simulation`'s early hosts) can then tell which of
    /// its packets an observation must not see without knowing when the observer's
    /// event was scheduled.
    pub fn schedule_last(&mut self, time: Instant, event: Event) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        self.seq += 1;
        // Sequence numbers count from 1 and never reach 2^63; the top bit sorts an
        // observer after every ordinary event of its instant, and observers among
        // themselves in the order they were scheduled.
        self.insert(key(time, self.seq | OBSERVER), event);
    }

    #[inline(always)]
    fn insert(&mut self, key: u128, event: Event) {
        if is_link_event(event) {
            self.links.insert(key, event);
        } else {
            self.rest.insert(key, event);
        }
    }

    /// Pops the next event at or before `until`, advancing the clock to it.
    pub fn pop_until(&mut self, until: Instant) -> Option<Event> {
        let e = self.peek_until(until)?;
        self.pop_current();
        Some(e)
    }

    /// Returns the next event at or before `until` and advances the clock to it, but
    /// leaves it pending: the caller must then call exactly one of
    /// [`pop_current`](Self::pop_current) or [`replace_current`](Self::replace_current)
    /// before scheduling anything else.
    #[inline(always)]
    pub fn peek_until(&mut self, until: Instant) -> Option<Event> {
        let (head, in_links) = match (self.links.head(), self.rest.head()) {
            (Some(l), Some(r)) if r.key < l.key => (r, false),
            (Some(l), _) => (l, true),
            (None, r) => (r?, false),
        };
        if head.time() > until.as_nanos() {
            return None;
        }
        self.now = Instant::from_nanos(head.time());
        self.current_in_links = in_links;
        self.executed += 1;
        Some(head.event)
    }

    /// Removes the event [`peek_until`](Self::peek_until) returned.
    pub fn pop_current(&mut self) {
        if self.current_in_links {
            self.links.pop_head();
        } else {
            self.rest.pop_head();
        }
    }

    /// Replaces the event [`peek_until`](Self::peek_until) returned with `event` at
    /// `time`: in a heap, at most one sift instead of a pop and a push. A link uses it
    /// to pass the turn to its next packet.
    pub fn replace_current(&mut self, time: Instant, event: Event) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        self.seq += 1;
        let key = key(time, self.seq);
        match (self.current_in_links, is_link_event(event)) {
            (true, true) => self.links.replace_head(key, event),
            (false, false) => self.rest.replace_head(key, event),
            _ => {
                self.pop_current();
                self.insert(key, event);
            }
        }
    }

    /// Entries pending.
    pub fn len(&self) -> usize {
        self.links.len() + self.rest.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_break_in_insertion_order() {
        let mut s = Scheduler::new();
        let t = Instant::from_nanos(5);
        s.schedule(t, Event::Sample);
        s.schedule(Instant::from_nanos(3), Event::Trace);
        s.schedule(t, Event::FlowStart(9));
        s.schedule(t, Event::LinkArrival(0));
        let order: Vec<_> = std::iter::from_fn(|| s.pop_until(Instant::MAX)).collect();
        assert_eq!(
            order,
            vec![
                Event::Trace,
                Event::Sample,
                Event::FlowStart(9),
                Event::LinkArrival(0)
            ]
        );
        assert_eq!(s.now(), t);
        assert_eq!(s.executed(), 4);
    }

    #[test]
    fn replace_current_keeps_the_order() {
        let mut s = Scheduler::new();
        s.schedule(Instant::from_nanos(1), Event::LinkArrival(0));
        s.schedule(Instant::from_nanos(4), Event::Sample);
        assert_eq!(s.peek_until(Instant::MAX), Some(Event::LinkArrival(0)));
        s.replace_current(Instant::from_nanos(4), Event::LinkArrival(0));
        // Same time as Sample but inserted later: Sample first.
        assert_eq!(s.pop_until(Instant::MAX), Some(Event::Sample));
        assert_eq!(s.pop_until(Instant::MAX), Some(Event::LinkArrival(0)));
        assert!(s.is_empty());
    }

    #[test]
    fn many_events_come_out_sorted() {
        let mut s = Scheduler::new();
        let mut x: u64 = 12345;
        let mut expect = vec![];
        for i in 0..5000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let t = (x >> 40) % 1000;
            s.schedule(Instant::from_nanos(t), Event::FlowStart(i));
            expect.push((t, i));
        }
        expect.sort();
        let got: Vec<(u64, u32)> = std::iter::from_fn(|| {
            let e = s.pop_until(Instant::MAX)?;
            let Event::FlowStart(i) = e else {
                unreachable!()
            };
            Some((s.now().as_nanos(), i))
        })
        .collect();
        assert_eq!(got, expect);
    }

    /// Random schedules, pops and replaces against a sorted reference list, with the
    /// list growing to thousands of entries (a heap from 33 on in each queue).
    #[test]
    fn matches_a_reference_model() {
        check_against_model(|_| 3);
    }

    /// The same, with the list swinging between empty and about 50 entries (grown
    /// for 100 operations, shrunk for 300), so each queue changes shape, sorted to
    /// heap and back, many times on the way.
    #[test]
    fn matches_a_reference_model_across_shape_changes() {
        check_against_model(|id| if id % 400 < 100 { 3 } else { 12 });
    }

    /// Operation `id` schedules with probability `2 / ops(id)` (one time in four as
    /// an observer), else pops or replaces the next event (even odds). Events are
    /// link arrivals or flow starts at even odds, so both queues fill, and a replace
    /// may move the current event's successor to the other queue.
    fn check_against_model(ops: impl Fn(u32) -> u64) {
        let mut s = Scheduler::new();
        let (mut sorted_to_heap, mut heap_to_sorted) = ([0; 2], [0; 2]);
        // (time, observer, seq, event): observers go after everything else due at
        // their time, in the order they were scheduled.
        let mut model: Vec<(u64, bool, u64, Event)> = vec![];
        let mut seq = 0u64;
        let mut x: u64 = 99;
        let mut rand = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for id in 0..20_000u32 {
            let was_heap = [s.links.heap, s.rest.heap];
            let event = if rand(2) == 0 {
                Event::LinkArrival(id)
            } else {
                Event::FlowStart(id)
            };
            match rand(ops(id)) {
                0 | 1 => {
                    let t = s.now().as_nanos() + rand(50);
                    seq += 1;
                    let observer = rand(4) == 0;
                    if observer {
                        s.schedule_last(Instant::from_nanos(t), event);
                    } else {
                        s.schedule(Instant::from_nanos(t), event);
                    }
                    model.push((t, observer, seq, event));
                }
                _ => {
                    model.sort_by_key(|m| (m.0, m.1, m.2));
                    let Some(ev) = s.peek_until(Instant::MAX) else {
                        assert!(model.is_empty());
                        continue;
                    };
                    let (t, _, _, want) = model.remove(0);
                    assert_eq!((ev, s.now().as_nanos()), (want, t));
                    if rand(2) == 0 {
                        let t2 = t + rand(50);
                        seq += 1;
                        s.replace_current(Instant::from_nanos(t2), event);
                        model.push((t2, false, seq, event));
                    } else {
                        s.pop_current();
                    }
                }
            }
            assert_eq!(s.len(), model.len());
            for (q, now_heap) in [s.links.heap, s.rest.heap].into_iter().enumerate() {
                match (was_heap[q], now_heap) {
                    (false, true) => sorted_to_heap[q] += 1,
                    (true, false) => heap_to_sorted[q] += 1,
                    _ => {}
                }
            }
        }
        // Both shapes were exercised in both queues (the first model stays a heap
        // once it is one).
        for q in 0..2 {
            assert!(sorted_to_heap[q] >= 1, "queue {q}");
            if ops(0) != ops(399) {
                assert!(
                    sorted_to_heap[q] >= 5 && heap_to_sorted[q] >= 5,
                    "queue {q}: {sorted_to_heap:?} {heap_to_sorted:?}"
                );
            }
        }
    }

    #[test]
    fn pop_until_stops_at_the_horizon() {
        let mut s = Scheduler::new();
        s.schedule(Instant::from_nanos(10), Event::Sample);
        assert_eq!(s.pop_until(Instant::from_nanos(9)), None);
        assert_eq!(s.pop_until(Instant::from_nanos(10)), Some(Event::Sample));
    }
}
