use super::*;
use proptest::prelude::*;

fn roundtrip(chunks: &[ChunkRepr<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 17];
    let mut b = PacketBuilder::new(
        &mut buf,
        SctpRepr {
            src_port: 5000,
            dst_port: 6000,
            verification_tag: 0xdead_beef,
        },
    );
    for c in chunks {
        assert!(b.push(c), "{c:?} fits");
    }
    let n = b.finish(true);
    buf.truncate(n);
    let p = SctpPacket::new_checked(&buf[..]).unwrap();
    assert!(p.verify_checksum());
    let hdr = SctpRepr::parse(&p, true).unwrap();
    assert_eq!(hdr.verification_tag, 0xdead_beef);
    let parsed: Vec<_> = p.chunks().collect::<Result<_>>().unwrap();
    assert_eq!(parsed.as_slice(), chunks);
    buf
}

#[test]
fn crc32c_check_value() {
    // The CRC-32C check value (RFC 3720 §B.4 / the Castagnoli polynomial catalogue).
    assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
}

#[test]
fn a_full_data_chunk_fills_a_1500_byte_mtu() {
    let data = vec![7u8; 1452];
    let c = ChunkRepr::Data {
        tsn: 1,
        stream_id: 0,
        ssn: 0,
        ppid: 0,
        flags: DataFlags {
            beginning: true,
            ..Default::default()
        },
        data: &data,
    };
    assert_eq!(c.padded_len(), 1468);
    let pkt = roundtrip(&[c]);
    assert_eq!(20 + pkt.len(), 1500);
}

#[test]
fn padding_is_not_in_the_length_field() {
    let c = ChunkRepr::Data {
        tsn: 9,
        stream_id: 3,
        ssn: 4,
        ppid: 51,
        flags: DataFlags {
            ending: true,
            unordered: true,
            ..Default::default()
        },
        data: &[1, 2, 3, 4, 5, 6, 7, 8, 9],
    };
    let pkt = roundtrip(&[c, ChunkRepr::CookieAck]);
    assert_eq!(u16::from_be_bytes([pkt[14], pkt[15]]), 16 + 9);
    assert_eq!(pkt.len(), 12 + 28 + 4);
    assert_eq!(pkt[12 + 1], 0x05, "U and E flags");
}

#[test]
fn every_chunk_kind_round_trips() {
    let cookie = [0xabu8; 37];
    let init = InitRepr {
        initiate_tag: 77,
        a_rwnd: 65536,
        outbound_streams: 10,
        max_inbound_streams: 65535,
        initial_tsn: 0xffff_fff0,
        cookie: None,
    };
    let gaps = [(2u16, 3u16), (5, 9)];
    let dups = [4u32, 0xffff_ffff];
    roundtrip(&[
        ChunkRepr::Init(init),
        ChunkRepr::InitAck(InitRepr {
            cookie: Some(&cookie),
            ..init
        }),
        ChunkRepr::Sack(SackRepr {
            cum_tsn: 1,
            a_rwnd: 2,
            gap_blocks: GapBlocks::List(&gaps),
            dup_tsns: DupTsns::List(&dups),
        }),
        ChunkRepr::Heartbeat { info: b"hello" },
        ChunkRepr::HeartbeatAck { info: b"hello" },
        ChunkRepr::Abort {
            tag_reflected: true,
            causes: &[0, 1, 0, 4],
        },
        ChunkRepr::Shutdown { cum_tsn: 42 },
        ChunkRepr::ShutdownAck,
        ChunkRepr::Error {
            causes: &[0, 5, 0, 4],
        },
        ChunkRepr::CookieEcho { cookie: &cookie },
        ChunkRepr::CookieAck,
        ChunkRepr::ShutdownComplete {
            tag_reflected: false,
        },
        ChunkRepr::Unknown {
            kind: 0xc1,
            flags: 3,
            value: &[1, 2, 3],
        },
    ]);
}

