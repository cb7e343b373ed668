//! End-to-end tests of the `longhaul` binary: the simulator's commands (`sim`),
//! the transfer tool (`send`, `recv`, `token`) and the benches (`bench`). Each runs
//! the built binary in a temporary directory.

mod bench;
mod sim;
mod transfer;

use std::path::Path;
use std::process::{Command, Output};

fn longhaul(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("spawn")
}

/// Writes two token files into `dir`: `tok` (the receivers') and `bad` (another).
fn write_tokens(dir: &Path) {
    std::fs::write(dir.join("tok"), "right-0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::write(dir.join("bad"), "wrong-0123456789abcdef0123456789abcdef\n").unwrap();
}

/// Whether tshark is here; on CI it must be (`.ci/run` installs it), elsewhere a
/// test that needs it says it skipped.
fn have_tshark() -> bool {
    if Command::new("tshark").arg("--version").output().is_ok() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI must install tshark");
    eprintln!("tshark not installed: skipping");
    false
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const SMALL: &str = r#"
name = "small"
duration = "3s"
seed = 4
[topology]
kind = "chain"
[[topology.links]]
rate = "1Gbps"
delay = "1ms"
[[topology.links]]
rate = "100Mbps"
delay = "10ms"
queue = "1bdp"
loss = 1e-4
[[flow]]
protocol = "tcp"
size = "2MB"
[[flow]]
protocol = "udp"
rate = "10Mbps"
[outputs]
trace = true
pcap = ["link1", "link1.rev"]
"#;
