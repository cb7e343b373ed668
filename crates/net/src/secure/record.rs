//! Authenticated encryption of a byte stream (the control channel, TCP data
//! channels): records as in TLS 1.3 (RFC 8446 §5), simplified to one cipher.
//!
//! ```text
//!  record = len: u32 (ciphertext + tag) · AES-256-GCM(key, nonce = 0^32 · n: u64, aad = len)
//! ```
//!
//! `n` counts the records of one direction from 0, so it is never sent and a record
//! dropped, repeated, reordered or cut fails the next tag. A stream cut at a record
//! boundary reads as its end: the protocol above ends every channel with a marker
//! of its own, so a cut is still seen as one.

use std::io::{self, Read, Write};

use ring::aead::{Aad, LessSafeKey, Nonce, NONCE_LEN};

/// Largest plaintext in one record. 64 KiB: the per-record cost (a nonce, a tag, a
/// length) is lost in the data, and a reader holds at most this much unverified.
pub const MAX_RECORD: usize = 64 << 10;
const TAG: usize = 16;

fn nonce(n: u64) -> Nonce {
    let mut b = [0u8; NONCE_LEN];
    b[4..].copy_from_slice(&n.to_be_bytes());
    Nonce::assume_unique_for_key(b)
}

/// The writing half: buffers what is written and seals it into records of up to
/// [`MAX_RECORD`] bytes; [`flush`](Write::flush) seals what is buffered.
pub struct RecordWriter<W> {
    inner: W,
    key: LessSafeKey,
    n: u64,
    /// The record being filled: 4 bytes of length, then plaintext.
    buf: Vec<u8>,
}

impl<W> std::fmt::Debug for RecordWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordWriter").field("n", &self.n).finish()
    }
}

impl<W: Write> RecordWriter<W> {
    /// Seals what is written to `inner` with `key`.
    pub fn new(inner: W, key: LessSafeKey) -> Self {
        let mut buf = Vec::with_capacity(4 + MAX_RECORD + TAG);
        buf.extend_from_slice(&[0; 4]);
        RecordWriter {
            inner,
            key,
            n: 0,
            buf,
        }
    }

    /// The stream beneath.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Seals the buffered plaintext (if any) and writes the record.
    fn seal(&mut self) -> io::Result<()> {
        if self.buf.len() == 4 {
            return Ok(());
        }
        let len = (self.buf.len() - 4 + TAG) as u32;
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        let (head, body) = self.buf.split_at_mut(4);
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce(self.n), Aad::from(&*head), body)
            .map_err(|_| io::Error::other("sealing a record"))?;
        self.n += 1;
        self.buf.extend_from_slice(tag.as_ref());
        let r = self.inner.write_all(&self.buf);
        self.buf.truncate(4);
        r
    }
}

impl<W: Write> Write for RecordWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = 4 + MAX_RECORD - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == 4 + MAX_RECORD {
            self.seal()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.seal()?;
        self.inner.flush()
    }
}

/// The reading half: opens records and hands out their plaintext. A record that
/// fails its tag (tampered, forged, out of order) is an error of kind
/// `InvalidData`, and the reader stays failed.
pub struct RecordReader<R> {
    inner: R,
    key: LessSafeKey,
    n: u64,
    /// The largest plaintext a record may hold here.
    max: usize,
    buf: Vec<u8>,
    /// Plaintext of the current record: `buf[pos..end]`.
    pos: usize,
    end: usize,
    failed: bool,
}

impl<R> std::fmt::Debug for RecordReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordReader").field("n", &self.n).finish()
    }
}

impl<R: Read> RecordReader<R> {
    /// Opens what `inner` carries with `key`; records of more than `max` bytes of
    /// plaintext are refused before they are read.
    pub fn new(inner: R, key: LessSafeKey, max: usize) -> Self {
        RecordReader {
            inner,
            key,
            n: 0,
            max: max.min(MAX_RECORD),
            buf: vec![],
            pos: 0,
            end: 0,
            failed: false,
        }
    }

    /// The stream beneath.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The stream beneath, mutably.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Raises (or lowers) the largest record taken, e.g. once the peer is trusted.
    pub fn set_max(&mut self, max: usize) {
        self.max = max.min(MAX_RECORD);
    }

    fn fail(&mut self, why: &str) -> io::Error {
        self.failed = true;
        io::Error::new(io::ErrorKind::InvalidData, why.to_string())
    }

