//! What comes in: segments (parsed, checked against the connection, then the state
//! machine, ACK processing with NewReno or SACK loss recovery, and the receive side)
//! and timeouts (delayed ACK, retransmission).

use super::scoreboard::Scoreboard;
use crate::cc::{AckSample, AnyController, CongestionControl};
use crate::seq::unwrap_tcp;
use crate::time::Instant;
use longhaul_wire::tcp::{TcpTimestamp, MAX_SACK_BLOCKS};
use longhaul_wire::{
    IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
};

use super::{Event, State, TcpConnection, Timestamps};

impl TcpConnection {
    /// Processes an IPv4 datagram (payload may be elided). Anything that is not a
    /// valid TCP segment for this connection is counted and dropped.
    pub(super) fn input(&mut self, now: Instant, datagram: &[u8]) {
        if self.cfg.header_prediction && self.try_fast_path(now, datagram) {
            return;
        }
        let Some(repr) = self.parse(datagram) else {
            self.stats.bad_datagrams += 1;
            return;
        };
        self.process(now, &repr);
    }

    pub(super) fn parse(&mut self, datagram: &[u8]) -> Option<TcpRepr> {
        let ip = Ipv4Packet::new_checked(datagram).ok()?;
        let ip_repr = Ipv4Repr::parse(&ip, self.cfg.checksum).ok()?;
        if ip_repr.protocol != IpProtocol::Tcp || ip_repr.dst_addr != self.local.0 {
            return None;
        }
        let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
        let repr = TcpRepr::parse(
            &tcp,
            ip_repr.src_addr,
            ip_repr.dst_addr,
            ip_repr.payload_len,
            self.cfg.checksum,
        )
        .ok()?;
        if repr.dst_port != self.local.1 {
            return None;
        }
        if self.state == State::Listen {
            if repr.control != TcpControl::Syn {
                return None;
            }
            self.remote = (ip_repr.src_addr, repr.src_port);
        } else if (ip_repr.src_addr, repr.src_port) != self.remote {
            return None;
        }
        Some(repr)
    }

    pub(super) fn process(&mut self, now: Instant, repr: &TcpRepr) {
        if repr.control == TcpControl::Rst {
            self.state = State::Closed;
            self.rto_at = None;
            self.delack_at = None;
            self.events.push_back(Event::Reset);
            return;
        }
        match self.state {
            State::Closed => {
                self.stats.bad_datagrams += 1;
            }
            State::Listen => {
                self.irs = repr.seq_number;
                self.take_syn_options(repr);
                self.peer_window = u64::from(repr.window_len);
                self.state = State::SynReceived;
                self.syn_pending = true;
            }
            State::SynSent => {
                let ok = repr.control == TcpControl::Syn && repr.ack_number == Some(self.iss + 1);
                if !ok {
                    self.stats.bad_datagrams += 1;
                    return;
                }
                self.irs = repr.seq_number;
                self.take_syn_options(repr);
                self.peer_window = u64::from(repr.window_len);
                self.establish(now);
                self.ack_now = true;
            }
            State::SynReceived => {
                if repr.control == TcpControl::Syn {
                    // Our SYN-ACK was lost: the peer retransmitted its SYN.
                    self.syn_pending = true;
                    return;
                }
                if repr.ack_number != Some(self.iss + 1) {
                    self.stats.bad_datagrams += 1;
                    return;
                }
                self.establish(now);
                self.process_established(now, repr);
            }
            State::Established => self.process_established(now, repr),
        }
    }

