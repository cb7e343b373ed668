//! The UDP blast protocols' formats: the data datagram's header, and the messages
//! of their TCP control channel.
//!
//! RBUDP (He, Leigh, Yu, DeFanti, "Reliable Blast UDP: Predictable High Performance
//! Bulk Data Transfer", IEEE Cluster 2002), Tsunami (Meiss, "Tsunami: A High-Speed
//! Rate-Controlled Protocol for File Transfer", Indiana University 2004) and SABUL
//! (Gu, Grossman, "SABUL: A Transport Protocol for Grid Computing", Journal of Grid
//! Computing 2003) all number fixed-size blocks, send them in UDP datagrams, and
//! talk over a TCP connection. Each original program has its own byte layout; these
//! formats are longhaul's, one for the three, carrying the fields each protocol's
//! messages carry (which messages a protocol uses is in `longhaul_proto::blast`).
//!
//! ```text
//! data datagram:  kind (u8) | 0 0 0 | block number (u32) | payload ...
//! control frame:  type (u8) | body length (u32) | body ...
//! ```
//! All integers are big-endian.

use crate::{be32, Error, Result};

/// Length of a data datagram's header.
pub const DATA_HEADER_LEN: usize = 8;
/// Length of a control frame's header.
pub const FRAME_HEADER_LEN: usize = 5;
/// Largest control body accepted: a bitmap of 2^27 blocks (far beyond any file the
/// tools sent in one piece), so a bad length cannot make a reader wait for or hold
/// gigabytes.
pub const MAX_BODY_LEN: usize = 1 << 24;

/// How a block was sent (Tsunami flags it; the others send only originals and
/// retransmissions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// Its first sending.
    Original,
    /// Sent again because it was reported missing.
    Retransmission,
}

/// A data datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRepr {
    /// First sending or not.
    pub kind: BlockKind,
    /// Block number, from 0.
    pub block: u32,
}

impl BlockRepr {
    /// Reads the header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let h = buf.get(..DATA_HEADER_LEN).ok_or(Error::Truncated)?;
        let kind = match h[0] {
            b'O' => BlockKind::Original,
            b'R' => BlockKind::Retransmission,
            _ => return Err(Error::Malformed),
        };
        Ok(BlockRepr {
            kind,
            block: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        })
    }

    /// Writes the header at the start of `buf` (at least [`DATA_HEADER_LEN`] long).
    pub fn emit(&self, buf: &mut [u8]) {
        buf[0] = match self.kind {
            BlockKind::Original => b'O',
            BlockKind::Retransmission => b'R',
        };
        buf[1..4].fill(0);
        buf[4..8].copy_from_slice(&self.block.to_be_bytes());
    }
}

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Receiver to sender, opening a transfer (Tsunami's get-file request with its
    /// rate parameters; SABUL's option exchange). `rate_bps` is the target rate,
    /// `error_rate` the acceptable loss in 1/100000 (Tsunami), both 0 where unused.
    Request {
        /// Target sending rate, bits per second.
        rate_bps: u64,
        /// Loss the sender may accept before slowing, in 1/100000.
        error_rate: u32,
    },
    /// Sender to receiver: the size of what follows.
    Start {
        /// Bytes.
        size: u64,
    },
    /// RBUDP, sender to receiver: the blast of round `round` is over.
    Done {
        /// Round, from 0.
        round: u32,
    },
    /// RBUDP, receiver to sender: which blocks arrived (bit `i` of byte `i / 8`,
    /// least significant first).
    Bitmap {
        /// The round it answers.
        round: u32,
        /// The bits.
        bits: Vec<u8>,
    },
    /// Tsunami, receiver to sender: send these blocks again.
    Retransmit {
        /// Block numbers.
        blocks: Vec<u32>,
    },
    /// Tsunami, receiver to sender: the loss the receiver saw lately, in 1/100000.
    ErrorRate {
        /// 1/100000.
        rate: u32,
    },
    /// Tsunami, receiver to sender: go back and continue from `block`.
    Restart {
        /// Block number.
        block: u32,
    },
    /// Receiver to sender: everything arrived; stop.
    Stop,
    /// SABUL, receiver to sender: every block below `next` arrived.
    Ack {
        /// First block not yet received in order.
        next: u32,
    },
    /// SABUL, receiver to sender: these blocks are missing.
    Loss {
        /// Block numbers.
        blocks: Vec<u32>,
    },
    /// SABUL, receiver to sender: datagrams received since the last `Syn`.
    Syn {
        /// Datagrams.
        received: u32,
    },
}

