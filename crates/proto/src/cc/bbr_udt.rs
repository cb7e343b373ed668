//! BBR driving UDT: the [`Bbr`] model behind UDT's rate-control interface.
//!
//! Only the rate decision changes. UDT's loss recovery (NAKs, the sender loss list,
//! retransmission first, the EXP timer) is the engine's and stays as it is; BBR sets
//! the sending period (`mss / pacing rate`) and the window, which the engine already
//! obeys.
//!
//! What BBR needs that UDT4's controller interface does not carry, the adapter keeps
//! itself: per packet in flight, a delivery-rate snapshot ([`RateSampler`]) and
//! whether it is in flight, known delivered or known lost. UDT acknowledges
//! cumulatively and has no SACK, so three measurements are taken differently from a
//! TCP sender's:
//! - **What has arrived.** A UDT receiver sends a NAK the moment a packet arrives
//!   beyond a gap, and a periodic NAK lists every loss below the highest packet
//!   received. Either way the packet after a NAK's last range has arrived, and so
//!   has every packet between the previous such point and it that the NAK does not
//!   list. The adapter counts those as delivered when the NAK comes (SACK
//!   information, inferred), and the window counts only packets in flight, not
//!   those received behind a hole or lost and awaiting retransmission (which the
//!   engine sends regardless of the window). Without this, every hole holds a round
//!   trip of data against the window, and at 1 % loss the window, not the model,
//!   sets the rate.
//! - **Bandwidth.** When a hole is repaired the cumulative ACK still jumps over the
//!   packets that arrived behind it since the last NAK, and the sender's sampler
//!   would count them delivered at that moment: samples of up to twice the
//!   bottleneck, which the max filter keeps and the pacing follows. The receiver sees
//!   each packet arrive, and its receive rate (UDT4's median-filtered arrival rate,
//!   in every full ACK) is the delivery rate at the far end: that is the bandwidth
//!   sample. Round trips are counted on full ACKs, the ones that carry it.
//! - **RTT.** From the send of the newest packet an ACK covers to the ACK, if that
//!   packet was never retransmitted (Karn's rule). A light ACK leaves the moment its
//!   64th packet arrives, so it times the path to within a packet; a full ACK waits
//!   up to a SYN. The RTT field of an ACK is the receiver's smoothed estimate, which
//!   starts at 100 ms before its first ACK2 and so cannot seed a minimum filter.

use std::collections::VecDeque;

use super::bbr::{Bbr, BbrConfig, BbrMode};
use super::delivery_rate::{RateSampler, SendState};
use super::udt::{UdtInputs, UdtRateControl};
use crate::seq::UdtSeqNumber;
use crate::time::Instant;
use longhaul_wire::udt::LossList;

/// UDT's initial window, packets (`CUDTCC`'s `m_dCWndSize`).
const INITIAL_WINDOW_PKTS: u64 = 16;
/// UDT sends a packet pair every this many packets.
const PAIR_EVERY: f64 = 16.0;

/// Where a packet sent and not yet cumulatively acknowledged is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    InFlight,
    /// A NAK listed it; it is in flight again once retransmitted.
    Lost,
    /// A NAK showed it arrived.
    Delivered,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    st: SendState,
    retransmitted: bool,
    fate: Fate,
}

/// BBR for a UDT sender.
#[derive(Debug, Clone)]
pub struct BbrUdt {
    bbr: Bbr,
    sampler: RateSampler,
    mss: u64,
    /// The first sequence number not yet acknowledged; `sent[0]` is its slot.
    front: UdtSeqNumber,
    sent: VecDeque<Slot>,
    /// How many of `sent` are in flight.
    in_flight_pkts: u64,
    /// How many of `sent` (from the front) NAKs have accounted for: all of them
    /// arrived or are listed lost.
    known: usize,
}

impl BbrUdt {
    /// A controller at `now` whose first packet will be `snd_curr_seq + 1`, for
    /// packets of `mss` bytes (IP and UDP headers included, as UDT counts them).
    pub fn new(cfg: BbrConfig, mss: u32, now: Instant, snd_curr_seq: UdtSeqNumber) -> Self {
        let mss = u64::from(mss);
        BbrUdt {
            bbr: Bbr::new(cfg, mss, INITIAL_WINDOW_PKTS * mss, now),
            sampler: RateSampler::default(),
            mss,
            front: snd_curr_seq.inc(),
            sent: VecDeque::new(),
            in_flight_pkts: 0,
            known: 0,
        }
    }

    /// The model.
    pub fn bbr(&self) -> &Bbr {
        &self.bbr
    }

    fn in_flight(&self) -> u64 {
        self.in_flight_pkts * self.mss
    }

    fn index(&self, seq: UdtSeqNumber) -> Option<usize> {
        usize::try_from(self.front.offset_to(seq)).ok()
    }

