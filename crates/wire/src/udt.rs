//! UDT packets (draft-gg-udt-03 §2), byte-compatible with the UDT4 4.11 reference.
//!
//! Every packet starts with four big-endian 32-bit words:
//!
//! ```text
//! data:     |0|        sequence number (31)        |
//!           |FF|O|     message number (29)         |
//!           |     timestamp (µs since connect)     |
//!           |        destination socket ID         |
//!
//! control:  |1|   type (15)   |  extended type (16) |
//!           |           additional info            |
//!           |              timestamp               |
//!           |        destination socket ID         |
//!           |   control information (32-bit words) |
//! ```
//!
//! Where the draft and UDT4 4.11 (`src/packet.cpp`, `src/core.cpp`, `src/channel.cpp`)
//! differ, this module does what 4.11 puts on the wire:
//! - keep-alive, shutdown, ACK2, congestion warning and peer error carry a 4-byte
//!   zero body (4.11's `writev` cannot send an empty one); an empty body is accepted;
//! - an ACK's body is 4 bytes (light ACK, additional info 0), 16 bytes (ACK number,
//!   RTT, RTT variance, available buffer in *packets*) or 24 bytes (plus receiving
//!   rate and link capacity in packets per second);
//! - control bodies are converted word by word to network order, so the handshake's
//!   peer-address words hold what the sender had in memory: on the little-endian hosts
//!   4.11 runs on, an IPv4 address's bytes appear reversed (see
//!   [`HandshakeRepr::peer_ip`]);
//! - the handshake's socket type is 1 for a stream socket and 2 for datagrams
//!   (`UDTSockType` in `core.h`).
//!
//! Payloads: a data packet's payload follows the header and is the caller's; as with
//! the other formats here, the buffer may end before the payload does (the simulator
//! elides payload bytes) and the UDP length says how long the packet is.

use crate::{Error, Result};

/// Length of the UDT header.
pub const HEADER_LEN: usize = 16;
/// Length of a handshake body.
pub const HANDSHAKE_LEN: usize = 48;
/// The largest sequence number; the next is 0.
pub const MAX_SEQ: u32 = 0x7FFF_FFFF;
/// The largest message number.
pub const MAX_MSG_NO: u32 = 0x1FFF_FFFF;
/// Sequence numbers closer than this compare directly (UDT4's `m_iSeqNoTH`).
const SEQ_THRESHOLD: i64 = 0x3FFF_FFFF;

/// A 31-bit UDT sequence number with UDT4's wrap-aware arithmetic (`CSeqNo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UdtSeqNumber(u32);

impl UdtSeqNumber {
    /// The sequence number `v` (the top bit is dropped).
    pub const fn new(v: u32) -> Self {
        UdtSeqNumber(v & MAX_SEQ)
    }
    /// The 31-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }
    /// The next number (`CSeqNo::incseq`).
    pub const fn inc(self) -> Self {
        UdtSeqNumber(if self.0 == MAX_SEQ { 0 } else { self.0 + 1 })
    }
    /// The previous number (`CSeqNo::decseq`).
    pub const fn dec(self) -> Self {
        UdtSeqNumber(if self.0 == 0 { MAX_SEQ } else { self.0 - 1 })
    }
    /// `self + n`, wrapping at 2^31 (`CSeqNo::incseq(seq, inc)`).
    pub const fn add(self, n: u32) -> Self {
        UdtSeqNumber(self.0.wrapping_add(n) & MAX_SEQ)
    }
    /// Signed distance from `self` to `later` (`CSeqNo::seqoff(self, later)`).
    pub fn offset_to(self, later: UdtSeqNumber) -> i32 {
        let (a, b) = (i64::from(self.0), i64::from(later.0));
        let m = i64::from(MAX_SEQ);
        let off = if (a - b).abs() < SEQ_THRESHOLD {
            b - a
        } else if a < b {
            b - a - m - 1
        } else {
            b - a + m + 1
        };
        off as i32
    }
    /// Number of sequence numbers from `self` to `last` inclusive
    /// (`CSeqNo::seqlen(self, last)`).
    pub fn len_to(self, last: UdtSeqNumber) -> u32 {
        if self.0 <= last.0 {
            last.0 - self.0 + 1
        } else {
            last.0
                .wrapping_sub(self.0)
                .wrapping_add(MAX_SEQ)
                .wrapping_add(2)
        }
    }
}