#[test]
fn malformed_chunks_are_errors_not_panics() {
    // Length below the chunk header.
    assert_eq!(
        ChunkRepr::parse(&[0, 0, 0, 2]).unwrap_err(),
        Error::Malformed
    );
    // Length past the buffer.
    assert_eq!(
        ChunkRepr::parse(&[0, 0, 0, 40, 0, 0]).unwrap_err(),
        Error::Truncated
    );
    // DATA without user data.
    let mut d = [0u8; 16];
    d[3] = 16;
    assert_eq!(ChunkRepr::parse(&d).unwrap_err(), Error::Malformed);
    // INIT with a zero initiate tag.
    let mut i = [0u8; 20];
    i[0] = chunk_type::INIT;
    i[3] = 20;
    i[12] = 1;
    i[14] = 1;
    assert_eq!(ChunkRepr::parse(&i).unwrap_err(), Error::Malformed);
    // INIT-ACK without a cookie.
    i[0] = chunk_type::INIT_ACK;
    i[7] = 1;
    assert_eq!(ChunkRepr::parse(&i).unwrap_err(), Error::Malformed);
    // SACK whose counts disagree with its length.
    let mut s = [0u8; 16];
    s[0] = chunk_type::SACK;
    s[3] = 16;
    s[13] = 1;
    assert_eq!(ChunkRepr::parse(&s).unwrap_err(), Error::Malformed);
    // A bad checksum.
    let mut pkt = roundtrip(&[ChunkRepr::CookieAck]);
    pkt[5] ^= 1;
    let p = SctpPacket::new_checked(&pkt[..]).unwrap();
    assert_eq!(SctpRepr::parse(&p, true).unwrap_err(), Error::Checksum);
    assert!(SctpPacket::new_checked(&pkt[..11]).is_err());
}

#[test]
fn the_builder_refuses_what_does_not_fit() {
    let mut buf = [0u8; 12 + 20];
    let mut b = PacketBuilder::new(
        &mut buf,
        SctpRepr {
            src_port: 1,
            dst_port: 2,
            verification_tag: 3,
        },
    );
    let c = ChunkRepr::Data {
        tsn: 1,
        stream_id: 0,
        ssn: 0,
        ppid: 0,
        flags: DataFlags::default(),
        data: &[0; 5],
    };
    assert!(!b.push(&c), "24 bytes padded do not fit in 20");
    assert!(b.push(&ChunkRepr::Shutdown { cum_tsn: 1 }));
    assert_eq!(b.len(), 20);
}

/// The raw material of one arbitrary chunk: kind, a number, two u16s, flags, bytes,
/// gap blocks, duplicate TSNs.
type ChunkSpec = (u8, u32, u16, u16, u8, Vec<u8>, Vec<(u16, u16)>, Vec<u32>);

fn arb_chunk() -> impl Strategy<Value = ChunkSpec> {
    (
        0u8..14,
        any::<u32>(),
        1u16..,
        1u16..,
        0u8..16,
        proptest::collection::vec(any::<u8>(), 1..64),
        proptest::collection::vec(any::<(u16, u16)>(), 0..5),
        proptest::collection::vec(any::<u32>(), 0..5),
    )
}

fn build(t: &ChunkSpec) -> ChunkRepr<'_> {
    let (k, n, a, b, f, bytes, gaps, dups) = t;
    let n = (*n).max(1);
    let init = InitRepr {
        initiate_tag: n,
        a_rwnd: n ^ 5,
        outbound_streams: *a,
        max_inbound_streams: *b,
        initial_tsn: n.wrapping_mul(3),
        cookie: None,
    };
    match k {
        0 => ChunkRepr::Data {
            tsn: n,
            stream_id: *a,
            ssn: *b,
            ppid: n,
            flags: DataFlags::from_bits(*f),
            data: bytes,
        },
        1 => ChunkRepr::Init(init),
        2 => ChunkRepr::InitAck(InitRepr {
            cookie: Some(bytes),
            ..init
        }),
        3 => ChunkRepr::Sack(SackRepr {
            cum_tsn: n,
            a_rwnd: n,
            gap_blocks: GapBlocks::List(gaps),
            dup_tsns: DupTsns::List(dups),
        }),
        4 => ChunkRepr::Heartbeat { info: bytes },
        5 => ChunkRepr::HeartbeatAck { info: bytes },
        6 => ChunkRepr::Abort {
            tag_reflected: f & 1 == 1,
            causes: bytes,
        },
        7 => ChunkRepr::Shutdown { cum_tsn: n },
        8 => ChunkRepr::ShutdownAck,
        9 => ChunkRepr::Error { causes: bytes },
        10 => ChunkRepr::CookieEcho { cookie: bytes },
        11 => ChunkRepr::CookieAck,
        12 => ChunkRepr::ShutdownComplete {
            tag_reflected: f & 1 == 1,
        },
        _ => ChunkRepr::Unknown {
            kind: 200,
            flags: *f,
            value: bytes,
        },
    }
}

proptest! {
    #[test]
    fn packets_of_any_chunks_round_trip(specs in proptest::collection::vec(arb_chunk(), 1..8)) {
        let chunks: Vec<_> = specs.iter().map(build).collect();
        roundtrip(&chunks);
    }

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(p) = SctpPacket::new_checked(&bytes[..]) {
            let _ = SctpRepr::parse(&p, true);
            for c in p.chunks().flatten() {
                {
                    // Whatever parses re-emits to the same length.
                    let mut out = vec![0u8; c.padded_len()];
                    prop_assert_eq!(c.emit(&mut out), c.padded_len());
                }
            }
        }
    }
}
