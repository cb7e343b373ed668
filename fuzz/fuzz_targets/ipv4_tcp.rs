//! The IPv4 and TCP parsers never panic on any input, checksums on or off.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_wire::{Checksum, Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(ip) = Ipv4Packet::new_checked(data) else { return };
    for checksum in [Checksum::Both, Checksum::None] {
        let Ok(repr) = Ipv4Repr::parse(&ip, checksum) else { continue };
        if let Ok(tcp) = TcpPacket::new_checked(ip.payload()) {
            let _ = TcpRepr::parse(&tcp, repr.src_addr, repr.dst_addr, repr.payload_len, checksum);
        }
    }
});
