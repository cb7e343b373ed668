//! TCP's congestion controls beyond NewReno and CUBIC against their response
//! functions (goodput against random loss on a long path where the window, not
//! the link, is the limit) and the delay-based ones against their equilibrium
//! queues. Each test states its oracle and tolerance.
//!
//! Where a paper gives a closed form it is the oracle (RFC 3649 for HighSpeed,
//! Kelly's for Scalable, Floyd's AIMD response function for Illinois far from
//! congestion). BIC, H-TCP and Westwood+ have none that holds under random
//! loss; their oracle is the algorithm's own rule integrated once per RTT under
//! the same Bernoulli loss (a fluid model, below), which the packet-level
//! engine, with its per-ACK arithmetic, delayed ACKs, SACK recovery and timers,
//! must follow within ±20 %.

mod common;

use common::{chain, run};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Steady-state mean window, segments, of one TCP flow of `cc` under random loss
/// `p` over RTT 100 ms on a 10 Gb/s bottleneck that is never the limit (the first
/// 20 % of the run left out). The window is goodput x RTT / MSS.
fn mean_window(cc: &str, p: f64, secs: u32) -> f64 {
    let mss = 1448.0;
    let flows = format!("[[flow]]\nprotocol = \"tcp\"\ncc = \"{cc}\"\nrecv_buffer = \"1GiB\"\nsend_buffer = \"1GiB\"\n");
    let text = chain(&format!("{secs}s"), "10Gbps", "50ms", "1bdp", p, &flows).replace(
        "plots = false",
        "plots = false\ntrace = true\ntrace_interval = \"1s\"",
    );
    let r = run(&text);
    let warm = r.trace.len() / 5;
    let (a, z) = (&r.trace[warm], r.trace.last().unwrap());
    let bps = (z.delivered_bytes - a.delivered_bytes) as f64 * 8.0 / (z.time_s - a.time_s);
    bps * 0.1 / (mss * 8.0)
}

/// HighSpeed TCP's response function, RFC 3649 §5: `w = 0.12 / p^0.835` segments,
/// ±20 %, at three loss rates where the window is above Low_Window (38). Measured:
/// 0.92, 0.95 and 1.03 of the RFC's.
#[test]
fn highspeed_tcp_follows_rfc_3649s_response_function() {
    for (p, secs) in [(1e-4, 300), (1e-5, 600), (1e-6, 600)] {
        let w = mean_window("hstcp", p, secs);
        let rfc = 0.12 / p.powf(0.835);
        eprintln!("hstcp p {p:e}: window {w:.0} segments, RFC 3649 {rfc:.0}");
        assert!((w / rfc - 1.0).abs() <= 0.2, "p {p}: {w:.0} vs {rfc:.0}");
    }
}

/// Scalable TCP's response function (Kelly 2003): `w = ln(1 + a) / (b p)`, about
/// `0.08 / p` segments, ±20 %, at three loss rates where the window is above
/// Linux's 100-segment switch to Reno's increase. (Kelly's form takes one loss
/// every 1/p packets; under Bernoulli loss the mean is ln(1 + a) / (p ln(1/(1-b))),
/// 6 % lower. Measured: 1.02, 1.04 and 0.90 of Kelly's.)
#[test]
fn scalable_tcp_follows_its_response_function() {
    for (p, secs) in [(2e-4, 300), (5e-5, 300), (1e-5, 600)] {
        let w = mean_window("scalable", p, secs);
        let kelly = (1.01f64).ln() / (0.125 * p);
        eprintln!("scalable p {p:e}: window {w:.0} segments, Kelly {kelly:.0}");
        assert!(
            (w / kelly - 1.0).abs() <= 0.2,
            "p {p}: {w:.0} vs {kelly:.0}"
        );
    }
}

