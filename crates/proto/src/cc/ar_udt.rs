//! AR-UDT: UDT with a sending period that keeps adapting inside the SYN interval, as
//! the AR-UDT study states it (Dosik An, Gicheol Wang, Seunghae Kim and Gihwan Cho,
//! "An Adaptive UDT Rate Control Method on Network Traffic Condition", in Korean;
//! `studies/ar-udt/README.md`).
//!
//! On every full ACK the RTT it carries feeds a two-step linear prediction:
//!
//! ```text
//! R_next = ((R[t-1] - R[t-2]) * w1 + (R[t] - R[t-1]) * w2) / 2 + R[t]     w1 + w2 = 1, w2 > w1
//! Ridr   = R_next / R[t]
//! PktSPW = 0.99  if Ridr <= alpha;   0.999 if alpha < Ridr <= 1.0;
//!          1.0   if 1.0 < Ridr < beta;  1.001 otherwise        (alpha = 0.996, beta = 1.004)
//! ```
//!
//! Then, until the next ACK, each time the next sequence number to send is a multiple
//! of 16 the sending period is multiplied by PktSPW: a falling RTT speeds the flow up
//! geometrically within the SYN, a rising one slows it down. After a NAK, AR-UDT is
//! plain UDT (x1.125, then a constant period) until the next ACK.
//!
//! The paper leaves open what the next ACK's UDT rate control starts from; the two
//! readings are named [`SpwScope`]s:
//! - `Persistent` (the default, Fig. 6 taken literally): `PktSP` is UDT's one sending
//!   period, so the in-SYN changes accumulate from SYN to SYN and UDT's next increase
//!   starts from the adjusted period;
//! - `Syn`: "the period computed on receiving the ACK, multiplied by PktSPW" (§III.3)
//!   is read as a change that lives inside one SYN: at each ACK the period restarts
//!   from UDT's own, which evolves as plain UDT's.
//!
//! Where the paper is silent: the adjustment is not applied during slow start (UDT
//! is window-limited there and its period is a placeholder), and no prediction is
//! made before three RTT samples exist (PktSPW = 1). w1, w2, alpha, beta and the four
//! factors are parameters; factors of 1 make AR-UDT exactly UDT.

use super::udt::{Udt, UdtInputs, UdtRateControl};
use crate::seq::UdtSeqNumber;
use crate::time::Instant;

/// How long an in-SYN period adjustment lasts (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpwScope {
    /// The adjustments change UDT's sending period for good.
    #[default]
    Persistent,
    /// The adjustments apply until the next ACK, on top of UDT's own period.
    Syn,
}

/// AR-UDT's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArUdtConfig {
    /// Weight of the older RTT slope.
    pub w1: f64,
    /// Weight of the newer RTT slope (w2 > w1, w1 + w2 = 1).
    pub w2: f64,
    /// Lower Ridr threshold.
    pub alpha: f64,
    /// Upper Ridr threshold.
    pub beta: f64,
    /// PktSPW for the four classes, from "RTT falling" to "RTT rising".
    pub factors: [f64; 4],
    /// How long an adjustment lasts.
    pub scope: SpwScope,
}

impl Default for ArUdtConfig {
    /// The study's values; w1/w2 = 0.25/0.75 (the paper gives none; w2 > w1 as it
    /// requires).
    fn default() -> Self {
        ArUdtConfig {
            w1: 0.25,
            w2: 0.75,
            alpha: 0.996,
            beta: 1.004,
            factors: [0.99, 0.999, 1.0, 1.001],
            scope: SpwScope::Persistent,
        }
    }
}

impl ArUdtConfig {
    /// The class (0-3) of a predicted RTT ratio.
    pub fn classify(&self, ridr: f64) -> usize {
        if ridr <= self.alpha {
            0
        } else if ridr <= 1.0 {
            1
        } else if ridr < self.beta {
            2
        } else {
            3
        }
    }
}

/// AR-UDT rate control.
#[derive(Debug, Clone)]
pub struct ArUdt {
    udt: Udt,
    config: ArUdtConfig,
    /// `R[t]`, `R[t-1]`, `R[t-2]`, µs; `samples` of them are valid.
    rtt: [f64; 3],
    samples: usize,
    pkt_spw: f64,
    /// The product of the adjustments since the last ACK (`SpwScope::Syn`).
    in_syn_scale: f64,
    class_counts: [u64; 4],
}

