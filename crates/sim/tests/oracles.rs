//! The simulator against analytical oracles. Each test states its tolerance.

mod common;

use common::{chain, run};

/// One NewReno flow, no loss, a one-BDP DropTail buffer, RTT 100 ms: the 1 Gb/s
/// bottleneck is busy at least 95 % of 60 s (slow start included).
#[test]
fn newreno_fills_a_bdp_buffered_bottleneck() {
    let r = run(&chain(
        "60s",
        "1Gbps",
        "50ms",
        "1bdp",
        0.0,
        "[[flow]]\nprotocol = \"tcp\"\n",
    ));
    let util = r.summary.link("link1").unwrap().utilisation;
    assert!(util >= 0.95, "utilisation {util:.4}");
    assert!(util <= 1.0 + 1e-9);
    assert_eq!(r.summary.flows[0].timeouts, Some(0));
}

/// With an ACK per segment, cwnd doubles every RTT in slow start: sampled once per
/// RTT (100 ms), from the initial window of 3 segments (RFC 3390, MSS 1448) until
/// the first loss, each sample is exactly twice the previous one.
#[test]
fn slow_start_doubles_cwnd_each_rtt() {
    let flows = "[[flow]]\nprotocol = \"tcp\"\nack_every = 1\n";
    let mut text = chain("3s", "1Gbps", "50ms", "1bdp", 0.0, flows);
    // Sample just after each round's ACKs have arrived: the SYN exchange takes one
    // RTT, so round k's ACKs arrive by (k + 1) RTT plus serialisation.
    text = text.replace(
        "plots = false",
        "plots = false\ntrace = true\ntrace_interval = \"100ms\"",
    );
    let r = run(&text);
    let mss = 1448;
    let cwnd: Vec<u64> = r.trace.iter().map(|t| t.cwnd_bytes / mss).collect();
    // The first samples fall in the handshake and the first round, before any ACK of
    // data: the initial window, unchanged.
    let first = cwnd
        .iter()
        .rposition(|&w| w == 3)
        .expect("initial window of 3 segments");
    assert!(
        first <= 2,
        "cwnd stayed at the initial window too long: {cwnd:?}"
    );
    let mut rounds = 0;
    for w in cwnd[first..].windows(2) {
        if w[1] < w[0] * 2 {
            break; // first loss: slow start is over
        }
        assert_eq!(w[1], 2 * w[0], "cwnd per RTT: {cwnd:?}");
        rounds += 1;
    }
    // 3 -> 3 * 2^k doubles for 12 rounds to 12288 segments; the next round
    // overflows the pipe plus the one-BDP buffer (2 x 8633 segments).
    assert_eq!(rounds, 12, "doubling rounds: {cwnd:?}");
}

/// Steady-state goodput of one Reno flow under random loss `p`, over RTT `rtt_ms`, on
/// a 10 Gb/s bottleneck that is never the limit, divided by Mathis's prediction
/// `MSS/RTT * sqrt(3/(2 b p))` for `b` segments per ACK. Slow start is excluded by
/// discarding the first 20 % of the run.
fn mathis_ratio(rtt_ms: f64, p: f64, secs: u32, b: f64, flow_keys: &str) -> f64 {
    let mss = 1448.0;
    let flows = format!("[[flow]]\nprotocol = \"tcp\"\n{flow_keys}\n");
    let mut text = chain(
        &format!("{secs}s"),
        "10Gbps",
        &format!("{}ms", rtt_ms / 2.0),
        "1bdp",
        p,
        &flows,
    );
    text = text.replace(
        "plots = false",
        "plots = false\ntrace = true\ntrace_interval = \"1s\"",
    );
    let r = run(&text);
    let warm = r.trace.len() / 5;
    let (a, z) = (&r.trace[warm], r.trace.last().unwrap());
    let measured = (z.delivered_bytes - a.delivered_bytes) as f64 * 8.0 / (z.time_s - a.time_s);
    let mathis = mss * 8.0 / (rtt_ms / 1e3) * (3.0 / (2.0 * b * p)).sqrt();
    measured / mathis
}

/// Mathis et al. with an ACK per segment: `MSS/RTT * sqrt(3/(2p))`, ±20 %.
#[test]
fn reno_throughput_matches_mathis() {
    for (rtt_ms, p, secs) in [
        (20.0, 1e-3, 200),
        (100.0, 1e-3, 1000),
        (20.0, 1e-4, 500),
        (100.0, 1e-4, 2000),
    ] {
        let ratio = mathis_ratio(rtt_ms, p, secs, 1.0, "ack_every = 1");
        assert!(
            (0.8..=1.2).contains(&ratio),
            "RTT {rtt_ms} ms, p {p}: ratio {ratio:.3}"
        );
    }
}

/// Mathis with delayed ACKs: `MSS/RTT * sqrt(3/(4p))`, ±20 %, for Reno's per-ACK
/// increase (RFC 5681 eq. 3), which grows cwnd by half an SMSS per RTT when every other
/// segment is acknowledged.
#[test]
fn delayed_ack_reno_matches_mathis() {
    for (rtt_ms, p, secs) in [(20.0, 1e-3, 300), (100.0, 1e-4, 3000)] {
        let ratio = mathis_ratio(
            rtt_ms,
            p,
            secs,
            2.0,
            "ack_every = 2\navoidance = \"per-ack\"",
        );
        assert!(
            (0.8..=1.2).contains(&ratio),
            "RTT {rtt_ms} ms, p {p}: ratio {ratio:.3}"
        );
    }
}

