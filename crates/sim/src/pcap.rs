//! Packet captures of a link direction in the classic pcap format (LINKTYPE_RAW: the
//! records start with the IPv4 header), so Wireshark and tshark open them.
//!
//! The simulator runs with checksums off; the writer fills in correct IPv4, TCP and
//! UDP checksums for each captured header (and the CRC32c of SCTP packets, which are
//! captured whole). Payloads are not stored: each record holds
//! the headers (`caplen`) and states the full length (`len`), as a capture taken with
//! a short snap length would, and the checksums are those of a zero-filled payload.

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;

use longhaul_proto::Instant;
use longhaul_wire::pcap::PcapFile;
use longhaul_wire::sctp::SctpPacket;
use longhaul_wire::{Ipv4Address, Ipv4Packet, TcpPacket, UdpPacket};

use crate::packet::Packet;

/// Writes one pcap file.
#[derive(Debug)]
pub struct PcapWriter {
    file: PcapFile<BufWriter<File>>,
}

impl PcapWriter {
    /// Creates `path` and writes the file header (nanosecond timestamps).
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = PcapFile::new(BufWriter::new(File::create(path)?), 65535)?;
        Ok(PcapWriter { file })
    }

    /// Appends `pkt` seen at `now`. An I/O error is kept and reported by
    /// [`finish`](Self::finish), so the simulation loop need not handle it.
    pub fn write(&mut self, now: Instant, pkt: &Packet) {
        let mut hdr = pkt.hdr;
        let caplen = usize::from(pkt.hdr_len);
        fill_checksums(&mut hdr[..caplen]);
        self.file
            .record(now.as_nanos(), &hdr[..caplen], pkt.wire_len());
    }

    /// Appends a packet kept whole (SCTP): all of it is captured, with its IPv4
    /// checksum and CRC32c filled in.
    pub fn write_whole(&mut self, now: Instant, datagram: &[u8]) {
        let mut d = datagram.to_vec();
        fill_checksums(&mut d);
        self.file.record(now.as_nanos(), &d, d.len() as u32);
    }

    /// Flushes the file; returns the first error met.
    pub fn finish(self) -> io::Result<()> {
        self.file.finish().map(|_| ())
    }
}

fn fill_checksums(hdr: &mut [u8]) {
    let Ok(mut ip) = Ipv4Packet::new_checked(&mut *hdr) else {
        return;
    };
    ip.fill_checksum();
    let (src, dst): (Ipv4Address, Ipv4Address) = (ip.src_addr(), ip.dst_addr());
    let seg_len = ip.payload_len();
    let protocol = u8::from(ip.protocol());
    let payload = ip.payload_mut();
    match protocol {
        6 => {
            if let Ok(mut tcp) = TcpPacket::new_checked(payload) {
                tcp.fill_checksum(src, dst, seg_len);
            }
        }
        17 => {
            if let Ok(mut udp) = UdpPacket::new_checked(payload) {
                udp.fill_checksum(src, dst);
            }
        }
        132 => {
            if let Ok(mut sctp) = SctpPacket::new_checked(payload) {
                sctp.fill_checksum();
            }
        }
        _ => {}
    }
}
