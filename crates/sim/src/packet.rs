//! Simulated packets: real header bytes and a payload length, in an arena.
//!
//! A packet is a fixed-size record (headers up to [`MAX_HEADER`] bytes) allocated from a free list, so the per-packet path allocates nothing
//! once the pool has grown to the number of packets in flight. Payload bytes are never
//! stored; the IPv4 total length says how many there are.

use longhaul_proto::Instant;

/// Header bytes a packet can hold: IPv4 and TCP with full options (80), or IPv4, UDP
/// and a UDT handshake (92), or a UDT NAK of up to six ranges.
pub const MAX_HEADER: usize = 96;

/// Index of a packet in the [`PacketPool`].
pub type PacketId = u32;

/// One simulated packet.
///
/// Laid out for the cache: a packet is read cold wherever it arrives (it waited in
/// a queue or on a wire since it was last touched), so its fields and the first
/// [`FIRST_LINE_HEADER`] header bytes share one 64-byte line, which holds the whole
/// header of a TCP segment or ACK with the timestamps option (52 bytes: IPv4, TCP,
/// 12 of option) and of a UDT data packet (44). Unaligned and with the header first,
/// a 112-byte packet spanned two or three lines and each arrival read two of them
/// (`hdr_len` sat after the header). With a 32-bit payload length the line held 51
/// header bytes, and the last byte of every segment's timestamp echo fell in the
/// second line: on a dumbbell of 1000 CUBIC flows, whose packets are all read cold,
/// that one byte's line was the TCP receive path's hottest instruction.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub struct Packet {
    /// When the packet left its source (metadata for one-way delay, like an ns-3 tag).
    pub sent_at: Instant,
    /// Payload bytes that follow the headers on the wire (not stored): at most an
    /// IPv4 datagram's 65 535 in all ([`payload_len`](Self::payload_len)).
    payload: u16,
    /// Bytes of `hdr` in use.
    pub hdr_len: u8,
    /// IPv4 header and transport header, as on the wire.
    pub hdr: [u8; MAX_HEADER],
}

/// Header bytes that share the first cache line with a packet's fields.
pub const FIRST_LINE_HEADER: usize = 64 - std::mem::offset_of!(Packet, hdr);

// The layout above: fields and 52 header bytes in the first line, two lines in all.
const _: () = assert!(FIRST_LINE_HEADER >= 52);
const _: () = assert!(std::mem::size_of::<Packet>() == 128);

impl Packet {
    /// No header, no payload, sent at `sent_at`.
    pub(crate) fn empty(sent_at: Instant) -> Packet {
        Packet {
            hdr: [0; MAX_HEADER],
            hdr_len: 0,
            payload: 0,
            sent_at,
        }
    }
    /// Sets what is not in the header: `hdr_len` header bytes in use, `payload_len`
    /// payload bytes behind them, sent at `now`. A sender writes the header into a
    /// free slot ([`PacketPool::peek_free`]) and stamps it there, so the slot is
    /// looked up once.
    #[inline]
    pub fn stamp(&mut self, now: Instant, hdr_len: u8, payload_len: u32) {
        self.hdr_len = hdr_len;
        self.set_payload_len(payload_len);
        self.sent_at = now;
    }
    /// Payload bytes that follow the headers on the wire.
    #[inline]
    pub fn payload_len(&self) -> u32 {
        u32::from(self.payload)
    }
    /// Sets the payload length. An IPv4 datagram carries at most 65 535 bytes in
    /// all, and the scenario loader keeps every source within that (a TCP `mss` of at
    /// most 65 000, a UDP `packet_size` or blast datagram of at most 65 535), so every
    /// packet's fits; a longer one would be a bug upstream, caught in debug builds.
    #[inline]
    pub fn set_payload_len(&mut self, payload_len: u32) {
        debug_assert!(payload_len <= u32::from(u16::MAX), "payload {payload_len}");
        self.payload = payload_len.min(u32::from(u16::MAX)) as u16;
    }
    /// Length on the wire: headers and payload.
    pub fn wire_len(&self) -> u32 {
        u32::from(self.hdr_len) + self.payload_len()
    }
    /// The header bytes.
    pub fn header(&self) -> &[u8] {
        &self.hdr[..usize::from(self.hdr_len)]
    }
    /// The DSCP (RFC 2474: the upper six bits of the IPv4 TOS byte).
    pub fn dscp(&self) -> u8 {
        self.hdr[1] >> 2
    }
    /// Destination address as an integer (IPv4 bytes 16..20).
    pub fn dst_bits(&self) -> u32 {
        u32::from_be_bytes([self.hdr[16], self.hdr[17], self.hdr[18], self.hdr[19]])
    }
}

