//! Header prediction (Jacobson, "4.3BSD TCP header prediction", 1990; Linux's
//! `tcp_rcv_established` fast path): in a bulk transfer almost every segment is
//! either the next in-order data segment or a plain ACK that moves `SND.UNA`. Both are
//! recognised from a few fixed header bytes and handled here, without building a
//! `TcpRepr`.
//!
//! The rest of an established connection's traffic is mostly plain too: out-of-order
//! data, duplicate ACKs, and ACKs carrying SACK blocks in the layout every stack
//! sends (NOP, NOP, SACK; the timestamps option before it when negotiated). Those
//! skip the general parser (its IPv4 checks and option
//! loop): their `TcpRepr` is read straight off the fixed offsets and goes to the same
//! established-state processing. In a slow-start overshoot that is every segment
//! for several round trips. Anything else (other options, flags other than ACK/PSH,
//! FIN state) falls through to the general path, which would have done exactly the
//! same for all of these.

use longhaul_wire::tcp::{TcpTimestamp, TIMESTAMP_OPTION_HEAD, TIMESTAMP_OPTION_LEN};
use longhaul_wire::{Ipv4Packet, TcpControl, TcpPacket, TcpRepr};

use super::{State, TcpConnection, MAX_SACK_BLOCKS};
use crate::cc::{AckSample, CongestionControl};
use crate::seq::unwrap_tcp;
use crate::time::Instant;
use longhaul_wire::{be16, be32, TcpSeqNumber};

/// IPv4 (20) and TCP (20) headers without options.
const HDR: usize = 40;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

type SackRanges = [Option<(TcpSeqNumber, TcpSeqNumber)>; MAX_SACK_BLOCKS];

impl TcpConnection {
    /// Handles `d` if it is one of the two predicted segments, or another plain
    /// established-state segment (see the module's opening); returns false, having
    /// changed nothing, for anything the general parser must read.
    pub(super) fn try_fast_path(&mut self, now: Instant, d: &[u8]) -> bool {
        if self.state != State::Established
            || d.len() < HDR
            || d[0] != 0x45
            || d[9] != 6
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
        let hdr = 20 + usize::from(d[20 + 12] >> 4) * 4;
        let total = usize::from(be16(d, 2));
        if d.len() != hdr || hdr < HDR || total < hdr || be16(d, 6) & 0x3fff != 0 {
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
        let payload = (total - hdr) as u64;
        let seq = TcpSeqNumber(be32(d, 24));
        let ack = TcpSeqNumber(be32(d, 28));
        let mut ts = None;
        if hdr == HDR + TIMESTAMP_OPTION_LEN && d[HDR..HDR + 4] == TIMESTAMP_OPTION_HEAD {
            // The timestamps option alone (every segment but a recovery's ACKs, once
            // negotiated): read in place, without the general options' result.
            ts = Some(TcpTimestamp {
                tsval: be32(d, HDR + 4),
                tsecr: be32(d, HDR + 8),
            });
        } else if hdr > HDR {
            let Some((t, sack_ranges)) = longhaul_wire::tcp::parse_fast_options(&d[HDR..hdr])
            else {
                return false;
            };
            if sack_ranges[0].is_some() {
                self.process_plain(now, d, seq, ack, sack_ranges, t, payload);
                return true;
            }
            ts = t;
        }
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
                self.process_plain(now, d, seq, ack, [None; MAX_SACK_BLOCKS], ts, payload);
                return true;
            }
            self.take_timestamp(seq, ts);
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
            self.process_plain(now, d, seq, ack, [None; MAX_SACK_BLOCKS], ts, payload);
            return true;
        }
        let tsecr = self.take_timestamp(seq, ts);
        let ack_off = ack_off as u64;
        self.peer_window = window;
        let prior_in_flight = self.in_flight();
        if self.model_based {
            self.board.begin_rate_sample();
        }
        let cum = self.on_cumulative_ack(now, una, ack_off, tsecr);
        let sample = AckSample::new(cum.newly_acked, prior_in_flight, self.rtt.srtt()).with_rtt(
            cum.rtt_sample_from
                .map(|sent| now.saturating_duration_since(sent)),
        );
        self.cc.on_ack(now, &sample);
        if self.model_based {
            self.feed_rate_sample(now, prior_in_flight, cum.rtt_sample_from);
        }
        true
    }

    /// An established-state segment with only ACK (and PSH) set and no options but
    /// timestamps and SACK blocks, that header prediction did not take: the general
    /// processing, with the `TcpRepr` the general parser would have built.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn process_plain(
        &mut self,
        now: Instant,
        d: &[u8],
        seq: TcpSeqNumber,
        ack: TcpSeqNumber,
        sack_ranges: SackRanges,
        timestamp: Option<TcpTimestamp>,
        payload: u64,
    ) {
        let repr = TcpRepr {
            src_port: be16(d, 20),
            dst_port: be16(d, 22),
            control: TcpControl::None,
            seq_number: seq,
            ack_number: Some(ack),
            window_len: be16(d, 34),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            timestamp,
            sack_ranges,
            push: d[20 + 13] & PSH != 0,
            payload_len: payload as usize,
        };
        self.process_established(now, &repr);
    }
}
