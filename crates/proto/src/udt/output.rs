//! What goes out: pending control packets first, then a lost packet to
//! retransmit, then new data, each data packet only when the pacing timer allows
//! (UDT4's sending period, paid back when late).

use crate::cc::{UdtRateControl, MIN_WINDOW_PKTS};
use crate::time::{Duration, Instant};
use longhaul_wire::udt::{AckInfo, Boundary, Control, LossList, UdtRepr, HEADER_LEN};

use super::{
    rate_cwnd, split_loss_list, AnyRate, Arrived, PendingCtrl, State, Transmit, UdtConnection,
    ACK_HISTORY, SYN,
};

impl UdtConnection {
    /// The sender's window, packets: the receiver's and the controller's, never
    /// below [`MIN_WINDOW_PKTS`].
    fn window_pkts(&self) -> u64 {
        self.flow_window
            .min(rate_cwnd(&self.cc) as u64)
            .max(MIN_WINDOW_PKTS)
    }

    pub(super) fn has_data_to_send(&self) -> bool {
        let window = self.window_pkts();
        !self.snd_loss.is_empty()
            || (self.snd_next < self.snd_last_ack + self.snd_buf.len() as u64
                && self.snd_next - self.snd_last_ack < window)
    }

    /// Whether the sender is limited by its application: everything it was given
    /// is sent, its window has room and nothing waits to be resent, and the
    /// application has left room in the send buffer. (A full buffer limits the
    /// sender as a receive window would, not the application.) As Linux's
    /// `tcp_rate_check_app_limited`, whose conditions these are, less the
    /// qdisc's.
    fn app_limited(&self) -> bool {
        let window = self.window_pkts();
        self.state == State::Connected
            && self.snd_loss.is_empty()
            && self.snd_next >= self.snd_last_ack + self.snd_buf.len() as u64
            && self.snd_next - self.snd_last_ack < window
            && self.snd_buf.len() < self.cfg.snd_buf_pkts as usize
    }

