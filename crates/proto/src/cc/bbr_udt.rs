//! BBR driving UDT: the [`Bbr`] model behind UDT's rate-control interface.
//!
//! Only the rate decision changes. UDT's loss recovery (NAKs, the sender loss list,
//! retransmission first, the EXP timer) is the engine's and stays as it is; BBR sets
//! the sending period (`mss / pacing rate`) and the window, which the engine already
//! obeys.
//!
//! The engine tells it one thing UDT4's controllers are not told: when the sender
//! runs out of data (`on_app_limited`), so that the application's pace is not
//! taken for the path's. What else BBR needs that UDT4's controller interface does
//! not carry, the adapter keeps itself: per packet in flight, a delivery-rate
//! snapshot ([`RateSampler`]) and whether it is in flight, known delivered or
//! known lost. UDT acknowledges
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
//!
//! **Coupled channels.** The parallel channels of one transfer cross the same path,
//! and as separate BBR flows they overshoot it together: each one's estimate stands
//! near the link's rate (docs/bbr.md traces why), and in the simulator four
//! channels of a 1 GB transfer over 1 Gb/s × 50 ms lost 26.8 % of what they offered
//! the bottleneck at its queue (0.42 % as one group). Channels that join one
//! [`BbrGroup`] run one model instead, as one flow would: its bandwidth sample is
//! the median of the members' fresh receiver readings times the members sending,
//! bounded by the link's rate as the receivers' packet pairs measure it; it
//! counts their deliveries, losses and packets in flight together; the members
//! take turns on one pacing clock at the model's rate, so what one cannot send
//! the others do; and each keeps its share of the window (the members with
//! packets outstanding share equally). A sender alone is BBR on UDT
//! as above, unchanged.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use super::bbr::{Bbr, BbrConfig, BbrMode, LhChanges};
use super::delivery_rate::{RateSampler, SendState};
use super::udt::{UdtInputs, UdtRateControl, MIN_WINDOW_PKTS, SELF_CLOCK, SYN_US};
use crate::seq::UdtSeqNumber;
use crate::time::{Duration, Instant};
use crate::udt::estimator::ARRIVALS;
use longhaul_wire::udt::LossList;

/// UDT's initial window, packets (`CUDTCC`'s `m_dCWndSize`).
const INITIAL_WINDOW_PKTS: u64 = 16;
/// UDT sends a packet pair every this many packets.
const PAIR_EVERY: f64 = 16.0;
/// The most a UDT receiver reports as the link's capacity before it has measured
/// it, packets per second. Its 64 probe slots start at 1 ms, and until more than
/// half hold pairs the median is that 1 ms; the figure is then the mean of the
/// median and the slots within an eighth to eight times it. With at most 32 of
/// the 63 slots the median is taken over below 1 ms, and the 64th free, that mean
/// is at least (1000 + 31 × 1000 + 33 × 126) / 65 µs: at most 1798 packets/s
/// (21.6 Mb/s of 1500-byte packets). Exactly 1000 until pairs come; values near
/// it while they do (12-13 Mb/s in real runs at 100 Mb/s with 5 % loss).
const UNMEASURED_CAPACITY_PPS: u32 = 1798;
/// A member's receiver reading counts toward its group's sample for this long: two
/// of the receiver's full-ACK periods (UDT4's SYN, 10 ms), so a member whose ACKs
/// stop (a hole holds its cumulative ACK) drops out of the median.
const READING_FRESH: Duration = Duration::from_millis(20);

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

/// What the members of a group share: the model, its sampler, their packets in
/// flight, and each member's latest receiver reading and whether it has packets
/// outstanding.
#[derive(Debug, Clone)]
struct Model {
    bbr: Bbr,
    /// The members' packet size, bytes.
    mss: u64,
    sampler: RateSampler,
    in_flight_pkts: u64,
    /// Per member: its receiver's latest reading and when it came.
    readings: Vec<Option<(Reading, Instant)>>,
    /// Per member: whether it has packets sent and not yet acknowledged.
    busy: Vec<bool>,
    /// Per member: whether it ran out of data since it last sent.
    starved: Vec<bool>,
    /// Per member: when it last sent a packet.
    last_sent: Vec<Option<Instant>>,
    /// A group's pacing clock: the earliest time its next packet, any member's,
    /// may leave (see [`Member::book`]).
    next_slot: Option<Instant>,
}

