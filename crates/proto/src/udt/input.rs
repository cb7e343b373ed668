//! What comes in: a UDT packet parsed against its wire length, then the
//! handshake (with SYN cookies), data (into the receive buffer and loss list), and
//! control packets (ACK and ACK2 with RTT samples, NAK into the sender's loss list,
//! keep-alive, shutdown).

use crate::cc::UdtRateControl;
use crate::seq::UdtSeqNumber;
use crate::time::{Duration, Instant};
use longhaul_wire::udt::{
    AckInfo, Control, HandshakeRepr, LossList, UdtPacket, UdtRepr, HEADER_LEN,
};

use super::{
    micros, AnyRate, Arrived, Direct, Event, Feedback, Payload, PendingCtrl, State, UdtConnection,
    IP_UDP, MIN_MSS, SELF_CLOCK, SYN,
};

impl UdtConnection {
    /// Processes a UDP payload of `wire_len` bytes of which only the first
    /// `datagram.len()` are present (a data payload left out by the simulator counts
    /// as virtual).
    pub(super) fn input(
        &mut self,
        now: Instant,
        datagram: &[u8],
        wire_len: usize,
        reader: &mut Direct<'_>,
    ) {
        let Ok(packet) = UdtPacket::new_checked(datagram) else {
            self.stats.bad_datagrams += 1;
            return;
        };
        let Ok(repr) = UdtRepr::parse(&packet, wire_len) else {
            self.stats.bad_datagrams += 1;
            return;
        };
        match repr {
            UdtRepr::Control {
                control: Control::Handshake(h),
                ..
            } => self.on_handshake(now, h),
            _ if self.state != State::Connected => self.stats.bad_datagrams += 1,
            UdtRepr::Control { dest_socket_id, .. } | UdtRepr::Data { dest_socket_id, .. }
                if dest_socket_id != self.cfg.socket_id =>
            {
                self.stats.bad_datagrams += 1
            }
            UdtRepr::Data {
                seq, payload_len, ..
            } => {
                self.on_response(now);
                let body = packet.body();
                let payload = if body.len() == payload_len {
                    Arrived::Bytes(body)
                } else {
                    Arrived::Virtual(payload_len as u32)
                };
                self.on_data(now, seq, payload, reader);
            }
            UdtRepr::Control { control, .. } => {
                self.on_response(now);
                self.on_control(now, control);
            }
        }
    }

    pub(super) fn on_response(&mut self, now: Instant) {
        self.exp_count = 1;
        self.last_rsp = now;
    }

    pub(super) fn on_handshake(&mut self, now: Instant, h: HandshakeRepr) {
        match (self.state, self.is_server) {
            (State::Listening, true) | (State::Connected, true) => {
                if h.request_type == 1 {
                    // First request: answer with a cookie, keep no state.
                    self.handshake = HandshakeRepr {
                        cookie: self.cookie(h.socket_id, now),
                        ..h
                    };
                    self.peer_id = h.socket_id;
                    self.ctrl.push_back(PendingCtrl::Handshake);
                } else if h.request_type == -1 {
                    let minute = now.as_nanos() / 60_000_000_000;
                    let ok = h.cookie == self.cookie_for(h.socket_id, minute)
                        || h.cookie == self.cookie_for(h.socket_id, minute.wrapping_sub(1));
                    if !ok {
                        self.stats.bad_datagrams += 1;
                        return;
                    }
                    if self.state == State::Listening {
                        // Adopt the client's ISN; negotiate MSS and window.
                        if !self.adopt_peer_terms(&h) {
                            return;
                        }
                        self.isn = h.initial_seq;
                        self.establish(now);
                    }
                    self.handshake = HandshakeRepr {
                        version: 4,
                        socket_type: 1,
                        initial_seq: self.isn,
                        mss: self.cfg.mss,
                        flight_flag_size: self.cfg.flight_flag_size.min(self.cfg.rcv_buf_pkts),
                        request_type: -1,
                        socket_id: self.cfg.socket_id,
                        cookie: h.cookie,
                        peer_ip: h.peer_ip,
                    };
                    self.ctrl.push_back(PendingCtrl::Handshake);
                }
            }
            (State::Connecting, false) => {
                if self.handshake.request_type == 1 && h.request_type == 1 && h.cookie != 0 {
                    // The server's cookie: resend the request with it.
                    self.handshake.cookie = h.cookie;
                    self.handshake.request_type = -1;
                    self.ctrl.push_back(PendingCtrl::Handshake);
                } else if self.handshake.request_type == -1 && h.request_type == -1 {
                    if !self.adopt_peer_terms(&h) {
                        return;
                    }
                    self.establish(now);
                } else if h.request_type == 1002 {
                    self.state = State::Closed;
                    self.events.push_back(Event::ConnectFailed);
                }
            }
            _ => self.stats.bad_datagrams += 1,
        }
    }

