//! TUN offloads: the virtio-net header, and TCP segmentation and coalescing in user
//! space, so the emulator can take the kernel's 64 KB TSO super-packets yet still
//! account, queue and drop per wire-sized segment.
//!
//! With `IFF_VNET_HDR`, every TUN read and write starts with a 10-byte
//! `struct virtio_net_hdr` (`include/uapi/linux/virtio_net.h`; native byte order,
//! which on the little-endian machines we run on is little-endian). The emulator
//! keeps each segment as a *frame*: that header followed by one IP packet. A frame
//! whose header says `NEEDS_CSUM` carries only the pseudo-header part of its TCP or
//! UDP checksum, as the kernel does for offloaded packets; the receiving kernel
//! trusts such packets on local delivery, so the rest is never computed.
//!
//! This is wireguard-go's and quinn's technique; the code is our own.

use longhaul_wire::checksum;

/// Bytes of `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// Largest super-packet the emulator builds (IP total length is 16 bits).
pub const MAX_SUPER: usize = 65_535;

/// A parsed `struct virtio_net_hdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM` and friends.
    pub flags: u8,
    /// `GSO_NONE`, `GSO_TCPV4`, ...
    pub gso_type: u8,
    /// Bytes of headers (IP + TCP) of a GSO packet.
    pub hdr_len: u16,
    /// Payload bytes per segment of a GSO packet.
    pub gso_size: u16,
    /// Where checksumming starts (the transport header).
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum goes.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads the header at the front of `frame`.
    pub fn parse(frame: &[u8]) -> Option<VnetHdr> {
        let b = frame.get(..VNET_HDR_LEN)?;
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Writes the header to the front of `frame`.
    pub fn emit(&self, frame: &mut [u8]) {
        frame[0] = self.flags;
        frame[1] = self.gso_type;
        frame[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        frame[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        frame[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        frame[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }
}

/// Why a super-packet could not be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitError {
    /// Not an IPv4 TCP packet with sane lengths.
    Malformed,
    /// A GSO type other than TCPv4.
    Unsupported(u8),
}

/// IPv4 header length, TCP header length, and IPv4 total length of `ip`, checked.
fn tcp4_lengths(ip: &[u8]) -> Option<(usize, usize)> {
    if ip.len() < 40 || ip[0] >> 4 != 4 || ip[9] != 6 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let doff = usize::from(ip.get(ihl + 12)? >> 4) * 4;
    if ihl < 20 || doff < 20 || ihl + doff > ip.len() {
        return None;
    }
    Some((ihl, doff))
}

/// The pseudo-header sum of a TCP/IPv4 segment of `tcp_len` bytes, folded, not
/// inverted: what `CHECKSUM_PARTIAL` wants in the checksum field.
fn pseudo_sum(ip: &[u8], tcp_len: usize) -> u16 {
    let src = ip[12..16].try_into().expect("4 bytes");
    let dst = ip[16..20].try_into().expect("4 bytes");
    !checksum::finish(checksum::pseudo_header(src, dst, 6, tcp_len as u32))
}

fn fix_ipv4_checksum(ip: &mut [u8], ihl: usize) {
    ip[10] = 0;
    ip[11] = 0;
    let c = checksum::compute(&ip[..ihl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

/// The header every segment frame gets: no GSO, checksum left to the receiver.
fn segment_hdr(ihl: usize) -> VnetHdr {
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: ihl as u16,
        csum_offset: 16,
    }
}

/// Splits the frame (virtio header + packet) read off a TUN into wire-sized segment
/// frames, handing each to `out`. A frame without GSO is handed over as it is. TCP
/// segments get consecutive sequence numbers and IP IDs, FIN and PSH only on the
/// last, CWR only on the first, their own lengths and IPv4 checksums.
/// `scratch` is working space, kept by the caller so the loop does not allocate.
pub fn split(
    frame: &[u8],
    scratch: &mut Vec<u8>,
    mut out: impl FnMut(&[u8]),
) -> Result<(), SplitError> {
    let hdr = VnetHdr::parse(frame).ok_or(SplitError::Malformed)?;
    let ip = &frame[VNET_HDR_LEN..];
    match hdr.gso_type & 0x7f {
        GSO_NONE => {
            out(frame);
            return Ok(());
        }
        GSO_TCPV4 => {}
        t => return Err(SplitError::Unsupported(t)),
    }
    let (ihl, doff) = tcp4_lengths(ip).ok_or(SplitError::Malformed)?;
    let mss = usize::from(hdr.gso_size);
    if mss == 0 {
        return Err(SplitError::Malformed);
    }
    let hl = ihl + doff;
    let payload = &ip[hl..];
    let seq0 = u32::from_be_bytes(ip[ihl + 4..ihl + 8].try_into().expect("4 bytes"));
    let id0 = u16::from_be_bytes([ip[4], ip[5]]);
    let flags = ip[ihl + 13];
    let n = payload.len().div_ceil(mss).max(1);
    scratch.clear();
    scratch.resize(VNET_HDR_LEN + hl + mss, 0);
    let seg = scratch;
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let len = hl + chunk.len();
        let f = &mut seg[..VNET_HDR_LEN + len];
        segment_hdr(ihl).emit(f);
        let p = &mut f[VNET_HDR_LEN..];
        p[..hl].copy_from_slice(&ip[..hl]);
        p[hl..].copy_from_slice(chunk);
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
        fix_ipv4_checksum(p, ihl);
        let seq = seq0.wrapping_add((i * mss) as u32);
        p[ihl + 4..ihl + 8].copy_from_slice(&seq.to_be_bytes());
        let mut fl = flags;
        if i + 1 < n {
            fl &= !(0x01 | 0x08); // FIN, PSH
        }
        if i > 0 {
            fl &= !0x80; // CWR
        }
        p[ihl + 13] = fl;
        let ps = pseudo_sum(p, len - ihl);
        p[ihl + 16..ihl + 18].copy_from_slice(&ps.to_be_bytes());
        out(f);
    }
    if payload.is_empty() {
        // A GSO packet with no payload: pass it on as one plain segment.
        let mut f = frame.to_vec();
        segment_hdr(ihl).emit(&mut f);
        out(&f);
    }
    Ok(())
}

/// What a segment frame holds, for deciding whether it joins a super-packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegInfo {
    /// Addresses and ports: bytes 12..20 of the IP header and the ports.
    flow: [u8; 12],
    ihl: usize,
    doff: usize,
    seq: u32,
    payload: usize,
    flags: u8,
}

impl SegInfo {
    /// The facts of a TCP/IPv4 segment frame, if it is one that may be coalesced
    /// (a plain ACK-carrying data segment: no SYN, RST, FIN or URG; ECN bits clear).
    pub fn of(frame: &[u8]) -> Option<SegInfo> {
        let hdr = VnetHdr::parse(frame)?;
        if hdr.gso_type != GSO_NONE {
            return None;
        }
        let ip = &frame[VNET_HDR_LEN..];
        let (ihl, doff) = tcp4_lengths(ip)?;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if total != ip.len() || ip[1] & 0x03 != 0 {
            return None;
        }
        let flags = ip[ihl + 13];
        if flags & !(0x10 | 0x08) != 0 {
            return None;
        }
        let mut flow = [0u8; 12];
        flow[..8].copy_from_slice(&ip[12..20]);
        flow[8..12].copy_from_slice(&ip[ihl..ihl + 4]);
        Some(SegInfo {
            flow,
            ihl,
            doff,
            seq: u32::from_be_bytes(ip[ihl + 4..ihl + 8].try_into().ok()?),
            payload: ip.len() - ihl - doff,
            flags,
        })
    }

    /// Whether `next` may follow `self` in one super-packet whose segments carry
    /// `mss` bytes each: same flow and headers' sizes, the next sequence number, and
    /// `self` is full-sized and without PSH.
    pub fn continues(&self, next: &SegInfo, mss: usize) -> bool {
        self.flow == next.flow
            && self.ihl == next.ihl
            && self.doff == next.doff
            && self.payload == mss
            && self.flags & 0x08 == 0
            && next.payload > 0
            && next.payload <= mss
            && self.seq.wrapping_add(self.payload as u32) == next.seq
    }

    /// Payload bytes.
    pub fn payload(&self) -> usize {
        self.payload
    }
}

/// Builds one GSO super-packet frame into `out` from consecutive segment frames
/// (checked with [`SegInfo::continues`]): the first segment's headers with the
/// total length, the last one's flags and ACK and window, every payload in order.
pub fn coalesce(frames: &[&[u8]], out: &mut Vec<u8>) {
    let first = SegInfo::of(frames[0]).expect("a coalescable segment");
    let (ihl, doff) = (first.ihl, first.doff);
    let hl = ihl + doff;
    let last_ip = &frames[frames.len() - 1][VNET_HDR_LEN..];
    out.clear();
    out.resize(VNET_HDR_LEN, 0);
    out.extend_from_slice(&frames[0][VNET_HDR_LEN..VNET_HDR_LEN + hl]);
    for f in frames {
        out.extend_from_slice(&f[VNET_HDR_LEN + hl..]);
    }
    let total = out.len() - VNET_HDR_LEN;
    {
        let p = &mut out[VNET_HDR_LEN..];
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        // The last segment's ACK, flags and window: the freshest the sender said.
        p[ihl + 8..ihl + 12].copy_from_slice(&last_ip[ihl + 8..ihl + 12]);
        p[ihl + 13] = last_ip[ihl + 13];
        p[ihl + 14..ihl + 16].copy_from_slice(&last_ip[ihl + 14..ihl + 16]);
        fix_ipv4_checksum(p, ihl);
        let ps = pseudo_sum(p, total - ihl);
        p[ihl + 16..ihl + 18].copy_from_slice(&ps.to_be_bytes());
    }
    let hdr = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if frames.len() > 1 {
            GSO_TCPV4
        } else {
            GSO_NONE
        },
        hdr_len: hl as u16,
        gso_size: if frames.len() > 1 {
            first.payload as u16
        } else {
            0
        },
        csum_start: ihl as u16,
        csum_offset: 16,
    };
    hdr.emit(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TSO frame: IPv4 + TCP (20 + 32 bytes, timestamps-sized options) and
    /// `payload` bytes, cut at `mss`.
    fn tso(payload: usize, mss: u16, flags: u8) -> Vec<u8> {
        let hl = 20 + 32;
        let mut f = vec![0u8; VNET_HDR_LEN + hl + payload];
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: hl as u16,
            gso_size: mss,
            csum_start: 20,
            csum_offset: 16,
        }
        .emit(&mut f);
        let p = &mut f[VNET_HDR_LEN..];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((hl + payload) as u16).to_be_bytes());
        p[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        p[20..22].copy_from_slice(&40000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5201u16.to_be_bytes());
        p[24..28].copy_from_slice(&0xffff_f000u32.to_be_bytes());
        p[32] = 8 << 4;
        p[33] = flags;
        for (i, b) in p[hl..].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        f
    }

    #[test]
    fn a_super_packet_splits_into_wire_segments() {
        let f = tso(3000, 1448, 0x18); // ACK + PSH
        let mut segs = vec![];
        split(&f, &mut vec![], |s| segs.push(s.to_vec())).unwrap();
        assert_eq!(segs.len(), 3);
        let lens: Vec<usize> = segs.iter().map(|s| s.len() - VNET_HDR_LEN).collect();
        assert_eq!(lens, [1500, 1500, 52 + 104]);
        for (i, s) in segs.iter().enumerate() {
            let p = &s[VNET_HDR_LEN..];
            assert_eq!(usize::from(u16::from_be_bytes([p[2], p[3]])), p.len());
            assert_eq!(checksum::compute(&p[..20]), 0, "IPv4 checksum of {i}");
            let seq = u32::from_be_bytes(p[24..28].try_into().unwrap());
            assert_eq!(seq, 0xffff_f000u32.wrapping_add(i as u32 * 1448), "wraps");
            assert_eq!(
                u16::from_be_bytes([p[4], p[5]]),
                0xfffeu16.wrapping_add(i as u16)
            );
            assert_eq!(p[33] & 0x08 != 0, i == 2, "PSH only on the last");
            assert_eq!(VnetHdr::parse(s).unwrap().gso_type, GSO_NONE);
        }
        // The payloads, in order, are the original payload.
        let joined: Vec<u8> = segs
            .iter()
            .flat_map(|s| s[VNET_HDR_LEN + 52..].to_vec())
            .collect();
        assert_eq!(joined, f[VNET_HDR_LEN + 52..]);
    }

    #[test]
    fn segments_coalesce_back_into_the_super_packet() {
        let f = tso(4 * 1448, 1448, 0x18);
        let mut segs = vec![];
        split(&f, &mut vec![], |s| segs.push(s.to_vec())).unwrap();
        let infos: Vec<SegInfo> = segs.iter().map(|s| SegInfo::of(s).unwrap()).collect();
        for w in infos.windows(2) {
            assert!(w[0].continues(&w[1], 1448));
        }
        // Out of order or a gap: no.
        assert!(!infos[1].continues(&infos[0], 1448));
        assert!(!infos[0].continues(&infos[2], 1448));
        let refs: Vec<&[u8]> = segs.iter().map(|s| s.as_slice()).collect();
        let mut out = vec![];
        coalesce(&refs, &mut out);
        let h = VnetHdr::parse(&out).unwrap();
        assert_eq!((h.gso_type, h.gso_size, h.hdr_len), (GSO_TCPV4, 1448, 52));
        // Same packet as before the split, but for the IP ID and the checksums.
        let (a, b) = (&out[VNET_HDR_LEN..], &f[VNET_HDR_LEN..]);
        assert_eq!(a.len(), b.len());
        assert_eq!(a[..4], b[..4]);
        assert_eq!(a[12..36], b[12..36]);
        assert_eq!(a[38..], b[38..]);
        assert_eq!(checksum::compute(&a[..20]), 0);
    }

    #[test]
    fn a_plain_frame_passes_through_and_bad_ones_are_refused() {
        let mut f = tso(100, 0, 0x10);
        VnetHdr::default().emit(&mut f);
        let mut n = 0;
        split(&f, &mut vec![], |s| {
            assert_eq!(s, &f[..]);
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 1);
        let mut g = tso(3000, 1448, 0x10);
        g[VNET_HDR_LEN + 9] = 17; // not TCP
        assert_eq!(split(&g, &mut vec![], |_| {}), Err(SplitError::Malformed));
        let mut g = tso(3000, 1448, 0x10);
        g[1] = 4; // TCPv6
        assert_eq!(
            split(&g, &mut vec![], |_| {}),
            Err(SplitError::Unsupported(4))
        );
        assert_eq!(
            split(&[0u8; 4], &mut vec![], |_| {}),
            Err(SplitError::Malformed)
        );
        // A SYN is never coalesced.
        let mut s = vec![];
        split(&tso(10, 1448, 0x02), &mut vec![], |x| s.push(x.to_vec())).unwrap();
        assert!(SegInfo::of(&s[0]).is_none());
    }

    proptest::proptest! {
        /// Whatever a TUN hands over (a super-packet with any of its header bytes,
        /// virtio or IP or TCP, damaged, or cut short): splitting and classifying it
        /// return an answer, never panic, and every segment split off fits a wire
        /// packet of its `gso_size`.
        #[test]
        fn damaged_frames_never_panic(
            payload in 0usize..4000,
            mss in 1u16..2000,
            edits in proptest::collection::vec((0usize..100, proptest::prelude::any::<u8>()), 0..6),
            cut in proptest::option::of(0usize..4100),
        ) {
            let mut f = tso(payload, mss, 0x18);
            for (at, v) in edits {
                // The first 100 bytes: the virtio, IPv4 and TCP headers.
                if let Some(b) = f.get_mut(at) {
                    *b = v;
                }
            }
            if let Some(c) = cut {
                f.truncate(c.min(f.len()));
            }
            let gso = VnetHdr::parse(&f).map(|h| usize::from(h.gso_size));
            let mut longest = 0;
            let _ = split(&f, &mut vec![], |seg| longest = longest.max(seg.len()));
            if let (Some(g), Some((ihl, doff))) = (gso, f.get(VNET_HDR_LEN..).and_then(tcp4_lengths)) {
                if VnetHdr::parse(&f).is_some_and(|h| h.gso_type & 0x7f == GSO_TCPV4) {
                    proptest::prop_assert!(longest <= VNET_HDR_LEN + ihl + doff + g);
                }
            }
            let _ = SegInfo::of(&f);
            if let Some(info) = SegInfo::of(&f) {
                let mut out = vec![];
                coalesce(&[&f, &f], &mut out);
                proptest::prop_assert!(out.len() >= VNET_HDR_LEN + info.payload());
            }
        }
    }
}