impl Model {
    fn new(cfg: BbrConfig, mss: u64, initial_window: u64, now: Instant) -> Self {
        Model {
            bbr: Bbr::new(cfg, mss, initial_window, now),
            mss,
            sampler: RateSampler::default(),
            in_flight_pkts: 0,
            readings: vec![],
            busy: vec![],
            starved: vec![],
            last_sent: vec![],
            next_slot: None,
        }
    }

    /// A new member: its slots, and the window floor raised to what the group
    /// can hold. Each member keeps up to [`MIN_WINDOW_PKTS`] packets out whatever
    /// its share of the window, so a group of more than two cannot bring its
    /// inflight down to BBR's four packets. Left at four, ProbeRTT waited for an
    /// inflight the group never reached and held the window at four packets for
    /// good: four coupled `bbr` channels at 1 Gb/s × 200 ms with 1e-4 loss ran at
    /// 990 Mb/s until their first ProbeRTT at 15 s, then at 0.5 Mb/s, with two
    /// packets out per member (`channels.toml`, seed 1).
    fn join(&mut self) -> usize {
        self.readings.push(None);
        self.busy.push(false);
        self.starved.push(false);
        self.last_sent.push(None);
        let members = self.readings.len() as u64;
        self.bbr.set_min_cwnd_pkts(MIN_WINDOW_PKTS * members);
        // Each member's receiver reads its own last packets.
        self.bbr.set_probe_span_pkts(ARRIVALS as u64 * members);
        // Each member's receiver acknowledges every 64 of its packets, or per SYN.
        if self.bbr.config().ack_hold {
            self.bbr.set_ack_schedule(
                u64::from(SELF_CLOCK) * members,
                Duration::from_micros(SYN_US as u64),
            );
        }
        self.readings.len() - 1
    }

    /// Member `me`'s receiver reads `r` at `now`: the model's bandwidth sample. A
    /// lone sender's is its reading. A group's is the median of its members' fresh
    /// readings times the members sending ([`sending`](Self::sending)), and no
    /// more than the link: the median of the capacities the members'
    /// receivers measure with packet pairs, or the highest fresh reading if that
    /// is more (a member whose packets arrived back to back reads the link's
    /// spacing too, and the two differ by the receivers' timing noise).
    /// - Not the readings' sum: a reading is the spacing of a member's last 16
    ///   arrivals, and a member whose packets came back to back reads the whole
    ///   link's rate, which a sum counts twice.
    /// - Not the median times the members with fresh readings: under loss the
    ///   stalled ones drop out, the sample falls with them, and every member slows.
    /// - Not one receiver's capacity: in a real run one of four read 2.9 Gb/s on a
    ///   1 Gb/s link, and as the group's bound let its estimate up to it.
    /// - Not times the members with packets outstanding: on a path whose BDP is a
    ///   few packets, a member's packets are all acknowledged between its sends
    ///   about half the time, and a real group of four over loopback, counted so,
    ///   sampled half its rate, round after round, down to 24 kb/s.
    ///
    /// The link, once known, also bounds what the model's filter already holds
    /// (see `finish`): the group's first samples, in Startup before any receiver
    /// has measured it, are unbounded (four members reading the link's rate give
    /// four times it, and the filter held that for ten rounds in a real run).
    fn sample(&mut self, me: usize, now: Instant, r: Reading) -> Sample {
        self.readings[me] = Some((r, now));
        if self.readings.len() == 1 {
            return Sample {
                rate: r.rate,
                link: None,
            };
        }
        let fresh: Vec<Reading> = self
            .readings
            .iter()
            .flatten()
            .filter(|(_, at)| now.saturating_duration_since(*at) <= READING_FRESH)
            .map(|&(r, _)| r)
            .collect();
        let rates: Vec<f64> = fresh.iter().map(|r| r.rate).collect();
        let capacities: Vec<f64> = fresh
            .iter()
            .map(|r| r.capacity)
            .filter(|&c| c > 0.0)
            .collect();
        let estimate = median(rates.clone()) * self.sending(now) as f64;
        // No capacity measured yet (all 0): no bound.
        let link = (!capacities.is_empty()).then(|| {
            let highest = rates.iter().copied().fold(0.0, f64::max);
            median(capacities).max(highest)
        });
        Sample {
            rate: link.map_or(estimate, |l| estimate.min(l)),
            link,
        }
    }

