//! `longhaul emu` end to end: a real transfer across the emulated link, teardown on
//! SIGINT, and bad flags. Needs root, `/dev/net/tun` and iproute2; every namespace
//! is the run's own and is checked gone afterwards. Bounded in time.

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pause before try `n` (from 1) of a real-time run after invalid ones: 2 s,
/// then doubling, then up to a minute more until a second in which the
/// hypervisor took under 1 % of every CPU and a timer kept time, as the
/// emulator crate's tests wait (`crates/emu/tests/common`). What makes a timer
/// late on a shared host (another tenant's burst, the hypervisor's steal) can
/// outlast a few seconds; a retry straight after meets it again.
fn pause_before_try(n: usize) {
    if n > 0 {
        std::thread::sleep(Duration::from_secs(2 << (n - 1).min(3)));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let q = longhaul_emu::quiet::wait_for_quiet_host(Duration::from_secs(60), &stop);
        eprintln!("try {}: {q}", n + 1);
    }
}

fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("lh-{pid}-")))
        .map(str::to_string)
        .collect()
}

/// Writes `len` varied bytes (no run of equal blocks, so a misplaced block shows) to
/// `path` and returns them.
fn varied_file(path: &std::path::Path, len: u32) -> Vec<u8> {
    let data: Vec<u8> = (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

/// Whether `pid` is a process that still runs (a zombie does not).
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn a_transfer_crosses_a_lossy_emulated_link_byte_exact() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    let dst = dir.path().join("out");
    std::fs::create_dir_all(&src).unwrap();
    let data = varied_file(&src.join("f.bin"), 3_000_000);
    let bin = env!("CARGO_BIN_EXE_longhaul");
    let report = dir.path().join("run.json");
    let pcap = dir.path().join("link.pcap");
    let o = Command::new(bin)
        .args([
            "emu",
            "--rate",
            "50Mbps",
            "--rtt",
            "20ms",
            "--loss-up",
            "0.01",
            "--seed",
            "7",
        ])
        .arg("--json")
        .arg(&report)
        .arg("--pcap")
        .arg(&pcap)
        .arg("--server")
        .arg(format!("{bin} recv {}", dst.display()))
        .args(["--duration", "60s", "--"])
        .args([bin, "send", "--channels", "2"])
        .arg(src.join("f.bin"))
        .arg("10.77.0.2")
        .env(
            "LONGHAUL_TOKEN",
            "emu-test-token-0123456789abcdef0123456789abcdef",
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(std::fs::read(dst.join("f.bin")).unwrap(), data);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let up = &r["up"];
    // The data went up through UDP (UDT) flows, and the loss model dropped some.
    let udp_bytes: u64 = up["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["flow"].as_str().unwrap().starts_with("udp"))
        .map(|f| f["bytes_out"].as_u64().unwrap())
        .sum();
    assert!(udp_bytes > 3_000_000, "{udp_bytes}");
    assert!(up["lost_random"].as_u64().unwrap() > 0);
    assert_eq!(r["seed"], 7);
    assert!(stderr.contains("seed 7"), "the seed is printed: {stderr}");
    // The capture holds every delivered packet: pcap magic (ns), raw IP, and as many
    // records as the report's deliveries in both directions.
    let cap = std::fs::read(&pcap).unwrap();
    assert_eq!(&cap[..4], &0xa1b2_3c4du32.to_le_bytes());
    assert_eq!(&cap[20..24], &101u32.to_le_bytes());
    let mut records = 0u64;
    let mut at = 24;
    while at + 16 <= cap.len() {
        let caplen = u32::from_le_bytes(cap[at + 8..at + 12].try_into().unwrap()) as usize;
        assert!(caplen <= 128);
        assert_eq!(cap[at + 16] >> 4, 4, "record {records} is not IPv4");
        at += 16 + caplen;
        records += 1;
    }
    assert_eq!(at, cap.len(), "a truncated record");
    let delivered =
        r["up"]["packets_out"].as_u64().unwrap() + r["down"]["packets_out"].as_u64().unwrap();
    assert_eq!(records, delivered);
}

#[test]
fn a_failing_client_command_exits_1_and_cleans_up() {
    let _g = lock();
    let mut child = Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args([
            "emu",
            "--server",
            "sleep 300",
            "--",
            "sh",
            "-c",
            "sleep 0.3; exit 3",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("the client command failed"), "{err}");
    assert!(
        namespaces_of(pid).is_empty(),
        "left behind: {:?}",
        namespaces_of(pid)
    );
}

#[test]
fn sigint_removes_namespaces_and_processes() {
    let _g = lock();
    let mut child = Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(["emu", "--server", "sleep 300", "--", "sleep", "300"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait for both namespaces and their processes.
    let mut inside = vec![];
    for _ in 0..100 {
        let names = namespaces_of(pid);
        if names.len() == 2 {
            inside = names
                .iter()
                .flat_map(|n| {
                    let o = Command::new("ip")
                        .args(["netns", "pids", n])
                        .output()
                        .unwrap();
                    String::from_utf8_lossy(&o.stdout)
                        .split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok())
                        .collect::<Vec<_>>()
                })
                .collect();
            if inside.len() >= 2 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(inside.len() >= 2, "the commands never started: {inside:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut status = None;
    for _ in 0..200 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let Some(status) = status else {
        let _ = child.kill();
        panic!("longhaul emu did not exit within 10 s of SIGINT");
    };
    assert_eq!(status.code(), Some(130));
    assert!(
        namespaces_of(pid).is_empty(),
        "left behind: {:?}",
        namespaces_of(pid)
    );
    for p in inside {
        assert!(!running(p), "process {p} still runs");
    }
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("lh0"),
        "a TUN device is left"
    );
}

/// `longhaul compare` refuses bad flags before it makes any namespace: exit 2, the
/// flag named. (Parsing needs no root; nothing here runs a link.)
#[test]
fn compare_bad_flags_exit_2_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--schemes", "foo"], "--schemes: `foo` is not a scheme"),
        (&["--schemes", ","], "--schemes: the list is empty"),
        (&["--loss", "2"], "--loss: `2` is not a loss probability"),
        (&["--runs", "0"], "--runs: at least 1"),
        (&["--duration", "0s"], "--duration: at least 1s"),
        (&["--rate", "fast"], "--rate"),
        // It said only "File exists".
        (
            &["--out", "/dev/null"],
            "--out: /dev/null exists and is not a folder",
        ),
    ];
    exit_2_saying(&["compare"], cases, &[]);
}

/// Runs `longhaul PREFIX ARGS SUFFIX` for each case: exit 2, stderr saying `want`.
fn exit_2_saying(prefix: &[&str], cases: &[(&[&str], &str)], suffix: &[&str]) {
    for (args, want) in cases {
        let o = Command::new(env!("CARGO_BIN_EXE_longhaul"))
            .args(prefix)
            .args(*args)
            .args(suffix)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let bin = env!("CARGO_BIN_EXE_longhaul");
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "fast"], "--rate"),
        (&["--loss", "1.5"], "--loss"),
        (&["--loss-up", "ge:0.1"], "--loss-up"),
        (&["--queue", "lots"], "--queue"),
        (&["--trace-up", "/nonexistent/x.trace"], "--trace-up"),
        // Read until memory ran out.
        (
            &["--trace-down", "/dev/zero"],
            "--trace-down: /dev/zero: not a regular file",
        ),
        (&["--mtu", "100"], "--mtu: 100 is outside"),
        // Found only after the run, which was lost with it.
        (
            &["--json", "/nonexistent/run.json"],
            "--json: cannot write /nonexistent/run.json",
        ),
        (&["--json", "/"], "--json: / is a folder"),
        (&["--rtt", "100"], "--rtt"),
        // Was taken as 1 ms without a word.
        (&["--interval", "0s"], "--interval"),
        // Stopped before anything ran, with exit 0 and an empty report.
        (&["--duration", "0s"], "--duration: 0 stops"),
        (
            &["--aqm", "codel"],
            "--aqm: `codel` is not a queue discipline",
        ),
        (
            &["--aqm", "red:min=50,max=10"],
            "--aqm: RED max_th 10 must be above",
        ),
        (&["--aqm", "wred:p4=1/2"], "--aqm: unknown wred key `p4`"),
        (&["--jitter", "5ms,pareto"], "--jitter: `pareto`"),
        (&["--reorder", "2"], "--reorder: reorder probability 2"),
        (
            &["--reorder", "0.1,0ms"],
            "--reorder: a reorder needs a hold-back delay",
        ),
        (
            &["--duplicate", "1.5"],
            "--duplicate: duplicate probability 1.5",
        ),
        (&["--schedule", "/nonexistent/s.toml"], "--schedule"),
    ];
    exit_2_saying(&["emu"], cases, &["--", "true"]);
    // A bad file is reported with its name and where in it.
    let dir = tempfile::tempdir().unwrap();
    for (flag, name, text, want) in [
        (
            "--schedule",
            "steps.toml",
            "[[step]]\nat = \"1s\"\nrate = \"quick\"\n",
            "steps.toml: step 1: `rate`",
        ),
        ("--trace-down", "bad.trace", "1\n2\nthree\n", "bad.trace:3"),
    ] {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        let o = Command::new(bin)
            .arg("emu")
            .arg(flag)
            .arg(&f)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(want), "{flag}: {err}");
    }
}

#[test]
fn send_rate_limit_and_ar_udt_hold_across_an_emulated_link() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let data = varied_file(&dir.path().join("f.bin"), 4_000_000);
    let bin = env!("CARGO_BIN_EXE_longhaul");
    // The rates are asserted on a run the emulator reports valid: up to five
    // tries, with pauses between them (`pause_before_try`).
    let mut invalid = vec![];
    let r = loop {
        pause_before_try(invalid.len());
        let report = dir.path().join(format!("run-{}.json", invalid.len()));
        let out = dir.path().join(format!("out-{}", invalid.len()));
        let o = Command::new(bin)
            .args([
                "emu",
                "--rate",
                "200Mbps",
                "--rtt",
                "10ms",
                "--duration",
                "60s",
                "--json",
            ])
            .arg(&report)
            .arg("--server")
            .arg(format!("{bin} recv {}", out.display()))
            .args([
                "--",
                bin,
                "send",
                "--cc",
                "ar-udt",
                "--rate-limit",
                "20Mbps",
                "--channels",
                "2",
                "--block-size",
                "256KiB",
            ])
            .arg(dir.path().join("f.bin"))
            .arg("10.77.0.2")
            .env("LONGHAUL_TOKEN", "t-0123456789abcdef0123456789abcdef")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read(out.join("f.bin")).unwrap(), data);
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        if r["health"]["valid"] == true {
            break r;
        }
        // Said at once, so a pass on a later try still leaves a trace.
        eprintln!("invalid run: {}", r["health"]["problems"]);
        invalid.push(r["health"]["problems"].to_string());
        assert!(invalid.len() < 5, "no valid run in five: {invalid:?}");
    };
    // The emulator measured each UDT channel: 10 Mb/s each at most (UDT_MAXBW on
    // 1500-byte packets; packet pairs allow 1/16 more), and clearly not idle: the
    // cap is per channel, half the total.
    let udt: Vec<f64> = r["up"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["flow"].as_str().unwrap().starts_with("udp")
                && f["packets_out"].as_u64().unwrap() > 100
        })
        .map(|f| f["throughput_bps"].as_f64().unwrap())
        .collect();
    // Which channel takes which block is up to the sockets' room: one channel may
    // carry them all (its 12 MB buffer holds the whole file), so count those that
    // carried data.
    assert!(!udt.is_empty() && udt.len() <= 2, "{udt:?}");
    for t in udt {
        assert!(
            t < 10e6 * 17.0 / 16.0 * 1.02 && t > 6e6,
            "a channel ran at {t:.0} b/s"
        );
    }
    // With TCP channels the cap is refused, not ignored.
    let o = Command::new(bin)
        .args(["send", "--transport", "tcp", "--rate-limit", "1Gbps"])
        .arg(dir.path().join("f.bin"))
        .arg("127.0.0.1:9")
        .env("LONGHAUL_TOKEN", "t-0123456789abcdef0123456789abcdef")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--rate-limit"));
}