    /// Writes the next UDP payload into `buf` (at least `mss - 28` bytes, or 64 in
    /// virtual mode) and says how much, or returns `None` when nothing is due.
    #[must_use]
    pub(super) fn transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(c) = self.ctrl.pop_front() {
            let n = self.emit_ctrl(now, c, buf);
            return Some(Transmit {
                written: n,
                wire_len: n,
                more: true,
            });
        }
        if let Some(mut ranges) = self.naks.pop_front() {
            // A NAK carries as much of the list as `buf` holds; the rest goes next.
            let rest = split_loss_list(&mut ranges, buf.len().saturating_sub(HEADER_LEN) / 4);
            if !rest.is_empty() {
                self.naks.push_front(rest);
            }
            self.stats.naks_sent += 1;
            let mut lbuf = vec![0u8; LossList::encoded_len(&ranges)];
            let list = LossList::encode(&ranges, &mut lbuf);
            let r = UdtRepr::Control {
                timestamp: self.ts(now),
                dest_socket_id: self.peer_id,
                control: Control::Nak(list),
            };
            r.emit(buf);
            return Some(Transmit {
                written: r.wire_len(),
                wire_len: r.wire_len(),
                more: true,
            });
        }
        if self.state != State::Connected {
            return None;
        }
        if self.closing && self.snd_buf.is_empty() {
            self.closing = false;
            self.state = State::Closed;
            let n = self.emit_ctrl(now, PendingCtrl::Shutdown, buf);
            return Some(Transmit {
                written: n,
                wire_len: n,
                more: true,
            });
        }
        if !self.has_data_to_send() {
            // 4.11 forgets the schedule when it has nothing it may send
            // (`m_ullTargetTime = 0`): sending resumes without a debt.
            self.late_by = None;
            if !self.app_limited_told && self.app_limited() {
                self.app_limited_told = true;
                rate!(self, c => c.on_app_limited(now));
            }
            return None;
        }
        if now < self.next_send {
            return None;
        }
        let (idx, retransmit) = match self.snd_loss.pop_first() {
            Some(i) => (i, true),
            None => (self.snd_next, false),
        };
        let data = self.snd_buf.get((idx - self.snd_last_ack) as usize)?;
        let seq = self.seq_of(idx);
        let r = UdtRepr::Data {
            seq,
            boundary: Boundary::Solo,
            in_order: true,
            msg_number: 1,
            timestamp: self.ts(now),
            dest_socket_id: self.peer_id,
            payload_len: data.len(),
        };
        r.emit(buf);
        let written = match data.as_arrived() {
            Arrived::Bytes(b) => {
                buf[HEADER_LEN..HEADER_LEN + b.len()].copy_from_slice(b);
                HEADER_LEN + b.len()
            }
            Arrived::Virtual(_) => HEADER_LEN,
        };
        let tx = Transmit {
            written,
            wire_len: r.wire_len(),
            more: true,
        };
        self.stats.data_sent += 1;
        self.app_limited_told = false;
        if retransmit {
            self.stats.retransmitted += 1;
        } else {
            self.snd_next += 1;
        }
        // A driver cannot busy-wait as UDT4's sender thread does, so the engine keeps
        // the schedule as 4.11 built with NO_BUSY_WAITING does (`m_ullTimeDiff`): time
        // a packet leaves late is paid back by sending the next ones early. A
        // simulator calls on time, so there this changes nothing.
        let mut late = self.late_by.map_or(Duration::ZERO, |d| {
            d + now.saturating_duration_since(self.next_send)
        });
        let due = Instant::from_nanos(now.as_nanos().saturating_sub(late.as_nanos() as u64));
        rate!(self, c => c.on_packet_sent(now, due, seq));
        // Packet pair: a packet whose sequence number is a multiple of 16 is followed
        // at once by the next.
        let mut period = Duration::from_nanos((self.pkt_snd_period_us() * 1000.0) as u64);
        if let Some(bw) = self.cfg.max_bw_bps.filter(|&b| b > 0) {
            let floor = u64::from(self.cfg.mss) * 8 * 1_000_000_000 / bw;
            period = period.max(Duration::from_nanos(floor));
        }
        self.next_send = if seq.value() & 0xF == 0 {
            now
        } else if late >= period {
            late -= period;
            now
        } else {
            let t = now + (period - late);
            late = Duration::ZERO;
            t
        };
        self.late_by = Some(late);
        Some(tx)
    }

    pub(super) fn emit_ctrl(&mut self, now: Instant, c: PendingCtrl, buf: &mut [u8]) -> usize {
        let control = match c {
            PendingCtrl::Handshake => Control::Handshake(self.handshake),
            PendingCtrl::Ack2(n) => Control::Ack2 { ack_seq_no: n },
            PendingCtrl::KeepAlive => Control::KeepAlive,
            PendingCtrl::Shutdown => Control::Shutdown,
            PendingCtrl::LightAck | PendingCtrl::FullAck => {
                // ACK number: the first lost packet, or one past the highest received.
                let ack_idx = self.ack_index();
                let ack = self.seq_of(ack_idx);
                if c == PendingCtrl::LightAck {
                    self.stats.light_acks_sent += 1;
                    Control::Ack {
                        ack_seq_no: 0,
                        ack,
                        info: AckInfo::Light,
                    }
                } else {
                    self.ack_seq_no = self.ack_seq_no.wrapping_add(1);
                    self.rcv_last_ack = ack_idx;
                    let avail = u64::from(self.cfg.rcv_buf_pkts)
                        .saturating_sub(
                            self.rcv_ooo.len() as u64 + (self.readable.len() / self.payload) as u64,
                        )
                        .max(MIN_WINDOW_PKTS) as u32;
                    let info = if self.last_ack_time.is_none_or(|t| {
                        now.saturating_duration_since(t) > Duration::from_micros(SYN)
                    }) {
                        self.last_ack_time = Some(now);
                        AckInfo::Full {
                            rtt_us: self.rtt_us as u32,
                            rtt_var_us: self.rtt_var_us as u32,
                            avail_buf_pkts: avail,
                            recv_rate_pps: self.window.recv_rate_pps(),
                            bandwidth_pps: self.window.bandwidth_pps(),
                        }
                    } else {
                        AckInfo::Short {
                            rtt_us: self.rtt_us as u32,
                            rtt_var_us: self.rtt_var_us as u32,
                            avail_buf_pkts: avail,
                        }
                    };
                    self.ack_history.push_back((self.ack_seq_no, ack_idx, now));
                    if self.ack_history.len() > ACK_HISTORY {
                        self.ack_history.pop_front();
                    }
                    self.stats.acks_sent += 1;
                    Control::Ack {
                        ack_seq_no: self.ack_seq_no,
                        ack,
                        info,
                    }
                }
            }
        };
        let dest =
            if c == PendingCtrl::Handshake && !self.is_server && self.state == State::Connecting {
                0
            } else {
                self.peer_id
            };
        let r = UdtRepr::Control {
            timestamp: self.ts(now),
            dest_socket_id: dest,
            control,
        };
        r.emit(buf);
        r.wire_len()
    }
}