impl ArUdt {
    /// AR-UDT over the UDT controller `udt`.
    pub fn new(udt: Udt, config: ArUdtConfig) -> Self {
        ArUdt {
            udt,
            config,
            rtt: [0.0; 3],
            samples: 0,
            pkt_spw: 1.0,
            in_syn_scale: 1.0,
            class_counts: [0; 4],
        }
    }
    /// The current PktSPW.
    pub fn pkt_spw(&self) -> f64 {
        self.pkt_spw
    }
    /// How often each class was chosen.
    pub fn class_counts(&self) -> [u64; 4] {
        self.class_counts
    }
    /// The UDT controller underneath.
    pub fn udt(&self) -> &Udt {
        &self.udt
    }
}

impl UdtRateControl for ArUdt {
    fn on_ack(&mut self, now: Instant, ack: UdtSeqNumber, inputs: &UdtInputs) {
        self.udt.on_ack(now, ack, inputs);
        self.in_syn_scale = 1.0;
        self.rtt = [inputs.ack_rtt_us, self.rtt[0], self.rtt[1]];
        self.samples = (self.samples + 1).min(3);
        self.pkt_spw = 1.0;
        if self.samples < 3 || self.rtt[0] <= 0.0 {
            return;
        }
        let [r0, r1, r2] = self.rtt;
        let c = &self.config;
        let r_next = ((r1 - r2) * c.w1 + (r0 - r1) * c.w2) / 2.0 + r0;
        let class = c.classify(r_next / r0);
        self.class_counts[class] += 1;
        self.pkt_spw = c.factors[class];
    }

    fn on_loss(&mut self, now: Instant, first_lost: UdtSeqNumber, inputs: &UdtInputs) {
        // Plain UDT until the next ACK: in `Syn` scope, from UDT's own period.
        self.udt.on_loss(now, first_lost, inputs);
        self.pkt_spw = 1.0;
        self.in_syn_scale = 1.0;
    }

    fn on_timeout(&mut self, now: Instant, inputs: &UdtInputs) {
        self.udt.on_timeout(now, inputs);
    }

    fn on_packet_sent(&mut self, now: Instant, due: Instant, seq: UdtSeqNumber) {
        self.udt.on_packet_sent(now, due, seq);
        if !self.udt.in_slow_start() && seq.inc().value().is_multiple_of(16) && self.pkt_spw != 1.0
        {
            match self.config.scope {
                SpwScope::Persistent => self.udt.scale_period(self.pkt_spw),
                SpwScope::Syn => self.in_syn_scale *= self.pkt_spw,
            }
        }
    }

    fn pkt_snd_period_us(&self) -> f64 {
        self.udt.pkt_snd_period_us() * self.in_syn_scale
    }
    fn cwnd_pkts(&self) -> f64 {
        self.udt.cwnd_pkts()
    }
    fn in_slow_start(&self) -> bool {
        self.udt.in_slow_start()
    }
}

#[cfg(test)]
mod tests {
    use super::super::udt::UdtConfig;
    use super::*;

    /// When the tests' packets are sent (and due).
    const AT_50MS: Instant = Instant::from_nanos(50_000_000);

    fn inputs(ack_rtt_us: f64, rcv: u32) -> UdtInputs {
        UdtInputs {
            rtt_us: 100_000.0,
            rcv_rate_pps: rcv,
            bandwidth_pps: 83_333,
            mss: 1500,
            max_cwnd_pkts: 64.0,
            snd_curr_seq: UdtSeqNumber::new(5000),
            ack_rtt_us,
            ack_recv_rate_pps: 0,
            ack_bandwidth_pps: 0,
        }
    }

    #[test]
    fn classes_at_their_boundaries() {
        let c = ArUdtConfig::default();
        assert_eq!(c.classify(0.5), 0);
        assert_eq!(c.classify(0.996), 0, "Ridr <= alpha");
        assert_eq!(c.classify(0.996_000_1), 1);
        assert_eq!(c.classify(1.0), 1, "alpha < Ridr <= 1");
        assert_eq!(c.classify(1.000_000_1), 2);
        assert_eq!(c.classify(1.003_999_9), 2, "1 < Ridr < beta");
        assert_eq!(c.classify(1.004), 3, "beta itself is the top class");
        assert_eq!(c.classify(2.0), 3);
    }

    /// A controller past slow start (the flow window of 64 is crossed on the first
    /// rate-control ACK).
    fn started(config: ArUdtConfig) -> ArUdt {
        let udt = Udt::new(UdtConfig::default(), Instant::ZERO, UdtSeqNumber::new(0));
        let mut a = ArUdt::new(udt, config);
        a.on_ack(
            Instant::from_nanos(10_000_000),
            UdtSeqNumber::new(100),
            &inputs(100_000.0, 50_000),
        );
        assert!(!a.in_slow_start());
        a
    }

