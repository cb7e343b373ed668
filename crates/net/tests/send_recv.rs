//! `send`/`receive` over loopback: files and trees arrive byte-exact over 1 and 4
//! UDT channels; a wrong token, an unsafe name or an existing file is refused with
//! nothing written.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use longhaul_net::transfer::{
    receive, send, Msg, RecvOptions, SendOptions, TransferError, Transport,
};
use longhaul_proto::udt::UdtConnConfig;

const T: Duration = Duration::from_secs(30);

fn write(p: &Path, len: usize, seed: u8) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let data: Vec<u8> = (0..len)
        .map(|i| ((i as u64).wrapping_mul(0x9e37_79b9) >> 7) as u8 ^ seed)
        .collect();
    std::fs::write(p, data).unwrap();
}

fn recv_opts(dir: &Path, token: &str) -> RecvOptions {
    RecvOptions {
        dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        token: token.into(),
        overwrite: false,
        udt: UdtConnConfig {
            nak_report: longhaul_proto::udt::NakReport::Periodic,
            ..UdtConnConfig::default()
        },
        timeout: T,
        impair: None,
    }
}

/// Starts a receiver; returns its address and its outcome.
fn receiver(
    opts: RecvOptions,
) -> (
    SocketAddr,
    thread::JoinHandle<Result<longhaul_net::transfer::RecvSummary, TransferError>>,
) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || receive(&opts, |a| tx.send(a).unwrap()));
    (rx.recv_timeout(T).unwrap(), h)
}

fn send_opts(
    paths: Vec<std::path::PathBuf>,
    dest: SocketAddr,
    token: &str,
    channels: u16,
) -> SendOptions {
    SendOptions {
        paths,
        dest,
        token: token.into(),
        channels,
        transport: Transport::Udt,
        block_size: 256 << 10,
        udt: UdtConnConfig::default(),
        timeout: T,
        impair: None,
        progress: None,
        stop_after_blocks: None,
        concurrency: 1,
        pipelining: true,
        block_log: None,
    }
}

fn same_tree(a: &Path, b: &Path) {
    let mut n = 0;
    for e in std::fs::read_dir(a).unwrap() {
        let e = e.unwrap();
        let other = b.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            same_tree(&e.path(), &other);
        } else {
            assert!(
                std::fs::read(e.path()).unwrap() == std::fs::read(&other).unwrap(),
                "{}",
                other.display()
            );
            n += 1;
        }
    }
    let theirs = std::fs::read_dir(b)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
        .count();
    assert_eq!(
        n,
        theirs,
        "no stray files (temporary parts) in {}",
        b.display()
    );
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
        })
        .expect("send");
        let got = h.join().unwrap().expect("receive");
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

/// Whether two files hold the same bytes, read a MiB at a time.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (mut x, mut y) = (
        std::fs::File::open(a).unwrap(),
        std::fs::File::open(b).unwrap(),
    );
    let (mut p, mut q) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = x.read(&mut p).unwrap();
        let mut m = 0;
        while m < n {
            let k = y.read(&mut q[m..n]).unwrap();
            if k == 0 {
                return false;
            }
            m += k;
        }
        if p[..n] != q[..n] {
            return false;
        }
        if n == 0 {
            return y.read(&mut q).unwrap() == 0;
        }
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
fn a_wrong_token_is_refused_and_nothing_is_written() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("x.dat");
    write(&f, 10_000, 1);
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "right"));
    let e = send(&send_opts(vec![f], addr, "wrong", 2)).unwrap_err();
    assert!(e.to_string().contains("authentication"), "{e}");
    assert!(matches!(h.join().unwrap(), Err(TransferError::Auth)));
    assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
}

/// A hand-written sender: authenticates, then offers `name` of 10 bytes.
fn offer(addr: SocketAddr, token: &str, name: &str) -> Msg {
    offer_sized(addr, token, name, 10)
}

