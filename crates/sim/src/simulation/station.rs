//! Base stations: a node whose processor has a rate and a queue, and the Snoop
//! agents it runs for TCP connections crossing it (caching, local retransmission,
//! duplicate ACK suppression), with adaptive Snoop turning agents on and off.

use crate::app::Flow;
use crate::basestation::{decide, Decision, Job, Role, SnoopMode};
use crate::packet::PacketId;
use crate::scheduler::Event;
use crate::snoop::{AckAction, DataAction, SnoopAgent};
use crate::topology::addr_node;
use longhaul_proto::Instant;

use super::{rearm, Simulation, TCP_RECEIVER_PORT, TCP_SENDER_PORT};

impl Simulation {
    /// What a packet arriving at a station's node over link direction `from` is to
    /// Snoop: read off its real TCP header.
    pub(super) fn classify(&self, node: usize, pkt: PacketId, from: usize) -> Role {
        let p = self.pool.get(pkt);
        let h = p.header();
        if h.len() < 20 || h[9] != 6 {
            return Role::Other;
        }
        let ihl = usize::from(h[0] & 0x0f) * 4;
        let Ok(tcp) = longhaul_wire::TcpPacket::new_checked(&h[ihl.min(h.len())..]) else {
            return Role::Other;
        };
        let is_tcp_flow = |f: usize| matches!(self.flows.get(f), Some(Flow::Tcp(_)));
        if p.payload_len() > 0 {
            let Some(dst) = addr_node(p.dst_bits(), self.nodes.len()) else {
                return Role::Other;
            };
            let towards_wireless = self
                .route(node, dst)
                .is_some_and(|l| self.links[l as usize].params.wireless);
            let flow = usize::from(tcp.src_port().wrapping_sub(TCP_SENDER_PORT));
            if towards_wireless && is_tcp_flow(flow) {
                return Role::Data {
                    flow,
                    seq: tcp.seq_number(),
                    len: p.payload_len(),
                };
            }
        } else if self.links[from].params.wireless
            && tcp.ack()
            && !tcp.syn()
            && !tcp.fin()
            && !tcp.rst()
        {
            let flow = usize::from(tcp.src_port().wrapping_sub(TCP_RECEIVER_PORT));
            if is_tcp_flow(flow) {
                return Role::Ack {
                    flow,
                    ack: tcp.ack_number(),
                };
            }
        }
        Role::Other
    }

    /// A packet reaches a base station: it waits for the processor.
    pub(super) fn station_arrive(&mut self, now: Instant, s: usize, pkt: PacketId, from: usize) {
        let role = self.classify(self.stations[s].spec.node, pkt, from);
        let st = &mut self.stations[s];
        st.count(role);
        // A connection Snoop was just turned off for keeps its agent for ACKs until
        // the cache drains, so the duplicates of a repair under way stay hidden.
        let snooped = match role {
            Role::Data { flow, .. } => st.snoops(flow),
            Role::Ack { flow, .. } => st.snoops(flow) || self.agents[flow].is_some(),
            Role::Other => false,
        };
        if st.queue.len() >= st.spec.queue_pkts {
            st.drops += 1;
            self.pool.free(pkt);
            return;
        }
        let mut cost = st.spec.forward_cost.as_nanos() as u64;
        if snooped {
            cost += st.spec.snoop_cost.as_nanos() as u64;
        }
        st.queue.push_back(Job {
            pkt,
            role,
            snooped,
            cost_ns: cost,
        });
        st.max_queue = st.max_queue.max(st.queue.len());
        if !st.busy {
            self.station_start(now, s);
        }
    }

    pub(super) fn station_start(&mut self, now: Instant, s: usize) {
        let st = &mut self.stations[s];
        let Some(job) = st.queue.front() else {
            st.busy = false;
            return;
        };
        let work = job.cost_ns + std::mem::take(&mut st.debt_ns);
        st.busy = true;
        st.busy_ns += work;
        self.sched
            .schedule(now.add_nanos(work), Event::StationDone(s as u16));
    }

    pub(super) fn on_station_done(&mut self, now: Instant, s: usize) {
        let Some(job) = self.stations[s].queue.pop_front() else {
            return;
        };
        self.stations[s].processed += 1;
        self.station_process(now, s, job);
        self.station_start(now, s);
    }

    /// The processor is done with a packet: Snoop acts on it, then it goes on (or
    /// not).
    pub(super) fn station_process(&mut self, now: Instant, s: usize, job: Job) {
        let node = self.stations[s].spec.node;
        if !job.snooped {
            self.deliver(now, node, job.pkt);
            return;
        }
        let pkt = *self.pool.get(job.pkt);
        // (forward the packet, a packet of the station's own to send)
        let (flow, forward, extra) = match job.role {
            Role::Other => unreachable!("only TCP data and ACKs are snooped"),
            Role::Data { flow, seq, len } => {
                let no_room = addr_node(pkt.dst_bits(), self.nodes.len())
                    .and_then(|d| self.route(node, d))
                    .is_some_and(|l| self.links[l as usize].nearly_full(now, pkt.wire_len()));
                let agent = self.agent(s, flow);
                match agent.on_data(now, seq, len, &pkt, no_room) {
                    DataAction::Forward => (flow, true, None),
                    DataAction::DropAndReAck => (flow, false, agent.last_ack_packet().copied()),
                }
            }
            Role::Ack { flow, ack } => match self.agent(s, flow).on_ack(now, ack, &pkt) {
                AckAction::Forward => (flow, true, None),
                AckAction::Suppress => (flow, false, None),
                AckAction::Retransmit(p) => (flow, false, Some(*p)),
            },
        };
        if forward {
            self.deliver(now, node, job.pkt);
        } else {
            self.pool.free(job.pkt);
        }
        if let Some(p) = extra {
            self.station_send(now, s, p);
        }
        if !self.stations[s].snoops(flow)
            && self.agents[flow].as_ref().is_some_and(|a| a.cached() == 0)
        {
            if let Some(a) = self.agents[flow].take() {
                self.retired[flow].merge(a.stats());
            }
        }
        self.rearm_agent(flow);
    }

