//! SCTP (RFC 9260): the common header, chunks and the parameters the association
//! engine uses.
//!
//! An SCTP packet is a 12-byte common header followed by chunks, each a 4-byte
//! header (type, flags, length) and a value, padded to a multiple of 4 bytes; the
//! length field excludes the padding. [`SctpPacket`] is the view over a packet;
//! [`Chunks`] walks its chunks and yields [`ChunkRepr`]s that borrow from the buffer
//! (a DATA chunk's user data, a cookie, SACK gap blocks), so parsing allocates nothing.
//!
//! Unlike TCP and UDP the checksum is CRC32c (RFC 9260 Appendix B) over the whole
//! packet, not the Internet checksum, and it covers the payload: SCTP packets are
//! therefore always carried whole, never with an elided payload.
//!
//! What is not here: parameters other than the state cookie and heartbeat info
//! (unknown ones are skipped, as RFC 9260 §3.2.1 lets a receiver do for types whose
//! two high bits are `01`/`11`; we skip every unknown type rather than report it),
//! IPv6 addresses, and the chunks of extensions (ASCONF, FORWARD-TSN, I-DATA, ...),
//! which parse as [`ChunkRepr::Unknown`].

use crate::{be16, be32, Error, Result};

/// Length of the common header.
pub const HEADER_LEN: usize = 12;
/// Length of a chunk header.
pub const CHUNK_HEADER_LEN: usize = 4;
/// Length of a DATA chunk's header (chunk header included).
pub const DATA_HEADER_LEN: usize = 16;
/// Length of a SACK chunk without gap blocks or duplicate TSNs.
pub const SACK_HEADER_LEN: usize = 16;
/// Length of an INIT or INIT-ACK chunk without parameters.
pub const INIT_HEADER_LEN: usize = 20;

/// Chunk type codes (RFC 9260 §3.2).
pub mod chunk_type {
    /// Payload data.
    pub const DATA: u8 = 0;
    /// Initiation.
    pub const INIT: u8 = 1;
    /// Initiation acknowledgement.
    pub const INIT_ACK: u8 = 2;
    /// Selective acknowledgement.
    pub const SACK: u8 = 3;
    /// Heartbeat request.
    pub const HEARTBEAT: u8 = 4;
    /// Heartbeat acknowledgement.
    pub const HEARTBEAT_ACK: u8 = 5;
    /// Abort.
    pub const ABORT: u8 = 6;
    /// Shutdown.
    pub const SHUTDOWN: u8 = 7;
    /// Shutdown acknowledgement.
    pub const SHUTDOWN_ACK: u8 = 8;
    /// Operation error.
    pub const ERROR: u8 = 9;
    /// State cookie.
    pub const COOKIE_ECHO: u8 = 10;
    /// Cookie acknowledgement.
    pub const COOKIE_ACK: u8 = 11;
    /// Shutdown complete.
    pub const SHUTDOWN_COMPLETE: u8 = 14;
}

/// Parameter type of the state cookie in INIT-ACK (RFC 9260 §3.3.3).
const PARAM_STATE_COOKIE: u16 = 7;
/// Parameter type of heartbeat info (RFC 9260 §3.3.5).
const PARAM_HEARTBEAT_INFO: u16 = 1;

/// `n` rounded up to a multiple of 4.
pub const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// A view of an SCTP packet (the IP payload).
#[derive(Debug, Clone)]
pub struct SctpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        SctpPacket { buffer }
    }
    /// Wraps a buffer after checking that the common header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self::new_unchecked(buffer))
    }
    fn u16_at(&self, i: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[i], b[i + 1]])
    }
    fn u32_at(&self, i: usize) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(2)
    }
    /// Verification tag.
    pub fn verification_tag(&self) -> u32 {
        self.u32_at(4)
    }
    /// The checksum as it appears on the wire (CRC32c, least significant byte first).
    pub fn checksum(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_le_bytes([b[8], b[9], b[10], b[11]])
    }
    /// The chunk bytes.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    /// The chunks, in order.
    pub fn chunks(&self) -> Chunks<'_> {
        Chunks {
            rest: self.payload(),
        }
    }
    /// The CRC32c of the packet with the checksum field taken as zero.
    pub fn compute_checksum(&self) -> u32 {
        let b = self.buffer.as_ref();
        let crc = crc32c::crc32c(&b[..8]);
        let crc = crc32c::crc32c_append(crc, &[0; 4]);
        crc32c::crc32c_append(crc, &b[HEADER_LEN..])
    }
    /// Whether the checksum field matches the packet.
    pub fn verify_checksum(&self) -> bool {
        self.checksum() == self.compute_checksum()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    /// Computes and stores the checksum. RFC 9260 Appendix B transmits the CRC's
    /// least significant byte first, which is what Linux, usrsctp and Wireshark do.
    pub fn fill_checksum(&mut self) {
        let c = self.compute_checksum();
        self.buffer.as_mut()[8..12].copy_from_slice(&c.to_le_bytes());
    }
}

