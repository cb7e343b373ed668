use super::*;
use crate::testkit;

/// SplitMix64's next word from `state` (the tests' own draws).
fn splitmix(state: &mut u64) -> u64 {
    let v = SplitMix64::seed_from_u64(*state).next_u64();
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    v
}

use longhaul_wire::sctp::{DupTsns, GapBlocks, PacketBuilder, SackRepr, SctpPacket, SctpRepr};
use longhaul_wire::{IpProtocol, Ipv4Repr};

const A: Ipv4Address = Ipv4Address([10, 0, 0, 1]);
const Z: Ipv4Address = Ipv4Address([10, 0, 0, 2]);

/// The applications: each end reads every message as it arrives.
#[derive(Default)]
struct Readers {
    received: [Vec<Message>; 2],
}

impl testkit::App<SctpAssociation> for Readers {
    fn after_flush(&mut self, side: usize, end: &mut SctpAssociation, _now: Instant) {
        while let Some(m) = end.recv() {
            self.received[side].push(m);
        }
    }
}

type Net = testkit::Pair<SctpAssociation, Readers>;

/// Two associations, A (`ends[0]`) and Z, over a path of `one_way_ms` each way.
fn net(cfg: SctpConfig, one_way_ms: u64) -> Net {
    let a = SctpAssociation::new(cfg, (A, 5000), (Z, 6000), 1);
    let z = SctpAssociation::new(cfg, (Z, 6000), (A, 5000), 2);
    Net::new(
        [a, z],
        crate::Duration::from_millis(one_way_ms),
        0,
        Readers::default(),
    )
}

/// Z listens, A connects.
fn open(net: &mut Net) {
    net.ends[1].listen().unwrap();
    net.ends[0].connect(net.now).unwrap();
}

/// The same serialisation time per byte both ways.
fn set_ns_per_byte(net: &mut Net, ns: u64) {
    for p in &mut net.paths {
        p.ns_per_byte = ns;
    }
}

fn chunks_of(pkt: &[u8]) -> Vec<ChunkRepr<'_>> {
    sctp::Chunks::new(&pkt[20 + sctp::HEADER_LEN..])
        .map(|c| c.unwrap())
        .collect()
}

/// The chunk types of each packet, in order.
fn chunk_kinds(pkts: &[testkit::Sent]) -> Vec<Vec<u8>> {
    pkts.iter()
        .map(|p| chunks_of(&p.bytes).iter().map(|c| c.kind()).collect())
        .collect()
}

fn data_lens(pkt: &[u8]) -> Vec<usize> {
    let p = SctpPacket::new_checked(&pkt[20..]).unwrap();
    p.chunks()
        .filter_map(|c| match c.unwrap() {
            ChunkRepr::Data { data, .. } => Some(data.len()),
            _ => None,
        })
        .collect()
}

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

#[test]
fn setup_takes_two_round_trips_and_data_rides_on_the_cookie_echo() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    open(&mut net);
    net.ends[0].send(0, 0, false, &[1; 100]).unwrap();
    net.run(ms(1000));
    // INIT, then COOKIE-ECHO with the DATA bundled after it.
    let kinds = chunk_kinds(&net.sent[0]);
    assert_eq!(kinds[0], vec![sctp::chunk_type::INIT]);
    assert_eq!(
        kinds[1],
        vec![sctp::chunk_type::COOKIE_ECHO, sctp::chunk_type::DATA]
    );
    // The server is up when the cookie arrives (1.5 RTT), the client at 2 RTT.
    assert_eq!(net.events[1][0], (ms(30), Event::Connected));
    assert_eq!(net.events[0][0], (ms(40), Event::Connected));
    assert_eq!(net.ends[1].data_arrivals(), Some((ms(30), ms(30))));
    assert_eq!(net.app.received[1][0].data, vec![1; 100]);
}

#[test]
fn a_1460_byte_message_is_cut_into_1452_and_8_and_small_chunks_are_bundled() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    open(&mut net);
    net.run(ms(100));
    net.ends[0].send(0, 0, false, &[7; 1460]).unwrap();
    for i in 0..5u8 {
        net.ends[0].send(1, 0, false, &[i; 100]).unwrap();
    }
    net.run(ms(1000));
    let data: Vec<(usize, Vec<usize>)> = net.sent[0][2..]
        .iter()
        .map(|p| (p.bytes.len(), data_lens(&p.bytes)))
        .filter(|(_, d)| !d.is_empty())
        .collect();
    // 20 (IPv4) + 12 (common header) + 16 (DATA header) + 1452 = 1500.
    assert_eq!(data[0], (1500, vec![1452]));
    // The 8-byte tail and the five small messages share one packet:
    // 32 + (16 + 8) + 5 * pad4(16 + 100).
    assert_eq!(
        data[1],
        (32 + 24 + 5 * 116, vec![8, 100, 100, 100, 100, 100])
    );
    assert_eq!(net.app.received[1].len(), 6);
    assert_eq!(net.app.received[1][0].data.len(), 1460);
}

