//! The session handshake: a preamble each way, then Noise `NNpsk0`.
//!
//! ```text
//!  sender (initiator)                          receiver (responder)
//!   |-- "LONGHAUL" version flags              |  16 bytes, in clear; the Noise
//!   |   len16 · Noise -> psk, e ------------->|  prologue is the sender's preamble
//!   |<------------- "LONGHAUL" version flags  |  on a mismatch only this, so the
//!   |     len16 · Noise <- e, ee {preamble} --|  sender can say why
//! ```
//!
//! One round trip after TCP's, and the sender's first record (`Hello`, then the
//! offer) goes in the next flight. The receiver's preamble travels in clear (to
//! name a mismatch) and again as the second message's payload, authenticated, so a
//! man in the middle who rewrites either preamble (to turn encryption off, say)
//! fails the handshake.
//!
//! Noise (Perrin, rev 34) §9: with `psk0` the PSK is mixed before the first message,
//! so its payload's tag already proves the token; the second message's tag proves
//! it the other way, bound to both ephemeral keys. The responder counts the sender
//! authenticated only after the first transport record under the new keys decrypts
//! (a replayed first message cannot produce one). Every message is at most
//! [`MAX_HANDSHAKE_MSG`] bytes and the caller bounds the whole exchange in time.

use std::io::{self, Read, Write};

use super::SessionKeys;

/// The Noise protocol name: WireGuard's primitives.
const NOISE: &str = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s";
/// What opens every longhaul control connection.
const MAGIC: &[u8; 8] = b"LONGHAUL";
/// The largest handshake message either side reads (NNpsk0's are 48 bytes).
pub const MAX_HANDSHAKE_MSG: usize = 256;

/// What each side says in clear before the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    /// The control protocol's version.
    pub version: u32,
    /// Whether the data channels are encrypted (`--no-encryption` clears it).
    pub encrypt: bool,
}

impl Preamble {
    fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.version.to_be_bytes());
        b[12..].copy_from_slice(&u32::from(self.encrypt).to_be_bytes());
        b
    }

    fn parse(b: &[u8; 16]) -> Result<Self, HandshakeError> {
        if &b[..8] != MAGIC {
            return Err(HandshakeError::NotLonghaul(super::escaped_prefix(b, 16)));
        }
        let flags = u32::from_be_bytes(b[12..].try_into().expect("4 bytes"));
        Ok(Preamble {
            version: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
            encrypt: flags & 1 == 1,
        })
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The connection failed or the deadline passed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The peer does not speak longhaul (what it sent, escaped).
    #[error("not a longhaul peer (it sent \"{0}\")")]
    NotLonghaul(String),
    /// Another protocol version.
    #[error("the peer speaks protocol version {theirs}, this side {ours}: run the same longhaul release on both ends")]
    Version {
        /// This side's.
        ours: u32,
        /// The peer's.
        theirs: u32,
    },
    /// One end was started with `--no-encryption` and the other not.
    #[error("{}", encryption_mismatch(*.ours))]
    Encryption {
        /// Whether this side encrypts.
        ours: bool,
    },
    /// The peer could not prove it knows the token.
    #[error("authentication failed: the peer could not prove it knows the token (the tokens differ, or someone else answered)")]
    Auth,
    /// A handshake message longer than any real one.
    #[error("a handshake message of {0} bytes (at most {MAX_HANDSHAKE_MSG})")]
    Oversized(usize),
}

fn encryption_mismatch(ours: bool) -> String {
    let (this, that) = if ours {
        ("encrypts", "was started with --no-encryption")
    } else {
        ("was started with --no-encryption", "encrypts")
    };
    format!("this side {this} and the peer {that}: give both ends the same (--no-encryption on both, or on neither)")
}

fn check(ours: Preamble, theirs: Preamble) -> Result<(), HandshakeError> {
    if theirs.version != ours.version {
        return Err(HandshakeError::Version {
            ours: ours.version,
            theirs: theirs.version,
        });
    }
    if theirs.encrypt != ours.encrypt {
        return Err(HandshakeError::Encryption { ours: ours.encrypt });
    }
    Ok(())
}