    /// Takes the peer's socket ID, MSS (the smaller of the two) and flow window from
    /// its handshake. A handshake whose MSS is below [`MIN_MSS`] is refused and
    /// counted bad: taken, it made the payload size wrap to some gigabytes (the
    /// subtraction below) and the next data packet overran the caller's buffer. So
    /// is one whose flight flag size is 0: taken, the sender could never have a
    /// packet in flight, and the connection stalled with nothing said (UDT4's
    /// `UDT_FC` option is at least 1 for the same reason).
    pub(super) fn adopt_peer_terms(&mut self, h: &HandshakeRepr) -> bool {
        if h.mss < MIN_MSS || h.flight_flag_size == 0 {
            self.stats.bad_datagrams += 1;
            return false;
        }
        self.peer_id = h.socket_id;
        self.cfg.mss = self.cfg.mss.min(h.mss);
        self.payload = (self.cfg.mss - IP_UDP) as usize - HEADER_LEN;
        self.flow_window = u64::from(h.flight_flag_size);
        true
    }

    pub(super) fn establish(&mut self, now: Instant) {
        self.state = State::Connected;
        self.next_handshake = None;
        self.start = now;
        self.next_ack_time = now + Duration::from_micros(SYN);
        self.last_rsp = now;
        self.next_send = now;
        let isn = self.isn;
        self.cc = AnyRate::new(
            self.cfg.rate_control,
            self.cfg.mss,
            now,
            isn,
            self.rate_group.as_ref(),
        );
        self.events.push_back(Event::Connected);
    }

    pub(super) fn on_data(
        &mut self,
        now: Instant,
        seq: UdtSeqNumber,
        payload: Arrived<'_>,
        reader: &mut Direct<'_>,
    ) {
        self.stats.data_received += 1;
        self.window.on_arrival(now);
        match seq.value() & 0xF {
            0 => self.window.on_probe1(now),
            1 => self.window.on_probe2(now),
            _ => {}
        }
        let reference = self.rcv_high.unwrap_or(0);
        let Some(idx) = self.index_of(seq, reference) else {
            return;
        };
        if idx < self.rcv_next || self.rcv_ooo.contains_key(&idx) {
            return; // duplicate
        }
        if idx >= self.rcv_next + u64::from(self.cfg.rcv_buf_pkts) {
            return; // beyond the buffer we advertised
        }
        self.pkt_count += 1;
        let high = self.rcv_high.map_or(0, |h| h + 1);
        if idx > high {
            // A gap: everything between is lost; report it at once.
            let (first, last) = (self.seq_of(high), self.seq_of(idx - 1));
            if self.rcv_loss.is_empty() {
                self.next_nak_time = now + self.nak_period();
            }
            let fed_back = Feedback { last: now, k: 2 };
            self.rcv_loss.extend((high..idx).map(|i| (i, fed_back)));
            self.naks.push_back(vec![(first, last)]);
        } else {
            self.rcv_loss.remove(&idx);
        }
        self.rcv_high = Some(self.rcv_high.map_or(idx, |h| h.max(idx)));
        if idx == self.rcv_next {
            self.deliver(payload, reader);
            self.rcv_next += 1;
            while let Some(data) = self.rcv_ooo.remove(&self.rcv_next) {
                self.deliver(data.as_arrived(), reader);
                self.spare.keep(data);
                self.rcv_next += 1;
            }
            self.events.push_back(Event::Readable);
        } else {
            let kept = match payload {
                Arrived::Bytes(b) => Payload::Bytes(self.spare.copy_of(b)),
                Arrived::Virtual(n) => Payload::Virtual(n),
            };
            self.rcv_ooo.insert(idx, kept);
        }
        if self.pkt_count >= SELF_CLOCK * self.light_ack_count {
            if self.ack_index() != self.rcv_last_ack_ack {
                self.ctrl.push_back(PendingCtrl::LightAck);
            }
            self.light_ack_count += 1;
        }
    }

    /// Hands in-order bytes to the reader: straight into its buffer while
    /// nothing is waiting ahead of them, the rest into `readable`.
    pub(super) fn deliver(&mut self, p: Arrived<'_>, reader: &mut Direct<'_>) {
        self.delivered += p.len() as u64;
        if let Arrived::Bytes(b) = p {
            let direct = if self.readable.is_empty() {
                reader.fill(b)
            } else {
                0
            };
            self.readable.extend(&b[direct..]);
        }
    }

