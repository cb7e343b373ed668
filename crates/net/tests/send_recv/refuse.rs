//! What is refused, with nothing written: wrong tokens, tickets and names, colliding
//! or partial files, offers over the free space or the memory cap.

use super::*;

/// A hand-written sender: authenticates, then offers `name` of 10 bytes.
fn offer(addr: SocketAddr, token: &str, name: &str) -> Msg {
    offer_sized(addr, token, name, 10)
}

/// A hand-written sender: authenticates, then offers `name` of `size` bytes.
fn offer_sized(addr: SocketAddr, token: &str, name: &str, size: u64) -> Msg {
    open_session(addr, token, &[(name, size)], Transport::Udt).0
}

/// A hand-written sender: authenticates, then offers `files` (names and sizes),
/// keeping the control connection: the reply and the connection.
fn open_session(
    addr: SocketAddr,
    token: &str,
    files: &[(&str, u64)],
    transport: Transport,
) -> (Msg, RawSender) {
    offer_with_dirs(addr, token, files, &[], transport)
}

/// [`open_session`], offering the folders `dirs` too.
fn offer_with_dirs(
    addr: SocketAddr,
    token: &str,
    files: &[(&str, u64)],
    dirs: &[&str],
    transport: Transport,
) -> (Msg, RawSender) {
    let mut raw = RawSender::connect(addr, &strong(token), true, T).unwrap();
    let files = files
        .iter()
        .map(|&(name, size)| longhaul_net::transfer::FileEntry {
            path: name.into(),
            size,
            mode: None,
            mtime: None,
        })
        .collect();
    raw.send(&Msg::Offer {
        files,
        dirs: dirs
            .iter()
            .map(|d| longhaul_net::transfer::DirEntry {
                path: d.to_string(),
                mode: None,
            })
            .collect(),
        channels: 1,
        block_size: 1 << 20,
        transport,
    })
    .unwrap();
    (raw.recv().unwrap(), raw)
}

#[test]
fn a_wrong_token_is_refused_and_nothing_is_written() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("x.dat");
    write(&f, 10_000, 1);
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "right"));
    let e = send(&send_opts(vec![f.clone()], addr, "wrong", 2)).unwrap_err();
    assert!(e.to_string().contains("authentication"), "{e}");
    assert!(matches!(e, TransferError::Handshake(_)), "{e:?}");
    assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
    // The receiver turned the stranger away and serves on: the real sender gets in.
    assert!(!h.is_finished(), "a failed handshake ended the receiver");
    let (sent, got) = outcome(send(&send_opts(vec![f], addr, "right", 2)), h, "right");
    assert_eq!((sent.files, got.files), (1, 1));
}

/// A receiver whose session fails after it accepted the offer (here the sender's
/// digest is not hex) tells the sender why and closes the control channel. Before,
/// it returned and left the channel open (its control reader thread still held it),
/// and a sender waiting for verdicts waited forever.
#[test]
fn a_failing_receiver_says_why_and_closes_the_control_channel() {
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "s3cret"));
    let (reply, mut raw) = open_session(addr, "s3cret", &[("x.dat", 10)], Transport::Udt);
    assert!(matches!(reply, Msg::Accept { .. }), "{reply:?}");
    raw.send(&Msg::Digest {
        file: 0,
        digest: "not hex".into(),
        changed: vec![],
        replaced: false,
    })
    .unwrap();
    let reply = raw.recv().expect("the receiver says why");
    let Msg::Reject { reason } = reply else {
        panic!("{reply:?}")
    };
    assert!(reason.contains("bad digest"), "{reason}");
    let e = raw.recv().expect_err("then closes the channel");
    assert!(e.to_string().contains("closed"), "{e}");
    let e = h.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("bad digest"), "{e}");
}

/// A connection to a data port that does not open with the session's ticket (here
/// a stranger's well-formed block, whose own hash checks out) is refused: nothing
/// of it is written. (Once, such a block was stored, and with a digest to match it
/// would have been put in place.) The port then waits on for the sender, and when
/// none comes within the timeout the session ends saying why.
#[test]
fn a_data_channel_without_the_sessions_ticket_is_refused() {
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(RecvOptions {
        timeout: Duration::from_secs(3),
        ..recv_opts(dst.path(), "s3cret")
    });
    let (reply, mut raw) = open_session(addr, "s3cret", &[("x.dat", 10)], Transport::Tcp);
    let Msg::Accept { ports, .. } = reply else {
        panic!("{reply:?}")
    };
    let data = [7u8; 10];
    let hash = *blake3::hash(&data).as_bytes();
    raw.send(&Msg::Digest {
        file: 0,
        digest: blake3::hash(&hash).to_hex().to_string(),
        changed: vec![],
        replaced: false,
    })
    .unwrap();
    let mut stranger = TcpStream::connect((addr.ip(), ports[0])).unwrap();
    let mut hdr = [0u8; longhaul_proto::transfer::HEADER_LEN];
    longhaul_proto::transfer::BlockRepr {
        file: 0,
        offset: 0,
        len: 10,
    }
    .emit(&mut hdr);
    // Written whole or in part before the receiver hangs up: either way, refused.
    let _ = [&hdr[..], &data, &hash]
        .iter()
        .try_for_each(|b| stranger.write_all(b));
    let e = ended_within(h, T)
        .expect("the receiver ends")
        .expect_err("the session fails");
    assert!(
        e.to_string().contains("this session's ticket") && e.to_string().contains("closed unread"),
        "{e}"
    );
    let left: Vec<_> = std::fs::read_dir(dst.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        !dst.path().join("x.dat").exists() && !dst.path().join(".x.dat.longhaul-part").exists(),
        "nothing of the stranger's is written: {left:?}"
    );
}