/// Jumbo frames end to end: through an emulated link with a 9000-byte MTU, `send
/// --mss 9000` to `recv --mss 9000` arrives byte-exact, its UDT data crossing the
/// link as datagrams of about 9000 bytes (no timing is asserted, so any run counts).
#[test]
fn jumbo_frames_cross_an_emulated_link_with_a_9000_byte_mtu() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let data = varied_file(&dir.path().join("f.bin"), 6_000_000);
    let bin = env!("CARGO_BIN_EXE_longhaul");
    let report = dir.path().join("run.json");
    let out = dir.path().join("out");
    let o = Command::new(bin)
        .args(["emu", "--rate", "200Mbps", "--rtt", "10ms", "--mtu", "9000"])
        .args(["--duration", "60s", "--json"])
        .arg(&report)
        .arg("--server")
        .arg(format!("{bin} recv --mss 9000 {}", out.display()))
        .args(["--", bin, "send", "--mss", "9000", "--channels", "2"])
        .arg(dir.path().join("f.bin"))
        .arg("10.77.0.2")
        .env("LONGHAUL_TOKEN", "t-0123456789abcdef0123456789abcdef")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(out.join("f.bin")).unwrap(), data);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let (bytes, packets) = r["up"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["flow"].as_str().unwrap().starts_with("udp"))
        .map(|f| {
            (
                f["bytes_out"].as_u64().unwrap(),
                f["packets_out"].as_u64().unwrap(),
            )
        })
        .max()
        .unwrap();
    // The busiest UDT channel: data datagrams of 9000 bytes, with a few small control
    // packets among them. On 1500-byte packets the mean could not pass 1500.
    let mean = bytes as f64 / packets as f64;
    assert!(
        bytes > 3_000_000 && mean > 8000.0,
        "{bytes} bytes in {packets} packets"
    );
}