    pub(super) fn on_control(&mut self, now: Instant, control: Control<'_>) {
        match control {
            Control::Ack {
                ack_seq_no,
                ack,
                info,
            } => self.on_ack(now, ack_seq_no, ack, info),
            Control::Ack2 { ack_seq_no } => {
                if let Some(pos) = self
                    .ack_history
                    .iter()
                    .position(|(n, _, _)| *n == ack_seq_no)
                {
                    let (_, ack_idx, sent) = self.ack_history[pos];
                    self.rcv_last_ack_ack = self.rcv_last_ack_ack.max(ack_idx);
                    let rtt = micros(now.saturating_duration_since(sent)) as f64;
                    self.update_rtt(rtt);
                }
            }
            Control::Nak(list) => self.on_nak(now, list),
            Control::Shutdown => {
                self.state = State::Closed;
                self.events.push_back(Event::PeerShutdown);
            }
            // Keep-alive: its arrival (on_response) is its whole purpose. A delay
            // warning: 4.11 scales its packet interval by 1.125, but `CCUpdate`
            // overwrites the interval from the controller at the next timer check,
            // so the warning has no lasting effect there, nor here.
            Control::KeepAlive | Control::CongestionWarning => {}
            _ => {}
        }
    }

    pub(super) fn update_rtt(&mut self, rtt: f64) {
        // RTTVar = (3 RTTVar + |rtt - RTT|) / 4;  RTT = (7 RTT + rtt) / 8
        self.rtt_var_us = (self.rtt_var_us * 3.0 + (rtt - self.rtt_us).abs()) / 4.0;
        self.rtt_us = (self.rtt_us * 7.0 + rtt) / 8.0;
    }

    pub(super) fn on_ack(
        &mut self,
        now: Instant,
        ack_seq_no: u32,
        ack: UdtSeqNumber,
        info: AckInfo,
    ) {
        self.stats.acks_received += 1;
        let Some(ack_idx) = self.index_of(ack, self.snd_last_ack) else {
            return;
        };
        if ack_idx > self.snd_next {
            self.stats.bad_datagrams += 1; // acknowledges what was never sent
            return;
        }
        if let AckInfo::Light = info {
            if ack_idx > self.snd_last_ack {
                let acked = ack_idx - self.snd_last_ack;
                self.flow_window = self.flow_window.saturating_sub(acked);
                self.release(ack_idx);
                rate!(self, c => c.on_light_ack(now, ack));
            }
            return;
        }
        self.ctrl.push_back(PendingCtrl::Ack2(ack_seq_no));
        let (rtt, avail, rates) = match info {
            AckInfo::Short {
                rtt_us,
                avail_buf_pkts,
                ..
            } => (rtt_us, avail_buf_pkts, None),
            AckInfo::Full {
                rtt_us,
                avail_buf_pkts,
                recv_rate_pps,
                bandwidth_pps,
                ..
            } => (rtt_us, avail_buf_pkts, Some((recv_rate_pps, bandwidth_pps))),
            AckInfo::Light => unreachable!("handled above"),
        };
        self.flow_window = u64::from(avail);
        self.release(ack_idx);
        self.update_rtt(f64::from(rtt));
        if let Some((r, b)) = rates {
            if r > 0 {
                self.rcv_rate_pps = ((u64::from(self.rcv_rate_pps) * 7 + u64::from(r)) / 8) as u32;
            }
            if b > 0 {
                self.bandwidth_pps =
                    ((u64::from(self.bandwidth_pps) * 7 + u64::from(b)) / 8) as u32;
            }
        }
        let mut inputs = self.inputs();
        inputs.ack_rtt_us = f64::from(rtt);
        inputs.ack_recv_rate_pps = rates.map_or(0, |(r, _)| r);
        inputs.ack_bandwidth_pps = rates.map_or(0, |(_, b)| b);
        rate!(self, c => c.on_ack(now, ack, &inputs));
    }

    pub(super) fn release(&mut self, ack_idx: u64) {
        while self.snd_last_ack < ack_idx && !self.snd_buf.is_empty() {
            if let Some(p) = self.snd_buf.pop_front() {
                self.spare.keep(p);
            }
            self.snd_loss.remove(&self.snd_last_ack);
            self.snd_last_ack += 1;
        }
        self.snd_last_ack = self.snd_last_ack.max(ack_idx.min(self.snd_next));
    }

    pub(super) fn on_nak(&mut self, now: Instant, list: LossList<'_>) {
        self.stats.naks_received += 1;
        let Some((first, _)) = list.ranges().next() else {
            return;
        };
        let inputs = self.inputs();
        rate!(self, c => c.on_loss(now, first, &inputs));
        rate!(self, c => c.on_nak_ranges(now, list));
        for (a, b) in list.ranges() {
            let (Some(ia), Some(ib)) = (
                self.index_of(a, self.snd_last_ack),
                self.index_of(b, self.snd_last_ack),
            ) else {
                continue;
            };
            if ia > ib || ib >= self.snd_next {
                self.stats.bad_datagrams += 1;
                continue;
            }
            self.stats.loss_ranges += 1;
            for i in ia.max(self.snd_last_ack)..=ib {
                self.snd_loss.insert(i);
            }
        }
    }
}
