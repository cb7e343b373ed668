//! UDT's timers, as UDT4 4.11 runs them: the connection attempt, the full ACK
//! every SYN (10 ms) and the light ACK by count, the periodic NAK report (an option),
//! and EXP with its go-back-N, keep-alive and connection break.

use crate::cc::UdtRateControl;
use crate::time::{Duration, Instant};

use super::{
    micros, AnyRate, Event, NakReport, PendingCtrl, State, UdtConnection, HANDSHAKE_RETRY,
    HANDSHAKE_TIMEOUT, MIN_EXP_US, SYN,
};

impl UdtConnection {
    pub(super) fn exp_deadline(&self) -> Instant {
        let base = self.exp_count * (self.rtt_us + 4.0 * self.rtt_var_us) as u64 + SYN;
        self.last_rsp + Duration::from_micros(base.max(self.exp_count * MIN_EXP_US))
    }

    /// Processes expired timers; early calls do nothing.
    pub(super) fn expire(&mut self, now: Instant) {
        match self.state {
            State::Connecting => {
                if now.saturating_duration_since(self.handshake_started) >= HANDSHAKE_TIMEOUT {
                    self.state = State::Closed;
                    self.events.push_back(Event::ConnectFailed);
                } else if self.next_handshake.is_some_and(|t| t <= now) {
                    self.ctrl.push_back(PendingCtrl::Handshake);
                    self.next_handshake = Some(now + HANDSHAKE_RETRY);
                }
            }
            State::Connected => {
                if now > self.next_ack_time {
                    if self.full_ack_due(now) {
                        self.ctrl.push_back(PendingCtrl::FullAck);
                    }
                    self.next_ack_time = now + Duration::from_micros(SYN);
                    self.pkt_count = 0;
                    self.light_ack_count = 1;
                }
                if self.cfg.nak_report == NakReport::Periodic
                    && !self.rcv_loss.is_empty()
                    && now >= self.next_nak_time
                {
                    self.report_losses(now);
                    self.next_nak_time = now + self.nak_period();
                }
                if now >= self.exp_deadline() {
                    self.on_exp(now);
                }
            }
            _ => {}
        }
    }

    /// The ACK number to send: the first lost packet, or one past the highest received.
    pub(super) fn ack_index(&self) -> u64 {
        self.rcv_loss
            .first_key_value()
            .map(|(&i, _)| i)
            .unwrap_or(self.rcv_high.map_or(0, |h| h + 1))
    }

    /// The NAK timer period, max(RTT, SYN).
    pub(super) fn nak_period(&self) -> Duration {
        Duration::from_micros((self.rtt_us as u64).max(SYN))
    }

    /// The periodic NAK: every entry whose last report is at least k·RTT old, in
    /// ranges, as many as one NAK carries (UDT4 caps the list at payload/4 words).
    pub(super) fn report_losses(&mut self, now: Instant) {
        let rtt = self.rtt_us.max(1.0);
        let mut words = self.payload / 4;
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (&i, fb) in self.rcv_loss.iter_mut() {
            let age = micros(now.saturating_duration_since(fb.last)) as f64;
            if age < f64::from(fb.k) * rtt {
                continue;
            }
            // A single number costs one word, a range two.
            match ranges.last_mut() {
                Some((first, last)) if *last + 1 == i => {
                    if *first == *last {
                        if words == 0 {
                            break;
                        }
                        words -= 1;
                    }
                    *last = i;
                }
                _ => {
                    if words == 0 {
                        break;
                    }
                    words -= 1;
                    ranges.push((i, i));
                }
            }
            fb.last = now;
            fb.k += 1;
        }
        if !ranges.is_empty() {
            let seqs = ranges
                .iter()
                .map(|&(a, b)| (self.seq_of(a), self.seq_of(b)))
                .collect();
            self.naks.push_back(seqs);
        }
    }

    /// 4.11's `sendCtrl(2)` rules: no ACK for what the sender has confirmed with ACK2,
    /// none going backwards, and a repeat only after RTT + 4 RTTVar.
    pub(super) fn full_ack_due(&self, now: Instant) -> bool {
        let ack = self.ack_index();
        if ack == self.rcv_last_ack_ack || ack < self.rcv_last_ack {
            return false;
        }
        if ack == self.rcv_last_ack {
            let quiet = Duration::from_micros((self.rtt_us + 4.0 * self.rtt_var_us) as u64);
            if self
                .last_ack_time
                .is_some_and(|t| now.saturating_duration_since(t) < quiet)
            {
                return false;
            }
        }
        true
    }

    pub(super) fn on_exp(&mut self, now: Instant) {
        self.stats.exp_timeouts += 1;
        if self.exp_count > 16
            && now.saturating_duration_since(self.last_rsp) > Duration::from_secs(5)
        {
            self.state = State::Closed;
            self.events.push_back(Event::Broken);
            return;
        }
        if self.snd_next > self.snd_last_ack {
            if self.snd_loss.is_empty() {
                // Go-back-N: everything unacknowledged is resent.
                for i in self.snd_last_ack..self.snd_next {
                    self.snd_loss.insert(i);
                }
            }
            let inputs = self.inputs();
            rate!(self, c => c.on_timeout(now, &inputs));
        } else {
            self.ctrl.push_back(PendingCtrl::KeepAlive);
        }
        self.exp_count += 1;
        // 4.11: "Reset last response time since we just sent a heart-beat." The next
        // expiry is then exp_count intervals after this one, so the intervals grow
        // (0.3, 0.6, 0.9 s ...). Without it they would stay 0.3 s apart, and a
        // receiver's keep-alives would keep resetting a stalled sender's timer,
        // which then never fires to resend a lost retransmission.
        self.last_rsp = now;
    }
}