    pub(super) fn take_syn_options(&mut self, repr: &TcpRepr) {
        self.sack_ok = self.cfg.sack && repr.sack_permitted;
        match (self.cfg.window_scaling, repr.window_scale) {
            (true, Some(ws)) => {
                self.snd_wscale = ws;
                self.ws_ok = true;
            }
            _ => {
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
            }
        }
        if let Some(mss) = repr.max_seg_size {
            self.smss = self.smss.min(u64::from(mss)).max(64);
        }
        //= https://www.rfc-editor.org/rfc/rfc7323#section-3.2
        //# A TCP MAY send the TSopt in an initial <SYN> segment (i.e., segment
        //# containing a SYN bit and no ACK bit), and MAY send a TSopt in <SYN,ACK>
        //# only if it received a TSopt in the initial <SYN> segment for the
        //# connection.
        self.ts_ok = self.cfg.timestamps != Timestamps::Off && repr.timestamp.is_some();
        if let (true, Some(ts)) = (self.ts_ok, repr.timestamp) {
            self.ts_recent = ts.tsval;
        }
    }

    /// Takes an established-state segment's timestamps: TS.Recent moves on, and the
    /// echo is returned for timing.
    #[inline(always)]
    pub(super) fn take_timestamp(
        &mut self,
        seq: TcpSeqNumber,
        ts: Option<TcpTimestamp>,
    ) -> Option<u32> {
        let ts = ts.filter(|_| self.ts_ok)?;
        //= https://www.rfc-editor.org/rfc/rfc7323#section-4.3
        //# If SEG.TSval >= TS.Recent and SEG.SEQ <= Last.ACK.sent, then SEG.TSval
        //# is copied to TS.Recent; otherwise, it is ignored.
        if ts.tsval.wrapping_sub(self.ts_recent) as i32 >= 0 && seq <= self.last_ack_sent {
            self.ts_recent = ts.tsval;
        }
        (ts.tsecr != 0).then_some(ts.tsecr)
    }

    /// An RTT sample for an ACK of new data: from the segment's send time or from the
    /// echo, as [`Timestamps`] says.
    #[inline(always)]
    fn rtt_sample(&mut self, now: Instant, sent: Option<Instant>, tsecr: Option<u32>) {
        // The echo's sample, worked out only where it is used (most ACKs of a
        // Linux-like sender are timed from the send time).
        let echo = |e: u32| {
            // Linux counts a sub-millisecond echo as 1 ms (`tcp_rtt_tsopt_us`).
            let ms = (self.tsval(now).wrapping_sub(e) as i32).max(1);
            ms as u64 * 1_000_000
        };
        let tsecr = tsecr.filter(|_| self.ts_ok);
        let sample = match (self.cfg.timestamps, sent, tsecr) {
            (Timestamps::Rfc7323, _, Some(e)) => Some(echo(e)),
            (_, Some(sent), _) => Some(now.nanos_since(sent)),
            (_, None, e) => e.map(echo),
        };
        if let Some(ns) = sample {
            let (una, nxt) = (self.board.una(), self.board.max());
            self.rtt.on_ack_sample_nanos(ns, una, nxt);
        }
    }

    pub(super) fn establish(&mut self, now: Instant) {
        self.state = State::Established;
        self.board = Scoreboard::new(self.smss);
        if let Some(w) = self.first_write {
            self.board.set_first_segment(w);
        }
        if self.closed {
            self.board.set_end(self.written);
        }
        self.cc = AnyController::new(
            self.cfg.cc,
            self.smss,
            self.cfg.initial_window.bytes(self.smss),
            now,
        );
        self.model_based = self.cc.wants_rate_samples();
        if self.model_based {
            self.board.enable_rate_sampling();
        }
        if let (Some(sent), false) = (self.syn_sent_at, self.syn_retransmitted) {
            self.rtt.on_ack_sample_nanos(now.nanos_since(sent), 0, 0);
        }
        self.rto_at = None;
        self.events.push_back(Event::Connected);
        self.template = Some(self.build_template());
    }

    pub(super) fn process_established(&mut self, now: Instant, repr: &TcpRepr) {
        if repr.control == TcpControl::Syn {
            // A retransmitted SYN-ACK: our ACK of it was lost.
            self.ack_now = true;
            return;
        }
        let tsecr = self.take_timestamp(repr.seq_number, repr.timestamp);
        if let Some(ack) = repr.ack_number {
            self.process_ack(now, repr, ack, tsecr);
        }
        self.process_data(now, repr);
    }

