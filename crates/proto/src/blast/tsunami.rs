//! Tsunami: Meiss, "Tsunami: A High-Speed Rate-Controlled Protocol for File
//! Transfer", Indiana University 2004; the rules as the Tsunami UDP server and
//! client (Indiana University 2002, later Metsähovi) implement them.
//!
//! The client opens with a get-file request carrying the target rate and the error
//! rate it accepts; the server replies with the file's length and starts sending
//! blocks in order, pausing an inter-packet delay (IPD) after each. Retransmission
//! requests go before new blocks. The client notes in a table every block skipped
//! over by a later one; every update period it drops from the table the blocks that
//! arrived since, asks for the rest, and reports its error rate. When the table
//! would hold more than its limit, it asks the server to restart from the first
//! missing block instead. When everything arrived it sends stop.
//!
//! The server's answer to an error-rate report (the server's `ttp_accept_retransmit`):
//!
//! ```text
//! if error_rate > threshold:
//!     ipd *= 1 + (slower_num/slower_den - 1) * (1 + error_rate - threshold)/(100000 - threshold)
//! else:
//!     ipd *= faster_num/faster_den
//! ipd = max(min(ipd, 10000 us), ipd_target)
//! ```
//!
//! Where the sources are silent, chosen here and stated:
//! - the error rate the client reports is its share of asked-for blocks among the
//!   blocks it heard of in the period, `100000 * asked / (asked + received)`, smoothed
//!   with the client's history weight (`history` % of the old value);
//! - a lost tail (the last blocks, with nothing after them to reveal the gap): when a
//!   whole update period passes with no block and nothing asked for, the client asks
//!   for the blocks after the last one it saw (up to the table's limit). The server
//!   sends nothing while idle.

use std::collections::VecDeque;

use longhaul_wire::blast::{BlockKind, Message};

use super::{resend_or_new, Bitmap, BlastConfig, Io, Pacer, RecvRules, SendRules, TsunamiConfig};
use crate::time::Instant;

/// The slowest the server goes: an IPD of 10 ms.
const MAX_IPD_NS: f64 = 10e6;

#[derive(Debug)]
pub(super) struct Sender {
    cfg: TsunamiConfig,
    active: bool,
    stopped: bool,
    next_new: u32,
    blocks: u32,
    requests: VecDeque<u32>,
    /// The target IPD (from the requested rate).
    ipd_target: f64,
}

impl Sender {
    pub(super) fn new(cfg: &BlastConfig) -> Self {
        Sender {
            cfg: cfg.tsunami,
            active: false,
            stopped: false,
            next_new: 0,
            blocks: cfg.blocks(),
            requests: VecDeque::new(),
            ipd_target: 0.0,
        }
    }
}

impl SendRules for Sender {
    fn on_message(&mut self, _now: Instant, m: Message, io: &mut Io, pacer: &mut Pacer) {
        match m {
            Message::Request {
                rate_bps,
                error_rate,
            } if !self.active => {
                self.active = true;
                self.cfg.error_rate = error_rate.min(99_999);
                self.ipd_target = io.cfg.interval_at(crate::Bandwidth::from_bps(rate_bps));
                pacer.interval_ns = self.ipd_target;
                io.send(Message::Start { size: io.cfg.size });
            }
            Message::Retransmit { blocks } if self.active => {
                self.requests
                    .extend(blocks.into_iter().filter(|&b| b < self.blocks));
            }
            Message::ErrorRate { rate } if self.active => {
                let t = self.cfg;
                let mut ipd = pacer.interval_ns;
                if rate > t.error_rate {
                    let f1 = f64::from(t.slower.0) / f64::from(t.slower.1) - 1.0;
                    let f2 = (1.0 + f64::from(rate) - f64::from(t.error_rate))
                        / (100_000.0 - f64::from(t.error_rate));
                    ipd *= 1.0 + f1 * f2;
                } else {
                    ipd *= f64::from(t.faster.0) / f64::from(t.faster.1);
                }
                pacer.interval_ns = ipd.min(MAX_IPD_NS).max(self.ipd_target);
            }
            Message::Restart { block } if self.active => {
                self.requests.clear();
                self.next_new = block.min(self.blocks);
            }
            Message::Stop => self.stopped = true,
            _ => io.stats.bad_input += 1,
        }
    }

