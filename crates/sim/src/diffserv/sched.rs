//! Egress scheduling for a DiffServ router: a strict-priority, low-latency queue
//! (Cisco LLQ) in front of class-based deficit round robin.
//!
//! - **LLQ.** Served before anything else. Its configured rate is enforced by a token
//!   bucket (depth: the burst, 200 ms of the rate by default) *only under
//!   congestion*: a packet that arrives while the link is busy or other packets wait,
//!   and finds too few tokens, is dropped. Otherwise it is queued and the tokens are
//!   debited, down to zero at most (`reference/protocol-specs.md` §4).
//! - **Classes.** Deficit round robin (Shreedhar and Varghese) with a quantum
//!   proportional to each class's bandwidth, so backlogged classes share the link in
//!   proportion to their bandwidths. Each class is a FIFO with its own packet limit,
//!   DropTail or, for Assured Forwarding, RED/WRED in front of the limit
//!   (`longhaul_model::red`: one average per class queue, a profile per drop
//!   precedence, RFC 2597). Class 0 is the default class.
//!
//! The scheduler holds `(item, bytes)` pairs and never looks inside the items; the
//! link that owns it decides when the transmitter is free and asks for the next one.

use std::collections::VecDeque;

use longhaul_proto::{Bandwidth, Instant};

use longhaul_model::red::{af_drop_precedence, Red, RedVerdict};

use super::nanobits;

/// The low-latency queue's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlqConfig {
    /// The priority rate.
    pub rate: Bandwidth,
    /// The policer's burst, bytes.
    pub burst: u64,
}

impl LlqConfig {
    /// Cisco's default burst: 200 ms of the rate, clamped to 32..=2 000 000 bytes.
    pub fn with_default_burst(rate: Bandwidth) -> Self {
        LlqConfig {
            rate,
            burst: (rate.as_bps() / 8 / 5).clamp(32, 2_000_000),
        }
    }
}

/// One class of the round robin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassConfig {
    /// Its share of the link.
    pub bandwidth: Bandwidth,
    /// DropTail limit, packets (Cisco's default queue-limit is 64).
    pub limit_pkts: u32,
}

/// What became of an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Queued.
    Queued,
    /// Dropped by the LLQ policer (congestion and no tokens).
    Policed,
    /// Dropped: the class queue was full.
    Full,
    /// Dropped early by the class's RED.
    Early,
}

#[derive(Debug, Clone)]
struct Fifo<T> {
    items: VecDeque<(T, u32)>,
    limit: u32,
}

#[derive(Debug, Clone)]
struct DrrClass<T> {
    fifo: Fifo<T>,
    quantum: u64,
    deficit: u64,
    red: Option<Red>,
}

/// A priority queue and weighted classes.
#[derive(Debug, Clone)]
pub struct Scheduler<T> {
    llq: Option<(LlqConfig, Fifo<T>)>,
    /// Policer tokens, nano-bits, and when they were last refilled.
    tokens: u128,
    last: Instant,
    classes: Vec<DrrClass<T>>,
    /// The class the round robin is serving.
    turn: usize,
    /// Whether `turn` has already been given its quantum this visit.
    credited: bool,
    queued: usize,
}

