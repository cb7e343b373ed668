//! TCP (RFC 9293) with the options longhaul's engine negotiates: MSS, window scale
//! and timestamps (RFC 7323), SACK-permitted and SACK (RFC 2018). On parse, unknown
//! options are skipped by their length.

use crate::{be16, be32, checksum, Checksum, Error, Ipv4Address, Result};

/// A TCP sequence number: an integer modulo 2^32 with serial comparison (RFC 1982).
///
/// Comparison is meaningful only for numbers less than 2^31 apart, which TCP's
/// window rules guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpSeqNumber(pub u32);

impl TcpSeqNumber {
    /// `self - other` as a signed distance.
    pub fn distance(self, other: TcpSeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
}

impl core::ops::Add<u32> for TcpSeqNumber {
    type Output = TcpSeqNumber;
    fn add(self, rhs: u32) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_add(rhs))
    }
}

impl PartialOrd for TcpSeqNumber {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.distance(*other).cmp(&0))
    }
}

impl core::fmt::Display for TcpSeqNumber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The control flag a segment carries (at most one of SYN, FIN, RST; PSH is ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpControl {
    /// No control flag.
    None,
    /// SYN: opens a connection.
    Syn,
    /// FIN: the sender has no more data.
    Fin,
    /// RST: aborts a connection.
    Rst,
}

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    pub const FLAGS: Range<usize> = 12..14;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;

    pub const FLG_FIN: u16 = 0x001;
    pub const FLG_SYN: u16 = 0x002;
    pub const FLG_RST: u16 = 0x004;
    pub const FLG_PSH: u16 = 0x008;
    pub const FLG_ACK: u16 = 0x010;

    pub const OPT_END: u8 = 0;
    pub const OPT_NOP: u8 = 1;
    pub const OPT_MSS: u8 = 2;
    pub const OPT_WS: u8 = 3;
    pub const OPT_SACKPERM: u8 = 4;
    pub const OPT_SACKRNG: u8 = 5;
    pub const OPT_TSTAMP: u8 = 8;
}

/// The timestamps option (RFC 7323 §3), 10 bytes, sent after two NOPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpTimestamp {
    /// TSval: the sender's timestamp clock.
    pub tsval: u32,
    /// TSecr: the TSval echoed (0 on a SYN).
    pub tsecr: u32,
}

/// Bytes the timestamps option takes with its two NOPs.
pub const TIMESTAMP_OPTION_LEN: usize = 12;

/// The first four bytes of the timestamps option as Linux sends it: NOP, NOP, kind
/// and length.
pub const TIMESTAMP_OPTION_HEAD: [u8; 4] = [field::OPT_NOP, field::OPT_NOP, field::OPT_TSTAMP, 10];

/// Writes NOP, NOP and the timestamps option at the front of `buf` (at least
/// [`TIMESTAMP_OPTION_LEN`] bytes), the layout Linux sends.
pub fn emit_timestamp_option(buf: &mut [u8], ts: TcpTimestamp) {
    buf[..4].copy_from_slice(&TIMESTAMP_OPTION_HEAD);
    buf[4..8].copy_from_slice(&ts.tsval.to_be_bytes());
    buf[8..12].copy_from_slice(&ts.tsecr.to_be_bytes());
}

/// The timestamps and SACK blocks of an options area in one of the layouts an
/// established connection sends: nothing, NOP NOP TS, NOP NOP SACK, or NOP NOP TS
/// followed by NOP NOP SACK (what [`emit_timestamp_option`] and
/// [`emit_sack_option`] write, and what Linux and the BSDs send). `None` for any other
/// options, which [`TcpRepr::parse`] reads; an engine's fast path takes the common
/// cases with this.
#[allow(clippy::type_complexity)]
pub fn parse_fast_options(
    opts: &[u8],
) -> Option<(
    Option<TcpTimestamp>,
    [Option<(TcpSeqNumber, TcpSeqNumber)>; MAX_SACK_BLOCKS],
)> {
    let (ts, rest) = match opts {
        [field::OPT_NOP, field::OPT_NOP, field::OPT_TSTAMP, 10, ..] if opts.len() >= 12 => (
            Some(TcpTimestamp {
                tsval: be32(opts, 4),
                tsecr: be32(opts, 8),
            }),
            &opts[12..],
        ),
        _ => (None, opts),
    };
    if rest.is_empty() {
        return Some((ts, [None; MAX_SACK_BLOCKS]));
    }
    parse_sack_option(rest).map(|s| (ts, s))
}

