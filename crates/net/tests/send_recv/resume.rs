//! Interrupted transfers resume from the journal, and a tree sent again sends only
//! what the receiver lacks or what differs.

use super::*;

/// A session that dies half-way (the sender stops after 20 of 46 blocks and drops
/// the connection, as a crash would) leaves the part file and its journal; the next
/// session sends only the blocks the journal lacks, and the file ends byte-exact.
#[test]
fn an_interrupted_transfer_resumes_from_the_journal() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("data.bin");
    write(&f, 3_000_000, 7);
    let dst = tempfile::tempdir().unwrap();
    let blocks = 3_000_000u64.div_ceil(64 << 10);
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let mut o = send_opts(vec![f.clone()], addr, "k", 2);
    o.block_size = 64 << 10;
    o.stop_after_blocks = Some(20);
    assert!(send(&o).is_err());
    assert!(h.join().unwrap().is_err());
    assert!(dst.path().join(".data.bin.longhaul-part").exists());
    assert!(!dst.path().join("data.bin").exists());
    // The receiver's session ended when the control channel did; its channel
    // threads may still be writing the last blocks they took: give them a moment.
    let journal_path = dst.path().join(".data.bin.longhaul-journal");
    let mut journal = String::new();
    for _ in 0..100 {
        journal = std::fs::read_to_string(&journal_path).unwrap();
        if journal.lines().count() > 20 {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let kept = journal.lines().count() as u64 - 1;
    // The channels had delivered the 20 blocks they were given before the sender
    // left (it closes them cleanly); a real crash loses what was in flight.
    assert_eq!(kept, 20, "{journal}");
    // What a crash (or a power cut before the page cache reached the disk) can
    // leave: a journaled block whose bytes are not what the journal says, and a
    // torn last line. The resume must re-check the block and send it again.
    let part = dst.path().join(".data.bin.longhaul-part");
    let first: u64 = journal
        .lines()
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    {
        use std::os::unix::fs::FileExt;
        let p = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&part)
            .unwrap();
        let mut byte = [0u8];
        p.read_exact_at(&mut byte, first + 1000).unwrap();
        p.write_all_at(&[byte[0] ^ 1], first + 1000).unwrap();
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(&journal_path)
        .unwrap()
        .write_all(b"19660")
        .unwrap();

    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    o.dest = addr;
    o.stop_after_blocks = None;
    let sent = send(&o).expect("resume");
    h.join().unwrap().expect("receive");
    assert_eq!(sent.skipped, kept - 1, "the damaged block is not trusted");
    assert_eq!(sent.blocks, blocks - kept + 1);
    assert!(std::fs::read(&f).unwrap() == std::fs::read(dst.path().join("data.bin")).unwrap());
    assert!(!dst.path().join(".data.bin.longhaul-journal").exists());
}

/// A resume after the file changed at the sender: the blocks the receiver kept that
/// no longer match are sent again, the others are not, and the file arrives as it
/// is now. Before, the sender skipped every kept block, the digests differed and
/// the file failed (its partial copy deleted, so a third run started over). Each
/// case runs a few times: a kept block's new copy and the digest that announces
/// it travel on different connections, in either order.
#[test]
fn a_resume_sends_again_the_kept_blocks_that_changed_since() {
    const BLOCK: usize = 64 << 10;
    let size = 5 * BLOCK - 1000;
    // Expected: blocks sent, kept blocks not sent, kept blocks sent again.
    type Sent = (u64, u64, u64);
    // Blocks the receiver kept, blocks changed at the sender since, and what is sent.
    let cases: &[(&[usize], &[usize], Sent)] = &[
        // All kept (the file waits only for its digest), two changed.
        (&[0, 1, 2, 3, 4], &[0, 3], (2, 3, 2)),
        // Some kept: one of them changed, and one block not kept.
        (&[1, 2], &[2, 4], (4, 1, 1)),
        // All kept, the last (short) block changed.
        (&[0, 1, 2, 3, 4], &[4], (1, 4, 1)),
        // Nothing changed.
        (&[0, 1, 2, 3, 4], &[], (0, 5, 0)),
    ];
    for (round, &(kept, changed, expected)) in
        cases.iter().cycle().take(3 * cases.len()).enumerate()
    {
        let src = tempfile::tempdir().unwrap();
        let f = src.path().join("data.bin");
        write(&f, size, 3);
        let old = std::fs::read(&f).unwrap();
        let mut new = old.clone();
        for &b in changed {
            new[b * BLOCK + 7] ^= 0x55;
        }
        std::fs::write(&f, &new).unwrap();
        // What an interrupted session left: the part file with the old bytes of the
        // kept blocks (and nothing elsewhere), and their journal.
        let dst = tempfile::tempdir().unwrap();
        let mut part = vec![0u8; size];
        let mut journal = format!("longhaul-journal 1 {size} {BLOCK}\n");
        for &b in kept {
            let r = b * BLOCK..((b + 1) * BLOCK).min(size);
            part[r.clone()].copy_from_slice(&old[r.clone()]);
            // Journals keep keyed hashes (the key comes from the token).
            let key = longhaul_net::secure::block_key(&strong("k"));
            let hash = blake3::keyed_hash(&key, &old[r.clone()]).to_hex();
            journal += &format!("{} {hash}\n", r.start);
        }
        std::fs::write(dst.path().join(".data.bin.longhaul-part"), part).unwrap();
        std::fs::write(dst.path().join(".data.bin.longhaul-journal"), journal).unwrap();

        let (addr, h) = receiver(recv_opts(dst.path(), "k"));
        let mut o = send_opts(vec![f.clone()], addr, "k", 2);
        o.block_size = BLOCK as u32;
        let (sent, got) = outcome(send(&o), h, "a changed resume");
        let case = format!("round {round}: kept {kept:?}, changed {changed:?}");
        assert_eq!(
            (sent.blocks, sent.skipped, sent.changed),
            expected,
            "{case}"
        );
        assert_eq!((sent.files, got.files), (1, 1), "{case}");
        assert!(
            std::fs::read(dst.path().join("data.bin")).unwrap() == new,
            "{case}"
        );
        let left: Vec<_> = std::fs::read_dir(dst.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{case}: no part file or journal stays");
    }
}

/// A tree sent again to a receiver that holds part of it sends only what the
/// receiver lacks: the files there already (the same, by their blocks' hashes) are
/// confirmed as they are, without a byte sent or written. A file there of the same
/// size but other contents is neither sent nor replaced, and both ends say so.
/// (Before, any file there refused the whole session, so a tree interrupted after
/// its first file could be finished only with `recv --overwrite`, which sent it
/// all again.)
#[test]
fn a_tree_sent_again_sends_only_what_the_receiver_lacks() {
    const BLOCK: u32 = 64 << 10;
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("tree");
    // Empty, one block, several blocks with a short last one, exactly two blocks.
    let sizes = [
        ("empty", 0),
        ("one", 1000),
        ("multi", 300_000),
        ("two", 131_072),
    ];
    for (i, (name, len)) in sizes.iter().enumerate() {
        write(&tree.join(name), *len, i as u8);
    }
    let dst = tempfile::tempdir().unwrap();
    let run = |o: SendOptions| {
        let (addr, h) = receiver(recv_opts(dst.path(), "k"));
        let sent = send(&SendOptions { dest: addr, ..o });
        (sent, h.join().unwrap())
    };
    let opts = || SendOptions {
        block_size: BLOCK,
        ..send_opts(vec![tree.clone()], "127.0.0.1:9".parse().unwrap(), "k", 2)
    };
    let (sent, got) = run(opts());
    let (sent, got) = (sent.expect("first send"), got.expect("first receive"));
    assert_eq!(
        (sent.files, sent.present, got.files, got.present),
        (4, 0, 4, 0)
    );

    // The receiver loses one file; the sender gains one.
    std::fs::remove_file(dst.path().join("tree/multi")).unwrap();
    write(&tree.join("new"), 70_000, 9);
    let (sent, got) = run(opts());
    let (sent, got) = (sent.expect("second send"), got.expect("second receive"));
    assert_eq!(
        (sent.files, sent.present, got.files, got.present),
        (2, 3, 2, 3),
        "multi and new are sent; empty, one and two are there"
    );
    assert_eq!(sent.blocks, 5 + 2, "only the blocks of multi and new");
    assert_eq!((sent.skipped, sent.changed), (0, 0));
    assert_eq!(got.bytes, 300_000 + 70_000);
    same_tree(&tree, &dst.path().join("tree"));

    // A file there of the same size with other contents (an edit on either side):
    // left as it is, and reported by both ends; the rest is confirmed.
    let theirs = dst.path().join("tree/multi");
    let mut other = std::fs::read(&theirs).unwrap();
    other[200_000] ^= 1;
    std::fs::write(&theirs, &other).unwrap();
    let (sent, got) = run(opts());
    let sent = sent.expect("the session itself succeeds");
    assert_eq!(sent.differ, ["tree/multi"]);
    assert_eq!((sent.files, sent.present, sent.blocks), (0, 4, 0));
    let e = got
        .expect_err("the receiver reports the file it kept")
        .to_string();
    assert!(e.contains("other contents") && e.contains("multi"), "{e}");
    assert_eq!(std::fs::read(&theirs).unwrap(), other, "not replaced");
    let stray: Vec<_> = std::fs::read_dir(dst.path().join("tree"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(stray.is_empty(), "no part file or journal: {stray:?}");
}

/// With `recv --overwrite`, a tree sent again replaces only the files that differ:
/// one held with the same size and other contents is sent whole after its digest
/// shows it (with and without pipelining, where the lane would otherwise wait for
/// that very file), one of another size is sent as before, the same ones are not
/// sent, and the replaced files arrive byte-exact. (Before, `--overwrite` sent
/// every file again.)
#[test]
fn overwrite_replaces_only_the_files_that_differ() {
    const BLOCK: u32 = 64 << 10;
    for pipelining in [true, false] {
        let src = tempfile::tempdir().unwrap();
        let tree = src.path().join("tree");
        let sizes = [
            ("same", 200_000),
            ("edited", 300_000),
            ("grown", 70_000),
            ("new", 1000),
        ];
        for (i, (name, len)) in sizes.iter().enumerate() {
            write(&tree.join(name), *len, i as u8);
        }
        let dst = tempfile::tempdir().unwrap();
        let theirs = dst.path().join("tree");
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::copy(tree.join("same"), theirs.join("same")).unwrap();
        let mut edited = std::fs::read(tree.join("edited")).unwrap();
        edited[299_999] ^= 0xff; // the last, short block
        std::fs::write(theirs.join("edited"), &edited).unwrap();
        std::fs::write(theirs.join("grown"), b"shorter").unwrap();

        let (addr, h) = receiver(RecvOptions {
            overwrite: true,
            ..recv_opts(dst.path(), "k")
        });
        let o = SendOptions {
            block_size: BLOCK,
            pipelining,
            ..send_opts(vec![tree.clone()], addr, "k", 2)
        };
        let (sent, got) = outcome(send(&o), h, "an overwriting run");
        let case = format!("pipelining {pipelining}");
        assert_eq!(
            (sent.files, sent.present, sent.replaced),
            (3, 1, 1),
            "{case}"
        );
        assert!(sent.differ.is_empty(), "{case}");
        assert_eq!(
            sent.blocks,
            5 + 2 + 1,
            "{case}: edited, grown and new, whole"
        );
        assert_eq!((got.files, got.present, got.replaced), (3, 1, 2), "{case}");
        same_tree(&tree, &theirs);
    }
}

/// A tree whose session broke off after some files were confirmed, with one in
/// part: sent again, the confirmed files are not sent, the part resumes from its
/// journal, and the rest come whole.
#[test]
fn an_interrupted_tree_finishes_on_the_next_run() {
    const BLOCK: u32 = 64 << 10;
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("tree");
    for i in 0..6 {
        write(
            &tree.join(format!("f{i}")),
            5 * BLOCK as usize - 100,
            i as u8,
        );
    }
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    // One channel, files in order: blocks 0-4 are f0, 5-9 f1, 10-12 the start of f2.
    let mut o = SendOptions {
        block_size: BLOCK,
        stop_after_blocks: Some(13),
        ..send_opts(vec![tree.clone()], addr, "k", 1)
    };
    assert!(send(&o).is_err());
    assert!(h.join().unwrap().is_err());
    // The receiver's channel may still be writing what it took: wait for f2's part.
    let journal = dst.path().join("tree/.f2.longhaul-journal");
    for _ in 0..100 {
        if std::fs::read_to_string(&journal).is_ok_and(|j| j.lines().count() == 4) {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        dst.path().join("tree/f1").exists(),
        "f0 and f1 were confirmed"
    );

    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    o.dest = addr;
    o.stop_after_blocks = None;
    let (sent, got) = outcome(send(&o), h, "the second run");
    assert_eq!((sent.files, sent.present), (4, 2));
    assert_eq!(sent.skipped, 3, "f2's three journaled blocks");
    assert_eq!(sent.blocks, 2 + 3 * 5);
    assert_eq!((got.files, got.present), (4, 2));
    same_tree(&tree, &dst.path().join("tree"));
}

/// One session per directory: a second receiver into a directory a session holds
/// is refused at once, without listening, and one started after the session ends
/// serves. (Two sessions receiving one name shared a part file and journal, each
/// checking only its own blocks.)
#[test]
fn a_directory_takes_one_session_at_a_time() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let name = format!("data{round}.bin");
        let f = src.path().join(&name);
        write(&f, 300_000, round);
        let (addr, h) = receiver(recv_opts(dst.path(), "k"));
        let second = receive(&recv_opts(dst.path(), "k"), |a| {
            panic!("a second session listened on {a}")
        });
        assert!(
            matches!(&second, Err(TransferError::DirInUse(_))),
            "round {round}: {second:?}"
        );
        assert!(second
            .unwrap_err()
            .to_string()
            .contains("another `longhaul recv`"));
        // Discarding writes nothing, so it takes no lock: it serves a session
        // while the directory is held.
        let discard = RecvOptions {
            discard: true,
            listen: "127.0.0.1:0".parse().unwrap(),
            ..recv_opts(dst.path(), "k")
        };
        let (discard_addr, discarding) = receiver(discard);
        let synthetic = SendOptions {
            synthetic: Some(1000),
            ..send_opts(vec![], discard_addr, "k", 1)
        };
        outcome(send(&synthetic), discarding, "a discarding session");
        let mut o = send_opts(vec![f.clone()], addr, "k", 2);
        o.block_size = 64 << 10;
        outcome(send(&o), h, "the first session");
        assert!(same_file(&f, &dst.path().join(&name)), "round {round}");
    }
}
