//! Observations: the periodic samples (goodput per flow, throughput and queue per
//! link) and the cwnd/RTT trace, both scheduled last at their instants so they see
//! everything that happened at that time.

use crate::app::Flow;
use crate::metrics::TraceRow;
use crate::scheduler::Event;
use crate::snoop::SnoopAgent;
use longhaul_proto::Instant;

use super::Simulation;

impl Simulation {
    pub(super) fn on_sample(&mut self, now: Instant) {
        let secs = self.cfg.sample_interval.as_secs_f64();
        self.sample_times.push(now.as_secs_f64());
        for i in 0..self.flows.len() {
            let d = self.delivered_as_of(i, now);
            self.goodput_series[i].push((d - self.last_delivered[i]) as f64 * 8e-6 / secs);
            self.last_delivered[i] = d;
        }
        for (i, l) in self.links.iter_mut().enumerate() {
            l.settle(now);
            let b = l.stats.delivered_bytes;
            self.link_tput_series[i].push((b - self.last_link_bytes[i]) as f64 * 8e-6 / secs);
            self.last_link_bytes[i] = b;
            self.queue_series[i].push(l.queue_pkts(now));
        }
        for (s, st) in self.stations.iter_mut().enumerate() {
            let cached: usize = self
                .agents
                .iter()
                .zip(&self.agent_station)
                .filter(|(a, &at)| a.is_some() && at == s)
                .map(|(a, _)| a.as_ref().map_or(0, SnoopAgent::cached))
                .sum();
            st.cache_sum += cached as u64;
            st.cache_samples += 1;
        }
        self.sched
            .schedule_last(now + self.cfg.sample_interval, Event::Sample);
    }

    pub(super) fn on_trace(&mut self, now: Instant) {
        for i in 0..self.flows.len() {
            let delivered = self.delivered_as_of(i, now);
            let f = &self.flows[i];
            if let Flow::Udt(u) = f {
                let c = &u.ends[0];
                self.trace.push(TraceRow {
                    time_s: now.as_secs_f64(),
                    flow: i,
                    cwnd_bytes: (c.cwnd_pkts() * c.payload_size() as f64) as u64,
                    ssthresh_bytes: u64::MAX,
                    srtt_ms: c.rtt_us() / 1e3,
                    in_flight_bytes: (c.in_flight_pkts() * c.payload_size()) as u64,
                    delivered_bytes: u.ends[1].delivered_bytes(),
                    send_period_us: c.pkt_snd_period_us(),
                    recv_rate_pps: c.peer_rates_pps().0,
                    bandwidth_pps: c.peer_rates_pps().1,
                });
            }
            if let Flow::Sctp(s) = f {
                let c = &s.ends[0];
                self.trace.push(TraceRow::window_based(
                    now.as_secs_f64(),
                    i,
                    c.cwnd(),
                    c.ssthresh(),
                    c.rtt().srtt(),
                    c.flight_size(),
                    s.delivered,
                ));
            }
            if let Flow::Tcp(t) = f {
                let c = &t.ends[0];
                self.trace.push(TraceRow::window_based(
                    now.as_secs_f64(),
                    i,
                    c.cwnd(),
                    c.ssthresh(),
                    c.rtt().srtt(),
                    c.in_flight(),
                    delivered,
                ));
            }
        }
        if let Some(ti) = self.cfg.trace_interval {
            self.sched.schedule_last(now + ti, Event::Trace);
        }
    }
}
