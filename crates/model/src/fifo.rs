//! One direction of a link, sans-IO: loss, then a queue (DropTail, or RED/WRED in
//! front of its limit), then a serialiser of constant rate (or a mahimahi trace),
//! then a propagation delay, then the impairments (jitter, reordering,
//! duplication). Its parameters may change over time from a schedule. The
//! emulator runs it in real time; the simulator's links (`longhaul-sim`, event
//! driven, with cut-through) implement the plain FIFO part of the same model, and a
//! test there holds the two to the same departures and drops.
//!
//! Without impairments the link is FIFO, so a packet's whole future is known the
//! moment it arrives: [`Direction::handle`] returns the nanosecond at which it
//! leaves the far end, and those times never decrease. Jitter that may reorder, and
//! reordering, break that order on purpose; the I/O loop holds packets by
//! departure time. Time is passed in; nothing here
//! reads a clock.

use std::collections::VecDeque;

use longhaul_proto::{Bandwidth, Duration, Instant};
use serde::Serialize;

use crate::impair::{Impairer, Impairments};
use crate::red::{af_drop_precedence, Red, RedParams, RedVerdict};
use crate::schedule::Step;
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

/// Which packets the queue refuses before its limit.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Aqm {
    /// None: a packet is refused only when the queue is full.
    #[default]
    DropTail,
    /// RED, or WRED with one profile per drop precedence: profile 0 for packets
    /// of precedence 1 (AFx1) and every non-AF packet, 1 for AFx2, 2 for AFx3.
    Red {
        /// The profiles (one for plain RED).
        profiles: Vec<RedParams>,
    },
}

impl Aqm {
    /// Reads the command line's spelling, for a queue that holds `limit` packets:
    /// `droptail`; `red` with optional `:min=5,max=15,maxp=0.1,wq=0.002,gentle=on,
    /// ecn,bytes` (defaults: [`RedParams::for_limit`]); or `wred` with the same
    /// keys shared and thresholds per drop precedence, `p1=30/90,p2=20/60,p3=10/30`
    /// (defaults: precedence 1 as RED's, 2 and 3 at two thirds and one third of it).
    pub fn parse(s: &str, limit: f64) -> Result<Aqm, String> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        let wred = match kind.trim() {
            "droptail" if rest.is_empty() => return Ok(Aqm::DropTail),
            "red" => false,
            "wred" => true,
            _ => {
                return Err(format!(
                    "`{s}` is not a queue discipline: write droptail, red[:min=5,max=15,\
                     maxp=0.1,wq=0.002,gentle=on,ecn] or wred[:p1=30/90,p2=20/60,p3=10/30]"
                ))
            }
        };
        let base = RedParams::for_limit(limit);
        let scaled = |f: f64| RedParams {
            min_th: base.min_th * f,
            max_th: base.max_th * f,
            ..base
        };
        let mut profiles = if wred {
            vec![base, scaled(2.0 / 3.0), scaled(1.0 / 3.0)]
        } else {
            vec![base]
        };
        for kv in rest.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, "on"));
            let num = |v: &str| {
                v.parse::<f64>()
                    .map_err(|_| format!("`{kv}`: {v} is not a number"))
            };
            let flag = |v: &str| match v {
                "on" | "true" | "1" => Ok(true),
                "off" | "false" | "0" => Ok(false),
                _ => Err(format!("`{kv}`: write on or off")),
            };
            let all = |profiles: &mut Vec<RedParams>, f: &dyn Fn(&mut RedParams)| {
                profiles.iter_mut().for_each(f)
            };
            match k {
                "min" if !wred => profiles[0].min_th = num(v)?,
                "max" if !wred => profiles[0].max_th = num(v)?,
                "p1" | "p2" | "p3" if wred => {
                    let i = usize::from(k.as_bytes()[1] - b'1');
                    let (lo, hi) = v
                        .split_once('/')
                        .ok_or_else(|| format!("`{kv}`: write MIN/MAX, e.g. {k}=10/30"))?;
                    profiles[i].min_th = num(lo)?;
                    profiles[i].max_th = num(hi)?;
                }
                "maxp" => {
                    let x = num(v)?;
                    all(&mut profiles, &|p| p.max_p = x);
                }
                "wq" => {
                    let x = num(v)?;
                    all(&mut profiles, &|p| p.w_q = x);
                }
                "gentle" => {
                    let x = flag(v)?;
                    all(&mut profiles, &|p| p.gentle = x);
                }
                "ecn" => {
                    let x = flag(v)?;
                    all(&mut profiles, &|p| p.ecn = x);
                }
                "bytes" => {
                    let x = flag(v)?;
                    all(&mut profiles, &|p| p.bytes = x);
                }
                _ => {
                    return Err(format!(
                        "unknown {} key `{k}` (it takes {}maxp, wq, gentle, ecn, bytes)",
                        if wred { "wred" } else { "red" },
                        if wred { "p1, p2, p3, " } else { "min, max, " }
                    ))
                }
            }
        }
        for p in &profiles {
            p.validate()?;
        }
        Ok(Aqm::Red { profiles })
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
    /// The queue's hard limit.
    pub queue: QueueLimit,
    /// Early drops (or ECN marks) before the limit.
    pub aqm: Aqm,
    /// Jitter, reordering, duplication.
    pub impair: Impairments,
    /// Changes of rate, delay and loss over time, in time order.
    pub schedule: Vec<Step>,
}

