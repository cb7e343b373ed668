//! SCTP congestion control (RFC 9260 §7.2), per destination address.
//!
//! Two profiles, because the study ran an older stack than the current RFC:
//! - [`SctpCcProfile::Rfc4960`]: RFC 4960 with the RFC 4460 errata, as Linux 2.6.15's
//!   lksctp did it (the study's hosts). `cwnd0 = min(4*MTU, max(2*MTU, 4380))`; the
//!   window counts **user data bytes** (lksctp's `sctp_data_size`, which is why three
//!   1460-byte messages fill a 4380-byte window exactly); slow start grows only when
//!   the window was fully used and the SACK advanced the cumulative TSN.
//! - [`SctpCcProfile::Rfc9260`]: the current RFC. `cwnd0 = min(4*P, max(2*P, 4404))`
//!   with P the largest DATA chunk that fits the path MTU (1468 on IPv4 at 1500, so
//!   4404 = 3*1468); the window counts whole chunks (header and padding); slow start
//!   needs only a fully used window; `partial_bytes_acked` also counts SACKs that do
//!   not advance the cumulative TSN and is capped when the window was not full.
//!
//! Names follow the RFC: `cwnd`, `ssthresh`, `partial_bytes_acked`, flight size. The
//! engine decides what is a miss indication and when Fast Recovery ends; this file
//! only moves the window.

/// Which rules to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SctpCcProfile {
    /// RFC 4960 + RFC 4460 as in Linux 2.6.15 (the study's stack).
    #[default]
    Rfc4960,
    /// RFC 9260.
    Rfc9260,
}

impl SctpCcProfile {
    /// Bytes a DATA chunk of `data_len` user bytes counts in the window.
    pub fn chunk_bytes(self, data_len: usize) -> u64 {
        match self {
            SctpCcProfile::Rfc4960 => data_len as u64,
            SctpCcProfile::Rfc9260 => longhaul_wire::sctp::pad4(16 + data_len) as u64,
        }
    }
}

/// The congestion state of one destination.
#[derive(Debug, Clone)]
pub struct SctpCc {
    profile: SctpCcProfile,
    /// The MTU (RFC 4960) or PMDCS (RFC 9260): one "packet" of window.
    p: u64,
    cwnd: u64,
    ssthresh: u64,
    partial_bytes_acked: u64,
}

impl SctpCc {
    /// A fresh window for a path of `mtu` bytes (IP header included) whose peer
    /// advertised `peer_rwnd`: RFC 4960 and lksctp start `ssthresh` there (RFC 9260
    /// says "arbitrarily high", which we take to be the same).
    pub fn new(profile: SctpCcProfile, mtu: u64, peer_rwnd: u64) -> Self {
        let (p, floor) = match profile {
            SctpCcProfile::Rfc4960 => (mtu, 4380),
            // PMDCS: the MTU less IPv4 (20), the common header (12) and the DATA
            // chunk header (16), plus that chunk header back: the largest DATA chunk.
            SctpCcProfile::Rfc9260 => (mtu.saturating_sub(20 + 12), 4404),
        };
        SctpCc {
            profile,
            p,
            cwnd: (4 * p).min((2 * p).max(floor)),
            ssthresh: peer_rwnd.max(1),
            partial_bytes_acked: 0,
        }
    }

