//! The UDT parser never panics, and whatever it accepts re-emits to bytes that parse
//! to the same thing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_wire::udt::{UdtPacket, UdtRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = UdtPacket::new_checked(data) else { return };
    let Ok(r) = UdtRepr::parse(&p, data.len()) else { return };
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf);
    let q = UdtPacket::new_checked(&buf[..]).expect("emitted header");
    assert_eq!(UdtRepr::parse(&q, r.wire_len()), Ok(r));
});