/// The common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SctpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Verification tag (zero only on an INIT).
    pub verification_tag: u32,
}

impl SctpRepr {
    /// Parses the common header, verifying the checksum if asked.
    pub fn parse<T: AsRef<[u8]>>(packet: &SctpPacket<T>, verify: bool) -> Result<Self> {
        if verify && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(SctpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            verification_tag: packet.verification_tag(),
        })
    }
    /// Writes the common header with a zero checksum (fill it once the chunks are in).
    pub fn emit(&self, buf: &mut [u8]) {
        buf[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        buf[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[4..8].copy_from_slice(&self.verification_tag.to_be_bytes());
        buf[8..12].copy_from_slice(&[0; 4]);
    }
}

/// The flags of a DATA chunk (RFC 9260 §3.3.1; I from RFC 7053).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataFlags {
    /// U: unordered.
    pub unordered: bool,
    /// B: first fragment of a message.
    pub beginning: bool,
    /// E: last fragment of a message.
    pub ending: bool,
    /// I: the receiver should SACK at once.
    pub immediate: bool,
}

impl DataFlags {
    fn bits(self) -> u8 {
        u8::from(self.ending)
            | u8::from(self.beginning) << 1
            | u8::from(self.unordered) << 2
            | u8::from(self.immediate) << 3
    }
    fn from_bits(b: u8) -> Self {
        DataFlags {
            ending: b & 1 != 0,
            beginning: b & 2 != 0,
            unordered: b & 4 != 0,
            immediate: b & 8 != 0,
        }
    }
}

/// INIT and INIT-ACK (RFC 9260 §3.3.2, §3.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitRepr<'a> {
    /// The tag the peer must put in every packet it sends to us.
    pub initiate_tag: u32,
    /// Advertised receiver window credit, bytes.
    pub a_rwnd: u32,
    /// Number of outbound streams the sender wants.
    pub outbound_streams: u16,
    /// Largest number of inbound streams the sender allows.
    pub max_inbound_streams: u16,
    /// The sender's first TSN.
    pub initial_tsn: u32,
    /// The state cookie (INIT-ACK only, where it is mandatory).
    pub cookie: Option<&'a [u8]>,
}

/// A list of SACK gap blocks: from the wire or from the caller.
#[derive(Debug, Clone, Copy)]
pub enum GapBlocks<'a> {
    /// Big-endian (start, end) pairs as on the wire.
    Wire(&'a [u8]),
    /// Offsets from the cumulative TSN, inclusive.
    List(&'a [(u16, u16)]),
}

impl<'a> GapBlocks<'a> {
    /// Number of blocks.
    pub fn len(&self) -> usize {
        match self {
            GapBlocks::Wire(b) => b.len() / 4,
            GapBlocks::List(l) => l.len(),
        }
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The blocks, as (start, end) offsets from the cumulative TSN.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u16)> + 'a {
        let (wire, list): (&'a [u8], &'a [(u16, u16)]) = match *self {
            GapBlocks::Wire(b) => (b, &[]),
            GapBlocks::List(l) => (&[], l),
        };
        wire.chunks_exact(4)
            .map(|c| {
                (
                    u16::from_be_bytes([c[0], c[1]]),
                    u16::from_be_bytes([c[2], c[3]]),
                )
            })
            .chain(list.iter().copied())
    }
}

impl PartialEq for GapBlocks<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}
impl Eq for GapBlocks<'_> {}