#[test]
fn the_initial_window_carries_three_1460_byte_messages_in_the_rfc4960_profile() {
    for (cfg, first_round) in [
        (SctpConfig::LINUX_2_6_15, 4380),
        // RFC 9260 counts chunk headers and padding: 4404 bytes of window hold
        // 1468 + 24 + 1468 + 24 + 1468 = 4452 >= 4404 after three 1452-byte pieces
        // and two tails.
        (SctpConfig::RFC9260, 1452 * 3 + 16),
    ] {
        let mut net = net(cfg, 10);
        open(&mut net);
        net.run(ms(100));
        for _ in 0..20 {
            net.ends[0].send(0, 0, false, &[0; 1460]).unwrap();
        }
        net.run(ms(10_000));
        assert_eq!(net.ends[0].round_bytes()[0], first_round, "{:?}", cfg.cc);
        assert_eq!(net.ends[1].stats().delivered_bytes, 20 * 1460);
    }
}

#[test]
fn the_round_log_stops_after_its_last_round() {
    // One message at a time, each acknowledged (after the delayed-SACK timer) before
    // the next is sent: each opens a round, and there are more of them than rounds
    // are booked.
    let mut net = net(SctpConfig::RFC9260, 10);
    open(&mut net);
    net.run(ms(100));
    let messages = crate::ROUND_LOG_ROUNDS as usize + 40;
    for _ in 0..messages {
        net.ends[0].send(0, 0, false, &[7; 100]).unwrap();
        net.run(net.now + crate::Duration::from_millis(300));
    }
    let rounds = net.ends[0].round_bytes();
    assert_eq!(rounds.len(), crate::ROUND_LOG_ROUNDS as usize);
    assert!(rounds.iter().all(|&b| b == 100), "{rounds:?}");
    assert_eq!(net.ends[1].stats().delivered_bytes, 100 * messages as u64);
}

#[test]
fn a_loss_on_one_stream_does_not_delay_another() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    open(&mut net);
    net.run(ms(100));
    // Drop the first data packet the client sends after setup: stream 1's message.
    let data_pkts = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = data_pkts.clone();
    net.drop = Box::new(move |side, _, pkt| {
        if side == 0 && !data_lens(pkt).is_empty() {
            seen.set(seen.get() + 1);
            return seen.get() == 1;
        }
        false
    });
    net.ends[0].send(1, 0, false, &[1; 1000]).unwrap();
    net.ends[0].send(2, 0, false, &[2; 1000]).unwrap();
    net.ends[0].send(2, 0, false, &[3; 1000]).unwrap();
    net.run(ms(10_000));
    let order: Vec<(u16, u8)> = net.app.received[1]
        .iter()
        .map(|m| (m.stream, m.data[0]))
        .collect();
    assert_eq!(
        order,
        vec![(2, 2), (2, 3), (1, 1)],
        "stream 2 first, stream 1 after repair"
    );
    assert!(net.ends[0].stats().retransmits >= 1);
}

#[test]
fn unordered_messages_skip_the_stream_order() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    open(&mut net);
    net.run(ms(100));
    let first = std::rc::Rc::new(std::cell::Cell::new(true));
    let f = first.clone();
    net.drop = Box::new(move |side, _, pkt| {
        if side == 0 && !data_lens(pkt).is_empty() && f.get() {
            f.set(false);
            return true;
        }
        false
    });
    net.ends[0].send(0, 0, false, &[1; 1000]).unwrap();
    net.ends[0].send(0, 0, true, &[2; 1000]).unwrap();
    net.run(ms(10_000));
    let order: Vec<(bool, u8)> = net.app.received[1]
        .iter()
        .map(|m| (m.unordered, m.data[0]))
        .collect();
    assert_eq!(order, vec![(true, 2), (false, 1)]);
}