/// Padhye, Firoiu, Towsley and Kurose's full model (SIGCOMM 1998, eq. 31): the
/// throughput in segments per second of a long-lived Reno flow with `b` segments per
/// ACK, loss-indication rate `p`, round-trip time `rtt` and first timeout `t0` (s),
/// unlimited by the receive window. `Q(w)` is the chance that a loss indication is a
/// timeout, `G(p)` the cost of its backoffs.
fn pftk(p: f64, rtt: f64, t0: f64, b: f64) -> f64 {
    let c = (2.0 + b) / (3.0 * b);
    let w = c + (8.0 * (1.0 - p) / (3.0 * b * p) + c * c).sqrt();
    let q = |w: f64| {
        let s = 1.0 - p;
        (((1.0 - s.powi(3)) * (1.0 + s.powi(3) * (1.0 - s.powf(w - 3.0)))) / (1.0 - s.powf(w)))
            .min(1.0)
    };
    let g = 1.0
        + p
        + 2.0 * p.powi(2)
        + 4.0 * p.powi(3)
        + 8.0 * p.powi(4)
        + 16.0 * p.powi(5)
        + 32.0 * p.powi(6);
    ((1.0 - p) / p + w + q(w) / (1.0 - p)) / (rtt * (b * w / 2.0 + 1.0) + q(w) * g * t0 / (1.0 - p))
}

/// The PFTK model (timeouts included) predicts goodput from the rate of loss
/// indications, ±10 %, with and without SACK, with an ACK per segment (b = 1) and
/// with delayed ACKs and Reno's per-ACK increase (b = 2), at loss rates where
/// timeouts matter.
///
/// The model's `p` is the rate of loss *indications* (its rounds lose everything
/// after a first loss), which is what a sender sees and what TFRC feeds it (RFC 5348
/// §3.1): here fast recoveries plus timeouts per data segment sent. Fed the raw
/// Bernoulli rate instead, it would undercount a NewReno flow by 8 % (p = 0.005) to
/// 20 % (p = 0.02), because several losses in a window make one indication. T0 is
/// the RTO: 1 s, the minimum, on a 100 ms path. Measured ratios: 1.01 to 1.07.
///
/// Without SACK this also holds NewReno to its window: a retransmission lost in
/// a recovery once let every duplicate ACK clock out a segment until the timeout,
/// and ssthresh was set from all of them: ten times the goodput, 40 % of it resent.
#[test]
fn reno_throughput_matches_padhye() {
    let (mss, rtt) = (1448.0, 0.1);
    for (b, acks) in [
        (1.0, "ack_every = 1"),
        (2.0, "ack_every = 2\navoidance = \"per-ack\""),
    ] {
        for sack in [false, true] {
            for p in [0.005, 0.02] {
                let flows = format!(
                    "[[flow]]\nprotocol = \"tcp\"\n{acks}\nsack = {sack}\nmin_rto = \"1s\"\n"
                );
                let r = run(&chain("3000s", "10Gbps", "50ms", "1bdp", p, &flows));
                let f = &r.summary.flows[0];
                let what = format!("b {b}, sack {sack}, p {p}");
                let timeouts = f.timeouts.unwrap();
                let indications = f.fast_recoveries.unwrap() + timeouts;
                let p_ind = indications as f64 / f.data_segments_sent.unwrap() as f64;
                let measured = f.goodput_mbps * 1e6 / 8.0 / mss;
                let ratio = measured / pftk(p_ind, rtt, 1.0, b);
                assert!(
                    (0.9..=1.1).contains(&ratio),
                    "{what}: {measured:.1} segments/s, PFTK({p_ind:.5}) ratio {ratio:.3}"
                );
                assert!(timeouts > 0, "{what}: the T0 term is not exercised");
                let resent = f.retransmits.unwrap() as f64 / f.data_segments_sent.unwrap() as f64;
                assert!(resent < 1.5 * p, "{what}: {resent:.3} of segments resent");
            }
        }
    }
}

/// Poisson arrivals of fixed-size packets into a DropTail queue at load 0.8 form an
/// M/D/1 queue: mean number waiting `Lq = rho^2 / (2 (1 - rho))` = 1.6. Tolerance 5 %.
#[test]
fn poisson_into_droptail_is_md1() {
    // 1000-byte packets at 800 Mb/s into 1 Gb/s, 100 s: 10 M packets.
    let flows = r#"
[[flow]]
protocol = "udp"
rate = "800Mbps"
packet_size = 1000
arrivals = "poisson"
"#;
    let text = chain("100s", "1Gbps", "1ms", "100000pkts", 0.0, flows)
        .replace("rate = \"10Gbps\"", "rate = \"100Gbps\"");
    let r = run(&text);
    let l = r.summary.link("link1").unwrap();
    let rho: f64 = 0.8;
    let lq = rho * rho / (2.0 * (1.0 - rho));
    let err = (l.mean_queue_waiting_pkts - lq).abs() / lq;
    assert!(
        err < 0.05,
        "Lq measured {:.4}, M/D/1 {lq:.4}",
        l.mean_queue_waiting_pkts
    );
    assert!(
        (l.utilisation - rho).abs() < 0.01,
        "utilisation {}",
        l.utilisation
    );
    assert_eq!(l.drops_queue, 0);
}

/// CBR below capacity sees no queue at all.
#[test]
fn cbr_below_capacity_never_waits() {
    let flows = "[[flow]]\nprotocol = \"udp\"\nrate = \"500Mbps\"\npacket_size = 1500\n";
    let r = run(&chain("2s", "1Gbps", "1ms", "100pkts", 0.0, flows));
    let l = r.summary.link("link1").unwrap();
    assert_eq!(l.mean_queue_waiting_pkts, 0.0);
    assert!((r.summary.flows[0].goodput_mbps - 500.0 * 1472.0 / 1500.0).abs() < 1.0);
}
