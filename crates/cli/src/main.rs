//! `longhaul`: the command-line face of the toolkit. It parses arguments, calls a
//! library crate and maps the outcome to an exit code; nothing else lives here.
//!
//! Exit codes: 0 success; 1 a run failed (I/O, internal error); 2 bad input (a
//! scenario file, a path or an argument), with a message naming what to fix.

/// `println!` for a command's output: when the reader goes away (`longhaul ... |
/// head`) the write fails with `BrokenPipe`, which `main` treats as the end of the
/// command, where `println!` would panic. Use with `?`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)
    }};
}

/// `print!` for a command's output; see [`outln`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($arg)*)
    }};
}

mod bench;
mod compare;
mod emu;
mod net;
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
    /// Run commands in two network namespaces joined by an emulated WAN link.
    Emu(Box<emu::EmuArgs>),
    /// Real stacks (kernel TCP, longhaul UDT/AR-UDT) side by side over one emulated link.
    Compare(compare::CompareArgs),
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
        Command::Emu(args) => emu::run(*args),
        Command::Compare(args) => compare::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`| head`): nothing left to do.
        Err(f) if is_broken_pipe(&f.error) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {:#}", f.error);
            ExitCode::from(if f.input { 2 } else { 1 })
        }
    }
}

/// Whether `e` is, or was caused by, writing to a pipe whose reader has gone.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
