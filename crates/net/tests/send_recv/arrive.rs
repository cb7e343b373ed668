//! What arrives: files and trees byte-exact over UDT and TCP, through loss,
//! duplication and reordering, with corrupted blocks fetched again, and with their
//! permissions and times.

use super::*;

/// Both sides' data channels drop 10 % of their datagrams, duplicate 5 % and
/// reorder 10 %: the files still arrive byte-exact.
/// A tree of `files` (path, length) sent over `channels` with 10 % loss, 5 %
/// duplication and 10 % reordering both ways (impairment seed `seed`), the sender's
/// options changed by `tweak`: it must arrive byte-exact.
fn through_impairment(
    seed: u64,
    files: &[(&str, usize)],
    channels: u16,
    tweak: impl FnOnce(&mut SendOptions),
) {
    let bad = longhaul_net::Impairment {
        loss: 0.10,
        duplicate: 0.05,
        reorder: 0.10,
        corrupt: 0.0,
        seed,
    };
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("t");
    for (i, (name, len)) in files.iter().enumerate() {
        write(&tree.join(name), *len, i as u8 + 1);
    }
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(RecvOptions {
        impair: Some(bad),
        ..recv_opts(dst.path(), "k")
    });
    let mut o = send_opts(vec![tree.clone()], addr, "k", channels);
    o.impair = Some(bad);
    tweak(&mut o);
    let (sent, got) = outcome(send(&o), h, "through impairment");
    assert_eq!((sent.files, got.files), (files.len(), files.len()));
    same_tree(&tree, &dst.path().join("t"));
}

#[test]
fn files_and_a_tree_arrive_byte_exact_over_udt_and_tcp_with_1_4_and_8_channels() {
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("tree");
    write(&tree.join("empty"), 0, 1);
    write(&tree.join("one"), 1, 2);
    write(&tree.join("odd.bin"), 1_234_567, 3);
    write(&tree.join("big.bin"), 6_000_001, 4);
    for i in 0..150 {
        write(
            &tree.join(format!("small/{}/f{i}", i % 7)),
            (i * 37) % 3000,
            i as u8,
        );
    }
    // Folders with no file arrive too (`same_tree` reads them on both sides).
    std::fs::create_dir_all(tree.join("hollow/deeper")).unwrap();
    let single = src.path().join("single.dat");
    write(&single, 2_000_000, 9);
    for (transport, channels) in [
        (Transport::Udt, 1),
        (Transport::Udt, 4),
        (Transport::Udt, 8),
        (Transport::Tcp, 1),
        (Transport::Tcp, 4),
        (Transport::Tcp, 8),
    ] {
        let dst = tempfile::tempdir().unwrap();
        let (addr, h) = receiver(recv_opts(dst.path(), "s3cret"));
        let sent = send(&SendOptions {
            transport,
            ..send_opts(vec![tree.clone(), single.clone()], addr, "s3cret", channels)
        });
        let (sent, got) = outcome(sent, h, &format!("{transport:?} with {channels} channels"));
        assert_eq!(sent.files, 155);
        assert_eq!(got.files, 155);
        assert_eq!(got.bytes, sent.bytes);
        same_tree(&tree, &dst.path().join("tree"));
        assert!(
            std::fs::read(&single).unwrap()
                == std::fs::read(dst.path().join("single.dat")).unwrap()
        );
    }
}

#[test]
fn a_tree_of_many_small_files_streams_without_a_descriptor_per_file() {
    // More files than the usual 1024-descriptor limit, which this process takes on
    // whatever the machine allows: both sides keep only the files they are working
    // on open, and one-block files get no journal.
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, 1024.min(hard), hard).unwrap();
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("many");
    let n = 3000;
    for i in 0..n {
        write(&tree.join(format!("d{}/f{i}", i % 30)), i % 700, i as u8);
    }
    for transport in [Transport::Tcp, Transport::Udt] {
        let dst = tempfile::tempdir().unwrap();
        let (addr, h) = receiver(recv_opts(dst.path(), "k"));
        let sent = send(&SendOptions {
            transport,
            ..send_opts(vec![tree.clone()], addr, "k", 4)
        })
        .expect("send");
        let got = h.join().unwrap().expect("receive");
        assert_eq!((sent.files, got.files), (n, n));
        for d in 0..30 {
            same_tree(
                &tree.join(format!("d{d}")),
                &dst.path().join(format!("many/d{d}")),
            );
        }
    }
}

