//! `send`/`receive` over loopback, end to end through the library: what arrives,
//! what is refused, what resumes, and the channel knobs (one module each). The
//! helpers here, shared by more than one of them, write files, build options, wait
//! for outcomes and compare trees; a module's own helpers are in it.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::thread;
use std::time::Duration;

use longhaul_net::transfer::{
    receive, send, Msg, RawSender, RecvOptions, RecvSummary, SendOptions, SendSummary,
    TransferError, Transport,
};
use longhaul_proto::udt::{RateControl, UdtConnConfig};

#[path = "../common/mod.rs"]
mod common;

mod arrive;
mod channels;
mod refuse;
mod resume;

use common::{receiver, T};

/// A test's short token made strong enough to be taken (128 bits or more), the
/// same for the same short one: distinct short tokens stay distinct.
fn strong(token: &str) -> String {
    format!("{token}-0123456789abcdef0123456789abcdef")
}

fn write(p: &Path, len: usize, seed: u8) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let data: Vec<u8> = (0..len)
        .map(|i| ((i as u64).wrapping_mul(0x9e37_79b9) >> 7) as u8 ^ seed)
        .collect();
    std::fs::write(p, data).unwrap();
}

/// What `longhaul recv` runs (the draft's periodic NAK), with the tests' timeout.
fn recv_opts(dir: &Path, token: &str) -> RecvOptions {
    RecvOptions {
        udt: UdtConnConfig {
            nak_report: longhaul_proto::udt::NakReport::Periodic,
            ..UdtConnConfig::default()
        },
        timeout: T,
        ..RecvOptions::new(dir.to_path_buf(), &strong(token))
    }
}

/// How a receiver ended, if it did within `t`.
fn ended_within(
    receiver: thread::JoinHandle<Result<RecvSummary, TransferError>>,
    t: Duration,
) -> Option<Result<RecvSummary, TransferError>> {
    let step = Duration::from_millis(20);
    for _ in 0..t.as_millis() / step.as_millis() {
        if receiver.is_finished() {
            break;
        }
        thread::sleep(step);
    }
    receiver.is_finished().then(|| receiver.join().unwrap())
}

/// Both ends' summaries. If sending failed, the panic also says how the receiver
/// ended (waiting at most `T` for it): the sender's error ("the peer closed the control
/// channel") is often only the echo of the receiver's.
fn outcome(
    sent: Result<SendSummary, TransferError>,
    receiver: thread::JoinHandle<Result<RecvSummary, TransferError>>,
    what: &str,
) -> (SendSummary, RecvSummary) {
    let e = match sent {
        Ok(s) => return (s, receiver.join().unwrap().expect("receive")),
        Err(e) => e,
    };
    if let Some(got) = ended_within(receiver, T) {
        panic!("{what}: send failed: {e:?}; the receiver ended with {got:?}");
    }
    panic!("{what}: send failed: {e:?}; the receiver was still running after {T:?}")
}

/// `longhaul send`'s defaults with `channels`, 256 KiB blocks (several per test
/// file) and the tests' timeout.
fn send_opts(
    paths: Vec<std::path::PathBuf>,
    dest: SocketAddr,
    token: &str,
    channels: u16,
) -> SendOptions {
    SendOptions {
        channels,
        block_size: 256 << 10,
        timeout: T,
        ..SendOptions::new(paths, dest, &strong(token))
    }
}

fn same_tree(a: &Path, b: &Path) {
    let mut n = 0;
    for e in std::fs::read_dir(a).unwrap() {
        let e = e.unwrap();
        let other = b.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            same_tree(&e.path(), &other);
        } else {
            assert!(
                std::fs::read(e.path()).unwrap() == std::fs::read(&other).unwrap(),
                "{}",
                other.display()
            );
            n += 1;
        }
    }
    let theirs = std::fs::read_dir(b)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
        .count();
    assert_eq!(
        n,
        theirs,
        "no stray files (temporary parts) in {}",
        b.display()
    );
}

/// Whether two files hold the same bytes, read a MiB at a time.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (mut x, mut y) = (
        std::fs::File::open(a).unwrap(),
        std::fs::File::open(b).unwrap(),
    );
    let (mut p, mut q) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = x.read(&mut p).unwrap();
        let mut m = 0;
        while m < n {
            let k = y.read(&mut q[m..n]).unwrap();
            if k == 0 {
                return false;
            }
            m += k;
        }
        if p[..n] != q[..n] {
            return false;
        }
        if n == 0 {
            return y.read(&mut q).unwrap() == 0;
        }
    }
}
