//! What comes in: a packet checked (CRC32c, verification tag), then each chunk:
//! INIT, INIT ACK, the signed state cookie and its ACK, DATA (TSNs, reassembly,
//! per-stream ordered delivery, the delayed SACK), SACK (gap blocks, fast
//! retransmit, the per-destination window) and the shutdown exchange.

use crate::cc::SctpCc;
use crate::time::Instant;
use longhaul_wire::sctp::{
    ChunkRepr, DataFlags, DupTsns, GapBlocks, InitRepr, SackRepr, SctpPacket, SctpRepr,
};
use longhaul_wire::{Checksum, IpProtocol, Ipv4Packet, Ipv4Repr};

use super::{
    complete_run, take_run, tsn_dist, Event, Fragment, InitAckReply, Mark, Message,
    SctpAssociation, State, COOKIE_LEN, COOKIE_MAC_LEN, MAX_SACK_ENTRIES, MISS_THRESHOLD,
};

impl SctpAssociation {
    /// Processes an IPv4 datagram carrying SCTP. Anything malformed, with a bad
    /// checksum or a wrong verification tag is counted and dropped.
    pub(super) fn input(&mut self, now: Instant, datagram: &[u8]) {
        if self.process(now, datagram).is_none() {
            self.stats.bad_packets += 1;
        }
    }

    pub(super) fn process(&mut self, now: Instant, datagram: &[u8]) -> Option<()> {
        let ip = Ipv4Packet::new_checked(datagram).ok()?;
        let ip_repr = Ipv4Repr::parse(&ip, self.cfg.checksum).ok()?;
        if ip_repr.protocol != IpProtocol::Sctp {
            return None;
        }
        let hl = ip.header_len();
        let end = (hl + ip_repr.payload_len).min(datagram.len());
        let pkt = SctpPacket::new_checked(&datagram[hl..end]).ok()?;
        let hdr = SctpRepr::parse(&pkt, self.cfg.checksum == Checksum::Both).ok()?;
        if hdr.dst_port != self.local.1 {
            return None;
        }
        // Validate every chunk before acting on any (a malformed packet is dropped
        // whole, as RFC 9260 §3.2 and §8.5 suggest).
        if pkt.chunks().any(|c| c.is_err()) {
            return None;
        }
        let first = pkt.chunks().next()?.ok()?;
        // §8.5.1: INIT must travel alone with tag 0; ABORT and SHUTDOWN-COMPLETE with
        // the T bit carry the sender's own tag; everything else carries ours.
        let tag_ok = match first {
            ChunkRepr::Init(_) => hdr.verification_tag == 0,
            ChunkRepr::Abort {
                tag_reflected: true,
                ..
            }
            | ChunkRepr::ShutdownComplete {
                tag_reflected: true,
            } => hdr.verification_tag == self.peer_tag,
            ChunkRepr::CookieEcho { .. } if self.state == State::Listen => true,
            _ => hdr.verification_tag == self.local_tag,
        };
        if !tag_ok {
            return None;
        }
        self.burst_base = None;
        let mut had_data = false;
        let mut sack_at_once = false;
        for chunk in pkt.chunks().flatten() {
            match chunk {
                ChunkRepr::Init(init) => self.on_init(&hdr, init),
                ChunkRepr::InitAck(init) => self.on_init_ack(now, init),
                ChunkRepr::CookieEcho { cookie } => {
                    if !self.on_cookie_echo(now, &hdr, cookie) {
                        return None;
                    }
                }
                ChunkRepr::CookieAck => self.on_cookie_ack(),
                ChunkRepr::Data {
                    tsn,
                    stream_id,
                    ssn,
                    ppid,
                    flags,
                    data,
                } => {
                    if !self.is_up() {
                        continue;
                    }
                    had_data = true;
                    sack_at_once |= flags.immediate;
                    sack_at_once |= self.on_data(tsn, stream_id, ssn, ppid, flags, data);
                }
                ChunkRepr::Sack(sack) => self.on_sack(now, &sack),
                ChunkRepr::Heartbeat { info } => {
                    let mut b = [0u8; 64];
                    let n = info.len().min(64);
                    b[..n].copy_from_slice(&info[..n]);
                    self.heartbeat_ack = Some((b, n));
                }
                ChunkRepr::HeartbeatAck { .. } => {}
                ChunkRepr::Abort { .. } => {
                    self.state = State::Closed;
                    self.clear_timers();
                    self.events.push_back(Event::Aborted);
                    return Some(());
                }
                ChunkRepr::Shutdown { cum_tsn } => self.on_shutdown(now, cum_tsn),
                ChunkRepr::ShutdownAck => self.on_shutdown_ack(),
                ChunkRepr::ShutdownComplete { .. } => {
                    if self.state == State::ShutdownAckSent {
                        self.close();
                    }
                }
                ChunkRepr::Error { .. } | ChunkRepr::Unknown { .. } => {}
            }
        }
        if had_data {
            let t = now;
            self.first_data_at.get_or_insert(t);
            self.last_data_at = Some(t);
            self.schedule_sack(now, sack_at_once);
        }
        self.deliver();
        self.advance_shutdown(now);
        Some(())
    }

