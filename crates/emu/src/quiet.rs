//! Waiting for a host quiet enough to keep time, before a real-time run is tried
//! again.
//!
//! A run the emulator reports invalid measured the host, and what made it so
//! (the hypervisor running another guest, a burst of another tenant's work) comes
//! in spells that outlast seconds: on 2026-12-01 a CI host's four tries of a
//! 2.3 s run, 2, 4 and 8 s apart, all lost 0.33-0.47 s to steal, and on
//! 2026-12-02 five tries over a minute all saw timer lateness p99 of 1.3-6 ms,
//! most with little steal. A retry that starts in a quiet second has a better
//! chance than one that starts on a timer. So [`wait_for_quiet_host`] reads one
//! second at a time both what the hypervisor took ([`crate::cpu::steal_ticks`])
//! and how late a timer wakes on the timing CPU, kept awake as during a run
//! ([`crate::cpu::Awake`]), and returns at the first second that passes both
//! bars a run is judged by ([`QUIET_STEAL_SHARE`],
//! [`LATENESS_P99_LIMIT_US`]), or when its time is up.
//!
//! **Every allowed CPU is busy while a second is read**, as in a run (the
//! applications and the steered kernel work load the CPUs the timing thread
//! leaves them): the other CPUs are kept awake too. A host may take time only
//! from a guest whose CPUs all want it. In a CI run on 2026-12-02 (an AMD EPYC,
//! family 25, 2 CPUs) five tries of a 3.8 s run each lost 0.22-0.43 s of the
//! timing CPU to steal, and the one-second reads between them, with only the
//! timing CPU busy, saw 0-1 % steal and lateness p99 of 0-22 µs: four quiet
//! seconds, and a retry after each that met the same host. With 8 % steal spread
//! over time, a second would have shown about eight ticks of it.
//!
//! It does not make a run valid: the run is judged on its own readings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::clock::Clock;
use crate::cpu::{allowed, busiest_steal_s, pin_to, steal_ticks, timing_cpu, Awake};
use crate::emulator::SPIN;
use crate::stats::LATENESS_P99_LIMIT_US;

/// The share of a CPU's time the hypervisor may take before a host counts as
/// busy: the 1 % above which a run's report blames late timers on the host
/// ([`crate::stats::Health::judge`]).
pub const QUIET_STEAL_SHARE: f64 = 0.01;

/// The probe's period: a timer every 500 µs, the spacing of the impairment
/// tests' 2000-packet/s probes.
const PERIOD: Duration = Duration::from_micros(500);

/// How a [`wait_for_quiet_host`] ended.
#[derive(Debug, Clone, Copy)]
pub struct Quiet {
    /// Whether the last second read was quiet (steal cannot be read everywhere;
    /// where it cannot, only the timer counts).
    pub quiet: bool,
    /// How long the wait took.
    pub waited: Duration,
    /// The busiest allowed CPU's steal share in the last second read.
    pub steal_share: f64,
    /// The p99 of the probe timer's lateness in the last second read, µs.
    pub lateness_p99_us: f64,
}

impl std::fmt::Display for Quiet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "waited {:.0} s for a quiet host: steal {:.1} % of a CPU, timer lateness p99 {:.0} µs{}",
            self.waited.as_secs_f64(),
            self.steal_share * 100.0,
            self.lateness_p99_us,
            if self.quiet { "" } else { " (still busy)" }
        )
    }
}

/// Waits, one second at a time, until a second in which the hypervisor took
/// less than [`QUIET_STEAL_SHARE`] of every allowed CPU and a timer on the
/// timing CPU woke less than [`LATENESS_P99_LIMIT_US`] late at p99; at most
/// `max` (at least one second is read), or until `stop` is set.
pub fn wait_for_quiet_host(max: Duration, stop: &AtomicBool) -> Quiet {
    let clock = Clock::new();
    let elapsed = || Duration::from_nanos(clock.now().as_nanos());
    let cpus = allowed();
    let mut q = Quiet {
        quiet: false,
        waited: Duration::ZERO,
        steal_share: 0.0,
        lateness_p99_us: 0.0,
    };
    while !stop.load(Ordering::Relaxed) {
        let before = steal_ticks();
        let t0 = elapsed();
        q.lateness_p99_us = lateness_p99_us(Duration::from_secs(1));
        let after = steal_ticks();
        q.steal_share = busiest_steal_s(&before, &after, &cpus) / (elapsed() - t0).as_secs_f64();
        q.quiet = q.steal_share < QUIET_STEAL_SHARE && q.lateness_p99_us < LATENESS_P99_LIMIT_US;
        q.waited = elapsed();
        if q.quiet || q.waited >= max {
            break;
        }
    }
    q
}

