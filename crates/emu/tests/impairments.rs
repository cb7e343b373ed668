//! The emulator's impairments between real namespaces: reordering, duplication,
//! jitter, RED and a schedule, each checked from the receiving application's side
//! against what was configured. Like `netns.rs`: root, one at a time, bounded, and
//! asserting only on runs the emulator reports valid.

use longhaul_emu::EmuConfig;
use longhaul_model::fifo::Aqm;
use longhaul_model::impair::{Jitter, JitterDist, Reorder};
use longhaul_model::red::RedParams;
use longhaul_model::schedule::Step;
use longhaul_model::QueueLimit;
use longhaul_proto::{Bandwidth, Duration as PDuration};

mod common;
use common::*;

const TRIES: u32 = 5;

fn link(mbps: u64, delay_ms: u64, seed: u64) -> EmuConfig {
    EmuConfig::symmetric(
        Bandwidth::from_mbps(mbps),
        PDuration::from_millis(delay_ms),
        0.0,
        seed,
    )
}

/// `k` within the 99 % binomial interval of `n` draws at `p`.
fn assert_binomial(what: &str, k: u64, n: u64, p: f64) {
    let (n, k) = (n as f64, k as f64);
    let half = 2.576 * (n * p * (1.0 - p)).sqrt();
    assert!(
        (k - n * p).abs() <= half,
        "{what}: {k} of {n}, expected {:.1} ± {half:.1}",
        n * p
    );
}

/// Packets that arrived after one sent later than them.
fn late_arrivals(seqs: &[u64]) -> u64 {
    let mut highest = None;
    let mut late = 0;
    for &s in seqs {
        match highest {
            Some(h) if s < h => late += 1,
            _ => highest = Some(s),
        }
    }
    late
}

#[test]
fn reordering_holds_back_the_configured_share() {
    let _g = prerequisites();
    let p = 0.05;
    let mut cfg = link(40, 5, 21);
    // Packets 400 µs apart, held 2 ms: every held packet is overtaken.
    cfg.up.impair.reorder = Some(Reorder {
        p,
        delay: PDuration::from_millis(2),
    });
    let (report, probe) = valid_run(TRIES, || {
        with_emulator(cfg.clone(), |pair| cbr(pair, 20e6, 1000, 3.0))
    });
    let late = late_arrivals(&probe.seqs);
    eprintln!(
        "reorder {p}: {late} of {} arrived late; the emulator held {}",
        probe.seqs.len(),
        report.up.reordered
    );
    assert_binomial("late arrivals", late, probe.seqs.len() as u64, p);
    assert_eq!(probe.received, probe.sent, "reordering lost packets");
}

#[test]
fn duplication_copies_the_configured_share() {
    let _g = prerequisites();
    let p = 0.03;
    let mut cfg = link(40, 5, 22);
    cfg.up.impair.duplicate = p;
    let (report, probe) = valid_run(TRIES, || {
        with_emulator(cfg.clone(), |pair| cbr(pair, 10e6, 1000, 3.0))
    });
    let mut seqs = probe.seqs.clone();
    seqs.sort_unstable();
    let n = seqs.len() as u64;
    seqs.dedup();
    let copies = n - seqs.len() as u64;
    eprintln!(
        "duplicate {p}: {copies} copies of {} packets; the emulator made {}",
        seqs.len(),
        report.up.duplicated
    );
    assert_binomial("copies", copies, seqs.len() as u64, p);
    assert_eq!(report.up.duplicated + probe.sent, probe.received);
}

