//! Same scenario and seed: byte-identical outputs. Another seed: different outputs.
//! A sweep's results do not depend on the number of threads.

mod common;

use std::path::Path;

use longhaul_sim::{run_to_dir, Job};

const FILES: [&str; 4] = ["summary.json", "flows.csv", "links.csv", "trace.csv"];

fn lossy(seed: u64) -> String {
    let flows = "[[flow]]\nprotocol = \"tcp\"\n[[flow]]\nprotocol = \"tcp\"\ncc = \"cubic\"\nstart = \"1s\"\n\
                 [[flow]]\nprotocol = \"udp\"\nrate = \"50Mbps\"\narrivals = \"poisson\"\n\
                 [[flow]]\nprotocol = \"udt\"\ncc = \"ar-udt\"\nstart = \"2s\"\n";
    common::chain("20s", "200Mbps", "10ms", "0.5bdp", 1e-4, flows)
        .replace("seed = 1", &format!("seed = {seed}"))
        .replace(
            "plots = false",
            "plots = false\ntrace = true\ntrace_interval = \"50ms\"",
        )
}

fn outputs(dir: &Path) -> Vec<Vec<u8>> {
    FILES
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect()
}

#[test]
fn same_seed_same_bytes_other_seed_differs() {
    let tmp = tempfile::tempdir().unwrap();
    let s1 = common::scenario(&lossy(1));
    run_to_dir(&s1, &tmp.path().join("a")).unwrap();
    run_to_dir(&s1, &tmp.path().join("b")).unwrap();
    run_to_dir(&common::scenario(&lossy(2)), &tmp.path().join("c")).unwrap();
    let (a, b, c) = (
        outputs(&tmp.path().join("a")),
        outputs(&tmp.path().join("b")),
        outputs(&tmp.path().join("c")),
    );
    for (i, f) in FILES.iter().enumerate() {
        assert!(!a[i].is_empty(), "{f} is empty");
        assert_eq!(
            a[i], b[i],
            "{f} differs between two runs with the same seed"
        );
        assert_ne!(a[i], c[i], "{f} is the same with another seed");
    }
}

#[test]
fn sweep_results_do_not_depend_on_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("grid");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("base.toml"), lossy(1).replace("20s", "5s")).unwrap();
    std::fs::write(
        dir.join("sweep.toml"),
        "scenario = \"base.toml\"\n[grid]\nseed = [1, 2, 3]\n\"topology.links.1.delay\" = [\"5ms\", \"20ms\"]\n",
    )
    .unwrap();
    let job = Job::load(&dir).unwrap();
    assert_eq!(job.len(), 6);
    let run_with = |threads: usize, out: &Path| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| job.run(out, &|| {})).unwrap()
    };
    let one = run_with(1, &tmp.path().join("one"));
    let two = run_with(2, &tmp.path().join("two"));
    assert_eq!(one, two);
    let csv1 = std::fs::read(tmp.path().join("one/sweep.csv")).unwrap();
    let csv2 = std::fs::read(tmp.path().join("two/sweep.csv")).unwrap();
    assert_eq!(csv1, csv2);
    for i in 0..6 {
        let p = format!("point-{i:04}/summary.json");
        assert_eq!(
            std::fs::read(tmp.path().join("one").join(&p)).unwrap(),
            std::fs::read(tmp.path().join("two").join(&p)).unwrap()
        );
    }
    // Points differ from each other (the grid really applies).
    assert_ne!(
        one[0].flows[0].delivered_bytes,
        one[1].flows[0].delivered_bytes
    );
}

/// The TCP engine's header prediction is an optimisation only: a lossy run with
/// several flows gives byte-identical results with it turned off.
#[test]
fn header_prediction_does_not_change_results() {
    let on = common::scenario(&lossy(5));
    let mut off = on.clone();
    for f in &mut off.flows {
        if let longhaul_sim::app::FlowSpec::Tcp(t) = f {
            t.config.header_prediction = false;
        }
    }
    let a = longhaul_sim::simulate(&on).unwrap();
    let b = longhaul_sim::simulate(&off).unwrap();
    assert_eq!(a, b);
    assert!(
        a.summary.flows[0].retransmits.unwrap() > 10,
        "the run exercises recovery"
    );
}

