//! Live interoperability with the UDT4 4.11 reference implementation (Debian's
//! `libudt-dev`): our engine, driven over a real UDP socket on loopback, exchanges
//! 8 MB each way with a UDT4 peer (`tests/udt4/peer.cpp`, built here with g++). The
//! handshake (with SYN cookie), data, ACK/ACK2, NAK with loss lists and shutdown must
//! all be understood by both sides; the first transmission of one data packet in 89
//! (by sequence number) is dropped on purpose in each direction so that both sides'
//! NAKs and retransmissions are exercised. (Retransmissions are not dropped: UDT4
//! 4.11 reports a loss only once, so a lost retransmission waits for the sender's
//! EXP timer, which keeps being reset while other packets flow; the stall that
//! follows is 4.11's behaviour, not what this test is about.) The data must arrive
//! byte-exact.
//!
//! Needs g++ and libudt-dev; `.ci/run` installs them. Without them the test is
//! skipped with a message, except under CI (`CI` set), where it fails.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration as StdDuration;

use longhaul_proto::udt::{Event, NakReport, State, UdtConnConfig, UdtConnection};
use longhaul_proto::{Engine, Instant};

const BYTES: usize = 8_000_000;
/// Every test is bounded: past this the peer is killed and the test fails.
const LIMIT: StdDuration = StdDuration::from_secs(60);

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

