//! Pair tests: two engines over an ideal link with a fixed one-way delay and a
//! scripted drop rule, run in virtual time until idle (after quinn's `Pair`).

use super::*;
use crate::testkit;
use longhaul_wire::{Ipv4Packet, TcpControl, TcpPacket, TcpRepr};

const A: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const B: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);

type Pair = testkit::Pair<TcpConnection>;

/// A client and a server over a path of `delay` each way; `drop` is asked
/// about each data segment the client sends, by its count (1 for the first).
fn pair(cfg: TcpConfig, delay: Duration, mut drop: impl FnMut(u64) -> bool + 'static) -> Pair {
    let mut client = TcpConnection::new(cfg, (A, 40000), (B, 5001), 0xffff_f000);
    let mut server = TcpConnection::new(cfg, (B, 5001), (A, 0), 77);
    server.listen().unwrap();
    client.connect(Instant::ZERO).unwrap();
    let mut p = testkit::Pair::new([client, server], delay, 0, ());
    let mut data_sent = 0;
    p.drop = Box::new(move |side, _, bytes| {
        if side != 0 || !carries_data(bytes) {
            return false;
        }
        data_sent += 1;
        drop(data_sent)
    });
    p
}

/// Whether a segment (headers only, as the engine writes it) carries data: its IP
/// total length goes past its headers.
fn carries_data(seg: &[u8]) -> bool {
    let ip = usize::from(seg[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([seg[2], seg[3]]));
    total > ip + usize::from(seg[ip + 12] >> 4) * 4
}

/// The sequence number of every data segment the client sent, in order.
fn data_seqs(p: &Pair) -> Vec<u32> {
    p.sent[0]
        .iter()
        .filter(|s| s.wire_len > s.bytes.len())
        .map(|s| {
            let tcp = &s.bytes[usize::from(s.bytes[0] & 0x0f) * 4..];
            u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]])
        })
        .collect()
}

/// The events of one end, without their times.
fn events(p: &Pair, side: usize) -> Vec<Event> {
    p.events[side].iter().map(|&(_, e)| e).collect()
}

fn transfer(cfg: TcpConfig, bytes: u64, drop: impl FnMut(u64) -> bool + 'static) -> Pair {
    let mut p = pair(cfg, Duration::from_millis(10), drop);
    p.ends[0].send(bytes).unwrap();
    p.ends[0].close().unwrap();
    p.run(Instant::from_nanos(600_000_000_000));
    p
}

#[test]
fn handshake_transfer_and_close() {
    let p = transfer(TcpConfig::default(), 1_000_000, |_| false);
    assert_eq!(events(&p, 0), vec![Event::Connected, Event::SendComplete]);
    assert_eq!(
        events(&p, 1),
        vec![Event::Connected, Event::PeerFinished { bytes: 1_000_000 }]
    );
    assert_eq!(p.ends[1].delivered_bytes(), 1_000_000);
    assert_eq!(p.ends[0].stats().retransmits, 0);
    assert_eq!(p.ends[0].rtt().srtt(), Some(Duration::from_millis(20)));
    assert!(p.ends[0].poll_timeout().is_none() && p.ends[1].poll_timeout().is_none());
}

#[test]
fn sack_recovers_a_single_loss_with_one_retransmission() {
    let p = transfer(TcpConfig::default(), 2_000_000, |n| n == 100);
    assert_eq!(p.ends[1].delivered_bytes(), 2_000_000);
    assert_eq!(p.ends[0].stats().retransmits, 1);
    assert_eq!(p.ends[0].stats().fast_recoveries, 1);
    assert_eq!(p.ends[0].stats().timeouts, 0);
}

#[test]
fn sack_recovers_many_losses_in_one_window_without_timeout() {
    let p = transfer(TcpConfig::default(), 2_000_000, |n| {
        (200..260).contains(&n) && n % 3 == 0
    });
    assert_eq!(p.ends[1].delivered_bytes(), 2_000_000);
    assert_eq!(p.ends[0].stats().retransmits, 20);
    assert_eq!(p.ends[0].stats().fast_recoveries, 1);
    assert_eq!(p.ends[0].stats().timeouts, 0);
}

