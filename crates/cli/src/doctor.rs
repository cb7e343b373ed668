//! `longhaul doctor`: the host audit of `longhaul_net::doctor`, as a command.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use longhaul_model::units::{parse_rate, parse_size, parse_time};
use longhaul_net::doctor::{audit, Host, Sysroot, System, Target};

use crate::Failure;

/// Arguments of `longhaul doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The peer: checks the MTU of the route to it, whether full-size packets pass
    /// the path, and the offloads of the route's device (without it: the default
    /// route's device).
    host: Option<String>,
    /// The path's bottleneck rate.
    #[arg(long, default_value = "10Gbps")]
    rate: String,
    /// The path's round-trip time.
    #[arg(long, default_value = "100ms")]
    rtt: String,
    /// The directory data will be received into: reports its free space.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// How much data will be received there (e.g. "2TB"): free space below it limits.
    #[arg(long, requires = "dir")]
    size: Option<String>,
    /// Print the report as JSON (one object: the path, every finding, the count
    /// that limit it).
    #[arg(long)]
    json: bool,
    /// Audit a copy of a host's settings instead of this one: DIR/proc and DIR/sys
    /// stand for /proc and /sys, DIR/cmd/<command words joined by '_'> hold the
    /// output of `ip`, `ethtool` and `ping`, DIR/cmd/free_bytes the free space.
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
}

/// Runs the audit; `Ok(true)` when something limits the path (exit status 1).
pub fn run(a: DoctorArgs) -> Result<bool, Failure> {
    let bad = |flag: &str, e: String| Failure::input(anyhow!("--{flag}: {e}"));
    let target = Target {
        rate: parse_rate(&a.rate).map_err(|e| bad("rate", e))?,
        rtt: parse_time(&a.rtt).map_err(|e| bad("rtt", e))?,
        peer: a.host,
        dir: a.dir,
        size: a
            .size
            .as_deref()
            .map(parse_size)
            .transpose()
            .map_err(|e| bad("size", e))?,
    };
    if target.rtt.is_zero() {
        return Err(bad(
            "rtt",
            "the round-trip time must be above zero, e.g. \"100ms\"".into(),
        ));
    }
    if let Some(dir) = &target.dir {
        if a.sysroot.is_none() && !dir.is_dir() {
            return Err(bad("dir", format!("{} is not a directory", dir.display())));
        }
    }
    let host: Box<dyn Host> = match a.sysroot {
        Some(root) if !root.is_dir() => {
            return Err(bad(
                "sysroot",
                format!("{} is not a directory", root.display()),
            ))
        }
        Some(root) => Box::new(Sysroot::new(root)),
        None => Box::new(System),
    };
    let report = audit(host.as_ref(), &target);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{}", report.render())?;
    }
    Ok(report.limiting > 0)
}