fn noise<'a>(psk: &'a [u8; 32], prologue: &'a [u8]) -> snow::Builder<'a> {
    snow::Builder::new(NOISE.parse().expect("a valid Noise name"))
        .psk(0, psk)
        .prologue(prologue)
}

/// Writes `pre` and the length-prefixed Noise message `m` in one write (one
/// flight each way).
fn write_flight(s: &mut impl Write, pre: Preamble, m: &[u8]) -> io::Result<()> {
    let mut flight = pre.to_bytes().to_vec();
    flight.extend_from_slice(&(m.len() as u16).to_be_bytes());
    flight.extend_from_slice(m);
    s.write_all(&flight)?;
    s.flush()
}

fn read_msg(s: &mut impl Read) -> Result<Vec<u8>, HandshakeError> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len)?;
    let len = usize::from(u16::from_be_bytes(len));
    if len > MAX_HANDSHAKE_MSG {
        return Err(HandshakeError::Oversized(len));
    }
    let mut m = vec![0u8; len];
    s.read_exact(&mut m)?;
    Ok(m)
}

fn keys(hs: &mut snow::HandshakeState) -> SessionKeys {
    let (k1, k2) = hs.dangerously_get_raw_split();
    SessionKeys::from_split(&k1, &k2)
}

/// The sender's side. On success both ends hold the same [`SessionKeys`] and the
/// receiver has proved it knows the token.
pub fn handshake_initiator(
    s: &mut (impl Read + Write),
    psk: &[u8; 32],
    ours: Preamble,
) -> Result<SessionKeys, HandshakeError> {
    let mut hs = noise(psk, &ours.to_bytes())
        .build_initiator()
        .expect("a complete Noise builder");
    let mut buf = [0u8; MAX_HANDSHAKE_MSG];
    let n = hs.write_message(&[], &mut buf).expect("fits");
    write_flight(s, ours, &buf[..n])?;
    // A receiver that cannot open the first message (another token) closes: to
    // the sender that is the same failure as an answer that does not open.
    let gone = |e: HandshakeError| match e {
        HandshakeError::Io(e)
            if matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
            ) =>
        {
            HandshakeError::Auth
        }
        e => e,
    };
    let mut b = [0u8; 16];
    s.read_exact(&mut b).map_err(|e| gone(e.into()))?;
    let theirs = Preamble::parse(&b)?;
    check(ours, theirs)?;
    let m = read_msg(s).map_err(gone)?;
    let got = hs
        .read_message(&m, &mut buf)
        .map_err(|_| HandshakeError::Auth)?;
    // The receiver's preamble came in clear; its copy inside the authenticated
    // message says nobody on the path rewrote it.
    if buf[..got] != theirs.to_bytes() {
        return Err(HandshakeError::Auth);
    }
    Ok(keys(&mut hs))
}

