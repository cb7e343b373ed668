use super::*;
use proptest::prelude::*;

fn seq() -> impl Strategy<Value = UdtSeqNumber> {
    (0..=MAX_SEQ).prop_map(UdtSeqNumber::new)
}

fn handshake() -> impl Strategy<Value = HandshakeRepr> {
    (any::<[u32; 8]>(), seq(), any::<[u32; 4]>()).prop_map(|(w, isn, peer_ip)| HandshakeRepr {
        version: w[0],
        socket_type: w[1],
        initial_seq: isn,
        mss: w[2],
        flight_flag_size: w[3],
        request_type: w[4] as i32,
        socket_id: w[5],
        cookie: w[6],
        peer_ip,
    })
}

fn ack_info() -> impl Strategy<Value = AckInfo> {
    prop_oneof![
        Just(AckInfo::Light),
        any::<[u32; 3]>().prop_map(|w| AckInfo::Short {
            rtt_us: w[0],
            rtt_var_us: w[1],
            avail_buf_pkts: w[2]
        }),
        any::<[u32; 5]>().prop_map(|w| AckInfo::Full {
            rtt_us: w[0],
            rtt_var_us: w[1],
            avail_buf_pkts: w[2],
            recv_rate_pps: w[3],
            bandwidth_pps: w[4],
        }),
    ]
}

/// Every control packet but NAK and user-defined (which borrow their body).
fn owned_control() -> impl Strategy<Value = Control<'static>> {
    prop_oneof![
        handshake().prop_map(Control::Handshake),
        Just(Control::KeepAlive),
        (any::<u32>(), seq(), ack_info()).prop_map(|(n, ack, info)| Control::Ack {
            ack_seq_no: n,
            ack,
            info
        }),
        Just(Control::CongestionWarning),
        Just(Control::Shutdown),
        any::<u32>().prop_map(|n| Control::Ack2 { ack_seq_no: n }),
        (any::<u32>(), seq(), seq()).prop_map(|(m, a, b)| Control::MsgDropRequest {
            msg_id: m,
            first: a,
            last: b
        }),
        any::<u32>().prop_map(|c| Control::PeerError { code: c }),
    ]
}

fn roundtrip(r: UdtRepr<'_>) {
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf);
    let p = UdtPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(UdtRepr::parse(&p, r.wire_len()).unwrap(), r);
}

proptest! {
    #[test]
    fn data_roundtrip(s in seq(), b in 0u32..4, o in any::<bool>(), m in 0..=MAX_MSG_NO,
                      ts in any::<u32>(), id in any::<u32>(), len in 0usize..1500) {
        roundtrip(UdtRepr::Data {
            seq: s, boundary: Boundary::from_bits(b), in_order: o, msg_number: m,
            timestamp: ts, dest_socket_id: id, payload_len: len,
        });
    }

    #[test]
    fn control_roundtrip(c in owned_control(), ts in any::<u32>(), id in any::<u32>()) {
        roundtrip(UdtRepr::Control { timestamp: ts, dest_socket_id: id, control: c });
    }

    #[test]
    fn nak_roundtrip(starts in proptest::collection::vec((seq(), 0u32..1000), 1..40), ts in any::<u32>()) {
        let ranges: Vec<_> = starts.iter().map(|(a, n)| (*a, a.add(*n))).collect();
        let mut lbuf = vec![0u8; LossList::encoded_len(&ranges)];
        let list = LossList::encode(&ranges, &mut lbuf);
        prop_assert_eq!(list.ranges().collect::<Vec<_>>(), ranges);
        roundtrip(UdtRepr::Control { timestamp: ts, dest_socket_id: 9, control: Control::Nak(list) });
    }

    #[test]
    fn user_defined_roundtrip(ext in any::<u16>(), info in any::<u32>(), words in proptest::collection::vec(any::<u32>(), 0..8)) {
        let body: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        roundtrip(UdtRepr::Control { timestamp: 1, dest_socket_id: 2,
            control: Control::UserDefined { ext_type: ext, additional_info: info, body: &body } });
    }

    #[test]
    fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..128), extra in 0usize..64) {
        if let Ok(p) = UdtPacket::new_checked(&bytes[..]) {
            let _ = UdtRepr::parse(&p, bytes.len());
            let _ = UdtRepr::parse(&p, bytes.len() + extra);
        }
    }

    /// `offset_to`, `len_to` and the comparison agree with each other and with
    /// plain integer arithmetic away from the wrap.
    #[test]
    fn sequence_arithmetic(a in seq(), n in 0u32..0x3FFF_0000) {
        let b = a.add(n);
        prop_assert_eq!(a.offset_to(b), n as i32);
        prop_assert_eq!(b.offset_to(a), -(n as i32));
        prop_assert_eq!(a.len_to(b), n + 1);
        prop_assert_eq!(a <= b, true);
        prop_assert_eq!(n == 0 || b > a, true);
    }
}

