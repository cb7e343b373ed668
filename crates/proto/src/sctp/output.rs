//! What goes out: one packet at a time, bundling control chunks, a SACK when due and
//! as much DATA as the peer's window, the congestion window and the MTU allow.

use crate::time::Instant;
use longhaul_wire::sctp::{
    ChunkRepr, DupTsns, GapBlocks, InitRepr, PacketBuilder, SackRepr, SctpRepr,
};
use longhaul_wire::{ipv4, Checksum, IpProtocol, Ipv4Repr};

use super::{data_chunk, InitAckReply, Mark, SctpAssociation, Sent, State, MAX_SACK_ENTRIES};

impl SctpAssociation {
    /// Writes the next IPv4 datagram into `buf` (at least the path MTU long) and
    /// returns its length, or `None` when there is nothing to send now.
    #[must_use]
    pub(super) fn transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.advance_shutdown(now);
        let mtu = usize::from(self.cfg.mtu).min(buf.len());
        if let Some(r) = self.init_ack_reply.take() {
            return Some(self.emit_init_ack(now, buf, r));
        }
        let vtag = if self.init_pending { 0 } else { self.peer_tag };
        let header = SctpRepr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            verification_tag: vtag,
        };
        let (ip_buf, sctp_buf) = buf[..mtu].split_at_mut(ipv4::HEADER_LEN);
        let mut b = PacketBuilder::new(sctp_buf, header);

        if self.abort_pending {
            // An ABORT travels alone; nothing follows it.
            self.abort_pending = false;
            self.state = State::Closed;
            self.clear_timers();
            self.pending.clear();
            self.pending_bytes = 0;
            b.push(&ChunkRepr::Abort {
                tag_reflected: false,
                causes: &[],
            });
            return Some(self.finish(ip_buf, b));
        }
        if self.shutdown_complete_pending {
            self.shutdown_complete_pending = false;
            b.push(&ChunkRepr::ShutdownComplete {
                tag_reflected: false,
            });
            return Some(self.finish(ip_buf, b));
        }
        if self.init_pending {
            self.init_pending = false;
            b.push(&ChunkRepr::Init(InitRepr {
                initiate_tag: self.local_tag,
                a_rwnd: self.a_rwnd(),
                outbound_streams: self.cfg.streams,
                max_inbound_streams: self.cfg.streams,
                initial_tsn: self.next_tsn,
                cookie: None,
            }));
            // An INIT travels alone.
            return Some(self.finish(ip_buf, b));
        }
        let mut cookie_echo = false;
        if self.cookie_echo_pending {
            if let Some(c) = self.cookie {
                self.cookie_echo_pending = false;
                cookie_echo = b.push(&ChunkRepr::CookieEcho { cookie: &c });
            }
        }
        if self.cookie_ack_pending {
            self.cookie_ack_pending = false;
            b.push(&ChunkRepr::CookieAck);
        }
        if let Some((info, n)) = self.heartbeat_ack.take() {
            b.push(&ChunkRepr::HeartbeatAck { info: &info[..n] });
        }
        if self.shutdown_ack_pending {
            self.shutdown_ack_pending = false;
            b.push(&ChunkRepr::ShutdownAck);
        }
        if self.state == State::ShutdownSent && self.shutdown_pending {
            self.shutdown_pending = false;
            b.push(&ChunkRepr::Shutdown {
                cum_tsn: self.cum_tsn,
            });
            self.sack_now = false;
        }
        //= §5.1: until the COOKIE-ACK, DATA may only ride on the COOKIE-ECHO.
        let sending_data = self.can_send_data()
            && (self.state != State::CookieEchoed || (cookie_echo && self.cfg.data_on_cookie_echo));
        if self.sack_now || (self.sack_at.is_some() && sending_data) {
            self.push_sack(&mut b);
        }
        if sending_data {
            self.push_data(now, &mut b);
        }
        if b.is_empty() {
            return None;
        }
        Some(self.finish(ip_buf, b))
    }

    pub(super) fn can_send_data(&self) -> bool {
        matches!(
            self.state,
            State::CookieEchoed
                | State::Established
                | State::ShutdownPending
                | State::ShutdownReceived
        ) && (self.fast_rtx_now
            || self.outstanding.iter().any(|s| s.mark != Mark::None)
            || !self.pending.is_empty())
    }

    pub(super) fn push_sack(&mut self, b: &mut PacketBuilder<'_>) {
        let mut gaps = [(0u16, 0u16); MAX_SACK_ENTRIES];
        let mut n = 0;
        let cum = self
            .cum_tsn
            .wrapping_sub(self.peer_initial_tsn)
            .wrapping_add(1) as u64;
        for &d in &self.above {
            let off = (d + 1 - cum).min(u64::from(u16::MAX)) as u16;
            if n > 0 && gaps[n - 1].1.wrapping_add(1) == off {
                gaps[n - 1].1 = off;
            } else if n < MAX_SACK_ENTRIES {
                gaps[n] = (off, off);
                n += 1;
            } else {
                break;
            }
        }
        let dups = std::mem::take(&mut self.dups);
        let a_rwnd = self.a_rwnd();
        let sack = ChunkRepr::Sack(SackRepr {
            cum_tsn: self.cum_tsn,
            a_rwnd,
            gap_blocks: GapBlocks::List(&gaps[..n]),
            dup_tsns: DupTsns::List(&dups),
        });
        if b.push(&sack) {
            self.advertised_rwnd = a_rwnd;
            self.received_since_sack = 0;
            self.stats.sacks_sent += 1;
            self.sack_now = false;
            self.sack_at = None;
            self.packets_unacked = 0;
        } else {
            self.dups = dups;
        }
    }

    /// Adds retransmissions, then new chunks, as the window allows. Returns whether
    /// any DATA went in.
    pub(super) fn push_data(&mut self, now: Instant, b: &mut PacketBuilder<'_>) -> bool {
        let mut any = false;
        let cwnd = self.cc.cwnd();
        // Fast retransmissions first: one packet's worth, ignoring cwnd (§7.2.4 3).
        let fast = std::mem::take(&mut self.fast_rtx_now);
        for i in 0..self.outstanding.len() {
            let s = &self.outstanding[i];
            if s.mark == Mark::None {
                continue;
            }
            if !(fast && s.mark == Mark::Fast) && self.flight >= cwnd {
                break;
            }
            let tsn = self.cum_acked.wrapping_add(1 + i as u32);
            if !b.push(&data_chunk(tsn, &s.frag)) {
                break;
            }
            let s = &mut self.outstanding[i];
            s.mark = Mark::None;
            s.retransmitted = true;
            s.sent_at = now;
            s.in_flight = true;
            self.flight += s.bytes;
            self.stats.retransmits += 1;
            any = true;
            //= §7.2.4 4: restart T3 only if the lowest outstanding TSN is resent.
            if i == 0 || self.t3_at.is_none() {
                self.t3_at = Some(now.add_nanos(self.rtt.rto_nanos()));
            }
        }
        if any && fast {
            return true;
        }
        // New data: rule B of §6.1 (no new data with cwnd or more outstanding),
        // rule A (peer window) and rule D, Max.Burst, applied as RFC 9260 suggests:
        // as if cwnd were at most the flight size at the start of this burst plus
        // Max.Burst MTUs.
        let base = *self.burst_base.get_or_insert(self.flight);
        let burst_cap = base + u64::from(self.cfg.max_burst) * u64::from(self.cfg.mtu);
        while let Some(f) = self.pending.front() {
            let zero_window_probe = self.flight == 0;
            if self.flight >= cwnd.min(burst_cap) || (self.peer_rwnd == 0 && !zero_window_probe) {
                break;
            }
            let tsn = self.next_tsn;
            if !b.push(&data_chunk(tsn, f)) {
                break;
            }
            let frag = self.pending.pop_front().expect("front exists");
            self.pending_bytes -= frag.data.len() as u64;
            let bytes = self.cfg.cc.chunk_bytes(frag.data.len());
            if self.send_round <= crate::ROUND_LOG_ROUNDS {
                let round = self.send_round as usize;
                if self.round_bytes.len() < round {
                    self.round_bytes.resize(round, 0);
                }
                self.round_bytes[round - 1] += frag.data.len() as u64;
            }
            self.outstanding.push_back(Sent {
                frag,
                bytes,
                sent_at: now,
                retransmitted: false,
                gap_acked: false,
                in_flight: true,
                misses: 0,
                mark: Mark::None,
                fast_retransmitted: false,
                round: self.send_round,
            });
            self.flight += bytes;
            self.peer_rwnd = self.peer_rwnd.saturating_sub(bytes);
            self.next_tsn = tsn.wrapping_add(1);
            self.stats.data_chunks_sent += 1;
            self.t3_at
                .get_or_insert_with(|| now.add_nanos(self.rtt.rto_nanos()));
            any = true;
        }
        any
    }

    pub(super) fn emit_init_ack(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mut r: InitAckReply,
    ) -> usize {
        r.cookie[24..32].copy_from_slice(&now.as_nanos().to_be_bytes());
        self.seal_cookie(&mut r.cookie);
        let header = SctpRepr {
            src_port: r.src_port,
            dst_port: r.dst_port,
            verification_tag: r.peer_tag,
        };
        let mtu = usize::from(self.cfg.mtu).min(buf.len());
        let (ip_buf, sctp_buf) = buf[..mtu].split_at_mut(ipv4::HEADER_LEN);
        let mut b = PacketBuilder::new(sctp_buf, header);
        b.push(&ChunkRepr::InitAck(InitRepr {
            initiate_tag: self.local_tag,
            a_rwnd: self.a_rwnd(),
            outbound_streams: self.cfg.streams,
            max_inbound_streams: self.cfg.streams,
            initial_tsn: self.next_tsn,
            cookie: Some(&r.cookie),
        }));
        self.finish(ip_buf, b)
    }

    pub(super) fn finish(&mut self, ip_buf: &mut [u8], b: PacketBuilder<'_>) -> usize {
        let n = b.finish(self.cfg.checksum == Checksum::Both);
        Ipv4Repr {
            src_addr: self.local.0,
            dst_addr: self.remote.0,
            protocol: IpProtocol::Sctp,
            payload_len: n,
            ttl: 64,
            dscp: 0,
        }
        .emit(ip_buf, self.cfg.checksum);
        self.stats.packets_sent += 1;
        ipv4::HEADER_LEN + n
    }
}
