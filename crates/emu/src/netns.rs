//! Network namespaces: made and removed with iproute2's `ip netns`, entered by
//! threads with `setns(2)`.
//!
//! A [`Netns`] deletes its namespace when dropped, after killing every process still
//! inside it, so an emulator run leaves nothing behind whether it ends normally, on
//! an error, or on Ctrl-C (the caller turns the signal into a normal return).

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nix::sched::{setns, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Prefix of every namespace longhaul makes: `lh-<pid>-<n>-<role>`.
pub const PREFIX: &str = "lh-";

/// Why a namespace operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// `ip` could not be run at all.
    #[error("cannot run `ip` (iproute2): {0}; install it (Debian: apt-get install iproute2)")]
    NoIp(io::Error),
    /// `ip` ran and refused.
    #[error("`ip {args}` failed: {stderr} (are we root?)")]
    Ip {
        /// The arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
    /// Entering the namespace failed.
    #[error("cannot enter network namespace `{name}`: {err}")]
    Enter {
        /// The namespace.
        name: String,
        /// The error.
        err: io::Error,
    },
}

/// The largest TCP send and receive buffer in the namespaces (`tcp_wmem` and
/// `tcp_rmem`'s maxima), bytes: room for 1 Gb/s x 200 ms twice over.
pub const TCP_BUFFER_MAX: u64 = 64 << 20;

/// Runs `ip ARGS`.
pub fn ip(args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(NetnsError::NoIp)?;
    if !out.status.success() {
        return Err(NetnsError::Ip {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The names of the namespaces that exist now.
pub fn list() -> Vec<String> {
    ip(&["netns", "list"])
        .map(|s| {
            s.lines()
                .filter_map(|l| l.split_whitespace().next())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A unique name for a new namespace of this process, for `role` (`c`, `s`).
pub fn unique_name(role: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{PREFIX}{}-{}-{role}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A network namespace this process made; deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Makes the namespace `name` with its loopback up and IPv6 off (so no router
    /// solicitations or MLD reports cross the emulated link).
    pub fn create(name: &str) -> Result<Netns, NetnsError> {
        ip(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        ns.run(|| {
            // Per-namespace sysctls, written from inside it. Missing files (a
            // kernel without IPv6) are fine.
            for f in ["all", "default"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{f}/disable_ipv6"), "1");
            }
            // Room for a long, fat path's window: 1 Gb/s × 200 ms is 25 MB.
            let max = TCP_BUFFER_MAX;
            let _ = std::fs::write("/proc/sys/net/ipv4/tcp_rmem", format!("4096 131072 {max}"));
            let _ = std::fs::write("/proc/sys/net/ipv4/tcp_wmem", format!("4096 16384 {max}"));
        })?;
        Ok(ns)
    }

    /// Takes charge of an existing namespace `name` (to remove one a dead process
    /// left behind: dropping the result kills what runs inside and deletes it).
    pub fn adopt(name: &str) -> Netns {
        Netns {
            name: name.to_string(),
        }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// Moves the calling thread into this namespace (network only). Sockets and
    /// devices the thread makes afterwards belong to it.
    pub fn enter(&self) -> Result<(), NetnsError> {
        let err = |err| NetnsError::Enter {
            name: self.name.clone(),
            err,
        };
        let f = File::open(self.path()).map_err(err)?;
        setns(&f, CloneFlags::CLONE_NEWNET).map_err(|e| err(io::Error::from(e)))
    }

    /// Runs `f` on a new thread inside the namespace and returns its result.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R, NetnsError> {
        std::thread::scope(|s| {
            s.spawn(|| {
                self.enter()?;
                Ok(f())
            })
            .join()
            .expect("a namespace thread panicked")
        })
    }

    /// Starts a thread inside the namespace running `f`.
    pub fn spawn<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> std::thread::JoinHandle<Result<R, NetnsError>> {
        let path = self.path();
        let name = self.name.clone();
        std::thread::spawn(move || {
            let err = |err| NetnsError::Enter {
                name: name.clone(),
                err,
            };
            let file = File::open(&path).map_err(err)?;
            setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| err(io::Error::from(e)))?;
            Ok(f())
        })
    }

    /// Runs `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) -> Result<String, NetnsError> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// A command that runs `shell` (through `sh -c`) inside the namespace.
    pub fn command(&self, shell: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, "sh", "-c", shell]);
        c
    }

    /// The processes inside the namespace.
    pub fn pids(&self) -> Vec<i32> {
        ip(&["netns", "pids", &self.name])
            .map(|s| {
                s.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    // Never this process, whatever a thread of it has entered.
                    .filter(|&p| p != std::process::id() as i32)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sends SIGTERM to every process inside, waits up to `grace` for them to go,
    /// then SIGKILLs the rest.
    pub fn kill_all(&self, grace: Duration) {
        let pids = self.pids();
        if pids.is_empty() {
            return;
        }
        for &p in &pids {
            let _ = kill(Pid::from_raw(p), Signal::SIGTERM);
        }
        let step = Duration::from_millis(20);
        let mut waited = Duration::ZERO;
        while waited < grace && !self.pids().is_empty() {
            std::thread::sleep(step);
            waited += step;
        }
        for p in self.pids() {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.kill_all(Duration::from_millis(500));
        let _ = ip(&["netns", "del", &self.name]);
    }
}
