//! `longhaul send`, `recv` and `token` over loopback: trees arrive byte-exact,
//! wrong tokens are refused, killed ends resume, errors say why once.

use super::*;

/// Writes two token files into `dir`: `tok` (the receivers') and `bad` (another).
fn write_tokens(dir: &Path) {
    std::fs::write(dir.join("tok"), "right-0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::write(dir.join("bad"), "wrong-0123456789abcdef0123456789abcdef\n").unwrap();
}

/// An error's cause is said once: the messages include it, and a chain printed
/// with `{:#}` does not add it again. (It was said twice when the cause was also
/// the error's `source()`.)
#[test]
fn a_failed_connection_says_why_once() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), "x").unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dest = format!("127.0.0.1:{port}");
    let o = Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(["send", "f", &dest])
        .env("LONGHAUL_TOKEN", "k-0123456789abcdef0123456789abcdef")
        .current_dir(tmp.path())
        .output()
        .expect("spawn");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&dest), "{e}");
    assert_eq!(e.matches("refused").count(), 1, "{e}");
}

/// Starts `longhaul recv --json OUT` in `cwd` with the token file `tok` on a free
/// port (`OUT` may be `--discard`, which takes no directory); returns the process,
/// its address, and a thread that collects the rest of its stderr (kept open: a
/// receiver writing its error to a closed pipe would die of it).
fn spawn_recv(
    cwd: &Path,
    out: &str,
) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    spawn_recv_with(cwd, &[out])
}

/// [`spawn_recv`] with `args` (options, then `OUT`) after `--json`.
fn spawn_recv_with(
    cwd: &Path,
    args: &[&str],
) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args([
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            "tok",
            "--json",
        ])
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .expect(&line)
        .to_string();
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        rest
    });
    (child, addr, drain)
}

/// `recv --sessions 2` serves two sessions on one port, one after another; a
/// sender with a wrong token between them is turned away (noted on stderr) and is
/// not a session: the receiver serves on and exits 0 with both files in place.
#[test]
fn recv_serves_session_after_session() {
    let dir = tempfile::tempdir().unwrap();
    write_tokens(dir.path());
    std::fs::write(dir.path().join("a.txt"), "first").unwrap();
    std::fs::write(dir.path().join("b.txt"), "third").unwrap();
    let (recv, addr, err) = spawn_recv_with(dir.path(), &["--sessions", "2", "dst"]);
    for (token, file, ok) in [
        ("tok", "a.txt", true),
        ("bad", "b.txt", false),
        ("tok", "b.txt", true),
    ] {
        let o = longhaul(&["send", "--token-file", token, file, &addr], dir.path());
        assert_eq!(o.status.success(), ok, "{token} {file}: {}", stderr(&o));
    }
    let r = recv.wait_with_output().unwrap();
    assert_eq!(r.status.code(), Some(0));
    let lines: Vec<serde_json::Value> = String::from_utf8(r.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines.iter().all(|l| l["files"] == 1), "{lines:?}");
    let err = err.join().unwrap();
    assert!(err.contains("turned away before authentication"), "{err}");
    assert_eq!(
        std::fs::read(dir.path().join("dst/a.txt")).unwrap(),
        b"first"
    );
    assert_eq!(
        std::fs::read(dir.path().join("dst/b.txt")).unwrap(),
        b"third"
    );
}

