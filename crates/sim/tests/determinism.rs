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