#[test]
fn newreno_without_sack_repairs_one_hole_per_rtt() {
    let cfg = TcpConfig {
        sack: false,
        ..TcpConfig::default()
    };
    let p = transfer(cfg, 2_000_000, |n| n == 200 || n == 205 || n == 210);
    assert_eq!(p.ends[1].delivered_bytes(), 2_000_000);
    assert_eq!(p.ends[0].stats().retransmits, 3);
    assert_eq!(
        p.ends[0].stats().fast_recoveries,
        1,
        "partial ACKs stay in recovery"
    );
    assert_eq!(p.ends[0].stats().timeouts, 0);
}

#[test]
fn tail_loss_is_repaired_by_the_retransmission_timer() {
    // 10 segments; the last one is lost and nothing follows it to trigger dupacks.
    let p = transfer(TcpConfig::default(), 14_480, |n| n == 10);
    assert_eq!(p.ends[1].delivered_bytes(), 14_480);
    assert_eq!(p.ends[0].stats().timeouts, 1);
    assert_eq!(p.ends[0].stats().retransmits, 1);
}

#[test]
fn lost_syn_is_retransmitted_after_the_initial_rto() {
    let mut p = pair(TcpConfig::default(), Duration::from_millis(10), |_| false);
    let mut buf = [0u8; MAX_TRANSMIT_HEADER];
    let syn = p.ends[0].poll_transmit(Instant::ZERO, &mut buf).unwrap();
    assert!(syn.written > 40, "SYN carries options");
    assert_eq!(
        p.ends[0].poll_timeout(),
        Some(Instant::from_nanos(1_000_000_000))
    );
    p.ends[0].send(5000).unwrap();
    p.ends[0].close().unwrap();
    p.run(Instant::from_nanos(10_000_000_000));
    assert_eq!(p.ends[1].delivered_bytes(), 5000);
    assert_eq!(p.ends[0].stats().timeouts, 1);
}

#[test]
fn delayed_ack_halves_the_ack_count() {
    let cfg = TcpConfig {
        ack: AckPolicy::DELAYED,
        ..TcpConfig::default()
    };
    let p = transfer(cfg, 1448 * 1000, |_| false);
    let acks = p.ends[1].stats().acks_sent;
    assert!((500..=520).contains(&acks), "{acks} ACKs for 1000 segments");
}

/// An endless sender whose window a 16-segment receive buffer caps, over a 20 ms
/// round trip, run for `secs`.
fn window_limited(secs: u64) -> Pair {
    let cfg = TcpConfig {
        recv_buffer_bytes: 16 * 1448,
        ..TcpConfig::default()
    };
    let mut p = pair(cfg, Duration::from_millis(10), |_| false);
    p.ends[0].send(u64::MAX).unwrap();
    p.run(Instant::from_nanos(secs * 1_000_000_000));
    p
}

#[test]
fn receive_buffer_caps_the_window() {
    let p = window_limited(2);
    // 16 segments per 20 ms round trip.
    let expected = 16 * 1448 * 100;
    let got = p.ends[1].delivered_bytes();
    assert!(
        got.abs_diff(expected) < expected / 10,
        "{got} vs {expected}"
    );
    assert!(p.ends[0].in_flight() <= 16 * 1448);
}

#[test]
fn the_round_log_stops_so_state_follows_the_window_not_the_run_time() {
    // 16 segments per 20 ms round for 10 s: 500 rounds, more than are booked.
    let p = window_limited(10);
    let rounds = p.ends[0].round_bytes();
    assert_eq!(rounds.len(), crate::ROUND_LOG_ROUNDS as usize);
    // Booked rounds are whole windows once the receive buffer caps them.
    assert!(rounds[20..].iter().all(|&b| b == 16 * 1448), "{rounds:?}");
    assert!(p.ends[0].round_marks.len() <= 1);
    assert!(p.ends[1].delivered_bytes() > 400 * 16 * 1448);
}