    pub(super) fn seq_of_snd(&self, offset: u64) -> TcpSeqNumber {
        self.iss + 1 + offset as u32
    }

    pub(super) fn process_ack(
        &mut self,
        now: Instant,
        repr: &TcpRepr,
        ack: TcpSeqNumber,
        tsecr: Option<u32>,
    ) {
        let una = self.board.una();
        let mut ack_off = unwrap_tcp(ack, self.seq_of_snd(una), una);
        let end_with_fin = self.board.max() + u64::from(self.fin_sent);
        if ack_off < una as i64 || ack_off > end_with_fin as i64 {
            // Old or acknowledging what was never sent (RFC 9293: ignore).
            return;
        }
        if self.fin_sent && ack_off as u64 == end_with_fin {
            ack_off -= 1;
            if !self.fin_acked {
                self.fin_acked = true;
                self.events.push_back(Event::SendComplete);
            }
        }
        let ack_off = ack_off as u64;
        self.peer_window = u64::from(repr.window_len) << self.snd_wscale;
        let prior_in_flight = self.in_flight();
        if self.model_based {
            self.board.begin_rate_sample();
        }

        let mut newly_sacked = 0;
        if self.sack_ok && repr.sack_ranges[0].is_some() {
            let mut blocks = [(0, 0); MAX_SACK_BLOCKS];
            let mut n = 0;
            for (l, r) in repr.sack_ranges.iter().flatten() {
                let l = unwrap_tcp(*l, self.seq_of_snd(una), una).max(0) as u64;
                let r = unwrap_tcp(*r, self.seq_of_snd(una), una).max(0) as u64;
                blocks[n] = (l, r);
                n += 1;
            }
            newly_sacked = self.board.on_sack_blocks(&blocks[..n], now);
        }

        let mut rtt_from = None;
        if ack_off > una {
            let cum = self.on_cumulative_ack(now, una, ack_off, tsecr);
            rtt_from = cum.rtt_sample_from;
            match self.recovery {
                Some(point) if ack_off >= point => {
                    self.recovery = None;
                    self.cc.on_recovery_end(now);
                }
                Some(_) if !self.sack_ok => {
                    //= https://www.rfc-editor.org/rfc/rfc6582#section-3.2
                    //# If this ACK does *not* acknowledge all of the data up to and
                    //# including recover, then this is a partial ACK.  In this case,
                    //# retransmit the first unacknowledged segment.
                    self.board.mark_una_lost();
                    self.fast_rtx_pending = true;
                }
                Some(_) => {}
                None => {
                    let sample = AckSample::new(cum.newly_acked, prior_in_flight, self.rtt.srtt())
                        .with_rtt(rtt_from.map(|sent| now.saturating_duration_since(sent)));
                    self.cc.on_ack(now, &sample);
                }
            }
        } else if repr.payload_len == 0 && self.board.outstanding() > 0 {
            self.dup_acks += 1;
            self.stats.dup_acks += 1;
            if !self.sack_ok {
                self.on_reno_dup_ack(now);
            }
        }

        if self.sack_ok && newly_sacked > 0 {
            let thresh = u64::from(self.cfg.dup_thresh) * self.smss;
            if self.board.detect_losses(thresh) > 0 && self.recovery.is_none() {
                self.enter_recovery(now);
            }
        }
        if self.model_based {
            self.feed_rate_sample(now, prior_in_flight, rtt_from);
        }
        //# (5.2) When all outstanding data has been acknowledged, turn off the
        //# retransmission timer.
        if !self.has_unacked() {
            self.rto_at = None;
        }
    }

    /// Ends the ACK's delivery-rate sample and hands it to a controller that reads
    /// them (BBR); `rtt_from` is the send time the ACK timed, if Karn's rule allows.
    pub(super) fn feed_rate_sample(
        &mut self,
        now: Instant,
        prior_in_flight: u64,
        rtt_from: Option<Instant>,
    ) {
        let rtt = rtt_from.map(|sent| now.saturating_duration_since(sent));
        let min = Some(self.rtt.min_rtt()).filter(|m| *m != crate::time::Duration::MAX);
        if let Some((rs, delivered)) = self
            .board
            .finish_rate_sample(now, prior_in_flight, rtt, min)
        {
            if rs.newly_acked > 0 || rs.losses {
                self.cc
                    .on_rate_sample(now, &rs, delivered, self.in_flight());
            }
        }
    }

