//! The SCTP parser never panics, and every chunk it accepts re-emits to bytes that
//! parse to the same chunk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_wire::sctp::{ChunkRepr, SctpPacket, SctpRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = SctpPacket::new_checked(data) else { return };
    let _ = SctpRepr::parse(&p, true);
    for c in p.chunks() {
        let Ok(c) = c else { break };
        let mut buf = vec![0u8; c.padded_len()];
        c.emit(&mut buf);
        let (again, n) = ChunkRepr::parse(&buf).expect("emitted chunk");
        assert_eq!(again, c);
        assert_eq!(n, buf.len());
    }
});
