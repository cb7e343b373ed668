//! Keeping the kernel's receive work off the timing thread's core.
//!
//! A write to a TUN device runs the receiving kernel stack in the writing thread:
//! for an ACK that is the sender's whole ACK and SACK processing and its next
//! transmissions. Done on the emulator's timing thread, that work made packets
//! leave hundreds of µs to milliseconds late under loss at 1 Gb/s (UDT over
//! 200 ms with 1e-4 loss: lateness p99 2.5 ms). Two settings move it away:
//!
//! - **Receive Packet Steering** on both TUN devices (`rps_cpus`, Linux's
//!   `Documentation/networking/scaling.rst`): a packet the emulator writes is
//!   queued to another CPU's backlog and processed there in softirq, so the write
//!   returns at once.
//! - **Affinity**: the timing thread runs on the one CPU the steering leaves out,
//!   and the thread that makes a [`crate::Pair`] moves off it while the pair
//!   lives, so the applications it starts in the namespaces (which inherit its
//!   affinity) do not land there either. Other processes on the host may.
//!
//! Measured on a 2-core machine (`longhaul bench emu`, one CUBIC flow, 20 ms):
//! quiet, the highest valid rate rose from 1 to 2 Gb/s; with a `nice 19` CPU hog
//! beside it, 1 Gb/s went from invalid (p99 445 µs) to valid (15-21 µs).
//! With one CPU there is nothing to steer to and nothing is changed.
//!
//! Affinity keeps the run's own applications off the timing core, not the
//! host's other work. A third setting covers that:
//!
//! - **Priority**: the timing thread runs at nice -20 ([`Raised`]). A CPU hog at
//!   nice 0 pinned to the timing core made a 100 Mb/s x 50 ms CUBIC run
//!   (`longhaul compare --schemes cubic --rate 100Mbps --rtt 50ms --loss 1e-3
//!   --duration 10s`) invalid, lateness p99 3.8 ms, in both tries: the woken
//!   thread waited for the hog's time slice. At nice -20 its weight is 88761
//!   against the hog's 1024 and it runs at once. `SCHED_FIFO` would preempt
//!   sooner still, but the kernel's real-time throttling (`sched_rt_runtime_us`,
//!   950 ms a second by default) would stop a loop that busy-polls a whole core,
//!   as it does at 1 Gb/s and above, for 50 ms every second.
//!
//! On a virtual machine one more thing matters: a CPU with nothing to run is
//! halted, and the hypervisor may give its physical core to another guest.
//! Waking it then waits on the host's scheduler, which on an oversubscribed
//! host takes milliseconds, and the guest counts that wait as steal. So:
//!
//! - **Kept awake**: while a run lasts, a thread of the idle class
//!   (`SCHED_IDLE`) busy-polls on the timing CPU ([`Awake`]). It runs only when
//!   nothing else there can, and any task that wakes preempts it at once
//!   (`check_preempt_wakeup_fair` in Linux's `kernel/sched/fair.c`), so the
//!   timing thread keeps its wake-ups and the CPU never halts. A C loop timing
//!   departures every 500 µs on the 2-core VM (sleeping until 200 µs before
//!   each; 2026-11-29, one sitting, three alternating rounds of 8 s) left
//!   0.26-11.8 % of them more than 100 µs late, with 0.02-0.95 s of steal,
//!   alone; beside such a thread, 0.03-0.09 %, with 0-0.01 s.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;
use thread_priority::{
    set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy, ThreadPriority,
    ThreadSchedulePolicy,
};

/// The CPUs this process may run on, as the first thread to ask found them
/// (threads spawned while [`KeptOff`] holds inherit a narrower set).
pub fn allowed() -> Vec<usize> {
    static ALLOWED: OnceLock<Vec<usize>> = OnceLock::new();
    ALLOWED
        .get_or_init(|| {
            let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else {
                return vec![];
            };
            (0..CpuSet::count())
                .filter(|&c| set.is_set(c).unwrap_or(false))
                .collect()
        })
        .clone()
}

/// While held, the thread that made it runs off the timing CPU, and so do the
/// threads and processes it spawns (they inherit its affinity): the applications
/// of an emulated path do not take the timing thread's core. Dropping it gives
/// the thread its CPUs back.
#[derive(Debug)]
pub struct KeptOff {
    before: Option<CpuSet>,
}