    /// Marks the slot `i` delivered now, if it was not already.
    fn deliver(&mut self, now: Instant, i: usize) {
        let Some(slot) = self.sent.get_mut(i) else {
            return;
        };
        if slot.fate == Fate::InFlight {
            self.in_flight_pkts -= 1;
        }
        if slot.fate != Fate::Delivered {
            slot.fate = Fate::Delivered;
            self.sampler.on_delivered(now, &slot.st, self.mss);
        }
    }

    /// Ends an acknowledgement's sample and hands it to the model.
    fn finish(
        &mut self,
        now: Instant,
        prior_in_flight: u64,
        rtt_from: Option<Slot>,
        rate: Option<f64>,
    ) {
        let rtt = rtt_from
            .filter(|s| !s.retransmitted)
            .map(|s| now.saturating_duration_since(s.st.sent_time()));
        let rs = self
            .sampler
            .finish_ack(now, prior_in_flight, rtt, self.bbr.min_rtt());
        let in_flight = self.in_flight();
        self.bbr
            .update_with_rate(now, &rs, rate, self.sampler.delivered(), in_flight);
        if self.bbr.in_probe_rtt() {
            self.sampler.on_app_limited(in_flight);
        }
    }

    /// Every packet before `ack` is delivered at `now`; the receiver measured
    /// `receiver_rate` bytes per second, if this is a full ACK that says.
    fn acknowledge(&mut self, now: Instant, ack: UdtSeqNumber, receiver_rate: Option<f64>) {
        let n = self.front.offset_to(ack);
        if n <= 0 {
            return;
        }
        let n = (n as usize).min(self.sent.len());
        let prior_in_flight = self.in_flight();
        self.sampler.begin_ack();
        for i in 0..n {
            self.deliver(now, i);
        }
        let newest = n.checked_sub(1).and_then(|i| self.sent.get(i).copied());
        self.sent.drain(..n);
        self.known = self.known.saturating_sub(n);
        self.front = ack;
        self.finish(now, prior_in_flight, newest, receiver_rate);
    }
}

impl UdtRateControl for BbrUdt {
    fn on_ack(&mut self, now: Instant, ack: UdtSeqNumber, inputs: &UdtInputs) {
        let rate = (inputs.ack_recv_rate_pps > 0)
            .then(|| f64::from(inputs.ack_recv_rate_pps) * self.mss as f64);
        self.acknowledge(now, ack, rate);
    }

    fn on_light_ack(&mut self, now: Instant, ack: UdtSeqNumber) {
        self.acknowledge(now, ack, None);
    }

    fn on_loss(&mut self, _now: Instant, _first_lost: UdtSeqNumber, _inputs: &UdtInputs) {}

    fn on_nak_ranges(&mut self, now: Instant, list: LossList<'_>) {
        let prior_in_flight = self.in_flight();
        for (a, b) in list.ranges() {
            let (Some(ia), Some(ib)) = (self.index(a), self.index(b)) else {
                continue;
            };
            for i in ia..=ib.min(self.sent.len().saturating_sub(1)) {
                let slot = &mut self.sent[i];
                // A loss counts once per transmission: a periodic NAK re-reporting a
                // packet not yet resent is not a new one.
                if slot.fate == Fate::InFlight {
                    slot.fate = Fate::Lost;
                    self.in_flight_pkts -= 1;
                    self.sampler.on_lost(self.mss);
                }
            }
        }
        // The packet after the last range has arrived, and so has every packet
        // since the last NAK's that this one does not list.
        let Some((_, last)) = list.ranges().last() else {
            return;
        };
        let Some(arrived) = self.index(last.inc()) else {
            return;
        };
        let arrived = arrived.min(self.sent.len().saturating_sub(1));
        if arrived < self.known {
            return;
        }
        self.sampler.begin_ack();
        let listed: Vec<(usize, usize)> = list
            .ranges()
            .filter_map(|(a, b)| Some((self.index(a)?, self.index(b)?)))
            .collect();
        let mut r = listed.into_iter();
        let mut range = r.next();
        for i in self.known..=arrived {
            while range.is_some_and(|(_, hi)| hi < i) {
                range = r.next();
            }
            if !range.is_some_and(|(lo, hi)| lo <= i && i <= hi) && self.sent[i].fate != Fate::Lost
            {
                self.deliver(now, i);
            }
        }
        self.known = arrived + 1;
        self.finish(now, prior_in_flight, None, None);
    }

    fn on_timeout(&mut self, _now: Instant, _inputs: &UdtInputs) {
        self.bbr.on_rto(self.in_flight());
    }