/// The fluid oracle: the mean window, segments, of a flow whose window grows by
/// `grow(w)` per loss-free RTT and, in an RTT with a loss (each of its `w`
/// packets lost with probability `p`), sends one more RTT at `recover(w).0`
/// and leaves recovery at `recover(w).1`. 400 000 RTTs.
fn fluid<M: FluidModel>(mut m: M, p: f64) -> f64 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let (mut w, mut sum, mut n) = (10.0f64, 0.0, 0u64);
    for _ in 0..400_000 {
        sum += w;
        n += 1;
        if rng.gen::<f64>() < 1.0 - (1.0 - p).powf(w) {
            let (during, after) = m.on_loss(w);
            sum += during;
            n += 1;
            w = after.max(2.0);
        } else {
            w = m.on_rtt(w);
        }
    }
    sum / n as f64
}

/// One algorithm's per-RTT rule, for [`fluid`].
trait FluidModel {
    /// The window after a loss-free RTT at `w`.
    fn on_rtt(&mut self, w: f64) -> f64;
    /// The window during the recovery RTT, and after it.
    fn on_loss(&mut self, w: f64) -> (f64, f64);
}

/// BIC as Linux's `tcp_bic`: the increase per RTT is the binary search's step
/// (a quarter of the way to W_max, at most 16), max probing past W_max, 5 %
/// per RTT before the first loss; doubled, as Linux's ACK-ratio scaling does
/// with a receiver that ACKs every second segment; β = 0.8 with fast
/// convergence.
struct BicFluid {
    w_max: f64,
}

impl FluidModel for BicFluid {
    fn on_rtt(&mut self, w: f64) -> f64 {
        let inc = if w <= 14.0 {
            1.0
        } else if w < self.w_max {
            let d = (self.w_max - w) / 4.0;
            if d > 16.0 {
                16.0
            } else if d <= 1.0 {
                0.2
            } else {
                d
            }
        } else if w < self.w_max + 4.0 {
            0.2
        } else if w < self.w_max + 48.0 {
            (w - self.w_max) / 3.0
        } else {
            16.0
        };
        let inc = if self.w_max == 0.0 {
            inc.min(w / 20.0)
        } else {
            inc
        };
        w + 2.0 * inc
    }
    fn on_loss(&mut self, w: f64) -> (f64, f64) {
        self.w_max = if w < self.w_max { w * 0.9 } else { w };
        (w * 0.8, w * 0.8)
    }
}

/// H-TCP (Leith, Shorten 2004) at RTT 100 ms (so RTT scaling is 1) on a path
/// with no queue (so RTT_min / RTT_max is 1 and β is 0.8 once armed): per RTT
/// α = 2 (1 - β) (1 + 10 (Δ - 1) + ((Δ - 1) / 2)^2) for Δ > 1 s since the last
/// loss, else 2 (1 - β); β falls to 0.5 (and must be armed again) when the
/// largest window of an epoch moved more than 20 % from the epoch before.
struct HtcpFluid {
    delta: f64,
    beta: f64,
    armed: bool,
    max_w: f64,
    old_max_w: f64,
}

impl FluidModel for HtcpFluid {
    fn on_rtt(&mut self, w: f64) -> f64 {
        self.delta += 0.1;
        let d = self.delta - 1.0;
        let f = if d <= 0.0 {
            1.0
        } else {
            1.0 + 10.0 * d + (d / 2.0).powi(2)
        };
        let w = w + 2.0 * (1.0 - self.beta) * f;
        self.max_w = self.max_w.max(w);
        w
    }
    fn on_loss(&mut self, w: f64) -> (f64, f64) {
        let (m, old) = (self.max_w, self.old_max_w);
        if !(4.0 * old..=6.0 * old).contains(&(5.0 * m)) {
            (self.beta, self.armed) = (0.5, false);
        } else if self.armed {
            self.beta = 0.8;
        } else {
            (self.beta, self.armed) = (0.5, true);
        }
        (self.old_max_w, self.max_w, self.delta) = (m, 0.0, 0.0);
        (w * self.beta, w * self.beta)
    }
}

/// Westwood+ on a path with no queue: Reno's one segment per RTT; the bandwidth
/// estimate is two passes of a 1/8 low-pass filter over one sample per RTT of
/// what the previous RTT sent (the ACKs of a round deliver the round before);
/// recovery runs at Reno's half and ends at the estimate times RTT_min.
struct WestwoodFluid {
    bw: f64,
    bw_ns: f64,
    prev: Option<f64>,
}