    /// The agent of `flow` at station `s`, created on first use.
    pub(super) fn agent(&mut self, s: usize, flow: usize) -> &mut SnoopAgent {
        let mut rules = self.stations[s].spec.rules;
        rules.f = self.stations[s].f[flow];
        self.agent_station[flow] = s;
        self.agents[flow].get_or_insert_with(|| SnoopAgent::new(rules))
    }

    /// The station sends a packet of its own making (a local retransmission or a
    /// regenerated ACK): it costs Snoop's work on the processor.
    pub(super) fn station_send(&mut self, now: Instant, s: usize, p: crate::packet::Packet) {
        let st = &mut self.stations[s];
        st.debt_ns += st.spec.snoop_cost.as_nanos() as u64;
        let node = st.spec.node;
        let id = self.pool.alloc(now);
        let q = self.pool.get_mut(id);
        *q = p;
        q.sent_at = now;
        self.deliver(now, node, id);
    }

    pub(super) fn rearm_agent(&mut self, flow: usize) {
        let deadline = self.agents[flow].as_ref().and_then(SnoopAgent::timer);
        rearm(
            &mut self.sched,
            &mut self.agent_timer_at[flow],
            deadline,
            Event::SnoopTimer(flow as u32),
        );
    }

    pub(super) fn on_snoop_timer(&mut self, now: Instant, flow: usize) {
        if self.agent_timer_at[flow] != Some(now) {
            return;
        }
        self.agent_timer_at[flow] = None;
        let s = self.agent_station[flow];
        let Some(agent) = self.agents[flow].as_mut() else {
            return;
        };
        if let Some(p) = agent.on_timer(now) {
            self.station_send(now, s, p);
        }
        self.rearm_agent(flow);
    }

    /// Adaptive Snoop: decide who gets Snoop for the next interval.
    pub(super) fn on_station_adapt(&mut self, now: Instant, s: usize) {
        let node = self.stations[s].spec.node;
        let st = &mut self.stations[s];
        let SnoopMode::Adaptive(cfg) = st.spec.mode else {
            return;
        };
        let mut windows = vec![];
        for (flow, w) in st.windows.iter_mut().enumerate() {
            if w.data == 0 && w.acks == 0 {
                continue;
            }
            // The wireless hop towards this flow's receiver: its frame losses.
            let link = match &self.flows[flow] {
                // (`route` would borrow all of `self`, and `st` holds the stations.)
                Flow::Tcp(t) => self.next_hop.get(node, t.spec.to),
                _ => None,
            };
            // The benefit history: this interval's acknowledged rate, booked to the
            // mode the connection had; every 15 intervals the other mode is
            // forgotten, to be tried again.
            let rate = w.acked_bytes as f64 / cfg.interval.as_secs_f64();
            let slot = if st.snoop_on[flow] {
                &mut w.rate_on
            } else {
                &mut w.rate_off
            };
            *slot = Some(slot.map_or(rate, |r| 0.5 * rate + 0.5 * r));
            w.age += 1;
            if w.age >= 15 {
                w.age = 0;
                if st.snoop_on[flow] {
                    w.rate_off = None;
                } else {
                    w.rate_on = None;
                }
            }
            if let Some(l) = link {
                let ls = &self.links[l as usize].stats;
                let (lost, carried) = (ls.drops_loss, ls.enqueued_pkts);
                let (dl, dc) = (lost - w.link_seen.0, carried - w.link_seen.1);
                w.link_seen = (lost, carried);
                if dl + dc > 0 {
                    let e = dl as f64 / (dl + dc) as f64;
                    w.error = cfg.smoothing * e + (1.0 - cfg.smoothing) * w.error;
                }
            }
            windows.push((flow, *w));
        }
        let (choice, load_all, load_chosen) = decide(
            &cfg,
            st.spec.forward_cost,
            st.spec.snoop_cost,
            st.other_pkts,
            &windows,
        );
        for &(flow, on, f) in &choice {
            // Off: the agent caches nothing more and goes once its cache has drained
            // (see `station_process`).
            if st.snoop_on[flow]
                && !on
                && self.agents[flow].as_ref().is_some_and(|a| a.cached() == 0)
            {
                if let Some(a) = self.agents[flow].take() {
                    self.retired[flow].merge(a.stats());
                }
            }
            st.snoop_on[flow] = on;
            st.f[flow] = f;
            if let Some(a) = self.agents[flow].as_mut() {
                a.set_f(f);
            }
            self.decisions.push(Decision {
                time_s: now.as_secs_f64(),
                station: s,
                flow,
                snoop: on,
                f,
                error: st.windows[flow].error,
                load_all,
                load_chosen,
            });
        }
        for w in &mut st.windows {
            w.data = 0;
            w.acks = 0;
            w.acked_bytes = 0;
        }
        st.other_pkts = 0;
        self.sched
            .schedule(now + cfg.interval, Event::StationAdapt(s as u16));
    }
}
