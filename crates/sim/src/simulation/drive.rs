//! The endpoints: a packet consumed at its host reaches its engine, and each
//! engine is drained (transmissions, events, its one timer) after anything that can
//! give it work, on one generic path for every [`Engine`](longhaul_proto::Engine) (what differs by protocol
//! is in `engines.rs`). Flows start here, and constant-rate or Poisson UDP sources
//! send.

use longhaul_proto::blast::BlastConnection;
use longhaul_proto::sctp::SctpAssociation;
use longhaul_proto::tcp::TcpConnection;
use longhaul_proto::udt::UdtConnection;
use longhaul_proto::{Instant, Layer};
use longhaul_wire::{udp, Checksum, IpProtocol, Ipv4Repr, UdpRepr};
use rand::Rng;

use super::engines::{Bytes, Driven};
use super::{rearm, Simulation, CONTROL_FLAG, IP_UDP, UDP_PORT};
use crate::app::{Arrivals, Control, Flow};
use crate::packet::PacketId;
use crate::scheduler::Event;
use crate::topology::node_addr;

/// Writes the IPv4 and UDP headers (no checksums) in front of a UDP payload of
/// `wire_len` bytes, from `node` to `dst` between `ports` (source, destination),
/// marked `dscp`: UDT engines' datagrams, UDP sources' packets and transfers'
/// control messages.
#[inline(always)]
pub(super) fn udp_headers(
    buf: &mut [u8],
    node: usize,
    dst: usize,
    ports: [u16; 2],
    wire_len: usize,
    dscp: u8,
) {
    let ip = Ipv4Repr {
        src_addr: node_addr(node),
        dst_addr: node_addr(dst),
        protocol: IpProtocol::Udp,
        payload_len: udp::HEADER_LEN + wire_len,
        ttl: 64,
        dscp,
    };
    ip.emit(buf, Checksum::None);
    UdpRepr {
        src_port: ports[0],
        dst_port: ports[1],
        payload_len: wire_len,
    }
    .emit(
        &mut buf[20..IP_UDP],
        ip.src_addr,
        ip.dst_addr,
        Checksum::None,
    );
}

/// Where an engine's datagram starts in an IPv4 packet.
const fn layer_offset(layer: Layer) -> usize {
    match layer {
        Layer::Ip => 0,
        Layer::Udp => IP_UDP,
    }
}

impl Simulation {
    #[inline(always)]
    pub(super) fn consume(&mut self, now: Instant, node: usize, pkt: PacketId) {
        let p = self.pool.get(pkt);
        let hdr = p.header();
        let ihl = usize::from(hdr[0] & 0x0f) * 4;
        let protocol = hdr[9];
        let port = hdr
            .get(ihl + 2..ihl + 4)
            .map(|b| u16::from_be_bytes([b[0], b[1]]));
        let ep = port.and_then(|port| self.nodes[node].endpoint(protocol, port));
        let Some(ep) = ep else {
            self.unroutable += 1;
            self.pool.free(pkt);
            return;
        };
        if ep.flow & CONTROL_FLAG != 0 {
            let t = (ep.flow & !CONTROL_FLAG) as usize;
            self.on_control(now, t, ep.side, pkt);
            return;
        }
        let (f, side) = (ep.flow as usize, usize::from(ep.side));
        match &mut self.flows[f] {
            Flow::Tcp(_) => self.receive::<TcpConnection>(now, f, side, pkt),
            Flow::Udt(_) => self.receive::<UdtConnection>(now, f, side, pkt),
            Flow::Sctp(_) => self.receive::<SctpAssociation>(now, f, side, pkt),
            Flow::Blast(_) if protocol == u8::from(IpProtocol::Tcp) => {
                self.receive::<Control>(now, f, side, pkt)
            }
            Flow::Blast(_) => self.receive::<BlastConnection>(now, f, side, pkt),
            Flow::Udp(u) => {
                let d = now.saturating_duration_since(p.sent_at).as_nanos() as u64;
                u.recv_pkts += 1;
                u.recv_bytes += u64::from(p.payload_len());
                u.delay_sum_ns += u128::from(d);
                u.delay_max_ns = u.delay_max_ns.max(d);
                if let Some(prev) = u.last_delay_ns {
                    // RFC 3550 §6.4.1: J += (|D(i-1,i)| - J) / 16
                    u.jitter_ns += ((d as f64 - prev as f64).abs() - u.jitter_ns) / 16.0;
                }
                u.last_delay_ns = Some(d);
                self.pool.free(pkt);
            }
        }
    }

    /// Whether flow `f`'s packets carry their bytes (engine `E`'s).
    #[inline(always)]
    fn carries_bytes<E: Driven>(&self, f: usize) -> bool {
        match E::BYTES {
            Bytes::Elided => false,
            Bytes::Whole => true,
            Bytes::PerFlow => self.content_flow[f],
        }
    }