    fn on_packet_sent(&mut self, now: Instant, seq: UdtSeqNumber) {
        let Some(i) = self.index(seq) else {
            return; // already acknowledged
        };
        let st = self.sampler.on_send(now, self.in_flight());
        if let Some(slot) = self.sent.get_mut(i) {
            // A retransmission (after a NAK, or EXP's go-back-N): in flight again,
            // and its newest send is the one a sample measures from.
            if slot.fate != Fate::InFlight {
                self.in_flight_pkts += 1;
            }
            *slot = Slot {
                st,
                retransmitted: true,
                fate: Fate::InFlight,
            };
            return;
        }
        // A new packet (a gap would mean one was sent without being reported; fill
        // it with this send's state).
        while self.sent.len() <= i {
            self.sent.push_back(Slot {
                st,
                retransmitted: false,
                fate: Fate::InFlight,
            });
            self.in_flight_pkts += 1;
        }
    }

    /// The period that makes the engine send at BBR's pacing rate. UDT sends a
    /// packet pair every 16 packets (the second at once, without a period), so 16
    /// packets take 15 periods: a period of `mss / rate` would send 16/15 of the
    /// rate, 6.7 % above the model, which is a standing queue at a bottleneck.
    fn pkt_snd_period_us(&self) -> f64 {
        let rate = self.bbr.pacing_bytes_per_sec();
        if rate > 0.0 {
            self.mss as f64 * 1e6 / rate * PAIR_EVERY / (PAIR_EVERY - 1.0)
        } else {
            1.0
        }
    }

    /// BBR's window, plus the packets the engine counts as unacknowledged that are
    /// not in flight (arrived behind a hole, or lost and awaiting retransmission).
    fn cwnd_pkts(&self) -> f64 {
        let not_in_flight = self.sent.len() as u64 - self.in_flight_pkts;
        (self.bbr.cwnd() / self.mss + not_in_flight) as f64
    }

    fn in_slow_start(&self) -> bool {
        self.bbr.mode() == BbrMode::Startup
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1500;

    fn sender(n: u32) -> BbrUdt {
        let mut b = BbrUdt::new(
            BbrConfig::default(),
            MSS,
            Instant::ZERO,
            UdtSeqNumber::new(99),
        );
        for i in 0..n {
            b.on_packet_sent(
                Instant::from_nanos(u64::from(i) * 1000),
                UdtSeqNumber::new(100 + i),
            );
        }
        b
    }

    /// A NAK at `ms` listing `ranges`, encoded as on the wire.
    fn nak(b: &mut BbrUdt, ms: u64, ranges: &[(u32, u32)]) {
        let ranges: Vec<_> = ranges
            .iter()
            .map(|&(a, z)| (UdtSeqNumber::new(a), UdtSeqNumber::new(z)))
            .collect();
        let mut buf = vec![0u8; LossList::encoded_len(&ranges)];
        let list = LossList::encode(&ranges, &mut buf);
        b.on_nak_ranges(Instant::from_nanos(ms * 1_000_000), list);
    }

    /// A NAK for 103–104 shows 105 arrived, and with it 100–102: six packets
    /// leave the flight (four delivered, two lost), and the window the engine sees
    /// grows by them. Resending 103 puts it back in flight; a periodic NAK listing
    /// 104 again (not yet resent) counts no new loss.
    #[test]
    fn naks_are_read_as_sack() {
        let mut b = sender(10);
        let cwnd0 = b.cwnd_pkts();
        nak(&mut b, 50, &[(103, 104)]);
        assert_eq!(b.in_flight_pkts, 4, "106-109 are still in flight");
        assert_eq!(b.sampler.delivered(), 4 * u64::from(MSS), "100-102 and 105");
        assert_eq!(b.sampler.lost(), 2 * u64::from(MSS));
        // Six out of the flight, and Startup grew BBR's window by the four delivered.
        assert_eq!(b.cwnd_pkts(), cwnd0 + 6.0 + 4.0);
        b.on_packet_sent(Instant::from_nanos(60_000_000), UdtSeqNumber::new(103));
        assert_eq!(b.in_flight_pkts, 5);
        nak(&mut b, 70, &[(104, 104)]);
        assert_eq!(b.sampler.lost(), 2 * u64::from(MSS));
        // The cumulative ACK past 105 delivers only 103 and 104 anew.
        b.on_light_ack(Instant::from_nanos(80_000_000), UdtSeqNumber::new(106));
        assert_eq!(b.sampler.delivered(), 6 * u64::from(MSS));
        assert_eq!(b.sent.len(), 4);
    }

    /// The period makes 16 packets (one pair among them) take 16 packets' time at
    /// the pacing rate.
    #[test]
    fn period_pays_for_the_packet_pair() {
        let b = sender(0);
        let rate = b.bbr().pacing_bytes_per_sec();
        let per_packet = f64::from(MSS) / rate * 1e6;
        assert!((b.pkt_snd_period_us() * 15.0 - per_packet * 16.0).abs() < 1e-6);
    }
}