impl KeptOff {
    /// Moves the calling thread off the timing CPU, if there is one.
    pub fn new() -> KeptOff {
        let Some(timing) = timing_cpu() else {
            return KeptOff { before: None };
        };
        let Ok(before) = sched_getaffinity(Pid::from_raw(0)) else {
            return KeptOff { before: None };
        };
        let mut others = CpuSet::new();
        for c in allowed().into_iter().filter(|&c| c != timing) {
            let _ = others.set(c);
        }
        match sched_setaffinity(Pid::from_raw(0), &others) {
            Ok(()) => KeptOff {
                before: Some(before),
            },
            Err(_) => KeptOff { before: None },
        }
    }
}

impl Default for KeptOff {
    fn default() -> Self {
        KeptOff::new()
    }
}

impl Drop for KeptOff {
    fn drop(&mut self) {
        if let Some(before) = &self.before {
            let _ = sched_setaffinity(Pid::from_raw(0), before);
        }
    }
}

/// While held, the calling thread runs at nice -20 (Linux keeps a nice value per
/// thread, and `setpriority(PRIO_PROCESS, 0)` sets the caller's); dropping it
/// puts the old value back. Raising needs `CAP_SYS_NICE`: without it nothing
/// changes and [`Raised::nice`] says so.
#[derive(Debug)]
pub struct Raised {
    before: Option<i32>,
}

/// The nice value [`Raised`] asks for: the highest there is.
pub const TIMING_NICE: i32 = -20;

impl Raised {
    /// Raises the calling thread's priority, if it may.
    pub fn new() -> Raised {
        let before = rustix::process::getpriority_process(None).ok();
        match before {
            Some(b) if rustix::process::setpriority_process(None, TIMING_NICE).is_ok() => {
                Raised { before: Some(b) }
            }
            _ => Raised { before: None },
        }
    }

    /// The thread's nice value while this holds: [`TIMING_NICE`] if raising
    /// worked, `None` if it was refused.
    pub fn nice(&self) -> Option<i32> {
        self.before.map(|_| TIMING_NICE)
    }
}

impl Default for Raised {
    fn default() -> Self {
        Raised::new()
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        if let Some(b) = self.before {
            let _ = rustix::process::setpriority_process(None, b);
        }
    }
}

/// The name of [`Awake`]'s thread.
const AWAKE_THREAD: &str = "longhaul-awake";

/// While held, a thread of the idle scheduling class busy-polls on one CPU, so
/// that CPU is never idle and (on a virtual machine) never halted; dropping it
/// stops the thread. The module's introduction says why.
#[derive(Debug)]
pub struct Awake {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Awake {
    /// Keeps `cpu` awake; `None` if the thread could not be started, put in the
    /// idle class, or pinned there (spinning at a normal priority would take
    /// time from the work the CPU is kept awake for).
    pub fn new(cpu: usize) -> Option<Awake> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, started) = mpsc::channel();
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(AWAKE_THREAD.into())
            .spawn(move || {
                // The class first: pinned at normal priority, even briefly, it
                // would compete with the timing thread.
                let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
                let ok =
                    set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle)
                        .is_ok()
                        && pin_to(cpu).is_ok();
                let _ = ready.send(ok);
                while ok && !stopped.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .ok()?;
        match started.recv() {
            Ok(true) => Some(Awake {
                stop,
                thread: Some(thread),
            }),
            _ => {
                let _ = thread.join();
                None
            }
        }
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serialises the tests that spin on a CPU and measure how long they waited
/// for it: run side by side, each would measure the others.
#[cfg(test)]
pub(crate) fn spinning_test() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Time the hypervisor ran something else while each CPU had work ("steal",
/// the eighth value of a `cpuN` line of `/proc/stat`, `man 5 proc`), in
/// `USER_HZ` ticks, by CPU number; empty where `/proc/stat` cannot be read.
///
/// No setting inside a virtual machine can stop this: a timer that fires while
/// the hypervisor runs another guest is late however the thread is placed. So
/// a run reports it, to tell a host that is oversubscribed from an emulator
/// that fell behind.
pub fn steal_ticks() -> Vec<(usize, u64)> {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return vec![];
    };
    parse_steal(&stat)
}

fn parse_steal(stat: &str) -> Vec<(usize, u64)> {
    per_cpu_ticks(stat, &[7])
}

/// The sum of the `fields` of each `cpuN` line of `/proc/stat` text (counted from
/// 0 after the name: user, nice, system, idle, iowait, irq, softirq, steal), by
/// CPU number; a line missing one of them is left out.
pub(crate) fn per_cpu_ticks(stat: &str, fields: &[usize]) -> Vec<(usize, u64)> {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<&str> = f.collect();
            let sum = fields
                .iter()
                .map(|&i| v.get(i)?.parse::<u64>().ok())
                .sum::<Option<u64>>()?;
            Some((cpu, sum))
        })
        .collect()
}

