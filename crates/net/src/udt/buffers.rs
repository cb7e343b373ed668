//! The UDP socket under a UDT connection: bound non-blocking with large kernel
//! buffers, and a warning when the kernel grants less than asked.

use std::io;
use std::net::{SocketAddr, UdpSocket};

use nix::sys::socket::{setsockopt, sockopt};

/// Kernel socket buffers asked for: a burst of a few thousand packets must not
/// overflow them between two reads.
const SOCKET_BUFFER: usize = 16 << 20;

/// A non-blocking UDP socket bound to `bind`, with kernel buffers of
/// `SOCKET_BUFFER` if the kernel allows them (`net.core.rmem_max`/`wmem_max` cap
/// what an application may ask for); the sizes it got are returned too.
pub(super) fn udp_socket(bind: SocketAddr) -> io::Result<(UdpSocket, [usize; 2])> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))?;
    // Asking for more than the cap is not an error: the kernel clamps.
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    // With CAP_NET_ADMIN (root), the *FORCE options pass the rmem_max/wmem_max caps,
    // whose defaults (208 KiB) overflow within a millisecond at 10 Gb/s. Without
    // it they fail, the clamped sizes stand, and `buffer_warning` says so.
    let _ = setsockopt(&s, sockopt::RcvBufForce, &SOCKET_BUFFER);
    let _ = setsockopt(&s, sockopt::SndBufForce, &SOCKET_BUFFER);
    // Linux reports twice what it grants (the other half is its bookkeeping).
    let got = [s.send_buffer_size()? / 2, s.recv_buffer_size()? / 2];
    s.bind(&bind.into())?;
    s.set_nonblocking(true)?;
    Ok((s.into(), got))
}

/// What to say when the kernel granted less than [`SOCKET_BUFFER`]: the sizes, the
/// longest burst they hold at 1 and 10 Gb/s (a path whose bandwidth-delay product
/// overflows them loses datagrams in the host, which UDT then repairs), and what to
/// raise.
pub(super) fn buffer_warning(buffers: [usize; 2]) -> Option<String> {
    let least = *buffers.iter().min().expect("two sizes");
    (least < SOCKET_BUFFER).then(|| {
        let ms = |gbps: f64| least as f64 * 8.0 / (gbps * 1e9) * 1e3;
        format!(
            "UDP socket buffers are {} / {} KiB (send / receive), below the {} KiB asked for: they hold {:.1} ms at 1 Gb/s, {:.2} ms at 10 Gb/s. Raise net.core.wmem_max and net.core.rmem_max to {} (or run as root)",
            buffers[0] >> 10,
            buffers[1] >> 10,
            SOCKET_BUFFER >> 10,
            ms(1.0),
            ms(10.0),
            SOCKET_BUFFER
        )
    })
}

/// The warning a UDT socket bound to `ip` would give about its buffers (see
/// [`UdtSocket::buffer_warning`](super::UdtSocket::buffer_warning)), to show before a transfer starts.
pub fn socket_buffer_warning(ip: std::net::IpAddr) -> io::Result<Option<String>> {
    let (_, buffers) = udp_socket(SocketAddr::new(ip, 0))?;
    Ok(buffer_warning(buffers))
}

#[cfg(test)]
mod tests {
    use super::{buffer_warning, SOCKET_BUFFER};

    /// Granted buffers below what was asked get a warning that says how long a
    /// burst they hold and what to raise; full ones get none.
    #[test]
    fn capped_buffers_are_reported_with_what_they_hold() {
        assert_eq!(buffer_warning([SOCKET_BUFFER, SOCKET_BUFFER]), None);
        let w = buffer_warning([SOCKET_BUFFER, 4 << 20]).expect("a warning");
        assert!(w.contains("16384 / 4096 KiB"), "{w}");
        assert!(w.contains("33.6 ms at 1 Gb/s"), "{w}");
        assert!(w.contains("net.core.rmem_max"), "{w}");
    }
}