impl WestwoodFluid {
    fn sample(&mut self) {
        let Some(x) = self.prev else { return };
        if self.bw == 0.0 {
            (self.bw, self.bw_ns) = (x, x);
        } else {
            self.bw_ns = (7.0 * self.bw_ns + x) / 8.0;
            self.bw = (7.0 * self.bw + self.bw_ns) / 8.0;
        }
    }
}

impl FluidModel for WestwoodFluid {
    fn on_rtt(&mut self, w: f64) -> f64 {
        self.sample();
        self.prev = Some(w);
        w + 1.0
    }
    fn on_loss(&mut self, w: f64) -> (f64, f64) {
        self.sample();
        self.sample_after(w);
        (w / 2.0, self.bw)
    }
}

impl WestwoodFluid {
    /// The loss RTT sent `w`; its ACKs arrive during recovery.
    fn sample_after(&mut self, w: f64) {
        self.prev = Some(w);
        self.sample();
        self.prev = Some(w / 2.0);
    }
}

/// Checks `cc`'s mean window against `oracle` at each `(p, seconds)`, ±20 %.
fn follows(cc: &str, points: &[(f64, u32)], oracle: impl Fn(f64) -> f64) {
    for &(p, secs) in points {
        let w = mean_window(cc, p, secs);
        let o = oracle(p);
        eprintln!(
            "{cc} p {p:e}: window {w:.0} segments, oracle {o:.0}, ratio {:.2}",
            w / o
        );
        assert!((w / o - 1.0).abs() <= 0.2, "{cc} p {p}: {w:.0} vs {o:.0}");
    }
}

/// BIC against its fluid model (see [`BicFluid`]). Measured 0.91, 0.81 and 0.89
/// of it (the model recovers in one RTT at 0.8 W; SACK recovery spends longer).
#[test]
fn bic_follows_its_rule_per_rtt() {
    follows("bic", &[(1e-3, 120), (1e-4, 300), (1e-5, 600)], |p| {
        fluid(BicFluid { w_max: 0.0 }, p)
    });
}

/// H-TCP against its fluid model (see [`HtcpFluid`]). Measured 0.93, 0.91 and
/// 1.03 of it.
#[test]
fn htcp_follows_its_rule_per_rtt() {
    follows("htcp", &[(1e-4, 300), (1e-5, 600), (1e-6, 600)], |p| {
        let m = HtcpFluid {
            delta: 0.0,
            beta: 0.5,
            armed: false,
            max_w: 0.0,
            old_max_w: 0.0,
        };
        fluid(m, p)
    });
}

/// Westwood+ against its fluid model (see [`WestwoodFluid`]). Measured 1.16,
/// 1.01 and 1.10 of it. Not at 1e-6: there a loss costs the window only the
/// estimate's lag behind it, tens of segments against a window of thousands,
/// so the mean window hangs on that lag's fine detail (the engine's is 1.5x the
/// model's).
#[test]
fn westwood_follows_its_rule_per_rtt() {
    follows("westwood", &[(1e-3, 120), (1e-4, 300), (1e-5, 600)], |p| {
        let m = WestwoodFluid {
            bw: 0.0,
            bw_ns: 0.0,
            prev: None,
        };
        fluid(m, p)
    });
}

/// TCP-Illinois far from congestion (no queue: queueing delay below d_1 and d_2)
/// is AIMD with α_max = 10, β_min = 1/8, whose response function (Floyd,
/// Handley, Padhye, "A Comparison of Equation-Based and AIMD Congestion
/// Control", 2000) is `w = sqrt(α (2 - β) / (2 β p))`, ±20 %. Measured 1.05,
/// 0.98 and 0.98 of it.
#[test]
fn illinois_far_from_congestion_is_aimd_10_one_eighth() {
    follows("illinois", &[(1e-3, 120), (1e-4, 300), (1e-5, 600)], |p| {
        let (a, b) = (10.0, 0.125);
        (a * (2.0 - b) / (2.0 * b * p)).sqrt()
    });
}