    /// Reads and opens the next record; false at a clean end of the stream.
    fn next_record(&mut self) -> io::Result<bool> {
        let mut len = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match self.inner.read(&mut len[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(self.fail("the stream ended inside a record")),
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if got > 0 {
                        self.failed = true;
                    }
                    return Err(e);
                }
            }
        }
        let n = u32::from_be_bytes(len) as usize;
        if !(TAG..=self.max + TAG).contains(&n) {
            return Err(self.fail(&format!(
                "a record of {n} bytes (at most {} here)",
                self.max + TAG
            )));
        }
        self.buf.resize(n, 0);
        if let Err(e) = self.inner.read_exact(&mut self.buf) {
            self.failed = true;
            return Err(e);
        }
        let opened = self
            .key
            .open_in_place(nonce(self.n), Aad::from(len), &mut self.buf)
            .map(|p| p.len());
        match opened {
            Ok(plain) => {
                self.n += 1;
                self.pos = 0;
                self.end = plain;
                Ok(true)
            }
            Err(_) => Err(self.fail(
                "a record failed its authentication tag (tampered with, or not from the peer)",
            )),
        }
    }
}

impl<R: Read> Read for RecordReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.failed {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the channel failed authentication earlier",
            ));
        }
        while self.pos == self.end {
            if out.is_empty() || !self.next_record()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::aead::{UnboundKey, AES_256_GCM};

    fn key(b: u8) -> LessSafeKey {
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[b; 32]).unwrap())
    }

    fn sealed(chunks: &[&[u8]]) -> Vec<u8> {
        let mut w = RecordWriter::new(Vec::new(), key(1));
        for c in chunks {
            w.write_all(c).unwrap();
            w.flush().unwrap();
        }
        w.inner
    }

    fn open_all(wire: &[u8]) -> io::Result<Vec<u8>> {
        let mut r = RecordReader::new(wire, key(1), MAX_RECORD);
        let mut out = vec![];
        r.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn records_round_trip_and_hide_the_plaintext() {
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let wire = sealed(&[b"hello marker-XYZZY", &big, b""]);
        assert_eq!(
            open_all(&wire).unwrap(),
            [&b"hello marker-XYZZY"[..], &big].concat()
        );
        assert!(!wire.windows(12).any(|w| w == b"marker-XYZZY"));
    }

    /// Any byte flipped anywhere on the wire is refused, never handed out.
    #[test]
    fn every_flipped_byte_is_refused() {
        let wire = sealed(&[b"first record", b"second"]);
        for i in 0..wire.len() {
            let mut bad = wire.clone();
            bad[i] ^= 0x01;
            let r = open_all(&bad);
            assert!(r.is_err(), "byte {i} flipped went unnoticed: {r:?}");
        }
    }

    /// Records dropped, repeated or swapped fail the next tag; another key fails.
    #[test]
    fn dropped_repeated_and_swapped_records_are_refused() {
        let a = sealed(&[b"aaaa"]);
        let wire = sealed(&[b"aaaa", b"bbbb"]);
        let (r1, r2) = wire.split_at(a.len());
        assert!(open_all(r2).is_err(), "dropped first");
        assert!(open_all(&[r1, r1].concat()).is_err(), "repeated");
        assert!(open_all(&[r2, r1].concat()).is_err(), "swapped");
        let mut r = RecordReader::new(&wire[..], key(2), MAX_RECORD);
        assert!(r.read(&mut [0; 8]).is_err(), "another key");
    }

    /// A record longer than the reader allows is refused from its length alone.
    #[test]
    fn oversized_records_are_refused_before_they_are_read() {
        let wire = sealed(&[&[0u8; 5000]]);
        let mut r = RecordReader::new(&wire[..], key(1), 4096);
        let e = r.read(&mut [0; 8]).unwrap_err();
        assert!(e.to_string().contains("at most 4112"), "{e}");
    }

    /// Property: whatever bytes arrive, the reader hands out nothing or fails;
    /// never panics (the cargo-fuzz target `record` runs the same).
    #[test]
    fn garbage_is_never_handed_out() {
        use proptest::prelude::*;
        proptest!(ProptestConfig::with_cases(512), |(bytes in proptest::collection::vec(any::<u8>(), 0..300))| {
            let r = open_all(&bytes);
            prop_assert!(r.map(|v| v.is_empty()).unwrap_or(true));
        });
    }
}
