//! One direction of a link as a FIFO, sans-IO: loss, then a DropTail queue, then a
//! serialiser of constant rate (or a mahimahi trace), then a propagation delay. The
//! emulator runs it in real time; the simulator's links (`longhaul-sim`, event
//! driven, with cut-through) implement the same model, and a test there holds the
//! two to the same departures and drops.
//!
//! The link is FIFO and the delay constant, so a packet's whole future is known the
//! moment it arrives: [`Direction::handle_arrival`] returns the nanosecond at which
//! it leaves the far end, and those times never decrease. The I/O loop only has to
//! hold packets in arrival order and write each when its time comes. Time is passed
//! in; nothing here reads a clock.

use std::collections::VecDeque;

use longhaul_proto::{Bandwidth, Duration, Instant};

use crate::trace::{Trace, OPPORTUNITY_BYTES};
use crate::{LossModel, LossProcess, QueueLimit};

/// How fast the bottleneck serialises packets.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkRate {
    /// A constant rate.
    Constant(Bandwidth),
    /// A mahimahi trace: 1500-byte delivery opportunities at given milliseconds.
    Trace(Trace),
}

impl LinkRate {
    /// The long-run rate: the constant, or the trace's mean.
    pub fn mean(&self) -> Bandwidth {
        match self {
            LinkRate::Constant(b) => *b,
            LinkRate::Trace(t) => t.mean_rate(),
        }
    }
}

/// One direction of the link.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionConfig {
    /// Serialisation rate or trace.
    pub rate: LinkRate,
    /// One-way propagation delay, added after serialisation.
    pub delay: Duration,
    /// Random loss, applied on arrival.
    pub loss: LossModel,
    /// DropTail limit.
    pub queue: QueueLimit,
}

/// What happens to an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It leaves the far end of the link at this time.
    Deliver(Instant),
    /// The loss model dropped it.
    Lost,
    /// The queue was full.
    Overflow,
}

/// The serialiser: when the link is next free.
#[derive(Debug, Clone)]
enum Server {
    Constant {
        rate: Bandwidth,
        /// When the last accepted packet finishes serialisation, ns.
        free_at: u64,
    },
    Trace {
        trace: Trace,
        /// The opportunity the next byte will use, and the bytes it has left.
        next: u64,
        left: u64,
    },
}

/// One direction's model and counters.
#[derive(Debug, Clone)]
pub struct Direction {
    delay_ns: u64,
    queue: QueueLimit,
    loss: LossProcess,
    server: Server,
    /// Serialisation end times and lengths of the packets still in the queue.
    backlog: VecDeque<(u64, u32)>,
    backlog_bytes: u64,
    /// Highest backlog seen, bytes.
    pub peak_backlog_bytes: u64,
}

impl Direction {
    /// A direction with its loss RNG seeded by `seed`.
    pub fn new(cfg: &DirectionConfig, seed: u64) -> Self {
        let server = match &cfg.rate {
            LinkRate::Constant(rate) => Server::Constant {
                rate: *rate,
                free_at: 0,
            },
            LinkRate::Trace(t) => Server::Trace {
                trace: t.clone(),
                next: 0,
                left: OPPORTUNITY_BYTES,
            },
        };
        Direction {
            delay_ns: cfg.delay.as_nanos() as u64,
            queue: cfg.queue,
            loss: LossProcess::new(cfg.loss, seed, 0),
            server,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            peak_backlog_bytes: 0,
        }
    }

    /// Packets and bytes in the queue at `now` (not yet fully serialised).
    pub fn backlog(&mut self, now: Instant) -> (usize, u64) {
        self.drain(now.as_nanos());
        (self.backlog.len(), self.backlog_bytes)
    }

    fn drain(&mut self, now: u64) {
        while let Some(&(end, len)) = self.backlog.front() {
            if end > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= u64::from(len);
        }
    }

