//! longhaul-wire: packet formats as zero-copy views and validated representations.
//!
//! Each protocol has two types, after smoltcp:
//! - `FooPacket<T: AsRef<[u8]>>`, a view over a buffer with field accessors (and setters
//!   when `T: AsMut<[u8]>`). Once [`Ipv4Packet::new_checked`] (or its peers) returned
//!   `Ok`, no accessor panics.
//! - `FooRepr`, a validated high-level description with `parse`, `emit` and
//!   `buffer_len`. If a `Repr` can be built, it can be emitted, and
//!   `parse(emit(r)) == r`.
//!
//! This crate holds no state and allocates nothing on the parse path; it never panics
//! on input. It knows IPv4 (RFC 791), TCP (RFC 9293, with the MSS, window scale, SACK
//! permitted and SACK options of RFC 7323 and RFC 2018) and UDP (RFC 768), UDT (4.11) and SCTP (RFC 9260),
//! the block header that frames file data on a parallel transfer's channels, and
//! the UDP blast protocols' data header and control messages (RBUDP, Tsunami, SABUL).
//!
//! **Elided payloads.** The simulator carries real header bytes and only the *length*
//! of a payload. A datagram whose IPv4 total length runs past the end of the buffer is
//! therefore accepted, as a packet capture taken with a short snap length would be:
//! the missing payload is taken to be zero bytes, which leaves the Internet checksum
//! unchanged, so checksums computed here are those of the full zero-filled packet.

#![warn(missing_docs)]

pub mod blast;
pub mod block;
pub mod checksum;
pub mod ipv4;
pub mod pcap;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod udt;

pub use ipv4::{IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr};
pub use tcp::{TcpControl, TcpPacket, TcpRepr, TcpSeqNumber};
pub use udp::{UdpPacket, UdpRepr};

/// The one error of this crate: the bytes are not a valid packet of the kind asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header it must hold.
    Truncated,
    /// A field holds a value the format does not allow.
    Malformed,
    /// The checksum does not match the bytes.
    Checksum,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated packet"),
            Error::Malformed => f.write_str("malformed packet"),
            Error::Checksum => f.write_str("checksum mismatch"),
        }
    }
}

impl std::error::Error for Error {}

/// The big-endian `u16` at `b[at..]` (the caller checked the length). Engines' fast
/// paths read fixed header offsets with these too.
#[inline(always)]
pub fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The big-endian `u32` at `b[at..]` (the caller checked the length).
#[inline(always)]
pub fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Result of parsing wire data.
pub type Result<T> = core::result::Result<T, Error>;

/// Whether `emit` fills checksums and `parse` verifies them.
///
/// The simulator's hot path skips both (its links do not corrupt bits) and fills them
/// only when a packet is written to a pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checksum {
    /// Compute on emit, verify on parse.
    #[default]
    Both,
    /// Leave checksum fields as zero on emit and do not verify on parse.
    None,
}
