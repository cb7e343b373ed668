//! BBR driving UDT on the AR-UDT study's long lossy path (issue 34's acceptance):
//! goodput against the grid's floors, no standing queue, and four flows sharing one
//! bottleneck.
//!
//! The path: 1 Gb/s, RTT 200 ms (or 1 ms), a one-BDP DropTail queue, 60 s. UDT's
//! buffers are 131 072 packets (190 MB), eight BDPs: UDT acknowledges cumulatively,
//! so the receiver holds everything behind a hole until it is repaired, and at 1 %
//! loss with the ns-2 model's periodic NAK a lost retransmission keeps a hole open
//! for several round trips (65 536 packets measured 278–348 Mb/s at 1e-2, the window
//! then stalling the sender; 131 072 measured 736).

mod common;

use longhaul_model::fairness::jain;

const BUFFERS: &str = "recv_buffer_pkts = 131072\nsend_buffer_pkts = 131072\nflight_flag_size = 131072\nnak_report = \"periodic\"\n";

fn flows(cc: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "[[flow]]\nprotocol = \"udt\"\ncc = \"{cc}\"\nstart = \"{}ms\"\n{BUFFERS}",
                i * 500
            )
        })
        .collect()
}

/// Goodput of one `cc` flow, Mb/s, on 1 Gb/s with `one_way` delay and `loss`.
fn goodput(cc: &str, one_way: &str, loss: f64) -> f64 {
    let text = common::chain("60s", "1Gbps", one_way, "1bdp", loss, &flows(cc, 1));
    common::run(&text).summary.flows[0].goodput_mbps
}

/// The floors of issue 34 for `bbr-lh` at RTT 200 ms: ≥ 930 Mb/s with no loss,
/// ≥ 900 at 1e-4, ≥ 850 at 1e-3, ≥ 600 at 1e-2. Measured 934.6, 922.4, 878.4 and
/// 752.4 (the payload's share of the link is 970.7: 1456 of each 1500 bytes). The
/// first floor is within 0.5 % of what this path allows at all: Startup takes
/// about 2.5 s of the 60 at this RTT.
#[test]
fn bbr_lh_holds_a_long_lossy_link() {
    for (loss, floor) in [(0.0, 930.0), (1e-4, 900.0), (1e-3, 850.0), (1e-2, 600.0)] {
        let g = goodput("bbr-lh", "100ms", loss);
        assert!(g >= floor, "loss {loss}: {g:.1} Mb/s < {floor}");
    }
}

/// And at RTT 1 ms with no loss, ≥ 900 (measured 958.5). BBR as Linux runs it
/// (`bbr`) meets the 1 ms floor too (935.5), but not the 200 ms ones: its ProbeRTT
/// every 10 s and its slower Startup cost it 893.4 with no loss.
#[test]
fn bbr_fills_a_short_path_and_v1_falls_short_on_the_long_one() {
    let short = goodput("bbr-lh", "0.5ms", 0.0);
    assert!(short >= 900.0, "{short:.1}");
    let v1_short = goodput("bbr", "0.5ms", 0.0);
    assert!(v1_short >= 900.0, "{v1_short:.1}");
    let v1_long = goodput("bbr", "100ms", 0.0);
    assert!(
        (850.0..930.0).contains(&v1_long),
        "v1 at 200 ms: {v1_long:.1}"
    );
}

/// No standing queue: with no random loss, the mean queueing delay at the
/// bottleneck over the last 30 s is at most a quarter of the minimum RTT (sampled
/// every 10 ms; measured 4.5 % at 200 ms). UDT's own control keeps the queue full
/// here, which is the contrast.
#[test]
fn no_standing_queue() {
    for (cc, max_share) in [("bbr-lh", 0.25), ("bbr", 0.25)] {
        let text = common::chain("60s", "1Gbps", "100ms", "1bdp", 0.0, &flows(cc, 1))
            .replace("seed = 1", "seed = 1\nsample_interval = \"10ms\"");
        let r = common::run(&text);
        let i = r.link_names.iter().position(|n| n == "link1").unwrap();
        let q = &r.queue_series[i];
        let last = &q[q.len() - 3000..];
        let mean_pkts = last.iter().map(|&x| f64::from(x)).sum::<f64>() / last.len() as f64;
        // 1500-byte packets at 1 Gb/s: 12 µs each.
        let delay = mean_pkts * 12e-6;
        assert!(
            delay <= max_share * 0.200,
            "{cc}: mean queueing delay {:.1} ms",
            delay * 1e3
        );
    }
}

