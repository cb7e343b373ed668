//! Header prediction (Jacobson, "4.3BSD TCP header prediction", 1990; Linux's
//! `tcp_rcv_established` fast path): in a bulk transfer almost every segment is
//! either the next in-order data segment or a plain ACK that moves `SND.UNA`. Both are
//! recognised from a few fixed header bytes and handled here, without building a
//! `TcpRepr`. Anything else (options, flags other than ACK/PSH, out-of-order data,
//! duplicate ACKs, recovery, FIN state) falls through to the general path, which
//! would have done exactly the same for these two cases.

use longhaul_wire::{Ipv4Packet, TcpPacket};

use super::{State, TcpConnection};
use crate::cc::{AckSample, CongestionControl};
use crate::seq::unwrap_tcp;
use crate::time::Instant;
use longhaul_wire::TcpSeqNumber;

/// IPv4 (20) and TCP (20) headers without options.
const HDR: usize = 40;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl TcpConnection {
    /// Handles `d` if it is one of the two predicted segments; returns false, having
    /// changed nothing, otherwise.
    pub(super) fn try_fast_path(&mut self, now: Instant, d: &[u8]) -> bool {
        if self.state != State::Established
            || d.len() != HDR
            || d[0] != 0x45
            || d[9] != 6
            || d[20 + 12] != 0x50
            || d[20 + 13] & !PSH != ACK
            || d[12..16] != self.remote.0 .0
            || d[16..20] != self.local.0 .0
            || be16(d, 20) != self.remote.1
            || be16(d, 22) != self.local.1
            || self.fin_at.is_some()
            || self.fin_sent
        {
            return false;
        }
        let total = usize::from(be16(d, 2));
        if total < HDR || be16(d, 6) & 0x3fff != 0 {
            return false; // malformed or fragmented: the general path counts it
        }
        if self.cfg.checksum == longhaul_wire::Checksum::Both {
            let ip = Ipv4Packet::new_unchecked(d);
            let tcp = TcpPacket::new_unchecked(&d[20..]);
            if !ip.verify_checksum()
                || !tcp.verify_checksum(self.remote.0, self.local.0, total - 20)
            {
                return false;
            }
        }
        let payload = (total - HDR) as u64;
        let seq = TcpSeqNumber(be32(d, 24));
        let ack = TcpSeqNumber(be32(d, 28));
        let window = u64::from(be16(d, 34)) << self.snd_wscale;
        let una = self.board.una();
        let ack_off = unwrap_tcp(ack, self.seq_of_snd(una), una);

        if payload > 0 {
            // Predicted data: the next in-order segment, nothing held out of order,
            // and an ACK field that acknowledges nothing new on an idle send side.
            let end = self.rcv_nxt + payload;
            if seq != self.irs + 1 + self.rcv_nxt as u32
                || !self.asm.is_empty()
                || end > self.rcv_nxt + self.cfg.recv_buffer_bytes
                || ack_off != una as i64
                || self.board.outstanding() != 0
            {
                return false;
            }
            self.peer_window = window;
            self.rcv_nxt = end;
            self.unacked_segments += 1;
            if self.unacked_segments >= self.cfg.ack.every {
                self.ack_now = true;
            } else if self.quick_acks_left > 0 {
                self.quick_acks_left -= 1;
                self.ack_now = true;
            } else if self.delack_at.is_none() {
                self.delack_at = Some(now + self.cfg.ack.delay);
            }
            return true;
        }

        // Predicted ACK: moves SND.UNA within what was sent, outside recovery, no SACK
        // blocks (the header has no options), sequence number where we expect it.
        if self.recovery.is_some()
            || ack_off <= una as i64
            || ack_off > self.board.max() as i64
            || seq != self.irs + 1 + self.rcv_nxt as u32
        {
            return false;
        }
        let ack_off = ack_off as u64;
        self.peer_window = window;
        let prior_in_flight = self.in_flight();
        let cum = self.on_cumulative_ack(now, una, ack_off);
        let sample = AckSample::new(cum.newly_acked, prior_in_flight, self.rtt.srtt());
        self.cc.on_ack(now, &sample);
        true
    }
}
