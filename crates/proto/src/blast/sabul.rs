//! SABUL: Gu, Grossman, "SABUL: A Transport Protocol for Grid Computing", Journal of
//! Grid Computing 1(4), 2003; the rules as its 2003 release (`sender.cpp`,
//! `recver.cpp`, Laboratory for Advanced Computing, UIC) runs them.
//!
//! Receiver: reports each gap at once as a loss report, repeats the reports not
//! answered within 1.5 RTT every ERR period (20 ms), acknowledges the first missing
//! block every ACK period (100 ms, and at once when the last block arrives), and
//! sends a SYN report every SYN period (10 ms) that clocks the sender's rate control.
//!
//! Sender: retransmissions first, then new blocks within the receiver's window, one
//! per inter-packet time `I` (µs). Rate control:
//!
//! ```text
//! on a loss report whose first block is past the last decrease's mark:
//!     I *= 1.125; mark = highest block sent; freeze one SYN period;
//!     count = 1; steps = 4
//! on another loss report: if ++count >= 2^steps: steps += 1; I *= 1.125
//! on SYN: loss = lost / sent in the period; h = 0.1 h + 0.9 loss
//!     if h <= 0.1 %:
//!         inc = max(10^ceil(log10(SYN / I)) / 1000, 1/1500)   (packets per SYN)
//!         I = I * SYN / (I * inc + SYN)
//!     I within [I_min, 1000 us]
//! after 1 s without ACK or loss report: every unacknowledged block is resent
//! ```
//!
//! The increase adds `inc` packets per SYN period, with `inc` a thousandth of the
//! current rate's decade: multiplicative within a decade, which makes the whole
//! MIMD as the paper calls it. It starts at its fastest rate, `I_min` (10 µs in
//! the release, about 1.2 Gb/s of 1500-byte packets; here from the configured rate).

use std::collections::{BTreeMap, BTreeSet};

use longhaul_wire::blast::{BlockKind, Message};

use super::{resend_or_new, Bitmap, BlastConfig, Io, Pacer, RecvRules, SabulConfig, SendRules};
use crate::time::{Duration, Instant};

/// The multiplicative decrease of the inter-packet time.
const DECREASE: f64 = 1.125;
/// Weight of the previous smoothed loss rate.
const WEIGHT: f64 = 0.1;

#[derive(Debug)]
pub(super) struct Sender {
    cfg: SabulConfig,
    blocks: u32,
    active: bool,
    /// Every block below it was acknowledged.
    last_ack: u32,
    /// The next new block.
    curr: u32,
    losses: BTreeSet<u32>,
    /// Inter-packet time bounds, ns.
    min_interval: f64,
    /// Blocks sent and lost in this SYN period.
    period_sent: u64,
    period_lost: u64,
    history: f64,
    /// The decrease mark, and the loss-report count and step since it.
    last_dec: Option<u32>,
    err_count: u32,
    dec_steps: u32,
    exp_at: Option<Instant>,
}

impl Sender {
    pub(super) fn new(cfg: &BlastConfig) -> Self {
        Sender {
            cfg: cfg.sabul,
            blocks: cfg.blocks(),
            active: false,
            last_ack: 0,
            curr: 0,
            losses: BTreeSet::new(),
            min_interval: cfg.interval_at(cfg.rate),
            period_sent: 0,
            period_lost: 0,
            history: 0.0,
            last_dec: None,
            err_count: 0,
            dec_steps: 1,
            exp_at: None,
        }
    }

    fn max_interval(&self) -> f64 {
        (self.cfg.max_interval.as_nanos() as f64).max(self.min_interval)
    }

    /// The SYN-period rate control.
    fn rate_control(&mut self, loss: f64, pacer: &mut Pacer) {
        self.history = self.history * WEIGHT + loss * (1.0 - WEIGHT);
        if self.history > self.cfg.loss_limit {
            return;
        }
        let syn = self.cfg.syn.as_nanos() as f64;
        let i = pacer.interval_ns;
        let inc = (10f64.powf((syn / i).log10().ceil()) / 1000.0).max(1.0 / 1500.0);
        pacer.interval_ns =
            (i * syn / (i * inc + syn)).clamp(self.min_interval, self.max_interval());
    }
}

impl SendRules for Sender {
    fn on_message(&mut self, now: Instant, m: Message, io: &mut Io, pacer: &mut Pacer) {
        match m {
            Message::Request { .. } if !self.active => {
                self.active = true;
                pacer.interval_ns = self.min_interval;
                self.exp_at = Some(now + self.cfg.exp);
                io.send(Message::Start { size: io.cfg.size });
            }
            Message::Ack { next } if self.active => {
                if next > self.last_ack && next <= self.curr {
                    self.last_ack = next;
                    self.losses = self.losses.split_off(&next);
                }
                self.exp_at = Some(now + self.cfg.exp);
            }
            Message::Syn { .. } if self.active => {
                let sent = self.period_sent.max(self.period_lost);
                if sent > 0 {
                    self.rate_control(self.period_lost as f64 / sent as f64, pacer);
                }
                self.period_sent = 0;
                self.period_lost = 0;
            }
            Message::Loss { blocks } if self.active => {
                let valid: Vec<u32> = blocks
                    .into_iter()
                    .filter(|&b| b >= self.last_ack && b < self.curr)
                    .collect();
                if let Some(&first) = valid.first() {
                    if self.last_dec.is_none_or(|mark| first > mark) {
                        pacer.interval_ns = (pacer.interval_ns * DECREASE).min(self.max_interval());
                        self.last_dec = Some(self.curr.saturating_sub(1));
                        pacer.hold(now, self.cfg.syn);
                        self.err_count = 1;
                        self.dec_steps = 4;
                    } else {
                        self.err_count += 1;
                        if self.err_count >= 1 << self.dec_steps.min(31) {
                            self.dec_steps += 1;
                            pacer.interval_ns =
                                (pacer.interval_ns * DECREASE).min(self.max_interval());
                        }
                    }
                }
                self.period_lost += valid.len() as u64;
                self.losses.extend(valid);
                self.exp_at = Some(now + self.cfg.exp);
            }
            _ => io.stats.bad_input += 1,
        }
    }