impl DirectionConfig {
    /// A plain FIFO direction: no AQM, no impairments, no schedule.
    pub fn fifo(rate: LinkRate, delay: Duration, loss: LossModel, queue: QueueLimit) -> Self {
        DirectionConfig {
            rate,
            delay,
            loss,
            queue,
            aqm: Aqm::DropTail,
            impair: Impairments::default(),
            schedule: vec![],
        }
    }

    /// Checks what the queue's limit cannot check: the AQM's curves, the
    /// impairments' probabilities, and that rate steps have a constant rate to
    /// change.
    pub fn validate(&self) -> Result<(), String> {
        self.loss.validate()?;
        self.impair.validate()?;
        if let Aqm::Red { profiles } = &self.aqm {
            if profiles.is_empty() || profiles.len() > 3 {
                return Err("RED takes 1 profile, or 3 for WRED (one per drop precedence)".into());
            }
            for p in profiles {
                p.validate()?;
            }
        }
        for s in &self.schedule {
            if let Some(l) = s.loss {
                l.validate()?;
            }
            if s.rate.is_some() && matches!(self.rate, LinkRate::Trace(_)) {
                return Err("a schedule cannot change the rate of a trace-driven link".into());
            }
        }
        Ok(())
    }
}

/// What the link needs to know of an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// IP length, bytes.
    pub len: usize,
    /// Its DiffServ codepoint (WRED picks a profile by its drop precedence).
    pub dscp: u8,
    /// Whether it is ECN-capable (ECT(0) or ECT(1)): RED with ECN marks it
    /// instead of dropping it.
    pub ect: bool,
}

impl Arrival {
    /// A best-effort, not ECN-capable packet of `len` bytes.
    pub fn plain(len: usize) -> Arrival {
        Arrival {
            len,
            dscp: 0,
            ect: false,
        }
    }
}

/// A packet the link delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// When it leaves the far end.
    pub at: Instant,
    /// When its duplicate leaves, if it was duplicated.
    pub copy: Option<Instant>,
    /// RED marked it Congestion Experienced.
    pub ce: bool,
    /// It was held back to be reordered.
    pub held: bool,
}

/// What happens to an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It leaves the far end of the link.
    Deliver(Delivery),
    /// The loss model dropped it.
    Lost,
    /// The queue was full.
    Overflow,
    /// RED dropped it early.
    Aqm,
}

impl Verdict {
    /// When it leaves, if it is delivered.
    pub fn exit(&self) -> Option<Instant> {
        match self {
            Verdict::Deliver(d) => Some(d.at),
            _ => None,
        }
    }
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
    seed: u64,
    loss: LossProcess,
    server: Server,
    red: Option<Red>,
    impair: Impairer,
    schedule: VecDeque<Step>,
    steps_applied: u64,
    /// Serialisation end times and lengths of the packets still in the queue.
    backlog: VecDeque<(u64, u32)>,
    backlog_bytes: u64,
    /// Highest backlog seen, bytes.
    pub peak_backlog_bytes: u64,
}

