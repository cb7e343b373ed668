//! Authenticated encryption of each UDT datagram.
//!
//! ```text
//!  plain:   UDT header (16) · body
//!  sealed:  n: u64 · UDT header (16) · AES-256-GCM(body) · tag (16)
//!           nonce = 0^32 · n, associated data = n · header
//! ```
//!
//! The counter goes first so that neither end moves the body: the engine writes
//! its datagram [`SEALED_OFFSET`] bytes into the buffer, the counter fills the
//! gap, and the opened datagram is the buffer from there on.
//!
//! RFC 9001 §5.3: "the nonce, N, is formed by combining the packet protection IV with
//! the packet number", and the header is the AEAD's associated data. UDT reuses a
//! sequence number when it retransmits (QUIC never does), so the nonce here is not
//! the sequence number but `n`, a count of every datagram this side has sealed under
//! the key, sent in clear beside the header as WireGuard sends its counter (its
//! "transport data" message). A retransmission is a new datagram with a new `n`:
//! no nonce is ever used twice under one key.
//!
//! Replays: a receiver accepts each `n` once, within a sliding window of
//! [`REPLAY_WINDOW`] datagrams behind the highest seen (RFC 6479's scheme); older
//! ones are dropped, and UDT's own loss recovery asks again for what they carried.
//! Everything that fails (a forged ACK, NAK, shutdown or handshake from anyone
//! without the session's keys, a flipped bit, a replay) is dropped before the
//! engine sees it, and counted.

use ring::aead::{Aad, LessSafeKey, Nonce, NONCE_LEN};

/// Bytes a sealed datagram has beyond the plain one: the counter and the tag.
pub const PACKET_OVERHEAD: usize = 8 + 16;
/// The UDT header, in clear and authenticated.
const HEADER: usize = 16;
/// Where the plain datagram starts in a buffer to be sealed, and where it is
/// found in one opened: after the counter.
pub const SEALED_OFFSET: usize = 8;
/// Datagrams behind the newest that may still arrive (reordered) and be taken.
pub const REPLAY_WINDOW: u64 = 4096;

/// Which counters have been seen: the highest, and a bitmap of the window below it.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// One past the highest counter taken (0: none yet).
    top: u64,
    bits: Box<[u64; (REPLAY_WINDOW / 64) as usize]>,
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            top: 0,
            bits: Box::new([0; (REPLAY_WINDOW / 64) as usize]),
        }
    }
}

impl ReplayWindow {
    fn bit(n: u64) -> (usize, u64) {
        let i = n % REPLAY_WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Whether `n` may be taken: newer than any seen, or within the window and not
    /// seen. Checked before decrypting (cheap), marked after (authentic only).
    pub fn check(&self, n: u64) -> bool {
        if n >= self.top {
            return true;
        }
        if self.top - n > REPLAY_WINDOW {
            return false;
        }
        let (w, b) = Self::bit(n);
        self.bits[w] & b == 0
    }

    /// Records `n` as taken.
    pub fn mark(&mut self, n: u64) {
        if n >= self.top {
            if n - self.top >= REPLAY_WINDOW {
                self.bits.fill(0);
            } else {
                for k in self.top..n {
                    let (w, b) = Self::bit(k);
                    self.bits[w] &= !b;
                }
            }
            self.top = n + 1;
        }
        let (w, b) = Self::bit(n);
        self.bits[w] |= b;
    }
}

/// One side's keys and counters for a UDT connection.
pub struct PacketProtection {
    seal: LessSafeKey,
    open: LessSafeKey,
    /// The next counter to seal with.
    next: u64,
    window: ReplayWindow,
    /// Datagrams dropped: failed authentication, replayed, or too short.
    pub rejected: u64,
}

impl std::fmt::Debug for PacketProtection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketProtection")
            .field("next", &self.next)
            .field("rejected", &self.rejected)
            .finish()
    }
}

fn nonce(n: u64) -> Nonce {
    let mut b = [0u8; NONCE_LEN];
    b[4..].copy_from_slice(&n.to_be_bytes());
    Nonce::assume_unique_for_key(b)
}

impl PacketProtection {
    /// Seals with `seal`, opens with `open` (the peer's `seal`).
    pub fn new(seal: LessSafeKey, open: LessSafeKey) -> Self {
        PacketProtection {
            seal,
            open,
            next: 0,
            window: ReplayWindow::default(),
            rejected: 0,
        }
    }

    /// Seals in place the datagram of `len` bytes at `buf[SEALED_OFFSET..]`; `buf`
    /// must have 16 bytes of room after it for the tag. Returns the sealed length,
    /// from `buf[0]`.
    pub fn seal(&mut self, buf: &mut [u8], len: usize) -> usize {
        assert!(len >= HEADER && buf.len() >= len + PACKET_OVERHEAD);
        let n = self.next;
        self.next += 1;
        buf[..8].copy_from_slice(&n.to_be_bytes());
        let (aad, rest) = buf.split_at_mut(8 + HEADER);
        let body = len - HEADER;
        let tag = self
            .seal
            .seal_in_place_separate_tag(nonce(n), Aad::from(&*aad), &mut rest[..body])
            .expect("AES-GCM seals any datagram");
        rest[body..body + 16].copy_from_slice(tag.as_ref());
        len + PACKET_OVERHEAD
    }

