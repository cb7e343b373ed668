//! Pair tests: a client and a server over an in-memory link with a fixed delay, a
//! rate limit and a scripted drop rule, run in virtual time.

use super::*;
use crate::testkit;
use longhaul_wire::udt::MAX_SEQ;

fn cfg(socket_id: u32, isn: u32) -> UdtConnConfig {
    UdtConnConfig {
        socket_id,
        isn,
        ..UdtConnConfig::default()
    }
}

/// The server's application: reads everything as it arrives.
#[derive(Default)]
struct Reader {
    received: Vec<u8>,
}

impl testkit::App<UdtConnection> for Reader {
    fn after_flush(&mut self, side: usize, end: &mut UdtConnection, _now: Instant) {
        if side == 0 {
            return;
        }
        let mut tmp = [0u8; 1 << 16];
        loop {
            let n = end.recv(&mut tmp);
            if n == 0 {
                break;
            }
            self.received.extend_from_slice(&tmp[..n]);
        }
    }
}

type Pair = testkit::Pair<UdtConnection, Reader>;

/// A client and a server over a path of 10 ms each way at `rate_mbps` (0: no
/// limit); `drop` is asked about each data packet the client sends, with its count
/// (1 for the first) and its sequence number.
fn pair(
    client: UdtConnConfig,
    server: UdtConnConfig,
    rate_mbps: u64,
    mut drop: impl FnMut(u64, u32) -> bool + 'static,
) -> Pair {
    let mut c = UdtConnection::new(client, Instant::ZERO);
    let mut s = UdtConnection::new(server, Instant::ZERO);
    s.listen();
    c.connect(Instant::ZERO);
    let mut p = Pair::new(
        [c, s],
        Duration::from_millis(10),
        rate_mbps,
        Reader::default(),
    );
    let mut data_sent = 0;
    p.drop = Box::new(move |side, _, b| {
        if side != 0 || b[0] & 0x80 != 0 {
            return false;
        }
        data_sent += 1;
        drop(data_sent, u32::from_be_bytes(b[..4].try_into().unwrap()))
    });
    p
}

/// Every byte both ends sent, the client's first.
fn transcript(p: &Pair) -> Vec<u8> {
    p.sent
        .iter()
        .flatten()
        .flat_map(|s| s.bytes.iter().copied())
        .collect()
}

/// Sends `data` from the client and runs until the server has it all or `limit`.
fn transfer(p: &mut Pair, data: &[u8], limit: Duration) {
    transfer_with(p, data, limit, None);
}