/// Four `bbr-lh` flows on one bottleneck (RTT 100 ms, starting 0.5 s apart) share
/// it: Jain's index ≥ 0.95 over the last 30 s (measured 0.987; without v3's loss
/// bound 0.951). Together they carry 809 Mb/s of goodput: like Linux's BBR v1,
/// several flows together overestimate the bottleneck, sit on their windows with a
/// standing queue of half the RTT and lose about 8 % at the 1-BDP queue, and v3's
/// bound as here built does not cure that (see docs/bbr.md).
#[test]
fn four_flows_share_fairly() {
    let text = common::chain("60s", "1Gbps", "50ms", "1bdp", 0.0, &flows("bbr-lh", 4));
    let r = common::run(&text);
    let last30: Vec<f64> = r
        .goodput_series
        .iter()
        .map(|s| s[s.len() - 30..].iter().sum::<f64>())
        .collect();
    let j = jain(&last30).unwrap();
    assert!(j >= 0.95, "Jain {j:.4}: {last30:?}");
    let total: f64 = last30.iter().sum::<f64>() / 30.0;
    assert!(total >= 780.0, "the four carried {total:.1} Mb/s");
}

/// TCP BBR in the simulator keeps a 1 Gb/s × 50 ms path with 1e-4 random loss nearly
/// full where CUBIC collapses (60 s: 911.9 against 54.8 Mb/s in the study), paces
/// without a standing queue, and the same seed gives the same bytes.
#[test]
fn tcp_bbr_holds_a_lossy_path_where_cubic_collapses() {
    let run = |cc: &str| {
        let flow = format!("[[flow]]\nprotocol = \"tcp\"\ncc = \"{cc}\"\nmin_rto = \"200ms\"\n");
        common::run(&common::chain("30s", "1Gbps", "25ms", "1bdp", 1e-4, &flow))
    };
    let bbr = run("bbr");
    let g = bbr.summary.flows[0].goodput_mbps;
    assert!(g >= 850.0, "TCP BBR {g:.1}");
    let cubic = run("cubic").summary.flows[0].goodput_mbps;
    assert!(cubic < 0.25 * g, "CUBIC {cubic:.1} against BBR {g:.1}");
    let link = bbr.summary.link("link1").unwrap();
    // Mean queue below a quarter of the BDP (4167 packets).
    assert!(
        link.mean_queue_waiting_pkts < 1042.0,
        "{}",
        link.mean_queue_waiting_pkts
    );
    let again = run("bbr");
    assert_eq!(
        again.summary.flows[0].delivered_bytes,
        bbr.summary.flows[0].delivered_bytes
    );
}