    /// The congestion window, bytes (in the profile's accounting).
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }
    /// The slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
    /// The profile.
    pub fn profile(&self) -> SctpCcProfile {
        self.profile
    }

    /// A SACK acknowledged `bytes_acked` (cumulatively or by gap blocks) while
    /// `flight_before` bytes were outstanding; `cum_advanced` says whether it moved
    /// the cumulative TSN; `in_fast_recovery` whether the sender is in Fast Recovery.
    pub fn on_sack(
        &mut self,
        bytes_acked: u64,
        flight_before: u64,
        cum_advanced: bool,
        in_fast_recovery: bool,
    ) {
        if self.cwnd <= self.ssthresh {
            //= RFC 9260 §7.2.1: increase only if the window is being fully used and
            //= the sender is not in Fast Recovery (RFC 4960 also asks that the
            //= cumulative TSN advance); by at most min(acked, L*P), L = 1.
            let full = flight_before >= self.cwnd;
            let ok = match self.profile {
                SctpCcProfile::Rfc4960 => full && cum_advanced && !in_fast_recovery,
                SctpCcProfile::Rfc9260 => full && !in_fast_recovery,
            };
            if ok {
                self.cwnd += bytes_acked.min(self.p);
            }
            return;
        }
        //= RFC 9260 §7.2.2: partial_bytes_acked grows by the bytes acknowledged; once
        //= it reaches cwnd with a full window, cwnd grows by one P.
        if self.profile == SctpCcProfile::Rfc4960 && !cum_advanced {
            return;
        }
        self.partial_bytes_acked += bytes_acked;
        if self.partial_bytes_acked >= self.cwnd && flight_before >= self.cwnd {
            self.partial_bytes_acked -= self.cwnd;
            self.cwnd += self.p;
        } else if self.profile == SctpCcProfile::Rfc9260
            && self.partial_bytes_acked > self.cwnd
            && flight_before < self.cwnd
        {
            self.partial_bytes_acked = self.cwnd;
        }
    }

    /// Everything outstanding was acknowledged: `partial_bytes_acked` restarts.
    pub fn on_all_acked(&mut self) {
        self.partial_bytes_acked = 0;
    }

    /// The third miss indication outside Fast Recovery (§7.2.3).
    pub fn on_fast_retransmit(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(4 * self.p);
        self.cwnd = self.ssthresh;
        self.partial_bytes_acked = 0;
    }

    /// The T3-rtx timer expired (§7.2.3): one packet of window.
    pub fn on_t3_expiry(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(4 * self.p);
        self.cwnd = self.p;
        self.partial_bytes_acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_window_per_profile() {
        assert_eq!(
            SctpCc::new(SctpCcProfile::Rfc4960, 1500, 1 << 20).cwnd(),
            4380
        );
        assert_eq!(
            SctpCc::new(SctpCcProfile::Rfc9260, 1500, 1 << 20).cwnd(),
            4404
        );
        // A 9000-byte MTU: 4*MTU is the cap, 2*MTU the floor.
        assert_eq!(
            SctpCc::new(SctpCcProfile::Rfc4960, 9000, 1 << 20).cwnd(),
            18000
        );
        assert_eq!(
            SctpCc::new(SctpCcProfile::Rfc4960, 576, 1 << 20).cwnd(),
            2304
        );
    }

    #[test]
    fn slow_start_needs_a_full_window_and_grows_by_at_most_one_mtu() {
        let mut cc = SctpCc::new(SctpCcProfile::Rfc4960, 1500, 1 << 20);
        cc.on_sack(1460, 4379, true, false);
        assert_eq!(cc.cwnd(), 4380, "window not full");
        cc.on_sack(2920, 4380, false, false);
        assert_eq!(cc.cwnd(), 4380, "RFC 4960: the cumulative TSN must advance");
        cc.on_sack(2920, 4380, true, false);
        assert_eq!(cc.cwnd(), 5880, "at most one MTU");
        let mut cc = SctpCc::new(SctpCcProfile::Rfc9260, 1500, 1 << 20);
        cc.on_sack(2920, 4404, false, false);
        assert_eq!(cc.cwnd(), 4404 + 1468, "RFC 9260: gap acks count");
        cc.on_sack(100, 9000, true, true);
        assert_eq!(cc.cwnd(), 4404 + 1468, "not in Fast Recovery");
    }

    #[test]
    fn congestion_avoidance_adds_one_p_per_window() {
        let mut cc = SctpCc::new(SctpCcProfile::Rfc4960, 1500, 1 << 20);
        cc.on_fast_retransmit();
        assert_eq!(
            (cc.cwnd(), cc.ssthresh()),
            (6000, 6000),
            "max(cwnd/2, 4*MTU)"
        );
        cc.on_sack(1500, 6000, true, false);
        assert_eq!(cc.cwnd(), 7500, "cwnd == ssthresh is still slow start");
        for _ in 0..4 {
            cc.on_sack(1500, 7500, true, false);
        }
        assert_eq!(cc.cwnd(), 7500, "6000 of 7500 bytes acknowledged");
        cc.on_sack(1500, 7500, true, false);
        assert_eq!(cc.cwnd(), 9000);
        cc.on_t3_expiry();
        assert_eq!((cc.cwnd(), cc.ssthresh()), (1500, 6000));
    }
}