/// As `transfer`, with a coarse clock of `tick` if given.
fn transfer_with(p: &mut Pair, data: &[u8], limit: Duration, tick: Option<Duration>) {
    let mut off = 0;
    let end = Instant::ZERO + limit;
    while p.now < end && p.app.received.len() < data.len() {
        if p.ends[0].state() == State::Connected && off < data.len() {
            off += p.ends[0].send(&data[off..]).unwrap();
        }
        match tick {
            Some(t) => p.step_coarse(t),
            None if p.step() => {}
            None => break,
        }
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

#[test]
fn handshake_then_10_mb_byte_exact_across_the_sequence_wrap() {
    // The client's ISN is 1000 below the wrap; 10 MB is about 7200 packets.
    let mut p = pair(cfg(11, MAX_SEQ - 1000), cfg(22, 5), 1000, |_, _| false);
    let data = pattern(10_000_000);
    transfer(&mut p, &data, Duration::from_secs(60));
    assert_eq!(p.ends[0].state(), State::Connected);
    assert!(
        p.app.received == data,
        "{} of {} bytes, content equal: {}",
        p.app.received.len(),
        data.len(),
        p.app.received[..] == data[..p.app.received.len()]
    );
    assert_eq!(p.ends[0].stats().retransmitted, 0);
    assert!(p.ends[1].stats().acks_sent > 10);
    assert!(p.ends[0].stats().acks_received > 10);
    // RTT from ACK/ACK2: the 20 ms round trip plus the queue the ACK2 waits in behind
    // data on the 1 Gb/s link (this link has no buffer limit).
    let rtt = p.ends[1].rtt_us();
    assert!((20_000.0..60_000.0).contains(&rtt), "{rtt}");
}

#[test]
fn losses_are_naked_and_repaired() {
    let mut p = pair(cfg(11, 77), cfg(22, 5), 200, |n, _| {
        n % 97 == 0 || (300..310).contains(&n)
    });
    let data = pattern(3_000_000);
    transfer(&mut p, &data, Duration::from_secs(60));
    assert!(
        p.app.received == data,
        "{} of {} bytes",
        p.app.received.len(),
        data.len()
    );
    assert!(p.ends[1].stats().naks_sent >= 20, "{:?}", p.ends[1].stats());
    assert!(
        p.ends[0].stats().retransmitted >= 30,
        "{:?}",
        p.ends[0].stats()
    );
}

/// A block given as `Bytes` goes out as slices of itself, losses repaired from
/// them, and the writer gets the block back (unique again) once the last of its
/// packets is acknowledged, not before.
#[test]
fn a_shared_block_arrives_and_comes_back_once_acknowledged() {
    let mut p = pair(cfg(11, 77), cfg(22, 5), 200, |n, _| n % 50 == 0);
    let data = pattern(2_000_000);
    let block = bytes::Bytes::from(data.clone());
    let end = Instant::ZERO + Duration::from_secs(60);
    let mut off = 0;
    let mut was_shared = false;
    while p.now < end && p.app.received.len() < data.len() {
        if p.ends[0].state() == State::Connected && off < data.len() {
            off += p.ends[0].send_shared(&block.slice(off..)).unwrap();
        }
        was_shared |= !block.is_unique();
        if !p.step() {
            break;
        }
    }
    assert!(
        p.app.received == data,
        "{} of {} bytes",
        p.app.received.len(),
        data.len()
    );
    assert!(was_shared, "the send buffer held slices of the block");
    assert!(
        p.ends[0].stats().retransmitted >= 20,
        "{:?}",
        p.ends[0].stats()
    );
    // Run until the last ACK reaches the sender.
    while p.ends[0].unacked_pkts() > 0 && p.now < end && p.step() {}
    assert_eq!(p.ends[0].unacked_pkts(), 0);
    assert!(
        block.is_unique(),
        "acknowledged packets let go of the block"
    );
}

/// The receiving application reads as datagrams arrive, into a buffer smaller
/// than a packet: in-order bytes go straight into it, the rest through `recv`,
/// which it calls only before every third datagram (so bytes are often waiting
/// there when the next come, and must not be overtaken).
#[derive(Default)]
struct DirectReader {
    received: Vec<u8>,
    direct: usize,
    datagrams: u64,
}

impl testkit::App<UdtConnection> for DirectReader {
    fn after_flush(&mut self, _side: usize, _end: &mut UdtConnection, _now: Instant) {}

    fn deliver(
        &mut self,
        side: usize,
        end: &mut UdtConnection,
        now: Instant,
        b: &[u8],
        len: usize,
    ) {
        if side == 0 {
            return end.handle_datagram(now, b, len);
        }
        let mut tmp = [0u8; 700];
        self.datagrams += 1;
        while self.datagrams.is_multiple_of(3) {
            let n = end.recv(&mut tmp);
            if n == 0 {
                break;
            }
            self.received.extend_from_slice(&tmp[..n]);
        }
        let mut reader = Direct::new(&mut tmp);
        end.handle_datagram_reading(now, b, len, &mut reader);
        let n = reader.filled();
        self.direct += n;
        self.received.extend_from_slice(&tmp[..n]);
    }
}

#[test]
fn bytes_read_as_they_arrive_keep_their_order_across_losses() {
    let mut c = UdtConnection::new(cfg(11, 77), Instant::ZERO);
    let mut s = UdtConnection::new(cfg(22, 5), Instant::ZERO);
    s.listen();
    c.connect(Instant::ZERO);
    let mut p = testkit::Pair::new(
        [c, s],
        Duration::from_millis(10),
        200,
        DirectReader::default(),
    );
    let mut n = 0;
    p.drop = Box::new(move |side, _, b| {
        n += u64::from(side == 0 && b[0] & 0x80 == 0);
        side == 0 && b[0] & 0x80 == 0 && n % 37 == 0
    });
    let data = pattern(2_000_000);
    let mut off = 0;
    while p.now < Instant::ZERO + Duration::from_secs(60) && p.app.received.len() < data.len() {
        if p.ends[0].state() == State::Connected && off < data.len() {
            off += p.ends[0].send(&data[off..]).unwrap();
        }
        if !p.step() {
            break;
        }
        if p.ends[1].readable_len() > 0 && p.in_flight() == 0 {
            // The last bytes, with no datagram left to bring them.
            let mut tmp = vec![0u8; 1 << 16];
            let k = p.ends[1].recv(&mut tmp);
            p.app.received.extend_from_slice(&tmp[..k]);
        }
    }
    assert!(
        p.app.received == data,
        "{} of {} bytes",
        p.app.received.len(),
        data.len()
    );
    assert!(
        p.ends[0].stats().retransmitted >= 30,
        "{:?}",
        p.ends[0].stats()
    );
    // At most 700 bytes of each datagram that brings in-order data (of 1456),
    // none while bytes wait in the connection, and none of the packets that wait
    // behind a gap (about 340 per loss here, a round trip's worth) but the first
    // when it closes. Reading nothing directly, or more than room for, fails.
    assert!(
        (100_000..962_000).contains(&p.app.direct),
        "{} bytes read directly",
        p.app.direct
    );
}

#[test]
fn same_inputs_same_bytes() {
    let run = || {
        let mut p = pair(cfg(11, 123), cfg(22, 5), 100, |n, _| n % 50 == 0);
        transfer(&mut p, &pattern(500_000), Duration::from_secs(30));
        transcript(&p)
    };
    let (a, b) = (run(), run());
    assert!(a.len() > 500_000);
    assert!(a == b);
}

#[test]
fn a_silent_peer_breaks_the_connection() {
    let mut p = pair(cfg(11, 1), cfg(22, 5), 100, |_, _| false);
    transfer(&mut p, &pattern(10_000), Duration::from_secs(5));
    assert_eq!(p.app.received.len(), 10_000);
    // The server vanishes: the client's EXP timer fires until it gives up.
    let mut buf = [0u8; 1500];
    let _ = p.ends[0].send(&pattern(100_000)).unwrap();
    let mut now = p.now;
    let mut events = vec![];
    for _ in 0..10_000 {
        while p.ends[0].poll_transmit(now, &mut buf).is_some() {}
        while let Some(e) = p.ends[0].poll_event() {
            events.push(e);
        }
        let Some(t) = p.ends[0].poll_timeout() else {
            break;
        };
        now = t;
        p.ends[0].handle_timeout(now);
    }
    assert!(events.contains(&Event::Broken), "{events:?}");
    assert_eq!(p.ends[0].state(), State::Closed);
    assert!(p.ends[0].stats().exp_timeouts > 16);
    // 4.11 restarts the interval at each expiry and the k-th is k x 0.3 s long
    // (RTT + 4 RTTVar + SYN is shorter here), so 17 of them take 0.3 x (1 + ... + 17)
    // = 45.9 s; intervals that did not grow would give up after 5.1 s.
    let waited = now.saturating_duration_since(p.now);
    assert!(
        waited > Duration::from_millis(45_000) && waited < Duration::from_secs(50),
        "{waited:?}"
    );
}

#[test]
fn garbage_and_strangers_are_counted() {
    let mut c = UdtConnection::new(cfg(11, 1), Instant::ZERO);
    c.connect(Instant::ZERO);
    c.handle_datagram(Instant::ZERO, &[1, 2, 3], 3);
    c.handle_datagram(Instant::ZERO, &[0u8; 40], 40); // a data packet before connecting
    assert_eq!(c.stats().bad_datagrams, 2);
    assert_eq!(c.state(), State::Connecting);
}

#[test]
fn handshake_gives_up_after_three_seconds() {
    let mut c = UdtConnection::new(cfg(11, 1), Instant::ZERO);
    c.connect(Instant::ZERO);
    let mut buf = [0u8; 1500];
    let mut sent = 0;
    let mut now = Instant::ZERO;
    while let Some(t) = c.poll_timeout() {
        while c.poll_transmit(now, &mut buf).is_some() {
            sent += 1;
        }
        now = t;
        c.handle_timeout(now);
    }
    assert_eq!(c.poll_event(), Some(Event::ConnectFailed));
    assert_eq!(sent, 12, "a request every 250 ms for 3 s");
}

/// A retransmission lost again: UDT4 4.11 reports a loss once and leaves the rest to
/// the sender's EXP timer (go-back-N after >= 300 ms of silence); the draft's periodic
/// NAK reports it again after 2 RTT, with no EXP.
#[test]
fn periodic_nak_repairs_a_lost_retransmission_without_exp() {
    let run = |report: NakReport| {
        let mut server = cfg(22, 5);
        server.nak_report = report;
        let mut copies = 0;
        let mut p = pair(cfg(11, 1000), server, 200, move |_, seq| {
            if seq == 1300 {
                copies += 1;
                return copies <= 2;
            }
            false
        });
        let data = pattern(3_000_000);
        transfer(&mut p, &data, Duration::from_secs(30));
        assert!(
            p.app.received == data,
            "{report:?}: {} bytes",
            p.app.received.len()
        );
        (*p.ends[0].stats(), *p.ends[1].stats(), p.now)
    };
    let (once_c, _, once_t) = run(NakReport::Once);
    let (per_c, per_s, per_t) = run(NakReport::Periodic);
    assert!(once_c.exp_timeouts >= 1, "{once_c:?}");
    assert_eq!(per_c.exp_timeouts, 0, "{per_c:?}");
    assert!(per_s.naks_sent >= 2, "{per_s:?}");
    assert!(per_t < once_t, "periodic {per_t:?}, once {once_t:?}");
}

#[test]
fn a_long_loss_list_is_split_to_fit_the_buffer() {
    let s = UdtSeqNumber::new;
    let mut ranges = vec![(s(1), s(1)), (s(3), s(9)), (s(20), s(20)), (s(30), s(40))];
    // 1 + 2 words fit, and one more: the single 20.
    let rest = split_loss_list(&mut ranges, 4);
    assert_eq!(ranges, vec![(s(1), s(1)), (s(3), s(9)), (s(20), s(20))]);
    assert_eq!(rest, vec![(s(30), s(40))]);
    // One word left before a range: its first number goes alone.
    let mut ranges = vec![(s(1), s(1)), (s(3), s(9))];
    let rest = split_loss_list(&mut ranges, 2);
    assert_eq!(ranges, vec![(s(1), s(1)), (s(3), s(3))]);
    assert_eq!(rest, vec![(s(4), s(9))]);
    let mut ranges = vec![(s(1), s(2))];
    assert!(split_loss_list(&mut ranges, 2).is_empty());
}

/// A driver that wakes only once per millisecond still sends at the controller's
/// rate: time a packet leaves late is paid back by sending the next ones at once
/// (4.11's NO_BUSY_WAITING schedule). Without it the sender would manage one packet
/// per wake-up, 1000 packets (1.5 MB) a second.
#[test]
fn a_coarse_driver_keeps_the_rate() {
    let data = pattern(6_000_000);
    let mut fine = pair(cfg(11, 3), cfg(22, 5), 200, |_, _| false);
    transfer(&mut fine, &data, Duration::from_secs(30));
    let mut coarse = pair(cfg(11, 3), cfg(22, 5), 200, |_, _| false);
    transfer_with(
        &mut coarse,
        &data,
        Duration::from_secs(30),
        Some(Duration::from_millis(1)),
    );
    assert!(
        coarse.app.received == data,
        "{} bytes",
        coarse.app.received.len()
    );
    let (f, c) = (fine.now.as_secs_f64(), coarse.now.as_secs_f64());
    assert!(c < f * 1.5 && c < 2.0, "coarse {c:.3} s, exact {f:.3} s");
}

#[test]
fn max_bw_caps_the_sending_rate() {
    // A 1 Gb/s path; the sender is capped at 100 Mb/s (UDT_MAXBW). 6 MB at 100 Mb/s
    // (counting whole 1500-byte packets) is about 0.50 s; without the cap it is far
    // less. Packet pairs (every 16th packet goes at once) let the cap be exceeded by
    // 1/16 at most.
    let data = pattern(6_000_000);
    let mut capped = cfg(11, 3);
    capped.max_bw_bps = Some(100_000_000);
    let mut p = pair(capped, cfg(22, 5), 1000, |_, _| false);
    transfer(&mut p, &data, Duration::from_secs(30));
    assert!(p.app.received == data);
    let pkts = p.ends[0].stats().data_sent as f64;
    let rate = pkts * 1500.0 * 8.0 / p.now.as_secs_f64();
    assert!(rate < 100e6 * 17.0 / 16.0 && rate > 80e6, "{rate:.0} b/s");
    let mut free = pair(cfg(11, 3), cfg(22, 5), 1000, |_, _| false);
    transfer(&mut free, &data, Duration::from_secs(30));
    assert!(
        free.now.as_secs_f64() < p.now.as_secs_f64() * 0.5,
        "{:?} vs {:?}",
        free.now,
        p.now
    );
}

/// A handshake whose MSS is below UDT4's floor (76: a handshake must fit), or whose
/// flight flag size is 0, is refused and counted, whichever side gets it. Taken, an
/// MSS of 0 made the payload size wrap and the next data packet overran the buffer
/// (`damaged_datagrams_never_panic` found it); a flight flag size of 0 stalled the
/// connection silently.
#[test]
fn a_handshake_with_impossible_terms_is_refused() {
    // Content word 3 (offset 28) is the MSS, word 4 (offset 32) the flight flag size.
    for ((at, value), to_server) in [(28, 40u32), (32, 0)]
        .into_iter()
        .flat_map(|term| [(term, true), (term, false)])
    {
        let mut p = pair(cfg(11, 1), cfg(22, 5), 100, |_, _| false);
        p.mangle = Box::new(move |b: &mut Vec<u8>| {
            // Control type 0 is a handshake. The client's requests are 16 + 48 bytes, as are the server's answers:
            // tell them apart by the socket ID word (offset 40), the sender's.
            let from_client = b.get(40..44) == Some(&11u32.to_be_bytes()[..]);
            if b.len() >= 32 && b[0] == 0x80 && b[1] == 0 && from_client == to_server {
                b[at..at + 4].copy_from_slice(&value.to_be_bytes());
            }
        });
        transfer(&mut p, &pattern(10_000), Duration::from_secs(5));
        let case = format!("word at {at} = {value}, to_server {to_server}");
        assert!(p.app.received.is_empty(), "{case}");
        assert_ne!(p.ends[0].state(), State::Connected, "{case}");
        let refused = if to_server { &p.ends[1] } else { &p.ends[0] };
        assert!(refused.stats().bad_datagrams > 0, "{case}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(256))]

    /// Datagrams damaged on the way (bytes flipped anywhere, control packets included,
    /// or cut short), as a hostile or broken peer could send them: the engines never
    /// panic, and the run ends (the loop is bounded by virtual time).
    #[test]
    fn damaged_datagrams_never_panic(
        seed in proptest::prelude::any::<u64>(),
        rate in 1u64..40,
        ar_udt in proptest::prelude::any::<bool>(),
        periodic_nak in proptest::prelude::any::<bool>(),
    ) {
        // Both rate controls and both ways of reporting loss: each has its own
        // handling of the fields a damaged ACK or NAK carries.
        let with = |c: UdtConnConfig| UdtConnConfig {
            rate_control: match c.rate_control {
                RateControl::Udt(u) if ar_udt => {
                    RateControl::ArUdt(u, crate::cc::ArUdtConfig::default())
                }
                other => other,
            },
            nak_report: if periodic_nak { NakReport::Periodic } else { NakReport::Once },
            ..c
        };
        let mut p = pair(
            with(cfg(11, MAX_SEQ - 50)),
            with(cfg(22, 5)),
            100,
            |_, _| false,
        );
        p.mangle = testkit::damage(seed, rate);
        transfer(&mut p, &pattern(200_000), Duration::from_secs(30));
    }
}

/// Reordering on the path (every 7th datagram the client sends 3 ms late): the
/// bytes arrive exact.
#[test]
fn reordered_packets_are_delivered_in_order() {
    let mut p = pair(cfg(11, 40), cfg(22, 5), 200, |_, _| false);
    p.extra_delay = Box::new(|side, i, _| {
        if side == 0 && i % 7 == 0 {
            Duration::from_millis(3)
        } else {
            Duration::ZERO
        }
    });
    let data = pattern(2_000_000);
    transfer(&mut p, &data, Duration::from_secs(30));
    assert!(p.app.received == data, "{} bytes", p.app.received.len());
    // The receiver saw gaps the late packets then filled: it reported them.
    assert!(p.ends[1].stats().naks_sent > 0, "{:?}", p.ends[1].stats());
}

/// `unsent_pkts` counts what was written and never sent: all of a write before the
/// first packet leaves, fewer as the rate control sends, none once all went out
/// (acknowledged or not), while `unacked_pkts` still holds those in flight.
#[test]
fn unsent_packets_fall_as_the_sender_sends() {
    let mut p = pair(cfg(1, 100), cfg(2, 200), 50, |_, _| false);
    while p.ends[0].state() != State::Connected {
        assert!(p.step());
    }
    let payload = p.ends[0].payload_size();
    let data = pattern(200 * payload);
    let n = p.ends[0].send(&data).unwrap();
    assert_eq!(n, data.len());
    assert_eq!(p.ends[0].unsent_pkts(), 200);
    let mut last = 200;
    let mut fell = false;
    while p.app.received.len() < data.len() {
        assert!(p.step());
        let u = p.ends[0].unsent_pkts();
        assert!(u <= last, "unsent grew from {last} to {u}");
        fell |= u < last && u > 0;
        assert!(p.ends[0].unacked_pkts() >= u);
        last = u;
    }
    assert!(fell, "the count fell in steps");
    assert_eq!(p.ends[0].unsent_pkts(), 0);
}

/// A client and a server running `bbr`, connecting over `delay` each way at
/// `rate_mbps`, the client with a send buffer of `snd_buf_pkts`.
fn bbr_pair(bbr: crate::cc::BbrConfig, delay: Duration, rate_mbps: u64, snd_buf_pkts: u32) -> Pair {
    let cfg = |socket_id, isn| UdtConnConfig {
        socket_id,
        isn,
        snd_buf_pkts,
        rate_control: RateControl::Bbr(bbr),
        ..UdtConnConfig::default()
    };
    let mut c = UdtConnection::new(cfg(11, 5), Instant::ZERO);
    let mut s = UdtConnection::new(cfg(22, 7), Instant::ZERO);
    s.listen();
    c.connect(Instant::ZERO);
    Pair::new([c, s], delay, rate_mbps, Reader::default())
}

/// A BBR sender whose application was slow must not take the application's pace
/// for the path's. Over 100 Mb/s × 5 ms each way, the application gives one
/// packet every 100 ms for 2 s, then all it can; over the next 2-4 s each of
/// Linux's v1, v3 and `bbr-lh` must carry at least 80 % of the link (each
/// carries 98.9 Mb/s). Before the engine told the controller it was
/// application-limited, each read the receiver's 10 packets/s as the path, and
/// sent about one packet per EXP timeout from then on (0.0 Mb/s).
#[test]
fn a_bbr_sender_climbs_back_after_a_slow_application() {
    use crate::cc::BbrConfig;
    for (name, bbr) in [
        ("bbr", BbrConfig::default()),
        ("bbr-v3", BbrConfig::v3_loss()),
        ("bbr-lh", BbrConfig::lh()),
    ] {
        let buf = UdtConnConfig::default().snd_buf_pkts;
        let mut p = bbr_pair(bbr, Duration::from_millis(5), 100, buf);
        let packet = vec![7u8; 1400];
        let at = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        let mut next_write = Instant::ZERO;
        let mut from = None;
        while p.now < at(6000) {
            if p.ends[0].state() == State::Connected {
                if p.now < at(2000) {
                    if p.now >= next_write {
                        assert_eq!(p.ends[0].send(&packet), Ok(packet.len()));
                        next_write = p.now + Duration::from_millis(100);
                    }
                } else {
                    while p.ends[0].send(&packet).unwrap_or(0) > 0 {}
                }
            }
            if from.is_none() && p.now >= at(4000) {
                from = Some(p.app.received.len());
            }
            p.step_coarse(Duration::from_micros(100));
        }
        let mbps = (p.app.received.len() - from.unwrap()) as f64 * 8.0 / 2.0 / 1e6;
        eprintln!("{name}: {mbps:.1} Mb/s from 4 to 6 s");
        assert!(mbps >= 80.0, "{name}: {mbps:.1} Mb/s from 4 to 6 s, not 80");
    }
}

/// The sender is application-limited when it has sent all it was given with
/// room in its window and buffer, not when a full send buffer holds it back:
/// a bulk sender whose 32-packet buffer is under the path's 83-packet BDP
/// (100 Mb/s × 5 ms each way) is limited by the buffer, as by a receive window,
/// for all of its first second. Once the application stops writing, it is told.
#[test]
fn a_full_send_buffer_is_not_application_limited() {
    let mut p = bbr_pair(
        crate::cc::BbrConfig::lh(),
        Duration::from_millis(5),
        100,
        32,
    );
    let packet = vec![7u8; 1400];
    let second = Instant::ZERO + Duration::from_secs(1);
    while p.now < second {
        if p.ends[0].state() == State::Connected {
            while p.ends[0].send(&packet).unwrap_or(0) > 0 {}
        }
        p.step_coarse(Duration::from_micros(100));
        assert!(!p.ends[0].app_limited_told, "at {:?}", p.now);
    }
    assert!(p.app.received.len() > 1_000_000, "{}", p.app.received.len());
    p.run(second + Duration::from_millis(100));
    assert!(p.ends[0].app_limited_told);
}

/// On a path whose BDP is a few packets, a BBR sender's estimate must climb back
/// after a slow spell. Over 1 Gb/s × 50 µs each way (a LAN, or loopback), the
/// link runs at 5 Mb/s from 2 to 4 s, as when the sender's host is starved or
/// cross traffic takes it, and the estimate falls with the receiver's readings.
/// From 6 to 8 s v1 and `bbr-lh` must carry at least 80 % of what they did in
/// their first 2 s (each carries 540 Mb/s in both). Before ProbeBW's probing
/// phase lasted until a reading had seen it (`Bbr::set_probe_span_pkts`), a
/// phase one min RTT long was one or two packets, which the receiver's 16-packet
/// reading did not see: v1 stayed at 6 Mb/s and `bbr-lh` at 4.9.
#[test]
fn a_bbr_sender_climbs_back_after_a_slow_spell_on_a_short_path() {
    use crate::cc::BbrConfig;
    for (name, bbr) in [("bbr", BbrConfig::default()), ("bbr-lh", BbrConfig::lh())] {
        let buf = UdtConnConfig::default().snd_buf_pkts;
        let mut p = bbr_pair(bbr, Duration::from_micros(50), 1000, buf);
        let fast = p.paths[0].ns_per_byte;
        let packet = vec![7u8; 1400];
        let at = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        let mut marks = vec![];
        while p.now < at(8000) {
            let slow = p.now >= at(2000) && p.now < at(4000);
            p.paths[0].ns_per_byte = if slow { 200 * fast } else { fast };
            if p.ends[0].state() == State::Connected {
                while p.ends[0].send(&packet).unwrap_or(0) > 0 {}
            }
            if [at(2000), at(6000)].contains(&p.now) {
                marks.push(p.app.received.len());
            }
            p.step_coarse(Duration::from_micros(20));
        }
        let mbps = |bytes: usize| bytes as f64 * 8.0 / 2.0 / 1e6;
        let (before, after) = (mbps(marks[0]), mbps(p.app.received.len() - marks[1]));
        eprintln!("{name}: {before:.1} Mb/s before the slow spell, {after:.1} from 6 to 8 s");
        assert!(
            after >= 0.8 * before,
            "{name}: {after:.1} Mb/s from 6 to 8 s, {before:.1} before the slow spell"
        );
    }
}
