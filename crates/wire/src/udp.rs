//! UDP (RFC 768).

use crate::{checksum, Checksum, Error, Ipv4Address, Result};

/// Length of a UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP header and whatever part of its payload is present.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }
    /// Wraps a buffer after checking that the header is present and the length field
    /// is at least a header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if usize::from(p.len()) < HEADER_LEN {
            return Err(Error::Malformed);
        }
        Ok(p)
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[0], b[1]])
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[2], b[3]])
    }
    /// Length field: header and payload.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[4], b[5]])
    }
    /// The payload present in the buffer.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Recomputes the checksum, taking an elided payload to be zeros.
    pub fn fill_checksum(&mut self, src: Ipv4Address, dst: Ipv4Address) {
        let len = self.len();
        let b = self.buffer.as_mut();
        b[6..8].copy_from_slice(&[0, 0]);
        let acc = checksum::pseudo_header(src.0, dst.0, 17, u32::from(len));
        let present = b.len().min(usize::from(len));
        let mut c = checksum::finish(checksum::accumulate(acc, &b[..present]));
        if c == 0 {
            c = 0xffff; // RFC 768: a computed zero is sent as all ones
        }
        b[6..8].copy_from_slice(&c.to_be_bytes());
    }
}

/// A validated UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes (whether or not the payload is present).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Parses a header.
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<Self> {
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()).saturating_sub(HEADER_LEN),
        })
    }

    /// Writes the header into the first 8 bytes of `buf`. With [`Checksum::Both`] the
    /// checksum covers the payload present in `buf` and zeros for the rest.
    ///
    /// # Panics
    /// If `buf` is shorter than 8 bytes or the length does not fit 16 bits.
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Address, dst: Ipv4Address, checksum: Checksum) {
        let len = u16::try_from(HEADER_LEN + self.payload_len).expect("UDP length");
        buf[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        buf[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[4..6].copy_from_slice(&len.to_be_bytes());
        buf[6..8].copy_from_slice(&[0, 0]);
        if checksum == Checksum::Both {
            UdpPacket::new_unchecked(buf).fill_checksum(src, dst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let r = UdpRepr {
            src_port: 5000,
            dst_port: 6000,
            payload_len: 1200,
        };
        let mut buf = [0u8; HEADER_LEN];
        r.emit(
            &mut buf,
            Ipv4Address::new(1, 2, 3, 4),
            Ipv4Address::new(5, 6, 7, 8),
            Checksum::Both,
        );
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p).unwrap(), r);
        assert_ne!(u16::from_be_bytes([buf[6], buf[7]]), 0);
    }

    #[test]
    fn short_length_field_is_malformed() {
        let buf = [0, 1, 0, 2, 0, 4, 0, 0];
        assert_eq!(
            UdpPacket::new_checked(&buf[..]).unwrap_err(),
            Error::Malformed
        );
    }
}
