//! What the emulator measures, and the report of a run.
//!
//! Everything is measured inside the emulator, which sees every packet of both
//! directions (no tunnel, no clock sync): a packet's one-way delay is the time from
//! its read off one TUN to its write onto the other, throughput is counted at the
//! write, and loss is counted where it happens, by cause. Metrics follow Pantheon
//! (Yan et al., "Pantheon: the training ground for Internet congestion-control
//! research", USENIX ATC 2018): a flow's throughput runs from its
//! first to its last delivery; delays are reported as p50/p95/p99.

use std::collections::HashMap;
use std::fmt;

use hdrhistogram::Histogram;
use longhaul_wire::Ipv4Packet;
use serde::Serialize;

use crate::config::{DirectionConfig, LinkRate, LossModel, QueueLimit};
use crate::quiet::QUIET_STEAL_SHARE;
use longhaul_model::fifo::Aqm;
use longhaul_model::impair::Impairments;

/// The 5-tuple of a packet (ports are 0 for protocols without them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// IP protocol number.
    pub protocol: u8,
    /// Source address.
    pub src: [u8; 4],
    /// Source port.
    pub src_port: u16,
    /// Destination address.
    pub dst: [u8; 4],
    /// Destination port.
    pub dst_port: u16,
}

impl FlowKey {
    /// The flow of an IPv4 packet, or `None` if it is not one.
    pub fn of(packet: &[u8]) -> Option<FlowKey> {
        let ip = Ipv4Packet::new_checked(packet).ok()?;
        let protocol = u8::from(ip.protocol());
        let p = ip.payload();
        let (src_port, dst_port) = match protocol {
            6 | 17 | 132 if p.len() >= 4 => (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            ),
            _ => (0, 0),
        };
        Some(FlowKey {
            protocol,
            src: ip.src_addr().0,
            src_port,
            dst: ip.dst_addr().0,
            dst_port,
        })
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proto = match self.protocol {
            1 => "icmp".to_string(),
            6 => "tcp".to_string(),
            17 => "udp".to_string(),
            132 => "sctp".to_string(),
            n => format!("ip{n}"),
        };
        let [a, b, c, d] = self.src;
        let [e, g, h, i] = self.dst;
        write!(
            f,
            "{proto} {a}.{b}.{c}.{d}:{} > {e}.{g}.{h}.{i}:{}",
            self.src_port, self.dst_port
        )
    }
}

fn histogram() -> Histogram<u64> {
    // 1 ns to one hour, three significant figures: about 0.1 % relative error.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds")
}

/// Counters of one flow, or of a whole direction.
#[derive(Debug, Clone)]
pub struct Counters {
    /// Packets and bytes read off the TUN.
    pub arrived: (u64, u64),
    /// Packets and bytes written to the far TUN.
    pub delivered: (u64, u64),
    /// Packets the loss model dropped.
    pub lost: u64,
    /// Packets the full queue dropped.
    pub overflow: u64,
    /// Packets RED dropped early.
    pub aqm: u64,
    /// Packets held back to be reordered.
    pub held: u64,
    /// Packets sent twice (the copies).
    pub duplicated: u64,
    /// Packets RED marked Congestion Experienced.
    pub ce_marked: u64,
    /// First arrival and first and last delivery, ns since the run's start.
    pub first_arrival: Option<u64>,
    /// First delivery, ns.
    pub first_delivery: Option<u64>,
    /// Last delivery, ns.
    pub last_delivery: u64,
    /// One-way delays, ns.
    pub owd: Histogram<u64>,
    /// Exact smallest and largest one-way delay, ns.
    pub owd_min_max: (u64, u64),
    /// Delivered bytes per interval.
    pub series: Vec<u64>,
}