    /// A packet of `len` bytes (IP length) arrives at `now`.
    pub fn handle_arrival(&mut self, now: Instant, len: usize) -> Verdict {
        if self.loss.lose() {
            return Verdict::Lost;
        }
        let now = now.as_nanos();
        self.drain(now);
        let len = len as u64;
        let full = match self.queue {
            QueueLimit::Packets(n) => self.backlog.len() as u64 >= u64::from(n),
            QueueLimit::Bytes(b) => self.backlog_bytes + len > b,
        };
        if full {
            return Verdict::Overflow;
        }
        let end = self.serialise(now, len);
        self.backlog.push_back((end, len as u32));
        self.backlog_bytes += len;
        self.peak_backlog_bytes = self.peak_backlog_bytes.max(self.backlog_bytes);
        Verdict::Deliver(Instant::from_nanos(end + self.delay_ns))
    }

    /// Books the link for `len` bytes arriving at `now`; returns when the last bit is
    /// out.
    fn serialise(&mut self, now: u64, len: u64) -> u64 {
        match &mut self.server {
            Server::Constant { rate, free_at } => {
                let start = now.max(*free_at);
                *free_at = start + rate.tx_time_nanos(len);
                *free_at
            }
            Server::Trace { trace, next, left } => {
                // Opportunities that passed while the queue was empty are lost.
                if trace.time_ns(*next) < now {
                    *next = trace.first_at_or_after(now);
                    *left = OPPORTUNITY_BYTES;
                }
                let mut need = len;
                while need > *left {
                    need -= *left;
                    *next += 1;
                    *left = OPPORTUNITY_BYTES;
                }
                *left -= need;
                let done = trace.time_ns(*next);
                if *left == 0 {
                    *next += 1;
                    *left = OPPORTUNITY_BYTES;
                }
                done
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(rate_mbps: u64, delay_ms: u64, queue: QueueLimit) -> DirectionConfig {
        DirectionConfig {
            rate: LinkRate::Constant(Bandwidth::from_mbps(rate_mbps)),
            delay: Duration::from_millis(delay_ms),
            loss: LossModel::None,
            queue,
        }
    }

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn an_idle_link_adds_serialisation_and_delay() {
        let mut d = Direction::new(&dir(100, 10, QueueLimit::Packets(10)), 1);
        // 1250 bytes at 100 Mb/s = 100 µs, then 10 ms.
        assert_eq!(
            d.handle_arrival(at(5), 1250),
            Verdict::Deliver(at(5 + 100_000 + 10_000_000))
        );
    }

    #[test]
    fn back_to_back_packets_leave_at_the_link_rate() {
        let mut d = Direction::new(&dir(100, 0, QueueLimit::Packets(100)), 1);
        let exits: Vec<u64> = (0..50)
            .map(|_| match d.handle_arrival(at(0), 1250) {
                Verdict::Deliver(t) => t.as_nanos(),
                v => panic!("{v:?}"),
            })
            .collect();
        for (i, w) in exits.windows(2).enumerate() {
            assert_eq!(w[1] - w[0], 100_000, "gap {i}");
        }
        // Offered at 2x the rate for a long time: delivered rate is the link rate.
        let mut d = Direction::new(&dir(100, 0, QueueLimit::Packets(20)), 1);
        let mut last = 0;
        let mut delivered = 0u64;
        for i in 0..20_000u64 {
            if let Verdict::Deliver(t) = d.handle_arrival(at(i * 50_000), 1250) {
                last = t.as_nanos();
                delivered += 1;
            }
        }
        let rate = delivered as f64 * 1250.0 * 8.0 / (last as f64 * 1e-9);
        assert!((rate / 100e6 - 1.0).abs() < 0.002, "{rate}");
        assert!(delivered < 10_100, "{delivered}");
    }

    #[test]
    fn the_queue_overflows_at_its_limit() {
        let mut d = Direction::new(&dir(100, 0, QueueLimit::Packets(3)), 1);
        let v: Vec<Verdict> = (0..5).map(|_| d.handle_arrival(at(0), 1250)).collect();
        assert!(matches!(v[2], Verdict::Deliver(_)));
        assert_eq!(v[3], Verdict::Overflow);
        // After one serialisation time one packet has left, so one more fits.
        assert!(matches!(
            d.handle_arrival(at(100_000), 1250),
            Verdict::Deliver(_)
        ));
        assert_eq!(d.handle_arrival(at(100_000), 1250), Verdict::Overflow);
        let mut d = Direction::new(&dir(100, 0, QueueLimit::Bytes(3000)), 1);
        assert!(matches!(d.handle_arrival(at(0), 1500), Verdict::Deliver(_)));
        assert!(matches!(d.handle_arrival(at(0), 1500), Verdict::Deliver(_)));
        assert_eq!(d.handle_arrival(at(0), 100), Verdict::Overflow);
        assert_eq!(d.backlog(at(0)), (2, 3000));
        assert_eq!(d.backlog(at(120_000)), (1, 1500));
        assert_eq!(d.peak_backlog_bytes, 3000);
    }

    #[test]
    fn loss_happens_before_the_queue() {
        let mut cfg = dir(100, 0, QueueLimit::Packets(1_000_000));
        cfg.loss = LossModel::Bernoulli { p: 0.25 };
        let mut d = Direction::new(&cfg, 9);
        let n = 100_000u64;
        let lost = (0..n)
            .filter(|i| d.handle_arrival(at(i * 200_000), 1250) == Verdict::Lost)
            .count() as f64;
        let sd = (n as f64 * 0.25 * 0.75).sqrt();
        assert!((lost - n as f64 * 0.25).abs() < 2.576 * sd, "{lost}");
    }

    #[test]
    fn a_trace_delivers_at_its_opportunities() {
        let mut cfg = dir(1, 5, QueueLimit::Packets(100));
        cfg.rate = LinkRate::Trace(Trace::new(vec![2, 2, 10]).unwrap());
        let mut d = Direction::new(&cfg, 1);
        let ms = |v: Verdict| match v {
            Verdict::Deliver(t) => t.as_nanos() / 1_000_000,
            v => panic!("{v:?}"),
        };
        // Three 1500-byte packets at t=0: opportunities at 2, 2 and 10 ms, + 5 ms.
        assert_eq!(ms(d.handle_arrival(at(0), 1500)), 7);
        assert_eq!(ms(d.handle_arrival(at(0), 1500)), 7);
        assert_eq!(ms(d.handle_arrival(at(0), 1500)), 15);
        // Two 750-byte packets share the next opportunity (12 ms = 10 + 2).
        assert_eq!(ms(d.handle_arrival(at(0), 750)), 17);
        assert_eq!(ms(d.handle_arrival(at(0), 750)), 17);
        // A packet arriving at 25 ms finds the opportunities at 20 ms gone: it takes
        // the one at 30 ms (period 10: 22, 22, 30).
        assert_eq!(ms(d.handle_arrival(at(25_000_000), 100)), 35);
        // Its leftover 1400 bytes were unused at 30 ms; at 31 ms they are lost.
        assert_eq!(ms(d.handle_arrival(at(31_000_000), 100)), 37);
        // A 3000-byte packet arriving at 33 ms spans the two opportunities at 40 and
        // 42 ms.
        assert_eq!(ms(d.handle_arrival(at(33_000_000), 3000)), 47);
    }

    #[test]
    fn a_constant_trace_matches_a_constant_rate_over_time() {
        let mut cfg = dir(48, 0, QueueLimit::Packets(100_000));
        cfg.rate = LinkRate::Trace(Trace::constant(Bandwidth::from_mbps(48), 1000));
        let mut d = Direction::new(&cfg, 1);
        let mut last = 0;
        for _ in 0..20_000 {
            if let Verdict::Deliver(t) = d.handle_arrival(at(0), 1500) {
                last = t.as_nanos();
            }
        }
        let rate = 20_000.0 * 1500.0 * 8.0 / (last as f64 * 1e-9);
        assert!((rate / 48e6 - 1.0).abs() < 0.01, "{rate}");
    }
}