    /// The part of an ACK that moves `SND.UNA` from `una` to `ack_off`, shared by the
    /// general path and header prediction: scoreboard, RTT sample, timer.
    // Inlined into header prediction and the general ACK path: one call less per ACK.
    #[inline(always)]
    pub(super) fn on_cumulative_ack(
        &mut self,
        now: Instant,
        una: u64,
        ack_off: u64,
        tsecr: Option<u32>,
    ) -> super::scoreboard::CumAck {
        let cum = self.board.on_cumulative_ack(ack_off, now);
        // The round of the newest byte acknowledged: data sent from now on belongs
        // to the round after it.
        let mut newest = None;
        while let Some(&(end, round)) = self.round_marks.front() {
            if end > ack_off {
                if self.round_front_start < ack_off {
                    newest = Some(round);
                }
                break;
            }
            newest = Some(round);
            self.round_front_start = end;
            self.round_marks.pop_front();
        }
        if let Some(r) = newest {
            self.send_round = self.send_round.max(r + 1);
        }
        self.rtt_sample(now, cum.rtt_sample_from, tsecr);
        if self.reno_sacked > 0 {
            let acked_segs = (ack_off - una).div_ceil(self.smss);
            self.reno_sacked = self.reno_sacked.saturating_sub(acked_segs * self.smss);
        }
        self.dup_acks = 0;
        //= https://www.rfc-editor.org/rfc/rfc6298#section-5
        //# (5.3) When an ACK is received that acknowledges new data, restart the
        //# retransmission timer so that it will expire after RTO seconds
        self.rto_at = self
            .has_unacked()
            .then(|| now.add_nanos(self.rtt.rto_nanos()));
        cum
    }

    /// NewReno without SACK: each duplicate ACK stands for one segment that left the
    /// network (Linux's "reno SACK" accounting, equivalent to RFC 5681's window
    /// inflation).
    pub(super) fn on_reno_dup_ack(&mut self, now: Instant) {
        let cap = self.board.outstanding().saturating_sub(self.smss);
        self.reno_sacked = (self.reno_sacked + self.smss).min(cap);
        //= https://www.rfc-editor.org/rfc/rfc6582#section-3.2
        //# When the third duplicate ACK is received, the TCP sender first checks the
        //# value of recover to see if the Cumulative Acknowledgment field covers more
        //# than recover.  If so, the value of recover is incremented ...
        // `recover` is an offset one past the highest byte sent, so "covers more
        // than recover" (the highest sequence number) is `una > recover`; before any
        // recovery or timeout there is nothing to cover.
        if self.recovery.is_none()
            && self.dup_acks == self.cfg.dup_thresh
            && (self.recover == 0 || self.board.una() > self.recover)
        {
            self.board.mark_una_lost();
            self.enter_recovery(now);
        }
    }

    pub(super) fn enter_recovery(&mut self, now: Instant) {
        self.recover = self.board.max();
        self.recovery = Some(self.recover);
        self.stats.fast_recoveries += 1;
        self.fast_rtx_pending = true;
        self.cc.on_loss(now, self.flight_size());
    }