    /// Hands packet `pkt` to end `side` of flow `f`, then drains that end.
    #[inline(always)]
    fn receive<E: Driven>(&mut self, now: Instant, f: usize, side: usize, pkt: PacketId) {
        let off = layer_offset(E::LAYER);
        let whole = self.carries_bytes::<E>(f);
        let r = E::record(&mut self.flows[f]).expect("the endpoint's flow");
        let p = self.pool.get(pkt);
        E::arriving(r, side, now, p.payload_len());
        if whole {
            let bytes = &self.pool.whole(pkt)[off..];
            E::ends(r)[side].handle_datagram(now, bytes, bytes.len());
        } else {
            let wire_len = p.wire_len() as usize - off;
            E::ends(r)[side].handle_datagram(now, &p.header()[off..], wire_len);
        }
        self.pool.free(pkt);
        self.drive::<E>(now, f, side);
    }

    /// Drains end `side` of flow `f`: a transfer feeds its channel, the sending
    /// application writes, the end transmits, its application takes the events
    /// (transmitting again if it read), then its one timer is re-armed.
    pub(super) fn drive<E: Driven>(&mut self, now: Instant, f: usize, side: usize) {
        // Only a transfer's flows are channels; most runs have no transfer.
        let channel = if self.transfers.is_empty() {
            None
        } else {
            self.channel_of[f]
        };
        if let (Some((t, c)), 0) = (channel, side) {
            self.feed_channel(now, t as usize, usize::from(c));
        }
        let Some(r) = E::record(&mut self.flows[f]) else {
            return;
        };
        let (from, to) = E::hosts(r);
        if side == 0 {
            E::write(r, &self.zeros);
        }
        let (node, dst) = if side == 0 { (from, to) } else { (to, from) };
        loop {
            self.transmit::<E>(now, f, side, node, dst);
            let r = E::record(&mut self.flows[f]).expect("same flow");
            let mut again = false;
            while let Some(ev) = E::ends(r)[side].poll_event() {
                again |= E::on_event(r, side, now, ev);
            }
            if !again {
                break;
            }
        }
        let r = E::record(&mut self.flows[f]).expect("same flow");
        let deadline = E::ends(r)[side].poll_timeout();
        let timer = &mut E::timers(r)[side];
        let was = *timer;
        rearm(
            &mut self.sched,
            timer,
            deadline,
            Event::Timer(f as u32, 2 * E::ENGINE + side as u8),
        );
        if let (Some(d), 1) = (*timer, side) {
            if was != Some(d) {
                self.host_timer_armed(to, d, f);
            }
        }
        if let (Some((t, c)), 1) = (channel, side) {
            self.channel_progress(now, t as usize, usize::from(c));
        }
        if E::PAIRED && E::hand_over(E::record(&mut self.flows[f]).expect("same flow"), side, now) {
            // A blast transfer: its data end wrote control frames, or its control
            // connection delivered some (or came up).
            if E::ENGINE == 0 {
                self.drive::<Control>(now, f, side);
            } else {
                self.drive::<BlastConnection>(now, f, side);
            }
        }
    }

    /// Sends everything end `side` of flow `f` has to send now, from `node` to
    /// `dst`: each datagram becomes a packet (IP and UDP headers added for a UDP
    /// engine), headers only unless the flow carries bytes.
    #[inline(always)]
    fn transmit<E: Driven>(
        &mut self,
        now: Instant,
        f: usize,
        side: usize,
        node: usize,
        dst: usize,
    ) {
        let off = layer_offset(E::LAYER);
        let whole = self.carries_bytes::<E>(f);
        let ports = [E::PORTS[side] + f as u16, E::PORTS[1 - side] + f as u16];
        loop {
            let Some(r) = E::record(&mut self.flows[f]) else {
                unreachable!("flow {f} is of this engine")
            };
            let end = &mut E::ends(r)[side];
            let (id, more) = if whole {
                // Packets with bytes are built whole in scratch space, then copied
                // into a slot.
                let buf = &mut self.datagram[..];
                let Some(tx) = end.poll_transmit(now, &mut buf[off..]) else {
                    break;
                };
                debug_assert_eq!(
                    tx.written, tx.wire_len,
                    "{f}: bytes elided from a whole packet"
                );
                if E::LAYER == Layer::Udp {
                    udp_headers(buf, node, dst, ports, tx.wire_len, 0);
                }
                let id = self.pool.alloc(now);
                self.pool.set_whole(id, &self.datagram[..off + tx.written]);
                (id, tx.more)
            } else {
                // Others are written in the slot that will be taken next: a slot is
                // taken only for a datagram, so the pool grows only for them.
                let slot = self.pool.peek_free();
                let Some(tx) = end.poll_transmit(now, &mut slot.hdr[off..]) else {
                    break;
                };
                if E::LAYER == Layer::Udp {
                    udp_headers(&mut slot.hdr, node, dst, ports, tx.wire_len, 0);
                }
                slot.stamp(now, (off + tx.written) as u8, tx.elided() as u32);
                (self.pool.take_peeked(), tx.more)
            };
            self.forward(now, node, dst, id);
            if !more {
                break; // the engine's word that a poll now would find nothing
            }
        }
    }

