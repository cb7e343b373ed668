//! Secure sessions: who may talk to a receiver, and what a stranger on the path sees.
//!
//! What it does:
//! - **Tokens** ([`check_token`], [`new_token`]): the pre-shared secret both ends hold.
//!   A token must carry at least 128 bits of entropy, because the handshake lets
//!   whoever sees one exchange (or plays receiver once) test guesses offline; `longhaul
//!   token` makes one of 256 bits.
//! - **The handshake** ([`handshake`]): a 16-byte preamble each way (version and
//!   whether the data channels are encrypted), then Noise `NNpsk0` with the token's
//!   key as the PSK and both preambles as the prologue. Each end proves the token
//!   before a file name moves, the session gets fresh keys (forward secrecy from the
//!   ephemeral X25519 exchange), and a tampered preamble fails the handshake.
//! - **Keys** ([`SessionKeys`]): one AES-256-GCM key per channel and direction,
//!   HKDF-SHA256 from the handshake's split, and the data channels' tickets.
//! - **Records** ([`record`]): authenticated encryption of a byte stream (the control
//!   channel, TCP data channels), TLS-style records with a counter nonce.
//! - **Packets** ([`packet`]): authenticated encryption of each UDT datagram, the
//!   header as associated data, an explicit per-transmission counter in the nonce and
//!   a sliding replay window, as QUIC (RFC 9001 §5) and WireGuard do.
//!
//! What it does not do: it implements no primitive. X25519, ChaCha20-Poly1305 and
//! BLAKE2s inside the handshake are `snow`'s; AES-GCM, HKDF and the RNG are `ring`'s.
//! It does not hide sizes or timing: an observer still learns how many bytes move,
//! when, and between which addresses and ports (docs/security.md).

pub mod handshake;
pub mod packet;
pub mod record;

pub use handshake::{handshake_initiator, handshake_responder, HandshakeError, Preamble};
pub use packet::{PacketProtection, ReplayWindow, PACKET_OVERHEAD, SEALED_OFFSET};
pub use record::{RecordReader, RecordWriter, MAX_RECORD};

use ring::aead::{LessSafeKey, UnboundKey, AES_256_GCM};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};

/// The least entropy a token may carry, bits.
pub const MIN_TOKEN_BITS: f64 = 128.0;

/// What `longhaul token` prints: 32 random bytes, hex.
pub fn new_token() -> String {
    random_bytes::<32>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Bytes from the operating system's RNG.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    SystemRandom::new()
        .fill(&mut b)
        .expect("the system RNG (getrandom) does not fail on Linux");
    b
}

/// An upper bound on the entropy of `token`, bits: its length times the bits of
/// the smallest alphabet that spells it (hex digits; else the union of the
/// character classes it uses). It cannot see that a token is a word or a pattern,
/// so it is only a floor on what is refused; a token from `longhaul token` is 256
/// bits by construction.
pub fn token_bits(token: &str) -> f64 {
    let chars: Vec<char> = token.chars().collect();
    if chars.is_empty() {
        return 0.0;
    }
    let hex = chars.iter().all(|c| c.is_ascii_hexdigit())
        && (chars.iter().all(|c| !c.is_ascii_uppercase())
            || chars.iter().all(|c| !c.is_ascii_lowercase()));
    let alphabet = if hex {
        16.0
    } else {
        let class = |f: fn(&char) -> bool, n: f64| if chars.iter().any(f) { n } else { 0.0 };
        class(char::is_ascii_digit, 10.0)
            + class(char::is_ascii_lowercase, 26.0)
            + class(char::is_ascii_uppercase, 26.0)
            + class(char::is_ascii_punctuation, 32.0)
            + class(
                |c| !c.is_ascii_alphanumeric() && !c.is_ascii_punctuation(),
                64.0,
            )
    };
    // A token of few distinct characters (`aaaa…`, `abab…`) is no better than its
    // distinct characters allow.
    let mut distinct = chars.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let per_char = alphabet.log2().min((distinct.len() as f64).log2() * 2.0);
    chars.len() as f64 * per_char.max(0.0)
}

/// Refuses a token too weak to stand offline guessing, saying how to make one.
pub fn check_token(token: &str) -> Result<(), String> {
    let bits = token_bits(token);
    if bits >= MIN_TOKEN_BITS {
        return Ok(());
    }
    Err(format!(
        "the token is too weak: about {bits:.0} bits at most, and a session's handshake \
         lets an eavesdropper test guesses offline, so at least {MIN_TOKEN_BITS:.0} are \
         needed; make one with `longhaul token > FILE` and give both ends --token-file FILE"
    ))
}

/// `label` keyed by the token: a stable key both ends derive (BLAKE3's KDF mode).
fn token_key(label: &str, token: &str) -> [u8; 32] {
    blake3::derive_key(label, token.as_bytes())
}

/// The Noise PSK for `token`.
pub fn psk(token: &str) -> [u8; 32] {
    token_key("longhaul 2026-11-26 noise psk", token)
}

/// The key of block hashes under `token`: BLAKE3 keyed with it, so a party without
/// the token can forge neither a block with its hash nor a file's digest, even on
/// a channel sent without encryption. It depends on the token only (not on the
/// session), so the hashes a resume journal keeps stay valid across sessions.
pub fn block_key(token: &str) -> [u8; 32] {
    token_key("longhaul 2026-11-26 block hash", token)
}