/// Three pairs across a dumbbell whose egress links are slower than the bottleneck
/// and lossy: the routers on both sides pass packets on, so the bottleneck and the
/// slow access links are cut-through, and the egress links, which queue and drop,
/// run ahead of the clock.
fn dumbbell() -> String {
    r#"
duration = "8s"
seed = 4
sample_interval = "50ms"
[topology]
kind = "dumbbell"
pairs = 3
access = { rate = "100Mbps", delay = "1ms" }
bottleneck = { rate = "100Mbps", delay = "10ms", queue = "0.5bdp", loss = 1e-4 }
egress = { rate = "30Mbps", delay = "2ms", queue = "20pkts", loss = 1e-3 }
[[flow]]
protocol = "tcp"
[[flow]]
protocol = "tcp"
cc = "cubic"
start = "500ms"
[[flow]]
protocol = "udt"
start = "1s"
[outputs]
plots = false
trace = true
trace_interval = "20ms"
"#
    .to_string()
}

/// Receivers on an early host (the only way in is a link whose far end it is) take
/// their packets ahead of the clock, so what that can disturb is made frequent here:
/// delayed ACKs whose timers fire between packets (finite transfers end on an odd
/// segment; a third flow acknowledges every third), and samples and traces every
/// few milliseconds, well inside the 15 ms a host runs ahead.
fn timers() -> String {
    let flows = "[[flow]]\nprotocol = \"tcp\"\nack_every = 2\ndelayed_ack_timeout = \"40ms\"\n\
                 size = \"3MB\"\n\
                 [[flow]]\nprotocol = \"tcp\"\ncc = \"cubic\"\nack_every = 2\n\
                 delayed_ack_timeout = \"25ms\"\nstart = \"300ms\"\nsize = \"1501kB\"\n\
                 [[flow]]\nprotocol = \"tcp\"\nack_every = 3\nstart = \"1s\"\n";
    common::chain("3s", "50Mbps", "15ms", "0.5bdp", 1e-3, flows)
        .replace("seed = 1", "seed = 1\nsample_interval = \"1ms\"")
        .replace(
            "plots = false",
            "plots = false\ntrace = true\ntrace_interval = \"3ms\"",
        )
}

/// Two hosts and one lossy link that queues: the sender's own link leads into the
/// early host.
fn direct() -> String {
    r#"
duration = "3s"
seed = 2
sample_interval = "2ms"
[topology]
kind = "chain"
[[topology.links]]
rate = "20Mbps"
delay = "8ms"
queue = "20pkts"
loss = 2e-3
[[flow]]
protocol = "tcp"
ack_every = 2
[[flow]]
protocol = "tcp"
size = "777kB"
start = "500ms"
[outputs]
plots = false
trace = true
trace_interval = "5ms"
"#
    .to_string()
}

/// A dumbbell of more pairs than a link is cut through onto: the bottleneck's
/// arrivals are events, and only the access links and the receivers' hosts behind
/// them skip theirs. The first pairs' flows are crossed so that hosts hold several
/// ends (a sender and a receiver on one host is no early host), with finite
/// transfers, delayed ACKs, and traces every few milliseconds.
fn many() -> String {
    let mut text = r#"
duration = "3s"
seed = 6
sample_interval = "4ms"
[topology]
kind = "dumbbell"
pairs = 40
access = { rate = "1Gbps", delay = "6ms" }
bottleneck = { rate = "200Mbps", delay = "10ms", queue = "0.3bdp", loss = 1e-3 }
[[flow]]
protocol = "tcp"
from = "s0"
to = "r0"
[[flow]]
protocol = "tcp"
cc = "cubic"
from = "s0"
to = "r1"
start = "700ms"
size = "2MB"
[[flow]]
protocol = "tcp"
from = "s1"
to = "r0"
ack_every = 2
start = "200ms"
[[flow]]
protocol = "tcp"
from = "r1"
to = "s1"
start = "1500ms"
"#
    .to_string();
    for i in 2..40 {
        text += &format!(
            "[[flow]]\nprotocol = \"tcp\"\ncc = \"cubic\"\nfrom = \"s{i}\"\nto = \"r{i}\"\nstart = \"{}ms\"\n",
            i * 10
        );
    }
    text + "[outputs]\nplots = false\ntrace = true\ntrace_interval = \"7ms\"\n"
}