impl PartialOrd for UdtSeqNumber {
    /// `CSeqNo::seqcmp`: direct comparison when the numbers are less than 2^30 apart,
    /// reversed otherwise (one of them has wrapped).
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        let (a, b) = (i64::from(self.0), i64::from(other.0));
        let d = if (a - b).abs() < SEQ_THRESHOLD {
            a - b
        } else {
            b - a
        };
        Some(d.cmp(&0))
    }
}

impl core::fmt::Display for UdtSeqNumber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where a data packet sits in its message (the FF bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// 00: a middle packet.
    Middle,
    /// 01: the last packet.
    Last,
    /// 10: the first packet.
    First,
    /// 11: the only packet (stream sockets always send this).
    Solo,
}

impl Boundary {
    fn from_bits(b: u32) -> Self {
        match b & 3 {
            0 => Boundary::Middle,
            1 => Boundary::Last,
            2 => Boundary::First,
            _ => Boundary::Solo,
        }
    }
    fn bits(self) -> u32 {
        match self {
            Boundary::Middle => 0,
            Boundary::Last => 1,
            Boundary::First => 2,
            Boundary::Solo => 3,
        }
    }
}

mod field {
    pub const W0: usize = 0;
    pub const W1: usize = 4;
    pub const TIMESTAMP: usize = 8;
    pub const DEST_ID: usize = 12;
}

/// Control packet type numbers (bits 1-15 of the first word).
pub mod control_type {
    /// Connection handshake.
    pub const HANDSHAKE: u16 = 0;
    /// Keep-alive.
    pub const KEEP_ALIVE: u16 = 1;
    /// Acknowledgement.
    pub const ACK: u16 = 2;
    /// Negative acknowledgement (loss report).
    pub const NAK: u16 = 3;
    /// Congestion or delay warning.
    pub const CONGESTION_WARNING: u16 = 4;
    /// Shutdown.
    pub const SHUTDOWN: u16 = 5;
    /// Acknowledgement of an acknowledgement.
    pub const ACK2: u16 = 6;
    /// Message drop request.
    pub const MSG_DROP_REQUEST: u16 = 7;
    /// Error signal from the peer (UDT4 only).
    pub const PEER_ERROR: u16 = 8;
    /// User-defined: the extended type says which.
    pub const USER_DEFINED: u16 = 0x7FFF;
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn put(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// A view of a UDT packet.
#[derive(Debug, Clone)]
pub struct UdtPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdtPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdtPacket { buffer }
    }
    /// Wraps a buffer after checking that the header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(UdtPacket { buffer })
    }
    /// Whether this is a control packet (the first bit).
    pub fn is_control(&self) -> bool {
        self.buffer.as_ref()[0] & 0x80 != 0
    }
    /// Data: the sequence number.
    pub fn seq_number(&self) -> UdtSeqNumber {
        UdtSeqNumber::new(word(self.buffer.as_ref(), field::W0))
    }
    /// Data: the message boundary bits.
    pub fn boundary(&self) -> Boundary {
        Boundary::from_bits(word(self.buffer.as_ref(), field::W1) >> 30)
    }
    /// Data: the in-order delivery flag.
    pub fn in_order(&self) -> bool {
        word(self.buffer.as_ref(), field::W1) >> 29 & 1 == 1
    }
    /// Data: the 29-bit message number.
    pub fn msg_number(&self) -> u32 {
        word(self.buffer.as_ref(), field::W1) & MAX_MSG_NO
    }
    /// Control: the type (bits 1-15).
    pub fn control_type(&self) -> u16 {
        ((word(self.buffer.as_ref(), field::W0) >> 16) & 0x7FFF) as u16
    }
    /// Control: the extended type (bits 16-31).
    pub fn extended_type(&self) -> u16 {
        (word(self.buffer.as_ref(), field::W0) & 0xFFFF) as u16
    }
    /// Control: the additional info word.
    pub fn additional_info(&self) -> u32 {
        word(self.buffer.as_ref(), field::W1)
    }
    /// The timestamp, microseconds since the connection started.
    pub fn timestamp(&self) -> u32 {
        word(self.buffer.as_ref(), field::TIMESTAMP)
    }
    /// The destination socket ID (0 in a first connection request).
    pub fn dest_socket_id(&self) -> u32 {
        word(self.buffer.as_ref(), field::DEST_ID)
    }
    /// The bytes after the header that are present in the buffer.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

