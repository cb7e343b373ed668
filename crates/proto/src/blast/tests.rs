//! The blast protocols end to end over a path with delay and random loss, the
//! control channel a reliable in-order pipe with the same delay; and each rate rule
//! against hand-worked numbers.

use std::collections::VecDeque;

use longhaul_wire::blast::{Message, DATA_HEADER_LEN};

use super::*;

const MS: u64 = 1_000_000;

/// Two ends, a data path and two control pipes, run by next event.
struct Pair {
    ends: [BlastConnection; 2],
    one_way: u64,
    /// Data in flight to the receiver: arrival time, header, wire length.
    data: VecDeque<(u64, Vec<u8>, usize)>,
    /// Control bytes in flight to end `i`.
    ctl: [VecDeque<(u64, Vec<u8>)>; 2],
    loss: f64,
    rng: u64,
    now: u64,
    events: [Vec<(u64, Event)>; 2],
    dropped: u64,
}

impl Pair {
    fn new(cfg: BlastConfig, rtt_ms: u64, loss: f64) -> Self {
        let mut p = Pair {
            ends: [BlastConnection::sender(cfg), BlastConnection::receiver(cfg)],
            one_way: rtt_ms * MS / 2,
            data: VecDeque::new(),
            ctl: [VecDeque::new(), VecDeque::new()],
            loss,
            rng: 0x2545_f491_4f6c_dd1d,
            now: 0,
            events: [vec![], vec![]],
            dropped: 0,
        };
        for e in &mut p.ends {
            e.control_connected(Instant::ZERO);
        }
        p.drain();
        p
    }

    fn lose(&mut self) -> bool {
        // xorshift64*: the loss pattern is fixed by the seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let x = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        (x as f64 / (1u64 << 53) as f64) < self.loss
    }

    fn drain(&mut self) {
        let now = Instant::from_nanos(self.now);
        let mut buf = [0u8; 64];
        while let Some(tx) = self.ends[0].poll_transmit(now, &mut buf) {
            if self.lose() {
                self.dropped += 1;
            } else {
                self.data.push_back((
                    self.now + self.one_way,
                    buf[..tx.written].to_vec(),
                    tx.wire_len,
                ));
            }
        }
        for i in 0..2 {
            let mut frame = vec![];
            while self.ends[i].poll_control(&mut frame) {}
            if !frame.is_empty() {
                self.ctl[1 - i].push_back((self.now + self.one_way, frame));
            }
            while let Some(ev) = self.ends[i].poll_event() {
                self.events[i].push((self.now, ev));
            }
        }
    }

