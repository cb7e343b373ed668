//! What the transfer tests share.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use longhaul_net::transfer::{receive, RecvOptions, RecvSummary, TransferError};

/// How long a test waits for any one step.
pub const T: Duration = Duration::from_secs(30);

/// Starts a receiver; returns its address and its outcome.
pub fn receiver(
    opts: RecvOptions,
) -> (
    SocketAddr,
    thread::JoinHandle<Result<RecvSummary, TransferError>>,
) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || receive(&opts, |a| tx.send(a).unwrap()));
    (rx.recv_timeout(T).unwrap(), h)
}