fn fnv1a(bytes: impl Iterator<Item = u8>) -> u64 {
    bytes.fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[path = "udt4/peer_build.rs"]
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

/// The I/O driver: a UDP socket, a clock, and the engine. (The engine never reads
/// the clock; its driver does.)
struct Driver {
    sock: UdpSocket,
    peer: Option<SocketAddr>,
    conn: UdtConnection,
    epoch: std::time::Instant,
    /// Sequence numbers whose first transmission was dropped.
    dropped: HashSet<u32>,
    received: Vec<u8>,
    events: Vec<Event>,
}

impl Driver {
    fn new(conn: UdtConnection, peer: Option<SocketAddr>) -> Driver {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        Driver {
            sock,
            peer,
            conn,
            #[allow(clippy::disallowed_methods)] // the driver owns the clock
            epoch: std::time::Instant::now(),
            dropped: HashSet::new(),
            received: vec![],
            events: vec![],
        }
    }

    /// Whether to drop this datagram: the first copy of every data packet whose
    /// sequence number is a multiple of 89.
    fn drop(&mut self, datagram: &[u8]) -> bool {
        let word = u32::from_be_bytes(datagram[..4].try_into().unwrap());
        word & 0x8000_0000 == 0 && word % 89 == 0 && self.dropped.insert(word)
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// One round: send what is due, then wait for a datagram or the next deadline.
    fn step(&mut self) {
        let mut buf = [0u8; 1500];
        while let Some(tx) = self.conn.poll_transmit(self.now(), &mut buf) {
            if self.drop(&buf[..tx.written]) {
                continue;
            }
            if let Some(p) = self.peer {
                self.sock.send_to(&buf[..tx.written], p).unwrap();
            }
        }
        while let Some(e) = self.conn.poll_event() {
            self.events.push(e);
        }
        let mut tmp = [0u8; 1 << 16];
        loop {
            let n = self.conn.recv(&mut tmp);
            if n == 0 {
                break;
            }
            self.received.extend_from_slice(&tmp[..n]);
        }
        let now = self.now();
        let wait = self
            .conn
            .poll_timeout()
            .map_or(StdDuration::from_millis(10), |t| {
                t.saturating_duration_since(now)
            })
            .clamp(StdDuration::from_micros(20), StdDuration::from_millis(10));
        self.sock.set_read_timeout(Some(wait)).unwrap();
        let mut rbuf = [0u8; 2048];
        if let Ok((n, from)) = self.sock.recv_from(&mut rbuf) {
            self.peer.get_or_insert(from);
            self.deliver(&rbuf[..n]);
            // Then everything else already queued: a slow reader loses datagrams to
            // the socket buffer, which UDT4 (a fast, threaded sender) fills in bursts.
            self.sock.set_nonblocking(true).unwrap();
            while let Ok((n, _)) = self.sock.recv_from(&mut rbuf) {
                self.deliver(&rbuf[..n]);
            }
            self.sock.set_nonblocking(false).unwrap();
        }
        // Timers are due whether or not datagrams keep arriving (early calls do
        // nothing).
        self.conn.handle_timeout(self.now());
    }

    fn deliver(&mut self, datagram: &[u8]) {
        if datagram.len() >= 4 && !self.drop(datagram) {
            self.conn
                .handle_datagram(self.now(), datagram, datagram.len());
        }
    }
}

fn config(socket_id: u32, isn: u32) -> UdtConnConfig {
    UdtConnConfig {
        socket_id,
        isn,
        ..UdtConnConfig::default()
    }
}

fn read_line(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim().to_string()
}

/// Our client sends 8 MB to a UDT4 server, which checks them.
#[test]
fn our_client_sends_to_udt4() {
    let Some(bin) = peer_binary() else { return };
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut peer = Peer(
        Command::new(&bin)
            .args(["recv", &port.to_string(), &BYTES.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(read_line(&mut peer.0), "READY");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // An initial sequence number 3000 below the wrap, so the transfer crosses it.
    let mut d = Driver::new(
        UdtConnection::new(config(7, (1 << 31) - 3000), Instant::ZERO),
        Some(addr),
    );
    let now = d.now();
    d.conn.connect(now);
    let data: Vec<u8> = (0..BYTES).map(pattern).collect();
    let mut off = 0;
    while d.epoch.elapsed() < LIMIT && d.conn.state() != State::Closed {
        if d.conn.state() == State::Connected && off < data.len() {
            off += d.conn.send(&data[off..]).unwrap();
            if off == data.len() {
                d.conn.close();
            }
        }
        d.step();
    }
    assert!(d.events.contains(&Event::Connected), "{:?}", d.events);
    assert_eq!(off, BYTES, "{:?}", d.conn.stats());
    let line = read_line(&mut peer.0);
    assert_eq!(
        line,
        format!("ok {BYTES} {:016x}", fnv1a(data.iter().copied())),
        "UDT4's view of our data; our counters: {:?}",
        d.conn.stats()
    );
    let s = d.conn.stats();
    assert!(s.naks_received > 0 && s.retransmitted > 0, "{s:?}");
    assert!(s.acks_received > 0, "{s:?}");
}

/// A UDT4 client sends 8 MB to our server.
#[test]
fn udt4_client_sends_to_our_server() {
    let Some(bin) = peer_binary() else { return };
    // The periodic NAK (not 4.11's) on our side: loopback itself drops datagrams when
    // the reader falls behind, retransmissions included, and a 4.11 receiver would
    // then wait for the sender's EXP timer.
    let mut server = config(9, 0);
    server.nak_report = NakReport::Periodic;
    let mut d = Driver::new(UdtConnection::new(server, Instant::ZERO), None);
    d.conn.listen();
    let port = d.sock.local_addr().unwrap().port();
    let _peer = Peer(
        Command::new(&bin)
            .args(["send", &port.to_string(), &BYTES.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    while d.epoch.elapsed() < LIMIT
        && !(d.received.len() >= BYTES && d.events.contains(&Event::PeerShutdown))
    {
        d.step();
    }
    assert!(d.events.contains(&Event::Connected), "{:?}", d.events);
    assert_eq!(d.received.len(), BYTES, "{:?}", d.conn.stats());
    assert!(
        d.received.iter().enumerate().all(|(i, &b)| b == pattern(i)),
        "the data differ"
    );
    assert!(
        d.events.contains(&Event::PeerShutdown),
        "UDT4's close: {:?}",
        d.events
    );
    let s = d.conn.stats();
    assert!(s.naks_sent > 0 && s.acks_sent > 0, "{s:?}");
}