#[test]
fn unsafe_names_and_existing_files_are_refused_with_nothing_written() {
    for name in ["../escape", "/etc/passwd", "a/../../b", "sub/../x"] {
        let dst = tempfile::tempdir().unwrap();
        let (addr, h) = receiver(recv_opts(dst.path(), "t"));
        let reply = offer(addr, "t", name);
        assert!(matches!(reply, Msg::Reject { .. }), "{name}: {reply:?}");
        assert!(h.join().unwrap().is_err());
        assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0, "{name}");
    }
    let dst = tempfile::tempdir().unwrap();
    std::fs::write(dst.path().join("there"), b"keep me").unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "t"));
    let reply = offer(addr, "t", "there");
    assert!(
        matches!(&reply, Msg::Reject { reason } if reason.contains("`longhaul recv --overwrite`")),
        "{reply:?}"
    );
    assert!(h.join().unwrap().is_err());
    assert_eq!(std::fs::read(dst.path().join("there")).unwrap(), b"keep me");
    // A folder where a file is offered is refused even with `--overwrite`, before
    // any byte is sent: the rename at the end could not replace it.
    std::fs::create_dir(dst.path().join("folder")).unwrap();
    let (addr, h) = receiver(RecvOptions {
        overwrite: true,
        ..recv_opts(dst.path(), "t")
    });
    let reply = offer(addr, "t", "folder");
    assert!(
        matches!(&reply, Msg::Reject { reason } if reason.contains("is a folder on the receiver")),
        "{reply:?}"
    );
    assert!(h.join().unwrap().is_err());
    assert!(dst.path().join("folder").is_dir());
}