    pub(super) fn is_up(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
        )
    }

    pub(super) fn on_init(&mut self, hdr: &SctpRepr, init: InitRepr<'_>) {
        if self.state != State::Listen {
            // Restart and collision handling (§5.2) are not modelled.
            return;
        }
        // Stateless: everything needed later goes into the cookie.
        let mut c = [0u8; COOKIE_LEN];
        c[0..4].copy_from_slice(&init.initiate_tag.to_be_bytes());
        c[4..8].copy_from_slice(&self.local_tag.to_be_bytes());
        c[8..12].copy_from_slice(&init.initial_tsn.to_be_bytes());
        c[12..16].copy_from_slice(&self.next_tsn.to_be_bytes());
        c[16..20].copy_from_slice(&init.a_rwnd.to_be_bytes());
        c[20..22].copy_from_slice(&init.outbound_streams.to_be_bytes());
        c[22..24].copy_from_slice(&init.max_inbound_streams.to_be_bytes());
        // The creation time is filled in at transmission (see poll_transmit).
        self.init_ack_reply = Some(InitAckReply {
            peer_tag: init.initiate_tag,
            cookie: c,
            src_port: hdr.dst_port,
            dst_port: hdr.src_port,
        });
    }

    pub(super) fn seal_cookie(&self, c: &mut [u8; COOKIE_LEN]) {
        let mac = blake3::keyed_hash(&self.cookie_key, &c[..COOKIE_LEN - COOKIE_MAC_LEN]);
        c[COOKIE_LEN - COOKIE_MAC_LEN..].copy_from_slice(&mac.as_bytes()[..COOKIE_MAC_LEN]);
    }

    pub(super) fn on_init_ack(&mut self, now: Instant, init: InitRepr<'_>) {
        if self.state != State::CookieWait {
            return;
        }
        let Some(cookie) = init.cookie.filter(|c| c.len() <= COOKIE_LEN) else {
            // Only our own cookies are short enough to keep inline; a longer one
            // from another implementation is not supported.
            return;
        };
        let mut c = [0u8; COOKIE_LEN];
        c[..cookie.len()].copy_from_slice(cookie);
        self.cookie = Some(c);
        self.peer_tag = init.initiate_tag;
        self.set_peer(
            init.initial_tsn,
            init.a_rwnd,
            init.outbound_streams,
            init.max_inbound_streams,
        );
        self.state = State::CookieEchoed;
        self.init_pending = false;
        self.cookie_echo_pending = true;
        self.t1_retries = 0;
        self.t1_at = Some(now.add_nanos(self.rtt.rto_nanos()));
    }

    pub(super) fn set_peer(&mut self, initial_tsn: u32, a_rwnd: u32, os: u16, mis: u16) {
        self.peer_initial_tsn = initial_tsn;
        self.cum_tsn = initial_tsn.wrapping_sub(1);
        self.peer_rwnd = u64::from(a_rwnd);
        self.cc = SctpCc::new(self.cfg.cc, u64::from(self.cfg.mtu), u64::from(a_rwnd));
        //= §5.1.2: streams in use are min(our OS, peer MIS) and min(peer OS, our MIS).
        self.streams_out = self.cfg.streams.min(mis);
        self.streams_in = self.cfg.streams.min(os);
        self.ssn_in = vec![0; usize::from(self.streams_in)];
    }

    /// Returns false if the cookie is invalid (the packet is then dropped).
    pub(super) fn on_cookie_echo(&mut self, now: Instant, hdr: &SctpRepr, cookie: &[u8]) -> bool {
        if self.state != State::Listen {
            // A duplicate COOKIE-ECHO (our COOKIE-ACK was lost): acknowledge again.
            if self.is_up() && hdr.verification_tag == self.local_tag {
                self.cookie_ack_pending = true;
                return true;
            }
            return false;
        }
        if cookie.len() != COOKIE_LEN {
            return false;
        }
        let mut c = [0u8; COOKIE_LEN];
        c.copy_from_slice(cookie);
        let mut check = c;
        self.seal_cookie(&mut check);
        // Constant-time comparison is not needed in a simulator, but costs nothing.
        let diff = check[COOKIE_LEN - COOKIE_MAC_LEN..]
            .iter()
            .zip(&c[COOKIE_LEN - COOKIE_MAC_LEN..])
            .fold(0u8, |a, (x, y)| a | (x ^ y));
        let be32 = |i: usize| u32::from_be_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
        let be16 = |i: usize| u16::from_be_bytes([c[i], c[i + 1]]);
        let created = u64::from_be_bytes(c[24..32].try_into().expect("8 bytes"));
        let fresh =
            now.as_nanos().saturating_sub(created) <= self.cfg.cookie_life.as_nanos() as u64;
        if diff != 0 || !fresh || hdr.verification_tag != be32(4) {
            return false;
        }
        self.peer_tag = be32(0);
        self.next_tsn = be32(12);
        self.cum_acked = self.next_tsn.wrapping_sub(1);
        self.set_peer(be32(8), be32(16), be16(20), be16(22));
        self.remote.1 = hdr.src_port;
        self.state = State::Established;
        self.cookie_ack_pending = true;
        self.events.push_back(Event::Connected);
        true
    }

    pub(super) fn on_cookie_ack(&mut self) {
        if self.state == State::CookieEchoed {
            self.state = State::Established;
            self.t1_at = None;
            self.cookie_echo_pending = false;
            self.events.push_back(Event::Connected);
        }
    }

    /// A DATA chunk. Returns whether the SACK should go at once (a duplicate, a new
    /// gap or a closed gap).
    pub(super) fn on_data(
        &mut self,
        tsn: u32,
        stream: u16,
        ssn: u16,
        ppid: u32,
        flags: DataFlags,
        data: &[u8],
    ) -> bool {
        let base = self.peer_initial_tsn;
        let cum = self.cum_tsn.wrapping_sub(base).wrapping_add(1) as u64; // TSNs received in order
        let d = tsn_dist(tsn, base, cum);
        if d < cum || self.above.contains(&d) {
            self.stats.duplicate_tsns += 1;
            if self.dups.len() < MAX_SACK_ENTRIES {
                self.dups.push(tsn);
            }
            return true;
        }
        if stream >= self.streams_in {
            // §6.5: an invalid stream gets an ERROR; the TSN is still acknowledged.
            self.above.insert(d);
            self.advance_cum();
            return true;
        }
        let had_gap = !self.above.is_empty();
        self.above.insert(d);
        self.advance_cum();
        let frag = Fragment {
            stream,
            ssn,
            ppid,
            flags,
            data: data.to_vec(),
        };
        self.held_bytes += data.len() as u64;
        self.received_since_sack += data.len() as u64;
        if flags.unordered {
            self.held_unordered.insert(d, frag);
        } else {
            self.held.insert((stream, d), frag);
            if !self.touched.contains(&stream) {
                self.touched.push(stream);
            }
        }
        //= §6.7: with gaps, SACK every packet; usrsctp also when a gap just closed.
        had_gap || !self.above.is_empty()
    }

    pub(super) fn advance_cum(&mut self) {
        let base = self.peer_initial_tsn;
        let mut next = self.cum_tsn.wrapping_sub(base).wrapping_add(1) as u64;
        while self.above.first() == Some(&next) {
            self.above.pop_first();
            next += 1;
        }
        self.cum_tsn = base.wrapping_add(next as u32).wrapping_sub(1);
    }

    pub(super) fn schedule_sack(&mut self, now: Instant, at_once: bool) {
        self.packets_unacked += 1;
        if at_once || self.packets_unacked >= self.cfg.sack_freq || self.state != State::Established
        {
            self.sack_now = true;
            self.sack_at = None;
        } else if self.sack_at.is_none() {
            self.sack_at = Some(now + self.cfg.sack_delay);
        }
    }

    /// Moves complete messages to the application.
    pub(super) fn deliver(&mut self) {
        // Unordered: any complete B..E run of consecutive TSNs.
        while let Some(run) = complete_run(&self.held_unordered) {
            let msg = take_run(&mut self.held_unordered, run);
            self.push_message(msg);
        }
        // Ordered: per stream that got data, the message with the next SSN, if
        // complete.
        let touched = std::mem::take(&mut self.touched);
        for &stream in &touched {
            loop {
                let expected = self.ssn_in[usize::from(stream)];
                let range = self.held.range((stream, 0)..=(stream, u64::MAX));
                let mut it = range.clone();
                let Some((&(_, first), f)) = it.next() else {
                    break;
                };
                if !f.flags.beginning || f.ssn != expected {
                    break;
                }
                let mut last = first;
                let mut complete = f.flags.ending;
                for (&(_, d), g) in it {
                    if complete || d != last + 1 || g.ssn != expected {
                        break;
                    }
                    last = d;
                    complete = g.flags.ending;
                }
                if !complete {
                    break;
                }
                let mut data = vec![];
                let mut ppid = 0;
                for d in first..=last {
                    let g = self.held.remove(&(stream, d)).expect("run is held");
                    ppid = g.ppid;
                    data.extend_from_slice(&g.data);
                }
                self.ssn_in[usize::from(stream)] = expected.wrapping_add(1);
                self.push_message(Message {
                    stream,
                    ppid,
                    unordered: false,
                    data,
                });
            }
        }
        // Keep the buffer's capacity; streams still waiting on a gap are touched
        // again when the chunk that fills it arrives.
        self.touched = touched;
        self.touched.clear();
    }

    pub(super) fn push_message(&mut self, m: Message) {
        let n = m.data.len() as u64;
        self.held_bytes -= n;
        self.readable_bytes += n;
        self.stats.delivered_bytes += n;
        self.readable.push_back(m);
        self.events.push_back(Event::Readable);
    }

    pub(super) fn a_rwnd(&self) -> u32 {
        u64::from(self.cfg.recv_buffer)
            .saturating_sub(self.held_bytes + self.readable_bytes)
            .min(u64::from(u32::MAX)) as u32
    }

    pub(super) fn on_sack(&mut self, now: Instant, sack: &SackRepr<'_>) {
        if !self.is_up() {
            return;
        }
        let base = self.cum_acked;
        let adv = sack.cum_tsn.wrapping_sub(base) as i32;
        //= §6.2.1 D i): a SACK whose cumulative TSN is behind the ack point is old.
        if adv < 0 || adv as usize > self.outstanding.len() {
            return;
        }
        let flight_before = self.flight;
        let mut bytes_acked = 0;
        let mut newest_round = 0;
        let mut htna: Option<usize> = None; // index in the pre-SACK outstanding list
        let mut rtt_sample = None;
        // Cumulatively acknowledged chunks.
        for i in 0..adv as usize {
            let s = &self.outstanding[i];
            if !s.gap_acked {
                bytes_acked += s.bytes;
                htna = Some(i);
            }
            if s.in_flight {
                self.flight -= s.bytes;
            }
            if !s.retransmitted {
                rtt_sample = Some(s.sent_at);
            }
            newest_round = newest_round.max(s.round);
        }
        // Gap-acknowledged chunks.
        for (start, end) in sack.gap_blocks.iter() {
            for off in start..=end.max(start) {
                let Some(i) = (adv as usize + usize::from(off)).checked_sub(1) else {
                    continue;
                };
                if off == 0 || i >= self.outstanding.len() {
                    continue;
                }
                let s = &mut self.outstanding[i];
                if !s.gap_acked {
                    s.gap_acked = true;
                    s.mark = Mark::None;
                    bytes_acked += s.bytes;
                    htna = Some(htna.map_or(i, |h| h.max(i)));
                    newest_round = newest_round.max(s.round);
                    if s.in_flight {
                        s.in_flight = false;
                        self.flight -= s.bytes;
                    }
                }
            }
        }
        let cum_advanced = adv > 0;
        // One RTT sample per SACK that advances the cumulative TSN, from the newest
        // chunk it covers, never a retransmitted one (Karn).
        if cum_advanced {
            if let Some(t) = rtt_sample {
                self.rtt.on_sample_nanos(now.nanos_since(t));
            }
            self.errors = 0;
        }
        //= §7.2.4: miss indications (HTNA): every chunk below the highest TSN newly
        //= acknowledged that is still missing; in Fast Recovery a SACK that advances
        //= the cumulative TSN counts every missing chunk below the highest gap-acked.
        let limit = match (self.fast_recovery.is_some() && cum_advanced, htna) {
            (true, _) => self.outstanding.iter().rposition(|s| s.gap_acked),
            (false, h) => h,
        };
        let mut new_fast = false;
        if let Some(limit) = limit {
            for s in self.outstanding.iter_mut().take(limit).skip(adv as usize) {
                if s.gap_acked || s.mark != Mark::None || s.fast_retransmitted {
                    continue;
                }
                s.misses += 1;
                if s.misses >= MISS_THRESHOLD {
                    s.mark = Mark::Fast;
                    s.fast_retransmitted = true;
                    if s.in_flight {
                        s.in_flight = false;
                        self.flight -= s.bytes;
                    }
                    new_fast = true;
                }
            }
        }
        // Pop the cumulatively acknowledged chunks.
        self.outstanding.drain(..adv as usize);
        self.cum_acked = sack.cum_tsn;
        let in_fr = self.fast_recovery.is_some();
        if bytes_acked > 0 {
            self.cc
                .on_sack(bytes_acked, flight_before, cum_advanced, in_fr);
        }
        if let Some(exit) = self.fast_recovery {
            if (sack.cum_tsn.wrapping_sub(exit) as i32) >= 0 {
                self.fast_recovery = None;
            }
        }
        if new_fast {
            self.fast_rtx_now = true;
            if self.fast_recovery.is_none() {
                self.stats.fast_retransmits += 1;
                self.cc.on_fast_retransmit();
                self.fast_recovery = Some(self.next_tsn.wrapping_sub(1));
            }
        }
        if newest_round > 0 {
            self.send_round = self.send_round.max(newest_round + 1);
        }
        if self.outstanding.is_empty() {
            self.cc.on_all_acked();
        }
        //= §6.2.1 D iv): peer rwnd = a_rwnd less the bytes still outstanding.
        self.peer_rwnd = u64::from(sack.a_rwnd).saturating_sub(self.flight);
        //= §6.3.2 R2/R3: stop T3 when nothing is outstanding; restart it when the
        //= earliest outstanding TSN is acknowledged.
        if self.outstanding.iter().all(|s| s.gap_acked) {
            self.t3_at = None;
        } else if cum_advanced {
            self.t3_at = Some(now.add_nanos(self.rtt.rto_nanos()));
        }
    }

    pub(super) fn on_shutdown(&mut self, now: Instant, cum_tsn: u32) {
        if !self.is_up() {
            return;
        }
        // The SHUTDOWN's cumulative TSN acknowledges like a SACK without gaps.
        let a_rwnd = self.peer_rwnd.min(u64::from(u32::MAX)) as u32;
        self.on_sack(
            now,
            &SackRepr {
                cum_tsn,
                a_rwnd,
                gap_blocks: GapBlocks::List(&[]),
                dup_tsns: DupTsns::List(&[]),
            },
        );
        if matches!(self.state, State::Established | State::ShutdownPending) {
            self.state = State::ShutdownReceived;
        }
    }

    pub(super) fn on_shutdown_ack(&mut self) {
        if matches!(self.state, State::ShutdownSent | State::ShutdownAckSent) {
            self.shutdown_complete_pending = true;
            self.close();
        } else if self.state == State::Closed && self.peer_tag != 0 {
            // Our SHUTDOWN-COMPLETE was lost and the peer's T2 resent its ACK.
            self.shutdown_complete_pending = true;
        }
    }

    pub(super) fn close(&mut self) {
        self.state = State::Closed;
        self.clear_timers();
        self.events.push_back(Event::Closed);
    }

    /// Moves the shutdown forward once the data allows it.
    pub(super) fn advance_shutdown(&mut self, now: Instant) {
        if self.shutdown_pending && self.state == State::Established {
            self.state = State::ShutdownPending;
        }
        let drained = self.all_acked();
        match self.state {
            State::ShutdownPending if drained => {
                self.state = State::ShutdownSent;
                self.shutdown_pending = true;
                self.t2_at = Some(now.add_nanos(self.rtt.rto_nanos()));
            }
            State::ShutdownReceived if drained => {
                self.state = State::ShutdownAckSent;
                self.shutdown_ack_pending = true;
                self.t2_at = Some(now.add_nanos(self.rtt.rto_nanos()));
            }
            _ => {}
        }
    }
}
