//! What goes out: the next segment the state, the windows and the scoreboard allow
//! (SYN, retransmission, new data, FIN, or a pure ACK), its headers written from a
//! template with SACK blocks and timestamps as negotiated, and the per-round log of
//! new data.

use crate::cc::CongestionControl;
use crate::time::Instant;
use longhaul_wire::tcp::TcpTimestamp;
use longhaul_wire::tcp::{self, MAX_SACK_BLOCKS};
use longhaul_wire::{
    ipv4, Checksum, IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
};

use super::{State, TcpConnection, Timestamps, Transmit, TEMPLATE_LEN};

/// IP and TCP header bytes counted with each paced segment (20 + 20, and 12 of
/// timestamps, as Linux's segments carry).
const PACED_HEADER_BYTES: u64 = 52;

impl TcpConnection {
    /// Writes the next datagram's headers into `buf` (at least
    /// [`MAX_TRANSMIT_HEADER`](super::MAX_TRANSMIT_HEADER) bytes), or returns `None` when there is nothing to
    /// send now.
    #[must_use]
    pub(super) fn transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        match self.state {
            State::SynSent | State::SynReceived if self.syn_pending => {
                self.syn_pending = false;
                self.syn_sent_at = Some(now);
                self.rto_at
                    .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
                let seq = self.iss;
                return Some(self.emit(now, buf, TcpControl::Syn, seq, 0));
            }
            State::Established => {}
            _ => return None,
        }

        let max = self.board.max();
        if max == self.written && self.board.outstanding() == 0 && (!self.closed || self.fin_sent) {
            // Nothing to retransmit, no new data, no FIN: all this end can owe is an
            // ACK (a receiver's every poll), so skip the sender's checks below. Once
            // it is sent the end owes nothing, until something arrives.
            return self.ack_now.then(|| Transmit {
                more: false,
                ..self.emit_ack(now, buf, max)
            });
        }

        let cwnd = self.cc.window();
        // A pacing controller (BBR) spaces data segments at its rate: until the next
        // departure time only ACKs and the FIN may leave.
        let pace_ok = !self.model_based || self.pacing_allows(now);
        if let Some((off, len)) = self.board.next_retransmit().filter(|_| pace_ok) {
            if self.fast_rtx_pending || self.in_flight() + len <= cwnd {
                self.fast_rtx_pending = false;
                self.board.on_retransmit(now, off);
                self.cc.on_packet_sent(now, len, self.in_flight());
                if self.model_based {
                    self.pace(now, len);
                }
                self.stats.retransmits += 1;
                self.rto_at
                    .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
                let seq = self.seq_of_snd(off);
                return Some(self.emit(now, buf, TcpControl::None, seq, len as usize));
            }
        }

        // (Cheapest tests first: a bulk sender fails the second.)
        if !self.closed
            && self.written > max
            && self.written - max < self.board.next_new_room()
            && self.board.outstanding() == 0
            && self.written - max <= cwnd.min(self.peer_window)
        {
            // Nagle: a short segment may go when nothing is unacknowledged.
            self.board.rebase_short_segment(self.written);
        }
        let (len, room) = self.board.next_new();
        let full_or_last = len == room || (self.closed && max + len == self.written);
        if len > 0
            && pace_ok
            && full_or_last
            && max + len <= self.written
            && self.in_flight() + len <= cwnd
            && max + len <= self.board.una() + self.peer_window
            && max + len - self.board.una() <= self.cfg.send_buffer_bytes
        {
            self.board.on_send_new(now);
            self.cc.on_packet_sent(now, len, self.in_flight());
            if self.model_based {
                self.pace(now, len);
            }
            self.stats.data_segments_sent += 1;
            if self.send_round <= crate::ROUND_LOG_ROUNDS {
                self.note_round(max + len, len);
            }
            self.rto_at
                .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
            let seq = self.seq_of_snd(max);
            let mut tx = self.emit(now, buf, TcpControl::None, seq, len as usize);
            tx.more = self.could_send_more(now);
            return Some(tx);
        }

