//! The classic pcap file format (nanosecond timestamps, `LINKTYPE_RAW`: each record
//! starts with the IPv4 header), so Wireshark and tshark open the captures of the
//! simulator and of the emulator alike.
//!
//! This module writes records; what goes in them (whole packets, headers only,
//! filled-in checksums) is the caller's choice.

use std::io::{self, Write};

const LINKTYPE_RAW: u32 = 101;

/// Writes pcap records to any byte sink. An I/O error is kept and reported by
/// [`finish`](Self::finish), so a packet loop need not handle one per record.
#[derive(Debug)]
pub struct PcapFile<W: Write> {
    out: W,
    error: Option<io::Error>,
}

impl<W: Write> PcapFile<W> {
    /// Writes the file header to `out`: nanosecond timestamps, a snap length of
    /// `snaplen` bytes.
    pub fn new(mut out: W, snaplen: u32) -> io::Result<Self> {
        out.write_all(&0xa1b2_3c4du32.to_le_bytes())?; // nanosecond-resolution magic
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?;
        out.write_all(&0u32.to_le_bytes())?;
        out.write_all(&snaplen.to_le_bytes())?;
        out.write_all(&LINKTYPE_RAW.to_le_bytes())?;
        Ok(PcapFile { out, error: None })
    }

    /// Appends one record: the `captured` bytes of a packet `len` bytes long, seen
    /// `ns` nanoseconds after the capture's epoch.
    pub fn record(&mut self, ns: u64, captured: &[u8], len: u32) {
        if self.error.is_some() {
            return;
        }
        let rec = [
            ((ns / 1_000_000_000) as u32).to_le_bytes(),
            ((ns % 1_000_000_000) as u32).to_le_bytes(),
            (captured.len() as u32).to_le_bytes(),
            len.to_le_bytes(),
        ];
        let res = rec
            .iter()
            .try_for_each(|b| self.out.write_all(b))
            .and_then(|_| self.out.write_all(captured));
        if let Err(e) = res {
            self.error = Some(e);
        }
    }

    /// Flushes the sink; returns the first error met.
    pub fn finish(mut self) -> io::Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_one_record() {
        let mut f = PcapFile::new(Vec::new(), 128).unwrap();
        f.record(1_500_000_002, &[0x45, 0, 0, 20], 20);
        let b = f.finish().unwrap();
        assert_eq!(b.len(), 24 + 16 + 4);
        assert_eq!(&b[..4], &0xa1b2_3c4du32.to_le_bytes());
        assert_eq!(&b[16..20], &128u32.to_le_bytes());
        assert_eq!(&b[20..24], &101u32.to_le_bytes());
        assert_eq!(&b[24..28], &1u32.to_le_bytes()); // seconds
        assert_eq!(&b[28..32], &500_000_002u32.to_le_bytes()); // nanoseconds
        assert_eq!(&b[32..36], &4u32.to_le_bytes()); // captured
        assert_eq!(&b[36..40], &20u32.to_le_bytes()); // on the wire
        assert_eq!(&b[40..], &[0x45, 0, 0, 20]);
    }
}