/// Cut-through links (no event where a router only passes packets on, nor where an
/// early host takes a packet) are an optimisation only: with an event at every hop
/// instead, a chain and a dumbbell with random losses, queue overflows and several
/// protocols, a chain whose receivers' timers and observers keep falling between
/// packets, two hosts on one link, and a dumbbell of more pairs than a link is cut
/// through onto, give the same results, series, traces and
/// captures, with far fewer events (and, at most, a different peak of packets
/// alive).
#[test]
fn cut_through_links_do_not_change_results() {
    use longhaul_sim::simulation::Simulation;
    // Two TCP flows on the chain: a Poisson source's sends or UDT's pacing timer can
    // fall on the same nanosecond as an ACK's arrival at the sender, and simultaneous
    // events run in the order they were scheduled, which a cut-through hop changes
    // (either order is as right as the other, but the runs then part). On the
    // dumbbell UDT has a host of its own.
    let chain = lossy(3)
        .replace(
            "[[flow]]\nprotocol = \"udp\"\nrate = \"50Mbps\"\narrivals = \"poisson\"\n",
            "",
        )
        .replace(
            "[[flow]]\nprotocol = \"udt\"\ncc = \"ar-udt\"\nstart = \"2s\"\n",
            "",
        );
    assert!(!chain.contains("udp") && !chain.contains("udt"));
    // With what share of the events at most (the 40 pairs keep an event at the
    // bottleneck and at each sender).
    for (name, text, share) in [
        ("chain", chain, 0.75),
        ("dumbbell", dumbbell(), 0.75),
        ("timers", timers(), 0.75),
        ("direct", direct(), 0.75),
        ("many", many(), 0.9),
    ] {
        let s = common::scenario(&text);
        let tmp = tempfile::tempdir().unwrap();
        let run = |cut: bool| {
            let dir = tmp.path().join(if cut { "cut" } else { "hops" });
            std::fs::create_dir(&dir).unwrap();
            let mut cfg = s.run.clone();
            cfg.pcap = s
                .topology
                .links
                .iter()
                .map(|l| (l.2.name.clone(), dir.join(format!("{}.pcap", l.2.name))))
                .collect();
            let r = Simulation::new(cfg.clone(), s.topology.clone(), s.flows.clone())
                .unwrap()
                .with_cut_through(cut)
                .run()
                .unwrap();
            let captures: Vec<Vec<u8>> = cfg
                .pcap
                .iter()
                .map(|p| std::fs::read(&p.1).unwrap())
                .collect();
            (r, captures)
        };
        let (mut cut, cut_pcap) = run(true);
        let (hops, hops_pcap) = run(false);
        assert!(
            (cut.summary.events as f64) < hops.summary.events as f64 * share,
            "{name}: cut-through saved few events ({} against {})",
            cut.summary.events,
            hops.summary.events
        );
        // The simulator's own figures: fewer events, and a packet dropped at the
        // link after a cut-through hop frees its slot when it is sent, not later.
        cut.summary.events = hops.summary.events;
        cut.summary.peak_packets = hops.summary.peak_packets;
        // Field by field first, so a failure says where the two part.
        let (a, b) = (
            serde_json::to_string_pretty(&cut.summary).unwrap(),
            serde_json::to_string_pretty(&hops.summary).unwrap(),
        );
        for (x, y) in a.lines().zip(b.lines()) {
            assert_eq!(x, y, "{name}: summaries differ with cut-through links");
        }
        assert_eq!(cut.goodput_series, hops.goodput_series, "{name}: goodput");
        assert_eq!(
            cut.link_tput_series, hops.link_tput_series,
            "{name}: link series"
        );
        assert_eq!(cut.queue_series, hops.queue_series, "{name}: queue series");
        assert!(cut.trace == hops.trace, "{name}: traces differ");
        assert_eq!(cut, hops, "{name}: results differ with cut-through links");
        for (i, (x, y)) in cut_pcap.iter().zip(&hops_pcap).enumerate() {
            assert!(x == y, "{name}: captures of {} differ", hops.link_names[i]);
        }
        // The run exercises what the cut-through path must get right.
        let links = &hops.summary.links;
        assert!(
            links.iter().any(|l| l.drops_queue > 0),
            "{name}: no overflow"
        );
        assert!(
            links.iter().any(|l| l.drops_loss > 0),
            "{name}: no random loss"
        );
        assert!(
            hops.queue_series.iter().flatten().any(|&q| q > 1),
            "{name}: no queue"
        );
    }
}