#[test]
fn garbage_is_counted_not_fatal() {
    let mut c = TcpConnection::new(TcpConfig::default(), (A, 1), (B, 2), 0);
    c.connect(Instant::ZERO).unwrap();
    c.handle_datagram(Instant::ZERO, &[0x45, 0, 0], 3);
    c.handle_datagram(Instant::ZERO, &[0xff; 60], 60);
    assert_eq!(c.stats().bad_datagrams, 2);
    assert_eq!(c.state(), State::SynSent);
}

#[test]
fn initial_windows() {
    assert_eq!(InitialWindow::Rfc3390.bytes(1460), 4380);
    assert_eq!(InitialWindow::Rfc3390.bytes(1000), 4000);
    assert_eq!(InitialWindow::Rfc3390.bytes(2500), 5000);
    assert_eq!(InitialWindow::Iw10.bytes(1448), 14480);
}

/// The template fast path writes exactly the bytes `TcpRepr::emit` would, checksums
/// included, for data, pure ACK and FIN segments, with timestamps and without.
#[test]
fn fast_path_matches_the_general_emitter() {
    for timestamps in [Timestamps::Linux, Timestamps::Off] {
        let cfg = TcpConfig {
            timestamps,
            ..TcpConfig::default()
        };
        let mut p = pair(cfg, Duration::from_millis(10), |_| false);
        p.run(Instant::from_nanos(100_000_000));
        let c = &mut p.ends[0];
        assert_eq!(c.state(), State::Established);
        assert!(c.sack_ok);
        assert_eq!(c.ts_ok, timestamps != Timestamps::Off);
        let mut fast = [0u8; MAX_TRANSMIT_HEADER];
        let mut slow = [0u8; MAX_TRANSMIT_HEADER];
        // With no out-of-order data, then one, two, four and (of five) four SACK blocks
        // (three beside timestamps).
        for held in [0u64, 1, 2, 4, 5] {
            if held > 0 {
                c.asm = Assembler::default();
                for k in 0..held {
                    c.asm.insert(3000 * (k + 1), 3000 * (k + 1) + 1448);
                }
            }
            for (control, len) in [
                (TcpControl::None, 1448),
                (TcpControl::None, 0),
                (TcpControl::Fin, 0),
            ] {
                compare_emitters(c, &mut fast, &mut slow, control, len, held > 0);
            }
        }
    }
}

/// `c.emit` (the template, SACK blocks patched on) against the general emitter, byte
/// for byte, with valid checksums.
fn compare_emitters(
    c: &mut TcpConnection,
    fast: &mut [u8; MAX_TRANSMIT_HEADER],
    slow: &mut [u8; MAX_TRANSMIT_HEADER],
    control: TcpControl,
    len: usize,
    with_sack: bool,
) {
    let seq = TcpSeqNumber(0xdead_beef);
    let now = Instant::from_nanos(5_000_000);
    let t = c.emit(now, fast, control, seq, len);
    let ack = Some(c.irs + 1 + c.rcv_nxt as u32);
    let hl = c.emit_with_options(now, slow, control, seq, ack, 0, with_sack, len);
    assert_eq!(t.written, hl);
    let ts = if c.ts_ok { 12 } else { 0 };
    assert_eq!(hl > 40 + ts, with_sack);
    let blocks = (hl - 40 - ts).saturating_sub(4) / 8;
    assert!(blocks <= if c.ts_ok { 3 } else { 4 });
    // The window field depends on the buffer; patch it out of the comparison.
    slow[34..36].copy_from_slice(&fast[34..36]);
    let mut fixed = *slow;
    TcpPacket::new_unchecked(&mut fixed[20..hl]).fill_checksum(A, B, hl - 20 + len);
    assert_eq!(
        fast[..hl],
        fixed[..hl],
        "{control:?} {len} sack {with_sack}"
    );
    let ip = Ipv4Packet::new_checked(&fast[..hl]).unwrap();
    assert!(ip.verify_checksum());
    let tcp = TcpPacket::new_checked(&fast[20..hl]).unwrap();
    assert!(tcp.verify_checksum(A, B, hl - 20 + len));
}