    /// Timer event of end `side` of flow `f`, if it is still the one armed.
    pub(super) fn on_timer(&mut self, now: Instant, f: usize, side: usize) {
        match &self.flows[f] {
            Flow::Tcp(_) => self.expire::<TcpConnection>(now, f, side),
            Flow::Udt(_) => self.expire::<UdtConnection>(now, f, side),
            Flow::Sctp(_) => self.expire::<SctpAssociation>(now, f, side),
            Flow::Blast(_) if side >= 2 => self.expire::<Control>(now, f, side - 2),
            Flow::Blast(_) => self.expire::<BlastConnection>(now, f, side),
            Flow::Udp(_) => {}
        }
    }

    /// End `side` of flow `f` handles its timeout at `now` (unless an earlier event
    /// already re-armed it for another time), and is drained.
    pub(super) fn expire<E: Driven>(&mut self, now: Instant, f: usize, side: usize) {
        let r = E::record(&mut self.flows[f]).expect("a timer of this flow");
        let timer = &mut E::timers(r)[side];
        if *timer != Some(now) {
            return; // superseded by an earlier event that already re-armed
        }
        *timer = None;
        E::ends(r)[side].handle_timeout(now);
        self.drive::<E>(now, f, side);
    }

    pub(super) fn on_flow_start(&mut self, now: Instant, f: usize) {
        match &mut self.flows[f] {
            Flow::Tcp(t) => {
                let [sender, receiver] = &mut t.ends;
                receiver.listen().expect("fresh connection");
                sender.connect(now).expect("fresh connection");
                // A transfer's channel gets its data from the transfer.
                let channel = self.channel_of[f].is_some();
                match (t.spec.files, t.spec.size) {
                    _ if channel => {}
                    (Some(files), _) => {
                        // The first write on its own: Linux's Nagle treats it apart.
                        let first = files.write(0).1;
                        sender.send(first).expect("open");
                        sender.send(files.total() - first).expect("open");
                        sender.close().expect("open");
                    }
                    (None, Some(n)) => {
                        sender.send(n).expect("open");
                        sender.close().expect("open");
                    }
                    (None, None) => sender.send(u64::MAX).expect("open"),
                }
                self.drive::<TcpConnection>(now, f, 0);
            }
            Flow::Udp(_) => self.on_udp_send(now, f),
            Flow::Udt(u) => {
                u.ends[1].listen();
                u.ends[0].connect(now);
                self.drive::<UdtConnection>(now, f, 0);
            }
            Flow::Sctp(s) => {
                s.ends[1].listen().expect("fresh association");
                s.ends[0].connect(now).expect("fresh association");
                self.drive::<SctpAssociation>(now, f, 0);
            }
            Flow::Blast(b) => {
                // The receiver opens the control connection, as the clients of
                // Tsunami and SABUL do (RBUDP's sender waits for it the same way).
                b.control[0].0.listen().expect("fresh connection");
                b.control[1].0.connect(now).expect("fresh connection");
                self.drive::<Control>(now, f, 1);
            }
        }
    }

    pub(super) fn on_udp_send(&mut self, now: Instant, f: usize) {
        let Flow::Udp(u) = &mut self.flows[f] else {
            return;
        };
        if u.spec.stop.is_some_and(|s| now >= s) {
            return;
        }
        let (from, to) = (u.spec.from, u.spec.to);
        let payload_len = u.spec.packet_size as usize - 20 - udp::HEADER_LEN;
        let id = self.pool.alloc(now);
        let p = self.pool.get_mut(id);
        let port = UDP_PORT + f as u16;
        udp_headers(&mut p.hdr, from, to, [port, port], payload_len, u.spec.dscp);
        p.hdr_len = IP_UDP as u8;
        p.set_payload_len(payload_len as u32);
        u.sent_pkts += 1;
        let gap = match u.spec.arrivals {
            Arrivals::Cbr => u.mean_gap,
            Arrivals::Poisson => {
                let x: f64 = u.rng.gen::<f64>();
                u.mean_gap.mul_f64(-(1.0 - x).ln())
            }
        };
        self.sched.schedule(now + gap, Event::UdpSend(f as u32));
        self.forward(now, from, to, id);
    }
}
