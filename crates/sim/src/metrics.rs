//! What a run measured: the summary written as `summary.json`, and the series.

use serde::Serialize;

/// Per-flow results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowSummary {
    /// Index in the scenario's flow list.
    pub id: usize,
    /// `tcp`, `udp`, `udt` or `sctp`.
    pub protocol: String,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Start, seconds.
    pub start_s: f64,
    /// Payload bytes delivered in order to the receiving application.
    pub delivered_bytes: u64,
    /// Delivered bytes over the flow's active time (start to completion, or to the
    /// end of the run), Mb/s.
    pub goodput_mbps: f64,
    /// Time from start to the last byte delivered, for finite transfers that finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_time_s: Option<f64>,
    /// Congestion control (TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    /// Segments retransmitted (TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Retransmission timeouts (TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<u64>,
    /// Fast-recovery episodes (TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_recoveries: Option<u64>,
    /// Segments of new data sent (TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_segments_sent: Option<u64>,
    /// Smoothed RTT at the end, ms (TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub srtt_ms: Option<f64>,
    /// Smallest RTT sample, ms (TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rtt_ms: Option<f64>,
    /// Packets sent (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_pkts: Option<u64>,
    /// Packets received (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_pkts: Option<u64>,
    /// 1 - received/sent (UDP; packets still in flight at the end count as lost).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_rate: Option<f64>,
    /// Mean one-way delay, ms (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_delay_ms: Option<f64>,
    /// Largest one-way delay, ms (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delay_ms: Option<f64>,
    /// RFC 3550 interarrival jitter at the end, ms (UDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    /// NAKs the receiver sent (UDT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub naks: Option<u64>,
    /// How often AR-UDT chose each PktSPW class, from "RTT falling" to "rising".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ar_udt_classes: Option<[u64; 4]>,
    /// Segments a base station's Snoop retransmitted for this flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_retransmits: Option<u64>,
    /// Duplicate ACKs Snoop kept from this flow's sender.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed_dupacks: Option<u64>,
    /// Snoop's mean wireless RTT sample, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snoop_rtt_ms: Option<f64>,
    /// Snoop's mean local RTO (at its samples), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snoop_rto_ms: Option<f64>,
    /// First to last data packet at the receiver, seconds (the SCTP study's transfer
    /// time; TCP and SCTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer_time_s: Option<f64>,
    /// Bytes of new data sent in each slow-start round, the first being the initial
    /// window (TCP and SCTP flows that send files), for the first
    /// [`ROUND_LOG_ROUNDS`](longhaul_proto::ROUND_LOG_ROUNDS) rounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_bytes: Option<Vec<u64>>,
}

/// Per-link-direction results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkSummary {
    /// Name (`bottleneck`, `bottleneck.rev`, ...).
    pub name: String,
    /// Node it leads from.
    pub from: String,
    /// Node it leads to.
    pub to: String,
    /// Rate, Mb/s.
    pub rate_mbps: f64,
    /// One-way delay, ms.
    pub delay_ms: f64,
    /// Fraction of the run the transmitter was busy.
    pub utilisation: f64,
    /// Packets delivered to the far end.
    pub delivered_pkts: u64,
    /// Bytes delivered to the far end.
    pub delivered_bytes: u64,
    /// Drops by cause: queue overflow.
    pub drops_queue: u64,
    /// Drops by cause: the loss model.
    pub drops_loss: u64,
    /// Drops by cause: a priority queue's policer (DiffServ egress).
    pub drops_policed: u64,
    /// Packets RED dropped early at the egress (left out of summary.json when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drops_red: u64,
    /// Packets of AF drop precedence 1, 2, 3 (AFx1, AFx2, AFx3) dropped at the
    /// egress, by RED or a full class queue (left out of summary.json when none).
    #[serde(default, skip_serializing_if = "all_zero")]
    pub drops_af: [u64; 3],
    /// Time-average number of packets waiting (not yet being sent), by Little's law.
    pub mean_queue_waiting_pkts: f64,
    /// Largest queue seen, packets.
    pub max_queue_pkts: u32,
}

/// The whole run: `summary.json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Simulated time, seconds.
    pub duration_s: f64,
    /// Events executed.
    pub events: u64,
    /// Most packets alive at once.
    pub peak_packets: u64,
    /// Packets dropped at a node for want of a route or a listener.
    pub unroutable_pkts: u64,
    /// Jain's fairness index over the flows' goodputs.
    pub jain_index: f64,
    /// Flows.
    pub flows: Vec<FlowSummary>,
    /// Link directions.
    pub links: Vec<LinkSummary>,
    /// DiffServ ingress rules, in scenario order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<IngressSummary>,
    /// Base stations, in scenario order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub base_stations: Vec<BaseStationSummary>,
    /// Transfers, in scenario order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transfers: Vec<TransferSummary>,
}