impl Counters {
    fn new() -> Self {
        Counters {
            arrived: (0, 0),
            delivered: (0, 0),
            lost: 0,
            overflow: 0,
            aqm: 0,
            held: 0,
            duplicated: 0,
            ce_marked: 0,
            first_arrival: None,
            first_delivery: None,
            last_delivery: 0,
            owd: histogram(),
            owd_min_max: (u64::MAX, 0),
            series: Vec::new(),
        }
    }

    fn arrive(&mut self, now: u64, len: usize) {
        self.arrived.0 += 1;
        self.arrived.1 += len as u64;
        self.first_arrival.get_or_insert(now);
    }

    fn deliver(&mut self, now: u64, owd: u64, len: usize, interval: u64) {
        self.delivered.0 += 1;
        self.delivered.1 += len as u64;
        self.first_delivery.get_or_insert(now);
        self.last_delivery = now;
        let _ = self.owd.record(owd.max(1));
        self.owd_min_max.0 = self.owd_min_max.0.min(owd);
        self.owd_min_max.1 = self.owd_min_max.1.max(owd);
        let bin = (now / interval) as usize;
        if self.series.len() <= bin {
            self.series.resize(bin + 1, 0);
        }
        self.series[bin] += len as u64;
    }

    /// Throughput from the first to the last delivery, b/s (Pantheon's definition).
    pub fn throughput_bps(&self) -> f64 {
        match self.first_delivery {
            Some(first) if self.last_delivery > first => {
                // n packets delivered over n-1 gaps: leave the first one out.
                let n = self.delivered.0;
                let bytes = self.delivered.1 as f64 * (n - 1) as f64 / n as f64;
                bytes * 8.0 / ((self.last_delivery - first) as f64 * 1e-9)
            }
            _ => 0.0,
        }
    }
}

/// One direction's measurements: per flow and in total.
#[derive(Debug, Clone)]
pub struct DirStats {
    interval_ns: u64,
    index: HashMap<FlowKey, usize>,
    /// Flows in order of first appearance.
    pub flows: Vec<(FlowKey, Counters)>,
    /// All packets of the direction, IPv4 or not.
    pub total: Counters,
}

/// Which counters a packet belongs to: its flow's index, or none (not IPv4).
pub type FlowId = Option<usize>;

impl DirStats {
    /// Empty statistics with series binned every `interval_ns`.
    pub fn new(interval_ns: u64) -> Self {
        DirStats {
            interval_ns: interval_ns.max(1),
            index: HashMap::new(),
            flows: Vec::new(),
            total: Counters::new(),
        }
    }

    /// Counts an arriving packet; returns its flow for the later calls.
    pub fn arrive(&mut self, now: u64, packet: &[u8]) -> FlowId {
        self.total.arrive(now, packet.len());
        let key = FlowKey::of(packet)?;
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                self.flows.push((key, Counters::new()));
                self.index.insert(key, self.flows.len() - 1);
                self.flows.len() - 1
            }
        };
        self.flows[i].1.arrive(now, packet.len());
        Some(i)
    }

    /// Counts a random loss.
    pub fn lost(&mut self, flow: FlowId) {
        self.total.lost += 1;
        if let Some(i) = flow {
            self.flows[i].1.lost += 1;
        }
    }

    /// Counts a queue overflow.
    pub fn overflow(&mut self, flow: FlowId) {
        self.total.overflow += 1;
        if let Some(i) = flow {
            self.flows[i].1.overflow += 1;
        }
    }

    /// Counts an early drop by RED.
    pub fn aqm(&mut self, flow: FlowId) {
        self.total.aqm += 1;
        if let Some(i) = flow {
            self.flows[i].1.aqm += 1;
        }
    }

    /// Counts what the impairments and RED did to a delivered packet: held back,
    /// copied, marked.
    pub fn impaired(&mut self, flow: FlowId, held: bool, duplicated: bool, ce: bool) {
        for c in std::iter::once(&mut self.total).chain(flow.map(|i| &mut self.flows[i].1)) {
            c.held += u64::from(held);
            c.duplicated += u64::from(duplicated);
            c.ce_marked += u64::from(ce);
        }
    }

    /// Counts a delivery at `now` of a packet that arrived at `arrived`.
    pub fn deliver(&mut self, flow: FlowId, now: u64, arrived: u64, len: usize) {
        let owd = now.saturating_sub(arrived);
        self.total.deliver(now, owd, len, self.interval_ns);
        if let Some(i) = flow {
            self.flows[i].1.deliver(now, owd, len, self.interval_ns);
        }
    }
}

