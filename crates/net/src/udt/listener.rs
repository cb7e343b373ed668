//! The accepting side: a bound port that answers handshakes statelessly (a cookie)
//! until one completes, then becomes that client's [`UdtSocket`].

use std::io::{self, ErrorKind};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration as StdDuration;

use longhaul_proto::udt::{State, UdtConnConfig, UdtConnection};
use longhaul_proto::Engine;

use super::buffers::udp_socket;
use super::{address_tag, offset_for, room_for_protection, to_proto, NetError, UdtSocket, SPIN};
use crate::clock::Clock;
use crate::secure::PacketProtection;

/// A bound UDP port that accepts one UDT connection.
#[derive(Debug)]
pub struct UdtListener {
    sock: UdpSocket,
    buffers: [usize; 2],
}

impl UdtListener {
    /// Binds `addr` (port 0: any free port).
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let (sock, buffers) = udp_socket(addr)?;
        Ok(UdtListener { sock, buffers })
    }
    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }
    /// Waits for a client's handshake and completes it; the socket then belongs to
    /// that client.
    ///
    /// Only a completed handshake (a request carrying the cookie this side gave)
    /// takes the socket: a first request is answered with its cookie and forgotten,
    /// as UDT4's server does, and any other datagram is dropped. So a stray
    /// datagram (a port scan) cannot tie the port to an address that will never
    /// finish, ahead of the client that will.
    pub fn accept(self, cfg: UdtConnConfig, timeout: StdDuration) -> Result<UdtSocket, NetError> {
        self.accept_protected(cfg, timeout, None)
    }

    /// [`accept`](Self::accept), every datagram protected by `protect` (if any):
    /// a datagram that does not open under the session's keys, the handshake's
    /// included, is dropped unseen, so only the session's sender can connect.
    pub fn accept_protected(
        self,
        cfg: UdtConnConfig,
        timeout: StdDuration,
        mut protect: Option<PacketProtection>,
    ) -> Result<UdtSocket, NetError> {
        let mut cfg = room_for_protection(cfg, &protect);
        // A key of this listener's own for its cookies, bound to each client's
        // address: a handshake from a spoofed address cannot complete.
        cfg.cookie_key
            .get_or_insert_with(crate::secure::random_bytes::<32>);
        let clock = Clock::new();
        let mut conn = UdtConnection::new(cfg, clock.now());
        conn.listen();
        let mut buf = vec![0u8; 1 << 16];
        let give_up = clock.now() + to_proto(timeout);
        self.sock.set_nonblocking(false)?;
        let peer = loop {
            let left = give_up.saturating_duration_since(clock.now());
            if left == longhaul_proto::Duration::ZERO {
                return Err(NetError::Timeout(timeout));
            }
            self.sock.set_read_timeout(Some(
                StdDuration::from_nanos(left.as_nanos() as u64).max(SPIN),
            ))?;
            match self.sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let now = clock.now();
                    let plain = match &mut protect {
                        None => 0..n,
                        Some(p) => match p.open(&mut buf, n) {
                            Some(r) => r,
                            None => continue,
                        },
                    };
                    conn.set_handshake_peer(address_tag(from));
                    conn.handle_datagram(now, &buf[plain.clone()], plain.len());
                    if conn.state() == State::Connected {
                        // Its answer is queued: the socket sends it once connected.
                        self.sock.connect(from)?;
                        break from;
                    }
                    let at = offset_for(&protect);
                    while let Some(t) = conn.poll_transmit(now, &mut buf[at..]) {
                        let n = match &mut protect {
                            None => t.written,
                            Some(p) => p.seal(&mut buf, t.written),
                        };
                        // To whoever asked; one that cannot be reached asks again
                        // or never finishes, and neither stops the wait.
                        let _ = self.sock.send_to(&buf[..n], from);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(e.into()),
            }
        };
        self.sock.set_nonblocking(true)?;
        let mut s = UdtSocket::new(self.sock, peer, conn, clock, self.buffers);
        s.protect = protect;
        s.wait_connected(give_up, timeout)?;
        Ok(s)
    }
}