/// Which way a key protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Sender to receiver.
    ToReceiver,
    /// Receiver to sender.
    ToSender,
}

/// Every key of a session, derived from the handshake's split.
pub struct SessionKeys {
    prk: hkdf::Prk,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(..)")
    }
}

/// A channel of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The control channel.
    Control,
    /// Data channel `n`.
    Data(usize),
}

struct Len(usize);
impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

impl SessionKeys {
    /// From the handshake's two split keys.
    pub(crate) fn from_split(k1: &[u8; 32], k2: &[u8; 32]) -> Self {
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, b"longhaul 2026-11-26 session");
        let mut ikm = [0u8; 64];
        ikm[..32].copy_from_slice(k1);
        ikm[32..].copy_from_slice(k2);
        SessionKeys {
            prk: salt.extract(&ikm),
        }
    }

    /// Fixed keys, for fuzz targets and tests outside the crate: never for a
    /// session.
    pub fn for_fuzzing() -> Self {
        SessionKeys::from_split(&[0x5a; 32], &[0xa5; 32])
    }

    fn expand(&self, label: &str, out: &mut [u8]) {
        self.prk
            .expand(&[label.as_bytes()], Len(out.len()))
            .and_then(|okm| okm.fill(out))
            .expect("HKDF-SHA256 expands up to 8160 bytes");
    }

    /// The AES-256-GCM key of `channel` in direction `dir`. Each (channel,
    /// direction) has its own key, so counters starting at 0 on each never repeat a
    /// nonce under one key.
    pub fn aead(&self, channel: Channel, dir: Dir) -> LessSafeKey {
        let mut k = [0u8; 32];
        self.expand(&format!("aead {channel:?} {dir:?}"), &mut k);
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &k).expect("32-byte key"))
    }

    /// What a sender writes first on data channel `c`: the receiver takes blocks
    /// only from a connection that opens with it (a stray sender of another session,
    /// or a stranger on an unencrypted channel, is turned away).
    pub fn ticket(&self, c: usize) -> [u8; 32] {
        let mut t = [0u8; 32];
        self.expand(&format!("ticket {c}"), &mut t);
        t
    }

    /// The keys of a UDT data channel for the side that sends `dir`.
    pub fn packet_protection(&self, c: usize, sending: Dir) -> PacketProtection {
        let other = match sending {
            Dir::ToReceiver => Dir::ToSender,
            Dir::ToSender => Dir::ToReceiver,
        };
        PacketProtection::new(
            self.aead(Channel::Data(c), sending),
            self.aead(Channel::Data(c), other),
        )
    }
}

/// At most `max` bytes of what a stranger sent, escaped (control characters and
/// invalid UTF-8 made visible), for a log line.
pub fn escaped_prefix(bytes: &[u8], max: usize) -> String {
    let cut = &bytes[..bytes.len().min(max)];
    let mut s: String = String::from_utf8_lossy(cut).escape_debug().collect();
    if bytes.len() > max {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weak tokens are refused with what to do; `longhaul token`'s are taken.
    #[test]
    fn weak_tokens_are_refused_and_generated_ones_taken() {
        for weak in [
            "",
            "k",
            "secret",
            "correct horse",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "abababababababababababababababababababababababababab",
            "0123456789abcdef0123456789abcde", // 31 hex digits: 124 bits
        ] {
            let e = check_token(weak).unwrap_err();
            assert!(e.contains("longhaul token"), "{weak:?}: {e}");
        }
        let t = new_token();
        assert_eq!(t.len(), 64);
        assert!(token_bits(&t) >= 255.0, "{t}");
        check_token(&t).unwrap();
        assert_ne!(t, new_token(), "fresh randomness each time");
        check_token("0123456789abcdef0123456789abcdef").unwrap(); // 128 bits of hex
        check_token("Tr0ub4dor&3-horse-battery-staple-XYZ!").unwrap();
    }

    /// Keys differ per channel and direction, and tickets per channel.
    #[test]
    fn keys_differ_per_channel_and_direction() {
        let k = SessionKeys::from_split(&[1; 32], &[2; 32]);
        let seal = |key: &LessSafeKey| {
            let mut b = b"same".to_vec();
            let n = ring::aead::Nonce::assume_unique_for_key([0; 12]);
            key.seal_in_place_append_tag(n, ring::aead::Aad::empty(), &mut b)
                .unwrap();
            b
        };
        let all = [
            seal(&k.aead(Channel::Control, Dir::ToReceiver)),
            seal(&k.aead(Channel::Control, Dir::ToSender)),
            seal(&k.aead(Channel::Data(0), Dir::ToReceiver)),
            seal(&k.aead(Channel::Data(1), Dir::ToReceiver)),
        ];
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                assert_ne!(all[i], all[j]);
            }
        }
        assert_ne!(k.ticket(0), k.ticket(1));
        let other = SessionKeys::from_split(&[1; 32], &[3; 32]);
        assert_ne!(k.ticket(0), other.ticket(0));
    }

    #[test]
    fn log_prefixes_are_short_and_escaped() {
        let s = escaped_prefix(b"GET /\x1b[31m\nhi\xff", 64);
        assert!(!s.contains('\x1b') && !s.contains('\n'), "{s}");
        let long = vec![b'a'; 1 << 20];
        let s = escaped_prefix(&long, 32);
        assert!(s.len() < 64 && s.contains("1048576 bytes"), "{s}");
    }
}