/// A results folder given again holds the new run's outputs only: the trace, plot
/// and pcap that an earlier run wrote there and this one does not are removed; a
/// file of the user's in the folder stays, and so does anything outside it or below
/// it that a doctored list of outputs names (and a folder listed as a file).
#[test]
fn a_folder_given_again_holds_only_the_new_runs_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    let plain = common::chain(
        "2s",
        "100Mbps",
        "5ms",
        "1bdp",
        0.0,
        "[[flow]]\nprotocol = \"tcp\"\n",
    );
    let full = plain.replace(
        "plots = false",
        "plots = true\ntrace = true\ntrace_interval = \"100ms\"\npcap = [\"link1\"]",
    );
    run_to_dir(&common::scenario(&full), &dir).unwrap();
    let earlier = ["trace.csv", "cwnd.png", "throughput.png", "link1.pcap"];
    for f in earlier {
        assert!(dir.join(f).exists(), "{f} was not written");
    }
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    run_to_dir(&common::scenario(&plain), &dir).unwrap();
    for f in earlier {
        assert!(
            !dir.join(f).exists(),
            "{f} of the earlier run is still there"
        );
    }
    for f in ["summary.json", "flows.csv", "links.csv", "notes.txt"] {
        assert!(dir.join(f).exists(), "{f} is gone");
    }

    // Only plain names inside the folder are ever removed.
    // A folder outside, with a list of its own, is not touched either.
    std::fs::write(tmp.path().join("outside"), "keep").unwrap();
    std::fs::create_dir(tmp.path().join("up")).unwrap();
    std::fs::write(tmp.path().join("up/y"), "keep").unwrap();
    std::fs::write(
        tmp.path()
            .join("up")
            .join(longhaul_output::folder::MANIFEST),
        "y\n",
    )
    .unwrap();
    std::fs::write(
        dir.join(longhaul_output::folder::MANIFEST),
        "../outside\nsub/x\n../up/\nsub\n",
    )
    .unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/x"), "keep").unwrap();
    run_to_dir(&common::scenario(&plain), &dir).unwrap();
    assert!(tmp.path().join("outside").exists() && dir.join("sub/x").exists());
    assert!(tmp.path().join("up/y").exists());
    assert!(dir.join("notes.txt").exists());
}