/// Writes the SACK option (RFC 2018 §3) for the blocks `ranges` yields (the first
/// [`MAX_SACK_BLOCKS`] of them), padded with two NOPs to a 4-byte boundary, at the
/// front of `buf`; returns its length (0 with no blocks). [`TcpRepr::emit`] writes its
/// SACK blocks with this, and so may an engine that patches them onto a prebuilt
/// header, straight from wherever it keeps them.
///
/// # Panics
/// If `buf` is shorter than the option (a caller bug).
pub fn emit_sack_option(
    buf: &mut [u8],
    ranges: impl IntoIterator<Item = (TcpSeqNumber, TcpSeqNumber)>,
) -> usize {
    // One pass: the blocks first, then the option's head, whose length byte counts
    // them (an engine writes this for every ACK of a recovery).
    let mut at = 4;
    for (l, r) in ranges.into_iter().take(MAX_SACK_BLOCKS) {
        buf[at..at + 4].copy_from_slice(&l.0.to_be_bytes());
        buf[at + 4..at + 8].copy_from_slice(&r.0.to_be_bytes());
        at += 8;
    }
    if at == 4 {
        return 0;
    }
    buf[..4].copy_from_slice(&[
        field::OPT_NOP,
        field::OPT_NOP,
        field::OPT_SACKRNG,
        (at - 2) as u8,
    ]);
    at
}

/// The SACK blocks of an options area that is exactly what [`emit_sack_option`]
/// writes: NOP, NOP and a SACK option of one to four blocks (the layout Linux and the
/// BSDs send too, the option aligned on 4 bytes). `None` for any other options, which
/// [`TcpRepr::parse`] reads; an engine's fast path takes the common case with this.
pub fn parse_sack_option(
    opts: &[u8],
) -> Option<[Option<(TcpSeqNumber, TcpSeqNumber)>; MAX_SACK_BLOCKS]> {
    let n = opts.len().checked_sub(4)? / 8;
    if n == 0
        || n > MAX_SACK_BLOCKS
        || opts.len() != 4 + 8 * n
        || opts[..3] != [field::OPT_NOP, field::OPT_NOP, field::OPT_SACKRNG]
        || usize::from(opts[3]) != 2 + 8 * n
    {
        return None;
    }
    Some(sack_blocks(&opts[4..]))
}