    /// Runs until both ends are done or `limit_ms` passes; true if done.
    fn run(&mut self, limit_ms: u64) -> bool {
        let limit = limit_ms * MS;
        loop {
            if self.events[0].iter().any(|e| e.1 == Event::Finished)
                && self.events[1].iter().any(|e| e.1 == Event::Complete)
            {
                return true;
            }
            let next = [
                self.data.front().map(|d| d.0),
                self.ctl[0].front().map(|c| c.0),
                self.ctl[1].front().map(|c| c.0),
                self.ends[0].poll_timeout().map(|t| t.as_nanos()),
                self.ends[1].poll_timeout().map(|t| t.as_nanos()),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(t) = next.filter(|&t| t <= limit) else {
                return false;
            };
            self.now = self.now.max(t);
            let now = Instant::from_nanos(self.now);
            while self.data.front().is_some_and(|d| d.0 <= self.now) {
                let (_, h, len) = self.data.pop_front().unwrap();
                self.ends[1].handle_datagram(now, &h, len);
            }
            for i in 0..2 {
                while self.ctl[i].front().is_some_and(|c| c.0 <= self.now) {
                    let (_, bytes) = self.ctl[i].pop_front().unwrap();
                    // Split each delivery in two, as a stream read may.
                    let cut = bytes.len() / 2;
                    self.ends[i].handle_control(now, &bytes[..cut]);
                    self.ends[i].handle_control(now, &bytes[cut..]);
                }
                self.ends[i].handle_timeout(now);
            }
            self.drain();
        }
    }

    fn completed_ms(&self) -> f64 {
        self.events[1]
            .iter()
            .find(|e| e.1 == Event::Complete)
            .map_or(f64::NAN, |e| e.0 as f64 / MS as f64)
    }
}

/// Hands sender `s` control message `m` at time zero; its inter-packet time after.
fn feed(s: &mut BlastConnection, m: Message) -> f64 {
    let mut b = vec![];
    m.emit(&mut b);
    s.handle_control(Instant::ZERO, &b);
    s.interval().unwrap().as_nanos() as f64
}

fn cfg(scheme: Scheme, size: u64, mbps: u64) -> BlastConfig {
    BlastConfig::new(scheme, size, Bandwidth::from_bps(mbps * 1_000_000))
}

#[test]
fn every_scheme_delivers_every_block_through_random_loss() {
    for scheme in [Scheme::Rbudp, Scheme::Tsunami, Scheme::Sabul] {
        for loss in [0.0, 1e-3, 2e-2] {
            let c = cfg(scheme, 20_000_000 + 123, 900);
            let mut p = Pair::new(c, 100, loss);
            assert!(p.run(120_000), "{scheme:?} at {loss}: not done by 120 s");
            let (s, r) = (p.ends[0].stats(), p.ends[1].stats());
            assert_eq!(p.ends[1].received_bytes(), c.size, "{scheme:?} {loss}");
            assert_eq!(s.originals, u64::from(c.blocks()), "{scheme:?} {loss}");
            assert_eq!(r.bad_input + s.bad_input, 0, "{scheme:?} {loss}");
            // Every datagram sent was received or dropped, and every drop of a
            // block not yet held was made good by a retransmission.
            assert_eq!(s.originals + s.retransmitted, r.received + p.dropped);
            assert!(s.retransmitted >= p.dropped.min(1) * u64::from(loss > 0.0));
            if loss == 0.0 {
                assert_eq!(s.retransmitted, 0, "{scheme:?}: nothing to resend");
            }
        }
    }
}

/// The paper's model for a blast at a rate the path carries: one blast time plus
/// a one-way delay with no loss; with loss, each re-blast round adds a round trip
/// and the re-blast's own time.
#[test]
fn rbudp_takes_the_blast_time_and_a_round_trip_per_re_blast() {
    let c = cfg(Scheme::Rbudp, 50_000_000, 500);
    let blast_ms = |n: u64| n as f64 * c.interval_at(c.rate) / MS as f64;
    let n = u64::from(c.blocks());
    let mut p = Pair::new(c, 100, 0.0);
    assert!(p.run(60_000));
    // The last datagram leaves one interval before the blast time ends.
    let expect = blast_ms(n - 1) + 50.0;
    assert!(
        (p.completed_ms() - expect).abs() < 0.01,
        "{} vs {expect}",
        p.completed_ms()
    );

    let mut p = Pair::new(c, 100, 1e-3);
    assert!(p.run(60_000));
    let resent = p.ends[0].stats().retransmitted;
    // Round 1 re-blasts about n * p blocks, after DONE's and the bitmap's round
    // trip; round 2 (if any) a handful more after another.
    assert!((resent as f64 - n as f64 * 1e-3).abs() < 4.0 * (n as f64 * 1e-3).sqrt() + 2.0);
    let t = p.completed_ms();
    let one_round = blast_ms(n) + 100.0 + blast_ms(resent) + 50.0;
    assert!(
        t >= one_round - 1.0 && t <= one_round + 2.0 * 100.0 + 1.0,
        "{t} vs {one_round}"
    );
}

/// The server's answer to error-rate reports, worked by hand from the formula.
#[test]
fn tsunami_slows_and_speeds_its_inter_packet_delay_as_the_server_does() {
    let c = cfg(Scheme::Tsunami, 10_000_000, 800);
    let mut s = BlastConnection::sender(c);
    let target = feed(
        &mut s,
        Message::Request {
            rate_bps: 800_000_000,
            error_rate: 7500,
        },
    );
    // 1500 bytes at 800 Mb/s.
    assert!((target - 15_000.0).abs() < 1.0, "{target}");
    // 20 % error: ipd *= 1 + (25/24 - 1) * (1 + 20000 - 7500) / (100000 - 7500).
    let slowed = feed(&mut s, Message::ErrorRate { rate: 20_000 });
    let f = 1.0 + (25.0 / 24.0 - 1.0) * (1.0 + 20_000.0 - 7500.0) / 92_500.0;
    assert!((slowed - target * f).abs() < 1.0, "{slowed}");
    let again = feed(&mut s, Message::ErrorRate { rate: 20_000 });
    assert!((again - target * f * f).abs() < 1.0);
    // Below the threshold: 5/6, but never under the target.
    let faster = feed(&mut s, Message::ErrorRate { rate: 100 });
    assert!((faster - (target * f * f * 5.0 / 6.0).max(target)).abs() < 1.0);
    assert!((feed(&mut s, Message::ErrorRate { rate: 0 }) - target).abs() < 1.0);
    // Never slower than 10 ms.
    for _ in 0..2000 {
        feed(&mut s, Message::ErrorRate { rate: 99_000 });
    }
    assert!((s.interval().unwrap().as_nanos() as f64 - 10e6).abs() < 1.0);
}

/// SABUL's increase, decrease and their bounds, worked by hand.
#[test]
fn sabul_rate_control_follows_the_release() {
    let c = cfg(Scheme::Sabul, 100_000_000, 120);
    // I_min is 1500 bytes at 120 Mb/s: 100 us.
    let mut s = BlastConnection::sender(c);
    let i0 = feed(
        &mut s,
        Message::Request {
            rate_bps: 0,
            error_rate: 0,
        },
    );
    assert!((i0 - 100_000.0).abs() < 1.0, "starts at its fastest: {i0}");
    let mut buf = [0u8; 64];
    let mut t = 0;
    for _ in 0..40 {
        t += 100_000;
        s.poll_transmit(Instant::from_nanos(t), &mut buf).unwrap();
    }
    // A loss report: I *= 1.125; a second one (same episode) does not cut.
    let cut = feed(&mut s, Message::Loss { blocks: vec![3] });
    assert!((cut - i0 * 1.125).abs() < 1.0, "{cut}");
    assert!((feed(&mut s, Message::Loss { blocks: vec![4] }) - cut).abs() < 1.0);
    // A SYN with this period's loss 2/40 above 0.1 %: no increase.
    assert!((feed(&mut s, Message::Syn { received: 38 }) - cut).abs() < 1.0);
    // A period with nothing sent (the decrease froze sending for a SYN period)
    // leaves the rate and the history alone.
    assert!((feed(&mut s, Message::Syn { received: 0 }) - cut).abs() < 1.0);
    let mut period = |s: &mut BlastConnection| {
        let mut sent = 0;
        for _ in 0..20 {
            t += 1_000_000;
            sent += u32::from(s.poll_transmit(Instant::from_nanos(t), &mut buf).is_some());
        }
        assert!(sent > 0);
    };
    // A clean period still carries the history (0.1 * 5 %): no increase.
    period(&mut s);
    assert!((feed(&mut s, Message::Syn { received: 10 }) - cut).abs() < 1.0);
    // Clean once more: history 0.1 * 0.1 * 5 % = 0.05 % -> increase. SYN / I =
    // 10 ms / 112.5 us = 88.9 -> decade 100 -> inc 0.1 packet per SYN.
    let i = cut;
    let want = i * 10e6 / (i * 0.1 + 10e6);
    period(&mut s);
    let up = feed(&mut s, Message::Syn { received: 10 });
    assert!((up - want).abs() < 1.0, "{up} vs {want}");
    // A later episode (first lost block past the mark) cuts again.
    let again = feed(&mut s, Message::Loss { blocks: vec![45] });
    assert!((again - up * 1.125).abs() < 1.0, "{again}");
}

#[test]
fn stray_input_is_counted_and_dropped() {
    let c = cfg(Scheme::Tsunami, 1_000_000, 100);
    let mut r = BlastConnection::receiver(c);
    let now = Instant::ZERO;
    // A block number past the end, a wrong length, an unknown kind.
    let mut h = [0u8; DATA_HEADER_LEN];
    longhaul_wire::blast::BlockRepr {
        kind: longhaul_wire::blast::BlockKind::Original,
        block: c.blocks(),
    }
    .emit(&mut h);
    r.handle_datagram(now, &h, DATA_HEADER_LEN + 1464);
    h[4..8].copy_from_slice(&0u32.to_be_bytes());
    r.handle_datagram(now, &h, DATA_HEADER_LEN + 10);
    h[0] = b'Z';
    r.handle_datagram(now, &h, DATA_HEADER_LEN + 1464);
    // A start for another size; garbage (the bytes read with it are dropped);
    // then the same wrong start, read afresh.
    let mut b = vec![];
    Message::Start { size: 5 }.emit(&mut b);
    r.handle_control(now, &b);
    r.handle_control(now, &[0xee; 9]);
    r.handle_control(now, &b);
    assert_eq!(r.stats().bad_input, 6);
    assert_eq!(r.stats().received, 0);
    assert_eq!(r.poll_event(), None);
    // The sender takes no datagrams.
    let mut s = BlastConnection::sender(c);
    s.handle_datagram(now, &h, 100);
    assert_eq!(s.stats().bad_input, 1);
}

#[test]
fn bitmaps_find_missing_blocks_across_words() {
    let mut b = Bitmap::new(130);
    for k in (0..130).filter(|k| ![3, 64, 127, 129].contains(k)) {
        assert!(b.set(k));
    }
    assert_eq!(b.count, 126);
    assert!(!b.set(5));
    assert_eq!(b.count, 126);
    assert_eq!(b.missing().collect::<Vec<_>>(), vec![3, 64, 127, 129]);
    assert_eq!(b.first_missing_from(4), 64);
    assert_eq!(b.first_missing_from(128), 129);
    let bytes = b.to_bytes();
    assert_eq!(bytes.len(), 17);
    assert_eq!(bytes[0], 0b1111_0111);
    assert_eq!(bytes[16] & 0b11, 0b01);
    for k in [3, 64, 127, 129] {
        assert!(b.set(k), "{k}");
    }
    assert_eq!(b.count, 130);
    assert!(b.full());
    assert_eq!(b.first_missing_from(0), 130);
}