/// A tree sent again: the files already there are not sent and both ends say so
/// (exit 0); a file there with other contents fails both ends (exit 1), named, and
/// stays as it is; with `recv --overwrite` it is replaced (exit 0).
#[test]
fn a_tree_sent_again_says_what_was_there() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tok"),
        "k-0123456789abcdef0123456789abcdef\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("t")).unwrap();
    for (name, body) in [("a", "alpha"), ("b", "bravo")] {
        std::fs::write(dir.path().join("t").join(name), body).unwrap();
    }
    let send = |addr: &str| longhaul(&["send", "--token-file", "tok", "t", addr], dir.path());
    let (recv, addr, _) = spawn_recv(dir.path(), "dst");
    assert!(send(&addr).status.success());
    assert!(recv.wait_with_output().unwrap().status.success());

    let (recv, addr, _) = spawn_recv(dir.path(), "dst");
    let o = send(&addr);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("sent 0 files") && out.contains("2 files were at the receiver already"),
        "{out}"
    );
    let r = recv.wait_with_output().unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(
        (summary["files"].as_u64(), summary["present_files"].as_u64()),
        (Some(0), Some(2))
    );

    // Edited at the receiver, same size.
    std::fs::write(dir.path().join("dst/t/b"), "BRAVO").unwrap();
    let (recv, addr, err) = spawn_recv(dir.path(), "dst");
    let o = send(&addr);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("other contents") && stderr(&o).contains("t/b"),
        "{}",
        stderr(&o)
    );
    assert_eq!(recv.wait_with_output().unwrap().status.code(), Some(1));
    assert!(err.join().unwrap().contains("other contents"));
    assert_eq!(std::fs::read(dir.path().join("dst/t/b")).unwrap(), b"BRAVO");

    let (recv, addr, _) = spawn_recv_with(dir.path(), &["--overwrite", "dst"]);
    let o = send(&addr);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout)
        .contains("1 file was replaced at the receiver, which held other contents"));
    assert!(recv.wait_with_output().unwrap().status.success());
    assert_eq!(std::fs::read(dir.path().join("dst/t/b")).unwrap(), b"bravo");
}

