//! The Snoop agent (Balakrishnan et al., 1995) that a base station runs per TCP
//! connection towards a mobile host, with the paper's rules and ns-2's as options.
//!
//! What it does: caches data segments on their way to the mobile host; on duplicate
//! ACKs for a cached segment retransmits it locally and suppresses the duplicates the
//! retransmission will cause; on its own timer (`RTO = SRTT + f * RTTVAR`, at least a
//! tick) retransmits the oldest unacknowledged segment; cleans the cache on new ACKs
//! and samples the wireless RTT from them. What it does not: ELN or SACK for losses on
//! the mobile host's uplink (its data, our ACKs, cross the wireless hop unprotected),
//! and state shared across connections (ns-2's `integrate_`).
//!
//! Sequence numbers are TCP's 32-bit wire values; the agent reads them from the
//! simulated packets' real headers, so it sees exactly what a base station would.
//! This file is pure logic: the base station ([`crate::basestation`]) decides which
//! packets reach it, charges its processing time and sends what it returns.

use std::collections::VecDeque;

use longhaul_proto::{Duration, Instant};
use longhaul_wire::TcpSeqNumber;

use crate::packet::Packet;

/// How the RTT estimator weighs a new sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Estimator {
    /// TCP's (RFC 6298): `SRTT = (1 - g) SRTT + g R`, `RTTVAR = (1 - 2g) RTTVAR + 2g |SRTT - R|`
    /// with g = 1/8 (so RTTVAR's gain is 1/4).
    Tcp,
    /// ns-2's `snoop.cc`: `SRTT = g SRTT + (1 - g) R`, `RTTVAR = g |R - SRTT| + (1 - g)
    /// RTTVAR`: with g = 0.125 the *new* sample weighs 0.875 (the inverse of TCP).
    Ns2,
}

/// The rules a Snoop agent follows. [`SnoopRules::PAPER`] and [`SnoopRules::NS2`] are
/// the two published sets; every field can be changed on its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SnoopRules {
    /// The duplicate ACK that triggers the local retransmission: 1 (the paper) or 2
    /// (ns-2, which forwards the first to the sender).
    pub retransmit_on_dupack: u32,
    /// Forward ACKs below the last ACK seen (ns-2) instead of dropping them (paper).
    pub forward_stale_acks: bool,
    /// RTT estimator form.
    pub estimator: Estimator,
    /// The estimator's gain g.
    pub gain: f64,
    /// `f` in `RTO = SRTT + f * RTTVAR`.
    pub f: f64,
    /// Smallest local RTO (ns-2's `snoopTick_`).
    pub min_tick: Duration,
    /// SRTT and RTTVAR before the first sample (ns-2: 0.1 s and 0.25 s).
    pub initial_srtt: Duration,
    /// See `initial_srtt`.
    pub initial_rttvar: Duration,
    /// Segments cached per connection (ns-2's `SNOOP_MAXWIND`, 100).
    pub cache_pkts: usize,
    /// Local retransmissions of one segment before the agent gives up on it.
    pub max_local_rxmit: u32,
    /// Karn's rule: no RTT sample from an ACK that frees a segment sent more than
    /// once (the ACK may answer the retransmission, and the segments behind it waited
    /// for the hole). ns-2 samples the last (re)transmission of whatever an ACK frees,
    /// which lets one long stall inflate the RTO for many round trips.
    pub karn: bool,
}

impl SnoopRules {
    /// The paper's rules: retransmit on the first duplicate ACK, drop stale ACKs, a
    /// TCP-style estimator with f = 4, a 10 ms tick.
    pub const PAPER: SnoopRules = SnoopRules {
        retransmit_on_dupack: 1,
        forward_stale_acks: false,
        estimator: Estimator::Tcp,
        gain: 0.125,
        f: 4.0,
        min_tick: Duration::from_millis(10),
        initial_srtt: Duration::from_millis(100),
        initial_rttvar: Duration::from_millis(250),
        cache_pkts: 100,
        max_local_rxmit: 10,
        karn: true,
    };
    /// ns-2.35's `snoop.cc`: retransmit on the second duplicate ACK, forward stale
    /// ACKs, its inverted estimator, a 100 ms tick, RTO = SRTT + 4 RTTVAR.
    pub const NS2: SnoopRules = SnoopRules {
        retransmit_on_dupack: 2,
        forward_stale_acks: true,
        estimator: Estimator::Ns2,
        gain: 0.125,
        f: 4.0,
        min_tick: Duration::from_millis(100),
        initial_srtt: Duration::from_millis(100),
        initial_rttvar: Duration::from_millis(250),
        cache_pkts: 100,
        max_local_rxmit: 10,
        karn: false,
    };
}