/// Header prediction changes nothing: the same transfers, with and without it, end
/// in the same state with the same counters (loss, SACK and NewReno, delayed ACKs).
#[test]
fn header_prediction_is_invisible() {
    type DropRule = fn(u64) -> bool;
    let cases: Vec<(TcpConfig, DropRule)> = vec![
        (TcpConfig::default(), |n| n % 97 == 0),
        (
            TcpConfig {
                sack: false,
                ..TcpConfig::default()
            },
            |n| n % 89 == 0 || n == 300,
        ),
        (
            TcpConfig {
                ack: AckPolicy::DELAYED,
                ..TcpConfig::default()
            },
            |n| n % 101 == 0,
        ),
        (
            TcpConfig {
                checksum: Checksum::Both,
                ..TcpConfig::default()
            },
            |_| false,
        ),
    ];
    for (cfg, drop) in cases {
        let fast = transfer(cfg, 3_000_000, drop);
        let slow = transfer(
            TcpConfig {
                header_prediction: false,
                ..cfg
            },
            3_000_000,
            drop,
        );
        assert_eq!(fast.ends[1].delivered_bytes(), 3_000_000);
        assert_eq!(fast.ends[0].stats(), slow.ends[0].stats());
        assert_eq!(fast.ends[1].stats(), slow.ends[1].stats());
        assert_eq!(fast.ends[0].cwnd(), slow.ends[0].cwnd());
        assert_eq!(fast.ends[0].rtt().srtt(), slow.ends[0].rtt().srtt());
        assert_eq!(fast.now, slow.now);
    }
}

/// Ten files of `file` bytes written round robin in 1460-byte messages: the first
/// write is the first message of file 0, everything else follows at once.
fn linux_files(file: u64, drop: impl FnMut(u64) -> bool + 'static) -> Pair {
    let mut p = pair(TcpConfig::linux_2_6_15(), Duration::from_millis(10), drop);
    let first = file.min(1460);
    p.ends[0].send(first).unwrap();
    p.ends[0].send(10 * file - first).unwrap();
    p.ends[0].close().unwrap();
    p.run(Instant::from_nanos(600_000_000_000));
    p
}

#[test]
fn linux_2_6_15_first_round_matches_the_studys_table_3() {
    // The study's Table 3, TCP row: three segments of window, the first write's
    // tail a segment of its own.
    for (file, first_round) in [
        (1000, 1000 + 2 * 1448),
        (1350, 1350 + 2 * 1448),
        (1448, 3 * 1448),
        (1452, 1448 + 4 + 1448),
        (5000, 1448 + 12 + 1448),
    ] {
        let p = linux_files(file, |_| false);
        assert_eq!(p.ends[0].round_bytes()[0], first_round, "file {file}");
        assert_eq!(p.ends[1].delivered_bytes(), 10 * file);
        // Slow start adds a segment per ACK; the receiver quick-ACKs the first two
        // segments and holds the third for a second one: four segments follow.
        if file >= 5000 {
            assert_eq!(p.ends[0].round_bytes()[1], 4 * 1448, "file {file}");
        }
    }
}

#[test]
fn a_short_first_segment_survives_loss_and_sack_recovery() {
    for drop in [1u64, 2, 7] {
        let p = linux_files(13_500, move |n| n == drop);
        assert_eq!(p.ends[1].delivered_bytes(), 135_000, "drop {drop}");
        assert_eq!(p.ends[0].stats().retransmits, 1, "drop {drop}");
        let total: u64 = p.ends[0].round_bytes().iter().sum();
        assert_eq!(total, 135_000, "every byte booked to one round once");
    }
}