/// The same for a sweep's folder and a folder of scenarios: a grid that shrank
/// leaves no `point-NNNN/` of the earlier grid and no plot of its rows, a scenario
/// taken out of the folder leaves no results folder. A stale point folder that holds
/// a file of the user's stays with that file in it; the user's files elsewhere stay.
#[test]
fn a_folder_given_again_holds_only_the_new_sweep_or_scenarios() {
    let tmp = tempfile::tempdir().unwrap();
    let base = common::chain(
        "1s",
        "100Mbps",
        "5ms",
        "1bdp",
        0.0,
        "[[flow]]\nprotocol = \"tcp\"\n",
    );
    let grid = tmp.path().join("grid");
    std::fs::create_dir(&grid).unwrap();
    std::fs::write(grid.join("base.toml"), &base).unwrap();
    let sweep = |delays: &str| {
        std::fs::write(
            grid.join("sweep.toml"),
            format!(
                "scenario = \"base.toml\"\n[grid]\n\"topology.links.1.delay\" = [{delays}]\n\
                 [[variant]]\nname = \"tcp\"\n\"flow.0\" = {{ protocol = \"tcp\" }}\n\
                 [report]\ntimeseries = {{}}\n"
            ),
        )
        .unwrap();
        Job::load(&grid).unwrap()
    };
    let out = tmp.path().join("out");
    sweep("\"5ms\", \"10ms\", \"20ms\"")
        .run(&out, &|| {})
        .unwrap();
    let plots = |out: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(out.join("plots"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".png"))
            .collect();
        v.sort();
        v
    };
    assert_eq!(plots(&out).len(), 3, "{:?}", plots(&out));
    for i in 0..3 {
        assert!(out.join(format!("point-{i:04}/summary.json")).exists());
    }
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    std::fs::write(out.join("point-0001/mine.txt"), "mine").unwrap();

    sweep("\"7ms\"").run(&out, &|| {}).unwrap();
    assert_eq!(plots(&out).len(), 1, "{:?}", plots(&out));
    assert!(plots(&out)[0].contains("7ms"), "{:?}", plots(&out));
    assert!(out.join("point-0000/summary.json").exists());
    assert!(
        !out.join("point-0002").exists(),
        "a point of the earlier grid stayed"
    );
    let kept: Vec<_> = std::fs::read_dir(out.join("point-0001"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        kept,
        ["mine.txt"],
        "the stale point keeps the user's file only"
    );
    assert!(out.join("notes.txt").exists());

    // A folder of scenarios run into the same folder: the sweep's outputs go.
    let many = tmp.path().join("many");
    std::fs::create_dir(&many).unwrap();
    for name in ["a", "b"] {
        std::fs::write(
            many.join(format!("{name}.toml")),
            format!("name = \"{name}\"\n{base}"),
        )
        .unwrap();
    }
    Job::load(&many).unwrap().run(&out, &|| {}).unwrap();
    assert!(out.join("a/summary.json").exists() && out.join("b/summary.json").exists());
    for gone in ["sweep.csv", "results.md", "plots", "point-0000"] {
        assert!(!out.join(gone).exists(), "{gone} of the sweep stayed");
    }
    std::fs::remove_file(many.join("b.toml")).unwrap();
    Job::load(&many).unwrap().run(&out, &|| {}).unwrap();
    // One scenario left: the folder is its results folder.
    assert!(out.join("summary.json").exists());
    assert!(!out.join("a").exists() && !out.join("b").exists());
    assert!(out.join("notes.txt").exists() && out.join("point-0001/mine.txt").exists());
}

/// A seed given over the file's (`sim run --seed`, the Python front's `seed=`) is that
/// seed written in the file, for every protocol: UDT's randomised decrease included,
/// which once kept the file's seed.
#[test]
fn an_overridden_seed_is_the_seed_written_in_the_file() {
    let mut overridden = common::scenario(&lossy(1));
    overridden.run.seed = 7;
    let written = common::scenario(&lossy(7));
    let a = longhaul_sim::simulate(&overridden).unwrap().summary;
    let b = longhaul_sim::simulate(&written).unwrap().summary;
    assert_eq!(a, b);
    let own = longhaul_sim::simulate(&common::scenario(&lossy(1)))
        .unwrap()
        .summary;
    assert_ne!(
        a.flows[3], own.flows[3],
        "the UDT flow must depend on the seed"
    );
}