#[derive(Debug, Clone)]
struct Cached {
    seq: TcpSeqNumber,
    len: u32,
    pkt: Packet,
    /// Last time the base station sent it (original or local retransmission).
    sent_at: Instant,
    local_rxmits: u32,
    /// The sender retransmitted it: a congestion loss upstream, not ours to repair.
    sender_rxmit: bool,
}

impl Cached {
    fn end(&self) -> TcpSeqNumber {
        self.seq + self.len
    }
}

/// What to do with a data segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataAction {
    /// Send it on to the mobile host.
    Forward,
    /// It was already acknowledged: drop it and send the sender the last ACK again.
    DropAndReAck,
}

/// What to do with an ACK from the mobile host.
#[derive(Debug, Clone)]
pub enum AckAction {
    /// Send it on to the sender.
    Forward,
    /// Drop it (a duplicate the agent expected, or a stale ACK under the paper's rules).
    Suppress,
    /// Drop it and retransmit this cached segment to the mobile host.
    Retransmit(Box<Packet>),
}

/// Counters of one agent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SnoopStats {
    /// Segments retransmitted by the base station (duplicate ACKs and timer).
    pub local_retransmits: u64,
    /// Of those, by the local timer.
    pub timer_retransmits: u64,
    /// Duplicate ACKs kept from the sender.
    pub suppressed_dupacks: u64,
    /// Largest number of segments cached at once.
    pub cache_max_pkts: usize,
    /// Sum and count of local RTT samples, seconds.
    pub rtt_sum_s: f64,
    /// See `rtt_sum_s`.
    pub rtt_samples: u64,
    /// Sum of the local RTO at each sample, seconds.
    pub rto_sum_s: f64,
}

impl SnoopStats {
    /// Adds `other`'s counts (an agent that was retired) to these.
    pub fn merge(&mut self, other: &SnoopStats) {
        self.local_retransmits += other.local_retransmits;
        self.timer_retransmits += other.timer_retransmits;
        self.suppressed_dupacks += other.suppressed_dupacks;
        self.cache_max_pkts = self.cache_max_pkts.max(other.cache_max_pkts);
        self.rtt_sum_s += other.rtt_sum_s;
        self.rtt_samples += other.rtt_samples;
        self.rto_sum_s += other.rto_sum_s;
    }
}

/// One connection's Snoop state.
#[derive(Debug, Clone)]
pub struct SnoopAgent {
    rules: SnoopRules,
    cache: VecDeque<Cached>,
    last_ack: Option<TcpSeqNumber>,
    /// End of the highest segment seen from the sender.
    high_seen: Option<TcpSeqNumber>,
    /// Duplicates still expected after a local retransmission; `None` until a loss.
    exp_dupacks: Option<u32>,
    /// Duplicate ACKs of the current run (for the 2nd-dupack rule).
    dupacks: u32,
    srtt_s: f64,
    rttvar_s: f64,
    /// Smallest local RTT sample, seconds (`INFINITY` before the first).
    min_rtt_s: f64,
    timer_at: Option<Instant>,
    /// The last ACK from the mobile host, to regenerate it.
    last_ack_pkt: Option<Packet>,
    stats: SnoopStats,
}

