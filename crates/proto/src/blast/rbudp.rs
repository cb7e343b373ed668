//! RBUDP: He, Leigh, Yu, DeFanti, "Reliable Blast UDP: Predictable High
//! Performance Bulk Data Transfer", IEEE Cluster 2002.
//!
//! The paper's scheme, in its words' order:
//! 1. the sender tells the receiver over TCP how much is coming, then blasts every
//!    datagram over UDP at the user's chosen rate;
//! 2. it sends "DONE" over TCP;
//! 3. the receiver answers with an error bitmap of the datagrams that arrived;
//! 4. the sender blasts the missing ones again at the same rate, and 2–4 repeat
//!    until the bitmap is full.
//!
//! There is no rate adaptation: the paper's advice is to pick a rate a little below
//! the available bandwidth, and its model of the transfer time (blast time plus one
//! round trip per re-blast round) holds only then. Here the receiver answers a
//! "DONE" after which it has everything with a stop message rather than a full
//! bitmap (the same information, 5 bytes instead of one bit per block).

use longhaul_wire::blast::{BlockKind, Message};

use super::{Bitmap, Io, Pacer, RecvRules, SendRules};
use crate::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the control connection.
    Idle,
    /// Blasting this round's list.
    Blasting,
    /// "DONE" sent; waiting for the bitmap.
    Waiting,
    /// The receiver has everything.
    Done,
}

#[derive(Debug)]
pub(super) struct Sender {
    phase: Phase,
    round: u32,
    /// This round's blocks (round 0: all of them, as a count).
    list: Vec<u32>,
    pos: usize,
    blocks: u32,
}

impl Sender {
    pub(super) fn new(cfg: &super::BlastConfig) -> Self {
        Sender {
            phase: Phase::Idle,
            round: 0,
            list: vec![],
            pos: 0,
            blocks: cfg.blocks(),
        }
    }
    fn round_len(&self) -> usize {
        if self.round == 0 {
            self.blocks as usize
        } else {
            self.list.len()
        }
    }
}

impl SendRules for Sender {
    fn connected(&mut self, _now: Instant, io: &mut Io, _pacer: &mut Pacer) {
        if self.phase == Phase::Idle {
            io.send(Message::Start { size: io.cfg.size });
            self.phase = Phase::Blasting;
        }
    }

    fn on_message(&mut self, _now: Instant, m: Message, io: &mut Io, _pacer: &mut Pacer) {
        match m {
            Message::Bitmap { round, bits }
                if round == self.round && self.phase == Phase::Waiting =>
            {
                let n = self.blocks;
                self.list = (0..n)
                    .filter(|&b| {
                        bits.get(b as usize / 8)
                            .is_none_or(|x| x >> (b % 8) & 1 == 0)
                    })
                    .collect();
                self.round += 1;
                self.pos = 0;
                self.phase = Phase::Blasting;
                if self.list.is_empty() {
                    // A full bitmap: the receiver's stop follows.
                    self.phase = Phase::Waiting;
                }
            }
            Message::Stop => self.phase = Phase::Done,
            _ => io.stats.bad_input += 1,
        }
    }

    fn wants_to_send(&self) -> bool {
        self.phase == Phase::Blasting
    }

    fn next_block(
        &mut self,
        _now: Instant,
        io: &mut Io,
        _p: &mut Pacer,
    ) -> Option<(u32, BlockKind)> {
        let (b, kind) = if self.round == 0 {
            (self.pos as u32, BlockKind::Original)
        } else {
            (self.list[self.pos], BlockKind::Retransmission)
        };
        self.pos += 1;
        if self.pos == self.round_len() {
            io.send(Message::Done { round: self.round });
            self.phase = Phase::Waiting;
        }
        Some((b, kind))
    }

    fn timeout(&self) -> Option<Instant> {
        None
    }

    fn finished(&self) -> bool {
        self.phase == Phase::Done
    }
}

/// The receiver only marks blocks (the bitmap is kept for it) and answers "DONE".
#[derive(Debug)]
pub(super) struct Receiver;

impl RecvRules for Receiver {
    fn on_message(&mut self, _now: Instant, m: Message, io: &mut Io, got: &Bitmap) {
        match m {
            Message::Start { .. } => {}
            Message::Done { round } if got.full() => {
                let _ = round;
                io.send(Message::Stop)
            }
            Message::Done { round } => io.send(Message::Bitmap {
                round,
                bits: got.to_bytes(),
            }),
            _ => io.stats.bad_input += 1,
        }
    }

    fn on_block(&mut self, _now: Instant, _b: u32, _fresh: bool, _io: &mut Io, _got: &Bitmap) {}

    fn timeout(&self) -> Option<Instant> {
        None
    }

    fn on_timeout(&mut self, _now: Instant, _io: &mut Io, _got: &Bitmap) {}
}