/// For `window`, a thread on the timing CPU (kept awake, at the timer slack a
/// run sets) meets a deadline every [`PERIOD`], sleeping to [`SPIN`] before it
/// and spinning the rest, as the emulator's loop does (a wake-up on a virtual
/// machine costs some 50 µs even on a quiet host, which that margin hides);
/// returns the p99 of how late it got there, µs.
fn lateness_p99_us(window: Duration) -> f64 {
    let cpu = timing_cpu();
    // The others busy as a run's applications make them (the module notes say
    // why); idle-class threads, so they take nothing the probe would want.
    let _others: Vec<Awake> = allowed()
        .into_iter()
        .filter(|&c| Some(c) != cpu)
        .filter_map(Awake::new)
        .collect();
    let probe = std::thread::spawn(move || {
        let _awake = cpu.and_then(|c| pin_to(c).ok().and_then(|()| Awake::new(c)));
        let _ = nix::sys::prctl::set_timerslack(1);
        let clock = Clock::new();
        let now = || Duration::from_nanos(clock.now().as_nanos());
        let mut late = Vec::with_capacity((window.as_nanos() / PERIOD.as_nanos()) as usize + 1);
        let mut due = PERIOD;
        while due <= window {
            if let Some(left) = due.checked_sub(now() + SPIN) {
                std::thread::sleep(left);
            }
            while now() < due {
                std::hint::spin_loop();
            }
            let woke = now();
            late.push(woke.saturating_sub(due));
            // A late wake-up moves the schedule on rather than bunching up.
            due = due.max(woke) + PERIOD;
        }
        late
    });
    // A probe that could not run reads as quiet: the run's own readings judge it.
    probe.join().map_or(0.0, |mut late| p99_us(&mut late))
}

/// The 99th percentile of `late`, µs (0 for none).
fn p99_us(late: &mut [Duration]) -> f64 {
    if late.is_empty() {
        return 0.0;
    }
    late.sort_unstable();
    let i = (late.len() * 99).div_ceil(100) - 1;
    late[i].as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_is_the_hundredth_largest_of_ten_thousand_and_the_largest_of_fifty() {
        let mut many: Vec<Duration> = (1..=10_000).rev().map(Duration::from_micros).collect();
        assert_eq!(p99_us(&mut many), 9_900.0);
        let mut few: Vec<Duration> = (1..=50).map(Duration::from_micros).collect();
        assert_eq!(p99_us(&mut few), 50.0);
        assert_eq!(p99_us(&mut []), 0.0);
    }

    /// While a second is read, every allowed CPU but the timing one (which the
    /// probe itself keeps busy) is busy: its idle time grows by at most half the
    /// second (`/proc/stat`'s idle and iowait ticks, 100 a second). Without the
    /// load those CPUs stay idle, unless something else runs there.
    #[test]
    fn a_second_is_read_with_every_cpu_busy() {
        let _g = crate::cpu::spinning_test();
        let Some(timing) = timing_cpu() else {
            eprintln!("one CPU allowed: no other to keep busy");
            return;
        };
        let idle = || {
            let stat = std::fs::read_to_string("/proc/stat").unwrap();
            crate::cpu::per_cpu_ticks(&stat, &[3, 4])
        };
        let before = idle();
        let stop = AtomicBool::new(false);
        let q = wait_for_quiet_host(Duration::from_millis(1), &stop);
        let after = idle();
        for c in allowed().into_iter().filter(|&c| c != timing) {
            let b = before.iter().find(|x| x.0 == c).unwrap().1;
            let a = after.iter().find(|x| x.0 == c).unwrap().1;
            let secs = q.waited.as_secs_f64();
            assert!(
                ((a - b) as f64) <= 50.0 * secs,
                "CPU {c} idle for {} ticks of {secs:.2} s: {q}",
                a - b
            );
        }
    }

    #[test]
    fn a_stopped_wait_reads_nothing() {
        let stop = AtomicBool::new(true);
        let q = wait_for_quiet_host(Duration::from_secs(60), &stop);
        assert!(
            !q.quiet && q.lateness_p99_us == 0.0 && q.steal_share == 0.0,
            "{q:?}"
        );
    }
}
