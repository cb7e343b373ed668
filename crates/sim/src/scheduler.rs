//! The event list: a binary heap ordered by `(time, insertion sequence)`.
//!
//! Ties always break in insertion order, so a run is a pure function of its inputs.
//! The scheduler is a plain value owned by one [`crate::Simulation`]; nothing is
//! global, and many simulations run side by side on different threads.
//!
//! The heap stays small by design: a link keeps its in-flight packets in its own FIFO
//! and has at most one event here (for its head packet), and each endpoint has at
//! most one live timer event. So the heap holds about one entry per link and per
//! endpoint, whatever the window sizes, and push/pop cost stays at a few levels.

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

/// A deterministic event list: a binary min-heap of `Entry` in a `Vec`, fronted by
/// a one-entry "next" slot.
///
/// The slot holds an entry earlier than everything in the heap. Most events a
/// packet-level run schedules are due before anything already pending (a packet
/// crossing a short, fast hop; a reply sent in the same instant), and those go to the
/// slot and out of it again without touching the heap. The order of events is the
/// same as with the heap alone: the slot only ever holds the minimum.
///
/// The heap is hand-written rather than `std`'s `BinaryHeap<Reverse<_>>` because a
/// link passing the turn to its next packet wants an in-place replace of the top with
/// one sift-down, and the single-integer key keeps every comparison one instruction.
#[derive(Debug, Default)]
pub struct Scheduler {
    next: Option<Entry>,
    heap: Vec<Entry>,
    seq: u64,
    now: Instant,
    executed: u64,
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

    // The new entry's fields are written straight into their slot rather than built in
    // a temporary and copied: the copy's wide loads would read back narrower stores
    // still in flight, a store-forwarding stall that perf showed as the hottest
    // instruction of the forwarding path.
    #[inline(always)]
    fn insert(&mut self, key: u128, event: Event) {
        match &mut self.next {
            Some(n) if key < n.key => {
                let old = *n;
                n.key = key;
                n.event = event;
                self.push_heap(old);
            }
            Some(_) => self.push_heap(Entry { key, event }),
            None if self.heap.first().is_none_or(|h| key < h.key) => {
                self.next = Some(Entry { key, event });
            }
            None => self.push_heap(Entry { key, event }),
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
    pub fn peek_until(&mut self, until: Instant) -> Option<Event> {
        let head = self.next.as_ref().or(self.heap.first())?;
        if head.time() > until.as_nanos() {
            return None;
        }
        self.now = Instant::from_nanos(head.time());
        self.executed += 1;
        Some(head.event)
    }

    /// Removes the event [`peek_until`](Self::peek_until) returned.
    pub fn pop_current(&mut self) {
        if self.next.take().is_some() {
            return;
        }
        let Some(last) = self.heap.pop() else { return };
        if !self.heap.is_empty() {
            self.heap[0] = last;
            self.sift_down(0);
        }
    }

    /// Replaces the event [`peek_until`](Self::peek_until) returned with `event` at
    /// `time`: at most one sift instead of a pop and a push. A link uses it to pass
    /// the turn to its next packet.
    pub fn replace_current(&mut self, time: Instant, event: Event) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        self.seq += 1;
        let key = key(time, self.seq);
        if self.next.take().is_some() {
            self.insert(key, event);
        } else if let Some(top) = self.heap.first_mut() {
            top.key = key;
            top.event = event;
            self.sift_down(0);
        }
    }

    fn push_heap(&mut self, e: Entry) {
        self.heap.push(e);
        self.sift_up(self.heap.len() - 1);
    }

    fn sift_up(&mut self, mut i: usize) {
        let e = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].key <= e.key {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = e;
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        let e = self.heap[i];
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.heap[r].key < self.heap[l].key {
                r
            } else {
                l
            };
            if e.key <= self.heap[c].key {
                break;
            }
            self.heap[i] = self.heap[c];
            i = c;
        }
        self.heap[i] = e;
    }

    /// Entries pending.
    pub fn len(&self) -> usize {
        self.heap.len() + usize::from(self.next.is_some())
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

    /// Random schedules, pops and replaces against a sorted reference list.
    #[test]
    fn matches_a_reference_model() {
        let mut s = Scheduler::new();
        let mut model: Vec<(u64, u64, u32)> = vec![]; // (time, seq, id)
        let mut seq = 0u64;
        let mut x: u64 = 99;
        let mut rand = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for id in 0..20_000u32 {
            match rand(3) {
                0 | 1 => {
                    let t = s.now().as_nanos() + rand(50);
                    seq += 1;
                    s.schedule(Instant::from_nanos(t), Event::FlowStart(id));
                    model.push((t, seq, id));
                }
                _ => {
                    model.sort();
                    let Some(ev) = s.peek_until(Instant::MAX) else {
                        assert!(model.is_empty());
                        continue;
                    };
                    let (t, _, mid) = model.remove(0);
                    assert_eq!((ev, s.now().as_nanos()), (Event::FlowStart(mid), t));
                    if rand(2) == 0 {
                        let t2 = t + rand(50);
                        seq += 1;
                        s.replace_current(Instant::from_nanos(t2), Event::FlowStart(id));
                        model.push((t2, seq, id));
                    } else {
                        s.pop_current();
                    }
                }
            }
            assert_eq!(s.len(), model.len());
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
