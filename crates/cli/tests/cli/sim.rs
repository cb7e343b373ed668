//! `longhaul sim`: scenarios and sweeps run, check and report; captures dissected
//! by tshark; bad scenarios refused with exit 2, naming the key.

use super::*;

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