/// Seconds of steal on `cpus` between two [`steal_ticks`] readings.
pub fn steal_s(before: &[(usize, u64)], after: &[(usize, u64)], cpus: &[usize]) -> f64 {
    let ticks: u64 = after
        .iter()
        .filter(|(c, _)| cpus.contains(c))
        .filter_map(|&(c, a)| {
            let b = before.iter().find(|(x, _)| *x == c)?.1;
            Some(a.saturating_sub(b))
        })
        .sum();
    // USER_HZ is 100 on every Linux architecture that exports it to /proc.
    ticks as f64 / 100.0
}

/// The most steal any one of `cpus` had between two [`steal_ticks`] readings, s.
pub fn busiest_steal_s(before: &[(usize, u64)], after: &[(usize, u64)], cpus: &[usize]) -> f64 {
    cpus.iter()
        .map(|&c| steal_s(before, after, &[c]))
        .fold(0.0, f64::max)
}

/// The CPU the timing thread takes: the last one allowed, if there are two or
/// more (so another is left for the steered work).
pub fn timing_cpu() -> Option<usize> {
    let cpus = allowed();
    (cpus.len() >= 2).then(|| *cpus.last().expect("two or more"))
}

/// The allowed CPUs but the timing one, as an `rps_cpus` mask; `None` when
/// there is no timing CPU.
pub fn steering_mask() -> Option<String> {
    let timing = timing_cpu()?;
    let others: Vec<usize> = allowed().into_iter().filter(|&c| c != timing).collect();
    Some(hex_mask(&others))
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> nix::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(0), &set)
}