/// Writes that never close the connection: Nagle's rule lets each short tail go once
/// nothing is unacknowledged, and later writes continue on a grid that ends where
/// the tail did.
#[test]
fn nagle_sends_a_short_tail_once_nothing_is_outstanding() {
    for (sack, drop) in [(true, 0u64), (true, 5), (false, 5), (true, 9)] {
        let cfg = TcpConfig {
            sack,
            ..TcpConfig::default()
        };
        let mut p = pair(cfg, Duration::from_millis(10), move |n| n == drop);
        let mut expect = 0;
        let mut limit = Instant::ZERO;
        for write in [1000u64, 5000, 2896, 1, 10_000] {
            p.ends[0].send(write).unwrap();
            expect += write;
            limit += Duration::from_secs(5);
            p.run(limit);
            assert_eq!(
                p.ends[1].delivered_bytes(),
                expect,
                "sack {sack}, drop {drop}"
            );
            assert_eq!(p.ends[0].acked_bytes(), expect, "sack {sack}, drop {drop}");
        }
        assert_eq!(
            p.ends[0].stats().retransmits,
            u64::from(drop > 0),
            "drop {drop}"
        );
        // Never more than one short segment per write: 1000 | 1448 x 3 + 656 |
        // 1448 x 2 | 1 | 1448 x 6 + 1312.
        assert_eq!(p.ends[0].stats().data_segments_sent, 1 + 4 + 2 + 1 + 7);
        p.ends[0].close().unwrap();
        p.run(limit + Duration::from_secs(5));
        assert_eq!(
            events(&p, 1).last(),
            Some(&Event::PeerFinished { bytes: expect })
        );
    }
}

/// A blackout loses a whole window and then the timer's first retransmission: the
/// second timeout resends the same segment and holds ssthresh (RFC 5681 §3.1) at
/// half the window the first one found, instead of halving a one-segment window.
#[test]
fn a_second_timeout_for_the_same_segment_holds_ssthresh() {
    // A first run, everything from the 40th data segment on lost, finds how many
    // segments the sender sends up to the first timeout's retransmission and the
    // window it had then.
    let mut probe = pair(TcpConfig::default(), Duration::from_millis(10), |n| n >= 40);
    probe.ends[0].send(2_000_000).unwrap();
    probe.run(Instant::from_nanos(1_500_000_000));
    assert_eq!(probe.ends[0].stats().timeouts, 1);
    let (last_lost, halved) = (data_seqs(&probe).len() as u64, probe.ends[0].ssthresh());
    assert!(
        halved > 10 * 1448,
        "ssthresh {halved} after the first timeout"
    );

    let p = transfer(TcpConfig::default(), 2_000_000, move |n| {
        (40..=last_lost).contains(&n)
    });
    assert_eq!(p.ends[1].delivered_bytes(), 2_000_000);
    assert_eq!(p.ends[0].stats().timeouts, 2);
    assert_eq!(p.ends[0].ssthresh(), halved);
}

