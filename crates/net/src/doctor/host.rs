//! Where the doctor reads a host's settings: the running system, or a copy of one
//! (a directory holding `proc/`, `sys/` and the outputs of the commands it runs),
//! which is how the tests feed it a fake host and how a user can audit another
//! machine's settings from a tarball of them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the doctor asks of a host.
pub trait Host {
    /// The contents of a file such as `/proc/sys/net/core/rmem_max`, if readable.
    fn read(&self, path: &str) -> Option<String>;
    /// The standard output of a command that succeeded, if it ran.
    fn run(&self, argv: &[&str]) -> Option<String>;
    /// Free bytes for an unprivileged user on the file system holding `dir`.
    fn free_bytes(&self, dir: &Path) -> Option<u64>;
    /// CPUs the host has (`/sys/devices/system/cpu/cpuN` directories).
    fn cpus(&self) -> Vec<String>;
}

/// The running system.
#[derive(Debug, Default)]
pub struct System;

impl Host for System {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    fn run(&self, argv: &[&str]) -> Option<String> {
        let (prog, args) = argv.split_first()?;
        let out = Command::new(prog).args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn free_bytes(&self, dir: &Path) -> Option<u64> {
        let s = rustix::fs::statvfs(dir).ok()?;
        Some(s.f_bavail.saturating_mul(s.f_frsize))
    }

    fn cpus(&self) -> Vec<String> {
        cpus_under(Path::new("/sys/devices/system/cpu"))
    }
}

/// A copy of a host's settings beneath `root`: `root/proc/...` and `root/sys/...`
/// stand for `/proc` and `/sys`; the output of a command is the file
/// `root/cmd/<its words joined by '_'>` (e.g. `root/cmd/ip_route_get_192.0.2.1`);
/// the free space of any directory is the number in `root/cmd/free_bytes`.
#[derive(Debug)]
pub struct Sysroot {
    root: PathBuf,
}

impl Sysroot {
    /// The copy beneath `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sysroot { root: root.into() }
    }
}

impl Host for Sysroot {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path.trim_start_matches('/'))).ok()
    }

    fn run(&self, argv: &[&str]) -> Option<String> {
        std::fs::read_to_string(self.root.join("cmd").join(argv.join("_"))).ok()
    }

    fn free_bytes(&self, _dir: &Path) -> Option<u64> {
        self.run(&["free_bytes"])?.trim().parse().ok()
    }

    fn cpus(&self) -> Vec<String> {
        cpus_under(&self.root.join("sys/devices/system/cpu"))
    }
}

/// The `cpuN` names under a sysfs CPU directory, in order.
fn cpus_under(dir: &Path) -> Vec<String> {
    let mut cpus: Vec<(u32, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name.strip_prefix("cpu")?.parse().ok()?;
            Some((n, name))
        })
        .collect();
    cpus.sort();
    cpus.into_iter().map(|(_, name)| name).collect()
}