impl<T: Copy> Scheduler<T> {
    /// A scheduler with an optional priority queue and at least one class; the largest
    /// class gets a quantum of `max_packet` bytes and the others proportionally less
    /// (at least one byte).
    ///
    /// # Panics
    /// If `classes` is empty.
    pub fn new(
        llq: Option<LlqConfig>,
        classes: &[ClassConfig],
        max_packet: u32,
        now: Instant,
    ) -> Self {
        assert!(!classes.is_empty(), "a scheduler needs a default class");
        let top = classes
            .iter()
            .map(|c| c.bandwidth.as_bps())
            .max()
            .unwrap_or(1)
            .max(1);
        Scheduler {
            tokens: llq.map_or(0, |l| nanobits(l.burst)),
            llq: llq.map(|l| {
                (
                    l,
                    Fifo {
                        items: VecDeque::new(),
                        limit: u32::MAX,
                    },
                )
            }),
            last: now,
            classes: classes
                .iter()
                .map(|c| DrrClass {
                    fifo: Fifo {
                        items: VecDeque::new(),
                        limit: c.limit_pkts,
                    },
                    quantum: (u128::from(max_packet) * u128::from(c.bandwidth.as_bps())
                        / u128::from(top))
                    .max(1) as u64,
                    deficit: 0,
                    red: None,
                })
                .collect(),
            turn: 0,
            credited: false,
            queued: 0,
        }
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.queued
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Offers a packet to the priority queue. `busy` says whether the link is
    /// congested (transmitting, or packets waiting), which is when the policer acts.
    ///
    /// # Panics
    /// If the scheduler has no priority queue.
    pub fn offer_priority(&mut self, now: Instant, item: T, bytes: u32, busy: bool) -> Admit {
        let (cfg, fifo) = self.llq.as_mut().expect("no priority queue configured");
        let dt = now.as_nanos().saturating_sub(self.last.as_nanos());
        self.last = now.max(self.last);
        self.tokens =
            (self.tokens + u128::from(cfg.rate.as_bps()) * u128::from(dt)).min(nanobits(cfg.burst));
        let cost = nanobits(u64::from(bytes));
        if (busy || self.queued > 0) && self.tokens < cost {
            return Admit::Policed;
        }
        self.tokens = self.tokens.saturating_sub(cost);
        fifo.items.push_back((item, bytes));
        self.queued += 1;
        Admit::Queued
    }

    /// Runs RED (WRED with several profiles) on class `class`'s queue.
    ///
    /// # Panics
    /// If there is no such class.
    pub fn set_red(&mut self, class: usize, red: Red) {
        self.classes[class].red = Some(red);
    }

    /// Offers a packet of DSCP `dscp` to class `class` (0 is the default class) at
    /// `now`: RED (if the class runs it) first, by the packet's AF drop precedence,
    /// then the packet limit.
    ///
    /// # Panics
    /// If there is no such class.
    pub fn offer(&mut self, now: Instant, class: usize, item: T, bytes: u32, dscp: u8) -> Admit {
        let c = &mut self.classes[class];
        if let Some(red) = &mut c.red {
            // Thresholds count packets (the scenario has no byte mode).
            let q = c.fifo.items.len() as f64;
            let profile = af_drop_precedence(dscp).map_or(0, |p| usize::from(p) - 1);
            // The simulator's packets carry no ECN field: a RED hit is a drop.
            if red.on_arrival(now.as_nanos(), q, profile, false) != RedVerdict::Pass {
                return Admit::Early;
            }
        }
        let fifo = &mut c.fifo;
        if fifo.items.len() as u32 >= fifo.limit {
            return Admit::Full;
        }
        fifo.items.push_back((item, bytes));
        self.queued += 1;
        Admit::Queued
    }

    /// The next packet to transmit at `now`: the priority queue first, then the
    /// round robin.
    pub fn dequeue(&mut self, now: Instant) -> Option<(T, u32)> {
        if let Some((_, fifo)) = &mut self.llq {
            if let Some(p) = fifo.items.pop_front() {
                self.queued -= 1;
                return Some(p);
            }
        }
        if self.queued == 0 {
            return None;
        }
        // Deficit round robin: a class gets its quantum once per visit and sends while
        // its head fits; an emptied class forfeits its deficit.
        loop {
            let c = &mut self.classes[self.turn];
            if !self.credited {
                c.deficit += c.quantum;
                self.credited = true;
            }
            match c.fifo.items.front() {
                Some(&(item, bytes)) if u64::from(bytes) <= c.deficit => {
                    c.deficit -= u64::from(bytes);
                    c.fifo.items.pop_front();
                    if c.fifo.items.is_empty() {
                        c.deficit = 0;
                        if let Some(red) = &mut c.red {
                            red.queue_empty(now.as_nanos());
                        }
                        self.advance();
                    }
                    self.queued -= 1;
                    return Some((item, bytes));
                }
                Some(_) => self.advance(),
                None => {
                    c.deficit = 0;
                    self.advance();
                }
            }
        }
    }

    fn advance(&mut self) {
        self.turn = (self.turn + 1) % self.classes.len();
        self.credited = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn class(mbps: u64) -> ClassConfig {
        ClassConfig {
            bandwidth: Bandwidth::from_mbps(mbps),
            limit_pkts: 64,
        }
    }

    /// A transmitter of `link_mbps` draining the scheduler, with sources offering
    /// `bytes`-sized packets every `gap_ns` to a class (`None`: the priority queue).
    /// Returns bytes sent per source over `duration_ns`, and drops per source.
    fn run(
        s: &mut Scheduler<usize>,
        link_mbps: u64,
        sources: &[(Option<usize>, u32, u64)],
        duration_ns: u64,
    ) -> (Vec<u64>, Vec<u64>) {
        let mut sent = vec![0u64; sources.len()];
        let mut dropped = vec![0u64; sources.len()];
        let mut next_arrival: Vec<u64> = vec![0; sources.len()];
        let mut busy_until = 0u64;
        let mut t = 0u64;
        while t < duration_ns {
            // Next event: an arrival, or the transmitter becoming free.
            let (i, ta) = next_arrival
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|&(i, a)| (a, i))
                .unwrap();
            if busy_until <= ta && !s.is_empty() {
                t = busy_until;
                let (src, bytes) = s.dequeue(Instant::from_nanos(t)).unwrap();
                sent[src] += u64::from(bytes);
                busy_until = t + u64::from(bytes) * 8_000 / link_mbps;
                continue;
            }
            t = ta;
            let (class, bytes, gap) = sources[i];
            let now = Instant::from_nanos(t);
            let busy = busy_until > t;
            let r = match class {
                None => s.offer_priority(now, i, bytes, busy),
                Some(c) => s.offer(Instant::from_nanos(t), c, i, bytes, 0),
            };
            if r != Admit::Queued {
                dropped[i] += 1;
            }
            if !busy && s.len() == 1 {
                // An idle transmitter starts at once.
                let (src, b) = s.dequeue(Instant::from_nanos(t)).unwrap();
                sent[src] += u64::from(b);
                busy_until = t + u64::from(b) * 8_000 / link_mbps;
            }
            next_arrival[i] = t + gap;
        }
        (sent, dropped)
    }

    /// Backlogged classes share the link within 5 % of their configured weights.
    #[test]
    fn drr_shares_follow_the_weights() {
        let mut s = Scheduler::new(None, &[class(10), class(5), class(2)], 1500, Instant::ZERO);
        // Each source offers 20 Mb/s into a 10 Mb/s link, with different packet sizes.
        let sources = [
            (Some(0), 1500, 600_000),
            (Some(1), 576, 230_400),
            (Some(2), 1000, 400_000),
        ];
        let (sent, _) = run(&mut s, 10, &sources, 2_000 * MS);
        let total: u64 = sent.iter().sum();
        for (got, want) in sent.iter().zip([10.0 / 17.0, 5.0 / 17.0, 2.0 / 17.0]) {
            let share = *got as f64 / total as f64;
            assert!(
                (share / want - 1.0).abs() < 0.05,
                "share {share:.4}, weight {want:.4}"
            );
        }
    }

    /// A class that does not use its share leaves it to the others.
    #[test]
    fn drr_is_work_conserving() {
        let mut s = Scheduler::new(None, &[class(5), class(5)], 1500, Instant::ZERO);
        // Class 0 offers 2 Mb/s, class 1 is backlogged.
        let sources = [(Some(0), 1000, 4 * MS), (Some(1), 1500, 600_000)];
        let (sent, dropped) = run(&mut s, 10, &sources, 2_000 * MS);
        assert_eq!(dropped[0], 0);
        let rate = |b: u64| b as f64 * 8.0 / 2.0 / 1e6;
        assert!((rate(sent[0]) - 2.0).abs() < 0.05, "{}", rate(sent[0]));
        assert!(rate(sent[1]) > 7.8, "{}", rate(sent[1]));
    }

    /// LLQ: offered above its rate on a congested link, priority traffic is cut to the
    /// configured rate (within 2 %); on an otherwise idle link it is not policed.
    #[test]
    fn llq_is_policed_only_under_congestion() {
        let llq = Some(LlqConfig::with_default_burst(Bandwidth::from_mbps(5)));
        // 8 Mb/s of priority traffic against a backlogged best-effort class.
        let mut s = Scheduler::new(llq, &[class(10)], 1500, Instant::ZERO);
        let sources = [(None, 1000, MS), (Some(0), 1500, 600_000)];
        let secs = 10;
        let (sent, dropped) = run(&mut s, 10, &sources, secs * 1_000 * MS);
        let ef = sent[0] as f64 * 8.0 / secs as f64 / 1e6;
        // The burst (200 ms of 5 Mb/s) passes once: 0.125 MB over 10 s is 0.1 Mb/s.
        assert!(
            (ef / 5.0 - 1.0).abs() < 0.02 + 0.1 / 5.0,
            "EF got {ef:.3} Mb/s"
        );
        assert!(ef > 4.9, "EF got {ef:.3} Mb/s");
        assert!(dropped[0] > 0);
        // Alone, the same 8 Mb/s passes untouched.
        let mut s = Scheduler::new(llq, &[class(10)], 1500, Instant::ZERO);
        let (sent, dropped) = run(&mut s, 10, &sources[..1], secs * 1_000 * MS);
        assert_eq!(dropped[0], 0);
        let ef = sent[0] as f64 * 8.0 / secs as f64 / 1e6;
        assert!((ef - 8.0).abs() < 0.01, "{ef}");
    }

    /// The priority queue always goes first, and class limits are DropTail.
    #[test]
    fn priority_first_and_droptail_classes() {
        let llq = Some(LlqConfig::with_default_burst(Bandwidth::from_mbps(5)));
        let mut s = Scheduler::new(
            llq,
            &[ClassConfig {
                bandwidth: Bandwidth::from_mbps(5),
                limit_pkts: 2,
            }],
            1500,
            Instant::ZERO,
        );
        assert_eq!(s.offer(Instant::ZERO, 0, 1, 100, 0), Admit::Queued);
        assert_eq!(s.offer(Instant::ZERO, 0, 2, 100, 0), Admit::Queued);
        assert_eq!(s.offer(Instant::ZERO, 0, 3, 100, 0), Admit::Full);
        assert_eq!(s.offer_priority(Instant::ZERO, 9, 100, true), Admit::Queued);
        assert_eq!(s.dequeue(Instant::ZERO), Some((9, 100)));
        assert_eq!(s.dequeue(Instant::ZERO), Some((1, 100)));
        assert_eq!(s.dequeue(Instant::ZERO), Some((2, 100)));
        assert_eq!(s.dequeue(Instant::ZERO), None);
    }
}