/// The blocks of a SACK option's body (a multiple of 8 bytes, at most four blocks).
fn sack_blocks(body: &[u8]) -> [Option<(TcpSeqNumber, TcpSeqNumber)>; MAX_SACK_BLOCKS] {
    let mut ranges = [None; MAX_SACK_BLOCKS];
    for (slot, blk) in ranges.iter_mut().zip(body.chunks_exact(8)) {
        *slot = Some((TcpSeqNumber(be32(blk, 0)), TcpSeqNumber(be32(blk, 4))));
    }
    ranges
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;
/// Largest TCP header: 60 bytes.
pub const MAX_HEADER_LEN: usize = 60;
/// Most SACK blocks one segment carries (without the timestamp option, RFC 2018 §3).
pub const MAX_SACK_BLOCKS: usize = 4;
/// Most SACK blocks beside the timestamps option: 40 bytes of options hold 12 + 2 +
/// 8 x 3.
pub const MAX_SACK_BLOCKS_WITH_TIMESTAMPS: usize = 3;

/// A read/write view of a TCP header and whatever part of its payload is present.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }
    /// Wraps a buffer after [`check_len`](Self::check_len). Use this on untrusted input.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    /// Checks that the fixed header and the options are present.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < hl {
            return Err(Error::Truncated);
        }
        Ok(())
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT.start)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT.start)
    }
    /// Sequence number.
    pub fn seq_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(be32(self.buffer.as_ref(), field::SEQ_NUM.start))
    }
    /// Acknowledgement number (meaningful when [`ack`](Self::ack) is set).
    pub fn ack_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(be32(self.buffer.as_ref(), field::ACK_NUM.start))
    }
    fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLAGS.start) & 0x0fff
    }
    /// Header length in bytes, from the data offset.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::FLAGS.start] >> 4) * 4
    }
    /// The ACK flag.
    pub fn ack(&self) -> bool {
        self.flags() & field::FLG_ACK != 0
    }
    /// The SYN flag.
    pub fn syn(&self) -> bool {
        self.flags() & field::FLG_SYN != 0
    }
    /// The FIN flag.
    pub fn fin(&self) -> bool {
        self.flags() & field::FLG_FIN != 0
    }
    /// The RST flag.
    pub fn rst(&self) -> bool {
        self.flags() & field::FLG_RST != 0
    }
    /// The PSH flag.
    pub fn psh(&self) -> bool {
        self.flags() & field::FLG_PSH != 0
    }
    /// The window field, unscaled.
    pub fn window_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WIN_SIZE.start)
    }
    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }
    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }
    /// The payload present in the buffer.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
    /// Verifies the checksum of a segment of `segment_len` bytes (header and payload),
    /// taking an elided payload to be zeros.
    pub fn verify_checksum(&self, src: Ipv4Address, dst: Ipv4Address, segment_len: usize) -> bool {
        let acc = checksum::pseudo_header(src.0, dst.0, 6, segment_len as u32);
        let b = self.buffer.as_ref();
        let present = b.len().min(segment_len);
        checksum::finish(checksum::accumulate(acc, &b[..present])) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, seq: TcpSeqNumber) {
        self.buffer.as_mut()[field::SEQ_NUM].copy_from_slice(&seq.0.to_be_bytes());
    }
    /// Sets the acknowledgement number (the ACK flag is separate).
    pub fn set_ack_number(&mut self, ack: TcpSeqNumber) {
        self.buffer.as_mut()[field::ACK_NUM].copy_from_slice(&ack.0.to_be_bytes());
    }
    /// Sets the window field.
    pub fn set_window_len(&mut self, window: u16) {
        self.buffer.as_mut()[field::WIN_SIZE].copy_from_slice(&window.to_be_bytes());
    }
    /// Sets the header length (the data offset), in bytes: a multiple of 4 from 20
    /// to 60.
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len.is_multiple_of(4) && (HEADER_LEN..=MAX_HEADER_LEN).contains(&len));
        let b = &mut self.buffer.as_mut()[field::FLAGS.start];
        *b = (*b & 0x0f) | ((len / 4) as u8) << 4;
    }
    /// Sets or clears the FIN flag.
    pub fn set_fin(&mut self, fin: bool) {
        let b = &mut self.buffer.as_mut()[field::FLAGS.start + 1];
        *b = if fin {
            *b | field::FLG_FIN as u8
        } else {
            *b & !(field::FLG_FIN as u8)
        };
    }

    /// Recomputes the checksum for a segment of `segment_len` bytes (see
    /// [`verify_checksum`](Self::verify_checksum)).
    pub fn fill_checksum(&mut self, src: Ipv4Address, dst: Ipv4Address, segment_len: usize) {
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let acc = checksum::pseudo_header(src.0, dst.0, 6, segment_len as u32);
        let present = b.len().min(segment_len);
        let c = checksum::finish(checksum::accumulate(acc, &b[..present]));
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
}

