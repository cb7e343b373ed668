//! `longhaul`: the command-line face of the toolkit. It parses arguments, calls a
//! library crate and maps the outcome to an exit code; nothing else lives here.
//!
//! Exit codes: 0 success; 1 a run failed (I/O, internal error); 2 bad input (a
//! scenario file, a path or an argument), with a message naming what to fix.

/// `println!` for a command's output: when the reader goes away (`longhaul ... |
/// head`) the write fails with [`StdoutClosed`], which `main` treats as the end of
/// the command, where `println!` would panic. Use with `?`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*).map_err($crate::stdout_error)
    }};
}

/// `print!` for a command's output; see [`outln`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($arg)*).map_err($crate::stdout_error)
    }};
}

mod bench;
mod compare;
mod doctor;
mod emu;
mod net;
mod report;
mod sim;
mod transfer;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// longhaul: bulk data over long, fat networks — simulator, transfer tool, emulator.
#[derive(Debug, Parser)]
#[command(name = "longhaul", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Deterministic packet-level simulation.
    Sim(sim::SimArgs),
    /// Benchmarks of the real I/O path (`sim bench` measures the simulator).
    Bench(net::BenchArgs),
    /// Send files and directories to a `longhaul recv` over parallel UDT channels.
    Send(transfer::SendArgs),
    /// Receive files from a `longhaul send` into a directory (one session).
    Recv(transfer::RecvArgs),
    /// Print a new random token for `send`/`recv` (256 bits, hex): `longhaul token > FILE`.
    Token(transfer::TokenCmdArgs),
    /// Run commands in two network namespaces joined by an emulated WAN link.
    Emu(Box<emu::EmuArgs>),
    /// Real stacks (kernel TCP, longhaul UDT/AR-UDT) side by side over one emulated link.
    Compare(compare::CompareArgs),
    /// Audit this host's tuning for a long fat path: each setting, what the path
    /// needs, the command that fixes it. Exit 0 when all is well, 1 when something
    /// limits the path.
    Doctor(doctor::DoctorArgs),
    /// The studies' results as a static HTML site: a page per study with its question,
    /// our tables beside the paper's, the plots, the findings and the command. Opens
    /// from disk; no server, no network.
    Report(report::ReportArgs),
}

/// A failure, and whether it was the user's input.
pub struct Failure {
    error: anyhow::Error,
    input: bool,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure {
            error: e.into(),
            input: false,
        }
    }
}

impl Failure {
    /// A failure caused by the user's input (exit code 2).
    pub fn input(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            error: error.into(),
            input: true,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim::run(args),
        Command::Bench(args) => net::run(args),
        Command::Send(args) => transfer::send_cmd(args),
        Command::Recv(args) => transfer::recv(args),
        Command::Token(args) => transfer::token_cmd(args),
        Command::Emu(args) => emu::run(*args),
        Command::Compare(args) => compare::run(args),
        Command::Report(args) => report::run(args),
        Command::Doctor(args) => match doctor::run(args) {
            Ok(true) => return ExitCode::from(1),
            Ok(false) => Ok(()),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`| head`): nothing left to do.
        Err(f) if output_closed(&f.error) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {:#}", f.error);
            ExitCode::from(if f.input { 2 } else { 1 })
        }
    }
}

/// Command output could not be written because its reader went away. Only writes to
/// our own stdout produce it: a broken pipe anywhere else (a transfer's socket) stays
/// an error.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// The error of a write to stdout (see [`outln`]).
pub fn stdout_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        StdoutClosed.into()
    } else {
        anyhow::Error::new(e).context("writing to standard output")
    }
}

/// Checks, before a run that may take long, that the file a flag names can be
/// written (at the run's end, or appended to as it goes): its folder exists and takes
/// a new file, or the file exists and is writable. Nothing is left behind and an
/// existing file is not truncated.
pub fn writable(flag: &str, path: &std::path::Path) -> Result<(), Failure> {
    let shown = path.display();
    if path.is_dir() {
        return Err(Failure::input(anyhow::anyhow!(
            "--{flag}: {shown} is a folder; give a file name"
        )));
    }
    let result = if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
    } else {
        std::fs::File::create_new(path).and_then(|f| {
            drop(f);
            std::fs::remove_file(path)
        })
    };
    result.map_err(|e| {
        Failure::input(anyhow::anyhow!(
            "--{flag}: cannot write {shown}: {e}; give a path you can write to"
        ))
    })
}

/// Reads a small text file a flag names (a rate trace, a token) with the bound
/// scenario files get, so that `--token-file /dev/zero` or a FIFO nobody writes to is
/// an input error instead of a read that never ends. The error names the path.
pub fn read_small_file(path: &std::path::Path, max: u64) -> Result<String, String> {
    longhaul_output::input::read_small_file(path, max)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether `e` is our stdout's reader going away, and nothing else.
fn output_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<StdoutClosed>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn only_a_closed_stdout_ends_a_command_quietly() {
        assert!(output_closed(&stdout_error(Error::from(
            ErrorKind::BrokenPipe
        ))));
        assert!(!output_closed(&stdout_error(Error::from(ErrorKind::Other))));
        // A transfer whose peer went away fails, even though its cause is a broken pipe.
        let socket = anyhow::Error::new(Error::from(ErrorKind::BrokenPipe)).context("channel 2");
        assert!(!output_closed(&socket));
    }
}
