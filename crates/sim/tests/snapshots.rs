//! Results pinned for refactors: every study's main grid and the built-in reference
//! scenario, compared with the snapshots under `tests/snapshots/` (`insta`).
//!
//! A change that moves any of these numbers fails here until somebody looks at the
//! difference and accepts it on purpose (`cargo insta review`, or run the tests with
//! `INSTA_UPDATE=always` and read the diff before committing). Refactors must leave
//! them untouched: the simulator is deterministic, so "identical" means bit-identical
//! (floats are printed in Rust's shortest round-trip form).
//!
//! Each study is its `sweep.toml` (the grid its README calls the main one); the other
//! `*.sweep.toml` files vary the same code paths and would only add minutes.

use std::fmt::Write as _;
use std::path::Path;

use longhaul_sim::sweep::describe;
use longhaul_sim::{simulate, Scenario, Summary, Sweep};
use rayon::prelude::*;

/// Key numbers of one run, a line per flow, transfer and link direction.
fn key_numbers(label: &str, s: &Summary, out: &mut String) {
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let optf = |v: Option<f64>| v.map_or("-".to_string(), |v| v.to_string());
    writeln!(out, "## {label}").unwrap();
    writeln!(
        out,
        "events {} peak_packets {} jain {}",
        s.events, s.peak_packets, s.jain_index
    )
    .unwrap();
    for f in &s.flows {
        writeln!(
            out,
            "flow {} {} delivered {} goodput {} completion {} retx {} rto {} transfer_time {} rounds {:?}",
            f.id,
            f.protocol,
            f.delivered_bytes,
            f.goodput_mbps,
            optf(f.completion_time_s),
            opt(f.retransmits),
            opt(f.timeouts),
            optf(f.transfer_time_s),
            f.round_bytes.as_deref().unwrap_or(&[]),
        )
        .unwrap();
    }
    for t in &s.transfers {
        writeln!(
            out,
            "transfer {} written {} throughput {} completion {} held {} control {}+{}",
            t.name,
            t.written_bytes,
            t.throughput_mbps,
            optf(t.completion_time_s),
            t.peak_held_bytes,
            t.control_exchanges,
            t.control_retransmits,
        )
        .unwrap();
    }
    for l in &s.links {
        writeln!(
            out,
            "link {} delivered {} drops {}/{}/{} max_queue {}",
            l.name,
            l.delivered_pkts,
            l.drops_queue,
            l.drops_loss,
            l.drops_policed,
            l.max_queue_pkts
        )
        .unwrap();
    }
    for b in &s.base_stations {
        writeln!(
            out,
            "station {} processed {} drops {} local_retx {}",
            b.node, b.processed, b.drops, b.local_retransmits
        )
        .unwrap();
    }
}

fn study(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../studies")
        .join(name)
        .join("sweep.toml");
    let sweep = Sweep::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let summaries: Vec<Summary> = sweep
        .points
        .par_iter()
        .map(|p| simulate(&p.scenario).expect("study point runs").summary)
        .collect();
    let mut out = String::new();
    for (p, s) in sweep.points.iter().zip(&summaries) {
        key_numbers(&describe(&p.params), s, &mut out);
    }
    out
}

#[test]
fn study_ar_udt() {
    insta::assert_snapshot!(study("ar-udt"));
}

#[test]
fn study_diffserv() {
    insta::assert_snapshot!(study("diffserv"));
}

#[test]
fn study_parallel_transfer() {
    insta::assert_snapshot!(study("parallel-transfer"));
}

#[test]
fn study_sctp_slow_start() {
    insta::assert_snapshot!(study("sctp-slow-start"));
}

#[test]
fn study_snoop() {
    insta::assert_snapshot!(study("snoop"));
}

/// The README's first command runs this scenario; its whole summary is pinned.
#[test]
fn reference_summary() {
    let s = Scenario::parse(
        longhaul_sim::scenario::REFERENCE,
        Path::new("<built-in reference>"),
    )
    .unwrap();
    insta::assert_json_snapshot!(simulate(&s).unwrap().summary);
}