    /// How many members share the group's rate at `now`: those with packets
    /// outstanding, or that sent one within the time a reading spans, which is
    /// the time the group takes to send [`ARRIVALS`] packets a member at its
    /// pacing rate (at least one).
    fn sending(&self, now: Instant) -> u64 {
        let rate = self.bbr.pacing_bytes_per_sec();
        let pkts = (ARRIVALS * self.busy.len()) as f64;
        let span = Duration::from_nanos((pkts * self.mss as f64 * 1e9 / rate.max(1.0)) as u64);
        let recent =
            |t: &Option<Instant>| t.is_some_and(|t| now.saturating_duration_since(t) <= span);
        let n = self
            .busy
            .iter()
            .zip(&self.last_sent)
            .filter(|(&busy, sent)| busy || recent(sent))
            .count();
        (n as u64).max(1)
    }

    /// How many members share the window: those with packets outstanding (at
    /// least one, so that a member about to send has a share). The pacing is
    /// shared by the group's clock ([`Member::book`]) instead.
    fn sharing(&self) -> u64 {
        if self.busy.len() == 1 {
            return 1; // a lone sender, asked for every packet it sends
        }
        (self.busy.iter().filter(|&&b| b).count() as u64).max(1)
    }
}

/// A group's bandwidth sample, and the link's rate that bounds it if known
/// (bytes per second).
#[derive(Debug, Clone, Copy)]
struct Sample {
    rate: f64,
    link: Option<f64>,
}

/// The median of `v` (not empty; the mean of the middle two if even).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// What a full ACK's receiver measured, bytes per second: the arrival rate of its
/// last packets, and the link's capacity from its packet pairs.
#[derive(Debug, Clone, Copy)]
struct Reading {
    rate: f64,
    capacity: f64,
}

impl Reading {
    /// What a full ACK's `inputs` say, for packets of `mss` bytes; `None` if the
    /// receiver has no reading. Until its packet pairs fill half its filter, a
    /// receiver reports at most [`UNMEASURED_CAPACITY_PPS`] as the capacity: that
    /// is no measurement (as a cap it ended a group's Startup at 12 Mb/s in a real
    /// run), and goes as 0, no bound; a path that slow only goes without one.
    fn of(inputs: &UdtInputs, mss: u64) -> Option<Reading> {
        let mss = mss as f64;
        let capacity = match inputs.ack_bandwidth_pps {
            c if c > UNMEASURED_CAPACITY_PPS => f64::from(c) * mss,
            _ => 0.0,
        };
        (inputs.ack_recv_rate_pps > 0).then(|| Reading {
            rate: f64::from(inputs.ack_recv_rate_pps) * mss,
            capacity,
        })
    }
}

/// The model of a lone [`BbrUdt`], or a group's, behind a lock.
#[derive(Debug, Clone)]
enum ModelRef {
    Own(Box<Model>),
    Shared(Arc<Mutex<Model>>),
}

/// A model borrowed for one event.
enum Borrowed<'a> {
    Own(&'a mut Model),
    Shared(MutexGuard<'a, Model>),
}

impl Deref for Borrowed<'_> {
    type Target = Model;
    fn deref(&self) -> &Model {
        match self {
            Borrowed::Own(m) => m,
            Borrowed::Shared(g) => g,
        }
    }
}

impl DerefMut for Borrowed<'_> {
    fn deref_mut(&mut self) -> &mut Model {
        match self {
            Borrowed::Own(m) => m,
            Borrowed::Shared(g) => g,
        }
    }
}

/// A model read for one query.
enum Read<'a> {
    Own(&'a Model),
    Shared(MutexGuard<'a, Model>),
}

impl Deref for Read<'_> {
    type Target = Model;
    fn deref(&self) -> &Model {
        match self {
            Read::Own(m) => m,
            Read::Shared(g) => g,
        }
    }
}

/// Locks a group's model. A member that panicked while holding it (a bug) may have
/// left it mid-update; the others carry on with it rather than panic in turn.
fn lock(m: &Mutex<Model>) -> MutexGuard<'_, Model> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One BBR model for several UDT senders on one path: the channels of a transfer
/// (see the module notes). Cloning it gives another handle on the same model, as
/// cloning a member's [`BbrUdt`] does.
#[derive(Debug, Clone)]
pub struct BbrGroup {
    model: Arc<Mutex<Model>>,
}