/// A capture of an encrypted session through the emulator holds neither the file's
/// name nor a marker placed all through its contents; the same session sent with
/// `--no-encryption` shows the marker in its data packets (so the search would find
/// it), while the name, on the always-encrypted control channel, stays hidden.
#[test]
fn a_capture_of_an_encrypted_session_shows_no_name_or_content() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let name = "secret-name-7f3a.bin";
    let marker = b"MARKER-Q7Z";
    let mut data = vec![0u8; 600_000];
    for (i, c) in data.chunks_mut(40).enumerate() {
        c[..marker.len()].copy_from_slice(marker);
        c[marker.len()..].fill(i as u8);
    }
    std::fs::write(dir.path().join(name), &data).unwrap();
    let bin = env!("CARGO_BIN_EXE_longhaul");
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    for encrypt in [true, false] {
        let out = dir.path().join(format!("out-{encrypt}"));
        let pcap = dir.path().join(format!("cap-{encrypt}.pcap"));
        let flag = if encrypt { "" } else { " --no-encryption" };
        let mut send = vec![bin, "send", "--channels", "2"];
        if !encrypt {
            send.push("--no-encryption");
        }
        let o = Command::new(bin)
            .args([
                "emu",
                "--rate",
                "100Mbps",
                "--rtt",
                "10ms",
                "--duration",
                "60s",
            ])
            .arg("--pcap")
            .arg(&pcap)
            .arg("--server")
            .arg(format!("{bin} recv{flag} {}", out.display()))
            .arg("--")
            .args(&send)
            .arg(dir.path().join(name))
            .arg("10.77.0.2")
            .env(
                "LONGHAUL_TOKEN",
                "pcap-test-0123456789abcdef0123456789abcdef",
            )
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read(out.join(name)).unwrap(), data);
        let cap = std::fs::read(&pcap).unwrap();
        // 128 bytes of each of some 500 packets.
        assert!(
            cap.len() > 40_000,
            "the capture holds the session: {} bytes",
            cap.len()
        );
        assert!(
            !find(&cap, name.as_bytes()),
            "the name is in the capture ({encrypt})"
        );
        assert_eq!(
            find(&cap, marker),
            !encrypt,
            "the marker, encrypted: {encrypt}"
        );
    }
}