/// What one transfer did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TransferSummary {
    /// Its name.
    pub name: String,
    /// `tcp` or `udt` channels.
    pub transport: String,
    /// Channels per file.
    pub parallelism: u16,
    /// Files at once.
    pub concurrency: u16,
    /// Whether channels moved to the next file without a control exchange.
    pub pipelining: bool,
    /// Its data channels' flow indices.
    pub channels: Vec<usize>,
    /// Number of files.
    pub files: usize,
    /// Bytes of all the files.
    pub bytes: u64,
    /// Bytes the receiver wrote in order.
    pub written_bytes: u64,
    /// When the session opened, s.
    pub start_s: f64,
    /// From the session's start until the last file was written; absent if the run
    /// ended first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_time_s: Option<f64>,
    /// Bytes written over the time to completion (or until the run's end), Mb/s.
    pub throughput_mbps: f64,
    /// File data each channel delivered over the same time, Mb/s.
    pub channel_goodput_mbps: Vec<f64>,
    /// Jain's index over the channels' goodputs.
    pub jain_index: f64,
    /// The most bytes the receiver held ahead of a gap (striping's memory cost).
    pub peak_held_bytes: u64,
    /// With content: bytes the receiver checked against what the sender wrote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified_bytes: Option<u64>,
    /// With content: bytes that differed (0 unless something is broken).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatched_bytes: Option<u64>,
    /// Control request/reply exchanges completed.
    pub control_exchanges: u64,
    /// Control requests sent again after a timeout.
    pub control_retransmits: u64,
}

/// What one base station did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BaseStationSummary {
    /// Its node.
    pub node: String,
    /// Fraction of the run its processor was busy.
    pub utilisation: f64,
    /// Packets it processed.
    pub processed: u64,
    /// Packets dropped because its processor's queue was full.
    pub drops: u64,
    /// Longest processor queue, packets.
    pub max_queue_pkts: usize,
    /// Segments Snoop retransmitted locally (all connections).
    pub local_retransmits: u64,
    /// Largest number of segments one connection's cache held.
    pub cache_max_pkts: usize,
    /// Segments cached (all connections), averaged over the sample instants.
    pub cache_mean_pkts: f64,
}

/// What one ingress rule did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IngressSummary {
    /// The node applying it.
    pub node: String,
    /// Packets it matched, by colour: green (conform), yellow (exceed), red
    /// (violate; CAR's exceed).
    pub green: u64,
    /// Yellow packets.
    pub yellow: u64,
    /// Red packets.
    pub red: u64,
    /// Packets it dropped.
    pub dropped: u64,
}

impl Summary {
    /// Assembles a summary and computes Jain's index.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        scenario: String,
        seed: u64,
        duration_s: f64,
        events: u64,
        peak_packets: u64,
        unroutable_pkts: u64,
        flows: Vec<FlowSummary>,
        links: Vec<LinkSummary>,
    ) -> Self {
        let x: Vec<f64> = flows.iter().map(|f| f.goodput_mbps).collect();
        Summary {
            scenario,
            seed,
            duration_s,
            events,
            peak_packets,
            unroutable_pkts,
            // Undefined for no flows or nothing delivered: nobody was treated unfairly.
            jain_index: longhaul_model::jain(&x).unwrap_or(1.0),
            flows,
            links,
            ingress: vec![],
            base_stations: vec![],
            transfers: vec![],
        }
    }

    /// The link direction called `name`.
    pub fn link(&self, name: &str) -> Option<&LinkSummary> {
        self.links.iter().find(|l| l.name == name)
    }
}

/// One cwnd/RTT trace sample of a TCP flow's sender.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct TraceRow {
    /// Time, seconds.
    pub time_s: f64,
    /// Flow index.
    pub flow: usize,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Slow-start threshold, bytes (`u64::MAX` before the first loss).
    pub ssthresh_bytes: u64,
    /// Smoothed RTT, ms (0 before the first sample).
    pub srtt_ms: f64,
    /// Bytes in flight.
    pub in_flight_bytes: u64,
    /// Bytes delivered to the receiver so far.
    pub delivered_bytes: u64,
    /// UDT's sending period, µs (0 for TCP).
    pub send_period_us: f64,
    /// UDT: the receive rate the peer reports, as the sender smooths it, packets/s.
    pub recv_rate_pps: u32,
    /// UDT: the link capacity the peer estimates, as the sender smooths it, packets/s.
    pub bandwidth_pps: u32,
}

impl TraceRow {
    /// A row of a window-based sender (TCP, SCTP): no sending period or rates.
    pub fn window_based(
        time_s: f64,
        flow: usize,
        cwnd_bytes: u64,
        ssthresh_bytes: u64,
        srtt: Option<longhaul_proto::Duration>,
        in_flight_bytes: u64,
        delivered_bytes: u64,
    ) -> Self {
        TraceRow {
            time_s,
            flow,
            cwnd_bytes,
            ssthresh_bytes,
            srtt_ms: srtt.map_or(0.0, |d| d.as_secs_f64() * 1e3),
            in_flight_bytes,
            delivered_bytes,
            send_period_us: 0.0,
            recv_rate_pps: 0,
            bandwidth_pps: 0,
        }
    }
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The summary.
    pub summary: Summary,
    /// Sample times, seconds (end of each interval).
    pub sample_times: Vec<f64>,
    /// Goodput per flow per interval, Mb/s.
    pub goodput_series: Vec<Vec<f64>>,
    /// Link direction names, in the order of the link series.
    pub link_names: Vec<String>,
    /// Throughput delivered per link direction per interval, Mb/s.
    pub link_tput_series: Vec<Vec<f64>>,
    /// Queue length per link direction at each sample, packets.
    pub queue_series: Vec<Vec<u32>>,
    /// cwnd/RTT trace (empty unless asked for).
    pub trace: Vec<TraceRow>,
    /// Adaptive Snoop's decisions (empty without adaptive base stations).
    pub decisions: Vec<crate::basestation::Decision>,
}

/// Whether a counter is zero (serde leaves such counters out).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn all_zero(n: &[u64; 3]) -> bool {
    n.iter().all(|&x| x == 0)
}