/// The standing queue, as a fraction of the min RTT, without which a coupled
/// `bbr-lh` group's lossy rounds do not bound its inflight
/// ([`LhChanges::loss_needs_queue`]).
///
/// Why a group and not every `bbr-lh` flow: a group is the transfer's one model,
/// and under heavy random loss v3's bound (2 %, exceeded every round at 5 %) held
/// its one window to 0.7-1 BDP. In the simulator (100 Mb/s x 20 ms, 5 % loss on
/// the data's way, 4 channels, periodic NAKs, seeds 1 and 2) the group carried
/// 38.9 and 39.5 Mb/s with v3's bound, 68.3 and 69.2 with this, 78.3 and 85.5
/// with no bound at all; four models carry 92. Through `longhaul emu` (5 % both
/// ways, 3 runs), 59.4-61.5 Mb/s against 35.1 without it. On the study's channel
/// grid it also lifts the group at 1 % loss (1 ms: 452 to 540 Mb/s; 150 ms: 398
/// to 438) and costs at most 2.4 % elsewhere. Four channels each with its own
/// model, given it, collapsed at 1 ms (275 to 57 Mb/s): each reads the whole
/// link, so loss without a standing queue is their own overshoot there. Given to
/// one flow on the study's grid (RTT 1, 50 and 200 ms × loss 1e-3 and 1e-2), any
/// value from 0.02 to 0.25 gave the same goodput (not varied for the group); 0.1
/// is a tenth of the path's RTT, above a real path's timing noise.
pub const GROUP_LOSS_NEEDS_QUEUE: f64 = 0.1;

impl BbrGroup {
    /// A group for `channels` senders of `mss`-byte packets, at `now`: its initial
    /// window is UDT's initial window for each of them. A group running any of
    /// `bbr-lh`'s changes reads loss by [`GROUP_LOSS_NEEDS_QUEUE`] unless `cfg`
    /// sets its own threshold.
    pub fn new(mut cfg: BbrConfig, mss: u32, channels: u32, now: Instant) -> Self {
        if cfg.lh != LhChanges::NONE {
            if cfg.lh.loss_needs_queue.is_none() {
                cfg.lh.loss_needs_queue = Some(GROUP_LOSS_NEEDS_QUEUE);
            }
            if cfg.lh.pace_over_loss.is_none() {
                cfg.lh.pace_over_loss = Some(true);
            }
        }
        let mss = u64::from(mss);
        let window = INITIAL_WINDOW_PKTS * u64::from(channels.max(1)) * mss;
        BbrGroup {
            model: Arc::new(Mutex::new(Model::new(cfg, mss, window, now))),
        }
    }

    /// The model's pacing rate, bytes per second, for all members together.
    pub fn pacing_bytes_per_sec(&self) -> f64 {
        lock(&self.model).bbr.pacing_bytes_per_sec()
    }
}

/// BBR for a UDT sender, alone or as a member of a [`BbrGroup`].
#[derive(Debug, Clone)]
pub struct BbrUdt {
    model: ModelRef,
    member: Member,
}

/// A sender's own part: its packets' fates and its place in the group.
#[derive(Debug, Clone)]
struct Member {
    /// Its index among the group's members (0 alone).
    me: usize,
    mss: u64,
    /// The first sequence number not yet acknowledged; `sent[0]` is its slot.
    front: UdtSeqNumber,
    sent: VecDeque<Slot>,
    /// How many of `sent` are in flight (the model counts the group's).
    in_flight_pkts: u64,
    /// How many of `sent` (from the front) NAKs have accounted for: all of them
    /// arrived or are listed lost.
    known: usize,
    /// A group member's wait after its last packet until the group's next slot,
    /// µs ([`Member::book`]).
    wait_us: f64,
}

impl BbrUdt {
    /// A controller at `now` whose first packet will be `snd_curr_seq + 1`, for
    /// packets of `mss` bytes (IP and UDP headers included, as UDT counts them).
    pub fn new(cfg: BbrConfig, mss: u32, now: Instant, snd_curr_seq: UdtSeqNumber) -> Self {
        let mss = u64::from(mss);
        let mut model = Model::new(cfg, mss, INITIAL_WINDOW_PKTS * mss, now);
        let me = model.join();
        BbrUdt {
            model: ModelRef::Own(Box::new(model)),
            member: Member::new(me, mss, snd_curr_seq),
        }
    }