    #[test]
    fn falling_rtt_speeds_up_within_the_syn() {
        let mut a = started(ArUdtConfig::default());
        for (i, rtt) in [100_000.0, 99_000.0, 98_000.0].into_iter().enumerate() {
            let t = Instant::from_nanos(20_000_000 + i as u64 * 10_000_000);
            a.on_ack(t, UdtSeqNumber::new(100), &inputs(rtt, 50_000));
        }
        // R_next = ((-1000)*0.25 + (-1000)*0.75)/2 + 98000 = 97500: Ridr 0.9949 <= alpha.
        assert_eq!(a.pkt_spw(), 0.99);
        let p = a.pkt_snd_period_us();
        // 32 packets: seq 15 and 31 precede multiples of 16, so two adjustments.
        for s in 0..32 {
            a.on_packet_sent(AT_50MS, AT_50MS, UdtSeqNumber::new(s));
        }
        assert!((a.pkt_snd_period_us() - p * 0.99 * 0.99).abs() < 1e-9);
        assert_eq!(a.class_counts()[0], 1);
        // A NAK: plain UDT until the next ACK.
        a.on_loss(
            Instant::from_nanos(50_000_000),
            UdtSeqNumber::new(6000),
            &inputs(0.0, 50_000),
        );
        let p = a.pkt_snd_period_us();
        for s in 32..64 {
            a.on_packet_sent(AT_50MS, AT_50MS, UdtSeqNumber::new(s));
        }
        assert_eq!(a.pkt_snd_period_us(), p);
    }

    /// In `Syn` scope the adjustments stop at the next ACK, where the period restarts
    /// from UDT's own; in `Persistent` scope UDT continues from the adjusted period.
    #[test]
    fn syn_scope_restarts_from_udts_period_at_each_ack() {
        let run = |scope: SpwScope| {
            let mut a = started(ArUdtConfig {
                scope,
                ..ArUdtConfig::default()
            });
            for (i, rtt) in [100_000.0, 99_000.0, 98_000.0].into_iter().enumerate() {
                let t = Instant::from_nanos(20_000_000 + i as u64 * 10_000_000);
                a.on_ack(t, UdtSeqNumber::new(100), &inputs(rtt, 50_000));
            }
            let before = a.pkt_snd_period_us();
            for s in 0..160 {
                a.on_packet_sent(AT_50MS, AT_50MS, UdtSeqNumber::new(s));
            }
            // Ten adjustments of 0.99 within the SYN, in either scope.
            assert!((a.pkt_snd_period_us() - before * 0.99f64.powi(10)).abs() < 1e-9);
            a.on_ack(
                Instant::from_nanos(60_000_000),
                UdtSeqNumber::new(200),
                &inputs(98_000.0, 50_000),
            );
            (a.pkt_snd_period_us(), a.udt().pkt_snd_period_us(), before)
        };
        let (syn, syn_udt, before) = run(SpwScope::Syn);
        assert_eq!(syn, syn_udt, "the scale is gone after the ACK");
        assert!(
            syn < before && syn > before * 0.99,
            "UDT's own small increase"
        );
        let (per, _, _) = run(SpwScope::Persistent);
        assert!(
            per < before * 0.99f64.powi(10),
            "UDT continued from the adjusted period"
        );
    }

    /// With every factor 1, AR-UDT is UDT: the same inputs give the same periods.
    #[test]
    fn unit_factors_make_it_udt() {
        let cfg = ArUdtConfig {
            factors: [1.0; 4],
            ..ArUdtConfig::default()
        };
        let mut ar = ArUdt::new(
            Udt::new(UdtConfig::default(), Instant::ZERO, UdtSeqNumber::new(0)),
            cfg,
        );
        let mut udt = Udt::new(UdtConfig::default(), Instant::ZERO, UdtSeqNumber::new(0));
        let mut x: u64 = 7;
        for step in 0..5000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let now = Instant::from_nanos(step * 3_000_000);
            let inp = inputs(
                80_000.0 + (x >> 50) as f64,
                40_000 + (x >> 48) as u32 % 20_000,
            );
            match x >> 61 {
                0 => {
                    let first = UdtSeqNumber::new((step as u32) * 7);
                    ar.on_loss(now, first, &inp);
                    udt.on_loss(now, first, &inp);
                }
                1 | 2 => {
                    ar.on_ack(now, UdtSeqNumber::new(step as u32 * 10), &inp);
                    udt.on_ack(now, UdtSeqNumber::new(step as u32 * 10), &inp);
                }
                _ => {
                    ar.on_packet_sent(now, now, UdtSeqNumber::new(step as u32));
                    udt.on_packet_sent(now, now, UdtSeqNumber::new(step as u32));
                }
            }
            assert_eq!(
                ar.pkt_snd_period_us(),
                udt.pkt_snd_period_us(),
                "step {step}"
            );
            assert_eq!(ar.cwnd_pkts(), udt.cwnd_pkts());
        }
    }
}
