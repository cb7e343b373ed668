//! Packet unprotection fed arbitrary datagrams: nothing opens without the peer's
//! key, and nothing panics. The property test `garbage_never_opens` in
//! `crates/net/src/secure/packet.rs` runs the same check in CI.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_net::secure::{PacketProtection, SessionKeys};

fuzz_target!(|data: &[u8]| {
    let keys = SessionKeys::for_fuzzing();
    let mut p: PacketProtection = keys.packet_protection(0, longhaul_net::secure::Dir::ToSender);
    let mut buf = data.to_vec();
    assert!(p.open(&mut buf, data.len()).is_none());
});