    /// A sender of `mss`-byte packets whose first packet will be `snd_curr_seq + 1`,
    /// joining `group` (whose configuration it takes).
    pub fn coupled(group: &BbrGroup, mss: u32, snd_curr_seq: UdtSeqNumber) -> Self {
        let me = lock(&group.model).join();
        BbrUdt {
            model: ModelRef::Shared(Arc::clone(&group.model)),
            member: Member::new(me, u64::from(mss), snd_curr_seq),
        }
    }

    /// The model for one event, and this sender's own part beside it.
    fn parts(&mut self) -> (Borrowed<'_>, &mut Member) {
        let model = match &mut self.model {
            ModelRef::Own(m) => Borrowed::Own(m),
            ModelRef::Shared(m) => Borrowed::Shared(lock(m)),
        };
        (model, &mut self.member)
    }

    /// The model, for one query.
    fn read(&self) -> Read<'_> {
        match &self.model {
            ModelRef::Own(m) => Read::Own(m),
            ModelRef::Shared(m) => Read::Shared(lock(m)),
        }
    }

    /// The pacing rate of the model, bytes per second (the group's, for a member).
    pub fn pacing_bytes_per_sec(&self) -> f64 {
        self.read().bbr.pacing_bytes_per_sec()
    }
}

impl Member {
    fn new(me: usize, mss: u64, snd_curr_seq: UdtSeqNumber) -> Self {
        Member {
            me,
            mss,
            front: snd_curr_seq.inc(),
            sent: VecDeque::new(),
            in_flight_pkts: 0,
            known: 0,
            wait_us: 0.0,
        }
    }

    fn index(&self, seq: UdtSeqNumber) -> Option<usize> {
        usize::try_from(self.front.offset_to(seq)).ok()
    }

    /// The group's bytes in flight.
    fn group_in_flight(&self, model: &Model) -> u64 {
        model.in_flight_pkts * self.mss
    }

    /// Tells the model whether this sender has packets outstanding.
    fn note_busy(&self, model: &mut Model) {
        model.busy[self.me] = !self.sent.is_empty();
    }

    /// Marks the slot `i` delivered now, if it was not already.
    fn deliver(&mut self, model: &mut Model, now: Instant, i: usize) {
        let Some(slot) = self.sent.get_mut(i) else {
            return;
        };
        if slot.fate == Fate::InFlight {
            self.in_flight_pkts -= 1;
            model.in_flight_pkts -= 1;
        }
        if slot.fate != Fate::Delivered {
            slot.fate = Fate::Delivered;
            model.sampler.on_delivered(now, &slot.st, self.mss);
        }
    }

    /// Ends an acknowledgement's sample and hands it to the model, with a
    /// bandwidth sample if this member's receiver measured `reading`.
    fn finish(
        &self,
        model: &mut Model,
        now: Instant,
        prior_in_flight: u64,
        rtt_from: Option<Slot>,
        reading: Option<Reading>,
    ) {
        let rtt = rtt_from
            .filter(|s| !s.retransmitted)
            .map(|s| now.saturating_duration_since(s.st.sent_time()));
        let min_rtt = model.bbr.min_rtt();
        let rs = model.sampler.finish_ack(now, prior_in_flight, rtt, min_rtt);
        let sample = reading.map(|r| model.sample(self.me, now, r));
        // Samples taken before the link's rate was known (a group's first, in
        // Startup) are held by the filter for ten rounds: bound them. (Bounding
        // only once, when the link is first known, let a real group at 50 ms
        // lose 15 % at the queue again: 769 Mb/s against 917.)
        if let Some(Sample {
            link: Some(link), ..
        }) = sample
        {
            model.bbr.limit_bandwidth(link as u64);
        }
        let rate = sample.map(|s| s.rate);
        let in_flight = self.group_in_flight(model);
        let delivered = model.sampler.delivered();
        model
            .bbr
            .update_with_rate(now, &rs, rate, delivered, in_flight);
        if model.bbr.in_probe_rtt() {
            model.sampler.on_app_limited(in_flight);
        }
    }