    pub(super) fn process_data(&mut self, now: Instant, repr: &TcpRepr) {
        let seq_nxt = self.irs + 1 + self.rcv_nxt as u32;
        let start = unwrap_tcp(repr.seq_number, seq_nxt, self.rcv_nxt);
        let len = repr.payload_len as u64;
        if start < 0 {
            self.stats.bad_datagrams += 1;
            return;
        }
        let start = start as u64;
        let end = start + len;
        if repr.control == TcpControl::Fin {
            self.fin_at = Some(end);
        }
        if len > 0 {
            if end > self.rcv_nxt + self.cfg.recv_buffer_bytes {
                // Beyond the window we offered: drop, and say where we are.
                self.ack_now = true;
                return;
            }
            if end <= self.rcv_nxt {
                self.stats.duplicates += 1;
                self.ack_now = true;
            } else if start <= self.rcv_nxt {
                let filled_hole = !self.asm.is_empty();
                self.rcv_nxt = end;
                if let Some(e) = self.asm.take_front(self.rcv_nxt) {
                    self.rcv_nxt = e;
                }
                //= https://www.rfc-editor.org/rfc/rfc5681#section-4.2
                //# an ACK SHOULD be generated for at least every second full-sized
                //# segment ... Out-of-order data segments SHOULD be acknowledged
                //# immediately ... A TCP receiver SHOULD send an immediate ACK when the
                //# incoming segment fills in all or part of a gap
                self.unacked_segments += 1;
                if filled_hole || self.unacked_segments >= self.cfg.ack.every {
                    self.ack_now = true;
                } else if self.quick_acks_left > 0 {
                    self.quick_acks_left -= 1;
                    self.ack_now = true;
                } else if self.delack_at.is_none() {
                    self.delack_at = Some(now + self.cfg.ack.delay);
                }
            } else {
                self.stats.out_of_order += 1;
                self.asm.insert(start, end);
                self.ack_now = true;
            }
        }
        if let Some(fin) = self.fin_at {
            if self.rcv_nxt == fin && !self.fin_received {
                self.fin_received = true;
                self.ack_now = true;
                self.events.push_back(Event::PeerFinished { bytes: fin });
            } else if self.fin_received && repr.control == TcpControl::Fin {
                self.ack_now = true; // retransmitted FIN
            }
        }
    }

    pub(super) fn has_unacked(&self) -> bool {
        self.board.outstanding() > 0 || (self.fin_sent && !self.fin_acked)
    }

    /// Processes expired timers; calling it early is a no-op.
    pub(super) fn expire(&mut self, now: Instant) {
        // The pacing timer only wakes the sender; the next poll sends.
        if self.pacing_wait && self.next_send_at <= now {
            self.pacing_wait = false;
        }
        if self.delack_at.is_some_and(|t| t <= now) {
            self.delack_at = None;
            self.ack_now = true;
        }
        if self.rto_at.is_some_and(|t| t <= now) {
            self.on_rto(now);
        }
    }

    pub(super) fn on_rto(&mut self, now: Instant) {
        self.stats.timeouts += 1;
        self.rtt.on_timeout();
        match self.state {
            State::SynSent | State::SynReceived => {
                self.syn_pending = true;
                self.syn_retransmitted = true;
            }
            State::Established => {
                // A timeout inside an episode already answered (the same segment
                // again, or a recovery whose retransmission was lost) collapses the
                // window but keeps ssthresh: cutting it again would punish one
                // congestion event twice.
                let una = self.board.una();
                if self.rto_una == Some(una) || self.recovery.is_some() {
                    self.cc.on_timeout_in_episode(now, self.flight_size());
                } else {
                    self.cc.on_timeout(now, self.flight_size());
                }
                self.rto_una = Some(una);
                self.board.on_rto();
                //= https://www.rfc-editor.org/rfc/rfc6582#section-3.2
                //# After a retransmit timeout, record the highest sequence number
                //# transmitted in the variable recover, and exit the fast recovery
                //# procedure if applicable.
                self.recover = self.board.max();
                self.recovery = None;
                self.dup_acks = 0;
                self.reno_sacked = 0;
                if self.fin_sent && !self.fin_acked {
                    self.fin_sent = false;
                }
            }
            State::Closed | State::Listen => {
                self.rto_at = None;
                return;
            }
        }
        //# (5.6) Start the retransmission timer, such that it expires after RTO
        //# seconds (for the value of RTO after the doubling operation outlined in 5.5).
        self.rto_at = Some(now.add_nanos(self.rtt.rto_nanos()));
    }
}
