//! One test harness for every engine (after quinn-proto's `Pair` and neqo's
//! simulated network): two ends of an [`Engine`] joined by a path with a one-way
//! delay, a rate, scripted loss, reordering and damage, run in virtual time.
//!
//! The ends are `ends[0]` (the side that opens, or sends) and `ends[1]`. Every
//! datagram either sends is recorded in `sent`; `drop`, `extra_delay` and `mangle`
//! decide its fate on the path; what the ends tell their applications is collected in
//! `events`, and an [`App`] may read data after every round of sending. The harness
//! holds engines to the promise of [`Transmit::more`]: when an end says it has no
//! more, a second poll must find nothing.
//!
//! Compiled for proto's own tests, and for other crates with the `testkit` feature.

use crate::engine::{Engine, Transmit};
use crate::time::{Duration, Instant};

/// What the applications at the two ends do between rounds (read, write more).
pub trait App<E: Engine> {
    /// Called for each end after it has sent what it could and its events were
    /// collected.
    fn after_flush(&mut self, side: usize, end: &mut E, now: Instant);

    /// Hands a datagram to end `side`: by default `handle_datagram`; an
    /// application that reads as datagrams arrive does it here.
    fn deliver(&mut self, _side: usize, end: &mut E, now: Instant, bytes: &[u8], wire_len: usize) {
        end.handle_datagram(now, bytes, wire_len);
    }
}

/// No application: nothing is read.
impl<E: Engine> App<E> for () {
    fn after_flush(&mut self, _side: usize, _end: &mut E, _now: Instant) {}
}

/// One direction of the path.
#[derive(Debug, Clone, Copy)]
pub struct Path {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Serialisation time per byte on the wire, ns (0: infinitely fast).
    pub ns_per_byte: u64,
    busy_until: Instant,
}

impl Path {
    /// A path of `delay` at `rate_mbps` (0: infinitely fast).
    pub fn new(delay: Duration, rate_mbps: u64) -> Self {
        Path {
            delay,
            ns_per_byte: 8_000u64.checked_div(rate_mbps).unwrap_or(0),
            busy_until: Instant::ZERO,
        }
    }
}

/// A datagram an end sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// When.
    pub at: Instant,
    /// The bytes written (a prefix of the datagram if its end was elided).
    pub bytes: Vec<u8>,
    /// Its length on the wire.
    pub wire_len: usize,
    /// Whether `drop` lost it.
    pub dropped: bool,
}

/// Decides, from the sending side, the index of the datagram among that side's and
/// its bytes, whether it is lost.
pub type DropRule = Box<dyn FnMut(usize, usize, &[u8]) -> bool>;
/// Delay added to one datagram beyond its path's (reordering), from the same inputs.
pub type DelayRule = Box<dyn FnMut(usize, usize, &[u8]) -> Duration>;
/// A rewrite of a datagram in flight.
pub type Mangle = dyn FnMut(&mut Vec<u8>);

struct InFlight {
    arrival: Instant,
    /// Send order, breaking ties of arrival time.
    order: u64,
    to: usize,
    bytes: Vec<u8>,
    wire_len: usize,
}

/// Two ends and the path between them (see the module doc).
pub struct Pair<E: Engine, A: App<E> = ()> {
    /// The two ends.
    pub ends: [E; 2],
    /// Virtual time.
    pub now: Instant,
    /// The path from each end (`paths[0]` carries what `ends[0]` sends).
    pub paths: [Path; 2],
    /// Every datagram each end sent, in order.
    pub sent: [Vec<Sent>; 2],
    /// Each end's events, with their times.
    pub events: [Vec<(Instant, E::Event)>; 2],
    /// Loss (none unless a test sets it).
    pub drop: DropRule,
    /// Reordering: extra delay per datagram (none unless a test sets it).
    pub extra_delay: DelayRule,
    /// Damage in flight (the identity unless a test sets it).
    pub mangle: Box<Mangle>,
    /// The applications.
    pub app: A,
    in_flight: Vec<InFlight>,
    order: u64,
    /// Room for the largest datagram, written into by `poll_transmit`.
    buf: Vec<u8>,
}

impl<E: Engine, A: App<E>> Pair<E, A> {
    /// Two ends over a symmetric path of `delay` one way at `rate_mbps` (0: no
    /// rate limit), with applications `app`.
    pub fn new(ends: [E; 2], delay: Duration, rate_mbps: u64, app: A) -> Self {
        Pair {
            ends,
            now: Instant::ZERO,
            paths: [Path::new(delay, rate_mbps); 2],
            sent: [vec![], vec![]],
            events: [vec![], vec![]],
            drop: Box::new(|_, _, _| false),
            extra_delay: Box::new(|_, _, _| Duration::ZERO),
            mangle: Box::new(|_| {}),
            app,
            in_flight: vec![],
            order: 0,
            buf: vec![0; 1 << 16],
        }
    }