    /// Every packet before `ack` is delivered at `now`; the receiver measured
    /// `reading`, if this is a full ACK that says.
    fn acknowledge(
        &mut self,
        model: &mut Model,
        now: Instant,
        ack: UdtSeqNumber,
        reading: Option<Reading>,
    ) {
        let n = self.front.offset_to(ack);
        if n <= 0 {
            return;
        }
        let n = (n as usize).min(self.sent.len());
        let prior_in_flight = self.group_in_flight(model);
        model.sampler.begin_ack();
        for i in 0..n {
            self.deliver(model, now, i);
        }
        let newest = n.checked_sub(1).and_then(|i| self.sent.get(i).copied());
        self.sent.drain(..n);
        self.known = self.known.saturating_sub(n);
        self.front = ack;
        self.note_busy(model);
        self.finish(model, now, prior_in_flight, newest, reading);
    }

    fn on_nak_ranges(&mut self, model: &mut Model, now: Instant, list: LossList<'_>) {
        let prior_in_flight = self.group_in_flight(model);
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
                    model.in_flight_pkts -= 1;
                    model.sampler.on_lost(self.mss);
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
        // The receiver sends a NAK the moment a packet arrives beyond a gap, so
        // that packet's send to this NAK is a round trip no hole delays
        // (`LhChanges::nak_rtt`). A periodic NAK's packet arrived earlier: its
        // sample is long, as a hole-delayed ACK's is, and the min RTT and the
        // standing RTT, which keep the least, pass over it.
        let timed = self.sent.get(arrived).copied();
        let arrived = arrived.min(self.sent.len().saturating_sub(1));
        if arrived < self.known {
            return;
        }
        model.sampler.begin_ack();
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
                self.deliver(model, now, i);
            }
        }
        self.known = arrived + 1;
        let timed = timed.filter(|_| model.bbr.config().lh.nak_rtt);
        self.finish(model, now, prior_in_flight, timed, None);
    }

    /// A group member sent a packet the schedule had leave at `due`: it takes the
    /// group's next slot, and waits from `due` until the slot after it is due.
    ///
    /// One clock for the group, not a share of the rate each: a member that cannot
    /// send (its window is full, or it waits for a retransmission's repair) takes
    /// no slots, and the others take them up. With a fixed share each, its share
    /// went unused: in the simulator (100 Mb/s × 20 ms, 5 % loss, four channels,
    /// seeds 1-8) the group carried 83.1-88.7 Mb/s (mean 87.0) with shares and
    /// 86.7-89.4 (mean 88.3) with the clock. The clock also counts a packet pair's
    /// second packet, which UDT sends at once, so no 16/15 is needed here.
    ///
    /// From `due`, not from when the packet left: a real sender's threads wake
    /// late, and the engine pays that back by sending the next packets early. A
    /// clock restarted from the late send instead (a scratch build, not kept) lost
    /// the lateness for good: a real group at 1 Gb/s × 50 ms without loss carried
    /// 850-869 Mb/s against 915-917 with shares. An idle group banks no slots: a member that had
    /// nothing to send is due when it sends.
    fn book(&mut self, model: &mut Model, due: Instant) {
        let rate = model.bbr.pacing_bytes_per_sec();
        let gap = if rate > 0.0 {
            Duration::from_nanos(((self.mss as f64 * 1e9 / rate) as u64).max(1))
        } else {
            Duration::from_micros(1)
        };
        let next = model.next_slot.map_or(due, |t| t.max(due)) + gap;
        model.next_slot = Some(next);
        self.wait_us = next.saturating_duration_since(due).as_nanos() as f64 / 1000.0;
    }

    /// This member ran out of data. When every member has, the group's
    /// samples are application-limited until what is in flight now, and the
    /// packets the receivers' readings span after it, are delivered: a reading
    /// is the arrival rate of a receiver's last [`ARRIVALS`] packets, so the
    /// application's pace stays in it that long after the application speeds
    /// up. A member alone is the group.
    ///
    /// Without this a sender whose application was slow read that pace as the
    /// path's, and could not climb back. A pacing gap far above the min RTT
    /// leaves a probing phase one packet long, which a 16-packet median does
    /// not see: given 10 packets a second for 2 s over 100 Mb/s × 5 ms, a lone
    /// sender then sent about one packet per EXP timeout for good
    /// (`udt::tests::a_bbr_sender_climbs_back_after_a_slow_application`). The
    /// two coupled channels of a resumed `longhaul send` that crawled over
    /// loopback under CI's load, at 7 packets a second, showed the same: one
    /// packet per EXP timeout (docs/bbr.md, "Slow spells").
    fn on_app_limited(&self, model: &mut Model) {
        model.starved[self.me] = true;
        if model.starved.iter().all(|&s| s) {
            let span = ARRIVALS as u64 * self.mss;
            let in_flight = self.group_in_flight(model);
            model.sampler.on_app_limited(in_flight + span);
        }
    }

    fn on_packet_sent(&mut self, model: &mut Model, now: Instant, due: Instant, seq: UdtSeqNumber) {
        model.starved[self.me] = false;
        model.last_sent[self.me] = Some(now);
        if model.busy.len() > 1 {
            self.book(model, due);
        }
        let Some(i) = self.index(seq) else {
            return; // already acknowledged
        };
        let st = model.sampler.on_send(now, self.group_in_flight(model));
        if let Some(slot) = self.sent.get_mut(i) {
            // A retransmission (after a NAK, or EXP's go-back-N): in flight again,
            // and its newest send is the one a sample measures from.
            if slot.fate != Fate::InFlight {
                self.in_flight_pkts += 1;
                model.in_flight_pkts += 1;
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
            model.in_flight_pkts += 1;
        }
        self.note_busy(model);
    }
}