impl Direction {
    /// A direction whose random processes draw from `seed`.
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
        let red = match &cfg.aqm {
            Aqm::DropTail => None,
            Aqm::Red { profiles } => Some(Red::new(
                profiles.clone(),
                cfg.rate.mean().tx_time_nanos(1500),
                seed,
                0,
            )),
        };
        Direction {
            delay_ns: cfg.delay.as_nanos() as u64,
            queue: cfg.queue,
            seed,
            loss: LossProcess::new(cfg.loss, seed, 0),
            server,
            red,
            impair: Impairer::new(cfg.impair, seed, 0),
            schedule: cfg.schedule.iter().copied().collect(),
            steps_applied: 0,
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

    /// RED's average queue, if the direction runs RED.
    pub fn red_avg(&self) -> Option<f64> {
        self.red.as_ref().map(Red::avg)
    }

    fn drain(&mut self, now: u64) {
        while let Some(&(end, len)) = self.backlog.front() {
            if end > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= u64::from(len);
            if self.backlog.is_empty() {
                if let Some(red) = &mut self.red {
                    red.queue_empty(end);
                }
            }
        }
    }

    /// Applies the schedule's steps due by `now`.
    fn follow_schedule(&mut self, now: u64) {
        while self
            .schedule
            .front()
            .is_some_and(|s| s.at.as_nanos() as u64 <= now)
        {
            let s = self.schedule.pop_front().expect("checked");
            self.steps_applied += 1;
            if let Some(r) = s.rate {
                if let Server::Constant { rate, .. } = &mut self.server {
                    *rate = r;
                }
            }
            if let Some(d) = s.delay {
                self.delay_ns = d.as_nanos() as u64;
            }
            if let Some(l) = s.loss {
                // A stream of its own per step, so a run still follows from its seed.
                self.loss = LossProcess::new(l, self.seed, self.steps_applied);
            }
        }
    }

    /// A packet of `len` bytes (IP length), best effort and not ECN-capable,
    /// arrives at `now`.
    pub fn handle_arrival(&mut self, now: Instant, len: usize) -> Verdict {
        self.handle(now, Arrival::plain(len))
    }

    /// A packet arrives at `now`: its fate.
    pub fn handle(&mut self, now: Instant, pkt: Arrival) -> Verdict {
        let now = now.as_nanos();
        self.follow_schedule(now);
        if self.loss.lose() {
            return Verdict::Lost;
        }
        self.drain(now);
        let len = pkt.len as u64;
        let mut ce = false;
        if let Some(red) = &mut self.red {
            let p = &red.profiles()[0];
            let q = if p.bytes {
                self.backlog_bytes as f64
            } else {
                self.backlog.len() as f64
            };
            let profile = af_drop_precedence(pkt.dscp).map_or(0, |d| usize::from(d) - 1);
            match red.on_arrival(now, q, profile, pkt.ect) {
                RedVerdict::Pass => {}
                RedVerdict::Mark => ce = true,
                RedVerdict::Drop => return Verdict::Aqm,
            }
        }
        if !self.fits(len) {
            return Verdict::Overflow;
        }
        let end = self.enqueue(now, len);
        let wire = self.wire_ns(len);
        let imp = self.impair.apply(end, self.delay_ns, wire);
        let copy = if imp.duplicate && self.fits(len) {
            // The copy takes its own turn on the link, right behind the original.
            let end2 = self.enqueue(now, len);
            let at = (end2 + self.delay_ns).max(imp.exit + wire);
            if !imp.held {
                self.impair.hold_floor(at);
            }
            Some(Instant::from_nanos(at))
        } else {
            None
        };
        Verdict::Deliver(Delivery {
            at: Instant::from_nanos(imp.exit),
            copy,
            ce,
            held: imp.held,
        })
    }

    fn fits(&self, len: u64) -> bool {
        match self.queue {
            QueueLimit::Packets(n) => (self.backlog.len() as u64) < u64::from(n),
            QueueLimit::Bytes(b) => self.backlog_bytes + len <= b,
        }
    }

    /// A packet's time on the wire at the current constant rate; 0 on a trace,
    /// whose opportunities deliver several packets at one instant (as mahimahi).
    fn wire_ns(&self, len: u64) -> u64 {
        match &self.server {
            Server::Constant { rate, .. } => rate.tx_time_nanos(len),
            Server::Trace { .. } => 0,
        }
    }

    /// Books the link for `len` bytes arriving at `now` and queues them; returns
    /// when their last bit is out.
    fn enqueue(&mut self, now: u64, len: u64) -> u64 {
        let end = self.serialise(now, len);
        self.backlog.push_back((end, len as u32));
        self.backlog_bytes += len;
        self.peak_backlog_bytes = self.peak_backlog_bytes.max(self.backlog_bytes);
        end
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
    use crate::schedule::Step;

    fn dir(rate_mbps: u64, delay_ms: u64, queue: QueueLimit) -> DirectionConfig {
        DirectionConfig::fifo(
            LinkRate::Constant(Bandwidth::from_mbps(rate_mbps)),
            Duration::from_millis(delay_ms),
            LossModel::None,
            queue,
        )
    }

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn an_idle_link_adds_serialisation_and_delay() {
        let mut d = Direction::new(&dir(100, 10, QueueLimit::Packets(10)), 1);
        // 1250 bytes at 100 Mb/s = 100 µs, then 10 ms.
        assert_eq!(
            d.handle_arrival(at(5), 1250).exit(),
            Some(at(5 + 100_000 + 10_000_000))
        );
    }

    #[test]
    fn back_to_back_packets_leave_at_the_link_rate() {
        let mut d = Direction::new(&dir(100, 0, QueueLimit::Packets(100)), 1);
        let exits: Vec<u64> = (0..50)
            .map(|_| match d.handle_arrival(at(0), 1250) {
                Verdict::Deliver(t) => t.at.as_nanos(),
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
            if let Some(t) = d.handle_arrival(at(i * 50_000), 1250).exit() {
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
            Verdict::Deliver(t) => t.at.as_nanos() / 1_000_000,
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
            if let Some(t) = d.handle_arrival(at(0), 1500).exit() {
                last = t.as_nanos();
            }
        }
        let rate = 20_000.0 * 1500.0 * 8.0 / (last as f64 * 1e-9);
        assert!((rate / 48e6 - 1.0).abs() < 0.01, "{rate}");
    }

    fn red(max_p: f64) -> RedParams {
        RedParams {
            min_th: 5.0,
            max_th: 15.0,
            max_p,
            w_q: 0.002,
            gentle: true,
            ecn: false,
            bytes: false,
        }
    }

    /// A constant-bit-rate source offering `load` times the link's rate through
    /// RED: in steady state the drop fraction is what the curve gives at the
    /// average queue it settles at (within 10 %), and conservation holds.
    #[test]
    fn red_under_cbr_overload_follows_its_curve() {
        // Loads whose average settles between the thresholds (the curve is not
        // smooth at max_th, where a mean over a wandering average would blur it).
        for load in [1.05, 1.1, 1.25] {
            let mut cfg = dir(100, 0, QueueLimit::Packets(1000));
            cfg.aqm = Aqm::Red {
                profiles: vec![red(0.2)],
            };
            let mut d = Direction::new(&cfg, 11);
            // 1250 bytes at 100 Mb/s: 100 µs each; arrivals every 100/load µs.
            let gap = (100_000.0 / load) as u64;
            let (mut n, mut drops, mut avg_sum) = (0u64, 0u64, 0.0);
            for i in 0..400_000u64 {
                let v = d.handle_arrival(at(i * gap), 1250);
                assert_ne!(
                    v,
                    Verdict::Overflow,
                    "RED keeps the queue short of its limit"
                );
                if i >= 100_000 {
                    n += 1;
                    avg_sum += d.red_avg().unwrap();
                    drops += u64::from(v == Verdict::Aqm);
                }
            }
            let avg = avg_sum / n as f64;
            let got = drops as f64 / n as f64;
            let want = red(0.2).drop_rate(avg);
            assert!(
                (got / want - 1.0).abs() < 0.10,
                "load {load}: dropped {got:.4} at avg {avg:.2}, the curve says {want:.4}"
            );
            // What is not dropped is what the link carries.
            let carried = 1.0 - 1.0 / load;
            assert!(
                (got / carried - 1.0).abs() < 0.05,
                "load {load}: {got} vs {carried}"
            );
        }
    }

    #[test]
    fn aqm_spellings_parse() {
        assert_eq!(Aqm::parse("droptail", 100.0).unwrap(), Aqm::DropTail);
        let Aqm::Red { profiles } = Aqm::parse("red", 100.0).unwrap() else {
            panic!()
        };
        assert_eq!((profiles[0].min_th, profiles[0].max_th), (20.0, 60.0));
        let Aqm::Red { profiles } = Aqm::parse("red:min=5,max=15,maxp=0.2,ecn", 100.0).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            profiles,
            vec![RedParams {
                min_th: 5.0,
                max_th: 15.0,
                max_p: 0.2,
                ecn: true,
                ..RedParams::for_limit(100.0)
            }]
        );
        let Aqm::Red { profiles } = Aqm::parse("wred:p3=1/4", 30.0).unwrap() else {
            panic!()
        };
        assert_eq!(profiles.len(), 3);
        assert_eq!((profiles[2].min_th, profiles[2].max_th), (1.0, 4.0));
        assert!(Aqm::parse("red:min=20,max=10", 100.0)
            .unwrap_err()
            .contains("max_th"));
        assert!(Aqm::parse("red:p1=1/2", 100.0)
            .unwrap_err()
            .contains("unknown red key"));
        assert!(Aqm::parse("codel", 100.0).is_err());
    }

    #[test]
    fn wred_drops_af13_before_af12_before_af11() {
        let mut cfg = dir(100, 0, QueueLimit::Packets(1000));
        let prof = |min_th: f64| RedParams {
            min_th,
            max_th: min_th + 10.0,
            ..red(0.1)
        };
        // Profiles by drop precedence: AF11 from 30 packets, AF12 from 20, AF13 from 10.
        cfg.aqm = Aqm::Red {
            profiles: vec![prof(30.0), prof(20.0), prof(10.0)],
        };
        let mut d = Direction::new(&cfg, 5);
        let mut drops = [0u32; 3];
        for i in 0..300_000u64 {
            let class = (i % 3) as usize;
            let dscp = [10, 12, 14][class];
            let pkt = Arrival {
                len: 1250,
                dscp,
                ect: false,
            };
            if d.handle(at(i * 80_000), pkt) == Verdict::Aqm {
                drops[class] += 1;
            }
        }
        assert!(drops[2] > drops[1] && drops[1] > drops[0], "{drops:?}");
        assert!(drops[2] > 1000, "{drops:?}");
    }

    #[test]
    fn a_duplicate_takes_its_own_turn_on_the_link() {
        let mut cfg = dir(100, 1, QueueLimit::Packets(100));
        cfg.impair.duplicate = 1.0;
        let mut d = Direction::new(&cfg, 1);
        let Verdict::Deliver(v) = d.handle_arrival(at(0), 1250) else {
            panic!()
        };
        assert_eq!(v.at, at(100_000 + 1_000_000));
        assert_eq!(v.copy, Some(at(200_000 + 1_000_000)));
        assert_eq!(d.backlog(at(0)), (2, 2500));
    }

    #[test]
    fn a_schedule_changes_rate_delay_and_loss_at_its_times() {
        let mut cfg = dir(100, 10, QueueLimit::Packets(100));
        cfg.schedule = vec![
            Step {
                at: Duration::from_secs(1),
                rate: Some(Bandwidth::from_mbps(10)),
                delay: Some(Duration::from_millis(1)),
                loss: None,
            },
            Step {
                at: Duration::from_secs(2),
                rate: None,
                delay: None,
                loss: Some(LossModel::Bernoulli { p: 1.0 }),
            },
        ];
        let mut d = Direction::new(&cfg, 1);
        let exit = |d: &mut Direction, t| d.handle_arrival(at(t), 1250).exit();
        assert_eq!(exit(&mut d, 0), Some(at(100_000 + 10_000_000)));
        // At 1 s: 1 ms at 10 Mb/s, then 1 ms.
        assert_eq!(
            exit(&mut d, 1_000_000_000),
            Some(at(1_000_000_000 + 1_000_000 + 1_000_000))
        );
        assert_eq!(d.handle_arrival(at(2_000_000_000), 1250), Verdict::Lost);
    }

    #[test]
    fn a_shorter_delay_after_a_step_does_not_reorder() {
        let mut cfg = dir(1000, 50, QueueLimit::Packets(100));
        cfg.schedule = vec![Step {
            at: Duration::from_millis(10),
            rate: None,
            delay: Some(Duration::from_millis(1)),
            loss: None,
        }];
        let mut d = Direction::new(&cfg, 1);
        let a = d.handle_arrival(at(9_000_000), 1250).exit().unwrap();
        let b = d.handle_arrival(at(10_000_000), 1250).exit().unwrap();
        assert!(b >= a, "{b:?} left before {a:?}");
    }
}