/// Percentiles of a delay distribution, ms.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct DelayMs {
    /// Smallest (exact).
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest (exact).
    pub max: f64,
}

impl DelayMs {
    fn of(c: &Counters) -> Option<DelayMs> {
        if c.owd.is_empty() {
            return None;
        }
        let ms = |ns: u64| ns as f64 * 1e-6;
        Some(DelayMs {
            min: ms(c.owd_min_max.0),
            p50: ms(c.owd.value_at_quantile(0.50)),
            p95: ms(c.owd.value_at_quantile(0.95)),
            p99: ms(c.owd.value_at_quantile(0.99)),
            max: ms(c.owd_min_max.1),
        })
    }
}

/// One flow in the report.
#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    /// `tcp 10.77.0.1:40000 > 10.77.0.2:5201`.
    pub flow: String,
    /// Packets read off the TUN.
    pub packets_in: u64,
    /// Packets delivered.
    pub packets_out: u64,
    /// Bytes delivered.
    pub bytes_out: u64,
    /// Dropped by the loss model.
    pub lost_random: u64,
    /// Dropped by the full queue.
    pub lost_queue: u64,
    /// Dropped early by RED.
    pub lost_aqm: u64,
    /// Held back to be reordered.
    pub reordered: u64,
    /// Sent twice.
    pub duplicated: u64,
    /// Marked Congestion Experienced by RED.
    pub ce_marked: u64,
    /// First to last delivery, b/s.
    pub throughput_bps: f64,
    /// One-way delay inside the emulator.
    pub owd_ms: Option<DelayMs>,
    /// Delivered b/s per interval.
    pub series_bps: Vec<f64>,
}

/// One direction in the report.
#[derive(Debug, Clone, Serialize)]
pub struct DirReport {
    /// `up` (client to server) or `down`.
    pub name: &'static str,
    /// Configured rate (mean rate of a trace), b/s.
    pub rate_bps: u64,
    /// Whether the rate comes from a trace.
    pub trace: bool,
    /// One-way propagation delay, ms.
    pub delay_ms: f64,
    /// Queue limit.
    pub queue: QueueLimit,
    /// Loss model.
    pub loss: LossModel,
    /// Early drops before the queue's limit.
    pub aqm: Aqm,
    /// Jitter, reordering, duplication.
    pub impairments: Impairments,
    /// Steps of the link's schedule.
    pub schedule_steps: usize,
    /// Packets read off the TUN.
    pub packets_in: u64,
    /// Packets delivered.
    pub packets_out: u64,
    /// Bytes delivered.
    pub bytes_out: u64,
    /// Dropped by the loss model.
    pub lost_random: u64,
    /// Dropped by the full queue.
    pub lost_queue: u64,
    /// Dropped early by RED.
    pub lost_aqm: u64,
    /// Held back to be reordered.
    pub reordered: u64,
    /// Sent twice.
    pub duplicated: u64,
    /// Marked Congestion Experienced by RED.
    pub ce_marked: u64,
    /// Highest queue occupancy, bytes.
    pub peak_queue_bytes: u64,
    /// Delivered bits over what the link could carry from the first arrival to the
    /// last delivery.
    pub utilisation: f64,
    /// First to last delivery, all flows, b/s.
    pub throughput_bps: f64,
    /// One-way delay of all packets.
    pub owd_ms: Option<DelayMs>,
    /// Jain's fairness index over the flows that delivered at least 100 packets.
    pub jain: Option<f64>,
    /// Flows, in order of first packet.
    pub flows: Vec<FlowReport>,
    /// Delivered b/s per interval, all flows.
    pub series_bps: Vec<f64>,
}

