//! longhaul's UDT *socket* (`UdtSocket`, `UdtListener`: the driver `send`/`recv` use,
//! with its pacing, buffers and timers) against UDT4 4.11 itself (Debian's
//! `libudt-dev`), both directions, 16 MB each, over loopback. The peer is the one
//! the engine-level test uses, `crates/proto/tests/udt4/peer.cpp`, built here with
//! g++. Bounded in time; needs g++ and libudt-dev, which `.ci/run` installs (without
//! them the test is skipped with a message, except under CI, where it fails).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use longhaul_net::{UdtListener, UdtSocket};
use longhaul_proto::udt::UdtConnConfig;

const BYTES: usize = 16_000_000;
const LIMIT: Duration = Duration::from_secs(60);

/// UDT4's peer's test pattern: byte i is (i * 2654435761) >> 13.
fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[path = "../../proto/tests/udt4/peer_build.rs"]
mod peer_build;
use peer_build::peer_binary;

/// Kills the peer if the test fails early.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Peer {
    fn line(&mut self) -> String {
        let mut line = String::new();
        BufReader::new(self.0.stdout.as_mut().expect("piped"))
            .read_line(&mut line)
            .unwrap();
        line.trim().to_string()
    }
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn udt_socket_and_udt4_exchange_streams_both_ways() {
    let Some(bin) = peer_binary() else { return };
    let data: Vec<u8> = (0..BYTES).map(pattern).collect();

    // Our socket connects to a UDT4 server and sends.
    let port = free_port();
    let mut p = Peer(
        Command::new(&bin)
            .args(["recv", &port.to_string(), &BYTES.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(p.line(), "READY");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let cfg = UdtConnConfig {
        socket_id: 11,
        isn: 123_457,
        ..UdtConnConfig::default()
    };
    let mut s = UdtSocket::connect(addr, cfg, LIMIT).expect("UDT4 accepts our handshake");
    s.write_all(&data).unwrap();
    s.close(LIMIT)
        .expect("UDT4 acknowledges everything and our shutdown completes");
    assert_eq!(
        p.line(),
        format!("ok {BYTES} {:016x}", fnv1a(&data)),
        "UDT4's view of our bytes"
    );

    // A UDT4 client connects to our listener and sends.
    let listener = UdtListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = listener.local_addr().unwrap().port();
    let _p = Peer(
        Command::new(&bin)
            .args(["send", &port.to_string(), &BYTES.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let cfg = UdtConnConfig {
        socket_id: 12,
        ..UdtConnConfig::default()
    };
    let mut s = listener
        .accept(cfg, LIMIT)
        .expect("we accept UDT4's handshake");
    let mut got = Vec::with_capacity(BYTES);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        assert!(got.len() <= BYTES, "more bytes than UDT4 sent");
    }
    assert_eq!(
        got.len(),
        BYTES,
        "UDT4's shutdown came before all its bytes"
    );
    assert!(got == data, "the bytes differ");
}