/// A CPU set in sysfs's bitmap format: hexadecimal, most significant first, a
/// comma between each 32 bits (`cpumask_parse`).
pub fn hex_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |&m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    w.iter()
        .rev()
        .enumerate()
        .map(|(i, x)| {
            if i == 0 {
                format!("{x:x}")
            } else {
                format!("{x:08x}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_read_per_cpu_from_proc_stat() {
        // The layout of a 6.x kernel's /proc/stat: the aggregate line first.
        let before = "cpu  10 0 5 100 1 0 2 30 0 0\n\
                      cpu0 5 0 2 50 1 0 1 10 0 0\n\
                      cpu1 5 0 3 50 0 0 1 20 0 0\n\
                      intr 12345 0 0\n";
        let after = before.replace(" 1 20 0 0", " 1 70 0 0");
        let (b, a) = (parse_steal(before), parse_steal(&after));
        assert_eq!(b, vec![(0, 10), (1, 20)]);
        assert_eq!(steal_s(&b, &a, &[1]), 0.5);
        assert_eq!(steal_s(&b, &a, &[0]), 0.0);
        assert_eq!(steal_s(&b, &a, &[0, 1]), 0.5);
        // The busiest CPU's alone: cpu1 lost 0.5 s, cpu0 nothing.
        assert_eq!(busiest_steal_s(&b, &a, &[0, 1]), 0.5);
        assert_eq!(busiest_steal_s(&b, &a, &[0]), 0.0);
        // This machine's own file parses, one entry per CPU it has.
        assert!(steal_ticks().len() >= allowed().len());
    }

    #[test]
    fn masks_are_sysfs_bitmaps() {
        assert_eq!(hex_mask(&[0]), "1");
        assert_eq!(hex_mask(&[0, 1, 2]), "7");
        assert_eq!(hex_mask(&[4, 5]), "30");
        assert_eq!(hex_mask(&[0, 33]), "2,00000001");
        assert_eq!(hex_mask(&[]), "0");
    }

    #[test]
    fn kept_off_moves_this_thread_off_the_timing_cpu_and_back() {
        std::thread::spawn(|| {
            let now = || {
                let set = sched_getaffinity(Pid::from_raw(0)).unwrap();
                (0..CpuSet::count())
                    .filter(|&c| set.is_set(c).unwrap())
                    .collect::<Vec<_>>()
            };
            let before = now();
            {
                let _k = KeptOff::new();
                match timing_cpu() {
                    Some(t) => assert!(!now().contains(&t) && !now().is_empty()),
                    None => assert_eq!(now(), before),
                }
            }
            assert_eq!(now(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn raised_sets_this_threads_nice_and_puts_it_back() {
        std::thread::spawn(|| {
            let nice = || rustix::process::getpriority_process(None).unwrap();
            let before = nice();
            {
                let r = Raised::new();
                match r.nice() {
                    Some(n) => assert_eq!((n, nice()), (TIMING_NICE, TIMING_NICE)),
                    None => assert_eq!(nice(), before),
                }
            }
            assert_eq!(nice(), before);
        })
        .join()
        .unwrap();
        // The test process runs as root here (the emulator's tests need it), so
        // the raise itself must have worked.
        if nix::unistd::geteuid().is_root() {
            std::thread::spawn(|| assert_eq!(Raised::new().nice(), Some(TIMING_NICE)))
                .join()
                .unwrap();
        }
    }

    /// A thread's scheduling policy, last CPU and time waiting for a CPU, ns
    /// (`man 5 proc`: the 41st and 39th fields of `stat`; `schedstat`).
    fn sched_of(tid: i32) -> (u32, usize, u64) {
        let dir = format!("/proc/self/task/{tid}");
        let stat = std::fs::read_to_string(format!("{dir}/stat")).unwrap();
        // The command name may hold spaces; the fields after it do not.
        let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .collect();
        let schedstat = std::fs::read_to_string(format!("{dir}/schedstat")).unwrap();
        let waited = schedstat
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        (f[38].parse().unwrap(), f[36].parse().unwrap(), waited)
    }

    /// The thread that keeps a CPU awake is in the idle class on that CPU, and a
    /// thread that wants the CPU gets it: spinning there for 300 ms, it waits
    /// under 30 ms in all (a normal-class spinner would take about half).
    #[test]
    fn awake_spins_in_the_idle_class_and_yields_the_cpu() {
        let _one = spinning_test();
        let cpu = *allowed().last().expect("a CPU");
        let awake = Awake::new(cpu).expect("any thread may enter the idle class");
        std::thread::sleep(std::time::Duration::from_millis(20));
        // This process's one thread of that name.
        let tids: Vec<i32> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|t| {
                std::fs::read_to_string(format!("/proc/self/task/{t}/comm"))
                    .is_ok_and(|c| c.trim() == AWAKE_THREAD)
            })
            .collect();
        let [tid] = tids[..] else {
            panic!("threads named {AWAKE_THREAD}: {tids:?}")
        };
        let (policy, on, _) = sched_of(tid);
        const SCHED_IDLE: u32 = 5;
        assert_eq!((policy, on), (SCHED_IDLE, cpu));
        let waited = std::thread::spawn(move || {
            pin_to(cpu).unwrap();
            let me = nix::unistd::gettid().as_raw();
            let w0 = sched_of(me).2;
            let clock = crate::clock::Clock::new();
            while clock.now().as_nanos() < 300_000_000 {
                std::hint::spin_loop();
            }
            sched_of(me).2 - w0
        })
        .join()
        .unwrap();
        assert!(waited < 30_000_000, "waited {} ms", waited / 1_000_000);
        drop(awake);
        assert!(!std::path::Path::new(&format!("/proc/self/task/{tid}")).exists());
    }

    #[test]
    fn the_timing_cpu_is_left_out_of_the_steering() {
        match (timing_cpu(), steering_mask()) {
            (Some(t), Some(mask)) => {
                let others: Vec<usize> = allowed().into_iter().filter(|&c| c != t).collect();
                assert!(!others.is_empty());
                assert_eq!(mask, hex_mask(&others));
            }
            (None, None) => assert!(allowed().len() < 2),
            other => panic!("{other:?}"),
        }
    }
}