impl DirReport {
    /// Builds a direction's report from its configuration, statistics and peak queue.
    pub fn new(
        name: &'static str,
        cfg: &DirectionConfig,
        st: &DirStats,
        peak_queue_bytes: u64,
    ) -> DirReport {
        let interval_s = st.interval_ns as f64 * 1e-9;
        let series = |c: &Counters| -> Vec<f64> {
            c.series
                .iter()
                .map(|&b| b as f64 * 8.0 / interval_s)
                .collect()
        };
        let rate_bps = cfg.rate.mean().as_bps();
        let t = &st.total;
        let utilisation = match t.first_arrival {
            Some(first) if t.last_delivery > first => {
                t.delivered.1 as f64 * 8.0
                    / (rate_bps as f64 * (t.last_delivery - first) as f64 * 1e-9)
            }
            _ => 0.0,
        };
        let flows: Vec<FlowReport> = st
            .flows
            .iter()
            .map(|(k, c)| FlowReport {
                flow: k.to_string(),
                packets_in: c.arrived.0,
                packets_out: c.delivered.0,
                bytes_out: c.delivered.1,
                lost_random: c.lost,
                lost_queue: c.overflow,
                lost_aqm: c.aqm,
                reordered: c.held,
                duplicated: c.duplicated,
                ce_marked: c.ce_marked,
                throughput_bps: c.throughput_bps(),
                owd_ms: DelayMs::of(c),
                series_bps: series(c),
            })
            .collect();
        let big: Vec<f64> = flows
            .iter()
            .filter(|f| f.packets_out >= 100)
            .map(|f| f.throughput_bps)
            .collect();
        DirReport {
            name,
            rate_bps,
            trace: matches!(cfg.rate, LinkRate::Trace(_)),
            delay_ms: cfg.delay.as_secs_f64() * 1e3,
            queue: cfg.queue,
            loss: cfg.loss,
            aqm: cfg.aqm.clone(),
            impairments: cfg.impair,
            schedule_steps: cfg.schedule.len(),
            packets_in: t.arrived.0,
            packets_out: t.delivered.0,
            bytes_out: t.delivered.1,
            lost_random: t.lost,
            lost_queue: t.overflow,
            lost_aqm: t.aqm,
            reordered: t.held,
            duplicated: t.duplicated,
            ce_marked: t.ce_marked,
            peak_queue_bytes,
            utilisation,
            throughput_bps: t.throughput_bps(),
            owd_ms: DelayMs::of(t),
            jain: longhaul_model::jain(&big),
            flows,
            series_bps: series(t),
        }
    }
}

