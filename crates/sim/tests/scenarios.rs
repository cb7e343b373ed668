//! Scenario files: what loads, and the errors bad files get (file, key, reason).

mod common;

use std::path::Path;

use longhaul_sim::{Scenario, ScenarioError};

fn err(text: &str) -> String {
    match Scenario::parse(text, Path::new("bad.toml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn base() -> String {
    common::chain(
        "10s",
        "1Gbps",
        "10ms",
        "1bdp",
        0.0,
        "[[flow]]\nprotocol = \"tcp\"\n",
    )
}

#[test]
fn the_reference_scenario_loads() {
    let s = Scenario::parse(
        longhaul_sim::scenario::REFERENCE,
        Path::new("reference.toml"),
    )
    .unwrap();
    assert_eq!(s.run.name, "reference");
    assert_eq!(s.flows.len(), 1);
    // 1 BDP of a 1 Gb/s, 100 ms path.
    assert_eq!(
        s.topology.link("link1").map(|l| l.limit),
        Some(longhaul_model::QueueLimit::Bytes(12_500_000))
    );
}

#[test]
fn errors_name_the_file_the_key_and_the_fix() {
    let cases: Vec<(String, &[&str])> = vec![
        (
            base().replace("rate = \"1Gbps\"", "rate = \"1GB/s\""),
            &["bad.toml", "topology.links[1].rate", "1Gbps"],
        ),
        (
            base().replace("rate = \"1Gbps\"", "rate = \"1e30Gbps\""),
            &["topology.links[1].rate", "largest rate, 1000 Tbps"],
        ),
        (
            // "10s" for "10ms": the run ends before the flow starts.
            base().replace("protocol = \"tcp\"\n", "protocol = \"tcp\"\nstart = \"10s\"\n"),
            &["flow[0].start", "not before the end of the run (`duration` = \"10s\")"],
        ),
        (
            base().replace("delay = \"10ms\"", "delay = \"10\""),
            &["topology.links[1].delay", "50ms"],
        ),
        (
            base().replace("duration = \"10s\"", "duration = \"0s\""),
            &["`duration`", "longer than zero"],
        ),
        (
            base().replace("loss = 0e0", "loss = 1.5"),
            &["topology.links[1].loss", "probability"],
        ),
        (
            base().replace("queue = \"1bdp\"\nloss", "queue = \"lots\"\nloss"),
            &["topology.links[1].queue", "100pkts"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\nto = \"n7\"\n",
            &["flow[1].to", "no host named `n7`", "n0, n2"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\nfrom = \"n1\"\n",
            &["flow[1].from", "router"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\ncc = \"compound\"\n",
            &["flow[1].cc", "newreno", "cubic", "bbr"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\nrto = \"bsd\"\n",
            &["flow[1].rto", "unknown `bsd`", "rfc6298", "linux"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\nbbr = { startup_growth = 9.0 }\n",
            &["flow[1].bbr", "bbr-lh"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"udt\"\ncc = \"bbr\"\nbbr = { pacing_margin = -1.0 }\n",
            &["flow[1].bbr.pacing_margin", "0 to 0.5"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\ncc = \"bbr\"\nbbr = { cwnd_gain = 0.5 }\n",
            &["flow[1].bbr.cwnd_gain", "1 to 4"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"quic\"\n",
            &["bad.toml", "quic"],
        ),
        (
            base() + "[[base_station]]\nnode = \"n0\"\n",
            &["base_station[0].node", "host"],
        ),
        (
            base() + "[[base_station]]\nnode = \"n1\"\nsnoop = \"sometimes\"\n",
            &["base_station[0].snoop", "adaptive"],
        ),
        (
            base() + "[[base_station]]\nnode = \"n1\"\nsnoop = \"on\"\nadaptive = { interval = \"1s\" }\n",
            &["base_station[0].adaptive", "snoop = \"adaptive\""],
        ),
        (
            base() + "[[base_station]]\nnode = \"n1\"\nretransmit_on_dupack = 3\n",
            &["base_station[0].retransmit_on_dupack", "1", "2"],
        ),
        (
            base() + "[[base_station]]\nnode = \"n1\"\n[[base_station]]\nnode = \"n1\"\n",
            &["base_station[1].node", "already"],
        ),
        (
            base() + "[[flow]]\nper_pair = true\nprotocol = \"tcp\"\n",
            &["bad.toml", "per_pair", "dumbbell"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"sctp\"\nprofile = \"bsd\"\n",
            &["flow[1].profile", "linux-2.6.15", "rfc9260"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"sctp\"\nfiles = { count = 0, size = \"1KB\" }\n",
            &["flow[1].files.count", "from 1"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"sctp\"\nfiles = { count = 5, size = \"1KB\" }\nstreams = 2\n",
            &["flow[1].streams", "5 files"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"sctp\"\nfiles = { count = 5, size = \"1KB\", message = 0 }\n",
            &["flow[1].files.message", "from 1"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"sctp\"\nfiles = { count = 5, size = \"lots\" }\n",
            &["flow[1].files.size", "lots"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"sctp\"\nfiles = { count = 5, size = \"1KB\" }\nmessage = 100\n",
            &["flow[1].message", "files.message"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"sctp\"\nsack_delay = \"1s\"\n",
            &["flow[1].sack_delay", "500ms"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"sctp\"\nmtu = 100\n",
            &["flow[1].mtu", "576"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\nprofile = \"linux-6\"\n",
            &["flow[1].profile", "linux-2.6.15"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\nsize = \"1MB\"\nfiles = { count = 2, size = \"1KB\" }\n",
            &["flow[1].size", "not both"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"udp\"\nrate = \"1Mbps\"\npacket_size = 10\n",
            &["flow[1].packet_size"],
        ),
        (
            base() + "[[flow]]\nprotocol = \"tcp\"\ncolour = \"red\"\n",
            &["bad.toml", "colour"],
        ),
        (
            base().replace("[outputs]", "[outputs]\npcap = [\"link9\"]"),
            &["outputs.pcap[0]", "link1.rev"],
        ),
        (
            base().replace("kind = \"chain\"", "kind = \"ring\""),
            &["bad.toml", "ring"],
        ),
        (
            "duration = \"1s\"\n[topology\n".to_string(),
            &["bad.toml", "line 2"],
        ),
        (
            base().replace("duration = \"10s\"\n", ""),
            &["bad.toml", "duration"],
        ),
        (
            base().replace("seed = 1", "seed = 1\nsample_interval = \"1ns\""),
            &["`sample_interval`", "longer interval"],
        ),
        (
            base().replace("kind = \"chain\"", "kind = \"dumbbell\"\npairs = 5000"),
            &["bad.toml"],
        ),
        (
            "duration = \"1s\"\n[topology]\nkind = \"dumbbell\"\npairs = 2\n\
             access = { rate = \"1Gbps\", delay = \"1ms\" }\naccess_delays = [\"1ms\"]\n\
             bottleneck = { rate = \"1Gbps\", delay = \"1ms\" }\n"
                .to_string(),
            &["`topology.access_delays`", "one delay per pair"],
        ),
        (
            base().replace("protocol = \"tcp\"", "protocol = \"udt\"\nw1 = 0.3"),
            &["flow[0].w1", "ar-udt"],
        ),
        (
            base().replace(
                "protocol = \"tcp\"",
                "protocol = \"udt\"\ncc = \"ar-udt\"\nw1 = 0.8",
            ),
            &["flow[0].w2", "w1 < w2"],
        ),
        (
            base().replace(
                "protocol = \"tcp\"",
                "protocol = \"udt\"\ncc = \"ar-udt\"\nalpha = 1.5",
            ),
            &["flow[0].alpha`: is 1.5", "alpha <= 1"],
        ),
        (
            // Named as `alpha` before: the key at fault is the one named.
            base().replace(
                "protocol = \"tcp\"",
                "protocol = \"udt\"\ncc = \"ar-udt\"\nbeta = 1.0",
            ),
            &["flow[0].beta`: is 1", "1 < beta"],
        ),
        (
            base().replace(
                "protocol = \"tcp\"",
                "protocol = \"udt\"\nprofile = \"udt3\"",
            ),
            &["flow[0].profile", "paper"],
        ),
        (
            base().replace(
                "protocol = \"tcp\"",
                "protocol = \"udt\"\nnak_report = \"often\"",
            ),
            &["flow[0].nak_report", "periodic"],
        ),
        (
            base().replace(
                "protocol = \"tcp\"",
                "protocol = \"udt\"\narrival_clock = \"us\"",
            ),
            &["flow[0].arrival_clock", "\"ns\"", "\"udt4\""],
        ),
        (
            base().replace(
                "protocol = \"tcp\"",
                "protocol = \"udt\"\nspw_scope = \"syn\"",
            ),
            &["flow[0].spw_scope", "ar-udt"],
        ),
        (
            base().replace(
                "protocol = \"tcp\"",
                "protocol = \"udt\"\ncc = \"ar-udt\"\nspw_scope = \"rtt\"",
            ),
            &["flow[0].spw_scope", "persistent"],
        ),
        (
            base().replace("loss = 0e0", "loss = 0e0\negress = { classes = [] }"),
            &["topology.links[1].egress.classes", "at least one class"],
        ),
        (
            base().replace(
                "loss = 0e0",
                "loss = 0e0\negress = { classes = [{ dscp = [64], bandwidth = \"1Mbps\" }] }",
            ),
            &["topology.links[1].egress.classes[0].dscp", "6 bits"],
        ),
        (
            base().replace(
                "loss = 0e0",
                "loss = 0e0\negress = { priority = { dscp = [46], rate = \"1Mbps\" }, \
                 classes = [{ dscp = [46], bandwidth = \"1Mbps\" }] }",
            ),
            &["topology.links[1].egress.classes[0].dscp", "two queues"],
        ),
        (
            base().replace(
                "loss = 0e0",
                "loss = 0e0\negress = { priority = { dscp = [46], rate = \"fast\" }, \
                 classes = [{ bandwidth = \"1Mbps\" }] }",
            ),
            &["topology.links[1].egress.priority.rate", "fast"],
        ),
        (
            base().replace(
                "loss = 0e0",
                "loss = 0e0\negress = { classes = [{ bandwidth = \"1Mbps\", limit = 0 }] }",
            ),
            &["topology.links[1].egress.classes[0].limit", "from 1"],
        ),
        (
            base() + "[[ingress]]\nnode = \"n9\"\n",
            &["ingress[0].node", "n9", "nodes are: n0, n1, n2"],
        ),
        (
            base() + "[[ingress]]\nnode = \"n1\"\nmatch = { protocol = \"icmp\" }\n",
            &["ingress[0].match.protocol", "icmp"],
        ),
        (
            base()
                + "[[ingress]]\nnode = \"n1\"\nmeter = { kind = \"car\", rate = \"1Mbps\", \
                   normal_burst = \"1KB\" }\nviolate = \"drop\"\n",
            &["ingress[0].violate", "srtcm or trtcm"],
        ),
        (
            base() + "[[ingress]]\nnode = \"n1\"\nexceed = \"shape\"\n",
            &["ingress[0].exceed", "shape", "transmit"],
        ),
        (
            base()
                + "[[ingress]]\nnode = \"n1\"\nmeter = { kind = \"trtcm\", pir = \"1Mbps\", \
                   pbs = \"1KB\", cir = \"2Mbps\", cbs = \"1KB\" }\n",
            &["ingress[0].meter.pir", "at least cir"],
        ),
        (
            base() + "[[ingress]]\nnode = \"n1\"\nset_dscp = 99\n",
            &["ingress[0].set_dscp", "0 to 63"],
        ),
        (
            base() + "[[ingress]]\nnode = \"n1\"\ncolors = { yellow = [12] }\n",
            &["ingress[0].colors", "srtcm or trtcm"],
        ),
    ];
    for (text, needles) in cases {
        let msg = err(&text);
        for n in needles {
            assert!(msg.contains(n), "error should mention {n:?}:\n{msg}");
        }
    }
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let e = Scenario::load(Path::new("/nonexistent/x.toml")).unwrap_err();
    assert!(matches!(e, ScenarioError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent/x.toml"));
}

#[test]
fn dumbbell_defaults_pair_flows_with_hosts() {
    let text = r#"
duration = "2s"
[topology]
kind = "dumbbell"
pairs = 2
access = { rate = "1Gbps", delay = "1ms" }
bottleneck = { rate = "100Mbps", delay = "10ms", queue = "1bdp" }
[[flow]]
protocol = "tcp"
[[flow]]
protocol = "tcp"
cc = "cubic"
[outputs]
plots = false
"#;
    let r = common::run(text);
    assert_eq!(r.summary.flows[0].from, "s0");
    assert_eq!(r.summary.flows[1].to, "r1");
    let util = r.summary.link("bottleneck").unwrap().utilisation;
    assert!(util > 0.8, "{util}");
    assert!(r.summary.jain_index > 0.5);
}

/// A sweep's variants replace whole tables (here the flow: TCP, UDT, AR-UDT) and are
/// crossed with the grid; a variant without a name is an error naming it.
#[test]
fn sweep_variants_cross_the_grid() {
    let tmp = tempfile::tempdir().unwrap();
    let base = common::chain(
        "2s",
        "100Mbps",
        "5ms",
        "1bdp",
        0.0,
        "[[flow]]\nprotocol = \"tcp\"\n",
    );
    std::fs::write(tmp.path().join("base.toml"), base).unwrap();
    let sweep = r#"
scenario = "base.toml"
[grid]
seed = [1, 2]
[[variant]]
name = "cubic"
"flow.0" = { protocol = "tcp", cc = "cubic" }
[[variant]]
name = "udt"
"flow.0" = { protocol = "udt" }
[[variant]]
name = "ar-udt"
"flow.0" = { protocol = "udt", cc = "ar-udt" }
"#;
    std::fs::write(tmp.path().join("sweep.toml"), sweep).unwrap();
    let sw = longhaul_sim::Sweep::load(&tmp.path().join("sweep.toml")).unwrap();
    assert_eq!(sw.points.len(), 6);
    let names: Vec<String> = sw
        .points
        .iter()
        .map(|p| longhaul_sim::sweep::describe(&p.params))
        .collect();
    assert_eq!(names[0], "variant=cubic, seed=1");
    assert_eq!(names[5], "variant=ar-udt, seed=2");
    let protocols: Vec<&str> = sw
        .points
        .iter()
        .map(|p| match &p.scenario.flows[0] {
            longhaul_sim::app::FlowSpec::Tcp(_) => "tcp",
            longhaul_sim::app::FlowSpec::Udt(_) => "udt",
            longhaul_sim::app::FlowSpec::Udp(_) => "udp",
            longhaul_sim::app::FlowSpec::Sctp(_) => "sctp",
            longhaul_sim::app::FlowSpec::Blast(_) => "blast",
        })
        .collect();
    assert_eq!(protocols, ["tcp", "tcp", "udt", "udt", "udt", "udt"]);

    std::fs::write(
        tmp.path().join("sweep.toml"),
        "scenario = \"base.toml\"\n[[variant]]\nseed = 3\n",
    )
    .unwrap();
    let e = longhaul_sim::Sweep::load(&tmp.path().join("sweep.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("variant[0].name"), "{e}");

    // Two variants of one name would be one column of the report: an error.
    std::fs::write(
        tmp.path().join("sweep.toml"),
        "scenario = \"base.toml\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n",
    )
    .unwrap();
    let e = longhaul_sim::Sweep::load(&tmp.path().join("sweep.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("variant[1].name") && e.contains("earlier"),
        "{e}"
    );
}

/// A point travels to another process as its document and label (the Python front's
/// backends do this): built again, it is the same scenario. A sweep given as values
/// (`Sweep::from_parts`) is the sweep its file would give.
#[test]
fn sweep_points_travel_as_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let base = common::chain(
        "2s",
        "100Mbps",
        "5ms",
        "1bdp",
        0.0,
        "[[flow]]\nprotocol = \"tcp\"\n",
    );
    std::fs::write(tmp.path().join("base.toml"), &base).unwrap();
    let sweep = r#"
scenario = "base.toml"
[grid]
seed = [1, 2]
"topology.links.0.loss, topology.links.1.loss" = [0.0, 1e-3]
[[variant]]
name = "cubic"
"flow.0" = { protocol = "tcp", cc = "cubic" }
[[variant]]
name = "udt"
"flow.0" = { protocol = "udt" }
"#;
    std::fs::write(tmp.path().join("sweep.toml"), sweep).unwrap();
    let sw = longhaul_sim::Sweep::load(&tmp.path().join("sweep.toml")).unwrap();
    assert_eq!(sw.points.len(), 8);
    for (n, p) in sw.points.iter().enumerate() {
        let (doc, label) = sw.document(n).unwrap();
        let again = longhaul_sim::Scenario::from_value(doc, std::path::Path::new(&label)).unwrap();
        assert_eq!(again, p.scenario, "point {n}");
    }
    assert!(sw.document(8).is_none());

    let file: toml::Table = toml::from_str(sweep).unwrap();
    let grid = file["grid"]
        .as_table()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_array().unwrap().clone()))
        .collect();
    let variants = file["variant"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_table().unwrap().clone())
        .collect();
    let parts = longhaul_sim::Sweep::from_parts(
        &tmp.path().join("sweep.toml"),
        toml::from_str(&base).unwrap(),
        &tmp.path().join("base.toml"),
        grid,
        variants,
        None,
    )
    .unwrap();
    assert_eq!(parts.points.len(), sw.points.len());
    for (a, b) in parts.points.iter().zip(&sw.points) {
        assert_eq!(a.params, b.params);
        assert_eq!(a.scenario, b.scenario);
    }
}

/// A sweep whose `scenario` names something that is not a small regular file (a
/// device that never ends, a folder, a file of many megabytes) gets an error naming
/// that path; it does not read until memory runs out.
#[test]
fn sweep_base_must_be_a_small_regular_file() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = tmp.path().join("sweep.toml");
    let big = tmp.path().join("big.toml");
    // 3 MiB of comment lines: valid TOML, over the 2 MiB limit.
    let line = format!("{}\n", "#".repeat(1023));
    std::fs::write(&big, line.repeat(3 * 1024)).unwrap();
    let cases = [
        ("/dev/zero", "/dev/zero: cannot read: not a regular file"),
        (".", "not a regular file"),
        ("big.toml", "big.toml: cannot read: larger than 2 MiB"),
    ];
    for (base, want) in cases {
        std::fs::write(&sweep, format!("scenario = {base:?}\n[grid]\nseed = [1]\n")).unwrap();
        let e = longhaul_sim::Sweep::load(&sweep).unwrap_err().to_string();
        assert!(e.contains(want), "{base}: {e}");
    }
    // The same checks guard a scenario given directly.
    let e = longhaul_sim::Scenario::load(&big).unwrap_err().to_string();
    assert!(e.contains("larger than 2 MiB"), "{e}");
    assert_eq!(
        longhaul_sim::scenario::MAX_FILE_BYTES,
        2 << 20,
        "the messages above"
    );
}

/// A 50 MB scenario is refused by its size before a byte of it is read (the file
/// here is sparse: reading it would take 50 MB of memory and parsing it gigabytes).
#[test]
fn a_50_mb_scenario_is_refused_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(50_000_000)
        .unwrap();
    let e = longhaul_sim::Scenario::load(&big).unwrap_err();
    assert!(e.to_string().contains("larger than 2 MiB"), "{e}");
}

/// A sweep's `[report]` must name grid keys, grid values and variants; each mistake is
/// an error naming the sweep file and the key.
#[test]
fn sweep_report_is_checked_against_the_grid() {
    let tmp = tempfile::tempdir().unwrap();
    let base = common::chain(
        "2s",
        "100Mbps",
        "5ms",
        "1bdp",
        0.0,
        "[[flow]]\nprotocol = \"tcp\"\n",
    );
    std::fs::write(tmp.path().join("base.toml"), base).unwrap();
    let head = r#"
scenario = "base.toml"
[grid]
"topology.links.1.loss" = [0.0, 1e-4]
"topology.links.1.delay" = ["5ms", "10ms"]
[[variant]]
name = "reno"
"flow.0.cc" = "newreno"
[report]
"#;
    let load = |report: &str| {
        std::fs::write(tmp.path().join("sweep.toml"), format!("{head}{report}")).unwrap();
        longhaul_sim::Sweep::load(&tmp.path().join("sweep.toml"))
    };
    let good = load(
        "x = \"topology.links.1.loss\"\nlog_x = true\nwarmup = \"1s\"\n\
         timeseries = { \"topology.links.1.loss\" = 0 }\n\
         [[report.expected]]\npoint = { \"topology.links.1.loss\" = 0.0, \"topology.links.1.delay\" = \"5ms\" }\n\
         values = { reno = 90 }\n",
    )
    .unwrap();
    assert_eq!(good.report.warmup_s, 1.0);
    // A grid key naming two paths sets both.
    std::fs::write(
        tmp.path().join("sweep.toml"),
        "scenario = \"base.toml\"\n[grid]\n\"topology.links.0.delay, topology.links.1.delay\" = [\"7ms\"]\n",
    )
    .unwrap();
    let two = longhaul_sim::Sweep::load(&tmp.path().join("sweep.toml")).unwrap();
    let delays: Vec<_> = two.points[0]
        .scenario
        .topology
        .links
        .iter()
        .map(|l| l.2.delay)
        .collect();
    assert!(delays.iter().all(|d| d.as_millis() == 7), "{delays:?}");
    assert_eq!(good.report.expected[0].values["reno"], 90.0);
    let cases = [
        ("x = \"seed\"", "report.x", "not a grid key"),
        ("log_x = true", "report.log_x", "needs `report.x`"),
        ("warmup = \"soon\"", "report.warmup", "soon"),
        ("timeseries = { \"topology.links.1.loss\" = 0.5 }", "report.timeseries.topology.links.1.loss", "not one of the grid's values"),
        ("labels = { seed = \"s\" }", "report.labels.seed", "not a grid key"),
        (
            "[[report.expected]]\npoint = { \"topology.links.1.loss\" = 0.0 }\nvalues = { reno = 1 }",
            "report.expected[0].point",
            "every grid key",
        ),
        (
            "[[report.expected]]\npoint = { \"topology.links.1.loss\" = 0.0, \"topology.links.1.delay\" = \"5ms\" }\nvalues = { cubic = 1 }",
            "report.expected[0].values.cubic",
            "not a variant",
        ),
        ("plot = true", "plot", "unknown field"),
        ("flows = { A = 1 }", "report.flows.A", "does not exist"),
        ("flows = { A = 0 }\nmetrics = [\"speed\"]", "report.metrics[0]", "goodput"),
        ("metrics = [\"loss\"]", "report.metrics", "needs `report.flows`"),
        ("average = \"seed\"", "report.average", "not a grid key"),
        (
            "x = \"topology.links.1.loss\"\naverage = \"topology.links.1.loss\"",
            "report.average",
            "cannot also be",
        ),
    ];
    for (report, key, why) in cases {
        let e = load(report).unwrap_err().to_string();
        assert!(
            e.contains("sweep.toml") && e.contains(key) && e.contains(why),
            "{report}: {e}"
        );
    }
}

/// A run configured by hand (not through the loader) with a zero sample or trace
/// interval is refused, not run sampling forever at one instant.
#[test]
fn zero_sampling_intervals_are_refused() {
    let mut s = longhaul_sim::scenario::reference("500us", 0.0).unwrap();
    s.run.duration = std::time::Duration::from_millis(10);
    s.run.trace_interval = None;
    assert!(longhaul_sim::simulate(&s).is_ok());
    let mut zero_sample = s.clone();
    zero_sample.run.sample_interval = std::time::Duration::ZERO;
    let mut zero_trace = s.clone();
    zero_trace.run.trace_interval = Some(std::time::Duration::ZERO);
    for bad in [zero_sample, zero_trace] {
        let e = longhaul_sim::simulate(&bad).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("above zero"), "{e}");
    }
}
