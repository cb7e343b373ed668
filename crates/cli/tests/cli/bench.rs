//! `longhaul bench` and `sim bench`: figures consistent with one another, repeats
//! and ratios reported, bad arguments refused, a closed pipe ending quietly.

use super::*;

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
    // Nor are its multiples infinite or NaN: with nothing delivered there is nothing
    // to divide, and the lines say so.
    let args = [
        "sim",
        "bench",
        "--rtt-ms",
        "100",
        "--duration-s",
        "0.01",
        "--flows",
        "1,3",
        "--dumbbell",
        "--repeat",
        "1",
    ];
    let o = longhaul(&args[..], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("RTT 100 ms: 3 flows / 1 (median data segs/s): -")
            && out.contains("RTT 100 ms, 3 pairs (dumbbell): cost per data segment - "),
        "{out}"
    );
    assert!(!out.contains("inf") && !out.contains("NaN"), "{out}");
}

/// `--flows` runs the reference flow N times over the same path (or a dumbbell of
/// N pairs): each point completes, and its row's figures agree with one another
/// (events per segment is events over segments, every flow counted). Points that
/// are not the reference scenario are set against it: the reference flow runs
/// beside them (a `ref` row), and each gets a line with its cost per segment as a
/// multiple of the reference's, which is the reference's median rate over its own.
/// Speed is for the bench to print, not for a test to judge.
#[test]
fn bench_with_many_flows_completes_with_consistent_figures() {
    let dir = tempfile::tempdir().unwrap();
    // The single-flow bench at 10 ms: the `ref` rows must be this run (its 60
    // simulated seconds, whatever `--duration-s` the points have).
    let o = longhaul(
        &["sim", "bench", "--rtt-ms", "10", "--repeat", "1"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let single = String::from_utf8_lossy(&o.stdout).to_string();
    let single: Vec<&str> = single
        .lines()
        .find(|l| l.contains("(1 runs)"))
        .unwrap_or_else(|| panic!("no row in {single}"))
        .split_whitespace()
        .collect();
    for (topology, what) in [(&[][..], "flow"), (&["--dumbbell"][..], "pair")] {
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
        assert_eq!(rows.len(), 3, "{out}");
        // Segments and events: the reference is the single-flow bench's run.
        assert_eq!(rows[0][3..5], single[3..5], "{out}");
        let mut rates = vec![];
        for (row, flows) in rows.iter().zip(["ref", "1", "20"]) {
            // RTT, goodput, "Mb/s", segs, events, wall, segs/s, "M", events/s, "M",
            // wall/sim-s, events/seg, flows, ...
            assert_eq!(row[12], flows, "{out}");
            let segs: f64 = row[3].parse().unwrap();
            let events: f64 = row[4].parse().unwrap();
            let per_seg: f64 = row[11].parse().unwrap();
            assert!(segs > 0.0, "{out}");
            assert!((events / segs - per_seg).abs() < 0.006, "{out}");
            rates.push(row[6].parse::<f64>().unwrap());
        }
        assert!(
            out.contains("RTT 10 ms: 20 flows / 1 (median data segs/s): "),
            "{out}"
        );
        let suffix = if what == "pair" { " (dumbbell)" } else { "" };
        for (n, label) in [(1, format!("1 {what}")), (2, format!("20 {what}s"))] {
            let prefix = format!("RTT 10 ms, {label}{suffix}: cost per data segment ");
            let cost: f64 = out
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .and_then(|r| r.split_once('x'))
                .and_then(|(x, _)| x.parse().ok())
                .unwrap_or_else(|| panic!("no {prefix:?} line in {out}"));
            // The rates in the rows are rounded to 10 kseg/s, the multiple to 0.01.
            let want = rates[0] / rates[n];
            assert!(
                (cost - want).abs() <= 0.01 + 0.02 * want,
                "{cost} vs {want}: {out}"
            );
        }
    }
    // A control the simulator does not have is bad input.
    let o = longhaul(
        &["sim", "bench", "--flows", "2", "--cc", "compound"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("compound"), "{}", stderr(&o));
}

/// The reference runs beside the points only when it must: not when `--flows`
/// names the reference itself (then only the other points are set against it), and
/// not with `--no-reference` (the points alone, no multiples).
#[test]
fn bench_adds_the_reference_only_when_no_point_is_it() {
    let dir = tempfile::tempdir().unwrap();
    let bench = |extra: &[&str]| {
        let mut args = vec!["sim", "bench", "--rtt-ms", "10", "--duration-s", "0.2"];
        args.extend_from_slice(&["--repeat", "1"]);
        args.extend_from_slice(extra);
        let o = longhaul(&args, dir.path());
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let rows = out.lines().filter(|l| l.contains("(1 runs)")).count();
        (out, rows)
    };
    let (out, rows) = bench(&["--flows", "1,3"]);
    assert_eq!(rows, 2, "{out}");
    assert!(!out.contains(" ref "), "{out}");
    assert_eq!(out.matches("cost per data segment").count(), 1, "{out}");
    assert!(
        out.contains("RTT 10 ms, 3 flows: cost per data segment "),
        "{out}"
    );
    let (out, rows) = bench(&["--flows", "3", "--dumbbell", "--no-reference"]);
    assert_eq!(rows, 1, "{out}");
    assert!(!out.contains(" ref ") && !out.contains("cost per"), "{out}");
}

/// With more than one round, each cost line also gives the multiple round by
/// round (each round's point against the reference run just before it): its median
/// and range, which must bracket the ratio of the medians (if every round's point
/// costs at least c times its reference, so do their medians; printed to 0.01).
/// One round has no such part.
#[test]
fn bench_gives_the_cost_multiple_round_by_round() {
    let dir = tempfile::tempdir().unwrap();
    let bench = |repeat: &str| {
        let args = [
            "sim",
            "bench",
            "--rtt-ms",
            "10",
            "--duration-s",
            "0.2",
            "--flows",
            "3",
            "--dumbbell",
            "--repeat",
            repeat,
        ];
        let o = longhaul(&args[..], dir.path());
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("RTT 10 ms, 3 pairs (dumbbell): cost per data segment "))
            .unwrap_or_else(|| panic!("no cost line in {out}"))
            .to_string();
        (out, line)
    };
    let (out, line) = bench("3");
    let x = |s: &str| -> f64 {
        s.trim()
            .strip_suffix('x')
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{s:?} in {out}"))
    };
    let headline = x(line.split_once(' ').unwrap().0);
    let (_, rounds) = line
        .split_once("; by round ")
        .unwrap_or_else(|| panic!("no by-round part in {out}"));
    let (med, range) = rounds.split_once(" median, ").unwrap();
    let (lo, hi) = range.split_once('-').unwrap();
    let (med, lo, hi) = (x(med), lo.parse::<f64>().unwrap(), x(hi));
    assert!(lo > 0.0 && lo <= med && med <= hi, "{out}");
    assert!(lo - 0.01 <= headline && headline <= hi + 0.01, "{out}");
    let (out, line) = bench("1");
    assert!(!line.contains("by round"), "{out}");
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