/// Issue 34's real transfer: 100 MB through the emulator at 100 Mb/s × 20 ms with 5 %
/// random loss each way, 4 channels, the default rate control (`bbr-lh`, the
/// channels sharing one model), every byte right, and the channels ending within a
/// block-time of each other.
///
/// Measured 2026-11-29 with the channels coupled, as they now are by default
/// (`--synthetic 100MB` to `recv --discard`, seeds 61-64, valid runs; docs/bbr.md,
/// "Pacing over random loss"): the data phase's rate 84.0-87.6 Mb/s, against
/// 84.7-88.4 with a model per channel, alternated.
///
/// Measured 2026-11-26 (valid runs, one sitting), with a channel taking its next
/// 4 MiB block only once less than an eighth of a block (or 20 ms of its sending) is
/// left unsent, against the same build without that rule:
/// - goodput: 65.0-87.8 Mb/s (9 runs, mean 80.4) against 54.4-84.1 (4 runs, mean
///   69.0). Goodput here includes the receiver's commit of the 100 MB to disk, which
///   then was a syncfs and took 0.1-4.3 s on this machine when a build had left
///   other data to flush; it is now an fdatasync of the file (0.3-1.2 s against
///   0.8-2.6 with 1 GB of other data dirty, 2 runs each).
///
/// Measured 2026-11-27, with the last four blocks split into two pieces per channel
/// and the 20 ms reckoned at the window's rate when that is below the pacing rate
/// (8 valid runs, seeds 31-34 and 41-44, alternating with the build before): the
/// spread of the channels' ends, in block-times (a 4 MiB block at a channel's share
/// of the data phase's rate, from the channels' start to the last one's end), 0.04-
/// 0.51 (mean 0.20) against 0.53-1.58 (mean 0.98) before; the data phase's rate
/// 84.1-89.6 Mb/s (mean 87.7) against 85.0-88.9 (mean 87.3). The issue asks at most
/// one block-time; this asserts it.
///
/// The issue asks 80 Mb/s: this asserts it of the data phase (the network's part),
/// and 50 of the goodput with the commit to disk, which is the disk's and varies
/// with what else the machine writes; both are clear of UDT4's own control on the
/// same path (13.4 Mb/s).
///
/// Only a run the emulator reports valid counts; up to five are tried, as the
/// emulator crate's tests try (a host's noisy spell can outlast three tries and
/// their 6 s of pauses: 2026-12-02, three tries with lateness p99 437-460 µs
/// and no steal, and the test alone passed on its first or second try minutes
/// later).
#[test]
fn bbr_lh_keeps_a_five_percent_loss_path_full() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let data = varied_file(&dir.path().join("f.bin"), 100_000_000);
    let bin = env!("CARGO_BIN_EXE_longhaul");
    let mut invalid = Vec::new();
    for attempt in 0..5 {
        pause_before_try(attempt);
        let report = dir.path().join(format!("run{attempt}.json"));
        let out = dir.path().join(format!("out{attempt}"));
        let o = Command::new(bin)
            .args([
                "emu", "--rate", "100Mbps", "--rtt", "20ms", "--loss", "0.05",
            ])
            .args(["--seed", &format!("{}", 11 + attempt), "--duration", "90s"])
            .arg("--json")
            .arg(&report)
            .arg("--server")
            .arg(format!("{bin} recv {}", out.display()))
            .args(["--", bin, "send", "--json", "--channels", "4"])
            .arg(dir.path().join("f.bin"))
            .arg("10.77.0.2")
            .env("LONGHAUL_TOKEN", "t-0123456789abcdef0123456789abcdef")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        if r["health"]["valid"] != serde_json::Value::Bool(true) {
            eprintln!("invalid run: {}", r["health"]["problems"]);
            invalid.push(r["health"]["problems"].to_string());
            continue;
        }
        assert!(
            std::fs::read(out.join("f.bin")).unwrap() == data,
            "the file arrived different"
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        let line = stdout
            .lines()
            .find(|l| l.starts_with('{'))
            .expect("send --json");
        let s: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            s["coupled"], true,
            "the channels share one model by default"
        );
        let secs = s["seconds"].as_f64().unwrap() - s["handshake_seconds"].as_f64().unwrap();
        let mbps = s["bytes"].as_f64().unwrap() * 8.0 / secs / 1e6;
        assert!(
            mbps >= 50.0,
            "{mbps:.1} Mb/s over {secs:.2} s, commit included"
        );
        // The channels' ends, against a block-time (a 4 MiB block at a channel's
        // share of the data phase's rate: the receiver's syncfs after it is disk
        // time, not the channels').
        let ends: Vec<f64> = s["channel_seconds"]
            .as_array()
            .expect("channel_seconds")
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(ends.len(), 4);
        let last = ends.iter().cloned().fold(f64::MIN, f64::max);
        let spread = last - ends.iter().cloned().fold(f64::MAX, f64::min);
        let data_mbps = s["bytes"].as_f64().unwrap() * 8.0 / last / 1e6;
        assert!(
            data_mbps >= 80.0,
            "{data_mbps:.1} Mb/s over the data phase ({last:.2} s), a valid run: {}",
            r["health"]
        );
        let block_time = 4.0 * 1048576.0 * 8.0 / (data_mbps * 1e6 / 4.0);
        eprintln!("{mbps:.1} Mb/s; channels ended {spread:.2} s apart; block-time {block_time:.2} s; {ends:?}");
        assert!(
            spread <= block_time,
            "channels ended {spread:.2} s apart, block-time {block_time:.2} s: {ends:?}"
        );
        return;
    }
    panic!("no valid run in five: {invalid:?}");
}