        if self.closed && !self.fin_sent && max == self.written {
            self.fin_sent = true;
            self.rto_at
                .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
            let seq = self.seq_of_snd(max);
            return Some(self.emit(now, buf, TcpControl::Fin, seq, 0));
        }

        self.ack_now.then(|| self.emit_ack(now, buf, max))
    }

    /// After new data went out: whether the next poll could send anything. False
    /// only when it certainly could not (the promise of [`Transmit::more`]): no
    /// retransmission waiting, no room in the window for the next new segment, no
    /// FIN to send and no ACK owed. A sender clocked by its ACKs fills the window
    /// with each one, so this spares the poll after almost every segment.
    pub(super) fn could_send_more(&self, now: Instant) -> bool {
        if self.model_based && self.next_send_at > now {
            // Paced: no data before the next departure time (the timer says when).
            return self.ack_now || (self.closed && !self.fin_sent);
        }
        let (len, _) = self.board.next_new();
        self.fast_rtx_pending
            || self.board.may_retransmit()
            || self.ack_now
            || (self.closed && !self.fin_sent)
            || (len > 0 && self.in_flight() + len <= self.cc.window())
    }

    /// Whether a pacing controller lets data leave at `now`; if not, the sender
    /// waits for the departure time (a timer).
    #[inline(never)]
    fn pacing_allows(&mut self, now: Instant) -> bool {
        self.pacing_wait = self.cc.pacing_rate().is_some() && now < self.next_send_at;
        !self.pacing_wait
    }

    /// Books the departure of a data segment of `len` bytes: the next may leave one
    /// segment's time later at the pacing rate (an earliest departure time, as
    /// Linux's EDT pacing keeps; idle time earns no burst).
    fn pace(&mut self, now: Instant, len: u64) {
        if let Some(rate) = self.cc.pacing_rate().filter(|&r| r > 0.0) {
            let wire = (len + PACED_HEADER_BYTES) as f64;
            let gap = (wire / rate * 1e9).min(1e12) as u64;
            self.next_send_at = self.next_send_at.max(now).add_nanos(gap);
            // Wake at it: `more` is false until then, so the driver waits for the
            // timer (a wake with nothing to send just clears this).
            self.pacing_wait = true;
        }
    }

    /// A bare ACK (the caller checked `ack_now`); `max` is `SND.MAX`.
    pub(super) fn emit_ack(&mut self, now: Instant, buf: &mut [u8], max: u64) -> Transmit {
        self.stats.acks_sent += 1;
        let seq = self.seq_of_snd(max + u64::from(self.fin_sent));
        self.emit(now, buf, TcpControl::None, seq, 0)
    }

    /// Books `len` new bytes ending at `end` to the current round.
    // Inlined, with the first segment of a round out of line: a long-RTT flow books
    // its first 256 rounds, which at 100 ms is most segments of a minute's run, and
    // as a call this was 30 instructions a segment of the 100 ms reference bench.
    #[inline(always)]
    pub(super) fn note_round(&mut self, end: u64, len: u64) {
        let r = self.send_round;
        match (self.round_marks.back_mut(), self.round_bytes.last_mut()) {
            (Some(last), Some(bytes)) if last.1 == r => {
                last.0 = end;
                *bytes += len;
            }
            _ => self.open_round(end, len),
        }
    }

    /// [`note_round`](Self::note_round) for the first bytes booked to a round since
    /// the last were acknowledged: a new mark, and the round's counter (rounds are
    /// numbered from 1, one counter each).
    #[cold]
    pub(super) fn open_round(&mut self, end: u64, len: u64) {
        let r = self.send_round;
        match self.round_marks.back_mut() {
            Some(last) if last.1 == r => last.0 = end,
            _ => self.round_marks.push_back((end, r)),
        }
        let i = r as usize - 1;
        if self.round_bytes.len() <= i {
            self.round_bytes.resize(i + 1, 0);
        }
        self.round_bytes[i] += len;
    }

    // Inlined into each caller in `poll_transmit` (so into the simulator's driver):
    // as a call, its prologue, spills and the re-reads of fields the caller had in
    // registers were 2 % of the reference bench's instructions.
    #[inline(always)]
    pub(super) fn emit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        control: TcpControl,
        seq: TcpSeqNumber,
        payload_len: usize,
    ) -> Transmit {
        let syn = control == TcpControl::Syn;
        let ack_number = match self.state {
            State::SynSent => None,
            _ => Some(self.irs + 1 + self.rcv_nxt as u32 + u32::from(self.fin_received)),
        };
        let free = self.cfg.recv_buffer_bytes.saturating_sub(self.asm.bytes());
        //= https://www.rfc-editor.org/rfc/rfc7323#section-2.2
        //# The window field in a segment where the SYN bit is set (i.e., a <SYN> or
        //# <SYN,ACK>) MUST NOT be scaled.
        let shift = if syn { 0 } else { self.rcv_wscale };
        let window_len = (free >> shift).min(65535) as u16;
        let with_sack = self.sack_ok && !syn && !self.asm.is_empty();
        let ts = self.timestamp_to_send(now, syn);
        let header_len = match (&self.template, ack_number) {
            (Some(template), Some(ack)) if !syn => {
                // Fast path: the prebuilt header, with the SACK option patched on
                // while out-of-order data is held. Same bytes as `TcpRepr::emit` would
                // write (a test holds the two paths to that).
                //
                // The fixed header is patched as an array of its own length, so the
                // field writes below need no bounds checks (on a slice of the
                // header's run-time length each one had its own).
                let (head, opts) = buf
                    .split_first_chunk_mut::<TEMPLATE_LEN>()
                    .expect("poll_transmit's buffer holds MAX_TRANSMIT_HEADER bytes");
                let mut opt_len = 0;
                if let Some(ts) = ts {
                    tcp::emit_timestamp_option(opts, ts);
                    opt_len = tcp::TIMESTAMP_OPTION_LEN;
                }
                if with_sack {
                    let room = self.sack_room();
                    opt_len +=
                        tcp::emit_sack_option(&mut opts[opt_len..], self.sack_seqs().take(room));
                }
                let header_len = TEMPLATE_LEN + opt_len;
                *head = *template;
                let (ip_head, tcp_head) = head.split_at_mut(ipv4::HEADER_LEN);
                Ipv4Packet::new_unchecked(ip_head).set_total_len((header_len + payload_len) as u16);
                let mut tcp = TcpPacket::new_unchecked(tcp_head);
                if opt_len > 0 {
                    tcp.set_header_len(tcp::HEADER_LEN + opt_len);
                }
                tcp.set_seq_number(seq);
                tcp.set_ack_number(ack);
                tcp.set_window_len(window_len);
                tcp.set_fin(control == TcpControl::Fin);
                if self.cfg.checksum == Checksum::Both {
                    let b = &mut buf[..header_len];
                    Ipv4Packet::new_unchecked(&mut *b).fill_checksum();
                    let seg_len = tcp::HEADER_LEN + opt_len + payload_len;
                    TcpPacket::new_unchecked(&mut b[ipv4::HEADER_LEN..]).fill_checksum(
                        self.local.0,
                        self.remote.0,
                        seg_len,
                    );
                }
                header_len
            }
            _ => self.emit_with_options(
                now,
                buf,
                control,
                seq,
                ack_number,
                window_len,
                with_sack,
                payload_len,
            ),
        };
        if let Some(ack) = ack_number {
            self.last_ack_sent = ack;
            self.ack_now = false;
            self.unacked_segments = 0;
            self.delack_at = None;
        }
        self.stats.segments_sent += 1;
        Transmit {
            written: header_len,
            wire_len: header_len + payload_len,
            more: true,
        }
    }

    /// The SACK blocks to send, in sequence numbers.
    pub(super) fn sack_seqs(&self) -> impl Iterator<Item = (TcpSeqNumber, TcpSeqNumber)> + '_ {
        let base = self.irs + 1;
        self.asm
            .sack_blocks()
            .map(move |(l, r)| (base + l as u32, base + r as u32))
    }

    /// How many SACK blocks fit beside the other options.
    pub(super) fn sack_room(&self) -> usize {
        if self.ts_ok {
            tcp::MAX_SACK_BLOCKS_WITH_TIMESTAMPS
        } else {
            MAX_SACK_BLOCKS
        }
    }

    /// The timestamps option of the next segment, if it carries one.
    //= https://www.rfc-editor.org/rfc/rfc7323#section-3.2
    //# Once TSopt has been successfully negotiated, that is both <SYN> and
    //# <SYN,ACK> contain TSopt, the TSopt MUST be sent in every non-<RST>
    //# segment for the duration of the connection
    pub(super) fn timestamp_to_send(&self, now: Instant, syn: bool) -> Option<TcpTimestamp> {
        let offer = syn
            && self.cfg.timestamps != Timestamps::Off
            && (self.state == State::SynSent || self.ts_ok);
        (offer || self.ts_ok).then(|| TcpTimestamp {
            tsval: self.tsval(now),
            // A SYN echoes nothing; a SYN-ACK echoes the SYN's TSval.
            tsecr: if self.state == State::SynSent {
                0
            } else {
                self.ts_recent
            },
        })
    }

    /// [`sack_seqs`](Self::sack_seqs) as a `TcpRepr` holds them.
    pub(super) fn sack_ranges(&self) -> [Option<(TcpSeqNumber, TcpSeqNumber)>; MAX_SACK_BLOCKS] {
        let mut out = [None; MAX_SACK_BLOCKS];
        for (slot, b) in out.iter_mut().zip(self.sack_seqs().take(self.sack_room())) {
            *slot = Some(b);
        }
        out
    }

    /// The general emit path: SYN options, or any segment before the template exists
    /// (with SACK blocks if asked: a test holds `emit`'s patched template to this).
    /// Returns the header length.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_with_options(
        &self,
        now: Instant,
        buf: &mut [u8],
        control: TcpControl,
        seq: TcpSeqNumber,
        ack_number: Option<TcpSeqNumber>,
        window_len: u16,
        with_sack: bool,
        payload_len: usize,
    ) -> usize {
        let syn = control == TcpControl::Syn;
        let sack_ranges = if with_sack {
            self.sack_ranges()
        } else {
            [None; MAX_SACK_BLOCKS]
        };
        let repr = TcpRepr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            control,
            seq_number: seq,
            ack_number,
            window_len,
            // Linux advertises MTU - 40 and sends 12 bytes less payload when the
            // segments carry timestamps: the MSS option does not count options.
            max_seg_size: syn.then_some(self.cfg.mss + self.timestamp_bytes_configured()),
            // RFC 7323 §2.2: a SYN-ACK carries the option only if the SYN did.
            window_scale: (syn
                && self.cfg.window_scaling
                && (self.state == State::SynSent || self.ws_ok))
                .then_some(self.rcv_wscale),
            sack_permitted: syn && self.cfg.sack,
            timestamp: self.timestamp_to_send(now, syn),
            sack_ranges,
            push: false,
            payload_len,
        };
        let ip = self.ip_repr(repr.segment_len());
        ip.emit(buf, self.cfg.checksum);
        repr.emit(
            &mut buf[ipv4::HEADER_LEN..],
            ip.src_addr,
            ip.dst_addr,
            self.cfg.checksum,
        );
        ipv4::HEADER_LEN + repr.header_len()
    }

    pub(super) fn build_template(&self) -> [u8; TEMPLATE_LEN] {
        let mut t = [0u8; TEMPLATE_LEN];
        let repr = TcpRepr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            control: TcpControl::None,
            seq_number: TcpSeqNumber(0),
            ack_number: Some(TcpSeqNumber(0)),
            window_len: 0,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            timestamp: None,
            sack_ranges: [None; MAX_SACK_BLOCKS],
            push: false,
            payload_len: 0,
        };
        let ip = self.ip_repr(repr.segment_len());
        ip.emit(&mut t, Checksum::None);
        repr.emit(
            &mut t[ipv4::HEADER_LEN..],
            ip.src_addr,
            ip.dst_addr,
            Checksum::None,
        );
        t
    }

    pub(super) fn ip_repr(&self, payload_len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: self.local.0,
            dst_addr: self.remote.0,
            protocol: IpProtocol::Tcp,
            payload_len,
            ttl: 64,
            dscp: self.cfg.dscp,
        }
    }
}
