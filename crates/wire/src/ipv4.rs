//! IPv4 (RFC 791), without fragmentation and without options on emit.

use crate::{checksum, Checksum, Error, Result};

/// An IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ipv4Address(pub [u8; 4]);

impl Ipv4Address {
    /// Builds an address from its four octets.
    pub const fn new(a: u8, b: u8, c: u8, d: u8) -> Self {
        Ipv4Address([a, b, c, d])
    }
    /// The address as a big-endian integer.
    pub const fn to_bits(self) -> u32 {
        u32::from_be_bytes(self.0)
    }
    /// The address from a big-endian integer.
    pub const fn from_bits(bits: u32) -> Self {
        Ipv4Address(bits.to_be_bytes())
    }
}

impl core::fmt::Display for Ipv4Address {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// The IP protocol numbers longhaul uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    /// TCP, 6.
    Tcp,
    /// UDP, 17.
    Udp,
    /// SCTP, 132.
    Sctp,
    /// Any other number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            132 => IpProtocol::Sctp,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(p: IpProtocol) -> u8 {
        match p {
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Sctp => 132,
            IpProtocol::Unknown(v) => v,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DS_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// A read/write view of an IPv4 header and whatever part of its payload is present.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len). Use this on untrusted input.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the header is present and self-consistent.
    ///
    /// The payload may be shorter than the total length says (see the crate docs on
    /// elided payloads), but never longer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if self.version() != 4 || hl < HEADER_LEN || usize::from(self.total_len()) < hl {
            return Err(Error::Malformed);
        }
        if len < hl {
            return Err(Error::Truncated);
        }
        if len > usize::from(self.total_len()) {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// Releases the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// The version field (4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// The header length in bytes.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }
    /// The DiffServ code point (RFC 2474).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DS_ECN] >> 2
    }
    /// The ECN bits (RFC 3168).
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DS_ECN] & 0x03
    }
    /// The total length (header and payload) in bytes.
    pub fn total_len(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::LENGTH.start], b[field::LENGTH.start + 1]])
    }
    /// The identification field.
    pub fn ident(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::IDENT.start], b[field::IDENT.start + 1]])
    }
    /// The time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    /// The payload protocol.
    pub fn protocol(&self) -> IpProtocol {
        self.buffer.as_ref()[field::PROTOCOL].into()
    }
    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::CHECKSUM.start], b[field::CHECKSUM.start + 1]])
    }
    /// The source address.
    pub fn src_addr(&self) -> Ipv4Address {
        let b = self.buffer.as_ref();
        Ipv4Address([b[12], b[13], b[14], b[15]])
    }
    /// The destination address.
    pub fn dst_addr(&self) -> Ipv4Address {
        let b = self.buffer.as_ref();
        Ipv4Address([b[16], b[17], b[18], b[19]])
    }
    /// Whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::compute(&self.buffer.as_ref()[..self.header_len()]) == 0
    }
    /// The part of the payload present in the buffer.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
    /// The payload length the header declares (which may exceed `payload().len()`).
    pub fn payload_len(&self) -> usize {
        usize::from(self.total_len()).saturating_sub(self.header_len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the DSCP, keeping the ECN bits.
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = self.buffer.as_mut();
        b[field::DS_ECN] = (dscp << 2) | (b[field::DS_ECN] & 0x03);
    }
    /// Sets the ECN field (RFC 3168: 00 not ECT, 01 ECT(1), 10 ECT(0), 11 CE),
    /// keeping the DSCP.
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = self.buffer.as_mut();
        b[field::DS_ECN] = (b[field::DS_ECN] & !0x03) | (ecn & 0x03);
    }
    /// Sets the total length (header and payload).
    pub fn set_total_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&len.to_be_bytes());
    }
    /// Sets the time to live.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }
    /// Recomputes the header checksum.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = checksum::compute(&b[..hl]);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
    /// The payload present in the buffer, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }
}

/// A validated IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Address,
    /// Destination address.
    pub dst_addr: Ipv4Address,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// Payload length in bytes (whether or not the payload is present).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DiffServ code point.
    pub dscp: u8,
}