    fn wants_to_send(&self) -> bool {
        self.active
            && (!self.losses.is_empty()
                || (self.curr < self.blocks && self.curr - self.last_ack < self.cfg.window))
    }

    fn next_block(
        &mut self,
        _now: Instant,
        _io: &mut Io,
        _p: &mut Pacer,
    ) -> Option<(u32, BlockKind)> {
        self.period_sent += 1;
        Some(resend_or_new(self.losses.pop_first(), &mut self.curr))
    }

    fn timeout(&self) -> Option<Instant> {
        self.exp_at.filter(|_| self.last_ack < self.blocks)
    }

    fn on_timeout(&mut self, now: Instant, _io: &mut Io) {
        // Silence: everything sent and not acknowledged may be lost.
        self.losses.extend(self.last_ack..self.curr);
        self.exp_at = Some(now + self.cfg.exp);
    }

    fn finished(&self) -> bool {
        self.last_ack >= self.blocks
    }
}

#[derive(Debug)]
pub(super) struct Receiver {
    cfg: SabulConfig,
    request_at: Option<Instant>,
    /// 1.5 RTT measured on the opening exchange, at least the ERR period.
    report_after: Duration,
    /// The highest block seen, plus one.
    seen: u32,
    /// Missing blocks and when each was last reported.
    losses: BTreeMap<u32, Instant>,
    last_ack: u32,
    period_received: u32,
    next_ack: Option<Instant>,
    next_err: Option<Instant>,
    next_syn: Option<Instant>,
}

impl Receiver {
    pub(super) fn new(cfg: &BlastConfig) -> Self {
        Receiver {
            cfg: cfg.sabul,
            request_at: None,
            report_after: cfg.sabul.err,
            seen: 0,
            losses: BTreeMap::new(),
            last_ack: 0,
            period_received: 0,
            next_ack: None,
            next_err: None,
            next_syn: None,
        }
    }

    fn start_timers(&mut self, now: Instant) {
        if self.next_syn.is_none() {
            self.next_ack = Some(now + self.cfg.ack);
            self.next_err = Some(now + self.cfg.err);
            self.next_syn = Some(now + self.cfg.syn);
        }
    }

    fn ack(&mut self, io: &mut Io, got: &Bitmap) {
        let next = got.first_missing_from(self.last_ack);
        if next > self.last_ack {
            self.last_ack = next;
            io.send(Message::Ack { next });
        }
    }
}

impl RecvRules for Receiver {
    fn connected(&mut self, now: Instant, io: &mut Io) {
        self.request_at = Some(now);
        io.send(Message::Request {
            rate_bps: io.cfg.rate.as_bps(),
            error_rate: 0,
        });
    }

    fn on_message(&mut self, now: Instant, m: Message, io: &mut Io, _got: &Bitmap) {
        match m {
            Message::Start { .. } => {
                if let Some(at) = self.request_at.take() {
                    self.report_after = now
                        .saturating_duration_since(at)
                        .mul_f64(1.5)
                        .max(self.cfg.err);
                }
                self.start_timers(now);
            }
            _ => io.stats.bad_input += 1,
        }
    }

    fn on_block(&mut self, now: Instant, b: u32, fresh: bool, io: &mut Io, got: &Bitmap) {
        self.start_timers(now);
        self.period_received += 1;
        if fresh && b > self.seen {
            // A gap: report it at once.
            let lost: Vec<u32> = (self.seen..b).filter(|&k| !got.get(k)).collect();
            for &k in &lost {
                self.losses.insert(k, now);
            }
            if !lost.is_empty() {
                io.send(Message::Loss { blocks: lost });
            }
        } else {
            self.losses.remove(&b);
        }
        self.seen = self.seen.max(b + 1);
        if got.full() {
            self.ack(io, got);
        }
    }

    fn timeout(&self) -> Option<Instant> {
        [self.next_ack, self.next_err, self.next_syn]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_timeout(&mut self, now: Instant, io: &mut Io, got: &Bitmap) {
        if self.next_ack.is_some_and(|t| t <= now) {
            self.ack(io, got);
            self.next_ack = Some(now + self.cfg.ack);
        }
        if self.next_err.is_some_and(|t| t <= now) {
            let stale: Vec<u32> = self
                .losses
                .iter_mut()
                .filter(|(_, at)| now.saturating_duration_since(**at) >= self.report_after)
                .map(|(&k, at)| {
                    *at = now;
                    k
                })
                .collect();
            if !stale.is_empty() {
                io.send(Message::Loss { blocks: stale });
            }
            self.next_err = Some(now + self.cfg.err);
        }
        if self.next_syn.is_some_and(|t| t <= now) {
            io.send(Message::Syn {
                received: self.period_received,
            });
            self.period_received = 0;
            self.next_syn = Some(now + self.cfg.syn);
        }
    }
}