    /// Opens the sealed datagram `buf[..len]` in place. Returns where the plain
    /// datagram (header and body) now lies in `buf` (from [`SEALED_OFFSET`]), or
    /// `None` (counted in [`rejected`](Self::rejected)) if it is forged, damaged,
    /// replayed or short.
    pub fn open(&mut self, buf: &mut [u8], len: usize) -> Option<std::ops::Range<usize>> {
        if len < HEADER + PACKET_OVERHEAD {
            self.rejected += 1;
            return None;
        }
        let n = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
        if !self.window.check(n) {
            self.rejected += 1;
            return None;
        }
        let (aad, rest) = buf[..len].split_at_mut(8 + HEADER);
        if self
            .open
            .open_in_place(nonce(n), Aad::from(&*aad), rest)
            .is_err()
        {
            self.rejected += 1;
            return None;
        }
        self.window.mark(n);
        Some(SEALED_OFFSET..len - 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::aead::{UnboundKey, AES_256_GCM};

    fn key(b: u8) -> LessSafeKey {
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[b; 32]).unwrap())
    }

    /// Two ends: `a` seals with key 1 and opens key 2, `b` the reverse.
    fn ends() -> (PacketProtection, PacketProtection) {
        (
            PacketProtection::new(key(1), key(2)),
            PacketProtection::new(key(2), key(1)),
        )
    }

    fn sealed(p: &mut PacketProtection, plain: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; SEALED_OFFSET];
        b.extend_from_slice(plain);
        b.resize(plain.len() + PACKET_OVERHEAD, 0);
        let n = p.seal(&mut b, plain.len());
        b.truncate(n);
        b
    }

    fn opened(p: &mut PacketProtection, wire: &[u8]) -> Option<Vec<u8>> {
        let mut b = wire.to_vec();
        let r = p.open(&mut b, wire.len())?;
        Some(b[r].to_vec())
    }

    #[test]
    fn datagrams_round_trip_with_the_header_in_clear() {
        let (mut a, mut b) = ends();
        let plain: Vec<u8> = (0..1400u32).map(|i| i as u8).collect();
        let w = sealed(&mut a, &plain);
        assert_eq!(w.len(), plain.len() + PACKET_OVERHEAD);
        assert_eq!(w[8..24], plain[..16], "the header stays readable");
        assert!(
            !w.windows(32).any(|x| x == &plain[100..132]),
            "the body does not"
        );
        assert_eq!(opened(&mut b, &w).unwrap(), plain);
        // A header-only datagram (an ACK of two) seals too.
        let w = sealed(&mut a, &plain[..16]);
        assert_eq!(opened(&mut b, &w).unwrap(), &plain[..16]);
    }

    /// A flipped bit anywhere, a replay, a datagram sealed under another key (a
    /// stranger's forged ACK or shutdown) and a short one are all dropped, counted.
    #[test]
    fn forged_damaged_and_replayed_datagrams_are_dropped() {
        let (mut a, mut b) = ends();
        let w = sealed(&mut a, &[0x80; 40]);
        for i in 0..w.len() {
            let mut bad = w.clone();
            bad[i] ^= 0x10;
            assert_eq!(opened(&mut b, &bad), None, "byte {i}");
        }
        assert!(opened(&mut b, &w).is_some());
        assert_eq!(opened(&mut b, &w), None, "replayed");
        let mut stranger = PacketProtection::new(key(9), key(9));
        assert_eq!(opened(&mut b, &sealed(&mut stranger, &[0x80; 40])), None);
        assert_eq!(opened(&mut b, &[0; 39]), None);
        assert_eq!(b.rejected, w.len() as u64 + 3);
    }

    /// Reordering within the window is taken once each; older than the window is not.
    #[test]
    fn the_replay_window_takes_reordered_datagrams_once() {
        let mut w = ReplayWindow::default();
        for n in [5u64, 3, 4, 0, 10_000, 9_000, 10_001] {
            assert!(w.check(n), "{n}");
            w.mark(n);
            assert!(!w.check(n), "{n} again");
        }
        assert!(!w.check(10_001 - REPLAY_WINDOW - 1), "behind the window");
        assert!(w.check(10_001 - REPLAY_WINDOW + 1), "inside, unseen");
        assert!(!w.check(3), "long gone");
        // A counter the bitmap reuses after a jump reads as unseen.
        let mut w = ReplayWindow::default();
        w.mark(1);
        w.mark(1 + REPLAY_WINDOW);
        assert!(!w.check(1));
        assert!(w.check(1 + REPLAY_WINDOW - 1));
    }

    /// Property: whatever arrives, open never panics and never accepts bytes not
    /// sealed under the peer's key (the cargo-fuzz target `packet` runs the same).
    #[test]
    fn garbage_never_opens() {
        use proptest::prelude::*;
        proptest!(ProptestConfig::with_cases(512), |(bytes in proptest::collection::vec(any::<u8>(), 0..200))| {
            let (_, mut b) = ends();
            prop_assert!(opened(&mut b, &bytes).is_none());
        });
    }
}