/// On a 200 ms path RFC 6298's RTO with Linux's 200 ms minimum is about SRTT + 1 ms,
/// so a SACK repair that takes a round trip and a half times out, and TCP BBR, which
/// keeps a full flight out, sends all of it again. Linux's formula (`rto = "linux"`,
/// SRTT + at least 200 ms) does not. 1 Gb/s, 1e-4 random loss, 30 s, measured
/// 2026-11-26: 10 timeouts and 141 614 retransmissions (705 Mb/s) against none and
/// 223 (772 Mb/s); CUBIC 1 and 2 436 against none and 9.
#[test]
fn linux_rto_has_no_spurious_timeouts_on_a_long_path() {
    let run = |rto: &str| {
        let flow = format!("[[flow]]\nprotocol = \"tcp\"\ncc = \"bbr\"\n{rto}\n");
        let r = common::run(&common::chain("30s", "1Gbps", "100ms", "1bdp", 1e-4, &flow));
        let f = &r.summary.flows[0];
        (f.timeouts.unwrap(), f.retransmits.unwrap(), f.goodput_mbps)
    };
    let (rfc_rtos, rfc_rtx, rfc_g) = run("min_rto = \"200ms\"");
    let (linux_rtos, linux_rtx, linux_g) = run("rto = \"linux\"");
    assert!(rfc_rtos >= 3, "RFC 6298 at 200 ms: {rfc_rtos} timeouts");
    assert_eq!(linux_rtos, 0, "Linux's formula: {linux_rtos} timeouts");
    // Random loss alone is 1e-4 of some 2.5 M segments; a spurious timeout resends
    // a whole flight (about 17 000 segments).
    assert!(linux_rtx < 1_000, "{linux_rtx} retransmissions");
    assert!(rfc_rtx > 10 * linux_rtx, "{rfc_rtx} against {linux_rtx}");
    assert!(linux_g > rfc_g, "{linux_g:.1} against {rfc_g:.1} Mb/s");
}

/// ProbeBW's window gain (`bbr = { cwnd_gain }`) is what holds several TCP BBR
/// flows' standing queue: four on one bottleneck (1 Gb/s, RTT 100 ms, 1 BDP, 60 s,
/// starting 0.5 s apart, seed 1) queue a mean of 4991 packets (60 ms) with v1's two
/// BDPs and 2589 (31 ms) with 1.25, with 192 k and 79 k drops, Jain 0.81 and 0.98.
/// Four `bbr-lh` UDT flows do not move with it (each one's bandwidth estimate stands
/// near the link's rate, docs/bbr.md); one `bbr-lh` UDT flow loses 59 Mb/s at 200 ms
/// with 1e-4 loss at 1.25, so `bbr-lh` keeps two.
#[test]
fn a_smaller_window_gain_shrinks_four_tcp_bbr_flows_standing_queue() {
    let queue = |gain: f64| {
        let flows: String = (0..4)
            .map(|i| {
                format!(
                    "[[flow]]\nprotocol = \"tcp\"\ncc = \"bbr\"\nmin_rto = \"200ms\"\n\
                     start = \"{}ms\"\nbbr = {{ cwnd_gain = {gain} }}\n",
                    i * 500
                )
            })
            .collect();
        let r = common::run(&common::chain("60s", "1Gbps", "50ms", "1bdp", 0.0, &flows));
        r.summary.link("link1").unwrap().mean_queue_waiting_pkts
    };
    let (v1, small) = (queue(2.0), queue(1.25));
    eprintln!("mean queue: {v1:.0} packets with 2 BDPs, {small:.0} with 1.25");
    assert!(
        small < 0.7 * v1,
        "mean queue {small:.0} against {v1:.0} packets"
    );
}

/// A transfer's four UDT channels over 1 Gb/s × 50 ms, no random loss, a 1 GB
/// file, `couple` as given: its throughput, Mb/s, and the share of the packets
/// offered to the bottleneck that its queue dropped.
fn four_channels(couple: bool) -> (f64, f64) {
    channels_over("1Gbps", "25ms", 0.0, "1GB", "cc = \"bbr-lh\"", couple, 1)
}

/// A transfer's four UDT channels over `rate` with one-way `delay` and random
/// `loss` (on the data's way), a file of `size`, channels set by the `udt` table's
/// `fields`, seed `seed`: its throughput, Mb/s, and the share of the packets
/// offered to the bottleneck that its queue dropped.
fn channels_over(
    rate: &str,
    delay: &str,
    loss: f64,
    size: &str,
    fields: &str,
    couple: bool,
    seed: u64,
) -> (f64, f64) {
    channels_behind(
        "10Gbps", rate, delay, "1bdp", loss, size, fields, couple, seed,
    )
}

