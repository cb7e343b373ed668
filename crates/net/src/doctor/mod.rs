//! `longhaul doctor`: audits a host for transfers over a long fat path, in the
//! manner of ESnet's fasterdata host-tuning guide. For each setting it reports the
//! value, what a path of the given rate × RTT needs, and the exact command that
//! fixes it.
//!
//! What it checks (`checks.rs`): socket buffer limits (`net.core.rmem_max`,
//! `wmem_max`) and TCP's autotuning limits (`tcp_rmem`, `tcp_wmem`) against the
//! path's bandwidth-delay product; TCP's default and available congestion
//! controls; `netdev_max_backlog` against the rate; the MTU of the route to the
//! peer and whether full-size packets pass the path; the route's NIC offloads
//! (GSO, GRO, TSO); the CPU frequency governor; the open-file limit; the free
//! space of the target directory.
//!
//! What it does not do: change anything (it prints the commands), or measure the
//! path (`longhaul bench` and `compare` do). It reads the host through [`Host`],
//! so tests (and users auditing another machine) can hand it a copy of a host's
//! `/proc` and `/sys` ([`Sysroot`]).

mod checks;
mod host;

use std::fmt::Write as _;
use std::path::PathBuf;

use longhaul_proto::time::{Bandwidth, Duration};
use serde::Serialize;

pub use host::{Host, Sysroot, System};

/// The path to audit for, and where the data goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// The path's bottleneck rate.
    pub rate: Bandwidth,
    /// Its round-trip time.
    pub rtt: Duration,
    /// The peer, for the route's MTU and offloads.
    pub peer: Option<String>,
    /// The directory data will be written to, for its free space.
    pub dir: Option<PathBuf>,
    /// How much data will be written there.
    pub size: Option<u64>,
}

impl Target {
    /// The bandwidth-delay product, bytes.
    pub fn bdp(&self) -> u64 {
        self.rate.bytes_in(self.rtt)
    }
}

/// How a setting stands against the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Enough for the path.
    Ok,
    /// It caps what a transfer over the path can reach.
    Limits,
    /// Worth changing, but not a cap on the path.
    Advice,
    /// Could not be read.
    Unknown,
}

/// One checked setting.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The setting (`net.core.rmem_max`, `congestion control`, ...).
    pub check: String,
    /// Its value on this host.
    pub value: String,
    /// What the path needs.
    pub needs: String,
    /// How it stands.
    pub status: Status,
    /// Why it matters (set when the status is not `Ok`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// The command that fixes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What the doctor found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The path's rate, bits per second.
    pub rate_bps: u64,
    /// Its RTT, milliseconds.
    pub rtt_ms: f64,
    /// Its bandwidth-delay product, bytes.
    pub bdp_bytes: u64,
    /// The peer audited toward.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Every check, in order.
    pub findings: Vec<Finding>,
    /// How many limit the path.
    pub limiting: usize,
}

/// Audits `host` for `target`.
pub fn audit(host: &dyn Host, target: &Target) -> Report {
    let findings = checks::all(host, target);
    Report {
        rate_bps: target.rate.as_bps(),
        rtt_ms: target.rtt.as_secs_f64() * 1e3,
        bdp_bytes: target.bdp(),
        peer: target.peer.clone(),
        limiting: findings
            .iter()
            .filter(|f| f.status == Status::Limits)
            .count(),
        findings,
    }
}

impl Report {
    /// The report as a table, then what to do about each finding that is not OK.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "longhaul doctor: this host for a {} x {} ms path{} (bandwidth-delay product {})",
            rate_text(self.rate_bps),
            self.rtt_ms,
            self.peer
                .as_ref()
                .map(|p| format!(" to {p}"))
                .unwrap_or_default(),
            bytes_text(self.bdp_bytes),
        );
        let w = self
            .findings
            .iter()
            .map(|f| (f.check.len(), f.value.len()))
            .fold((5, 5), |(a, b), (c, d)| (a.max(c), b.max(d)));
        let _ = writeln!(
            s,
            "\n  {:<w0$}  {:<w1$}  {:<7}  needs",
            "check",
            "value",
            "status",
            w0 = w.0,
            w1 = w.1
        );
        for f in &self.findings {
            let status = match f.status {
                Status::Ok => "ok",
                Status::Limits => "LIMITS",
                Status::Advice => "advice",
                Status::Unknown => "unknown",
            };
            let _ = writeln!(
                s,
                "  {:<w0$}  {:<w1$}  {:<7}  {}",
                f.check,
                f.value,
                status,
                f.needs,
                w0 = w.0,
                w1 = w.1
            );
        }
        for f in self.findings.iter().filter(|f| f.status != Status::Ok) {
            let _ = writeln!(s, "\n{}: {}", f.check, f.why);
            if let Some(fix) = &f.fix {
                let _ = writeln!(s, "  fix: {fix}");
            }
        }
        let sysctls: Vec<&str> = self
            .findings
            .iter()
            .filter(|f| f.status != Status::Ok)
            .filter_map(|f| f.fix.as_deref()?.strip_prefix("sysctl -w "))
            .collect();
        if !sysctls.is_empty() {
            let _ = writeln!(
                s,
                "\nTo keep the sysctl settings across reboots, write them to a file and load it:\n  printf '%s\\n' {} | sudo tee /etc/sysctl.d/90-longhaul.conf && sudo sysctl --system",
                sysctls
                    .iter()
                    .map(|kv| format!("'{}'", kv.replacen('=', " = ", 1).replace(['\'', '"'], "")))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        let _ = writeln!(
            s,
            "\n{}",
            match self.limiting {
                0 => "Nothing on this host limits the path.".to_string(),
                1 => "1 setting limits the path (exit status 1).".to_string(),
                n => format!("{n} settings limit the path (exit status 1)."),
            }
        );
        s
    }
}

/// A rate for people: "10 Gb/s".
fn rate_text(bps: u64) -> String {
    let b = bps as f64;
    if b >= 1e9 {
        format!("{} Gb/s", b / 1e9)
    } else {
        format!("{} Mb/s", b / 1e6)
    }
}

/// Bytes for people: "125 MB".
pub(crate) fn bytes_text(n: u64) -> String {
    let f = n as f64;
    match n {
        0..=9_999 => format!("{n} B"),
        10_000..=999_999 => format!("{:.0} KB", f / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} MB", f / 1e6),
        _ => format!("{:.1} GB", f / 1e9),
    }
}