/// A fast retransmission lost in a SACK recovery leaves the timer to repair it: that
/// timeout ends the recovery episode without a second cut (Linux's `tcp_enter_loss`
/// keeps ssthresh when it interrupts a recovery). ssthresh stays what the fast
/// retransmit set.
#[test]
fn a_timeout_in_a_recovery_keeps_the_recoverys_ssthresh() {
    // Find, with only the 100th data segment lost, where its retransmission goes
    // out and the ssthresh the recovery sets.
    let probe = transfer(TcpConfig::default(), 2_000_000, |n| n == 100);
    let seq = data_seqs(&probe)[99];
    let resent = data_seqs(&probe)[100..]
        .iter()
        .position(|&s| s == seq)
        .unwrap() as u64
        + 101;
    let halved = probe.ends[0].ssthresh();
    assert_eq!(probe.ends[0].stats().fast_recoveries, 1);

    let p = transfer(TcpConfig::default(), 2_000_000, move |n| {
        n == 100 || n == resent
    });
    assert_eq!(p.ends[1].delivered_bytes(), 2_000_000);
    assert_eq!(p.ends[0].stats().fast_recoveries, 1);
    assert_eq!(p.ends[0].stats().timeouts, 1);
    assert_eq!(p.ends[0].ssthresh(), halved);
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(256))]

    /// Segments damaged on the way, with checksums off (as the simulator runs them)
    /// so that the damage reaches the engine: header bytes flipped, words set to
    /// extremes (sequence and ACK numbers, SACK blocks far outside the window), cut
    /// short. The engines never panic, and the run ends.
    #[test]
    fn damaged_segments_never_panic(
        seed in proptest::prelude::any::<u64>(),
        rate in 1u64..40,
        sack in proptest::prelude::any::<bool>(),
    ) {
        let cfg = TcpConfig {
            checksum: Checksum::None,
            sack,
            ..TcpConfig::default()
        };
        let mut p = pair(cfg, Duration::from_millis(10), |n| n % 37 == 0);
        p.mangle = testkit::damage(seed, rate);
        p.ends[0].send(300_000).unwrap();
        p.ends[0].close().unwrap();
        p.run(Instant::from_nanos(120_000_000_000));
    }
}

/// `Transmit::more` is false only when the next poll sends nothing (every pair test
/// checks that after each transmission), and a sender that fills its window with
/// new data says so on the segment that fills it, not before: with a window of a
/// whole number of segments the last one fits exactly.
#[test]
fn more_is_false_on_the_segment_that_fills_the_window() {
    let cfg = TcpConfig {
        initial_window: InitialWindow::Segments(4),
        ..TcpConfig::default()
    };
    let mut p = pair(cfg, Duration::from_millis(10), |_| false);
    // The handshake, until nothing moves; then data to send.
    p.run(Instant::from_nanos(1_000_000_000));
    assert_eq!(events(&p, 0), vec![Event::Connected]);
    p.ends[0].send(1 << 20).unwrap();
    let now = p.now;
    let mut buf = [0u8; MAX_TRANSMIT_HEADER];
    let mut more = vec![];
    while let Some(t) = p.ends[0].poll_transmit(now, &mut buf) {
        assert_eq!(t.elided(), 1448);
        more.push(t.more);
    }
    assert_eq!(more, [true, true, true, false]);
}

/// The hint's promise holds through slow start, losses, recovery, timeouts and the
/// close, whatever the window's granularity: windows of whole segments (where a
/// segment fits exactly) and of odd bytes (RFC 3390's 4380), with and without SACK,
/// NewReno and CUBIC. `Pair::flush` asserts it after every transmission.
#[test]
fn more_keeps_its_promise_through_losses_and_windows_of_every_kind() {
    let lossy = |n: u64| n.is_multiple_of(97) || (300..310).contains(&n);
    for iw in [
        InitialWindow::Segments(1),
        InitialWindow::Segments(10),
        InitialWindow::Iw10,
        InitialWindow::Rfc3390,
    ] {
        for sack in [true, false] {
            for cc in [
                CcAlgorithm::NewReno(Default::default()),
                CcAlgorithm::Cubic(Default::default()),
            ] {
                let cfg = TcpConfig {
                    initial_window: iw,
                    sack,
                    cc,
                    ..TcpConfig::default()
                };
                let p = transfer(cfg, 1_000_000, lossy);
                assert_eq!(p.ends[1].delivered_bytes(), 1_000_000, "{iw:?} sack {sack}");
            }
        }
    }
}