/// A handshake body (UDT4's `CHandShake`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeRepr {
    /// Protocol version: 4.
    pub version: u32,
    /// Socket type: 1 stream, 2 datagram.
    pub socket_type: u32,
    /// The initial sequence number.
    pub initial_seq: UdtSeqNumber,
    /// Maximum packet size, bytes, IP and UDP headers included.
    pub mss: u32,
    /// Maximum flow window, packets.
    pub flight_flag_size: u32,
    /// 1: request; -1: response (and second request); 0, -1, -2: rendezvous; 1002:
    /// rejected.
    pub request_type: i32,
    /// The sender's socket ID.
    pub socket_id: u32,
    /// The SYN cookie.
    pub cookie: u32,
    /// The peer's address as the sender saw it, four words. UDT4 on a little-endian
    /// host puts an IPv4 address in word 0 as `u32::from_le_bytes(octets)`.
    pub peer_ip: [u32; 4],
}

impl HandshakeRepr {
    fn parse(b: &[u8]) -> Result<Self> {
        if b.len() < HANDSHAKE_LEN {
            return Err(Error::Truncated);
        }
        let w = |i: usize| word(b, 4 * i);
        Ok(HandshakeRepr {
            version: w(0),
            socket_type: w(1),
            initial_seq: UdtSeqNumber::new(w(2)),
            mss: w(3),
            flight_flag_size: w(4),
            request_type: w(5) as i32,
            socket_id: w(6),
            cookie: w(7),
            peer_ip: [w(8), w(9), w(10), w(11)],
        })
    }
    fn emit(&self, b: &mut [u8]) {
        let words = [
            self.version,
            self.socket_type,
            self.initial_seq.value(),
            self.mss,
            self.flight_flag_size,
            self.request_type as u32,
            self.socket_id,
            self.cookie,
            self.peer_ip[0],
            self.peer_ip[1],
            self.peer_ip[2],
            self.peer_ip[3],
        ];
        for (i, w) in words.iter().enumerate() {
            put(b, 4 * i, *w);
        }
    }
}

/// What an ACK carries beyond its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckInfo {
    /// A light ACK: the number only (4-byte body).
    Light,
    /// RTT, RTT variance and free buffer (16-byte body).
    Short {
        /// RTT, µs.
        rtt_us: u32,
        /// RTT variance, µs.
        rtt_var_us: u32,
        /// Free receive buffer, packets.
        avail_buf_pkts: u32,
    },
    /// Also the receiving rate and link capacity (24-byte body), at most once per SYN.
    Full {
        /// RTT, µs.
        rtt_us: u32,
        /// RTT variance, µs.
        rtt_var_us: u32,
        /// Free receive buffer, packets.
        avail_buf_pkts: u32,
        /// Packet arrival rate, packets per second.
        recv_rate_pps: u32,
        /// Estimated link capacity, packets per second.
        bandwidth_pps: u32,
    },
}

/// A NAK's loss list, validated: 32-bit words, a word with the top bit set opening an
/// inclusive range closed by the next word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LossList<'a> {
    bytes: &'a [u8],
}