/// An arena of packets with a free list.
///
/// SCTP is the exception to "headers only": its DATA chunks sit between chunk
/// headers and its CRC32c covers them, so an SCTP packet is kept whole in a side
/// buffer of its slot ([`PacketPool::set_whole`]); the slot's `hdr` holds the first
/// bytes (IPv4 header, ports) for routing and DiffServ as for any packet. Side
/// buffers are reused with their slots, so this allocates only while the pool grows.
#[derive(Debug, Default)]
pub struct PacketPool {
    slots: Vec<Packet>,
    free: Vec<PacketId>,
    whole: Vec<Vec<u8>>,
}

impl PacketPool {
    /// An empty pool with room for `n` packets before it grows. Growing copies every
    /// slot (a 64-byte-aligned `Vec` cannot be `realloc`ed in place), so a caller
    /// that knows about how many packets will be alive at once says so; the room
    /// costs address space only until it is used.
    pub fn with_capacity(n: usize) -> Self {
        PacketPool {
            slots: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
            whole: Vec::new(),
        }
    }

    /// Takes a slot, initialised to an empty packet sent at `now`.
    pub fn alloc(&mut self, now: Instant) -> PacketId {
        match self.free.pop() {
            Some(id) => {
                let p = &mut self.slots[id as usize];
                p.hdr_len = 0;
                p.payload = 0;
                p.sent_at = now;
                id
            }
            None => {
                self.slots.push(Packet::empty(now));
                (self.slots.len() - 1) as PacketId
            }
        }
    }
    /// The slot [`alloc`](Self::alloc) will return next, still free: an engine may
    /// write a header into it, and only if the engine had something to send does the
    /// caller [`stamp`](Packet::stamp) it and [`take_peeked`](Self::take_peeked) it.
    /// (A bulk sender asks once more than it sends.)
    #[inline(always)]
    pub fn peek_free(&mut self) -> &mut Packet {
        if self.free.is_empty() {
            self.free.push(self.slots.len() as PacketId);
            self.slots.push(Packet::empty(Instant::ZERO));
        }
        let id = self.free[self.free.len() - 1];
        &mut self.slots[id as usize]
    }

    /// Takes the slot [`peek_free`](Self::peek_free) returned, whose header an engine
    /// has just written and whose other fields the caller has set
    /// ([`Packet::stamp`]).
    ///
    /// # Panics
    /// If no slot is free, that is, without a [`peek_free`](Self::peek_free) first.
    #[inline]
    pub fn take_peeked(&mut self) -> PacketId {
        self.free.pop().expect("peek_free first")
    }

    /// Stores `bytes` as the whole of packet `id` (an IPv4 datagram): its first
    /// bytes become the header, the rest its payload length.
    pub fn set_whole(&mut self, id: PacketId, bytes: &[u8]) {
        let i = id as usize;
        if self.whole.len() <= i {
            self.whole.resize_with(i + 1, Vec::new);
        }
        let w = &mut self.whole[i];
        w.clear();
        w.extend_from_slice(bytes);
        let p = &mut self.slots[i];
        let h = bytes.len().min(MAX_HEADER);
        p.hdr[..h].copy_from_slice(&bytes[..h]);
        p.hdr_len = h as u8;
        p.set_payload_len((bytes.len() - h) as u32);
    }
    /// The whole datagram of a packet stored with [`set_whole`](Self::set_whole),
    /// with whatever the network rewrote in its header (a DiffServ mark) carried over.
    pub fn whole(&mut self, id: PacketId) -> &[u8] {
        let p = &self.slots[id as usize];
        let w = &mut self.whole[id as usize];
        let h = usize::from(p.hdr_len);
        w[..h].copy_from_slice(&p.hdr[..h]);
        w
    }
    /// Returns a slot to the free list.
    pub fn free(&mut self, id: PacketId) {
        self.free.push(id);
    }
    /// The packet `id`.
    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id as usize]
    }
    /// The packet `id`, writable.
    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id as usize]
    }
    /// Packets the pool holds before it must grow.
    pub fn room(&self) -> usize {
        self.slots.capacity()
    }
    /// Slots ever allocated (the high-water mark of packets alive at once).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
    /// Packets currently alive.
    pub fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}