const REQUEST: u8 = 1;
const START: u8 = 2;
const DONE: u8 = 3;
const BITMAP: u8 = 4;
const RETRANSMIT: u8 = 5;
const ERROR_RATE: u8 = 6;
const RESTART: u8 = 7;
const STOP: u8 = 8;
const ACK: u8 = 9;
const LOSS: u8 = 10;
const SYN: u8 = 11;

fn u64_at(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

fn blocks(body: &[u8]) -> Result<Vec<u32>> {
    if !body.len().is_multiple_of(4) {
        return Err(Error::Malformed);
    }
    Ok(body.chunks_exact(4).map(|c| be32(c, 0)).collect())
}

impl Message {
    fn kind(&self) -> u8 {
        match self {
            Message::Request { .. } => REQUEST,
            Message::Start { .. } => START,
            Message::Done { .. } => DONE,
            Message::Bitmap { .. } => BITMAP,
            Message::Retransmit { .. } => RETRANSMIT,
            Message::ErrorRate { .. } => ERROR_RATE,
            Message::Restart { .. } => RESTART,
            Message::Stop => STOP,
            Message::Ack { .. } => ACK,
            Message::Loss { .. } => LOSS,
            Message::Syn { .. } => SYN,
        }
    }

    /// Length of the body.
    fn body_len(&self) -> usize {
        match self {
            Message::Request { .. } => 12,
            Message::Start { .. } => 8,
            Message::Bitmap { bits, .. } => 4 + bits.len(),
            Message::Retransmit { blocks } | Message::Loss { blocks } => 4 * blocks.len(),
            Message::Stop => 0,
            Message::Done { .. }
            | Message::ErrorRate { .. }
            | Message::Restart { .. }
            | Message::Ack { .. }
            | Message::Syn { .. } => 4,
        }
    }

    /// Length of the whole frame.
    pub fn frame_len(&self) -> usize {
        FRAME_HEADER_LEN + self.body_len()
    }

    /// Appends the frame to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.push(self.kind());
        out.extend_from_slice(&(self.body_len() as u32).to_be_bytes());
        match self {
            Message::Request {
                rate_bps,
                error_rate,
            } => {
                out.extend_from_slice(&rate_bps.to_be_bytes());
                out.extend_from_slice(&error_rate.to_be_bytes());
            }
            Message::Start { size } => out.extend_from_slice(&size.to_be_bytes()),
            Message::Bitmap { round, bits } => {
                out.extend_from_slice(&round.to_be_bytes());
                out.extend_from_slice(bits);
            }
            Message::Retransmit { blocks } | Message::Loss { blocks } => {
                for b in blocks {
                    out.extend_from_slice(&b.to_be_bytes());
                }
            }
            Message::Stop => {}
            Message::Done { round: v }
            | Message::ErrorRate { rate: v }
            | Message::Restart { block: v }
            | Message::Ack { next: v }
            | Message::Syn { received: v } => out.extend_from_slice(&v.to_be_bytes()),
        }
    }

    /// Reads one frame from the start of `buf`: the message and the bytes it took.
    /// `Err(Truncated)` means more bytes are needed (a stream reader waits for
    /// them); any other error means the stream is not this protocol's.
    pub fn parse(buf: &[u8]) -> Result<(Message, usize)> {
        let h = buf.get(..FRAME_HEADER_LEN).ok_or(Error::Truncated)?;
        let len = be32(h, 1) as usize;
        if len > MAX_BODY_LEN {
            return Err(Error::Malformed);
        }
        let body = buf
            .get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len)
            .ok_or(Error::Truncated)?;
        let fixed = |n: usize| {
            if len == n {
                Ok(())
            } else {
                Err(Error::Malformed)
            }
        };
        let m = match h[0] {
            REQUEST => {
                fixed(12)?;
                Message::Request {
                    rate_bps: u64_at(body, 0),
                    error_rate: be32(body, 8),
                }
            }
            START => {
                fixed(8)?;
                Message::Start {
                    size: u64_at(body, 0),
                }
            }
            BITMAP => {
                if len < 4 {
                    return Err(Error::Malformed);
                }
                Message::Bitmap {
                    round: be32(body, 0),
                    bits: body[4..].to_vec(),
                }
            }
            RETRANSMIT => Message::Retransmit {
                blocks: blocks(body)?,
            },
            LOSS => Message::Loss {
                blocks: blocks(body)?,
            },
            STOP => {
                fixed(0)?;
                Message::Stop
            }
            k @ (DONE | ERROR_RATE | RESTART | ACK | SYN) => {
                fixed(4)?;
                let v = be32(body, 0);
                match k {
                    DONE => Message::Done { round: v },
                    ERROR_RATE => Message::ErrorRate { rate: v },
                    RESTART => Message::Restart { block: v },
                    ACK => Message::Ack { next: v },
                    _ => Message::Syn { received: v },
                }
            }
            _ => return Err(Error::Malformed),
        };
        Ok((m, FRAME_HEADER_LEN + len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Message> {
        vec![
            Message::Request {
                rate_bps: 950_000_000,
                error_rate: 7500,
            },
            Message::Start { size: 100 << 20 },
            Message::Done { round: 3 },
            Message::Bitmap {
                round: 2,
                bits: vec![0xff, 0x7f, 0x01],
            },
            Message::Retransmit {
                blocks: vec![7, 9, 4_000_000_000],
            },
            Message::ErrorRate { rate: 12_345 },
            Message::Restart { block: 77 },
            Message::Stop,
            Message::Ack { next: 5 },
            Message::Loss { blocks: vec![] },
            Message::Syn { received: 830 },
        ]
    }

    #[test]
    fn every_message_parses_back_to_itself_from_a_stream() {
        let mut stream = vec![];
        for m in all() {
            let before = stream.len();
            m.emit(&mut stream);
            assert_eq!(stream.len() - before, m.frame_len(), "{m:?}");
        }
        let mut at = 0;
        for m in all() {
            // Every strict prefix of a frame asks for more bytes.
            let (_, n) = Message::parse(&stream[at..]).unwrap();
            for cut in 0..n {
                assert_eq!(
                    Message::parse(&stream[at..at + cut]),
                    Err(Error::Truncated),
                    "{m:?} cut at {cut}"
                );
            }
            assert_eq!(Message::parse(&stream[at..]), Ok((m, n)));
            at += n;
        }
        assert_eq!(at, stream.len());
    }

    #[test]
    fn bad_frames_are_refused_not_waited_for() {
        // Unknown type, a fixed body of the wrong length, a ragged block list, a
        // length beyond the bound.
        for bad in [
            vec![99, 0, 0, 0, 0],
            vec![STOP, 0, 0, 0, 1, 0],
            vec![ACK, 0, 0, 0, 3, 0, 0, 0],
            vec![LOSS, 0, 0, 0, 3, 0, 0, 0],
            vec![BITMAP, 0, 0, 0, 2, 0, 0],
            vec![BITMAP, 0x7f, 0xff, 0xff, 0xff],
        ] {
            assert_eq!(Message::parse(&bad), Err(Error::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn block_headers_round_trip_and_refuse_unknown_kinds() {
        let mut buf = [0u8; DATA_HEADER_LEN];
        for kind in [BlockKind::Original, BlockKind::Retransmission] {
            let r = BlockRepr {
                kind,
                block: 0xdead_beef,
            };
            r.emit(&mut buf);
            assert_eq!(BlockRepr::parse(&buf), Ok(r));
        }
        buf[0] = b'X';
        assert_eq!(BlockRepr::parse(&buf), Err(Error::Malformed));
        assert_eq!(BlockRepr::parse(&buf[..7]), Err(Error::Truncated));
    }
}