/// A list of duplicate TSNs: from the wire or from the caller.
#[derive(Debug, Clone, Copy)]
pub enum DupTsns<'a> {
    /// Big-endian TSNs as on the wire.
    Wire(&'a [u8]),
    /// TSNs.
    List(&'a [u32]),
}

impl<'a> DupTsns<'a> {
    /// Number of TSNs.
    pub fn len(&self) -> usize {
        match self {
            DupTsns::Wire(b) => b.len() / 4,
            DupTsns::List(l) => l.len(),
        }
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The TSNs.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        let (wire, list): (&'a [u8], &'a [u32]) = match *self {
            DupTsns::Wire(b) => (b, &[]),
            DupTsns::List(l) => (&[], l),
        };
        wire.chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .chain(list.iter().copied())
    }
}

impl PartialEq for DupTsns<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}
impl Eq for DupTsns<'_> {}

/// SACK (RFC 9260 §3.3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackRepr<'a> {
    /// Cumulative TSN acknowledged.
    pub cum_tsn: u32,
    /// Advertised receiver window credit, bytes.
    pub a_rwnd: u32,
    /// Gap ack blocks.
    pub gap_blocks: GapBlocks<'a>,
    /// Duplicate TSNs received since the last SACK.
    pub dup_tsns: DupTsns<'a>,
}