#[test]
fn jitter_has_the_configured_mean_and_deviation() {
    let _g = prerequisites();
    let (delay_ms, sd_ms) = (20.0, 4.0);
    let mut cfg = link(100, 20, 23);
    cfg.up.impair.jitter = Some(Jitter {
        dist: JitterDist::Normal {
            sd: PDuration::from_millis(4),
        },
        reorder: true,
    });
    let (_, probe) = valid_run(TRIES, || {
        with_emulator(cfg.clone(), |pair| cbr(pair, 8e6, 500, 4.0))
    });
    let owd: Vec<f64> = probe.owds.iter().map(|&d| d as f64 * 1e-6).collect();
    let n = owd.len() as f64;
    let mean = owd.iter().sum::<f64>() / n;
    let sd = (owd.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    eprintln!("jitter: {n} packets, OWD mean {mean:.3} ms, sd {sd:.3} ms");
    // Within 5 % of the configured mean (the propagation delay; serialisation of
    // 500 bytes at 100 Mb/s adds 0.04 ms) and standard deviation.
    assert!((mean / delay_ms - 1.0).abs() < 0.05, "mean {mean}");
    assert!((sd / sd_ms - 1.0).abs() < 0.05, "sd {sd}");
    assert!(
        late_arrivals(&probe.seqs) > 0,
        "jitter that may reorder did not"
    );
}

#[test]
fn fifo_jitter_keeps_the_order() {
    let _g = prerequisites();
    let mut cfg = link(100, 10, 24);
    cfg.up.impair.jitter = Some(Jitter {
        dist: JitterDist::Uniform {
            half_width: PDuration::from_millis(3),
        },
        reorder: false,
    });
    let (report, probe) = valid_run(TRIES, || {
        with_emulator(cfg.clone(), |pair| cbr(pair, 8e6, 500, 2.0))
    });
    eprintln!(
        "fifo jitter: lateness p50 {:.0} µs, p99 {:.0} µs",
        report.health.lateness_us_p50, report.health.lateness_us_p99
    );
    assert_eq!(late_arrivals(&probe.seqs), 0);
    let spread = probe.owds.iter().max().unwrap() - probe.owds.iter().min().unwrap();
    assert!(spread > 2_000_000, "the delays did not vary: {spread} ns");
}

#[test]
fn tcp_delivers_every_byte_through_reordering_and_duplication() {
    let _g = prerequisites();
    let mut cfg = link(200, 5, 25);
    for d in [&mut cfg.up, &mut cfg.down] {
        d.impair.reorder = Some(Reorder {
            p: 0.02,
            delay: PDuration::from_millis(1),
        });
        d.impair.duplicate = 0.02;
    }
    let data = varied_bytes(8_000_000);
    let (report, got) = valid_run(TRIES, || {
        with_emulator(cfg.clone(), |pair| tcp_exact(pair, 5203, &data))
    });
    assert!(report.up.reordered > 0 && report.up.duplicated > 0);
    assert!(got.len() == data.len() && got == *data, "the bytes differ");
}

#[test]
fn red_drops_early_and_keeps_the_queue_short_under_cbr_overload() {
    let _g = prerequisites();
    let mut cfg = link(40, 5, 26);
    cfg.up.queue = QueueLimit::Packets(200);
    let red = RedParams {
        min_th: 20.0,
        max_th: 60.0,
        max_p: 0.2,
        w_q: 0.002,
        gentle: true,
        ecn: false,
        bytes: false,
    };
    cfg.up.aqm = Aqm::Red {
        profiles: vec![red],
    };
    // 1.25 times the link rate: a fifth of the packets must go.
    let (report, probe) = valid_run(TRIES, || {
        with_emulator(cfg.clone(), |pair| cbr(pair, 50e6, 1000, 4.0))
    });
    let up = &report.up;
    let share = up.lost_aqm as f64 / probe.sent as f64;
    // The peak queue stays near RED's operating point, far below the 200-packet
    // limit (40 packets would be max_th's 60 less the spread).
    let peak_pkts = up.peak_queue_bytes as f64 / 1000.0;
    eprintln!(
        "RED at 1.25x: dropped {share:.4} early, {} at the limit, peak queue {peak_pkts:.0} packets",
        up.lost_queue
    );
    assert_eq!(up.lost_queue, 0, "RED let the queue fill");
    assert!(peak_pkts < 2.0 * red.max_th, "peak queue {peak_pkts}");
    // Conservation: the link carries 0.8 of what is offered; the warm-up packets
    // (50 of them) dilute the share a little. Within 10 %.
    assert!((share / 0.2 - 1.0).abs() < 0.10, "early drops {share}");
}

#[test]
fn a_schedule_steps_the_rate_down_mid_run() {
    let _g = prerequisites();
    let mut cfg = link(40, 5, 27);
    // The probe's constant rate starts 0.1 s (warm-up) into the run; the step at
    // 2 s cuts the link from 40 to 10 Mb/s under a 20 Mb/s probe.
    cfg.up.schedule = vec![Step {
        at: PDuration::from_secs(2),
        rate: Some(Bandwidth::from_mbps(10)),
        delay: None,
        loss: None,
    }];
    let (report, _) = valid_run(TRIES, || {
        with_emulator(cfg.clone(), |pair| cbr(pair, 20e6, 1000, 4.0))
    });
    let s = &report.up.series_bps;
    let mean = |a: usize, b: usize| s[a..b].iter().sum::<f64>() / (b - a) as f64;
    let (before, after) = (mean(6, 18), mean(24, 36));
    eprintln!(
        "schedule: {:.2} Mb/s before the step, {:.2} after",
        before / 1e6,
        after / 1e6
    );
    assert!((before / 20e6 - 1.0).abs() < 0.03, "before {before}");
    assert!((after / 10e6 - 1.0).abs() < 0.03, "after {after}");
}
