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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