/// The bytes UDT4 4.11 sends for a keep-alive (`CPacket::pack(1, ...)` with its
/// 4-byte pad), read off `packet.cpp`.
#[test]
fn keep_alive_matches_udt4() {
    let r = UdtRepr::Control {
        timestamp: 0x0102_0304,
        dest_socket_id: 0x0a0b_0c0d,
        control: Control::KeepAlive,
    };
    let mut buf = [0xffu8; 20];
    r.emit(&mut buf);
    assert_eq!(
        buf,
        [0x80, 0x01, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0]
    );
    // A peer that sends no pad is accepted too.
    let p = UdtPacket::new_checked(&buf[..16]).unwrap();
    assert_eq!(UdtRepr::parse(&p, 16).unwrap(), r);
}

/// The draft's loss-list example: {2, 6-11, 14}.
#[test]
fn loss_list_coding() {
    let bytes = [0, 0, 0, 2, 0x80, 0, 0, 6, 0, 0, 0, 0x0b, 0, 0, 0, 0x0e];
    let l = LossList::new(&bytes).unwrap();
    let s = UdtSeqNumber::new;
    assert_eq!(
        l.ranges().collect::<Vec<_>>(),
        vec![(s(2), s(2)), (s(6), s(11)), (s(14), s(14))]
    );
    let mut buf = [0u8; 16];
    assert_eq!(
        LossList::encode(&[(s(2), s(2)), (s(6), s(11)), (s(14), s(14))], &mut buf).as_bytes(),
        &bytes
    );
    // A range left open, two opens in a row, or a ragged length are malformed.
    assert_eq!(LossList::new(&bytes[..8]), Err(Error::Malformed));
    assert_eq!(
        LossList::new(&[0x80, 0, 0, 1, 0x80, 0, 0, 2, 0, 0, 0, 3]),
        Err(Error::Malformed)
    );
    assert_eq!(LossList::new(&bytes[..6]), Err(Error::Malformed));
}

/// UDT4's `CSeqNo` at the wrap: seqlen(MAX-1, 1) = 4, seqoff(MAX, 0) = 1, and 0 comes
/// after MAX.
#[test]
fn sequence_numbers_wrap_like_udt4() {
    let max = UdtSeqNumber::new(MAX_SEQ);
    let zero = UdtSeqNumber::new(0);
    assert_eq!(max.inc(), zero);
    assert_eq!(zero.dec(), max);
    assert_eq!(max.dec().len_to(UdtSeqNumber::new(1)), 4);
    assert_eq!(max.offset_to(zero), 1);
    assert_eq!(zero.offset_to(max), -1);
    assert!(zero > max);
    assert_eq!(max.add(3), UdtSeqNumber::new(2));
    assert_eq!(
        UdtSeqNumber::new(0xFFFF_FFFF),
        max,
        "the top bit is not part of the number"
    );
}

#[test]
fn ack_sizes_are_udt4s() {
    let base = |info| UdtRepr::Control {
        timestamp: 0,
        dest_socket_id: 0,
        control: Control::Ack {
            ack_seq_no: 0,
            ack: UdtSeqNumber::new(5),
            info,
        },
    };
    assert_eq!(base(AckInfo::Light).wire_len(), 20);
    assert_eq!(
        base(AckInfo::Short {
            rtt_us: 1,
            rtt_var_us: 2,
            avail_buf_pkts: 3
        })
        .wire_len(),
        32
    );
    let full = AckInfo::Full {
        rtt_us: 1,
        rtt_var_us: 2,
        avail_buf_pkts: 3,
        recv_rate_pps: 4,
        bandwidth_pps: 5,
    };
    assert_eq!(base(full).wire_len(), 40);
    // An 8-byte ACK body is not something UDT4 sends.
    let mut buf = [0u8; 24];
    base(AckInfo::Light).emit(&mut buf);
    let p = UdtPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(UdtRepr::parse(&p, 24), Err(Error::Malformed));
}

#[test]
fn a_truncated_control_body_is_rejected() {
    let r = UdtRepr::Control {
        timestamp: 0,
        dest_socket_id: 0,
        control: Control::Handshake(HandshakeRepr {
            version: 4,
            socket_type: 1,
            initial_seq: UdtSeqNumber::new(77),
            mss: 1500,
            flight_flag_size: 25600,
            request_type: 1,
            socket_id: 1234,
            cookie: 0,
            peer_ip: [0x0100_007f, 0, 0, 0],
        }),
    };
    let mut buf = [0u8; 64];
    r.emit(&mut buf);
    let p = UdtPacket::new_checked(&buf[..40]).unwrap();
    assert_eq!(UdtRepr::parse(&p, 40), Err(Error::Truncated));
    let p = UdtPacket::new_checked(&buf[..64]).unwrap();
    assert_eq!(
        UdtRepr::parse(&p, 64),
        Ok(r),
        "trailing bytes after a handshake are ignored"
    );
}