/// The receiver's side: reads the sender's preamble and first message; on a
/// version or encryption mismatch answers with its own preamble only (so the
/// sender can say why) and fails; otherwise answers with its preamble and the
/// second message, which carries the preamble again, authenticated.
pub fn handshake_responder(
    s: &mut (impl Read + Write),
    psk: &[u8; 32],
    ours: Preamble,
) -> Result<SessionKeys, HandshakeError> {
    let mut b = [0u8; 16];
    s.read_exact(&mut b)?;
    let theirs = Preamble::parse(&b)?;
    if let Err(e) = check(ours, theirs) {
        s.write_all(&ours.to_bytes())?;
        s.flush()?;
        return Err(e);
    }
    let mut hs = noise(psk, &theirs.to_bytes())
        .build_responder()
        .expect("a complete Noise builder");
    let m = read_msg(s)?;
    let mut buf = [0u8; MAX_HANDSHAKE_MSG];
    hs.read_message(&m, &mut buf)
        .map_err(|_| HandshakeError::Auth)?;
    let n = hs.write_message(&ours.to_bytes(), &mut buf).expect("fits");
    write_flight(s, ours, &buf[..n])?;
    Ok(keys(&mut hs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secure::{Channel, Dir};
    use std::net::{TcpListener, TcpStream};

    const V: Preamble = Preamble {
        version: 6,
        encrypt: true,
    };

    /// Runs both halves over loopback TCP, the receiver with `r_psk`/`r_pre`.
    fn pair(
        s_psk: [u8; 32],
        s_pre: Preamble,
        r_psk: [u8; 32],
        r_pre: Preamble,
    ) -> (
        Result<SessionKeys, HandshakeError>,
        Result<SessionKeys, HandshakeError>,
    ) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            handshake_responder(&mut s, &r_psk, r_pre)
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let sent = handshake_initiator(&mut c, &s_psk, s_pre);
        drop(c);
        (sent, h.join().unwrap())
    }

    /// Whether two ends hold the same keys: the same ticket, and a record one
    /// seals the other opens.
    fn same_keys(a: &SessionKeys, b: &SessionKeys) -> bool {
        use ring::aead::{Aad, Nonce};
        let mut msg = b"hello".to_vec();
        let nonce = || Nonce::assume_unique_for_key([0; 12]);
        a.aead(Channel::Control, Dir::ToReceiver)
            .seal_in_place_append_tag(nonce(), Aad::empty(), &mut msg)
            .unwrap();
        let opened = b
            .aead(Channel::Control, Dir::ToReceiver)
            .open_in_place(nonce(), Aad::empty(), &mut msg)
            .map(|p| p.to_vec());
        a.ticket(0) == b.ticket(0) && opened.as_deref() == Ok(&b"hello"[..])
    }

    #[test]
    fn both_ends_with_the_token_agree_on_fresh_keys() {
        let (a, b) = pair([7; 32], V, [7; 32], V);
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(same_keys(&a, &b));
        let (c, _) = pair([7; 32], V, [7; 32], V);
        assert_ne!(a.ticket(0), c.unwrap().ticket(0), "fresh per session");
    }

    /// An impostor receiver (another token) cannot answer: the sender refuses it.
    #[test]
    fn a_receiver_without_the_token_is_refused_by_the_sender() {
        let (a, b) = pair([7; 32], V, [8; 32], V);
        assert!(matches!(b, Err(HandshakeError::Auth)), "{b:?}");
        assert!(
            matches!(a, Err(HandshakeError::Auth | HandshakeError::Io(_))),
            "{a:?}"
        );
    }

    #[test]
    fn a_mismatch_of_encryption_or_version_is_named_on_both_sides() {
        let plain = Preamble {
            encrypt: false,
            ..V
        };
        let (a, b) = pair([7; 32], V, [7; 32], plain);
        let (a, b) = (a.unwrap_err().to_string(), b.unwrap_err().to_string());
        assert!(
            a.contains("--no-encryption") && b.contains("--no-encryption"),
            "{a} / {b}"
        );
        let old = Preamble { version: 5, ..V };
        let (a, _) = pair([7; 32], old, [7; 32], V);
        assert!(a.unwrap_err().to_string().contains("version 6"));
    }

    /// Whatever a stranger sends, the responder ends with an error, never a panic or
    /// a read past the limits (property test; the cargo-fuzz target `handshake` runs
    /// the same check).
    #[test]
    fn garbage_never_authenticates() {
        use proptest::prelude::*;
        proptest!(ProptestConfig::with_cases(256), |(bytes in proptest::collection::vec(any::<u8>(), 0..400), magic in any::<bool>())| {
            let mut input = if magic { V.to_bytes().to_vec() } else { vec![] };
            input.extend_from_slice(&bytes);
            let mut s = Duplex { input: std::io::Cursor::new(input), output: vec![] };
            prop_assert!(handshake_responder(&mut s, &[7; 32], V).is_err());
        });
    }

    /// A read half from a buffer, a write half into a vector.
    pub(crate) struct Duplex {
        pub input: std::io::Cursor<Vec<u8>>,
        pub output: Vec<u8>,
    }
    impl Read for Duplex {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.input.read(b)
        }
    }
    impl Write for Duplex {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.output.write(b)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}