    /// Datagrams on the path now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Each end sends all it has now (onto the path, through `drop` and
    /// `extra_delay`), its events are collected and its application runs.
    pub fn flush(&mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        for side in 0..2 {
            while let Some(tx) = self.ends[side].poll_transmit(self.now, &mut buf) {
                self.send(side, &buf, tx);
                if !tx.more {
                    // The hint's promise: nothing more until something happens.
                    assert_eq!(self.ends[side].poll_transmit(self.now, &mut buf), None);
                    break;
                }
            }
            while let Some(e) = self.ends[side].poll_event() {
                self.events[side].push((self.now, e));
            }
            self.app.after_flush(side, &mut self.ends[side], self.now);
        }
        self.buf = buf;
    }

    fn send(&mut self, side: usize, buf: &[u8], tx: Transmit) {
        let bytes = buf[..tx.written].to_vec();
        let index = self.sent[side].len();
        let path = &mut self.paths[side];
        // A lost datagram was still sent: it took its time on the sender's line.
        let start = self.now.max(path.busy_until);
        path.busy_until = start + Duration::from_nanos(path.ns_per_byte * tx.wire_len as u64);
        let arrival = path.busy_until + path.delay + (self.extra_delay)(side, index, &bytes);
        let dropped = (self.drop)(side, index, &bytes);
        if !dropped {
            self.order += 1;
            self.in_flight.push(InFlight {
                arrival,
                order: self.order,
                to: 1 - side,
                bytes: bytes.clone(),
                wire_len: tx.wire_len,
            });
        }
        self.sent[side].push(Sent {
            at: self.now,
            bytes,
            wire_len: tx.wire_len,
            dropped,
        });
    }

    /// The next thing that happens: a datagram arrives (the earliest, first sent
    /// first), or the ends' due timers fire. False when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.step_until(None)
    }

    fn step_until(&mut self, limit: Option<Instant>) -> bool {
        self.flush();
        let next_pkt = self
            .in_flight
            .iter()
            .enumerate()
            .min_by_key(|(_, p)| (p.arrival, p.order))
            .map(|(i, p)| (i, p.arrival));
        let next_timer = self.ends.iter().filter_map(|e| e.poll_timeout()).min();
        let t = match (next_pkt, next_timer) {
            (Some((_, p)), Some(tm)) => p.min(tm),
            (Some((_, p)), None) => p,
            (None, Some(tm)) => tm,
            (None, None) => return false,
        };
        if limit.is_some_and(|l| t > l) {
            return false;
        }
        self.now = self.now.max(t);
        match next_pkt {
            Some((i, p)) if p == t => {
                let d = self.in_flight.remove(i);
                self.deliver(d);
            }
            _ => {
                for e in &mut self.ends {
                    if e.poll_timeout().is_some_and(|d| d <= self.now) {
                        e.handle_timeout(self.now);
                    }
                }
            }
        }
        true
    }

    /// Hands a datagram to its end at `now`, through `mangle`; an elided end stays
    /// elided whatever was done to the bytes before it.
    fn deliver(&mut self, mut d: InFlight) {
        let elided = d.wire_len - d.bytes.len();
        (self.mangle)(&mut d.bytes);
        let wire_len = d.bytes.len() + elided;
        self.app
            .deliver(d.to, &mut self.ends[d.to], self.now, &d.bytes, wire_len);
    }

    /// Runs until nothing is left to happen, or until the next thing would happen
    /// after `limit`.
    pub fn run(&mut self, limit: Instant) {
        while self.step_until(Some(limit)) {}
    }

    /// A driver with a coarse clock: time moves on by `tick`, everything due by
    /// then happens at its end, datagrams first (in arrival order), then timers,
    /// as with an event loop that wakes once per `tick`.
    pub fn step_coarse(&mut self, tick: Duration) {
        self.flush();
        self.now += tick;
        let now = self.now;
        let mut due: Vec<InFlight> = vec![];
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].arrival <= now {
                due.push(self.in_flight.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|d| (d.arrival, d.order));
        for d in due {
            self.deliver(d);
        }
        for e in &mut self.ends {
            e.handle_timeout(now);
        }
    }
}

/// Damages about `percent` % of the datagrams it sees, from its own xorshift64
/// stream seeded with `seed`: a cut at a random length, a 32-bit word set to an
/// extreme (0, all ones, either side of 2^31: sequence numbers, lengths, ACK fields
/// and ranges far outside any window), or one to three bits flipped, half the time
/// within the first 64 bytes, where the headers are. For [`Pair::mangle`]: each
/// engine's property test runs a transfer through it and checks the engine neither
/// panics nor hangs.
pub fn damage(seed: u64, percent: u64) -> Box<Mangle> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    Box::new(move |b: &mut Vec<u8>| {
        if next() % 100 >= percent || b.is_empty() {
            return;
        }
        match next() % 4 {
            0 => b.truncate((next() as usize) % b.len()),
            1 => {
                let w = (next() as usize % (b.len() / 4).max(1)) * 4;
                let v = [0u32, u32::MAX, 0x7fff_ffff, 0x8000_0000][next() as usize % 4];
                if w + 4 <= b.len() {
                    b[w..w + 4].copy_from_slice(&v.to_be_bytes());
                }
            }
            _ => {
                for _ in 0..1 + next() % 3 {
                    let span = if next() % 2 == 0 {
                        b.len().min(64)
                    } else {
                        b.len()
                    };
                    let i = next() as usize % span;
                    b[i] ^= 1 << (next() % 8);
                }
            }
        }
    })
}