/// [`channels_over`] with the sender's access link at `access` and the
/// bottleneck's queue `queue`.
#[allow(clippy::too_many_arguments)]
fn channels_behind(
    access: &str,
    rate: &str,
    delay: &str,
    queue: &str,
    loss: f64,
    size: &str,
    fields: &str,
    couple: bool,
    seed: u64,
) -> (f64, f64) {
    let transfer = format!(
        "[[transfer]]\nname = \"x\"\nfrom = \"n0\"\nto = \"n2\"\ntransport = \"udt\"\n\
         parallelism = 4\nblock_size = \"1MiB\"\nfiles = {{ count = 1, size = \"{size}\" }}\n\
         udt = {{ {fields} }}\ncouple = {couple}\n"
    );
    let text = common::chain("60s", rate, delay, queue, loss, &transfer)
        .replace(
            "seed = 1\n",
            &format!("seed = {seed}\nstop_when_done = true\n"),
        )
        .replacen("rate = \"10Gbps\"", &format!("rate = \"{access}\""), 1);
    let r = common::run(&text);
    let link = r
        .summary
        .links
        .iter()
        .find(|l| l.name == "link1")
        .expect("the bottleneck");
    let dropped = link.drops_queue as f64 / (link.delivered_pkts + link.drops_queue) as f64;
    (r.summary.transfers[0].throughput_mbps, dropped)
}

/// The channels of one transfer share one BBR model (`BbrGroup`), and to the path
/// they are one flow: 4 channels moved 1 GB at 927.3 Mb/s with 0.42 % of what they
/// offered the bottleneck dropped at its queue. As four BBR flows (`couple =
/// false`) each one's estimate stands near the link's rate (docs/bbr.md traces
/// why): 452.4 Mb/s, 26.8 % dropped. The floors: 850 Mb/s and 2 % coupled; at
/// least 10 % dropped uncoupled, so the test also shows the fault it mends.
#[test]
fn a_transfers_bbr_channels_share_the_path_as_one_flow() {
    let (coupled, coupled_drops) = four_channels(true);
    assert!(coupled >= 850.0, "coupled: {coupled:.1} Mb/s");
    assert!(
        coupled_drops <= 0.02,
        "coupled: {:.1} % dropped",
        coupled_drops * 100.0
    );
    let (apart, apart_drops) = four_channels(false);
    assert!(
        apart_drops >= 0.10,
        "uncoupled: {:.1} % dropped",
        apart_drops * 100.0
    );
    assert!(
        coupled > apart,
        "coupled {coupled:.1} against {apart:.1} Mb/s"
    );
}

/// A coupled group of Linux's v1 model gets through ProbeRTT: four `bbr` channels
/// moving 3 GB over 1 Gb/s × 200 ms with 1e-4 loss. Each member keeps two packets
/// out whatever its share of the window (`MIN_WINDOW_PKTS`), so the group's
/// inflight never fell to BBR's four packets, ProbeRTT never began its 200 ms, and
/// from the first expiry of the min RTT, at 15 s, the window stayed at four
/// packets: seed 1 carried 210.4 Mb/s over this test's 60 s (990 Mb/s on the link
/// until then, 0.5 after; 42.4 over `channels.toml`'s 300 s). With the floor raised
/// to the members' eight packets it carries 868.5 (seeds 2-4: 863.6, 857.3, 868.3;
/// 2026-11-29). Floor: 800 Mb/s.
#[test]
fn a_coupled_v1_group_gets_through_probe_rtt() {
    let (mbps, _) = channels_over("1Gbps", "100ms", 1e-4, "3GB", "cc = \"bbr\"", true, 1);
    eprintln!("coupled bbr, seed 1: {mbps:.1} Mb/s");
    assert!(mbps >= 800.0, "{mbps:.1} Mb/s");
}