#[test]
fn fast_retransmit_fires_on_the_third_miss_indication() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    // A slow line, so SACKs come one packet apart.
    set_ns_per_byte(&mut net, 800); // 10 Mb/s
    open(&mut net);
    net.run(ms(100));
    let dropped_tsn = std::rc::Rc::new(std::cell::Cell::new(None));
    let d = dropped_tsn.clone();
    net.drop = Box::new(move |side, _, pkt| {
        if side != 0 || d.get().is_some() {
            return false;
        }
        let p = SctpPacket::new_checked(&pkt[20..]).unwrap();
        for c in p.chunks() {
            if let Ok(ChunkRepr::Data { tsn, .. }) = c {
                d.set(Some(tsn));
                return true;
            }
        }
        false
    });
    for _ in 0..40 {
        net.ends[0].send(0, 0, false, &[9; 1452]).unwrap();
    }
    net.run(ms(10_000));
    let tsn = dropped_tsn.get().unwrap();
    // Find the SACKs the receiver sent that report `tsn` missing, and the moment
    // the sender resent it.
    let st = net.ends[0].stats();
    assert_eq!(st.fast_retransmits, 1);
    assert_eq!(st.t3_expiries, 0, "repaired without a timeout");
    let resent_after = net.sent[0]
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            chunks_of(&p.bytes)
                .iter()
                .any(|c| matches!(c, ChunkRepr::Data { tsn: t, .. } if *t == tsn))
        })
        .map(|(i, _)| i)
        .collect::<Vec<_>>();
    assert_eq!(
        resent_after.len(),
        2,
        "sent once and fast-retransmitted once"
    );
    // Every packet after the loss is SACKed at once (a gap exists); the third SACK
    // reporting the gap is the third miss indication. Count the SACKs with a gap the
    // receiver had sent before the retransmission left.
    let gap_sacks = net.sent[1]
        .iter()
        .filter(|p| {
            chunks_of(&p.bytes)
                .iter()
                .any(|c| matches!(c, ChunkRepr::Sack(s) if !s.gap_blocks.is_empty()))
        })
        .count();
    assert!(gap_sacks >= 3, "{gap_sacks}");
    assert_eq!(net.app.received[1].len(), 40);
}

#[test]
fn transfers_complete_byte_exact_under_random_loss() {
    for seed in 1..=4u64 {
        let mut net = net(SctpConfig::RFC9260, 5);
        set_ns_per_byte(&mut net, 80); // 100 Mb/s
        let mut rng = seed;
        net.drop = Box::new(move |_, _, _| splitmix(&mut rng) % 100 < 5);
        open(&mut net);
        let mut state = seed * 77;
        let mut sent: Vec<Vec<Vec<u8>>> = vec![vec![]; 3];
        for i in 0..300 {
            let len = 1 + (splitmix(&mut state) % 4000) as usize;
            let msg: Vec<u8> = (0..len).map(|_| splitmix(&mut state) as u8).collect();
            let stream = (i % 3) as u16;
            net.ends[0].send(stream, 0, false, &msg).unwrap();
            sent[usize::from(stream)].push(msg);
        }
        net.ends[0].shutdown().unwrap();
        net.run(Instant::from_nanos(600 * 1_000_000_000));
        let mut got: Vec<Vec<Vec<u8>>> = vec![vec![]; 3];
        for m in &net.app.received[1] {
            got[usize::from(m.stream)].push(m.data.clone());
        }
        assert_eq!(
            got, sent,
            "seed {seed}: every stream in order, byte for byte"
        );
        let st = net.ends[0].stats();
        assert!(st.retransmits > 0 && st.fast_retransmits > 0, "{st:?}");
        for side in 0..2 {
            assert!(
                net.events[side].iter().any(|e| e.1 == Event::Closed),
                "seed {seed}: side {side} shut down gracefully: {:?}",
                net.events[side]
            );
        }
    }
}

#[test]
fn graceful_shutdown_completes_on_both_sides() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    open(&mut net);
    net.ends[0].send(0, 0, false, &[5; 3000]).unwrap();
    net.ends[0].shutdown().unwrap();
    net.run(ms(10_000));
    let kinds: Vec<u8> = chunk_kinds(&net.sent[0])
        .into_iter()
        .chain(chunk_kinds(&net.sent[1]))
        .flatten()
        .collect();
    for k in [
        sctp::chunk_type::SHUTDOWN,
        sctp::chunk_type::SHUTDOWN_ACK,
        sctp::chunk_type::SHUTDOWN_COMPLETE,
    ] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    assert!(net.events[0].iter().any(|e| e.1 == Event::Closed));
    assert!(net.events[1].iter().any(|e| e.1 == Event::Closed));
    assert_eq!(net.app.received[1][0].data.len(), 3000);
    assert_eq!(
        net.ends[0].send(0, 0, false, &[1]),
        Err(SctpError::InvalidState)
    );
}