/// The bottleneck's mean queue, packets waiting, between `t1` and `t2` seconds
/// of one `cc` flow over 100 Mb/s x 50 ms with a 1-BDP buffer: two runs of the
/// same seed, the shorter a prefix of the longer, so the difference of their
/// accumulated waiting is the interval's alone (the start-up is left out).
fn equilibrium_queue(cc: &str, t1: u32, t2: u32) -> f64 {
    let flows = format!("[[flow]]\nprotocol = \"tcp\"\ncc = \"{cc}\"\n");
    let waiting = |secs: u32| {
        let r = run(&chain(
            &format!("{secs}s"),
            "100Mbps",
            "25ms",
            "1bdp",
            0.0,
            &flows,
        ));
        r.summary.link("link1").unwrap().mean_queue_waiting_pkts * f64::from(secs)
    };
    (waiting(t2) - waiting(t1)) / f64::from(t2 - t1)
}

/// Vegas (Linux's α = 2, β = 4) holds between α and β segments in the queue at
/// equilibrium, within one packet. Measured: 4.84.
#[test]
fn vegas_holds_alpha_to_beta_packets_queued() {
    let q = equilibrium_queue("vegas", 30, 60);
    eprintln!("vegas: {q:.2} packets queued");
    assert!((1.0..=5.0).contains(&q), "queue {q:.2}");
}

/// FAST TCP holds α = 200 segments in the queue at equilibrium, within one
/// packet. Measured: 199.8.
#[test]
fn fast_holds_alpha_packets_queued() {
    let q = equilibrium_queue("fast", 30, 60);
    eprintln!("fast: {q:.2} packets queued");
    assert!((q - 200.0).abs() <= 1.0, "queue {q:.2}");
}

/// One flow of `cc` with `hystart` over 1 Gb/s x 100 ms with a 1-BDP DropTail
/// buffer, no random loss, 20 s: retransmissions, and the window (segments) and
/// time at which slow start ended (ssthresh first set), from a 20 ms trace.
fn slow_start_exit(cc: &str, hystart: &str) -> (u64, Option<(f64, f64)>) {
    let flows = format!("[[flow]]\nprotocol = \"tcp\"\ncc = \"{cc}\"\nhystart = \"{hystart}\"\n");
    let text = chain("20s", "1Gbps", "50ms", "1bdp", 0.0, &flows).replace(
        "plots = false",
        "plots = false\ntrace = true\ntrace_interval = \"20ms\"",
    );
    let r = run(&text);
    let exit = r
        .trace
        .iter()
        .find(|t| t.ssthresh_bytes != u64::MAX)
        .map(|t| (t.time_s, t.cwnd_bytes as f64 / 1448.0));
    (r.summary.flows[0].retransmits.unwrap_or(0), exit)
}

/// Linux CUBIC's HyStart (CUBIC's default here, as in Linux) leaves slow start
/// before the first loss on a 1 Gb/s x 100 ms path with a 1-BDP buffer: no
/// retransmission in 20 s, and the window at the exit between one and two BDPs
/// (8633 segments of 1448 bytes; measured: 10345, by the ACK train at 1.36 s).
/// Without it the last doubling overflows the buffer (30 336 retransmissions);
/// HyStart++ (RFC 9406) on the same path notices the delay a round late and its
/// Conservative Slow Start still overflows, with fewer losses (14 009).
#[test]
fn hystart_leaves_slow_start_before_the_first_loss() {
    let bdp = 1e9 * 0.1 / 8.0 / 1448.0;
    for cc in ["cubic", "newreno"] {
        let (retx, exit) = slow_start_exit(cc, "linux");
        let (t, w) = exit.expect("left slow start");
        eprintln!(
            "{cc} linux: {retx} retransmissions, slow start left at {t:.2} s with {w:.0} segments"
        );
        assert_eq!(retx, 0, "{cc}");
        assert!(
            (bdp..2.0 * bdp).contains(&w),
            "{cc}: {w:.0} segments at exit"
        );
    }
    let (off, _) = slow_start_exit("cubic", "off");
    let (rfc, _) = slow_start_exit("cubic", "rfc9406");
    eprintln!("cubic: {off} retransmissions without HyStart, {rfc} with HyStart++");
    assert!(off > 10_000, "{off}");
    assert!((rfc as f64) < 0.75 * off as f64, "{rfc} vs {off}");
}
