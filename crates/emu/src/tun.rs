//! TUN devices: layer-3 virtual interfaces whose packets the emulator reads and
//! writes through a file descriptor. Made with `IFF_TUN | IFF_NO_PI`, so each read
//! or write is exactly one IP packet with no header in front, and non-blocking.
//!
//! The device lives in the network namespace of the thread that creates it (see
//! [`crate::netns::Netns::run`]); its file descriptor works from any thread.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;

/// One TUN device, removed when dropped (it is not persistent).
#[derive(Debug)]
pub struct Tun {
    file: File,
    name: String,
    offload: bool,
}

impl Tun {
    /// Creates the device `name` in the calling thread's network namespace. With
    /// `offload`, every read and write carries a virtio-net header
    /// ([`crate::gso`]) and the kernel may hand over (and accept) TCP super-packets
    /// of up to 64 KB with their checksums left partial.
    pub fn create(name: &str, offload: bool) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{name}` is not a valid interface name (1 to 15 bytes, no '/')"),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| {
                io::Error::new(e.kind(), format!("cannot open /dev/net/tun: {e} (is the tun module loaded, and are we root?)"))
            })?;
        let mut ifr_name = [0 as libc::c_char; libc::IFNAMSIZ];
        for (d, s) in ifr_name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // Start from a fully initialised union (its largest member zeroed), then set
        // the one field TUNSETIFF reads. Writing a union field is safe.
        let mut req = libc::ifreq {
            ifr_name,
            ifr_ifru: libc::__c_anonymous_ifr_ifru {
                ifru_map: libc::__c_anonymous_ifru_map {
                    mem_start: 0,
                    mem_end: 0,
                    base_addr: 0,
                    irq: 0,
                    dma: 0,
                    port: 0,
                },
            },
        };
        let vnet = if offload { libc::IFF_VNET_HDR } else { 0 };
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI | vnet) as libc::c_short;
        // SAFETY: the descriptor is an open /dev/net/tun that `file` owns for the
        // whole call; TUNSETIFF reads and writes one `struct ifreq`, and `req` is a
        // fully initialised `libc::ifreq` (the kernel's layout) that lives on this
        // stack frame until the call returns. No pointer outlives the call.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::ioctl(
                file.as_raw_fd(),
                libc::TUNSETIFF,
                &mut req as *mut libc::ifreq,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("cannot create TUN device `{name}`: {e}"),
            ));
        }
        if offload {
            let features = libc::TUN_F_CSUM | libc::TUN_F_TSO4;
            // SAFETY: as above, `file` owns the descriptor for the whole call;
            // TUNSETOFFLOAD takes its argument by value (an unsigned long of feature
            // bits), so no memory is shared with the kernel.
            #[allow(unsafe_code)]
            let rc = unsafe {
                libc::ioctl(
                    file.as_raw_fd(),
                    libc::TUNSETOFFLOAD,
                    libc::c_ulong::from(features),
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(
                    e.kind(),
                    format!("TUN `{name}` refuses offloads: {e}"),
                ));
            }
        }
        let got: Vec<u8> = req
            .ifr_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Ok(Tun {
            file,
            name: String::from_utf8_lossy(&got).into_owned(),
            offload,
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether reads and writes carry a virtio-net header.
    pub fn offload(&self) -> bool {
        self.offload
    }

    /// Reads one packet into `buf`; `WouldBlock` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        (&self.file).read(buf)
    }

    /// Writes one packet.
    pub fn send(&self, packet: &[u8]) -> io::Result<usize> {
        (&self.file).write(packet)
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}