#[test]
fn a_forged_cookie_creates_nothing() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    open(&mut net);
    // Flip one bit of the cookie in the COOKIE-ECHO on its way (and fix the
    // checksum).
    let tampered = std::rc::Rc::new(std::cell::Cell::new(false));
    let t = tampered.clone();
    net.mangle = Box::new(move |pkt: &mut Vec<u8>| {
        let is_echo = SctpPacket::new_checked(&pkt[20..])
            .is_ok_and(|p| matches!(p.chunks().next(), Some(Ok(ChunkRepr::CookieEcho { .. }))));
        if is_echo {
            pkt[20 + 12 + 4 + 3] ^= 1;
            SctpPacket::new_unchecked(&mut pkt[20..]).fill_checksum();
            t.set(true);
        }
    });
    net.run(ms(35));
    assert!(tampered.get());
    assert_eq!(net.ends[1].state(), State::Listen);
    assert_eq!(net.ends[1].stats().bad_packets, 1);
}

#[test]
fn checksum_errors_are_dropped() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    net.drop = Box::new(|_, _, _| false);
    open(&mut net);
    net.flush();
    let mut pkt = net.sent[0][0].bytes.clone();
    *pkt.last_mut().unwrap() ^= 0x40;
    net.ends[1].handle_datagram(ms(10), &pkt, pkt.len());
    assert_eq!(net.ends[1].stats().bad_packets, 1);
    let mut buf = [0u8; 1500];
    assert!(net.ends[1].poll_transmit(ms(10), &mut buf).is_none());
}

#[test]
fn t3_expiry_recovers_a_lost_tail_and_backs_off() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    open(&mut net);
    net.run(ms(100));
    let n = std::rc::Rc::new(std::cell::Cell::new(0));
    let c = n.clone();
    // Lose the only data packet twice: T3 must fire twice, the second time later.
    net.drop = Box::new(move |side, _, pkt| {
        if side == 0 && !data_lens(pkt).is_empty() && c.get() < 2 {
            c.set(c.get() + 1);
            return true;
        }
        false
    });
    net.ends[0].send(0, 0, false, &[4; 500]).unwrap();
    net.run(ms(60_000));
    assert_eq!(net.ends[0].stats().t3_expiries, 2);
    assert_eq!(net.app.received[1].len(), 1);
    let arrival = net.ends[1].data_arrivals().unwrap().0;
    // No RTT sample yet (the handshake is not sampled), so the RTO is lksctp's
    // initial 3 s, then 6 s after the backoff: sent at 40 ms (the handshake's end),
    // resent at 3.04 s and 9.04 s, arriving 10 ms later.
    assert_eq!(arrival, ms(9050));
}

/// A SACK from Z to A, as a whole IPv4 datagram.
fn sack_datagram(net: &Net, cum_tsn: u32, gaps: &[(u16, u16)]) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let (ip, rest) = buf.split_at_mut(20);
    let mut b = PacketBuilder::new(
        rest,
        SctpRepr {
            src_port: 6000,
            dst_port: 5000,
            verification_tag: net.ends[0].local_tag,
        },
    );
    b.push(&ChunkRepr::Sack(SackRepr {
        cum_tsn,
        a_rwnd: 1 << 20,
        gap_blocks: GapBlocks::List(gaps),
        dup_tsns: DupTsns::List(&[]),
    }));
    let n = b.finish(true);
    Ipv4Repr {
        src_addr: Z,
        dst_addr: A,
        protocol: IpProtocol::Sctp,
        payload_len: n,
        ttl: 64,
        dscp: 0,
    }
    .emit(ip, Checksum::Both);
    buf.truncate(20 + n);
    buf
}