impl<'a> LossList<'a> {
    /// Checks `bytes` as a loss list.
    pub fn new(bytes: &'a [u8]) -> Result<Self> {
        if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
            return Err(Error::Malformed);
        }
        let mut open = false;
        for w in bytes.chunks_exact(4) {
            let start = w[0] & 0x80 != 0;
            if open && start {
                return Err(Error::Malformed);
            }
            open = start && !open;
        }
        if open {
            return Err(Error::Malformed);
        }
        Ok(LossList { bytes })
    }

    /// The lost ranges `(first, last)`, inclusive, in the order sent.
    pub fn ranges(&self) -> impl Iterator<Item = (UdtSeqNumber, UdtSeqNumber)> + 'a {
        let mut words = self.bytes.chunks_exact(4).map(|w| word(w, 0));
        core::iter::from_fn(move || {
            let w = words.next()?;
            if w & 0x8000_0000 != 0 {
                let last = words.next()?;
                Some((UdtSeqNumber::new(w), UdtSeqNumber::new(last)))
            } else {
                Some((UdtSeqNumber::new(w), UdtSeqNumber::new(w)))
            }
        })
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Bytes needed to encode `ranges`.
    pub fn encoded_len(ranges: &[(UdtSeqNumber, UdtSeqNumber)]) -> usize {
        ranges.iter().map(|(a, b)| if a == b { 4 } else { 8 }).sum()
    }

    /// Encodes `ranges` into `buf` (UDT4's coding: a single number as itself, a longer
    /// range as `0x80000000 | first, last`) and returns the list.
    ///
    /// # Panics
    /// If `buf` is shorter than [`encoded_len`](Self::encoded_len) or `ranges` is
    /// empty (caller bugs).
    pub fn encode<'b>(ranges: &[(UdtSeqNumber, UdtSeqNumber)], buf: &'b mut [u8]) -> LossList<'b> {
        assert!(!ranges.is_empty(), "an empty loss list");
        let mut at = 0;
        for (a, b) in ranges {
            if a == b {
                put(buf, at, a.value());
                at += 4;
            } else {
                put(buf, at, a.value() | 0x8000_0000);
                put(buf, at + 4, b.value());
                at += 8;
            }
        }
        LossList { bytes: &buf[..at] }
    }
}

/// A control packet's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control<'a> {
    /// Connection handshake.
    Handshake(HandshakeRepr),
    /// Keep-alive.
    KeepAlive,
    /// Acknowledgement: everything before `ack` has arrived.
    Ack {
        /// ACK sequence number (echoed by ACK2; 0 in a light ACK).
        ack_seq_no: u32,
        /// First sequence number not yet received.
        ack: UdtSeqNumber,
        /// What else it carries.
        info: AckInfo,
    },
    /// Loss report.
    Nak(LossList<'a>),
    /// Congestion warning.
    CongestionWarning,
    /// Shutdown.
    Shutdown,
    /// Acknowledgement of an ACK.
    Ack2 {
        /// The ACK sequence number being acknowledged.
        ack_seq_no: u32,
    },
    /// Message drop request.
    MsgDropRequest {
        /// Message number.
        msg_id: u32,
        /// First sequence number of the message.
        first: UdtSeqNumber,
        /// Last sequence number of the message.
        last: UdtSeqNumber,
    },
    /// Error signal from the peer.
    PeerError {
        /// Error code.
        code: u32,
    },
    /// A user-defined control packet.
    UserDefined {
        /// Extended type (bits 16-31).
        ext_type: u16,
        /// Additional info word.
        additional_info: u32,
        /// Control information (a whole number of 32-bit words, may be empty).
        body: &'a [u8],
    },
}

/// A validated UDT packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdtRepr<'a> {
    /// A data packet.
    Data {
        /// Sequence number.
        seq: UdtSeqNumber,
        /// Message boundary.
        boundary: Boundary,
        /// In-order delivery flag.
        in_order: bool,
        /// Message number (29 bits).
        msg_number: u32,
        /// Timestamp, µs since connect.
        timestamp: u32,
        /// Destination socket ID.
        dest_socket_id: u32,
        /// Payload bytes after the header (whether or not present in the buffer).
        payload_len: usize,
    },
    /// A control packet.
    Control {
        /// Timestamp, µs since connect.
        timestamp: u32,
        /// Destination socket ID.
        dest_socket_id: u32,
        /// Meaning.
        control: Control<'a>,
    },
}

/// The 4-byte zero body UDT4 sends where a control packet has none.
const PAD: usize = 4;