/// Whether a run can be trusted, and the readings that say so.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// No host-side drops or failed writes, timer lateness p99 under
    /// [`LATENESS_P99_LIMIT_US`], the emulator busy less than [`BUSY_LIMIT`].
    pub valid: bool,
    /// Why not, one line per problem.
    pub problems: Vec<String>,
    /// How late packets were written after their due time, µs.
    pub lateness_us_p50: f64,
    /// p99 of the lateness, µs.
    pub lateness_us_p99: f64,
    /// Largest lateness, µs.
    pub lateness_us_max: f64,
    /// Packets the kernel dropped on the client's and the server's TUN (its transmit
    /// queue toward the emulator was full, or a write was refused).
    pub tun_drops: [u64; 2],
    /// Writes the emulator could not complete.
    pub write_errors: u64,
    /// Emulator thread CPU time over wall time (busy-polling included).
    pub cpu_fraction: f64,
    /// The same without the turns that only spun toward a deadline: the share of a
    /// core the emulator needed. Near 1, the emulator is the bottleneck.
    pub busy_fraction: f64,
    /// Wall time of the run, s.
    pub wall_s: f64,
    /// Whether the TUN devices ran with offloads (super-packets).
    pub offload: bool,
    /// Super-packets the emulator could not split (dropped).
    pub malformed: u64,
    /// Super-packets read, and segments they held.
    pub super_reads: [u64; 2],
    /// Writes that carried more than one segment, and the segments they held.
    pub super_writes: [u64; 2],
    /// The CPU the timing thread was pinned to, if it was ([`crate::cpu`]).
    pub timing_cpu: Option<usize>,
    /// The timing thread's nice value, if raising it worked ([`crate::cpu::Raised`]).
    pub timing_nice: Option<i32>,
    /// Whether a thread of the idle class kept the timing CPU from idling
    /// ([`crate::cpu::Awake`]).
    pub kept_awake: bool,
    /// Time during which another task kept the timing thread waiting for its
    /// core (10 ms readings that saw it wait over a millisecond), s; the loop then
    /// sleeps closer to each departure so the other task runs in the gaps.
    pub contended_s: f64,
    /// Time the hypervisor took from the CPUs the timing thread ran on while
    /// they had work ("steal"), s: a host shared with other virtual machines.
    pub steal_s: f64,
    /// The most steal any other CPU had, s: those the applications and the
    /// kernel's steered receive work ran on (none when the timing thread was not
    /// pinned). Reported, not judged: at 1 % of a run, a few 10 ms ticks made
    /// short probe runs invalid (a CI run on 2026-12-02 lost a 3.8 s run to
    /// 0.10 s), while a busy host's applications lost 1.5-4.4 s of 12
    /// (docs/emulator.md).
    pub apps_steal_s: f64,
    /// The CPUs the kernel's receive work was steered to (`rps_cpus`), if it was.
    pub steering: Option<String>,
}

/// Lateness p99 above which a run is invalid, µs.
pub const LATENESS_P99_LIMIT_US: f64 = 100.0;
/// Busy share of a core above which the emulator is taken to be the bottleneck.
pub const BUSY_LIMIT: f64 = 0.9;