impl UdtRateControl for BbrUdt {
    fn on_ack(&mut self, now: Instant, ack: UdtSeqNumber, inputs: &UdtInputs) {
        let reading = Reading::of(inputs, self.member.mss);
        let (mut model, member) = self.parts();
        member.acknowledge(&mut model, now, ack, reading);
    }

    fn on_app_limited(&mut self, _now: Instant) {
        let (mut model, member) = self.parts();
        member.on_app_limited(&mut model);
    }

    fn on_light_ack(&mut self, now: Instant, ack: UdtSeqNumber) {
        let (mut model, member) = self.parts();
        member.acknowledge(&mut model, now, ack, None);
    }

    fn on_loss(&mut self, _now: Instant, _first_lost: UdtSeqNumber, _inputs: &UdtInputs) {}

    fn on_nak_ranges(&mut self, now: Instant, list: LossList<'_>) {
        let (mut model, member) = self.parts();
        member.on_nak_ranges(&mut model, now, list);
    }

    fn on_timeout(&mut self, _now: Instant, _inputs: &UdtInputs) {
        let (mut model, member) = self.parts();
        let in_flight = member.group_in_flight(&model);
        model.bbr.on_rto(in_flight);
    }

    fn on_packet_sent(&mut self, now: Instant, due: Instant, seq: UdtSeqNumber) {
        let (mut model, member) = self.parts();
        member.on_packet_sent(&mut model, now, due, seq);
    }

    /// The period that makes the engine send at BBR's pacing rate. UDT sends a
    /// packet pair every 16 packets (the second at once, without a period), so 16
    /// packets take 15 periods: a period of `mss / rate` would send 16/15 of the
    /// rate, 6.7 % above the model, which is a standing queue at a bottleneck. A
    /// group's member waits for the group's next slot instead (`Member::book`),
    /// asked just after each packet it sends.
    fn pkt_snd_period_us(&self) -> f64 {
        let model = self.read();
        if model.busy.len() > 1 {
            return self.member.wait_us;
        }
        let rate = model.bbr.pacing_bytes_per_sec();
        if rate > 0.0 {
            self.member.mss as f64 * 1e6 / rate * PAIR_EVERY / (PAIR_EVERY - 1.0)
        } else {
            1.0
        }
    }

    /// This sender's share of BBR's window, plus the packets the engine counts as
    /// unacknowledged that are not in flight (arrived behind a hole, or lost and
    /// awaiting retransmission).
    fn cwnd_pkts(&self) -> f64 {
        let m = &self.member;
        let not_in_flight = m.sent.len() as u64 - m.in_flight_pkts;
        let model = self.read();
        // One division (the engine asks for every packet): ⌊⌊w/s⌋/mss⌋ = ⌊w/(s·mss)⌋.
        (model.bbr.cwnd() / (model.sharing() * m.mss) + not_in_flight) as f64
    }

    fn in_slow_start(&self) -> bool {
        self.read().bbr.mode() == BbrMode::Startup
    }
}

#[cfg(test)]
#[path = "bbr_udt_tests.rs"]
mod tests;