/// Offers whose files would land on each other are refused before anything is
/// written: a file with the form of another's part file (taken, the one renamed
/// over the other while both were "verified"), a file where another needs a
/// folder, and names in the way of the receiver's own files.
#[test]
fn offers_whose_files_would_collide_are_refused_with_nothing_written() {
    type Offered<'a> = (&'a [(&'a str, u64)], &'a [&'a str]);
    let cases: &[(Offered, &str)] = &[
        (
            (&[("x", 10 << 20), (".x.longhaul-part", 1000)], &[]),
            "partial files",
        ),
        ((&[("t/.x.longhaul-journal", 10)], &[]), "partial files"),
        (
            (&[("d", 10), ("d/x", 10)], &[]),
            "which is also offered as a file",
        ),
        (
            (&[("d", 10), ("d-1", 10), ("d/e/x", 10)], &[]),
            "which is also offered as a file",
        ),
        ((&[("here/x", 10)], &[]), "goes through a file"),
        ((&[("dir", 10)], &[]), "is a folder on the receiver"),
        // Folders: one where a file is offered, inside one, or on one here.
        ((&[("d", 10)], &["d"]), "as a file and as a folder"),
        ((&[("d", 10)], &["d/e"]), "which is also offered as a file"),
        ((&[], &["here"]), "is a file on the receiver"),
        ((&[], &["../up"]), "`..`"),
    ];
    for ((files, dirs), why) in cases {
        let dst = tempfile::tempdir().unwrap();
        std::fs::write(dst.path().join("here"), b"keep").unwrap();
        std::fs::create_dir(dst.path().join("dir")).unwrap();
        let (addr, h) = receiver(recv_opts(dst.path(), "t"));
        let (reply, _raw) = offer_with_dirs(addr, "t", files, dirs, Transport::Udt);
        assert!(
            matches!(&reply, Msg::Reject { reason } if reason.contains(why)),
            "{files:?}: {reply:?}"
        );
        assert!(h.join().unwrap().is_err());
        let mut left: Vec<_> = std::fs::read_dir(dst.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["dir", "here"], "{files:?}");
        assert_eq!(std::fs::read(dst.path().join("here")).unwrap(), b"keep");
    }
}

/// A tree holding a receiver's partial file beside the file it belongs to (a tree
/// received in part, sent on): the partial file is not sent, and the file arrives.
/// Before, both were offered, the receiver took the one as the other's part file,
/// and the sender reported both verified while one was lost.
#[test]
fn a_partial_file_in_a_tree_is_not_sent() {
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("t");
    write(&tree.join("x"), 10 << 20, 1);
    write(&tree.join(".x.longhaul-part"), 1000, 2);
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let (sent, got) = outcome(
        send(&send_opts(vec![tree.clone()], addr, "k", 2)),
        h,
        "partial",
    );
    assert_eq!((sent.files, got.files), (1, 1));
    assert!(same_file(&tree.join("x"), &dst.path().join("t/x")));
    let mut left: Vec<_> = std::fs::read_dir(dst.path().join("t"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["x"]);
}

/// An offer larger than the free space is refused before anything is written.
#[test]
fn an_offer_larger_than_the_free_space_is_refused() {
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "t"));
    let reply = offer_sized(addr, "t", "huge.bin", 1 << 60);
    assert!(
        matches!(&reply, Msg::Reject { reason } if reason.contains("free")),
        "{reply:?}"
    );
    assert!(h.join().unwrap().is_err());
    assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
}

/// A session whose buffers would pass the memory cap is refused before any
/// channel opens.
#[test]
fn a_session_over_the_memory_cap_is_refused() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("x");
    write(&f, 1000, 1);
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "t"));
    // 200 UDT channels x (2 x 256 KiB + 8192 packets of 1500 bytes) is 2.4 GiB.
    let e = send(&send_opts(vec![f], addr, "t", 200)).unwrap_err();
    assert!(e.to_string().contains("MiB of buffers"), "{e}");
    assert!(h.join().unwrap().is_err());
    assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
    // The cap is the receiver's to set: 4 channels (4 x 12.8 MB) pass 64 MiB, 8 do not.
    for (channels, fits) in [(8, false), (4, true)] {
        let mut r = recv_opts(dst.path(), "t");
        r.memory_cap = 64 << 20;
        let (addr, h) = receiver(r);
        let mut o = send_opts(vec![src.path().join("x")], addr, "t", channels);
        o.block_size = 1 << 20;
        assert_eq!(send(&o).is_ok(), fits, "{channels} channels");
        assert_eq!(h.join().unwrap().is_ok(), fits);
    }
    assert!(
        std::fs::read(dst.path().join("x")).unwrap()
            == std::fs::read(src.path().join("x")).unwrap()
    );
}

/// A file written to while its blocks are read is named in the summary (its copy
/// is each block as read, which may mix two versions); one left alone is not.
#[test]
fn a_file_written_to_while_sent_is_reported() {
    let src = tempfile::tempdir().unwrap();
    let (busy, quiet) = (src.path().join("busy.bin"), src.path().join("quiet.bin"));
    write(&busy, 4_000_000, 1);
    write(&quiet, 100_000, 2);
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let mut o = send_opts(vec![busy.clone(), quiet.clone()], addr, "k", 1);
    // About two seconds at 16 Mb/s, and a send buffer of 64 packets, so that the
    // file is read as it goes (not all into the buffer at once): the write below
    // lands while its blocks are read.
    o.udt.max_bw_bps = Some(16_000_000);
    o.udt.snd_buf_pkts = 64;
    o.transport = Transport::Udt;
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    o.progress = Some(progress.clone());
    let sending = thread::spawn(move || send(&o));
    // Once the first block is on its way (so the file has been taken up), or 10 s.
    for _ in 0..2000 {
        if progress.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            break;
        }
        thread::sleep(Duration::from_millis(5));
    }
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&busy).unwrap();
        f.write_all_at(b"new", 3_900_000).unwrap();
    }
    let (sent, _) = outcome(sending.join().unwrap(), h, "a busy file");
    assert_eq!(sent.modified, ["busy.bin"]);
}

/// A name with control characters in it is refused with the name escaped, so a
/// sender cannot write to the receiver's terminal (or to the sender's, relayed).
#[test]
fn refused_names_are_shown_escaped() {
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "t"));
    let reply = offer(addr, "t", "../\u{1b}[2Jgone\nline");
    let Msg::Reject { reason } = reply else {
        panic!("{reply:?}")
    };
    assert!(
        !reason.contains('\u{1b}') && !reason.contains('\n'),
        "{reason:?}"
    );
    assert!(reason.contains("\\u{1b}[2Jgone\\nline"), "{reason}");
    let e = h.join().unwrap().unwrap_err().to_string();
    assert!(!e.contains('\u{1b}') && !e.contains('\n'), "{e:?}");
}
