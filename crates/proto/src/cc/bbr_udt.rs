//! BBR driving UDT: the [`Bbr`] model behind UDT's rate-control interface.
//!
//! Only the rate decision changes. UDT's loss recovery (NAKs, the sender loss list,
//! retransmission first, the EXP timer) is the engine's and stays as it is; BBR sets
//! the sending period (`mss / pacing rate`) and the window (its cwnd in packets),
//! which the engine already obeys.
//!
//! What BBR needs that UDT4's controller interface does not carry, the adapter keeps
//! itself: a delivery-rate snapshot per packet in flight ([`RateSampler`]), filled on
//! every send and retransmission, and emptied by every ACK, light ones included
//! (UDT4's rate control sees only full ACKs, once per SYN; a light ACK every 64
//! packets gives BBR samples between them, which a short path needs). The RTT is the
//! one the ACK carries (the receiver's, measured from ACK2): UDT acknowledges
//! cumulatively, so the time from a packet's send to the ACK covering it includes
//! the ACK timer and any wait for an earlier hole to be repaired, which is not the
//! path's RTT.

use std::collections::VecDeque;

use super::bbr::{Bbr, BbrConfig, BbrMode};
use super::delivery_rate::{RateSampler, SendState};
use super::udt::{UdtInputs, UdtRateControl};
use crate::seq::UdtSeqNumber;
use crate::time::{Duration, Instant};

/// UDT's initial window, packets (`CUDTCC`'s `m_dCWndSize`).
const INITIAL_WINDOW_PKTS: u64 = 16;

/// BBR for a UDT sender.
#[derive(Debug, Clone)]
pub struct BbrUdt {
    bbr: Bbr,
    sampler: RateSampler,
    mss: u64,
    /// The first sequence number not yet acknowledged; `sent[0]` is its snapshot.
    front: UdtSeqNumber,
    sent: VecDeque<SendState>,
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
        }
    }

    /// The model.
    pub fn bbr(&self) -> &Bbr {
        &self.bbr
    }

    fn in_flight(&self) -> u64 {
        self.sent.len() as u64 * self.mss
    }

    /// Every packet before `ack` is delivered at `now`.
    fn acknowledge(&mut self, now: Instant, ack: UdtSeqNumber, rtt: Option<Duration>) {
        let n = self.front.offset_to(ack);
        if n <= 0 {
            return;
        }
        let prior_in_flight = self.in_flight();
        self.sampler.begin_ack();
        for _ in 0..(n as usize).min(self.sent.len()) {
            if let Some(st) = self.sent.pop_front() {
                self.sampler.on_delivered(now, &st, self.mss);
            }
        }
        self.front = ack;
        let rs = self
            .sampler
            .finish_ack(now, prior_in_flight, rtt, self.bbr.min_rtt());
        let in_flight = self.in_flight();
        self.bbr
            .on_ack(now, &rs, self.sampler.delivered(), in_flight);
        if self.bbr.in_probe_rtt() {
            self.sampler.on_app_limited(in_flight);
        }
    }
}

impl UdtRateControl for BbrUdt {
    fn on_ack(&mut self, now: Instant, ack: UdtSeqNumber, inputs: &UdtInputs) {
        let rtt = (inputs.ack_rtt_us > 0.0)
            .then(|| Duration::from_nanos((inputs.ack_rtt_us * 1000.0) as u64));
        self.acknowledge(now, ack, rtt);
    }

    fn on_light_ack(&mut self, now: Instant, ack: UdtSeqNumber) {
        self.acknowledge(now, ack, None);
    }

    fn on_loss(&mut self, _now: Instant, _first_lost: UdtSeqNumber, inputs: &UdtInputs) {
        self.sampler
            .on_lost(u64::from(inputs.nak_lost_pkts) * self.mss);
    }

    fn on_timeout(&mut self, _now: Instant, _inputs: &UdtInputs) {
        self.bbr.on_timeout(self.in_flight());
    }

    fn on_packet_sent(&mut self, now: Instant, seq: UdtSeqNumber) {
        let Ok(i) = usize::try_from(self.front.offset_to(seq)) else {
            return; // already acknowledged
        };
        let in_flight = self.in_flight();
        let st = self.sampler.on_send(now, in_flight);
        match self.sent.get_mut(i) {
            Some(slot) => *slot = st, // a retransmission: its newest send counts
            None => {
                // A new packet (a gap would mean one was sent without being
                // reported; fill it with this send's state).
                while self.sent.len() <= i {
                    self.sent.push_back(st);
                }
            }
        }
    }

    fn pkt_snd_period_us(&self) -> f64 {
        let rate = self.bbr.pacing_rate();
        if rate > 0.0 {
            self.mss as f64 * 1e6 / rate
        } else {
            1.0
        }
    }

    fn cwnd_pkts(&self) -> f64 {
        self.bbr.cwnd() as f64 / self.mss as f64
    }

    fn in_slow_start(&self) -> bool {
        self.bbr.mode() == BbrMode::Startup
    }
}