impl Ipv4Repr {
    /// Parses and validates a header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>, checksum: Checksum) -> Result<Self> {
        packet.check_len()?;
        if checksum == Checksum::Both && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.payload_len(),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
        })
    }

    /// The header length `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into the first 20 bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 20 bytes or `payload_len` does not fit the 16-bit
    /// total length; both are caller bugs, not input errors.
    pub fn emit(&self, buf: &mut [u8], checksum: Checksum) {
        let total = u16::try_from(HEADER_LEN + self.payload_len).expect("IPv4 total length");
        let b = &mut buf[..HEADER_LEN];
        b[field::VER_IHL] = 0x45;
        b[field::DS_ECN] = self.dscp << 2;
        b[field::LENGTH].copy_from_slice(&total.to_be_bytes());
        b[field::IDENT].copy_from_slice(&[0, 0]);
        // Don't Fragment: longhaul never fragments.
        b[field::FLG_OFF].copy_from_slice(&[0x40, 0]);
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = self.protocol.into();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        b[field::SRC_ADDR].copy_from_slice(&self.src_addr.0);
        b[field::DST_ADDR].copy_from_slice(&self.dst_addr.0);
        if checksum == Checksum::Both {
            let c = checksum::compute(b);
            b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            0usize..60000,
            1u8..=255,
            0u8..64,
        )
            .prop_map(|(s, d, p, len, ttl, dscp)| Ipv4Repr {
                src_addr: Ipv4Address::from_bits(s),
                dst_addr: Ipv4Address::from_bits(d),
                protocol: p.into(),
                payload_len: len,
                ttl,
                dscp,
            })
    }

    proptest! {
        #[test]
        fn roundtrip(r in repr()) {
            let mut buf = [0u8; HEADER_LEN];
            r.emit(&mut buf, Checksum::Both);
            let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Ipv4Repr::parse(&p, Checksum::Both).unwrap(), r);
        }

        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Ipv4Packet::new_checked(&bytes[..]) {
                let _ = Ipv4Repr::parse(&p, Checksum::Both);
                let _ = p.payload();
            }
        }
    }

    /// Marking CE (as a RED queue does) keeps the DSCP, and the refilled checksum
    /// verifies, whatever the codepoints were.
    #[test]
    fn setting_ecn_keeps_the_dscp_and_the_checksum_refills() {
        for (dscp, ecn) in [(0, 1), (10, 2), (46, 0), (63, 3)] {
            let r = Ipv4Repr {
                src_addr: Ipv4Address::new(10, 77, 0, 1),
                dst_addr: Ipv4Address::new(10, 77, 0, 2),
                protocol: IpProtocol::Udp,
                payload_len: 8,
                ttl: 64,
                dscp,
            };
            let mut buf = [0u8; HEADER_LEN];
            r.emit(&mut buf, Checksum::Both);
            let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
            p.set_ecn(ecn);
            p.fill_checksum();
            assert_eq!(p.ecn(), ecn);
            p.set_ecn(3);
            p.fill_checksum();
            assert_eq!((p.dscp(), p.ecn()), (dscp, 3));
            assert!(p.verify_checksum(), "dscp {dscp}, ecn {ecn}");
        }
    }

    #[test]
    fn rejects_bad_version_and_short_total_length() {
        let r = Ipv4Repr {
            src_addr: Ipv4Address::new(10, 0, 0, 1),
            dst_addr: Ipv4Address::new(10, 0, 0, 2),
            protocol: IpProtocol::Udp,
            payload_len: 8,
            ttl: 64,
            dscp: 46,
        };
        let mut buf = [0u8; HEADER_LEN];
        r.emit(&mut buf, Checksum::Both);
        let mut bad = buf;
        bad[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
        let mut bad = buf;
        bad[2..4].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
        let mut bad = buf;
        bad[8] ^= 1;
        let p = Ipv4Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p, Checksum::Both), Err(Error::Checksum));
        assert_eq!(
            Ipv4Packet::new_checked(&buf[..10]).unwrap_err(),
            Error::Truncated
        );
    }
}
