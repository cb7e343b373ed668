//! A data channel's stream of blocks: whatever bytes arrive, the deframer and the
//! block manager never panic, a header they accept re-emits to the same bytes, and
//! the manager never writes a byte twice or out of order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::transfer::{BlockRepr, Deframer, Reassembler, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    // The first bytes choose the file list (up to 4 files of up to 64 KiB).
    let Some((&n, rest)) = data.split_first() else { return };
    let files = usize::from(n % 4) + 1;
    if rest.len() < 2 * files {
        return;
    }
    let (sizes, stream) = rest.split_at(2 * files);
    let sizes: Vec<u64> = sizes
        .chunks(2)
        .map(|c| u64::from(u16::from_be_bytes([c[0], c[1]])))
        .collect();
    let mut r = Reassembler::new(sizes.iter().copied());
    let mut written = vec![0u64; files];
    let mut d = Deframer::new(1 << 16);
    let _ = d.push(stream, |b, bytes| {
        let mut h = [0u8; HEADER_LEN];
        b.emit(&mut h);
        let again = BlockRepr::parse(&longhaul_wire::block::BlockPacket::new_checked(&h[..]).unwrap());
        assert_eq!(again, Ok(b));
        let _ = r.insert(b, Some(bytes), |file, offset, d, len| {
            let w = &mut written[file as usize];
            assert_eq!(offset, *w, "in order, once");
            assert_eq!(d.map(<[u8]>::len), Some(len as usize));
            *w += u64::from(len);
        });
    });
    for (f, &s) in sizes.iter().enumerate() {
        assert!(written[f] <= s);
        assert_eq!(written[f], r.written(f as u32));
    }
});
