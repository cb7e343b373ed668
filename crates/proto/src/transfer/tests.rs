//! The block manager against real content: whatever the channel count, block size
//! and interleaving, every file comes out byte-exact and written strictly in order.

use super::*;
use proptest::prelude::*;

/// Deterministic file content: a byte pattern that differs per file and per offset,
/// so a block written at the wrong place or into the wrong file shows.
fn content(file: u32, size: u64) -> Vec<u8> {
    (0..size)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8 ^ (file as u8).wrapping_mul(31))
        .collect()
}

/// Stripes `sizes` over `channels` (block `k` of the whole list goes to the channel
/// `pick[k % pick.len()]` names, as a sender writing on whichever socket has room
/// would), then has the receiver read the channels in the order `reads` gives, in
/// pieces of the sizes it gives. Returns the files as written.
fn transfer(
    sizes: &[u64],
    block_size: u32,
    channels: usize,
    pick: &[usize],
    reads: &[(usize, usize)],
) -> (Vec<Vec<u8>>, Reassembler) {
    let files: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| content(i as u32, s))
        .collect();
    let mut streams = vec![Vec::new(); channels];
    let mut k = 0;
    for (i, &s) in sizes.iter().enumerate() {
        for b in FileBlocks::new(i as u32, s, block_size) {
            let c = pick[k % pick.len()] % channels;
            k += 1;
            let mut h = [0u8; HEADER_LEN];
            b.emit(&mut h);
            streams[c].extend_from_slice(&h);
            streams[c].extend_from_slice(&files[i][b.offset as usize..b.end() as usize]);
        }
    }
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); sizes.len()];
    let mut r = Reassembler::new(sizes.iter().copied());
    let mut deframers: Vec<Deframer> = (0..channels).map(|_| Deframer::new(block_size)).collect();
    let mut read = vec![0usize; channels];
    let mut step = |c: usize, n: usize, out: &mut Vec<Vec<u8>>, r: &mut Reassembler| {
        let end = (read[c] + n).min(streams[c].len());
        let piece = &streams[c][read[c]..end];
        read[c] = end;
        deframers[c]
            .push(piece, |b, data| {
                r.insert(b, Some(data), |file, offset, d, len| {
                    let o = &mut out[file as usize];
                    assert_eq!(offset, o.len() as u64, "file {file} written out of order");
                    let d = d.expect("content carried");
                    assert_eq!(d.len(), len as usize);
                    o.extend_from_slice(d);
                })
                .expect("every block fits");
            })
            .expect("well framed");
    };
    for &(c, n) in reads {
        step(c % channels, n, &mut out, &mut r);
    }
    // Then whatever is left, channel by channel.
    for c in 0..channels {
        step(c, usize::MAX / 2, &mut out, &mut r);
    }
    assert!(deframers.iter().all(Deframer::at_boundary));
    assert_eq!(r.held_bytes(), 0, "nothing held once every channel is read");
    (out, r)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn striped_files_are_reassembled_byte_exact_in_order(
        sizes in proptest::collection::vec(prop_oneof![Just(0u64), Just(1u64), 0u64..20_000], 1..5),
        block_size in 1u32..5000,
        channels in 1usize..=10,
        pick in proptest::collection::vec(0usize..10, 1..40),
        reads in proptest::collection::vec((0usize..10, 1usize..7000), 0..200),
    ) {
        let (out, r) = transfer(&sizes, block_size, channels, &pick, &reads);
        prop_assert!(r.is_done());
        for (i, &s) in sizes.iter().enumerate() {
            prop_assert_eq!(r.written(i as u32), s);
            prop_assert!(out[i] == content(i as u32, s), "file {} differs", i);
        }
    }
}

#[test]
fn a_large_striped_file_on_every_channel_count() {
    // One 3 MB file, 64 KiB blocks, 1 to 10 channels, read round robin in pieces
    // of about a packet, later channels a little faster (so they run ahead).
    let size = 3_000_001;
    for channels in 1..=10 {
        let pick: Vec<usize> = (0..channels).collect();
        let reads: Vec<(usize, usize)> = (0..4000)
            .map(|i| (i % channels, 1000 + 300 * (i % channels)))
            .collect();
        let (out, r) = transfer(&[size], 65536, channels, &pick, &reads);
        assert!(r.is_done());
        assert!(out[0] == content(0, size), "{channels} channels");
        if channels > 1 {
            assert!(
                r.peak_held_bytes() > 0,
                "striping over {channels} channels reorders"
            );
        } else {
            assert_eq!(r.peak_held_bytes(), 0, "one channel is in order");
        }
    }
}

#[test]
fn bad_blocks_are_refused_and_change_nothing() {
    let mut r = Reassembler::new([100, 50]);
    let b = |file, offset, len| BlockRepr { file, offset, len };
    let none = |_: u32, _: u64, _: Option<&[u8]>, _: u32| panic!("nothing is written");
    assert_eq!(
        r.insert(b(2, 0, 10), None, none),
        Err(BlockError::UnknownFile(2))
    );
    assert_eq!(
        r.insert(b(1, 45, 10), None, none),
        Err(BlockError::PastEnd(b(1, 45, 10)))
    );
    assert_eq!(
        r.insert(b(0, 0, 10), Some(&[0; 9]), none),
        Err(BlockError::Length(b(0, 0, 10), 9))
    );
    r.insert(b(0, 20, 10), None, none).unwrap();
    assert_eq!(
        r.insert(b(0, 25, 10), None, none),
        Err(BlockError::Overlap(b(0, 25, 10)))
    );
    assert_eq!(
        r.insert(b(0, 15, 10), None, none),
        Err(BlockError::Overlap(b(0, 15, 10)))
    );
    assert_eq!(r.held_bytes(), 10);
    let mut runs = vec![];
    let p = r
        .insert(b(0, 0, 20), None, |f, o, _, l| runs.push((f, o, l)))
        .unwrap();
    assert_eq!(runs, [(0, 0, 20), (0, 20, 10)]);
    assert_eq!(
        p,
        Progress {
            written: 30,
            file_done: false
        }
    );
    assert_eq!(
        r.insert(b(0, 10, 5), None, none),
        Err(BlockError::Overlap(b(0, 10, 5)))
    );
    assert_eq!(r.held_bytes(), 0);
    assert_eq!(r.peak_held_bytes(), 10);
}

#[test]
fn a_bad_header_is_a_framing_error() {
    let mut d = Deframer::new(1 << 20);
    let zero_len = [0u8; HEADER_LEN];
    assert_eq!(
        d.push(&zero_len, |_, _| panic!("no block")),
        Err(FramingError)
    );
    // A header claiming more than the session's block size is refused before
    // anything is buffered for it (a fuzzer's 3 GB claim once ran out of memory).
    let mut d = Deframer::new(1 << 20);
    let mut h = [0u8; HEADER_LEN];
    BlockRepr {
        file: 0,
        offset: 0,
        len: (1 << 20) + 1,
    }
    .emit(&mut h);
    assert_eq!(d.push(&h, |_, _| panic!("no block")), Err(FramingError));
    BlockRepr {
        file: 0,
        offset: 0,
        len: 1 << 20,
    }
    .emit(&mut h);
    let mut d = Deframer::new(1 << 20);
    assert_eq!(d.push(&h, |_, _| panic!("not yet whole")), Ok(()));
}