/// `compare --sim`: the kernel's Reno, CUBIC and BBR against their simulated
/// twins on 100 Mb/s x 50 ms with 1e-3 random loss, the loss pattern shared by
/// seed. The tolerances: Reno/NewReno within 15 %, CUBIC within 20 %; BBR
/// within 15 % (it ignores loss this light, so both fill the link). Measured
/// per run: Reno 1.04-1.16 (five runs), CUBIC 0.97-1.06 (five), BBR 1.03 (two);
/// with Linux's RTO formula on the simulated side (`rto = "linux"`, 2026-11-26):
/// Reno 1.03 and 1.15, CUBIC 0.94 and 0.93, BBR 1.03 and 1.03. The mean over
/// each scheme's valid runs is checked. Compare re-runs an invalid run once; a
/// scheme with no valid run gets up to three more compares of its own, and one
/// with none still fails the test, naming the problems.
#[test]
fn compare_sim_agrees_with_the_kernel_on_the_same_path() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let schemes = [("reno", 0.15), ("cubic", 0.20), ("bbr", 0.15)];
    let mut ratios: Vec<Vec<f64>> = vec![vec![]; schemes.len()];
    let mut problems: Vec<Vec<String>> = vec![vec![]; schemes.len()];
    // The first compare runs every scheme twice; a scheme still without a valid
    // run gets up to three more one-run compares, after pauses of 2, 4 and 8 s.
    for attempt in 0..4 {
        let missing: Vec<&str> = schemes
            .iter()
            .zip(&ratios)
            .filter(|(_, r)| r.is_empty())
            .map(|((s, _), _)| *s)
            .collect();
        if missing.is_empty() {
            break;
        }
        pause_before_try(attempt);
        let out = dir.path().join(format!("cmp{attempt}"));
        let each = if attempt == 0 { "2" } else { "1" };
        let o = Command::new(env!("CARGO_BIN_EXE_longhaul"))
            .args(["compare", "--schemes", &missing.join(",")])
            .args(["--rate", "100Mbps", "--rtt", "50ms", "--loss", "1e-3"])
            .args(["--duration", "20s", "--runs", each, "--seed", "1", "--sim"])
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let runs: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        if attempt == 0 {
            let md = std::fs::read_to_string(out.join("results.md")).unwrap();
            assert!(
                md.contains("real/sim") && md.contains("Not matched:") && md.contains("HyStart")
            );
            assert!(out.join("sim-50ms-0.001.png").exists());
            assert!(out.join("ratio-50ms-0.001.png").exists());
        }
        for (i, (scheme, _)) in schemes.iter().enumerate() {
            for r in runs.iter().filter(|r| r["scheme"] == *scheme) {
                if r["valid"] == true {
                    ratios[i].push(r["real_over_sim"].as_f64().unwrap());
                } else {
                    problems[i].push(r["problems"].to_string());
                }
            }
        }
    }
    for (i, (scheme, tol)) in schemes.iter().enumerate() {
        let ratios = &ratios[i];
        assert!(
            !ratios.is_empty(),
            "{scheme}: no valid run: {:?}",
            problems[i]
        );
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        eprintln!("{scheme}: real/sim {ratios:?}, mean {mean:.3}");
        assert!(
            (mean - 1.0).abs() <= *tol,
            "{scheme}: real/sim {mean:.3} ({ratios:?})"
        );
    }
}