#[test]
fn a_sparse_gibibyte_arrives_byte_exact_over_udt_and_tcp() {
    use std::io::{Seek, SeekFrom, Write};
    // 1 GiB, mostly holes, with data at the start, across a block boundary in the
    // middle, and in the last (short) block.
    let src = tempfile::tempdir().unwrap();
    let path = src.path().join("sparse.img");
    let mut f = std::fs::File::create(&path).unwrap();
    f.set_len((1 << 30) + 12_345).unwrap();
    for (at, seed) in [(0u64, 1u8), ((1 << 29) - 5000, 2), ((1 << 30) + 1000, 3)] {
        f.seek(SeekFrom::Start(at)).unwrap();
        let d: Vec<u8> = (0..10_000u32)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect();
        f.write_all(&d).unwrap();
    }
    drop(f);
    for transport in [Transport::Udt, Transport::Tcp] {
        let dst = tempfile::tempdir().unwrap();
        let (addr, h) = receiver(recv_opts(dst.path(), "k"));
        let sent = send(&SendOptions {
            transport,
            block_size: 4 << 20,
            ..send_opts(vec![path.clone()], addr, "k", 4)
        })
        .expect("send");
        let got = h.join().unwrap().expect("receive");
        assert_eq!(
            (sent.bytes, got.bytes),
            ((1 << 30) + 12_345, (1 << 30) + 12_345)
        );
        assert!(
            same_file(&path, &dst.path().join("sparse.img")),
            "{transport:?}"
        );
    }
}

#[test]
fn files_arrive_byte_exact_through_loss_duplication_and_reordering() {
    let files = [("a", 150_001), ("b/c", 77_777), ("empty", 0)];
    through_impairment(11, &files, 2, |o| o.block_size = 32 << 10);
}

/// Four channels running one BBR model (`send`'s default) move files byte-exact through
/// the same impairments: the members' shared model, its lock and its one clock
/// hold up under real threads.
#[test]
fn coupled_bbr_channels_move_files_byte_exact_through_loss() {
    through_impairment(12, &[("a", 1_500_001), ("b", 700_000)], 4, |o| {
        o.block_size = 64 << 10;
        o.udt.rate_control =
            RateControl::from_name("bbr-lh", o.udt.rate_control.udt_config()).unwrap();
        o.couple = true;
    });
}

/// The sender's datagrams have a payload byte flipped now and then, past UDP's
/// checksum (fault injection): the damaged blocks fail their hash on arrival, are
/// fetched again, and the files end byte-exact.
///
/// The flipped byte can also land in a block's header (about one run in a hundred):
/// the channel's framing is then lost, and the receiver ends the session with a
/// protocol error rather than guess, leaving the blocks it has for a resume. Or, far
/// more rarely, in a channel's ticket: the receiver turns that connection away and
/// waits on, the sender's channel breaks (nobody answers it) and the sender hangs
/// up. Such a run is checked for exactly that and the transfer made again, at most
/// twice.
#[test]
fn corrupted_blocks_are_detected_and_fetched_again() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("data.bin");
    write(&f, 3_000_000, 5);
    for attempt in 0..3 {
        let dst = tempfile::tempdir().unwrap();
        // In clear (`--no-encryption`), where the keyed block hashes are what
        // catches damage; encrypted, the packet is refused first (`attacks.rs`).
        let (addr, h) = receiver(RecvOptions {
            encrypt: false,
            ..recv_opts(dst.path(), "k")
        });
        let mut o = send_opts(vec![f.clone()], addr, "k", 3);
        o.encrypt = false;
        o.block_size = 64 << 10;
        o.impair = Some(longhaul_net::Impairment {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            // About 2 000 data packets: at 0.2 % none was damaged in 1 run of ~40
            // under load (a damaged copy of a packet already received is discarded);
            // at 1 % the expected 20 leave no room for that.
            corrupt: 0.01,
            seed: 5 + attempt,
        });
        let sent = send(&o);
        if sent.is_err() && attempt < 2 {
            let got = ended_within(h, T).unwrap_or_else(|| panic!("{sent:?}; the receiver hangs"));
            // What a receiver says when a channel's framing is damaged.
            let framing = [
                "a malformed block header",
                "not one of the offered files' blocks",
                "bytes; the session's are",
                "a data channel ended inside a block",
                "a data channel ended before its end marker",
                "this session's ticket",
            ];
            let header_hit = matches!(&got, Err(TransferError::Protocol(why))
                if framing.iter().any(|f| why.contains(f)));
            let ticket_hit = got.as_ref().is_err_and(|e| {
                e.to_string()
                    .contains("the peer closed the control channel")
            }) && sent
                .as_ref()
                .is_err_and(|e| e.to_string().contains("the connection broke"));
            assert!(header_hit || ticket_hit, "send {sent:?}, receive {got:?}");
            continue;
        }
        let (sent, got) = outcome(sent, h, "corrupted blocks");
        assert!(got.refetched > 0, "no block was damaged: raise the rate");
        assert_eq!(got.refetched, sent.resent);
        assert!(std::fs::read(&f).unwrap() == std::fs::read(dst.path().join("data.bin")).unwrap());
        return;
    }
}