/// One chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkRepr<'a> {
    /// DATA.
    Data {
        /// Transmission sequence number.
        tsn: u32,
        /// Stream identifier.
        stream_id: u16,
        /// Stream sequence number (meaningless when unordered).
        ssn: u16,
        /// Payload protocol identifier, opaque to SCTP.
        ppid: u32,
        /// U, B, E and I.
        flags: DataFlags,
        /// User data (at least one byte).
        data: &'a [u8],
    },
    /// INIT.
    Init(InitRepr<'a>),
    /// INIT-ACK.
    InitAck(InitRepr<'a>),
    /// SACK.
    Sack(SackRepr<'a>),
    /// HEARTBEAT, with its opaque heartbeat info.
    Heartbeat {
        /// Sender-specific information, echoed back.
        info: &'a [u8],
    },
    /// HEARTBEAT-ACK.
    HeartbeatAck {
        /// The info of the HEARTBEAT answered.
        info: &'a [u8],
    },
    /// ABORT.
    Abort {
        /// T bit: the verification tag is the sender's own (reflected).
        tag_reflected: bool,
        /// Error causes, raw.
        causes: &'a [u8],
    },
    /// SHUTDOWN.
    Shutdown {
        /// Cumulative TSN the sender has received.
        cum_tsn: u32,
    },
    /// SHUTDOWN-ACK.
    ShutdownAck,
    /// ERROR.
    Error {
        /// Error causes, raw.
        causes: &'a [u8],
    },
    /// COOKIE-ECHO.
    CookieEcho {
        /// The state cookie from INIT-ACK.
        cookie: &'a [u8],
    },
    /// COOKIE-ACK.
    CookieAck,
    /// SHUTDOWN-COMPLETE.
    ShutdownComplete {
        /// T bit, as in ABORT.
        tag_reflected: bool,
    },
    /// Any other chunk, kept so the caller can apply RFC 9260 §3.2's rules.
    Unknown {
        /// Type code.
        kind: u8,
        /// Flags.
        flags: u8,
        /// Value.
        value: &'a [u8],
    },
}

/// Walks a TLV parameter list; returns the value of the first parameter of `kind`.
fn find_param(mut params: &[u8], kind: u16) -> Result<Option<&[u8]>> {
    let mut found = None;
    while !params.is_empty() {
        if params.len() < 4 {
            return Err(Error::Truncated);
        }
        let t = be16(params, 0);
        let len = usize::from(be16(params, 2));
        if len < 4 {
            return Err(Error::Malformed);
        }
        if len > params.len() {
            return Err(Error::Truncated);
        }
        if t == kind && found.is_none() {
            found = Some(&params[4..len]);
        }
        params = &params[pad4(len).min(params.len())..];
    }
    Ok(found)
}

impl<'a> ChunkRepr<'a> {
    /// The type code.
    pub fn kind(&self) -> u8 {
        use chunk_type::*;
        match self {
            ChunkRepr::Data { .. } => DATA,
            ChunkRepr::Init(_) => INIT,
            ChunkRepr::InitAck(_) => INIT_ACK,
            ChunkRepr::Sack(_) => SACK,
            ChunkRepr::Heartbeat { .. } => HEARTBEAT,
            ChunkRepr::HeartbeatAck { .. } => HEARTBEAT_ACK,
            ChunkRepr::Abort { .. } => ABORT,
            ChunkRepr::Shutdown { .. } => SHUTDOWN,
            ChunkRepr::ShutdownAck => SHUTDOWN_ACK,
            ChunkRepr::Error { .. } => ERROR,
            ChunkRepr::CookieEcho { .. } => COOKIE_ECHO,
            ChunkRepr::CookieAck => COOKIE_ACK,
            ChunkRepr::ShutdownComplete { .. } => SHUTDOWN_COMPLETE,
            ChunkRepr::Unknown { kind, .. } => *kind,
        }
    }

    /// Parses one chunk from the front of `buf`; returns it and the bytes it took
    /// (padding included, as far as the buffer has it).
    pub fn parse(buf: &'a [u8]) -> Result<(Self, usize)> {
        if buf.len() < CHUNK_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let (kind, flags) = (buf[0], buf[1]);
        let len = usize::from(be16(buf, 2));
        if len < CHUNK_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len > buf.len() {
            return Err(Error::Truncated);
        }
        let value = &buf[CHUNK_HEADER_LEN..len];
        let taken = pad4(len).min(buf.len());
        let fixed = |n: usize| {
            if value.len() < n {
                Err(Error::Malformed)
            } else {
                Ok(())
            }
        };
        use chunk_type::*;
        let repr = match kind {
            DATA => {
                fixed(DATA_HEADER_LEN - CHUNK_HEADER_LEN + 1)?;
                ChunkRepr::Data {
                    tsn: be32(value, 0),
                    stream_id: be16(value, 4),
                    ssn: be16(value, 6),
                    ppid: be32(value, 8),
                    flags: DataFlags::from_bits(flags),
                    data: &value[12..],
                }
            }
            INIT | INIT_ACK => {
                fixed(INIT_HEADER_LEN - CHUNK_HEADER_LEN)?;
                let init_tag = be32(value, 0);
                let os = be16(value, 8);
                let mis = be16(value, 10);
                // RFC 9260 §3.3.2: a zero Initiate Tag or zero stream counts are
                // protocol violations.
                if init_tag == 0 || os == 0 || mis == 0 {
                    return Err(Error::Malformed);
                }
                let cookie = find_param(&value[16..], PARAM_STATE_COOKIE)?;
                let init = InitRepr {
                    initiate_tag: init_tag,
                    a_rwnd: be32(value, 4),
                    outbound_streams: os,
                    max_inbound_streams: mis,
                    initial_tsn: be32(value, 12),
                    cookie,
                };
                if kind == INIT {
                    ChunkRepr::Init(InitRepr {
                        cookie: None,
                        ..init
                    })
                } else {
                    if init.cookie.is_none() {
                        return Err(Error::Malformed);
                    }
                    ChunkRepr::InitAck(init)
                }
            }
            SACK => {
                fixed(SACK_HEADER_LEN - CHUNK_HEADER_LEN)?;
                let gaps = usize::from(be16(value, 8));
                let dups = usize::from(be16(value, 10));
                if value.len() != 12 + 4 * gaps + 4 * dups {
                    return Err(Error::Malformed);
                }
                ChunkRepr::Sack(SackRepr {
                    cum_tsn: be32(value, 0),
                    a_rwnd: be32(value, 4),
                    gap_blocks: GapBlocks::Wire(&value[12..12 + 4 * gaps]),
                    dup_tsns: DupTsns::Wire(&value[12 + 4 * gaps..]),
                })
            }
            HEARTBEAT | HEARTBEAT_ACK => {
                let info = find_param(value, PARAM_HEARTBEAT_INFO)?.ok_or(Error::Malformed)?;
                if kind == HEARTBEAT {
                    ChunkRepr::Heartbeat { info }
                } else {
                    ChunkRepr::HeartbeatAck { info }
                }
            }
            ABORT => ChunkRepr::Abort {
                tag_reflected: flags & 1 != 0,
                causes: value,
            },
            SHUTDOWN => {
                if value.len() != 4 {
                    return Err(Error::Malformed);
                }
                ChunkRepr::Shutdown {
                    cum_tsn: be32(value, 0),
                }
            }
            SHUTDOWN_ACK if value.is_empty() => ChunkRepr::ShutdownAck,
            ERROR => ChunkRepr::Error { causes: value },
            COOKIE_ECHO => ChunkRepr::CookieEcho { cookie: value },
            COOKIE_ACK if value.is_empty() => ChunkRepr::CookieAck,
            SHUTDOWN_COMPLETE if value.is_empty() => ChunkRepr::ShutdownComplete {
                tag_reflected: flags & 1 != 0,
            },
            SHUTDOWN_ACK | COOKIE_ACK | SHUTDOWN_COMPLETE => return Err(Error::Malformed),
            _ => ChunkRepr::Unknown { kind, flags, value },
        };
        Ok((repr, taken))
    }

    /// The chunk's length field: header and value, without padding.
    pub fn buffer_len(&self) -> usize {
        let value = match self {
            ChunkRepr::Data { data, .. } => DATA_HEADER_LEN - CHUNK_HEADER_LEN + data.len(),
            ChunkRepr::Init(i) | ChunkRepr::InitAck(i) => {
                // RFC 9260 §3.2: the length counts the padding of every parameter
                // but the last; the cookie is the only (so the last) one.
                INIT_HEADER_LEN - CHUNK_HEADER_LEN + i.cookie.map_or(0, |c| 4 + c.len())
            }
            ChunkRepr::Sack(s) => {
                SACK_HEADER_LEN - CHUNK_HEADER_LEN + 4 * s.gap_blocks.len() + 4 * s.dup_tsns.len()
            }
            ChunkRepr::Heartbeat { info } | ChunkRepr::HeartbeatAck { info } => 4 + info.len(),
            ChunkRepr::Abort { causes, .. } | ChunkRepr::Error { causes } => causes.len(),
            ChunkRepr::Shutdown { .. } => 4,
            ChunkRepr::CookieEcho { cookie } => cookie.len(),
            ChunkRepr::ShutdownAck | ChunkRepr::CookieAck | ChunkRepr::ShutdownComplete { .. } => 0,
            ChunkRepr::Unknown { value, .. } => value.len(),
        };
        CHUNK_HEADER_LEN + value
    }

    /// Bytes the chunk takes in a packet: its length padded to 4.
    pub fn padded_len(&self) -> usize {
        pad4(self.buffer_len())
    }

    /// Whether the chunk can be emitted: its length fits the 16-bit field and the
    /// lists their 16-bit counts. `emit` panics on a chunk that fails this.
    pub fn is_valid(&self) -> bool {
        let counts_ok = match self {
            ChunkRepr::Sack(s) => s.gap_blocks.len() <= 0xffff && s.dup_tsns.len() <= 0xffff,
            ChunkRepr::Data { data, .. } => !data.is_empty(),
            ChunkRepr::Init(i) | ChunkRepr::InitAck(i) => {
                i.initiate_tag != 0 && i.outbound_streams != 0 && i.max_inbound_streams != 0
            }
            _ => true,
        };
        counts_ok && self.padded_len() <= 0xffff
    }

    /// Writes the chunk, padding included, at the front of `buf`; returns the bytes
    /// written ([`padded_len`](Self::padded_len)).
    ///
    /// # Panics
    /// If `buf` is shorter than `padded_len()` or the chunk is not
    /// [`is_valid`](Self::is_valid).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        assert!(self.is_valid(), "chunk cannot be emitted: {self:?}");
        let len = self.buffer_len();
        let total = pad4(len);
        let buf = &mut buf[..total];
        let flags = match self {
            ChunkRepr::Data { flags, .. } => flags.bits(),
            ChunkRepr::Abort { tag_reflected, .. }
            | ChunkRepr::ShutdownComplete { tag_reflected } => u8::from(*tag_reflected),
            ChunkRepr::Unknown { flags, .. } => *flags,
            _ => 0,
        };
        buf[0] = self.kind();
        buf[1] = flags;
        buf[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        let v = &mut buf[CHUNK_HEADER_LEN..];
        match self {
            ChunkRepr::Data {
                tsn,
                stream_id,
                ssn,
                ppid,
                data,
                ..
            } => {
                v[0..4].copy_from_slice(&tsn.to_be_bytes());
                v[4..6].copy_from_slice(&stream_id.to_be_bytes());
                v[6..8].copy_from_slice(&ssn.to_be_bytes());
                v[8..12].copy_from_slice(&ppid.to_be_bytes());
                v[12..12 + data.len()].copy_from_slice(data);
            }
            ChunkRepr::Init(i) | ChunkRepr::InitAck(i) => {
                v[0..4].copy_from_slice(&i.initiate_tag.to_be_bytes());
                v[4..8].copy_from_slice(&i.a_rwnd.to_be_bytes());
                v[8..10].copy_from_slice(&i.outbound_streams.to_be_bytes());
                v[10..12].copy_from_slice(&i.max_inbound_streams.to_be_bytes());
                v[12..16].copy_from_slice(&i.initial_tsn.to_be_bytes());
                if let Some(c) = i.cookie {
                    emit_param(&mut v[16..], PARAM_STATE_COOKIE, c);
                }
            }
            ChunkRepr::Sack(s) => {
                v[0..4].copy_from_slice(&s.cum_tsn.to_be_bytes());
                v[4..8].copy_from_slice(&s.a_rwnd.to_be_bytes());
                v[8..10].copy_from_slice(&(s.gap_blocks.len() as u16).to_be_bytes());
                v[10..12].copy_from_slice(&(s.dup_tsns.len() as u16).to_be_bytes());
                let mut at = 12;
                for (a, b) in s.gap_blocks.iter() {
                    v[at..at + 2].copy_from_slice(&a.to_be_bytes());
                    v[at + 2..at + 4].copy_from_slice(&b.to_be_bytes());
                    at += 4;
                }
                for t in s.dup_tsns.iter() {
                    v[at..at + 4].copy_from_slice(&t.to_be_bytes());
                    at += 4;
                }
            }
            ChunkRepr::Heartbeat { info } | ChunkRepr::HeartbeatAck { info } => {
                emit_param(v, PARAM_HEARTBEAT_INFO, info);
            }
            ChunkRepr::Abort { causes: b, .. }
            | ChunkRepr::Error { causes: b }
            | ChunkRepr::CookieEcho { cookie: b }
            | ChunkRepr::Unknown { value: b, .. } => v[..b.len()].copy_from_slice(b),
            ChunkRepr::Shutdown { cum_tsn } => v[0..4].copy_from_slice(&cum_tsn.to_be_bytes()),
            ChunkRepr::ShutdownAck | ChunkRepr::CookieAck | ChunkRepr::ShutdownComplete { .. } => {}
        }
        buf[len..].fill(0);
        total
    }
}

/// Writes a TLV parameter with its padding.
fn emit_param(buf: &mut [u8], kind: u16, value: &[u8]) {
    let len = 4 + value.len();
    buf[0..2].copy_from_slice(&kind.to_be_bytes());
    buf[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    buf[4..len].copy_from_slice(value);
    buf[len..pad4(len)].fill(0);
}

/// An iterator over the chunks of a packet. After the first error it yields nothing.
#[derive(Debug, Clone)]
pub struct Chunks<'a> {
    rest: &'a [u8],
}

impl<'a> Chunks<'a> {
    /// Chunks in `bytes` (what follows the common header).
    pub fn new(bytes: &'a [u8]) -> Self {
        Chunks { rest: bytes }
    }
}

impl<'a> Iterator for Chunks<'a> {
    type Item = Result<ChunkRepr<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match ChunkRepr::parse(self.rest) {
            Ok((c, n)) => {
                self.rest = &self.rest[n..];
                Some(Ok(c))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// Builds a packet chunk by chunk into a caller's buffer.
#[derive(Debug)]
pub struct PacketBuilder<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> PacketBuilder<'b> {
    /// Starts a packet with `header` in `buf` (whose length is the most the packet
    /// may take, e.g. the path MTU less the IP header).
    ///
    /// # Panics
    /// If `buf` cannot hold the common header.
    pub fn new(buf: &'b mut [u8], header: SctpRepr) -> Self {
        header.emit(buf);
        PacketBuilder {
            buf,
            len: HEADER_LEN,
        }
    }
    /// Bytes still free.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.len
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether no chunk has been added.
    pub fn is_empty(&self) -> bool {
        self.len == HEADER_LEN
    }
    /// Appends `chunk` if it fits; returns whether it did.
    pub fn push(&mut self, chunk: &ChunkRepr<'_>) -> bool {
        if chunk.padded_len() > self.remaining() {
            return false;
        }
        self.len += chunk.emit(&mut self.buf[self.len..]);
        true
    }
    /// Fills the checksum (if asked) and returns the packet's length.
    pub fn finish(self, checksum: bool) -> usize {
        if checksum {
            SctpPacket::new_unchecked(&mut self.buf[..self.len]).fill_checksum();
        }
        self.len
    }
}

#[cfg(test)]
mod tests;