/// A coupled group's lossy rounds bound its window only over a standing queue
/// (`GROUP_LOSS_NEEDS_QUEUE`), read from RTT samples that holes do not delay
/// (`nak_rtt`), and its pacing makes up for the random loss while no queue stands
/// (`pace_over_loss`): four channels over 100 Mb/s × 20 ms with 5 % random loss on
/// the data's way, 100 MB, periodic NAKs as `longhaul send`'s receivers send them,
/// carry 91.4 Mb/s (2026-11-29; 84.1 before the group's pacing clock and
/// `pace_over_loss`); without `pace_over_loss` 87.8, the link idle for the loss's
/// share of the cruise; with ACK samples only (`nak_rtt = false`) 68.1, the gate
/// fooled by samples that waited behind holes; with v3's bound on every lossy
/// round (`loss_needs_queue = 0`) 43.1; four models, 93.2. Floors: 88 Mb/s, 1.02×
/// without `pace_over_loss`, 1.15× without `nak_rtt`, 1.8× v3's bound.
#[test]
fn a_coupled_group_holds_a_five_percent_loss_path() {
    let run = |bbr: &str| {
        let fields = format!("cc = \"bbr-lh\", nak_report = \"periodic\", bbr = {{ {bbr} }}");
        channels_over("100Mbps", "10ms", 0.05, "100MB", &fields, true, 1).0
    };
    let (gated, unpaced, acks, v3) = (
        run(""),
        run("pace_over_loss = false"),
        run("nak_rtt = false"),
        run("loss_needs_queue = 0.0"),
    );
    eprintln!(
        "coupled at 5 % loss: {gated:.1} Mb/s, {unpaced:.1} without pace_over_loss, \
         {acks:.1} with ACK samples only, {v3:.1} with v3's bound"
    );
    assert!(gated >= 88.0, "{gated:.1} Mb/s");
    assert!(
        gated >= 1.02 * unpaced,
        "{gated:.1} against {unpaced:.1} Mb/s"
    );
    assert!(gated >= 1.15 * acks, "{gated:.1} against {acks:.1} Mb/s");
    assert!(gated >= 1.8 * v3, "{gated:.1} against {v3:.1} Mb/s");
}

/// A coupled group at 1 Gb/s × 1 ms with 1 % loss, four channels, 1 GB, periodic
/// NAKs. On seeds 3, 4 and 7 (of 1-8) the group's Startup overshot before any
/// receiver had measured the link, and Drain then lasted some 340 ms (thirty of
/// the path's 10 ms full-ACK rounds): it ends when what is counted in flight fits
/// a BDP, and hundreds of packets waited on lost retransmissions. Drain's own
/// samples, paced at 0.35 of the estimate, took it from 1000 to 247 Mb/s, v3's
/// bound then held the window to a few packets, and the transfer ran at 10.5 Mb/s.
/// Either of two changes mends it: Drain keeping the estimate (`drain_holds_bw`),
/// or RTT samples from NAKs (`nak_rtt`), with which the standing-queue gate stops
/// v3's bound. Measured (2026-11-28), seeds 3, 4, 7: both 909.9, 888.3, 874.9 Mb/s;
/// the first alone 866.4, 847.9, 871.0; the second alone 909.9, 786.2, 874.9;
/// neither, 11.3 on seed 4 over this test's 60 s. Floors: 600 Mb/s, and below 100 with
/// neither, so the test also shows the fault they mend. (Seed 3 with neither
/// carried 11.3 until a group's Startup read the queue from its round's own
/// samples, which ends that seed's overshoot: 778.7 then.) With the group's
/// pacing clock and `pace_over_loss` (2026-11-29): both 912.0, 885.4, 918.9; the
/// first alone 872.5, 856.3, 855.8; the second alone 912.0, 885.4, 918.9. Seeds
/// 2-8 with neither now carry 765-886 over 300 s and seed 1 collapses (0.7 Mb/s
/// over 60 s), so the fault was shown on seed 1. Since probes last until a
/// reading has seen them and a member that sent lately counts among those
/// sharing the rate (docs/bbr.md, "Slow spells"; 2026-11-29, later), a group
/// climbs out of that fall without either change: seed 1 with neither carries
/// 743.5 Mb/s over 60 s, which the test prints (seeds 2-8, from a scratch loop
/// over this `run`: 829.6-885.9). The test keeps its floors with each change
/// alone; it no longer shows the fault.
#[test]
fn a_coupled_group_keeps_its_estimate_through_a_long_drain() {
    let run = |seed: u64, drain: bool, nak: bool| {
        let fields = format!(
            "cc = \"bbr-lh\", nak_report = \"periodic\", \
             bbr = {{ drain_holds_bw = {drain}, nak_rtt = {nak} }}"
        );
        channels_over("1Gbps", "0.5ms", 0.01, "1GB", &fields, true, seed).0
    };
    for (drain, nak) in [(true, true), (true, false), (false, true)] {
        for seed in [3, 4, 7] {
            let mbps = run(seed, drain, nak);
            eprintln!("seed {seed}, drain_holds_bw {drain}, nak_rtt {nak}: {mbps:.1} Mb/s");
            assert!(mbps >= 600.0, "seed {seed}, {drain}, {nak}: {mbps:.1} Mb/s");
        }
    }
    eprintln!("seed 1 with neither: {:.1} Mb/s", run(1, false, false));
}