impl SnoopAgent {
    /// A fresh agent.
    pub fn new(rules: SnoopRules) -> Self {
        SnoopAgent {
            rules,
            cache: VecDeque::new(),
            last_ack: None,
            high_seen: None,
            exp_dupacks: None,
            dupacks: 0,
            srtt_s: rules.initial_srtt.as_secs_f64(),
            rttvar_s: rules.initial_rttvar.as_secs_f64(),
            min_rtt_s: f64::INFINITY,
            timer_at: None,
            last_ack_pkt: None,
            stats: SnoopStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &SnoopStats {
        &self.stats
    }
    /// Segments cached now.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }
    /// The local retransmission timeout.
    pub fn rto(&self) -> Duration {
        let rto = (self.srtt_s + self.rules.f * self.rttvar_s).max(0.0);
        Duration::from_secs_f64(rto).max(self.rules.min_tick)
    }
    /// Sets `f` (adaptive Snoop picks it per destination).
    pub fn set_f(&mut self, f: f64) {
        self.rules.f = f;
    }
    /// The local timer's deadline.
    pub fn timer(&self) -> Option<Instant> {
        self.timer_at
    }
    /// The last ACK seen from the mobile host (to regenerate it).
    pub fn last_ack_packet(&self) -> Option<&Packet> {
        self.last_ack_pkt.as_ref()
    }

    fn arm(&mut self, now: Instant) {
        self.timer_at = (!self.cache.is_empty()).then(|| now + self.rto());
    }

    /// A data segment from the sender, about to be forwarded at `now`. With
    /// `no_room`, the wireless hop's queue is (nearly) full: the segment is not cached
    /// (as in ns-2), so a drop there stays visible to the sender, whose congestion
    /// control it concerns.
    pub fn on_data(
        &mut self,
        now: Instant,
        seq: TcpSeqNumber,
        len: u32,
        pkt: &Packet,
        no_room: bool,
    ) -> DataAction {
        if let Some(a) = self.last_ack {
            if seq + len <= a {
                // Everything in it was acknowledged: the sender's retransmission
                // crossed the ACK. Paper: drop it and regenerate the ACK.
                return DataAction::DropAndReAck;
            }
        }
        let in_sequence = self.high_seen.is_none_or(|h| seq >= h);
        let room = !no_room && self.cache.len() < self.rules.cache_pkts;
        if in_sequence {
            self.high_seen = Some(seq + len);
            if room {
                self.cache.push_back(Cached {
                    seq,
                    len,
                    pkt: *pkt,
                    sent_at: now,
                    local_rxmits: 0,
                    sender_rxmit: false,
                });
            }
        } else if let Some(c) = self.cache.iter_mut().find(|c| c.seq == seq) {
            // The sender retransmitted what we hold: its timer or its recovery beat
            // ours.
            c.sender_rxmit = true;
            c.local_rxmits = 0;
            c.sent_at = now;
        } else if room {
            // Out of sequence and not cached: lost upstream (congestion), resent by
            // the sender. Cache it in order, marked as the sender's.
            let at = self
                .cache
                .iter()
                .position(|c| c.seq > seq)
                .unwrap_or(self.cache.len());
            self.cache.insert(
                at,
                Cached {
                    seq,
                    len,
                    pkt: *pkt,
                    sent_at: now,
                    local_rxmits: 0,
                    sender_rxmit: true,
                },
            );
        }
        self.stats.cache_max_pkts = self.stats.cache_max_pkts.max(self.cache.len());
        if self.timer_at.is_none() {
            self.arm(now);
        }
        DataAction::Forward
    }

    /// An ACK from the mobile host.
    pub fn on_ack(&mut self, now: Instant, ack: TcpSeqNumber, pkt: &Packet) -> AckAction {
        let Some(last) = self.last_ack else {
            self.new_ack(now, ack, pkt);
            return AckAction::Forward;
        };
        if ack > last {
            self.new_ack(now, ack, pkt);
            return AckAction::Forward;
        }
        if ack < last {
            return if self.rules.forward_stale_acks {
                AckAction::Forward
            } else {
                AckAction::Suppress
            };
        }
        // A duplicate ACK.
        let head = self.cache.front().filter(|c| c.seq == ack);
        let Some(head) = head else {
            return AckAction::Forward; // not ours: the segment never reached us
        };
        if head.sender_rxmit {
            return AckAction::Forward;
        }
        let head_age = now.saturating_duration_since(head.sent_at).as_secs_f64();
        match self.exp_dupacks {
            Some(n) if n > 0 => {
                self.exp_dupacks = Some(n - 1);
                self.stats.suppressed_dupacks += 1;
                AckAction::Suppress
            }
            Some(_) => AckAction::Forward, // more than expected: the local copy was lost too
            // A duplicate sooner than one minimum local RTT after the head left
            // cannot answer a segment sent after it: it answers a duplicate the
            // mobile host got (the sender's go-back-N, say), and says nothing about
            // the head, which is still on its way.
            None if head_age < self.min_rtt_s => AckAction::Forward,
            None => {
                self.dupacks += 1;
                if self.dupacks < self.rules.retransmit_on_dupack {
                    return AckAction::Forward;
                }
                // The segments after the lost one each bring a duplicate; those not
                // yet seen are expected and will be suppressed.
                let after = self.cache.iter().filter(|c| c.seq > ack).count() as u32;
                self.exp_dupacks = Some(after.saturating_sub(self.dupacks));
                self.stats.suppressed_dupacks += 1;
                match self.retransmit_head(now) {
                    Some(p) => AckAction::Retransmit(Box::new(p)),
                    None => AckAction::Suppress,
                }
            }
        }
    }

    fn new_ack(&mut self, now: Instant, ack: TcpSeqNumber, pkt: &Packet) {
        self.last_ack = Some(ack);
        self.last_ack_pkt = Some(*pkt);
        self.dupacks = 0;
        self.exp_dupacks = None;
        let mut sample = None;
        let mut all_once = true;
        while let Some(c) = self.cache.front() {
            if c.end() > ack {
                break;
            }
            all_once &= c.local_rxmits == 0 && !c.sender_rxmit;
            sample = Some(c.sent_at);
            self.cache.pop_front();
        }
        if self.rules.karn && !all_once {
            sample = None;
        }
        if let Some(sent) = sample {
            self.on_rtt(now.saturating_duration_since(sent).as_secs_f64());
        }
        self.arm(now);
    }

    fn on_rtt(&mut self, r: f64) {
        let g = self.rules.gain;
        match self.rules.estimator {
            Estimator::Tcp => {
                self.rttvar_s = (1.0 - 2.0 * g) * self.rttvar_s + 2.0 * g * (self.srtt_s - r).abs();
                self.srtt_s = (1.0 - g) * self.srtt_s + g * r;
            }
            Estimator::Ns2 => {
                self.srtt_s = g * self.srtt_s + (1.0 - g) * r;
                self.rttvar_s = g * (r - self.srtt_s).abs() + (1.0 - g) * self.rttvar_s;
            }
        }
        self.min_rtt_s = self.min_rtt_s.min(r);
        self.stats.rtt_sum_s += r;
        self.stats.rtt_samples += 1;
        self.stats.rto_sum_s += self.rto().as_secs_f64();
    }

    fn retransmit_head(&mut self, now: Instant) -> Option<Packet> {
        let max = self.rules.max_local_rxmit;
        let c = self.cache.front_mut()?;
        if c.local_rxmits >= max {
            return None;
        }
        c.local_rxmits += 1;
        c.sent_at = now;
        let p = c.pkt;
        self.stats.local_retransmits += 1;
        self.arm(now);
        Some(p)
    }

    /// The local timer fired: retransmit the oldest unacknowledged segment if it is
    /// the next the mobile host needs (no backoff, as in ns-2).
    pub fn on_timer(&mut self, now: Instant) -> Option<Packet> {
        if self.timer_at.is_none_or(|t| t > now) {
            return None;
        }
        self.timer_at = None;
        let next = self.last_ack;
        let head_needed = self
            .cache
            .front()
            .is_some_and(|c| next.is_none_or(|a| c.seq == a) && !c.sender_rxmit);
        let p = if head_needed {
            let p = self.retransmit_head(now);
            if p.is_some() {
                self.stats.timer_retransmits += 1;
            }
            p
        } else {
            None
        };
        self.arm(now);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_wire::{IpProtocol, Ipv4Repr, TcpControl, TcpRepr};

    const MSS: u32 = 1000;

    fn seg(seq: u32) -> Packet {
        let mut p = Packet::empty(Instant::ZERO);
        p.stamp(Instant::ZERO, 40, MSS);
        let ip = Ipv4Repr {
            src_addr: longhaul_wire::Ipv4Address::new(10, 0, 0, 1),
            dst_addr: longhaul_wire::Ipv4Address::new(10, 0, 0, 2),
            protocol: IpProtocol::Tcp,
            payload_len: 20 + MSS as usize,
            ttl: 64,
            dscp: 0,
        };
        ip.emit(&mut p.hdr, longhaul_wire::Checksum::None);
        TcpRepr {
            src_port: 1,
            dst_port: 2,
            control: TcpControl::None,
            seq_number: TcpSeqNumber(seq),
            ack_number: Some(TcpSeqNumber(1)),
            window_len: 100,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            timestamp: None,
            sack_ranges: [None; 4],
            push: false,
            payload_len: MSS as usize,
        }
        .emit(
            &mut p.hdr[20..],
            ip.src_addr,
            ip.dst_addr,
            longhaul_wire::Checksum::None,
        );
        p
    }

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// Sends segments 0..n (seq = i * MSS) through the agent at 1 ms spacing.
    fn agent_with(rules: SnoopRules, n: u32) -> SnoopAgent {
        let mut a = SnoopAgent::new(rules);
        for i in 0..n {
            let action = a.on_data(
                ms(u64::from(i)),
                TcpSeqNumber(i * MSS),
                MSS,
                &seg(i * MSS),
                false,
            );
            assert_eq!(action, DataAction::Forward);
        }
        a
    }

    fn ack(a: &mut SnoopAgent, t: u64, n: u32) -> AckAction {
        a.on_ack(ms(t), TcpSeqNumber(n * MSS), &seg(0))
    }

    #[test]
    fn a_loss_is_repaired_on_the_first_or_second_duplicate_and_the_rest_are_suppressed() {
        for (rules, trigger) in [(SnoopRules::PAPER, 1), (SnoopRules::NS2, 2)] {
            let mut a = agent_with(rules, 10);
            // Segment 2 is lost on the wireless hop; 0 and 1 are acknowledged, then
            // 3..9 each bring a duplicate ACK for 2 (20 ms after they left).
            assert!(matches!(ack(&mut a, 21, 1), AckAction::Forward));
            assert!(matches!(ack(&mut a, 22, 2), AckAction::Forward));
            let mut forwarded = 0;
            let mut resent = 0;
            for k in 1..=7u32 {
                match ack(&mut a, 22 + u64::from(k), 2) {
                    AckAction::Forward => forwarded += 1,
                    AckAction::Retransmit(p) => {
                        assert_eq!(k, trigger, "resent on duplicate {trigger}");
                        let tcp = longhaul_wire::TcpPacket::new_checked(&p.header()[20..]).unwrap();
                        assert_eq!(tcp.seq_number(), TcpSeqNumber(2 * MSS));
                        resent += 1;
                    }
                    AckAction::Suppress => {}
                }
            }
            assert_eq!(resent, 1);
            assert_eq!(forwarded, trigger - 1, "only ns-2 lets the first through");
            assert_eq!(a.stats().suppressed_dupacks, u64::from(7 - (trigger - 1)));
            // The repair lands: a new ACK cleans the cache.
            assert!(matches!(ack(&mut a, 40, 10), AckAction::Forward));
            assert_eq!(a.cached(), 0);
        }
    }

    #[test]
    fn a_lost_tail_is_resent_when_the_local_timer_fires() {
        let mut a = agent_with(SnoopRules::PAPER, 5);
        // 0..3 acknowledged; 4, the last, is lost: no duplicate ACK will come.
        for n in 1..=4 {
            let _ = ack(&mut a, 20 + u64::from(n), n);
        }
        let deadline = a.timer().expect("armed while segments are cached");
        assert!(
            deadline <= ms(24) + a.rto(),
            "within one local RTO of the last ACK"
        );
        let just_before = Instant::from_nanos(deadline.as_nanos() - 1);
        assert!(a.on_timer(just_before).is_none(), "not before");
        let p = a.on_timer(deadline).expect("the tail goes again");
        let tcp = longhaul_wire::TcpPacket::new_checked(&p.header()[20..]).unwrap();
        assert_eq!(tcp.seq_number(), TcpSeqNumber(4 * MSS));
        assert_eq!(a.stats().timer_retransmits, 1);
    }

    #[test]
    fn stale_acks_are_dropped_by_the_paper_and_forwarded_by_ns2() {
        for (rules, forwarded) in [(SnoopRules::PAPER, false), (SnoopRules::NS2, true)] {
            let mut a = agent_with(rules, 4);
            let _ = ack(&mut a, 20, 3);
            let r = ack(&mut a, 21, 2);
            assert_eq!(matches!(r, AckAction::Forward), forwarded);
        }
    }

    #[test]
    fn a_full_wireless_queue_keeps_a_segment_out_of_the_cache() {
        let mut a = SnoopAgent::new(SnoopRules::PAPER);
        let _ = a.on_data(ms(0), TcpSeqNumber(0), MSS, &seg(0), false);
        let _ = a.on_data(ms(1), TcpSeqNumber(MSS), MSS, &seg(MSS), true);
        assert_eq!(a.cached(), 1);
        let _ = ack(&mut a, 20, 1);
        // Segment 1 was dropped at the queue: its duplicates go to the sender.
        assert!(matches!(ack(&mut a, 21, 1), AckAction::Forward));
        assert!(matches!(ack(&mut a, 22, 1), AckAction::Forward));
    }

    #[test]
    fn estimators_weigh_new_samples_as_their_sources_say() {
        let mut tcp = SnoopAgent::new(SnoopRules::PAPER);
        tcp.on_rtt(0.02);
        // SRTT = 7/8 * 0.1 + 1/8 * 0.02
        assert!((tcp.srtt_s - 0.09).abs() < 1e-12);
        let mut ns2 = SnoopAgent::new(SnoopRules::NS2);
        ns2.on_rtt(0.02);
        // SRTT = 0.125 * 0.1 + 0.875 * 0.02
        assert!((ns2.srtt_s - 0.03).abs() < 1e-12);
    }
}