/// A validated TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// SYN, FIN, RST or none.
    pub control: TcpControl,
    /// Sequence number of the first byte (or of the SYN/FIN).
    pub seq_number: TcpSeqNumber,
    /// Cumulative acknowledgement, when the ACK flag is set.
    pub ack_number: Option<TcpSeqNumber>,
    /// Window field, unscaled.
    pub window_len: u16,
    /// MSS option (SYN only).
    pub max_seg_size: Option<u16>,
    /// Window scale option (SYN only), the shift count.
    pub window_scale: Option<u8>,
    /// SACK-permitted option (SYN only).
    pub sack_permitted: bool,
    /// Timestamps option (RFC 7323).
    pub timestamp: Option<TcpTimestamp>,
    /// SACK blocks `[left, right)`, most recent first (RFC 2018 §4).
    pub sack_ranges: [Option<(TcpSeqNumber, TcpSeqNumber)>; MAX_SACK_BLOCKS],
    /// PSH flag.
    pub push: bool,
    /// Payload length in bytes (whether or not the payload is present).
    pub payload_len: usize,
}

impl TcpRepr {
    /// Parses a header; `segment_len` is the length of the whole segment, header and
    /// payload, as the IP layer gives it.
    pub fn parse<T: AsRef<[u8]>>(
        packet: &TcpPacket<T>,
        src: Ipv4Address,
        dst: Ipv4Address,
        segment_len: usize,
        checksum: Checksum,
    ) -> Result<Self> {
        packet.check_len()?;
        let hl = packet.header_len();
        if segment_len < hl {
            return Err(Error::Malformed);
        }
        if checksum == Checksum::Both && !packet.verify_checksum(src, dst, segment_len) {
            return Err(Error::Checksum);
        }
        let control = match (packet.syn(), packet.fin(), packet.rst()) {
            (false, false, false) => TcpControl::None,
            (true, false, false) => TcpControl::Syn,
            (false, true, false) => TcpControl::Fin,
            (false, false, true) => TcpControl::Rst,
            _ => return Err(Error::Malformed),
        };
        let mut repr = TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            control,
            seq_number: packet.seq_number(),
            ack_number: packet.ack().then(|| packet.ack_number()),
            window_len: packet.window_len(),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            timestamp: None,
            sack_ranges: [None; MAX_SACK_BLOCKS],
            push: packet.psh(),
            payload_len: segment_len - hl,
        };
        let mut opts = packet.options();
        while let Some(&kind) = opts.first() {
            match kind {
                field::OPT_END => break,
                field::OPT_NOP => {
                    opts = &opts[1..];
                    continue;
                }
                _ => {}
            }
            let len = usize::from(*opts.get(1).ok_or(Error::Malformed)?);
            if len < 2 || len > opts.len() {
                return Err(Error::Malformed);
            }
            let body = &opts[2..len];
            match (kind, body.len()) {
                (field::OPT_MSS, 2) => repr.max_seg_size = Some(be16(body, 0)),
                (field::OPT_WS, 1) => repr.window_scale = Some(body[0].min(14)),
                (field::OPT_SACKPERM, 0) => repr.sack_permitted = true,
                (field::OPT_TSTAMP, 8) => {
                    repr.timestamp = Some(TcpTimestamp {
                        tsval: be32(body, 0),
                        tsecr: be32(body, 4),
                    })
                }
                (field::OPT_SACKRNG, n) if n % 8 == 0 && n / 8 <= MAX_SACK_BLOCKS => {
                    repr.sack_ranges = sack_blocks(body);
                }
                (
                    field::OPT_MSS
                    | field::OPT_WS
                    | field::OPT_SACKPERM
                    | field::OPT_SACKRNG
                    | field::OPT_TSTAMP,
                    _,
                ) => return Err(Error::Malformed),
                _ => {} // unknown option: skipped by its length
            }
            opts = &opts[len..];
        }
        Ok(repr)
    }

    fn options_len(&self) -> usize {
        let mut n = 0;
        if self.max_seg_size.is_some() {
            n += 4;
        }
        if self.window_scale.is_some() {
            n += 4; // NOP + 3
        }
        if self.sack_permitted {
            n += 4; // NOP NOP + 2
        }
        if self.timestamp.is_some() {
            n += TIMESTAMP_OPTION_LEN;
        }
        let blocks = self.sack_ranges.iter().flatten().count();
        if blocks > 0 {
            n += 4 + 8 * blocks; // NOP NOP + 2 + 8n
        }
        n
    }

    /// The header length `emit` writes (a multiple of 4, at most 60).
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options_len()
    }

    /// Length of the whole segment: header and payload.
    pub fn segment_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Sequence space the segment occupies: payload plus one for SYN or FIN.
    pub fn sequence_len(&self) -> usize {
        self.payload_len + usize::from(matches!(self.control, TcpControl::Syn | TcpControl::Fin))
    }

    /// Writes the header into the front of `buf`; the payload, if the caller has one,
    /// follows it. With [`Checksum::Both`] the checksum covers the payload present in
    /// `buf` and zeros for the rest.
    ///
    /// # Panics
    /// If `buf` is shorter than [`header_len`](Self::header_len) (a caller bug).
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Address, dst: Ipv4Address, checksum: Checksum) {
        let hl = self.header_len();
        let b = &mut buf[..hl];
        b[field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        b[field::DST_PORT].copy_from_slice(&self.dst_port.to_be_bytes());
        b[field::SEQ_NUM].copy_from_slice(&self.seq_number.0.to_be_bytes());
        b[field::ACK_NUM].copy_from_slice(&self.ack_number.unwrap_or_default().0.to_be_bytes());
        let mut flags = match self.control {
            TcpControl::None => 0,
            TcpControl::Syn => field::FLG_SYN,
            TcpControl::Fin => field::FLG_FIN,
            TcpControl::Rst => field::FLG_RST,
        };
        if self.ack_number.is_some() {
            flags |= field::FLG_ACK;
        }
        if self.push {
            flags |= field::FLG_PSH;
        }
        flags |= ((hl / 4) as u16) << 12;
        b[field::FLAGS].copy_from_slice(&flags.to_be_bytes());
        b[field::WIN_SIZE].copy_from_slice(&self.window_len.to_be_bytes());
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        b[field::URGENT].copy_from_slice(&[0, 0]);
        let mut at = HEADER_LEN;
        if let Some(mss) = self.max_seg_size {
            b[at..at + 2].copy_from_slice(&[field::OPT_MSS, 4]);
            b[at + 2..at + 4].copy_from_slice(&mss.to_be_bytes());
            at += 4;
        }
        if let Some(ws) = self.window_scale {
            b[at..at + 4].copy_from_slice(&[field::OPT_NOP, field::OPT_WS, 3, ws]);
            at += 4;
        }
        if self.sack_permitted {
            b[at..at + 4].copy_from_slice(&[
                field::OPT_NOP,
                field::OPT_NOP,
                field::OPT_SACKPERM,
                2,
            ]);
            at += 4;
        }
        if let Some(ts) = self.timestamp {
            emit_timestamp_option(&mut b[at..], ts);
            at += TIMESTAMP_OPTION_LEN;
        }
        at += emit_sack_option(&mut b[at..], self.sack_ranges.iter().flatten().copied());
        debug_assert_eq!(at, hl);
        if checksum == Checksum::Both {
            TcpPacket::new_unchecked(&mut *buf).fill_checksum(src, dst, self.segment_len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
    const DST: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);

    /// `parse_sack_option` reads back what `emit_sack_option` writes, one to four
    /// blocks, and nothing else: no blocks, five, a length byte that disagrees, another
    /// option kind or a leading EOL go to the general parser.
    #[test]
    fn fast_options_read_the_four_common_layouts_as_the_general_parser_does() {
        let ts = TcpTimestamp {
            tsval: 0x0102_0304,
            tsecr: 0xfffe_fdfc,
        };
        let blocks = [
            Some((TcpSeqNumber(100), TcpSeqNumber(200))),
            Some((TcpSeqNumber(300), TcpSeqNumber(400))),
            None,
            None,
        ];
        for (timestamp, sack_ranges) in [
            (None, [None; MAX_SACK_BLOCKS]),
            (Some(ts), [None; MAX_SACK_BLOCKS]),
            (None, blocks),
            (Some(ts), blocks),
        ] {
            let r = TcpRepr {
                src_port: 1,
                dst_port: 2,
                control: TcpControl::None,
                seq_number: TcpSeqNumber(7),
                ack_number: Some(TcpSeqNumber(9)),
                window_len: 100,
                max_seg_size: None,
                window_scale: None,
                sack_permitted: false,
                timestamp,
                sack_ranges,
                push: false,
                payload_len: 0,
            };
            let mut buf = [0u8; MAX_HEADER_LEN];
            r.emit(&mut buf, SRC, DST, Checksum::None);
            let opts = &buf[HEADER_LEN..r.header_len()];
            assert_eq!(parse_fast_options(opts), Some((timestamp, sack_ranges)));
        }
        // TS after SACK, or a TS option of another length: the general parser's.
        let mut odd = [0u8; 24];
        emit_sack_option(&mut odd, [(TcpSeqNumber(1), TcpSeqNumber(2))]);
        emit_timestamp_option(&mut odd[12..], ts);
        assert_eq!(parse_fast_options(&odd), None);
        assert_eq!(parse_fast_options(&[1, 1, 8, 6, 0, 0, 0, 0]), None);
    }

    #[test]
    fn sack_option_round_trip_and_nothing_else() {
        let emitted = |n: usize| {
            let mut ranges = [None; MAX_SACK_BLOCKS];
            for (i, r) in ranges.iter_mut().take(n).enumerate() {
                let i = i as u32;
                *r = Some((TcpSeqNumber(1000 * i), TcpSeqNumber(1000 * i + 500)));
            }
            let mut buf = [0u8; 40];
            let len = emit_sack_option(&mut buf, ranges.iter().flatten().copied());
            (ranges, buf[..len].to_vec())
        };
        for n in 1..=MAX_SACK_BLOCKS {
            let (ranges, opts) = emitted(n);
            assert_eq!(parse_sack_option(&opts), Some(ranges), "{n} blocks");
        }
        assert_eq!(parse_sack_option(&emitted(0).1), None);
        assert_eq!(parse_sack_option(&[1, 1, 5, 2]), None);
        let mut five = emitted(4).1;
        five[3] = 42;
        five.extend_from_slice(&[0; 8]);
        assert_eq!(parse_sack_option(&five), None);
        let mut wrong_len = emitted(2).1;
        wrong_len[3] = 10;
        assert_eq!(parse_sack_option(&wrong_len), None);
        let mut other_kind = emitted(1).1;
        other_kind[2] = 8;
        assert_eq!(parse_sack_option(&other_kind), None);
        let mut end_first = emitted(1).1;
        end_first[0] = 0;
        assert_eq!(parse_sack_option(&end_first), None);
        assert_eq!(parse_sack_option(&[1, 1, 5]), None);
    }

    fn seq() -> impl Strategy<Value = TcpSeqNumber> {
        any::<u32>().prop_map(TcpSeqNumber)
    }

    prop_compose! {
        fn repr()(src_port in any::<u16>(), dst_port in any::<u16>(),
                  control in prop_oneof![Just(TcpControl::None), Just(TcpControl::Syn),
                                         Just(TcpControl::Fin), Just(TcpControl::Rst)],
                  seq_number in seq(), ack_number in proptest::option::of(seq()),
                  window_len in any::<u16>(), max_seg_size in proptest::option::of(any::<u16>()),
                  window_scale in proptest::option::of(0u8..=14), sack_permitted in any::<bool>(),
                  blocks in proptest::collection::vec((seq(), seq()), 0..=2),
                  ts in proptest::option::of((any::<u32>(), any::<u32>())),
                  push in any::<bool>(), payload_len in 0usize..9000) -> TcpRepr {
            // Options must fit in 40 bytes: 12 for the SYN options leaves room for 2
            // blocks, or for timestamps and 1 block.
            let mut sack_ranges = [None; MAX_SACK_BLOCKS];
            let room = if ts.is_some() { 1 } else { 2 };
            for (i, b) in blocks.into_iter().take(room).enumerate() { sack_ranges[i] = Some(b); }
            let timestamp = ts.map(|(tsval, tsecr)| TcpTimestamp { tsval, tsecr });
            TcpRepr { src_port, dst_port, control, seq_number, ack_number, window_len,
                      max_seg_size, window_scale, sack_permitted, timestamp, sack_ranges, push,
                      payload_len }
        }
    }

    proptest! {
        #[test]
        fn roundtrip(r in repr()) {
            let mut buf = [0u8; MAX_HEADER_LEN];
            r.emit(&mut buf, SRC, DST, Checksum::Both);
            let hl = r.header_len();
            let p = TcpPacket::new_checked(&buf[..hl]).unwrap();
            let parsed = TcpRepr::parse(&p, SRC, DST, r.segment_len(), Checksum::Both).unwrap();
            prop_assert_eq!(parsed, r);
        }

        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..80),
                                   extra in 0usize..100) {
            if let Ok(p) = TcpPacket::new_checked(&bytes[..]) {
                let _ = TcpRepr::parse(&p, SRC, DST, bytes.len() + extra, Checksum::Both);
                let _ = TcpRepr::parse(&p, SRC, DST, bytes.len() + extra, Checksum::None);
            }
        }
    }

    #[test]
    fn four_sack_blocks_fill_the_option_space() {
        let mut r = TcpRepr {
            src_port: 1,
            dst_port: 2,
            control: TcpControl::None,
            seq_number: TcpSeqNumber(5),
            ack_number: Some(TcpSeqNumber(7)),
            window_len: 100,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            timestamp: None,
            sack_ranges: [None; MAX_SACK_BLOCKS],
            push: false,
            payload_len: 0,
        };
        for i in 0..4u32 {
            r.sack_ranges[i as usize] = Some((TcpSeqNumber(i * 100), TcpSeqNumber(i * 100 + 50)));
        }
        assert_eq!(r.header_len(), 56);
        let mut buf = [0u8; MAX_HEADER_LEN];
        r.emit(&mut buf, SRC, DST, Checksum::Both);
        let p = TcpPacket::new_checked(&buf[..56]).unwrap();
        assert_eq!(TcpRepr::parse(&p, SRC, DST, 56, Checksum::Both).unwrap(), r);
    }

    #[test]
    fn serial_comparison_wraps() {
        let a = TcpSeqNumber(u32::MAX - 10);
        let b = a + 20;
        assert!(b > a);
        assert_eq!(b.distance(a), 20);
        assert_eq!(a.distance(b), -20);
    }

    #[test]
    fn corrupted_checksum_is_rejected() {
        let r = TcpRepr {
            src_port: 80,
            dst_port: 9000,
            control: TcpControl::Syn,
            seq_number: TcpSeqNumber(1),
            ack_number: None,
            window_len: 65535,
            max_seg_size: Some(1448),
            window_scale: Some(7),
            sack_permitted: true,
            timestamp: None,
            sack_ranges: [None; MAX_SACK_BLOCKS],
            push: false,
            payload_len: 0,
        };
        let mut buf = [0u8; MAX_HEADER_LEN];
        r.emit(&mut buf, SRC, DST, Checksum::Both);
        buf[5] ^= 0x40;
        let p = TcpPacket::new_checked(&buf[..r.header_len()]).unwrap();
        assert_eq!(
            TcpRepr::parse(&p, SRC, DST, 32, Checksum::Both),
            Err(Error::Checksum)
        );
    }
}