/// A coupled group fills a 40 Gb/s × 10 ms path when its receivers time arrivals
/// in nanoseconds, as `longhaul recv`'s do (`arrival_clock = "ns"`). Each of the
/// four channels then runs at about 10 Gb/s, its packets 1.2 µs apart, and UDT4's
/// receivers, timing in whole microseconds with an integer mean, read that as 1
/// µs or 2: the model's estimate sat far under the link, the group moved 8 GB at
/// 11.6 Gb/s, and with nanoseconds at 32.0 (2026-11-29; 131 072-packet buffers,
/// periodic NAKs). Floors: 28 Gb/s in nanoseconds, and under 16 in microseconds,
/// so the test also shows the fault.
#[test]
fn receivers_timing_in_nanoseconds_let_a_group_fill_40_gbps() {
    let run = |clock: &str| {
        let fields = format!(
            "cc = \"bbr-lh\", nak_report = \"periodic\", arrival_clock = \"{clock}\", \
             recv_buffer_pkts = 131072, send_buffer_pkts = 131072, flight_flag_size = 131072"
        );
        channels_behind(
            "400Gbps", "40Gbps", "5ms", "1bdp", 0.0, "8GB", &fields, true, 1,
        )
        .0
    };
    let (ns, us) = (run("ns"), run("udt4"));
    eprintln!("8 GB at 40 Gb/s: {ns:.1} Mb/s timed in ns, {us:.1} in µs");
    assert!(ns >= 28_000.0, "in ns: {ns:.1} Mb/s");
    assert!(us < 16_000.0, "in µs: {us:.1} Mb/s");
}

/// A coupled group over a path like loopback's (5 Gb/s, RTT 20 µs, a 4 MB queue;
/// receivers as `longhaul recv`'s: periodic NAKs, nanosecond clocks) fills it when
/// its window makes room for what the receivers hold (`ack_hold`, as `longhaul
/// send` runs): each receiver acknowledges every 64 of its packets or once per
/// 10 ms, the group's window of two BDPs is about 17 packets, and its members'
/// ACKs come apart, so Linux's ACK-aggregation allowance never sees what they
/// hold. 2 GB moved at 4.8 Gb/s with it and 3.7 without (2026-11-29). Floors:
/// 4.4 Gb/s, and 1.15× without.
#[test]
fn a_group_makes_room_for_what_its_receivers_hold() {
    let run = |hold: bool| {
        let fields = format!(
            "cc = \"bbr-lh\", nak_report = \"periodic\", arrival_clock = \"ns\", \
             bbr = {{ ack_hold = {hold} }}"
        );
        channels_behind(
            "100Gbps", "5Gbps", "0.01ms", "4MB", 0.0, "2GB", &fields, true, 1,
        )
        .0
    };
    let (with, without) = (run(true), run(false));
    eprintln!(
        "2 GB at 5 Gb/s × 20 µs: {with:.1} Mb/s with room for the ACKs held, {without:.1} without"
    );
    assert!(with >= 4400.0, "with: {with:.1} Mb/s");
    assert!(
        with >= 1.15 * without,
        "{with:.1} against {without:.1} Mb/s"
    );
}