/// Reordering on the path (every 10th data segment 5 ms late, behind the next
/// ones): the receiver reassembles everything, and the sender, whatever duplicate
/// ACKs it read as loss, never waits for a timeout.
#[test]
fn reordered_segments_are_reassembled() {
    let mut p = pair(TcpConfig::default(), Duration::from_millis(10), |_| false);
    p.extra_delay = Box::new(|side, i, b| {
        if side == 0 && carries_data(b) && i % 10 == 0 {
            Duration::from_millis(5)
        } else {
            Duration::ZERO
        }
    });
    p.ends[0].send(2_000_000).unwrap();
    p.ends[0].close().unwrap();
    p.run(Instant::from_nanos(60_000_000_000));
    assert_eq!(p.ends[1].delivered_bytes(), 2_000_000);
    assert_eq!(p.ends[0].stats().timeouts, 0);
    // Late segments did arrive after later ones: the path did reorder.
    assert!(
        p.ends[1].stats().out_of_order > 0,
        "{:?}",
        p.ends[1].stats()
    );
}

/// Each segment's timestamps, parsed by the general parser.
fn stamps(p: &Pair, side: usize) -> Vec<(Instant, TcpRepr)> {
    p.sent[side]
        .iter()
        .map(|s| {
            let ip = Ipv4Packet::new_unchecked(&s.bytes[..]);
            let hl = usize::from(s.bytes[0] & 0x0f) * 4;
            let tcp = TcpPacket::new_checked(&s.bytes[hl..]).unwrap();
            let seg_len = usize::from(ip.total_len()) - hl;
            let r = TcpRepr::parse(&tcp, ip.src_addr(), ip.dst_addr(), seg_len, Checksum::None);
            (s.at, r.unwrap())
        })
        .collect()
}

/// Negotiated, timestamps make each full data segment 1500 bytes on the wire (1448
/// of payload, as Linux's), ride on every segment, and echo the peer's latest
/// TSval; if either end does not offer them no segment carries them.
#[test]
fn timestamps_are_negotiated_carried_and_echoed() {
    for (a, b, on) in [
        (Timestamps::Linux, Timestamps::Linux, true),
        (Timestamps::Rfc7323, Timestamps::Linux, true),
        (Timestamps::Linux, Timestamps::Off, false),
        (Timestamps::Off, Timestamps::Linux, false),
    ] {
        let ca = TcpConfig {
            timestamps: a,
            ..TcpConfig::default()
        };
        let cb = TcpConfig {
            timestamps: b,
            ..TcpConfig::default()
        };
        let mut client = TcpConnection::new(ca, (A, 40000), (B, 5001), 0xffff_f000);
        let mut server = TcpConnection::new(cb, (B, 5001), (A, 0), 77);
        server.listen().unwrap();
        client.connect(Instant::ZERO).unwrap();
        let mut p = testkit::Pair::new([client, server], Duration::from_millis(10), 0, ());
        p.ends[0].send(500_000).unwrap();
        p.ends[0].close().unwrap();
        p.run(Instant::from_nanos(60_000_000_000));
        assert_eq!(p.ends[1].delivered_bytes(), 500_000);
        assert_eq!(p.ends[0].timestamps_negotiated(), on, "{a:?}/{b:?}");
        let full = if on { 1500 } else { 1488 };
        let data: Vec<usize> = p.sent[0]
            .iter()
            .filter(|s| s.wire_len > s.bytes.len())
            .map(|s| s.wire_len)
            .collect();
        assert!(
            data[..data.len() - 1].iter().all(|&l| l == full),
            "{a:?}/{b:?}"
        );
        let (c, s) = (stamps(&p, 0), stamps(&p, 1));
        // The SYN offers (TSecr 0) if its end is configured to; the SYN-ACK only if
        // both are.
        assert_eq!(c[0].1.timestamp.is_some(), a != Timestamps::Off);
        assert_eq!(
            c[0].1.timestamp.map(|t| t.tsecr),
            c[0].1.timestamp.map(|_| 0)
        );
        assert_eq!(s[0].1.timestamp.is_some(), on);
        for (_, r) in c[1..].iter().chain(&s[1..]) {
            assert_eq!(r.timestamp.is_some(), on, "{a:?}/{b:?}");
        }
        if !on {
            continue;
        }
        // TSval is the sender's millisecond clock plus its offset: it never goes
        // back and grows with time.
        for side in [&c, &s] {
            for w in side.windows(2) {
                let (t0, t1) = (w[0].1.timestamp.unwrap(), w[1].1.timestamp.unwrap());
                let ms = (w[1].0.as_nanos() / 1_000_000 - w[0].0.as_nanos() / 1_000_000) as u32;
                assert_eq!(t1.tsval.wrapping_sub(t0.tsval), ms);
            }
        }
        // Each of the server's ACKs echoes the TSval of the newest in-order segment
        // that reached it by then (no loss, no reordering: the one just before).
        let arrivals: Vec<(Instant, u32)> = c
            .iter()
            .map(|(at, r)| (*at + Duration::from_millis(10), r.timestamp.unwrap().tsval))
            .collect();
        for (at, r) in &s[1..] {
            let latest = arrivals.iter().rev().find(|(t, _)| t <= at).unwrap().1;
            assert_eq!(r.timestamp.unwrap().tsecr, latest, "at {at}");
        }
    }
}