impl Health {
    /// Judges a run from its readings.
    pub fn judge(
        lateness: &Histogram<u64>,
        tun_drops: [u64; 2],
        write_errors: u64,
        [cpu_fraction, busy_fraction]: [f64; 2],
        wall_s: f64,
        [steal_s, apps_steal_s]: [f64; 2],
    ) -> Health {
        let us = |q: f64| {
            if lateness.is_empty() {
                0.0
            } else {
                lateness.value_at_quantile(q) as f64 * 1e-3
            }
        };
        let (p50, p99) = (us(0.5), us(0.99));
        let max = lateness.max() as f64 * 1e-3;
        let mut problems = vec![];
        if tun_drops.iter().any(|&d| d > 0) {
            problems.push(format!(
                "the kernel dropped packets at the TUN devices (client {}, server {}): \
                 the emulator did not read fast enough",
                tun_drops[0], tun_drops[1]
            ));
        }
        if write_errors > 0 {
            problems.push(format!("{write_errors} writes to a TUN device failed"));
        }
        if p99 > LATENESS_P99_LIMIT_US {
            // When the hypervisor took over 1 % of the run, say so: no setting of
            // the emulator's can help then, only a quieter host.
            let why = if steal_s > QUIET_STEAL_SHARE * wall_s {
                format!(
                    " (the hypervisor took {steal_s:.2} s from the timing thread's CPUs \
                     in {wall_s:.1} s: the host is oversubscribed)"
                )
            } else {
                String::new()
            };
            problems.push(format!(
                "timer lateness p99 {p99:.0} µs is above {LATENESS_P99_LIMIT_US} µs{why}"
            ));
        }
        if busy_fraction > BUSY_LIMIT {
            problems.push(format!(
                "the emulator was busy {:.0} % of the time: it may be the bottleneck",
                busy_fraction * 100.0
            ));
        }
        Health {
            valid: problems.is_empty(),
            problems,
            lateness_us_p50: p50,
            lateness_us_p99: p99,
            lateness_us_max: max,
            tun_drops,
            write_errors,
            cpu_fraction,
            busy_fraction,
            wall_s,
            offload: false,
            malformed: 0,
            super_reads: [0; 2],
            super_writes: [0; 2],
            timing_cpu: None,
            timing_nice: None,
            kept_awake: false,
            contended_s: 0.0,
            steal_s,
            apps_steal_s,
            steering: None,
        }
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct EmuReport {
    /// The seed of the loss models.
    pub seed: u64,
    /// Width of the series' intervals, s.
    pub interval_s: f64,
    /// Client to server.
    pub up: DirReport,
    /// Server to client.
    pub down: DirReport,
    /// Whether the run can be trusted.
    pub health: Health,
}

/// A lateness histogram (ns).
pub fn lateness_histogram() -> Histogram<u64> {
    histogram()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(src_port: u16, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        p[20..22].copy_from_slice(&src_port.to_be_bytes());
        p[22..24].copy_from_slice(&9000u16.to_be_bytes());
        p
    }

    /// A late run on a host whose hypervisor took over 1 % of the run names
    /// the steal beside the lateness; a late run without steal, or an on-time
    /// one with it, does not (but both record it).
    #[test]
    fn steal_is_named_beside_lateness_only_when_it_matters() {
        let health = |late_us: u64| {
            let mut h = lateness_histogram();
            for _ in 0..100 {
                h.record(late_us * 1000).unwrap();
            }
            move |steal_s| Health::judge(&h, [0, 0], 0, [0.2, 0.1], 10.0, [steal_s, 0.0])
        };
        let late = health(500)(0.5);
        assert!(!late.valid);
        assert_eq!(late.steal_s, 0.5);
        assert!(late.problems[0].contains("0.50 s from the timing thread's CPUs in 10.0 s"));
        let little = health(500)(0.05);
        assert!(!little.problems[0].contains("hypervisor"), "{little:?}");
        let on_time = health(20)(0.5);
        assert!(on_time.valid && on_time.problems.is_empty(), "{on_time:?}");
        assert_eq!(on_time.steal_s, 0.5);
    }

    /// Steal on the applications' CPUs is recorded and does not invalidate a
    /// punctual run.
    #[test]
    fn steal_from_the_applications_cpus_is_recorded_not_judged() {
        let mut h = lateness_histogram();
        for _ in 0..100 {
            h.record(20_000).unwrap();
        }
        let stolen = Health::judge(&h, [0, 0], 0, [0.2, 0.1], 10.0, [0.0, 0.15]);
        assert_eq!(stolen.apps_steal_s, 0.15);
        assert!(stolen.valid && stolen.problems.is_empty(), "{stolen:?}");
    }

    #[test]
    fn flows_are_told_apart_and_counted() {
        let mut st = DirStats::new(100_000_000);
        let a = st.arrive(0, &udp(1, 1000));
        let b = st.arrive(0, &udp(2, 500));
        assert_eq!(st.arrive(0, &[0x60, 0, 0]), None); // not IPv4
        assert_ne!(a, b);
        st.deliver(a, 10_000_000, 0, 1000);
        st.deliver(a, 110_000_000, 0, 1000);
        st.lost(b);
        assert_eq!(
            st.flows[0].0.to_string(),
            "udp 10.77.0.1:1 > 10.77.0.2:9000"
        );
        let c = &st.flows[0].1;
        assert_eq!(c.delivered, (2, 2000));
        assert_eq!(c.series, vec![1000, 1000]);
        // One packet's worth over 100 ms.
        assert!((c.throughput_bps() - 80_000.0).abs() < 1e-6);
        assert_eq!(st.total.arrived, (3, 1503));
        assert_eq!(st.flows[1].1.lost, 1);
    }
}