impl<'a> UdtRepr<'a> {
    /// Parses a packet of `wire_len` bytes (as the UDP length says; a data packet's
    /// payload may be missing from the buffer, a control packet's body may not).
    pub fn parse<T: AsRef<[u8]>>(packet: &'a UdtPacket<T>, wire_len: usize) -> Result<Self> {
        let buf = packet.buffer.as_ref();
        if buf.len() < HEADER_LEN || wire_len < buf.len() {
            return Err(Error::Malformed);
        }
        let timestamp = packet.timestamp();
        let dest_socket_id = packet.dest_socket_id();
        if !packet.is_control() {
            return Ok(UdtRepr::Data {
                seq: packet.seq_number(),
                boundary: packet.boundary(),
                in_order: packet.in_order(),
                msg_number: packet.msg_number(),
                timestamp,
                dest_socket_id,
                payload_len: wire_len - HEADER_LEN,
            });
        }
        if wire_len != buf.len() {
            return Err(Error::Truncated);
        }
        let body = &buf[HEADER_LEN..];
        let info = packet.additional_info();
        let control = match packet.control_type() {
            control_type::HANDSHAKE => Control::Handshake(HandshakeRepr::parse(body)?),
            control_type::KEEP_ALIVE => Control::KeepAlive,
            control_type::ACK => {
                let w = |i: usize| word(body, 4 * i);
                // UDT4 reads the RTT fields of anything longer than 4 bytes and the
                // rates of anything longer than 16: other lengths are not ACKs it sends.
                let ack_info = match body.len() {
                    4 => AckInfo::Light,
                    16..=23 => AckInfo::Short {
                        rtt_us: w(1),
                        rtt_var_us: w(2),
                        avail_buf_pkts: w(3),
                    },
                    24.. => AckInfo::Full {
                        rtt_us: w(1),
                        rtt_var_us: w(2),
                        avail_buf_pkts: w(3),
                        recv_rate_pps: w(4),
                        bandwidth_pps: w(5),
                    },
                    _ => return Err(Error::Malformed),
                };
                Control::Ack {
                    ack_seq_no: info,
                    ack: UdtSeqNumber::new(w(0)),
                    info: ack_info,
                }
            }
            control_type::NAK => Control::Nak(LossList::new(body)?),
            control_type::CONGESTION_WARNING => Control::CongestionWarning,
            control_type::SHUTDOWN => Control::Shutdown,
            control_type::ACK2 => Control::Ack2 { ack_seq_no: info },
            control_type::MSG_DROP_REQUEST => {
                if body.len() < 8 {
                    return Err(Error::Truncated);
                }
                Control::MsgDropRequest {
                    msg_id: info,
                    first: UdtSeqNumber::new(word(body, 0)),
                    last: UdtSeqNumber::new(word(body, 4)),
                }
            }
            control_type::PEER_ERROR => Control::PeerError { code: info },
            control_type::USER_DEFINED => {
                if !body.len().is_multiple_of(4) {
                    return Err(Error::Malformed);
                }
                Control::UserDefined {
                    ext_type: packet.extended_type(),
                    additional_info: info,
                    body,
                }
            }
            _ => return Err(Error::Malformed),
        };
        Ok(UdtRepr::Control {
            timestamp,
            dest_socket_id,
            control,
        })
    }

