//! BBR driving UDT against hand-worked cases: NAKs read as SACK, a group's members
//! sharing one model's rate and window, and the readings the group samples.

use super::*;

const MSS: u32 = 1500;

fn sender(n: u32) -> BbrUdt {
    sender_with(BbrConfig::default(), n)
}

/// [`sender`] running `cfg`.
fn sender_with(cfg: BbrConfig, n: u32) -> BbrUdt {
    let mut b = BbrUdt::new(cfg, MSS, Instant::ZERO, UdtSeqNumber::new(99));
    for i in 0..n {
        let t = Instant::from_nanos(u64::from(i) * 1000);
        b.on_packet_sent(t, t, UdtSeqNumber::new(100 + i));
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
    assert_eq!(b.member.in_flight_pkts, 4, "106-109 are still in flight");
    assert_eq!(
        b.read().sampler.delivered(),
        4 * u64::from(MSS),
        "100-102 and 105"
    );
    assert_eq!(b.read().sampler.lost(), 2 * u64::from(MSS));
    // Six out of the flight, and Startup grew BBR's window by the four delivered.
    assert_eq!(b.cwnd_pkts(), cwnd0 + 6.0 + 4.0);
    b.on_packet_sent(
        Instant::from_nanos(60_000_000),
        Instant::from_nanos(60_000_000),
        UdtSeqNumber::new(103),
    );
    assert_eq!(b.member.in_flight_pkts, 5);
    nak(&mut b, 70, &[(104, 104)]);
    assert_eq!(b.read().sampler.lost(), 2 * u64::from(MSS));
    // The cumulative ACK past 105 delivers only 103 and 104 anew.
    b.on_light_ack(Instant::from_nanos(80_000_000), UdtSeqNumber::new(106));
    assert_eq!(b.read().sampler.delivered(), 6 * u64::from(MSS));
    assert_eq!(b.member.sent.len(), 4);
}

/// With `nak_rtt`, a NAK times the packet after its last range, which the
/// receiver has just received: unless that packet was resent (105, at 30 ms:
/// no sample), the min RTT is the time from its send (107, at 7 µs) to the
/// NAK (60 ms). Without it, NAKs give no sample.
#[test]
fn a_nak_times_the_packet_after_its_last_range() {
    for on in [true, false] {
        let cfg = BbrConfig {
            lh: LhChanges {
                nak_rtt: on,
                ..LhChanges::NONE
            },
            ..BbrConfig::default()
        };
        let mut b = sender_with(cfg, 10);
        b.on_packet_sent(ms(30), ms(30), UdtSeqNumber::new(105));
        nak(&mut b, 50, &[(103, 104)]);
        assert_eq!(b.read().bbr.min_rtt(), None, "105 was resent");
        nak(&mut b, 60, &[(106, 106)]);
        let rtt = Duration::from_nanos(60_000_000 - 7_000);
        assert_eq!(b.read().bbr.min_rtt(), on.then_some(rtt), "nak_rtt {on}");
    }
}

/// The period makes 16 packets (one pair among them) take 16 packets' time at
/// the pacing rate.
#[test]
fn period_pays_for_the_packet_pair() {
    let b = sender(0);
    let rate = b.pacing_bytes_per_sec();
    let per_packet = f64::from(MSS) / rate * 1e6;
    assert!((b.pkt_snd_period_us() * 15.0 - per_packet * 16.0).abs() < 1e-6);
}

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

fn reading(mbps: f64, capacity_mbps: f64) -> Reading {
    Reading {
        rate: mbps * 1e6 / 8.0,
        capacity: capacity_mbps * 1e6 / 8.0,
    }
}

/// A model with `n` members, all with packets outstanding.
fn busy_model(n: usize) -> Model {
    let mut m = Model::new(
        BbrConfig::default(),
        u64::from(MSS),
        16 * 1500,
        Instant::ZERO,
    );
    for _ in 0..n {
        let i = m.join();
        m.busy[i] = true;
    }
    m
}

/// Of four members, two have packets outstanding, one has none but sent
/// within the time a reading spans (its packets were all acknowledged, as on
/// a path of a few packets' BDP) and one last sent twice that long ago. A
/// reading of 100 Mb/s is then the rate of one of three sending: the sample
/// is 300 Mb/s. The span is 16 packets a member at the group's pacing rate.
#[test]
fn a_member_that_sent_lately_shares_the_rate() {
    let mut m = busy_model(4);
    let span = 16.0 * 4.0 * 1500.0 / m.bbr.pacing_bytes_per_sec();
    let ago = |f: f64| Some(Instant::from_nanos(100_000_000 - (f * span * 1e9) as u64));
    m.busy[2] = false;
    m.busy[3] = false;
    m.last_sent[2] = ago(0.5);
    m.last_sent[3] = ago(2.0);
    let s = m.sample(0, ms(100), reading(100.0, 0.0));
    assert!((s.rate * 8e-6 - 300.0).abs() < 1e-6, "{}", s.rate * 8e-6);
}

/// Hand-worked: four busy members read 250, 250, 260 and 1000 Mb/s within
/// 20 ms (the last came back to back while the others were stalled). The
/// sample is the median (255) times the four sharing, 1020 Mb/s, where their
/// sum would be 1760; with a receiver's packet pairs measuring 1000 Mb/s it is
/// bounded there. A reading 21 ms old no longer counts toward the median.
#[test]
fn a_group_samples_the_median_reading_times_its_members() {
    let mut m = busy_model(4);
    let mut mbps = |me: usize, at: u64, r: Reading| {
        let s = m.sample(me, ms(at), r);
        (s.rate * 8e-6, s.link.map(|l| l * 8e-6))
    };
    mbps(0, 100, reading(250.0, 0.0));
    mbps(1, 105, reading(250.0, 0.0));
    mbps(2, 110, reading(260.0, 0.0));
    let near = |(got, link): (f64, Option<f64>), want: f64, want_link: Option<f64>| {
        assert!((got - want).abs() < 1e-6, "{got} Mb/s, not {want}");
        assert_eq!(link.map(|l| l.round()), want_link);
    };
    near(mbps(3, 115, reading(1000.0, 0.0)), 1020.0, None);
    near(mbps(3, 116, reading(1000.0, 1000.0)), 1000.0, Some(1000.0));
    // At 121 ms member 0's reading (100 ms) is stale: the median of 250, 260 and
    // 1000 is 260, times the four still sharing.
    near(mbps(3, 121, reading(1000.0, 0.0)), 1040.0, None);
    // A capacity below a reading is timing noise: the reading bounds the link.
    near(mbps(3, 122, reading(1000.0, 900.0)), 1000.0, Some(1000.0));
}

/// Hand-worked, as a real run's readings were (kernel-stamped, each member's
/// packets arriving back to back): four members read 970-1000 Mb/s, the link's
/// rate, and three of their receivers measure capacities of 950, 960 and (one
/// astray) 2900 Mb/s. The median reading times four is 3940 Mb/s; the link is
/// the median capacity, 960, or the highest reading, 1000, if more.
#[test]
fn a_groups_link_is_its_members_median_capacity() {
    let mut m = busy_model(4);
    m.sample(0, ms(100), reading(990.0, 950.0));
    m.sample(1, ms(101), reading(980.0, 960.0));
    m.sample(2, ms(102), reading(1000.0, 2900.0));
    let s = m.sample(3, ms(103), reading(970.0, 0.0));
    assert!((s.rate * 8e-6 - 1000.0).abs() < 1e-6, "{}", s.rate * 8e-6);
    assert!((s.link.unwrap() * 8e-6 - 1000.0).abs() < 1e-6);
}

/// A group's first samples, before any receiver has measured the link, are
/// unbounded (four members reading 1000 Mb/s give 4000); the first full ACK
/// that brings a capacity bounds what the model's filter already holds.
#[test]
fn a_measured_link_bounds_the_estimate_already_held() {
    let g = BbrGroup::new(BbrConfig::default(), MSS, 4, Instant::ZERO);
    let mut members: Vec<BbrUdt> = (0..4)
        .map(|i| BbrUdt::coupled(&g, MSS, UdtSeqNumber::new(99 + 1000 * i)))
        .collect();
    let pps = |mbps: f64| (mbps * 1e6 / 8.0 / f64::from(MSS)) as u32;
    for (i, m) in members.iter_mut().enumerate() {
        for k in 0..20 {
            m.on_packet_sent(ms(1), ms(1), UdtSeqNumber::new(100 + 1000 * i as u32 + k));
        }
    }
    for (i, m) in members.iter_mut().enumerate() {
        let ack = UdtSeqNumber::new(110 + 1000 * i as u32);
        m.on_ack(ms(51), ack, &inputs(pps(1000.0), 0));
    }
    let held = |m: &BbrUdt| m.read().bbr.bandwidth() as f64 * 8e-6;
    assert!(held(&members[0]) > 3900.0, "{}", held(&members[0]));
    // Member 0's receiver now measures the link at 1000 Mb/s.
    members[0].on_ack(
        ms(52),
        UdtSeqNumber::new(115),
        &inputs(pps(1000.0), pps(1000.0)),
    );
    assert!(held(&members[0]) <= 1000.0, "{}", held(&members[0]));
}

/// A group is application-limited only when every member has run out of
/// data: while one still has some, it takes the slots the others leave. A
/// lone sender is application-limited as soon as it runs out.
#[test]
fn a_group_is_application_limited_when_every_member_runs_out() {
    let last_marked = |m: &BbrUdt| m.member.sent.back().unwrap().st.is_app_limited();
    let g = BbrGroup::new(BbrConfig::default(), MSS, 2, Instant::ZERO);
    let mut a = BbrUdt::coupled(&g, MSS, UdtSeqNumber::new(99));
    let mut b = BbrUdt::coupled(&g, MSS, UdtSeqNumber::new(1099));
    a.on_packet_sent(ms(1), ms(1), UdtSeqNumber::new(100));
    b.on_packet_sent(ms(1), ms(1), UdtSeqNumber::new(1100));
    a.on_app_limited(ms(2));
    b.on_packet_sent(ms(2), ms(2), UdtSeqNumber::new(1101));
    assert!(!last_marked(&b), "b still had data");
    b.on_app_limited(ms(3));
    b.on_packet_sent(ms(4), ms(4), UdtSeqNumber::new(1102));
    assert!(last_marked(&b), "both had run out");

    let mut lone = sender(1);
    lone.on_app_limited(ms(2));
    lone.on_packet_sent(ms(3), ms(3), UdtSeqNumber::new(101));
    assert!(last_marked(&lone));
}

/// A full ACK's inputs: the receiver's reading and capacity, packets/s.
fn inputs(pps: u32, cap: u32) -> UdtInputs {
    UdtInputs {
        rtt_us: 0.0,
        rcv_rate_pps: 0,
        bandwidth_pps: 0,
        mss: MSS,
        max_cwnd_pkts: 1e6,
        snd_curr_seq: UdtSeqNumber::new(0),
        ack_rtt_us: 0.0,
        ack_recv_rate_pps: pps,
        ack_bandwidth_pps: cap,
    }
}

/// What a receiver reports before its pairs fill half its filter (1000
/// packets/s, then up to 1798 as they come) is no bound; one packet/s more is
/// a measurement. No reading, no sample.
#[test]
fn an_unmeasured_capacity_is_no_cap() {
    let mss = u64::from(MSS);
    for filling in [1000, 1080, 1798] {
        assert_eq!(
            Reading::of(&inputs(500, filling), mss).unwrap().capacity,
            0.0
        );
    }
    let r = Reading::of(&inputs(500, 1799), mss).unwrap();
    assert_eq!((r.rate, r.capacity), (500.0 * 1500.0, 1799.0 * 1500.0));
    assert!(Reading::of(&inputs(0, 80_000), mss).is_none());
}

/// A group of one is the lone sender: through sends, full ACKs with readings
/// (one below its capacity, one above, so the cap's both sides), light ACKs and
/// a NAK, the two pace and window alike at every step.
#[test]
fn a_group_of_one_runs_as_a_lone_sender() {
    let g = BbrGroup::new(BbrConfig::default(), MSS, 1, Instant::ZERO);
    let mut grouped = BbrUdt::coupled(&g, MSS, UdtSeqNumber::new(99));
    let mut lone = sender(0);
    let mut seq = 100;
    for round in 0..40u64 {
        let t = ms(10 * round);
        for b in [&mut grouped, &mut lone] {
            for i in 0..8 {
                b.on_packet_sent(t, t, UdtSeqNumber::new(seq + i));
            }
            match round % 4 {
                0 => b.on_ack(
                    t + Duration::from_millis(5),
                    UdtSeqNumber::new(seq + 4),
                    &inputs(40_000, 30_000),
                ),
                1 => b.on_ack(
                    t + Duration::from_millis(5),
                    UdtSeqNumber::new(seq + 4),
                    &inputs(20_000, 80_000),
                ),
                2 => b.on_light_ack(t + Duration::from_millis(5), UdtSeqNumber::new(seq + 6)),
                _ => nak(b, 10 * round + 6, &[(seq + 1, seq + 2)]),
            }
        }
        seq += 8;
        assert_eq!(
            grouped.pkt_snd_period_us(),
            lone.pkt_snd_period_us(),
            "round {round}"
        );
        assert_eq!(grouped.cwnd_pkts(), lone.cwnd_pkts(), "round {round}");
    }
}

/// Each member keeps up to [`MIN_WINDOW_PKTS`] packets out whatever its share
/// of the window, so the model's floor is that many per member once there are
/// more than two: an EXP timeout takes the window down to the floor, four
/// packets for a lone sender or two members, eight for four members.
#[test]
fn a_groups_window_floor_is_what_its_members_can_hold() {
    let floor_after_timeout = |members: u32| {
        let g = BbrGroup::new(BbrConfig::default(), MSS, members, Instant::ZERO);
        let mut ends: Vec<BbrUdt> = (0..members)
            .map(|i| BbrUdt::coupled(&g, MSS, UdtSeqNumber::new(100 * i)))
            .collect();
        ends[0].on_timeout(ms(1), &inputs(0, 0));
        let cwnd = lock(&g.model).bbr.cwnd();
        cwnd / u64::from(MSS)
    };
    assert_eq!(floor_after_timeout(2), 4);
    assert_eq!(floor_after_timeout(4), 4 * MIN_WINDOW_PKTS);
    let mut lone = BbrUdt::new(
        BbrConfig::default(),
        MSS,
        Instant::ZERO,
        UdtSeqNumber::new(9),
    );
    lone.on_timeout(ms(1), &inputs(0, 0));
    assert_eq!(lone.read().bbr.cwnd(), 4 * u64::from(MSS));
}

/// Members of a group take turns on one pacing clock: each packet, whichever
/// member sends it, takes the next slot of `mss / rate`, and its sender waits
/// for the slot after. A member that sends nothing takes no slots, so the
/// other sends at the whole rate; two sending alternately get half each. The
/// window is shared between the members with packets outstanding.
#[test]
fn members_share_the_rate_and_the_window() {
    let g = BbrGroup::new(BbrConfig::default(), MSS, 2, Instant::ZERO);
    let mut a = BbrUdt::coupled(&g, MSS, UdtSeqNumber::new(99));
    let mut b = BbrUdt::coupled(&g, MSS, UdtSeqNumber::new(499));
    let gap_ns = (f64::from(MSS) * 1e9 / g.pacing_bytes_per_sec()) as u64;
    let gap_us = gap_ns as f64 / 1000.0;
    let at = |slots: u64| ms(1) + Duration::from_nanos(slots * gap_ns);
    // a alone: one slot's wait after each packet, sent when due.
    a.on_packet_sent(at(0), at(0), UdtSeqNumber::new(100));
    assert!(
        (a.pkt_snd_period_us() - gap_us).abs() < 1e-9,
        "b has nothing out"
    );
    a.on_packet_sent(at(1), at(1), UdtSeqNumber::new(101));
    assert!((a.pkt_snd_period_us() - gap_us).abs() < 1e-9);
    // b sends at the same moment as a's next slot: it takes the slot after,
    // and a's next packet waits behind it.
    b.on_packet_sent(at(2), at(2), UdtSeqNumber::new(500));
    assert!((b.pkt_snd_period_us() - gap_us).abs() < 1e-9);
    a.on_packet_sent(at(2), at(2), UdtSeqNumber::new(102));
    assert!((a.pkt_snd_period_us() - 2.0 * gap_us).abs() < 1e-9);
    // In turns, each waits two slots: half the rate each.
    b.on_packet_sent(at(3), at(3), UdtSeqNumber::new(501));
    assert!((b.pkt_snd_period_us() - 2.0 * gap_us).abs() < 1e-9);
    // An idle group banks no slots: after a pause, one slot's wait again.
    a.on_packet_sent(at(100), at(100), UdtSeqNumber::new(103));
    assert!((a.pkt_snd_period_us() - gap_us).abs() < 1e-9);
    // A sender that woke late: its packet was due at slot 101, it left at 103.
    // The clock books from when it was due, and the wait counts from then, so
    // the engine's payback of the two slots late keeps the group's rate.
    a.on_packet_sent(at(103), at(101), UdtSeqNumber::new(104));
    assert!((a.pkt_snd_period_us() - gap_us).abs() < 1e-9);
    assert_eq!(a.read().next_slot, Some(at(102)));
    // The window: 16 packets a member initially, shared by the members with
    // packets outstanding, plus each one's packets not in flight (none here).
    assert_eq!(a.read().in_flight_pkts, 7);
    let w = |x: &BbrUdt| x.cwnd_pkts();
    assert_eq!(w(&a), 16.0);
    assert_eq!(w(&b), 16.0);
    // a's packets acknowledged: a leaves the sharing, and b's share is the
    // whole window.
    a.on_light_ack(ms(50), UdtSeqNumber::new(105));
    assert_eq!(b.read().in_flight_pkts, 2);
    let whole = lock(&g.model).bbr.cwnd() / u64::from(MSS);
    assert_eq!(w(&b), whole as f64);
}