/// Where RTT samples come from: as Linux, the send time, except for an ACK that
/// covers retransmitted data, which Karn's rule leaves to the echo; as RFC 7323
/// (and ns-3), the echo always, in whole milliseconds.
#[test]
fn rtt_samples_come_from_send_times_or_echoes_as_configured() {
    // 10.4 ms each way: the send time measures 20.8 ms, the millisecond echo 20 or
    // 21 ms.
    let run = |timestamps, drop: fn(u64) -> bool| {
        let cfg = TcpConfig {
            timestamps,
            ..TcpConfig::default()
        };
        let mut p = pair(cfg, Duration::from_micros(10_400), drop);
        p.ends[0].send(300_000).unwrap();
        p.ends[0].close().unwrap();
        p.run(Instant::from_nanos(60_000_000_000));
        assert_eq!(p.ends[1].delivered_bytes(), 300_000);
        p.ends[0].rtt().srtt().unwrap()
    };
    assert_eq!(
        run(Timestamps::Linux, |_| false),
        Duration::from_micros(20_800)
    );
    assert_eq!(
        run(Timestamps::Off, |_| false),
        Duration::from_micros(20_800)
    );
    let echo = run(Timestamps::Rfc7323, |_| false);
    assert!(
        echo >= Duration::from_millis(20) && echo <= Duration::from_millis(21),
        "{echo:?}"
    );
    assert_eq!(
        echo.subsec_nanos() % 1000,
        0,
        "whole-millisecond samples: {echo:?}"
    );

    // A timeout's retransmission: the ACK after it covers retransmitted data.
    // Without timestamps Karn's rule leaves the estimator unfed, so the RTO stays
    // doubled; with them (Linux) the echo times that ACK and the RTO is computed
    // afresh from the samples.
    let rto_after = |timestamps| {
        let cfg = TcpConfig {
            timestamps,
            ..TcpConfig::default()
        };
        let mut p = pair(cfg, Duration::from_millis(10), |n| n == 3);
        p.ends[0].send(3 * 1448).unwrap();
        p.run(Instant::from_nanos(60_000_000_000));
        assert_eq!(p.ends[1].delivered_bytes(), 3 * 1448);
        assert_eq!(p.ends[0].stats().timeouts, 1);
        (p.ends[0].rtt().rto(), p.ends[0].rtt().latest())
    };
    let (off, _) = rto_after(Timestamps::Off);
    let (on, latest) = rto_after(Timestamps::Linux);
    assert_eq!(off, 2 * on, "off {off:?}, on {on:?}");
    assert_eq!(latest, Duration::from_millis(20), "the echo's sample");
}