    fn wants_to_send(&self) -> bool {
        self.active && (!self.requests.is_empty() || self.next_new < self.blocks)
    }

    fn next_block(
        &mut self,
        _now: Instant,
        _io: &mut Io,
        _p: &mut Pacer,
    ) -> Option<(u32, BlockKind)> {
        Some(resend_or_new(self.requests.pop_front(), &mut self.next_new))
    }

    fn timeout(&self) -> Option<Instant> {
        None
    }

    fn finished(&self) -> bool {
        self.stopped
    }
}

#[derive(Debug)]
pub(super) struct Receiver {
    cfg: TsunamiConfig,
    rate_bps: u64,
    started: bool,
    /// One past the highest block seen (the next expected in order of sending).
    expected: u32,
    /// Blocks skipped over and not yet seen.
    table: Vec<u32>,
    next_update: Option<Instant>,
    /// Blocks received in this update period.
    period_blocks: u32,
    /// Smoothed error rate, 1/100000.
    error_rate: f64,
}

impl Receiver {
    pub(super) fn new(cfg: &BlastConfig) -> Self {
        Receiver {
            cfg: cfg.tsunami,
            rate_bps: cfg.rate.as_bps(),
            started: false,
            expected: 0,
            table: vec![],
            next_update: None,
            period_blocks: 0,
            error_rate: 0.0,
        }
    }
}

impl RecvRules for Receiver {
    fn connected(&mut self, _now: Instant, io: &mut Io) {
        io.send(Message::Request {
            rate_bps: self.rate_bps,
            error_rate: self.cfg.error_rate,
        });
    }

    fn on_message(&mut self, now: Instant, m: Message, io: &mut Io, _got: &Bitmap) {
        match m {
            Message::Start { .. } if !self.started => {
                self.started = true;
                self.next_update = Some(now + self.cfg.update);
            }
            _ => io.stats.bad_input += 1,
        }
    }

    fn on_block(&mut self, now: Instant, b: u32, fresh: bool, io: &mut Io, got: &Bitmap) {
        self.period_blocks += 1;
        if self.next_update.is_none() {
            // Data overtook the reply: the period starts with the first block.
            self.next_update = Some(now + self.cfg.update);
        }
        if fresh && b > self.expected {
            self.table
                .extend((self.expected..b).filter(|&k| !got.get(k)));
        }
        self.expected = self.expected.max(b + 1);
        if got.full() {
            io.send(Message::Stop);
        }
    }

    fn timeout(&self) -> Option<Instant> {
        self.next_update
    }

    fn on_timeout(&mut self, now: Instant, io: &mut Io, got: &Bitmap) {
        self.table.retain(|&k| !got.get(k));
        let limit = self.cfg.max_requests as usize;
        let mut asked = 0u32;
        if self.table.len() >= limit {
            // Too far behind: go back to the first hole and start over from there.
            let first = got.first_missing_from(0);
            io.send(Message::Restart { block: first });
            self.table.clear();
            self.expected = first;
        } else if !self.table.is_empty() {
            asked = self.table.len() as u32;
            io.send(Message::Retransmit {
                blocks: self.table.clone(),
            });
        } else if self.period_blocks == 0 && self.expected < io.blocks {
            // A silent period with nothing to ask for: the tail was lost.
            let end = io.blocks.min(self.expected.saturating_add(limit as u32));
            let tail: Vec<u32> = (self.expected..end).filter(|&k| !got.get(k)).collect();
            asked = tail.len() as u32;
            io.send(Message::Retransmit { blocks: tail });
        }
        let heard = f64::from(asked) + f64::from(self.period_blocks);
        let now_rate = if heard > 0.0 {
            1e5 * f64::from(asked) / heard
        } else {
            0.0
        };
        let h = f64::from(self.cfg.history.min(100)) / 100.0;
        self.error_rate = h * self.error_rate + (1.0 - h) * now_rate;
        io.send(Message::ErrorRate {
            rate: self.error_rate.round() as u32,
        });
        self.period_blocks = 0;
        self.next_update = Some(now + self.cfg.update);
    }
}