/// A sender given the listing it showed its user sends exactly that listing: a
/// file that appears in the tree afterwards is not sent, and the bytes sent are
/// the total that was shown. (Before, `send` walked the trees again.)
#[test]
fn a_listing_given_is_what_is_sent() {
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("t");
    write(&tree.join("a"), 1000, 1);
    write(&tree.join("sub/b"), 2000, 2);
    let listing = longhaul_net::transfer::list_files(std::slice::from_ref(&tree)).unwrap();
    let shown: u64 = listing.files.iter().map(|f| f.size).sum();
    write(&tree.join("late"), 500, 3);
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let o = SendOptions {
        listing: Some(listing),
        ..send_opts(vec![tree.clone()], addr, "k", 2)
    };
    let (sent, got) = outcome(send(&o), h, "a listing given");
    assert_eq!((sent.files, got.files), (2, 2));
    assert!(sent.modified.is_empty(), "{:?}", sent.modified);
    assert_eq!((sent.bytes, shown), (3000, 3000));
    assert!(dst.path().join("t/sub/b").exists() && !dst.path().join("t/late").exists());
}

/// Files and folders arrive with their permission bits less the receiver's umask,
/// as `cp` and `scp` make them: a private file stays private, a script stays
/// executable. (Every file arrived `0o666` less the umask: a `0o600` file became
/// readable by everyone.) Setuid and the like are dropped; a folder's owner keeps
/// rwx, so the files can go in.
#[test]
fn permission_bits_travel_with_files_and_folders() {
    use std::os::unix::fs::PermissionsExt;
    let umask = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .map(|m| u32::from_str_radix(m.trim(), 8).unwrap())
        .unwrap();
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("t");
    let files = [
        ("secret", 0o600),
        ("script", 0o755),
        ("shared", 0o664),
        ("setuid", 0o4755),
        ("big", 0o640),
    ];
    for (name, mode) in files {
        write(
            &tree.join(name),
            if name == "big" { 700_000 } else { 100 },
            1,
        );
        std::fs::set_permissions(tree.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let folders = [("private", 0o700), ("open", 0o775), ("readonly", 0o555)];
    for (name, mode) in folders {
        std::fs::create_dir(tree.join(name)).unwrap();
        std::fs::set_permissions(tree.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let mut o = send_opts(vec![tree.clone()], addr, "k", 2);
    o.block_size = 256 << 10; // `big` is journaled: its part file is made at the offer
    outcome(send(&o), h, "modes");
    let mode = |name: &str| {
        std::fs::metadata(dst.path().join("t").join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    for (name, m) in files {
        assert_eq!(mode(name), m & 0o777 & !umask, "{name}");
    }
    for (name, m) in folders {
        assert_eq!(mode(name), (m | 0o700) & !umask, "{name}");
    }
}

/// Files arrive with their modification times, to the nanosecond, as `cp -p` and
/// `rsync -t` give them (before, each copy got the time it was put in place), so a
/// later size-and-time comparison of the two trees finds them the same.
#[test]
fn modification_times_travel_with_files() {
    use std::time::{Duration as D, SystemTime};
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("t");
    let times = [
        (
            "old",
            SystemTime::UNIX_EPOCH + D::new(1_000_000_000, 123_456_789),
        ),
        ("before-1970", SystemTime::UNIX_EPOCH - D::from_secs(86_400)),
        ("big", SystemTime::UNIX_EPOCH + D::new(1_700_000_000, 1)),
        ("empty", SystemTime::UNIX_EPOCH + D::from_secs(42)),
    ];
    for (name, t) in times {
        let len = match name {
            "big" => 700_000,
            "empty" => 0,
            _ => 100,
        };
        write(&tree.join(name), len, 2);
        std::fs::File::options()
            .write(true)
            .open(tree.join(name))
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let mut o = send_opts(vec![tree.clone()], addr, "k", 2);
    o.block_size = 256 << 10; // `big` is journaled: its part file is made at the offer
    outcome(send(&o), h, "times");
    for (name, t) in times {
        let got = std::fs::metadata(dst.path().join("t").join(name))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(got, t, "{name}");
    }
}

/// Memory to memory: a generated file goes through the whole protocol (blocks,
/// hashes, digest, confirmation) to a receiver that checks it and writes nothing,
/// over UDT and TCP; sent to a receiver that does write, with blocks that do not
/// fall on word boundaries, it arrives as exactly the generated bytes.
#[test]
fn a_synthetic_stream_runs_memory_to_memory() {
    for transport in [Transport::Udt, Transport::Tcp] {
        let dst = tempfile::tempdir().unwrap();
        let mut r = recv_opts(dst.path(), "k");
        r.discard = true;
        let (addr, h) = receiver(r);
        let mut o = send_opts(vec![], addr, "k", 4);
        o.transport = transport;
        o.synthetic = Some(64 << 20);
        o.block_size = 1 << 20;
        let sent = send(&o).expect("send");
        let got = h.join().unwrap().expect("receive");
        assert_eq!((sent.files, got.files), (1, 1));
        assert_eq!((sent.bytes, got.bytes), (64 << 20, 64 << 20));
        assert_eq!(sent.blocks, 64);
        assert_eq!(
            std::fs::read_dir(dst.path()).unwrap().count(),
            0,
            "{transport:?}"
        );
    }
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let mut o = send_opts(vec![], addr, "k", 3);
    o.synthetic = Some(1_000_001);
    o.block_size = 100_003;
    send(&o).expect("send");
    h.join().unwrap().expect("receive");
    let mut want = vec![0u8; 1_000_001];
    longhaul_net::transfer::synthetic_fill(&mut want, 0);
    assert!(std::fs::read(dst.path().join("synthetic")).unwrap() == want);
}

/// The sender's progress counts what the receiver confirms it stored, and ends at
/// the bytes sent.
#[test]
fn progress_counts_what_the_receiver_stored() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let f = src.path().join("f.bin");
    write(&f, 3_000_000, 9);
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let o = SendOptions {
        progress: Some(progress.clone()),
        ..send_opts(vec![f], addr, "k", 2)
    };
    let (sent, _) = outcome(send(&o), h, "progress");
    assert_eq!(
        progress.load(std::sync::atomic::Ordering::Relaxed),
        sent.bytes
    );
}

/// The last blocks go in pieces (issue 34's tail): of a file of ten 256 KiB
/// blocks sent on 4 channels, the last four are split into four 64 KiB pieces
/// each, which together cover those blocks exactly once, each sent by one of the
/// session's channels; the file arrives whole, over UDT and over TCP, with 2 %
/// loss on UDT. Which channels send them is timing: a piece goes to whichever
/// channel asks next, and on loopback one fast channel may ask for them all (a CI
/// run saw it), so how evenly the tail spreads is held by the emulator test
/// `bbr_lh_keeps_a_five_percent_loss_path_full`, not here.
#[test]
fn the_last_blocks_go_in_pieces_over_the_channels() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("f.bin");
    write(&f, 10 * (256 << 10), 3);
    for transport in [Transport::Udt, Transport::Tcp] {
        let dst = tempfile::tempdir().unwrap();
        let log = dst.path().join("log");
        std::fs::create_dir(dst.path().join("in")).unwrap();
        let (addr, h) = receiver(recv_opts(&dst.path().join("in"), "k"));
        let mut o = send_opts(vec![f.clone()], addr, "k", 4);
        o.transport = transport;
        o.block_log = Some(log.clone());
        if transport == Transport::Udt {
            o.impair = Some(longhaul_net::Impairment {
                loss: 0.02,
                duplicate: 0.0,
                reorder: 0.0,
                corrupt: 0.0,
                seed: 7,
            });
        }
        let (sent, _) = outcome(send(&o), h, "pieces");
        assert!(same_file(&f, &dst.path().join("in/f.bin")), "{transport:?}");
        assert_eq!((sent.blocks, sent.pieces), (10, 16), "{transport:?}");
        let mut pieces: Vec<(u64, u64, usize)> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("piece "))
            .map(|l| {
                let w: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
                (w[1], w[2], w[3] as usize)
            })
            .collect();
        pieces.sort_unstable();
        let mut at = 6 * (256 << 10);
        for &(offset, len, _) in &pieces {
            assert_eq!((offset, len), (at, 64 << 10), "{transport:?}: {pieces:?}");
            at += len;
        }
        assert_eq!(at, 10 * (256 << 10), "{transport:?}: {pieces:?}");
        assert!(
            pieces.iter().all(|p| p.2 < 4),
            "{transport:?}: a piece on a channel the session does not have: {pieces:?}"
        );
    }
}
