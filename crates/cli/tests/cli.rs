//! End-to-end tests of the `longhaul` binary.

use std::path::Path;
use std::process::{Command, Output};

fn longhaul(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("spawn")
}

/// Writes two token files into `dir`: `tok` (the receivers') and `bad` (another).
fn write_tokens(dir: &Path) {
    std::fs::write(dir.join("tok"), "right-0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::write(dir.join("bad"), "wrong-0123456789abcdef0123456789abcdef\n").unwrap();
}

/// Whether tshark is here; on CI it must be (`.ci/run` installs it), elsewhere a
/// test that needs it says it skipped.
fn have_tshark() -> bool {
    if Command::new("tshark").arg("--version").output().is_ok() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI must install tshark");
    eprintln!("tshark not installed: skipping");
    false
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const SMALL: &str = r#"
name = "small"
duration = "3s"
seed = 4
[topology]
kind = "chain"
[[topology.links]]
rate = "1Gbps"
delay = "1ms"
[[topology.links]]
rate = "100Mbps"
delay = "10ms"
queue = "1bdp"
loss = 1e-4
[[flow]]
protocol = "tcp"
size = "2MB"
[[flow]]
protocol = "udp"
rate = "10Mbps"
[outputs]
trace = true
pcap = ["link1", "link1.rev"]
"#;

#[test]
fn run_writes_every_output() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("small.toml"), SMALL).unwrap();
    let o = longhaul(&["sim", "run", "small.toml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = tmp.path().join("results/small");
    for f in [
        "summary.json",
        "flows.csv",
        "links.csv",
        "trace.csv",
        "throughput.png",
        "queue.png",
        "cwnd.png",
        "link1.pcap",
        "link1.rev.pcap",
    ] {
        let meta = std::fs::metadata(out.join(f)).unwrap_or_else(|_| panic!("{f} missing"));
        assert!(meta.len() > 0, "{f} is empty");
    }
    let png = std::fs::read(out.join("throughput.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let ct = summary["flows"][0]["completion_time_s"]
        .as_f64()
        .expect("the 2 MB transfer completes");
    assert!(ct > 0.1 && ct < 3.0, "{ct}");
    assert_eq!(summary["flows"][0]["delivered_bytes"], 2_000_000);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("small") && stdout.contains("results/small"),
        "{stdout}"
    );
}

/// TCP timestamps as tshark reads them off the capture: every segment carries the
/// option (the SYN offering it with TSecr 0), a full data segment is 1500 bytes on
/// the wire (1448 of payload), and each ACK echoes the TSval of a data segment that
/// crossed the link before it: the echo's delay between the two captures (taken as
/// packets leave the link) is, for most ACKs, the ACK's way back over the 10 ms link
/// plus less than the 1 ms tick of TSval.
#[test]
fn tcp_timestamps_are_on_the_wire_and_time_the_acks() {
    if !have_tshark() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scenario = r#"
duration = "5s"
seed = 2
[topology]
kind = "chain"
[[topology.links]]
rate = "1Gbps"
delay = "1ms"
[[topology.links]]
rate = "100Mbps"
delay = "10ms"
queue = "1bdp"
[[flow]]
protocol = "tcp"
size = "3MB"
timestamps = "rfc7323"
[outputs]
plots = false
pcap = ["link1", "link1.rev"]
"#;
    std::fs::write(tmp.path().join("ts.toml"), scenario).unwrap();
    let o = longhaul(
        &["sim", "run", "ts.toml", "--out", "r", "--quiet"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let read = |file: &str| -> Vec<Vec<String>> {
        let t = Command::new("tshark")
            .current_dir(tmp.path())
            .args(["-r", file, "-Y", "tcp", "-T", "fields"])
            .args(["-e", "frame.time_epoch", "-e", "frame.len", "-e", "tcp.len"])
            .args(["-e", "tcp.flags.syn", "-e", "tcp.options.timestamp.tsval"])
            .args(["-e", "tcp.options.timestamp.tsecr"])
            .output()
            .expect("tshark");
        assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
        String::from_utf8_lossy(&t.stdout)
            .lines()
            .map(|l| l.split('\t').map(str::to_owned).collect())
            .collect()
    };
    let (data, acks) = (read("r/link1.pcap"), read("r/link1.rev.pcap"));
    assert!(data.len() > 2000 && acks.len() > 1000);
    let num = |v: &str| {
        v.parse::<f64>()
            .unwrap_or_else(|_| panic!("not a number: {v:?}"))
    };
    // The SYN offers timestamps and echoes nothing; every segment carries them.
    assert_eq!(data[0][3], "1");
    assert_eq!(data[0][5], "0");
    for seg in data.iter().chain(&acks) {
        assert!(
            !seg[4].is_empty() && !seg[5].is_empty(),
            "no timestamps: {seg:?}"
        );
    }
    let full: Vec<&Vec<String>> = data.iter().filter(|s| s[2] == "1448").collect();
    assert!(full.len() > 2000);
    assert!(
        full.iter().all(|s| s[1] == "1500"),
        "full segments are 1500 bytes"
    );
    // Each ACK echoes a data segment's TSval seen earlier; the echo times it.
    let mut rtts = vec![];
    for a in &acks[1..] {
        let (at, tsecr) = (num(&a[0]), &a[5]);
        let sent = data
            .iter()
            .find(|d| &d[4] == tsecr)
            .unwrap_or_else(|| panic!("ACK at {at} echoes a TSval never sent: {tsecr}"));
        let rtt = at - num(&sent[0]);
        assert!(rtt > 0.0, "echo of a later segment at {at}");
        rtts.push(rtt * 1e3);
    }
    rtts.sort_by(f64::total_cmp);
    let median = rtts[rtts.len() / 2];
    assert!(
        median > 10.0 && median < 11.5,
        "median echo delay {median} ms"
    );
    // None sooner than the way back (the data had to arrive first); later ones are
    // segments stamped in one millisecond and spread out by the bottleneck's queue,
    // and ACKs after a loss, which echo the segment before the hole (RFC 7323
    // section 4.3).
    assert!(rtts[0] > 10.0, "an echo {} ms after its segment", rtts[0]);
}

/// The capture opens in tshark, which dissects the simulated TCP flow: the
/// handshake, the data and the ACKs, with correct checksums. Needs tshark (CI
/// installs it); skipped with a note elsewhere.
#[test]
fn pcap_is_dissected_by_tshark() {
    if !have_tshark() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("small.toml"), SMALL).unwrap();
    let o = longhaul(
        &["sim", "run", "small.toml", "--out", "r", "--quiet"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let lines_of = |file: &str| {
        let t = Command::new("tshark")
            .current_dir(tmp.path())
            .args([
                "-r",
                file,
                "-o",
                "tcp.check_checksum:TRUE",
                "-o",
                "ip.check_checksum:TRUE",
            ])
            .args([
                "-T",
                "fields",
                "-e",
                "tcp.flags.str",
                "-e",
                "tcp.len",
                "-e",
                "tcp.checksum.status",
                "-e",
                "ip.checksum.status",
                "-e",
                "udp.length",
            ])
            .arg("-Y")
            .arg("tcp or udp")
            .output()
            .expect("tshark");
        assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
        String::from_utf8_lossy(&t.stdout)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let lines = lines_of("r/link1.pcap");
    let acks = lines_of("r/link1.rev.pcap");
    assert!(
        acks.len() > 1000 && acks.iter().all(|l| l.contains("A")),
        "ACK direction"
    );
    assert!(lines.len() > 1000, "{} packets", lines.len());
    assert!(
        lines[0].contains("S"),
        "first packet is the SYN: {}",
        lines[0]
    );
    assert!(
        lines.iter().any(|l| l.contains("1448")),
        "full-size data segments"
    );
    assert!(lines.iter().any(|l| l.contains("F")), "a FIN");
    assert!(
        lines
            .iter()
            .any(|l| l.split('\t').nth(4).is_some_and(|u| u == "1480")),
        "UDP datagrams"
    );
    // Checksum status: 1 = good, 0 = bad, 2 = unverified (Wireshark's
    // PROTO_CHECKSUM_E_*). Segments without payload are captured whole and must
    // verify; data segments are captured without their payload, so tshark cannot
    // verify them, but must never find them bad.
    let mut verified = 0;
    for l in lines.iter().chain(&acks) {
        let f: Vec<&str> = l.split('\t').collect();
        assert_eq!(f[3], "1", "bad IP checksum: {l}");
        match (f[1], f[2]) {
            ("", _) => {} // UDP
            ("0", status) => {
                assert_eq!(status, "1", "bad TCP checksum: {l}");
                verified += 1;
            }
            (_, status) => assert_eq!(status, "2", "TCP checksum: {l}"),
        }
    }
    assert!(
        verified > 1000,
        "pure ACKs, SYN and FIN are verified ({verified})"
    );
}

#[test]
fn bad_input_exits_2_with_a_message_naming_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = [
        (
            "rate.toml",
            SMALL.replace("100Mbps", "100MB/s"),
            "topology.links[1].rate",
        ),
        ("syntax.toml", SMALL.replace("[[flow]]", "[[flow]"), "line"),
        (
            "host.toml",
            SMALL.replace("size = \"2MB\"", "size = \"2MB\"\nto = \"n1\""),
            "flow[0].to",
        ),
        (
            "unknown.toml",
            SMALL.replace("seed = 4", "seed = 4\nspeed = 3"),
            "speed",
        ),
        (
            "neg.toml",
            SMALL.replace("duration = \"3s\"", "duration = \"-3s\""),
            "duration",
        ),
    ];
    for (name, text, needle) in bad {
        std::fs::write(tmp.path().join(name), text).unwrap();
        for cmd in ["run", "check"] {
            let o = longhaul(&["sim", cmd, name], tmp.path());
            assert_eq!(o.status.code(), Some(2), "{cmd} {name}: {}", stderr(&o));
            let e = stderr(&o);
            assert!(e.contains(name) && e.contains(needle), "{cmd} {name}: {e}");
            assert!(!e.contains("panicked"), "{e}");
        }
    }
    let o = longhaul(&["sim", "run", "missing.toml"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.toml"));
    let o = longhaul(&["sim", "frobnicate"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        !tmp.path().join("results").exists(),
        "nothing is written for bad input"
    );
    // A results folder that cannot be made is found before anything runs, and
    // the system's reason is said once.
    std::fs::write(tmp.path().join("plain"), "").unwrap();
    std::fs::write(tmp.path().join("small.toml"), SMALL).unwrap();
    let o = longhaul(
        &["sim", "run", "small.toml", "--out", "plain/r", "--quiet"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("plain/r") && e.contains("--out"), "{e}");
    assert_eq!(e.matches("Not a directory").count(), 1, "{e}");
    // --jobs outside 1..=1024 is refused before anything starts (`--jobs 99999`
    // started 99 999 threads for a single run, and had not ended after a minute).
    for jobs in ["0", "99999"] {
        let o = longhaul(
            &["sim", "run", "small.toml", "--jobs", jobs, "--quiet"],
            tmp.path(),
        );
        assert_eq!(o.status.code(), Some(2), "--jobs {jobs}: {}", stderr(&o));
        assert!(stderr(&o).contains("--jobs"), "{}", stderr(&o));
    }
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

#[test]
fn folder_of_scenarios_and_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    std::fs::create_dir(&dir).unwrap();
    let quick = SMALL
        .replace("3s", "1s")
        .replace("trace = true", "trace = false\nplots = false");
    std::fs::write(dir.join("a.toml"), quick.replace("\"small\"", "\"a\"")).unwrap();
    std::fs::write(dir.join("b.toml"), quick.replace("\"small\"", "\"b\"")).unwrap();
    let o = longhaul(&["sim", "run", "set", "--quiet"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tmp.path().join("results/set/a/summary.json").exists());
    assert!(tmp.path().join("results/set/b/summary.json").exists());

    std::fs::write(
        dir.join("sweep.toml"),
        "scenario = \"a.toml\"\n[grid]\nseed = [1, 2]\n",
    )
    .unwrap();
    let o = longhaul(
        &["sim", "run", "set", "--out", "sw", "--jobs", "2"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(tmp.path().join("sw/sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 2, "{csv}");
    assert!(csv.starts_with("point,seed,flow,"));

    let variants = "scenario = \"a.toml\"\n[grid]\nseed = [1, 2]\n\
                    [[variant]]\nname = \"reno\"\n\"flow.0.cc\" = \"newreno\"\n\
                    [[variant]]\nname = \"cubic\"\n\"flow.0.cc\" = \"cubic\"\n";
    std::fs::write(dir.join("sweep.toml"), variants).unwrap();
    let o = longhaul(&["sim", "run", "set", "--out", "sv", "--quiet"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(tmp.path().join("sv/results.md")).unwrap();
    assert!(md.contains("| point | reno | cubic |"), "{md}");
    // Two rows in the goodput table and two in the stability table.
    assert_eq!(
        md.lines().filter(|l| l.starts_with("| seed=")).count(),
        4,
        "{md}"
    );

    std::fs::write(
        dir.join("sweep.toml"),
        "scenario = \"a.toml\"\n[grid]\n\"flow.0.cc\" = [\"compound\"]\n",
    )
    .unwrap();
    let o = longhaul(&["sim", "run", "set"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("sweep point 0") && stderr(&o).contains("flow[0].cc"),
        "{}",
        stderr(&o)
    );
}

/// A folder with several sweep files runs them all, each into a folder named after
/// it, and each writes the report its `[report]` asks for: published figures in
/// brackets, the stability table and the plots.
#[test]
fn several_sweeps_with_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("study");
    std::fs::create_dir(&dir).unwrap();
    let quick = SMALL
        .replace("3s", "2s")
        .replace("trace = true", "trace = false\nplots = false");
    std::fs::write(dir.join("base.toml"), &quick).unwrap();
    let main = "scenario = \"base.toml\"\nname = \"main\"\n[grid]\nseed = [1, 2]\n\
                [[variant]]\nname = \"reno\"\n\"flow.0.cc\" = \"newreno\"\n\
                [[variant]]\nname = \"cubic\"\n\"flow.0.cc\" = \"cubic\"\n\
                [report]\nx = \"seed\"\ntimeseries = { seed = 1 }\nsource = \"a paper\"\n\
                [[report.expected]]\npoint = { seed = 2 }\nvalues = { cubic = 42 }\n";
    std::fs::write(dir.join("sweep.toml"), main).unwrap();
    let other = "scenario = \"base.toml\"\nname = \"other\"\n[grid]\nseed = [3, 4]\n\
                 \"flow.1.rate\" = [\"10Mbps\", \"20Mbps\"]\n\
                 [[variant]]\nname = \"reno\"\n\"flow.0.cc\" = \"newreno\"\n\
                 [report]\nx = \"flow.1.rate\"\naverage = \"seed\"\n\
                 flows = { bulk = 0, udp = 1 }\nmetrics = [\"completion\", \"loss\", \"mathis\"]\n\
                 together = [[\"goodput\", \"mathis\"]]\npreface = \"Paper: *it holds*.\"\n";
    std::fs::write(dir.join("other.sweep.toml"), other).unwrap();
    let o = longhaul(
        &["sim", "run", "study", "--out", "out", "--quiet"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = tmp.path().join("out");
    let md = std::fs::read_to_string(out.join("main/results.md")).unwrap();
    assert!(md.contains("published figure (a paper)"), "{md}");
    let row2 = md.lines().find(|l| l.starts_with("| seed=2 |")).expect(&md);
    assert!(row2.ends_with("(42) |"), "{row2}");
    assert!(md.contains("## Stability"), "{md}");
    for plot in ["plots/timeseries-seed=1.png", "plots/vs-seed.png"] {
        assert!(md.contains(plot), "{md}");
        let bytes = std::fs::read(out.join("main").join(plot)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{plot}");
    }
    // Per-flow metrics: a table and a plot per metric, a column per flow.
    let md = std::fs::read_to_string(out.join("other/results.md")).unwrap();
    assert!(
        md.contains("## completion time (s)\n\n| point | bulk | udp |"),
        "{md}"
    );
    assert!(md.contains("## loss rate"), "{md}");
    assert!(md.contains("mean over the values of `seed`"), "{md}");
    assert!(md.starts_with("# other\n\nPaper: *it holds*.\n"), "{md}");
    assert!(
        out.join("other/plots/goodput+mathis-vs-flow.1.rate.png")
            .exists(),
        "{md}"
    );
    // The Mathis bound exists for the TCP flow only.
    let mathis = &md[md.find("## Mathis bound").expect(&md)..];
    let row = mathis
        .lines()
        .find(|l| l.starts_with("| flow.1.rate="))
        .unwrap();
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert!(cells[2].parse::<f64>().is_ok_and(|v| v > 0.0), "{row}");
    assert_eq!(cells[3], "-", "{row}");
    // Two seeds averaged into each of the two rates, in three tables.
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| flow.1.rate="))
            .count(),
        6,
        "{md}"
    );
    assert!(
        out.join("other/plots/completion-vs-flow.1.rate.png")
            .exists(),
        "{md}"
    );
    assert!(out.join("other/point-0000/summary.json").exists());
    let csv = std::fs::read_to_string(out.join("main/sweep.csv")).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",goodput_cv,transfer_time_s,first_round_bytes"),
        "{csv}"
    );

    // Two sweeps of one name would write into one folder.
    std::fs::write(dir.join("other.sweep.toml"), other.replace("other", "main")).unwrap();
    let o = longhaul(&["sim", "run", "study"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("also the name of"), "{}", stderr(&o));
}

#[test]
fn example_prints_a_valid_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let o = longhaul(&["sim", "example"], tmp.path());
    assert!(o.status.success());
    std::fs::write(tmp.path().join("ex.toml"), &o.stdout).unwrap();
    let o = longhaul(&["sim", "check", "ex.toml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A UDP source whose rate makes the run hours long (2 Tb/s for 10 s: 1.7e9
/// packets, each simulated) is valid, with a warning naming it; one of 500 Mb/s
/// gets none. (It used to start without a word.)
#[test]
fn a_udp_source_that_makes_the_run_long_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    for (rate, warned) in [("2Tbps", true), ("500Mbps", false)] {
        let text = format!(
            "duration = \"10s\"\n[topology]\nkind = \"chain\"\n[[topology.links]]\n\
             rate = \"1Gbps\"\ndelay = \"1ms\"\n[[flow]]\nprotocol = \"udp\"\nrate = \"{rate}\"\n"
        );
        std::fs::write(tmp.path().join("udp.toml"), text).unwrap();
        let o = longhaul(&["sim", "check", "udp.toml"], tmp.path());
        assert!(o.status.success(), "{rate}: {}", stderr(&o));
        let said = stderr(&o).contains("the UDP source n0 -> n1, may send 1.7e9 packets");
        assert_eq!(said, warned, "{rate}: {}", stderr(&o));
    }
}

/// A TCP flow over 999 999 999 s of simulated time (which used to run silently for
/// ever) is valid, with a warning that estimates the wall time in hours; the same
/// flow for 60 s gets none, and so does a finite one whose size bounds its packets.
#[test]
fn a_tcp_flow_that_makes_the_run_long_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    for (duration, interval, size, warned) in [
        ("999999999s", "1000000s", "", true),
        ("60s", "1s", "", false),
        ("999999999s", "1000000s", "size = \"1GB\"\n", false),
    ] {
        let text = format!(
            "duration = \"{duration}\"\nsample_interval = \"{interval}\"\n[topology]\nkind = \"chain\"\n\
             [[topology.links]]\nrate = \"1Gbps\"\ndelay = \"10ms\"\n[[flow]]\nprotocol = \"tcp\"\n{size}"
        );
        std::fs::write(tmp.path().join("tcp.toml"), text).unwrap();
        let o = longhaul(&["sim", "check", "tcp.toml"], tmp.path());
        assert!(o.status.success(), "{duration}: {}", stderr(&o));
        let err = stderr(&o);
        let said = err.contains("the TCP flow n0 -> n1, may send") && err.contains("hours");
        assert_eq!(said, warned, "{duration} {size}: {err}");
    }
}

/// A value of the wrong type inside the fourth flow, or inside a link of the
/// topology, is named by its full key path (serde alone names only the tagged table),
/// with exit 2, for `check` and `run` alike.
#[test]
fn a_type_error_names_its_full_key_path() {
    let tmp = tempfile::tempdir().unwrap();
    let flow = "[[flow]]\nprotocol = \"tcp\"\nmss = 1448\n";
    let head =
        "duration = \"1s\"\n[topology]\nkind = \"chain\"\n[[topology.links]]\nrate = \"1Gbps\"\n";
    let cases = [
        (
            format!("{head}delay = \"1ms\"\n{flow}{flow}{flow}[[flow]]\nprotocol = \"tcp\"\nmss = \"big\"\n"),
            "`flow[3].mss`: invalid type: string \"big\", expected u16",
        ),
        (
            format!("{head}delay = \"1ms\"\n{flow}{flow}{flow}[[flow]]\nprotocol = \"udp\"\nrate = 5\n"),
            "`flow[3].rate`: invalid type: integer `5`, expected a string",
        ),
        (
            format!("{head}delay = 5\n{flow}"),
            "`topology.links[0].delay`: invalid type: integer `5`, expected a string",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(tmp.path().join("bad.toml"), &text).unwrap();
        for cmd in ["check", "run"] {
            let o = longhaul(
                &["sim", cmd, "bad.toml", "--quiet"][..if cmd == "run" { 4 } else { 3 }],
                tmp.path(),
            );
            assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
            assert!(stderr(&o).contains(want), "{cmd}: {}", stderr(&o));
        }
    }
}

/// The scenario examples in docs/scenarios.md are valid scenarios, so the
/// documentation cannot drift from the format.
#[test]
fn readme_example_is_valid() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/scenarios.md"
    ))
    .unwrap();
    let section = &readme[readme.find("## Scenario format").expect("section")..];
    // Every block there that is a whole scenario (it sets a duration).
    let mut checked = 0;
    let mut rest = section;
    while let Some(i) = rest.find("```toml\n") {
        let start = i + 8;
        let len = rest[start..].find("```").unwrap();
        let block = &rest[start..start + len];
        rest = &rest[start + len..];
        if !block.lines().any(|l| l.starts_with("duration")) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("example.toml"), block).unwrap();
        let o = longhaul(&["sim", "check", "example.toml"], tmp.path());
        assert!(o.status.success(), "{}\n{block}", stderr(&o));
        checked += 1;
    }
    assert!(checked >= 2, "the main example and the DiffServ one");
}

/// SCTP packets are captured whole: tshark dissects the association (INIT to
/// SHUTDOWN-COMPLETE), finds every CRC32c good, and sees 1460-byte messages cut into
/// DATA chunks of 1452 and 8 bytes (chunk lengths 1468 and 24).
#[test]
fn sctp_pcap_is_dissected_by_tshark_with_good_crc32c() {
    if !have_tshark() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scenario = r#"
duration = "5s"
[topology]
kind = "chain"
[[topology.links]]
rate = "10Mbps"
delay = "10ms"
[[flow]]
protocol = "sctp"
profile = "linux-2.6.15"
files = { count = 3, size = "5000B" }
[outputs]
pcap = ["link0", "link0.rev"]
"#;
    std::fs::write(tmp.path().join("s.toml"), scenario).unwrap();
    let o = longhaul(
        &["sim", "run", "s.toml", "--out", "r", "--quiet"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let fields = |file: &str| {
        let t = Command::new("tshark")
            .current_dir(tmp.path())
            .args(["-r", file, "-o", "sctp.checksum:CRC-32C", "-Y", "sctp"])
            .args([
                "-T",
                "fields",
                "-e",
                "sctp.checksum.status",
                "-e",
                "sctp.chunk_type",
            ])
            .args(["-e", "sctp.chunk_length"])
            .output()
            .expect("tshark");
        assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
        String::from_utf8_lossy(&t.stdout).into_owned()
    };
    let fwd = fields("r/link0.pcap");
    let rev = fields("r/link0.rev.pcap");
    let lines: Vec<&str> = fwd.lines().chain(rev.lines()).collect();
    assert!(lines.len() > 10, "{lines:?}");
    // Checksum status 1 = good (Wireshark's PROTO_CHECKSUM_E_GOOD).
    assert!(lines.iter().all(|l| l.starts_with("1\t")), "{lines:?}");
    let types: String = lines
        .iter()
        .map(|l| l.split('\t').nth(1).unwrap())
        .collect::<Vec<_>>()
        .join(",");
    for t in ["1", "2", "10", "11", "0", "3", "7", "8", "14"] {
        assert!(
            types.split(',').any(|x| x == t),
            "chunk type {t} in {types}"
        );
    }
    assert!(fwd.contains("1468") && fwd.contains("24"), "{fwd}");
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

/// Output piped into a reader that has gone (`longhaul sim bench | head -1`) ends the
/// command quietly with success, as it does for `cat` or `rg`: no panic, no error.
#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["sim", "bench", "--rtt-ms", "1", "--duration-s", "0.1"][..],
        &["sim", "example"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_longhaul"))
            .args(args)
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before the command writes anything: its first write
        // meets a broken pipe.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {:?} {}",
            o.status,
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}

/// A bench too short for any data segment to arrive still prints the run's wall
/// time and events per second (they were NaN: the wall time was derived from the
/// segment rate).
#[test]
fn bench_shorter_than_a_round_trip_prints_its_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["sim", "bench", "--rtt-ms", "100", "--duration-s", "0.01"];
    let o = longhaul(&args[..], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("100 "))
        .unwrap_or_else(|| panic!("no 100 ms row in {out}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    // RTT, goodput, "Mb/s", data segs, events, wall s, ...
    assert_eq!(cols[3], "0", "{out}");
    let wall: f64 = cols[5].parse().unwrap();
    assert!(wall.is_finite() && wall >= 0.0, "{out}");
    assert!(!row.contains("NaN"), "{out}");
}

/// `--flows` runs the reference flow N times over the same path (or a dumbbell of
/// N pairs): each point completes, and its row's figures agree with one another
/// (events per segment is events over segments, every flow counted). Speed is for
/// the bench to print, not for a test to judge.
#[test]
fn bench_with_many_flows_completes_with_consistent_figures() {
    let dir = tempfile::tempdir().unwrap();
    for topology in [&[][..], &["--dumbbell"][..]] {
        let mut args = vec![
            "sim",
            "bench",
            "--flows",
            "1,20",
            "--rate",
            "10Gbps",
            "--cc",
            "cubic",
            "--rtt-ms",
            "10",
            "--duration-s",
            "0.5",
            "--repeat",
            "1",
        ];
        args.extend_from_slice(topology);
        let o = longhaul(&args, dir.path());
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let rows: Vec<Vec<&str>> = out
            .lines()
            .filter(|l| l.contains("(1 runs)"))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "{out}");
        for (row, flows) in rows.iter().zip(["1", "20"]) {
            // RTT, goodput, "Mb/s", segs, events, wall, segs/s, "M", events/s, "M",
            // wall/sim-s, events/seg, flows, ...
            assert_eq!(row[12], flows, "{out}");
            let segs: f64 = row[3].parse().unwrap();
            let events: f64 = row[4].parse().unwrap();
            let per_seg: f64 = row[11].parse().unwrap();
            assert!(segs > 0.0, "{out}");
            assert!((events / segs - per_seg).abs() < 0.006, "{out}");
        }
        assert!(
            out.contains("RTT 10 ms: 20 flows / 1 (median data segs/s): "),
            "{out}"
        );
    }
    // A control the simulator does not have is bad input.
    let o = longhaul(
        &["sim", "bench", "--flows", "2", "--cc", "compound"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("compound"), "{}", stderr(&o));
}

/// The bench runs each RTT `--repeat` times and reports the median with the range,
/// and the ratio of the RTTs' medians.
#[test]
fn bench_repeats_each_rtt_and_reports_the_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "sim",
        "bench",
        "--rtt-ms",
        "1,10",
        "--duration-s",
        "0.2",
        "--repeat",
        "3",
    ];
    let o = longhaul(&args, dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("(3 runs)")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[0].trim_start().starts_with("1 "), "{out}");
    assert!(rows[1].trim_start().starts_with("10 "), "{out}");
    let ratio: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("fastest / slowest RTT (median data segs/s): "))
        .and_then(|r| r.strip_suffix('x'))
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no ratio line in {out}"));
    assert!(ratio >= 1.0, "{out}");
    // The processor the figures belong to, where Linux says what it is.
    if std::path::Path::new("/proc/cpuinfo").exists() {
        let cpu = out
            .lines()
            .find_map(|l| l.strip_prefix("cpu: "))
            .unwrap_or_else(|| panic!("no cpu line in {out}"));
        assert!(cpu.ends_with("CPUs online"), "{out}");
    }
    // One RTT: no ratio to report.
    let o = longhaul(
        &[
            "sim",
            "bench",
            "--rtt-ms",
            "1",
            "--duration-s",
            "0.1",
            "--repeat",
            "2",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("(2 runs)") && !out.contains("fastest / slowest"),
        "{out}"
    );
    // No runs is not a bench.
    let o = longhaul(&["sim", "bench", "--repeat", "0"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// Bench arguments outside what a run can take are bad input (exit 2), not a panic
/// (an infinite or overflowing duration) or a run that samples forever (a duration
/// that rounds to zero).
#[test]
fn bad_bench_arguments_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    // `command` with `bad` (a flag and its value) exits 2 naming the flag; returns
    // the message.
    let refused = |command: &[&str], bad: &[&str]| {
        let args: Vec<&str> = command.iter().chain(bad).copied().collect();
        let o = longhaul(&args, dir.path());
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {e}");
        assert!(
            e.contains(bad[0]) && !e.contains("panicked"),
            "{bad:?}: {e}"
        );
        e
    };
    for bad in [
        &["--duration-s", "inf"][..],
        &["--duration-s", "1e300"][..],
        &["--duration-s", "nan"][..],
        &["--duration-s", "1e-12"][..],
        &["--rtt-ms", "nan"][..],
        &["--rtt-ms", "1,0"][..],
        &["--loss", "1"][..],
    ] {
        let e = refused(&["sim", "bench"], bad);
        // Only the flag that is wrong.
        for other in ["--duration-s", "--rtt-ms", "--loss"] {
            assert!(other == bad[0] || !e.contains(other), "{bad:?}: {e}");
        }
    }
    for bad in [
        &["--channels", "0"][..],
        &["--channels", "1,65"][..],
        &["--megabytes", "0"][..],
        &["--mss", "75"][..],
    ] {
        refused(&["bench", "loopback"], bad);
    }
    // Refused before any namespace is made. (With no runs, `bench emu` reported
    // every rate valid.)
    for bad in [&["--runs", "0"][..], &["--duration", "0s"][..]] {
        refused(&["bench", "emu"], bad);
    }
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

/// A scenario of 10 001 flows is refused by `check` and by `run` alike, exit 2,
/// naming the key and the limit (`check` passed it and `run` failed with exit 1).
#[test]
fn too_many_flows_is_bad_input_for_check_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "duration = \"1s\"\n[topology]\nkind = \"chain\"\n[[topology.links]]\nrate = \"1Gbps\"\ndelay = \"1ms\"\n",
    );
    for _ in 0..10_001 {
        text.push_str("[[flow]]\nprotocol = \"udp\"\nrate = \"1Mbps\"\n");
    }
    std::fs::write(dir.path().join("many.toml"), &text).unwrap();
    for cmd in ["check", "run"] {
        let o = longhaul(&["sim", cmd, "many.toml"], dir.path());
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("flow") && e.contains("at most 10000"),
            "{cmd}: {e}"
        );
    }
}