/// `longhaul recv` and `longhaul send` on loopback: a tree arrives byte-exact and
/// both exit 0 (with `--json` summaries); a wrong token fails both (exit 1) with
/// nothing written; a missing source or token is bad input (exit 2).
#[test]
fn send_and_recv_over_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let big: Vec<u8> = (0..3_000_017u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
        .collect();
    std::fs::write(src.join("big.bin"), &big).unwrap();
    std::fs::write(src.join("sub/small.txt"), b"hello").unwrap();
    // Not sent, and said so: it leads out of the tree.
    std::os::unix::fs::symlink("../tok", src.join("sub/tok")).unwrap();
    write_tokens(dir.path());
    let serve = |out: &str| spawn_recv(dir.path(), out);
    let (recv, addr, _) = serve("dst");
    let o = longhaul(
        &[
            "send",
            "--token-file",
            "tok",
            "--channels",
            "3",
            "--block-size",
            "64KiB",
            "--json",
            "src",
            &addr,
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not sent: 1 symbolic link") && stderr(&o).contains("sub/tok"),
        "{}",
        stderr(&o)
    );
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["files"], 2);
    assert_eq!(summary["bytes"], 3_000_022);
    // UDT channels running BBR (the defaults) share one model unless told not to.
    assert_eq!(summary["coupled"], true);
    let r = recv.wait_with_output().unwrap();
    assert!(r.status.success());
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&r.stdout).unwrap()["files"],
        2
    );
    assert!(std::fs::read(dir.path().join("dst/src/big.bin")).unwrap() == big);
    assert_eq!(
        std::fs::read(dir.path().join("dst/src/sub/small.txt")).unwrap(),
        b"hello"
    );

    // --json-stream: NDJSON events, start first and end last.
    let (recv, addr, _) = serve("dst3");
    let o = longhaul(
        &[
            "send",
            "--token-file",
            "tok",
            "--no-couple",
            "--json-stream",
            "src",
            &addr,
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["event"], "start");
    assert_eq!(events[0]["data"]["bytes_total"], 3_000_022);
    assert_eq!(events[0]["data"]["coupled"], false);
    let end = events.last().unwrap();
    assert_eq!(end["event"], "end");
    assert_eq!(end["data"]["sum"]["bytes"], 3_000_022);
    assert!(recv.wait_with_output().unwrap().status.success());

    // Linux's BBR (no bbr-lh changes) couples as bbr-lh does.
    for (extra, coupled) in [(None, true), (Some("--no-couple"), false)] {
        let (recv, addr, _) = serve(if coupled { "dst5" } else { "dst4" });
        let mut args = vec!["send", "--token-file", "tok", "--cc", "bbr", "--json"];
        args.extend(extra);
        args.extend(["src", &addr]);
        let o = longhaul(&args, dir.path());
        assert!(o.status.success(), "{}", stderr(&o));
        let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(summary["coupled"], coupled, "{extra:?}");
        assert!(recv.wait_with_output().unwrap().status.success());
    }

    let (recv, addr, err) = serve("dst2");
    let o = longhaul(&["send", "--token-file", "bad", "src", &addr], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("authentication"), "{}", stderr(&o));
    // The receiver turned it away and serves on, until stopped.
    let mut recv = recv;
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        recv.try_wait().unwrap().is_none(),
        "a stranger ended the receiver"
    );
    recv.kill().unwrap();
    let _ = recv.wait();
    let err = err.join().unwrap();
    assert!(err.contains("turned away before authentication"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path().join("dst2")).unwrap().count(),
        0
    );

    for (source, why) in [
        ("nope", "no such file"),
        ("/dev/null", "not a regular file or a directory"),
    ] {
        let o = longhaul(
            &["send", "--token-file", "tok", source, "127.0.0.1:9"],
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(2), "{source}: {}", stderr(&o));
        assert!(stderr(&o).contains(why), "{source}: {}", stderr(&o));
    }
    // Input errors found before connecting, each exit 2 naming what is wrong:
    let cases: &[(&[&str], &str)] = &[
        // a token file that never ends (it was read until memory ran out) or is a
        // folder;
        (
            &["--token-file", "/dev/zero", "src", "127.0.0.1:9"],
            "not a regular file",
        ),
        (
            &["--token-file", "src", "src", "127.0.0.1:9"],
            "not a regular file",
        ),
        // a block log where none can be written (it was exit 1, after connecting);
        (
            &[
                "--token-file",
                "tok",
                "--block-log",
                "/nonexistent/log",
                "src",
                "127.0.0.1:9",
            ],
            "--block-log: cannot write /nonexistent/log",
        ),
        // a port out of range (99999 was taken as part of the host name).
        (
            &["--token-file", "tok", "src", "127.0.0.1:99999"],
            "port 99999 is not from 1 to 65535",
        ),
        (
            &["--token-file", "tok", "src", "127.0.0.1:0"],
            "port 0 is not from 1 to 65535",
        ),
        // sources whose names clash at the receiver (it was exit 1, naming neither).
        (
            &["--token-file", "tok", "src", "src", "127.0.0.1:9"],
            "would both be `src/",
        ),
        // a shared model for controls that have none to share.
        (
            &[
                "--token-file",
                "tok",
                "--couple",
                "--cc",
                "udt",
                "src",
                "127.0.0.1:9",
            ],
            "--couple: only UDT channels running BBR",
        ),
        (
            &[
                "--token-file",
                "tok",
                "--couple",
                "--transport",
                "tcp",
                "src",
                "127.0.0.1:9",
            ],
            "--couple: only UDT channels running BBR",
        ),
    ];
    for (args, want) in cases {
        let o = longhaul(&[&["send"], *args].concat(), dir.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    // A receiving directory that is a file (it said only "File exists").
    let o = longhaul(&["recv", "--token-file", "tok", "bad"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("bad: it exists and is not a directory"),
        "{}",
        stderr(&o)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(["send", "src", "127.0.0.1:9"])
        .current_dir(dir.path())
        .env_remove("LONGHAUL_TOKEN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("token"), "{}", stderr(&o));
    for args in [
        &[
            "recv",
            "--token-file",
            "tok",
            "--memory-cap",
            "1KiB",
            "dst4",
        ][..],
        &[
            "send",
            "--token-file",
            "tok",
            "--memory-cap",
            "lots",
            "src",
            "127.0.0.1:9",
        ],
        &[
            "send",
            "--token-file",
            "tok",
            "--channels",
            "64",
            "--concurrency",
            "8",
            "src",
            "127.0.0.1:9",
        ],
    ] {
        let o = longhaul(args, dir.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("--memory-cap") || stderr(&o).contains("--concurrency"),
            "{}",
            stderr(&o)
        );
    }
    for ports in ["70000", "5-3", "0-10", "a-b", "1-2-3", ""] {
        let o = longhaul(
            &["recv", "--token-file", "tok", "--data-ports", ports, "dst5"],
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(2), "{ports}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("--data-ports `{ports}`")),
            "{}",
            stderr(&o)
        );
    }
    for mss in ["10", "70000"] {
        let o = longhaul(
            &["recv", "--token-file", "tok", "--mss", mss, "dst6"],
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(2), "{mss}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("--mss {mss}: must be")),
            "{}",
            stderr(&o)
        );
    }
    for packets in ["16", "2000000", "many"] {
        for side in [
            &[
                "recv",
                "--token-file",
                "tok",
                "--udt-buffer",
                packets,
                "dst7",
            ][..],
            &[
                "send",
                "--token-file",
                "tok",
                "--udt-buffer",
                packets,
                "tok",
                "127.0.0.1",
            ][..],
        ] {
            let o = longhaul(side, dir.path());
            assert_eq!(o.status.code(), Some(2), "{packets}: {}", stderr(&o));
            assert!(stderr(&o).contains("--udt-buffer"), "{}", stderr(&o));
        }
    }
    // Memory to memory: a generated stream to a receiver that writes nothing.
    let (recv, addr, _) = serve("--discard");
    let before = std::fs::read_dir(dir.path()).unwrap().count();
    let o = longhaul(
        &[
            "send",
            "--token-file",
            "tok",
            "--synthetic",
            "20MB",
            "--json",
            &addr,
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["bytes"], 20_000_000);
    let r = recv.wait_with_output().unwrap();
    assert!(r.status.success());
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&r.stdout).unwrap()["bytes"],
        20_000_000
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        before,
        "nothing written"
    );
    for args in [
        &[
            "send",
            "--token-file",
            "tok",
            "--synthetic",
            "1MB",
            "src",
            "127.0.0.1:9",
        ][..],
        &["send", "--token-file", "tok", "127.0.0.1:9"],
        &[
            "send",
            "--token-file",
            "tok",
            "--synthetic",
            "lots",
            "127.0.0.1:9",
        ],
    ] {
        let o = longhaul(args, dir.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }

    // A sender's own cap: 8 UDT channels (100 MB of buffers) do not fit in 64 MiB.
    let o = longhaul(
        &[
            "send",
            "--token-file",
            "tok",
            "--channels",
            "8",
            "--memory-cap",
            "64MiB",
            "src",
            "127.0.0.1:9",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("MiB of buffers"), "{}", stderr(&o));
}

/// kill -9 of the sender mid-transfer: the receiver exits (1) and keeps the part
/// file and its journal; the same `send` to a new `recv` resumes, sends only the
/// blocks the journal lacks, and the file ends byte-exact. The blocks sent twice
/// (handed to a channel before the kill, per the first run's block log, and not
/// kept) are fewer than channels × blocks in flight.
#[test]
fn a_killed_sender_resumes() {
    kill_and_resume(Side::Sender);
}

/// kill -9 of the receiver mid-transfer: the sender exits (1); a new `recv` on the
/// same directory and the same `send` resume from the journal the killed receiver
/// left, byte-exact, with fewer than channels × blocks in flight sent twice.
#[test]
fn a_killed_receiver_resumes() {
    kill_and_resume(Side::Receiver);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Sender,
    Receiver,
}

#[allow(clippy::disallowed_methods)] // how long the survivor takes to notice
fn kill_and_resume(victim: Side) {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..200_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(dir.path().join("big.bin"), &data).unwrap();
    std::fs::write(
        dir.path().join("tok"),
        "k-0123456789abcdef0123456789abcdef\n",
    )
    .unwrap();
    const CHANNELS: u64 = 2;
    const BLOCK: u64 = 1 << 20;
    let total = (data.len() as u64).div_ceil(BLOCK);
    let serve = || {
        let (child, addr, _) = spawn_recv(dir.path(), "dst");
        (child, addr)
    };
    let send = |addr: &str, log: &str| {
        Command::new(env!("CARGO_BIN_EXE_longhaul"))
            .args([
                "send",
                "--token-file",
                "tok",
                "--channels",
                &CHANNELS.to_string(),
                "--block-size",
                "1MiB",
                "--block-log",
                log,
                "--json",
                "big.bin",
                addr,
            ])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let blocks_logged = |log: &str| {
        std::fs::read_to_string(dir.path().join(log))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("block "))
            .count() as u64
    };
    let (mut recv, addr) = serve();
    let mut sender = send(&addr, "log1");
    // Wait until some blocks are journaled, then kill the sender outright.
    let journal = dir.path().join("dst/.big.bin.longhaul-journal");
    let deadline = std::time::Duration::from_secs(30);
    let mut waited = std::time::Duration::ZERO;
    while std::fs::read_to_string(&journal).map_or(0, |j| j.lines().count()) < 30 {
        assert!(waited < deadline, "no progress");
        std::thread::sleep(std::time::Duration::from_millis(20));
        waited += std::time::Duration::from_millis(20);
    }
    let started = std::time::Instant::now();
    let survivor = if victim == Side::Sender {
        sender.kill().unwrap(); // SIGKILL
        sender.wait().unwrap();
        recv.wait().unwrap()
    } else {
        recv.kill().unwrap();
        recv.wait().unwrap();
        sender.wait().unwrap()
    };
    assert_eq!(survivor.code(), Some(1), "the other side fails");
    eprintln!(
        "kill -9 of the {victim:?}: the other side exited after {:?}",
        started.elapsed()
    );
    // A dead peer's port refuses datagrams: the survivor ends within seconds (UDT's
    // own EXP timer alone would take about 41 s).
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert!(!dir.path().join("dst/big.bin").exists());
    let kept = std::fs::read_to_string(&journal).unwrap().lines().count() as u64 - 1;
    assert!((29..total).contains(&kept), "{kept} of {total} blocks kept");
    let handed = blocks_logged("log1");
    assert!(handed >= kept, "{handed} handed out, {kept} kept");

    let (recv, addr) = serve();
    // Bounded: a resumed send that crawls (seen once under CI load, 2026-11-29:
    // eight blocks in 14 minutes) fails here instead of holding the suite.
    let mut resumed = send(&addr, "log2");
    let (limit, step) = (
        std::time::Duration::from_secs(180),
        std::time::Duration::from_millis(50),
    );
    let mut waited = std::time::Duration::ZERO;
    while resumed.try_wait().unwrap().is_none() {
        if waited > limit {
            resumed.kill().unwrap();
            panic!("the resumed send did not finish within {limit:?}");
        }
        std::thread::sleep(step);
        waited += step;
    }
    let o = resumed.wait_with_output().unwrap();
    assert!(o.status.success());
    let mut recv = recv;
    assert!(recv.wait().unwrap().success());
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["resumed_blocks"], kept);
    assert_eq!(summary["blocks"], total - kept);
    assert_eq!(blocks_logged("log2"), total - kept);
    assert!(std::fs::read(dir.path().join("dst/big.bin")).unwrap() == data);

    // Blocks in flight on one channel: the one the sender is writing, those in its
    // UDT send buffer, those in the receiver's UDT receive buffer, and the one the
    // receiver is reading.
    let udt = longhaul_proto::udt::UdtConnConfig::default();
    let buffer = |pkts: u32| (u64::from(pkts) * u64::from(udt.mss)).div_ceil(BLOCK);
    let in_flight = 2 + buffer(udt.snd_buf_pkts) + buffer(udt.rcv_buf_pkts);
    let resent = handed - kept;
    eprintln!(
        "kill -9 of the {victim:?}: {handed} blocks handed out, {kept} kept, {resent} sent again (bound {})",
        CHANNELS * in_flight
    );
    assert!(
        resent < CHANNELS * in_flight,
        "{resent} blocks sent twice; {CHANNELS} channels × {in_flight} in flight"
    );
}

/// `longhaul token` prints a fresh 256-bit token that both ends take; a weak token
/// is bad input (exit 2) at either end, saying how to make a good one.
#[test]
fn tokens_are_made_strong_and_weak_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = longhaul(&["token"], dir.path());
    let b = longhaul(&["token"], dir.path());
    assert!(a.status.success());
    let t = String::from_utf8(a.stdout).unwrap();
    let t = t.trim();
    assert!(
        t.len() == 64 && t.bytes().all(|c| c.is_ascii_hexdigit()),
        "{t}"
    );
    assert_ne!(
        t,
        String::from_utf8(b.stdout).unwrap().trim(),
        "fresh each time"
    );
    std::fs::write(dir.path().join("weak"), "hunter2\n").unwrap();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    for args in [
        &["recv", "--token-file", "weak", "dst"][..],
        &["send", "--token-file", "weak", "f", "127.0.0.1:9"][..],
    ] {
        let o = longhaul(args, dir.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("longhaul token"), "{}", stderr(&o));
    }
}