/// A hand-written sender: authenticates, then offers `name` of `size` bytes.
fn offer_sized(addr: SocketAddr, token: &str, name: &str, size: u64) -> Msg {
    let s = TcpStream::connect(addr).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    let mut line = String::new();
    let mut send = |m: &Msg| {
        let mut l = serde_json::to_vec(m).unwrap();
        l.push(b'\n');
        w.write_all(&l).unwrap();
    };
    send(&Msg::Hello {
        version: longhaul_net::transfer::PROTOCOL_VERSION,
    });
    r.read_line(&mut line).unwrap();
    let Msg::Challenge { nonce } = serde_json::from_str(line.trim()).unwrap() else {
        panic!("{line}")
    };
    let nonce: Vec<u8> = (0..nonce.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&nonce[i..i + 2], 16).unwrap())
        .collect();
    let mac = blake3::keyed_hash(blake3::hash(token.as_bytes()).as_bytes(), &nonce);
    send(&Msg::Auth {
        mac: mac.to_hex().to_string(),
    });
    let files = vec![longhaul_net::transfer::FileEntry {
        path: name.into(),
        size,
    }];
    send(&Msg::Offer {
        files,
        channels: 1,
        block_size: 1 << 20,
        transport: Transport::Udt,
    });
    line.clear();
    r.read_line(&mut line).unwrap();
    serde_json::from_str(line.trim()).unwrap()
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
        matches!(&reply, Msg::Reject { reason } if reason.contains("--overwrite")),
        "{reply:?}"
    );
    assert!(h.join().unwrap().is_err());
    assert_eq!(std::fs::read(dst.path().join("there")).unwrap(), b"keep me");
}

/// Both sides' data channels drop 10 % of their datagrams, duplicate 5 % and
/// reorder 10 %: the files still arrive byte-exact.
#[test]
fn files_arrive_byte_exact_through_loss_duplication_and_reordering() {
    let bad = longhaul_net::Impairment {
        loss: 0.10,
        duplicate: 0.05,
        reorder: 0.10,
        corrupt: 0.0,
        seed: 11,
    };
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("t");
    write(&tree.join("a"), 150_001, 1);
    write(&tree.join("b/c"), 77_777, 2);
    write(&tree.join("empty"), 0, 3);
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(RecvOptions {
        impair: Some(bad),
        ..recv_opts(dst.path(), "k")
    });
    let mut o = send_opts(vec![tree.clone()], addr, "k", 2);
    o.block_size = 32 << 10;
    o.impair = Some(bad);
    let sent = send(&o);
    let got = h.join().unwrap();
    let got = got.expect("receive");
    let sent = sent.expect("send");
    assert_eq!((sent.files, got.files), (3, 3));
    same_tree(&tree, &dst.path().join("t"));
}

/// The sender's datagrams have a payload byte flipped now and then, past UDP's
/// checksum (fault injection): the damaged blocks fail their hash on arrival, are
/// fetched again, and the files end byte-exact.
#[test]
fn corrupted_blocks_are_detected_and_fetched_again() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("data.bin");
    write(&f, 3_000_000, 5);
    let dst = tempfile::tempdir().unwrap();
    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    let mut o = send_opts(vec![f.clone()], addr, "k", 3);
    o.block_size = 64 << 10;
    o.impair = Some(longhaul_net::Impairment {
        loss: 0.0,
        duplicate: 0.0,
        reorder: 0.0,
        corrupt: 0.002,
        seed: 5,
    });
    let sent = send(&o).expect("send");
    let got = h.join().unwrap().expect("receive");
    assert!(got.refetched > 0, "no block was damaged: raise the rate");
    assert_eq!(got.refetched, sent.resent);
    assert!(std::fs::read(&f).unwrap() == std::fs::read(dst.path().join("data.bin")).unwrap());
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
    // 200 UDT channels x (256 KiB + 8192 packets of 1500 bytes) is 2.3 GiB.
    let e = send(&send_opts(vec![f], addr, "t", 200)).unwrap_err();
    assert!(e.to_string().contains("MiB of buffers"), "{e}");
    assert!(h.join().unwrap().is_err());
    assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
}

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

    let (addr, h) = receiver(recv_opts(dst.path(), "k"));
    o.dest = addr;
    o.stop_after_blocks = None;
    let sent = send(&o).expect("resume");
    h.join().unwrap().expect("receive");
    assert_eq!(sent.skipped, kept);
    assert_eq!(sent.blocks, blocks - kept);
    assert!(std::fs::read(&f).unwrap() == std::fs::read(dst.path().join("data.bin")).unwrap());
    assert!(!dst.path().join(".data.bin.longhaul-journal").exists());
}
