//! SCTP's timers (RFC 9260 §6.3, §5.1): T1 for INIT and COOKIE ECHO, T2 for the
//! shutdown, T3 for retransmission, and the delayed SACK.

use crate::time::Instant;

use super::{Event, Mark, SctpAssociation, State};

impl SctpAssociation {
    /// Runs whatever timers are due at `now`.
    pub(super) fn expire(&mut self, now: Instant) {
        self.burst_base = None;
        if self.sack_at.is_some_and(|t| t <= now) {
            self.sack_at = None;
            self.sack_now = true;
        }
        if self.t1_at.is_some_and(|t| t <= now) {
            self.on_t1(now);
        }
        if self.t2_at.is_some_and(|t| t <= now) {
            // Resend SHUTDOWN or SHUTDOWN-ACK with backoff.
            self.rtt.on_timeout();
            self.errors += 1;
            if self.errors > self.cfg.assoc_max_retrans {
                self.fail();
                return;
            }
            match self.state {
                State::ShutdownSent => self.shutdown_pending = true,
                State::ShutdownAckSent => self.shutdown_ack_pending = true,
                _ => {}
            }
            self.t2_at = Some(now.add_nanos(self.rtt.rto_nanos()));
        }
        if self.t3_at.is_some_and(|t| t <= now) {
            self.on_t3(now);
        }
    }

    pub(super) fn on_t1(&mut self, now: Instant) {
        self.stats.t1_expiries += 1;
        self.t1_retries += 1;
        if self.t1_retries > self.cfg.max_init_retransmits {
            self.fail();
            return;
        }
        self.rtt.on_timeout();
        match self.state {
            State::CookieWait => self.init_pending = true,
            State::CookieEchoed => self.cookie_echo_pending = true,
            _ => {
                self.t1_at = None;
                return;
            }
        }
        self.t1_at = Some(now.add_nanos(self.rtt.rto_nanos()));
    }

    pub(super) fn on_t3(&mut self, _now: Instant) {
        self.t3_at = None;
        if self.outstanding.iter().all(|s| s.gap_acked) {
            return;
        }
        self.stats.t3_expiries += 1;
        self.errors += 1;
        if self.errors > self.cfg.assoc_max_retrans {
            self.fail();
            return;
        }
        //= RFC 9260 §6.3.3: E1 cut the window, E2 back off the RTO, E3 mark every
        //= outstanding chunk for retransmission (it leaves the flight).
        self.cc.on_t3_expiry();
        self.rtt.on_timeout();
        for s in self.outstanding.iter_mut().filter(|s| !s.gap_acked) {
            if s.in_flight {
                s.in_flight = false;
                self.flight -= s.bytes;
            }
            s.mark = Mark::Timeout;
        }
        self.fast_recovery = None;
        self.fast_rtx_now = false;
    }

    pub(super) fn fail(&mut self) {
        self.state = State::Closed;
        self.abort_pending = true;
        self.clear_timers();
        self.events.push_back(Event::Aborted);
    }

    pub(super) fn clear_timers(&mut self) {
        self.t1_at = None;
        self.t2_at = None;
        self.t3_at = None;
        self.sack_at = None;
    }
}
