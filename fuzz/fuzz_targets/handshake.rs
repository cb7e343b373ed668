//! A receiver's side of the session handshake fed whatever a stranger sends: it
//! ends in an error (never a panic, never keys) and reads no more than a preamble
//! and one bounded message. The property test `garbage_never_authenticates` in
//! `crates/net/src/secure/handshake.rs` runs the same check in CI.
#![no_main]

use std::io::{Cursor, Read, Write};

use libfuzzer_sys::fuzz_target;
use longhaul_net::secure::{handshake_responder, Preamble};

struct Duplex(Cursor<Vec<u8>>, Vec<u8>);
impl Read for Duplex {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(b)
    }
}
impl Write for Duplex {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.1.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let pre = Preamble { version: 6, encrypt: true };
    let mut s = Duplex(Cursor::new(data.to_vec()), vec![]);
    assert!(handshake_responder(&mut s, &[7; 32], pre).is_err());
});
