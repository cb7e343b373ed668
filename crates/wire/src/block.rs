//! The header that frames a file block on a data channel of a parallel transfer.
//!
//! A data channel (a TCP stream or a UDT connection) carries a sequence of blocks,
//! each a header followed by `len` bytes of one file starting at `offset`. Blocks of
//! one file may be spread over many channels (parallelism) and arrive in any order
//! across channels; the receiver's block manager puts them back in place. This is
//! GridFTP's MODE E idea (a descriptor, a count and an offset per block) with a file
//! index instead of one data connection set per file, so that channels can move
//! from one file to the next without a new connection (pipelining).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                          file index                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                      length of the data                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  offset in the file (64 bits)                 |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::{Error, Result};

/// Length of a block header.
pub const HEADER_LEN: usize = 16;

/// A view of a block header.
#[derive(Debug, Clone)]
pub struct BlockPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> BlockPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        BlockPacket { buffer }
    }
    /// Wraps a buffer after checking that a whole header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self::new_unchecked(buffer))
    }
    /// File index.
    pub fn file(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Length of the data that follows.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }
    /// Offset of the data in its file.
    pub fn offset(&self) -> u64 {
        let b = self.buffer.as_ref();
        u64::from_be_bytes(b[8..16].try_into().expect("checked length"))
    }
}

/// A block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockRepr {
    /// File index in the session's file list.
    pub file: u32,
    /// Offset of the data in the file.
    pub offset: u64,
    /// Bytes of data after the header.
    pub len: u32,
}

impl BlockRepr {
    /// Parses a header. A zero length is malformed: no sender frames an empty block
    /// (an empty file needs no data channel at all).
    pub fn parse<T: AsRef<[u8]>>(packet: &BlockPacket<T>) -> Result<Self> {
        let r = BlockRepr {
            file: packet.file(),
            offset: packet.offset(),
            len: packet.len(),
        };
        if r.len == 0 || r.offset.checked_add(u64::from(r.len)).is_none() {
            return Err(Error::Malformed);
        }
        Ok(r)
    }

    /// Writes the header into the first 16 bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 16 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&self.file.to_be_bytes());
        buf[4..8].copy_from_slice(&self.len.to_be_bytes());
        buf[8..16].copy_from_slice(&self.offset.to_be_bytes());
    }

    /// The byte after the block's last, in its file.
    pub fn end(&self) -> u64 {
        self.offset + u64::from(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn roundtrip(file: u32, offset in 0u64..u64::MAX / 2, len in 1u32..) {
            let r = BlockRepr { file, offset, len };
            let mut buf = [0u8; HEADER_LEN];
            r.emit(&mut buf);
            let p = BlockPacket::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(BlockRepr::parse(&p).unwrap(), r);
        }

        #[test]
        fn any_bytes_parse_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(p) = BlockPacket::new_checked(&bytes[..]) {
                let _ = BlockRepr::parse(&p);
            }
        }
    }

    #[test]
    fn empty_and_overflowing_blocks_are_malformed() {
        let mut buf = [0u8; HEADER_LEN];
        BlockRepr {
            file: 1,
            offset: 0,
            len: 0,
        }
        .emit(&mut buf);
        let p = BlockPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(BlockRepr::parse(&p).unwrap_err(), Error::Malformed);
        BlockRepr {
            file: 1,
            offset: u64::MAX,
            len: 1,
        }
        .emit(&mut buf);
        let p = BlockPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(BlockRepr::parse(&p).unwrap_err(), Error::Malformed);
        assert_eq!(
            BlockPacket::new_checked(&buf[..15]).unwrap_err(),
            Error::Truncated
        );
    }
}