    /// Bytes `emit` writes: the header and, for control packets, the body (a data
    /// packet's payload is the caller's).
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self {
                UdtRepr::Data { .. } => 0,
                UdtRepr::Control { control, .. } => match control {
                    Control::Handshake(_) => HANDSHAKE_LEN,
                    Control::Ack {
                        info: AckInfo::Light,
                        ..
                    } => 4,
                    Control::Ack {
                        info: AckInfo::Short { .. },
                        ..
                    } => 16,
                    Control::Ack {
                        info: AckInfo::Full { .. },
                        ..
                    } => 24,
                    Control::Nak(l) => l.bytes.len(),
                    Control::MsgDropRequest { .. } => 8,
                    Control::UserDefined { body, .. } => body.len(),
                    Control::KeepAlive
                    | Control::CongestionWarning
                    | Control::Shutdown
                    | Control::Ack2 { .. }
                    | Control::PeerError { .. } => PAD,
                },
            }
    }

    /// Length on the wire: [`buffer_len`](Self::buffer_len) plus any data payload.
    pub fn wire_len(&self) -> usize {
        match self {
            UdtRepr::Data { payload_len, .. } => HEADER_LEN + payload_len,
            UdtRepr::Control { .. } => self.buffer_len(),
        }
    }

    /// Writes the packet into the front of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than [`buffer_len`](Self::buffer_len), or a field is out of
    /// range (a message number above 29 bits, a user body not made of whole words):
    /// caller bugs, not input.
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.buffer_len();
        let b = &mut buf[..len];
        match *self {
            UdtRepr::Data {
                seq,
                boundary,
                in_order,
                msg_number,
                timestamp,
                dest_socket_id,
                ..
            } => {
                assert!(msg_number <= MAX_MSG_NO, "message number above 29 bits");
                put(b, field::W0, seq.value());
                put(
                    b,
                    field::W1,
                    boundary.bits() << 30 | u32::from(in_order) << 29 | msg_number,
                );
                put(b, field::TIMESTAMP, timestamp);
                put(b, field::DEST_ID, dest_socket_id);
            }
            UdtRepr::Control {
                timestamp,
                dest_socket_id,
                control,
            } => {
                let (ty, ext, info) = match control {
                    Control::Handshake(_) => (control_type::HANDSHAKE, 0, 0),
                    Control::KeepAlive => (control_type::KEEP_ALIVE, 0, 0),
                    Control::Ack { ack_seq_no, .. } => (control_type::ACK, 0, ack_seq_no),
                    Control::Nak(_) => (control_type::NAK, 0, 0),
                    Control::CongestionWarning => (control_type::CONGESTION_WARNING, 0, 0),
                    Control::Shutdown => (control_type::SHUTDOWN, 0, 0),
                    Control::Ack2 { ack_seq_no } => (control_type::ACK2, 0, ack_seq_no),
                    Control::MsgDropRequest { msg_id, .. } => {
                        (control_type::MSG_DROP_REQUEST, 0, msg_id)
                    }
                    Control::PeerError { code } => (control_type::PEER_ERROR, 0, code),
                    Control::UserDefined {
                        ext_type,
                        additional_info,
                        ..
                    } => (control_type::USER_DEFINED, ext_type, additional_info),
                };
                put(
                    b,
                    field::W0,
                    0x8000_0000 | u32::from(ty) << 16 | u32::from(ext),
                );
                put(b, field::W1, info);
                put(b, field::TIMESTAMP, timestamp);
                put(b, field::DEST_ID, dest_socket_id);
                let body = &mut b[HEADER_LEN..];
                match control {
                    Control::Handshake(h) => h.emit(body),
                    Control::Ack { ack, info, .. } => {
                        put(body, 0, ack.value());
                        if let AckInfo::Short {
                            rtt_us,
                            rtt_var_us,
                            avail_buf_pkts,
                        }
                        | AckInfo::Full {
                            rtt_us,
                            rtt_var_us,
                            avail_buf_pkts,
                            ..
                        } = info
                        {
                            put(body, 4, rtt_us);
                            put(body, 8, rtt_var_us);
                            put(body, 12, avail_buf_pkts);
                        }
                        if let AckInfo::Full {
                            recv_rate_pps,
                            bandwidth_pps,
                            ..
                        } = info
                        {
                            put(body, 16, recv_rate_pps);
                            put(body, 20, bandwidth_pps);
                        }
                    }
                    Control::Nak(l) => body.copy_from_slice(l.bytes),
                    Control::MsgDropRequest { first, last, .. } => {
                        put(body, 0, first.value());
                        put(body, 4, last.value());
                    }
                    Control::UserDefined { body: user, .. } => {
                        assert!(
                            user.len().is_multiple_of(4),
                            "user-defined body not in 32-bit words"
                        );
                        body.copy_from_slice(user);
                    }
                    Control::KeepAlive
                    | Control::CongestionWarning
                    | Control::Shutdown
                    | Control::Ack2 { .. }
                    | Control::PeerError { .. } => body.fill(0),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