#[test]
fn the_third_miss_indication_and_not_the_second_triggers_the_retransmission() {
    let mut net = net(SctpConfig::LINUX_2_6_15, 10);
    open(&mut net);
    net.run(ms(100));
    for _ in 0..3 {
        net.ends[0].send(0, 0, false, &[1; 1452]).unwrap();
    }
    let mut buf = [0u8; 1500];
    let mut tsns = vec![];
    while let Some(t) = net.ends[0].poll_transmit(net.now, &mut buf) {
        for c in chunks_of(&buf[..t.written]) {
            if let ChunkRepr::Data { tsn, .. } = c {
                tsns.push(tsn);
            }
        }
    }
    assert_eq!(tsns.len(), 3, "4380 bytes of window: three full chunks");
    let t0 = tsns[0];
    let mut now = net.now;
    // TSN t0+1 is missing; t0+2 arrives: one miss indication each time a SACK newly
    // acknowledges something above it.
    let mut resent_after = None;
    for (i, gaps) in [[(2u16, 2u16)], [(2, 3)], [(2, 4)]].iter().enumerate() {
        if i > 0 {
            // The data the SACK will report arrived.
            net.ends[0].send(0, 0, false, &[2; 1452]).unwrap();
            while net.ends[0].poll_transmit(now, &mut buf).is_some() {}
        }
        now = now.add_nanos(1_000_000);
        let sack = sack_datagram(&net, t0, gaps);
        net.ends[0].handle_datagram(now, &sack, sack.len());
        while let Some(t) = net.ends[0].poll_transmit(now, &mut buf) {
            for c in chunks_of(&buf[..t.written]) {
                if matches!(c, ChunkRepr::Data { tsn, .. } if tsn == t0.wrapping_add(1)) {
                    resent_after.get_or_insert(i + 1);
                }
            }
        }
    }
    assert_eq!(
        resent_after,
        Some(3),
        "fast retransmit on the third miss indication"
    );
    assert_eq!(net.ends[0].stats().fast_retransmits, 1);
    // The window was cut: ssthresh = max(cwnd/2, 4*MTU).
    assert_eq!(net.ends[0].ssthresh(), 6000);
}

#[test]
fn data_can_wait_for_the_cookie_ack() {
    let cfg = SctpConfig {
        data_on_cookie_echo: false,
        ..SctpConfig::LINUX_2_6_15
    };
    let mut net = net(cfg, 10);
    open(&mut net);
    net.ends[0].send(0, 0, false, &[1; 100]).unwrap();
    net.run(ms(1000));
    let kinds = chunk_kinds(&net.sent[0]);
    assert_eq!(kinds[1], vec![sctp::chunk_type::COOKIE_ECHO]);
    assert_eq!(kinds[2], vec![sctp::chunk_type::DATA]);
    // The data leaves when the COOKIE-ACK arrives (2 RTT) and lands 10 ms later.
    assert_eq!(net.ends[1].data_arrivals(), Some((ms(50), ms(50))));
}

#[test]
fn reading_opens_the_window_with_an_update() {
    // SACKs only on the timer, so the window updates are what keep data moving.
    let cfg = SctpConfig {
        recv_buffer: 3000,
        sack_freq: 64,
        ..SctpConfig::LINUX_2_6_15
    };
    let mut net = net(cfg, 10);
    open(&mut net);
    net.run(ms(100));
    for _ in 0..30 {
        net.ends[0].send(0, 0, false, &[3; 1000]).unwrap();
    }
    net.run(ms(60_000));
    assert_eq!(net.app.received[1].len(), 30);
    // Three messages per 20 ms round trip: about 0.2 s. Without window updates the
    // sender would sit out the 200 ms SACK timer every time the window closed (2 s).
    let (_, last) = net.ends[1].data_arrivals().unwrap();
    assert!(last < ms(100 + 400), "last data at {last:?}");
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(256))]

    /// Packets damaged on the way with the CRC32c off, so that the damage reaches the
    /// association: bytes flipped (chunk types, lengths, TSNs, gap blocks), words
    /// set to extremes, truncation. Either stack; nothing panics and the run ends.
    #[test]
    fn damaged_packets_never_panic(
        seed in proptest::prelude::any::<u64>(),
        rate in 1u64..40,
        linux in proptest::prelude::any::<bool>(),
    ) {
        let base = if linux { SctpConfig::LINUX_2_6_15 } else { SctpConfig::RFC9260 };
        let cfg = SctpConfig { checksum: Checksum::None, ..base };
        let mut net = net(cfg, 10);
        net.mangle = testkit::damage(seed, rate);
        open(&mut net);
        net.run(ms(200));
        for i in 0..60u8 {
            let _ = net.ends[0].send(u16::from(i % 3), 0, i % 7 == 0, &[i; 900]);
        }
        net.run(ms(120_000));
    }
}
