//! The block manager of a parallel transfer: how files are cut into blocks for the
//! data channels, and how the receiver puts the blocks back in order.
//!
//! A transfer moves a list of files over N data channels (TCP streams or UDT
//! connections). The sender cuts each file into blocks ([`FileBlocks`]) and writes
//! each block, behind a [`BlockRepr`] header, on whichever channel has room; so one
//! file is striped over all its channels (parallelism), and a channel moves on to
//! the next file's blocks as soon as it has written the last (pipelining). Each
//! channel delivers its own bytes in order, but the channels race each other, so
//! the receiver sees a file's blocks out of order. The [`Reassembler`] keeps the
//! early ones until the gap before them closes and hands the file's bytes to its
//! writer strictly in order (a sequential writer, as a disk prefers); how much it had
//! to hold is what striping costs in memory. [`Deframer`] splits a channel's byte
//! stream back into blocks.
//!
//! Like the engines, none of this does I/O or reads a clock: the simulator drives it
//! with byte counts (content elided) and a real transfer with real bytes. What it
//! does not do: choose channels (the caller does, when a socket has room), checksums
//! or resume (the transfer protocol's job).

use std::collections::BTreeMap;

use longhaul_wire::block::BlockPacket;
pub use longhaul_wire::block::{BlockRepr, HEADER_LEN};

/// The blocks of one file, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileBlocks {
    file: u32,
    size: u64,
    block_size: u32,
    next: u64,
}

impl FileBlocks {
    /// The blocks of file `file` (`size` bytes), `block_size` bytes each but the last.
    ///
    /// # Panics
    /// If `block_size` is zero.
    pub fn new(file: u32, size: u64, block_size: u32) -> Self {
        assert!(block_size > 0, "a block holds at least a byte");
        FileBlocks {
            file,
            size,
            block_size,
            next: 0,
        }
    }
    /// Bytes not yet cut into blocks.
    pub fn remaining(&self) -> u64 {
        self.size - self.next
    }
}

impl Iterator for FileBlocks {
    type Item = BlockRepr;
    fn next(&mut self) -> Option<BlockRepr> {
        if self.next == self.size {
            return None;
        }
        let len = self.remaining().min(u64::from(self.block_size)) as u32;
        let b = BlockRepr {
            file: self.file,
            offset: self.next,
            len,
        };
        self.next += u64::from(len);
        Some(b)
    }
}

/// A block the receiver cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// The file index is not in the session's list.
    #[error("block for file {0}, which is not in the file list")]
    UnknownFile(u32),
    /// The block runs past the end of its file.
    #[error("block {0:?} runs past the end of its file")]
    PastEnd(BlockRepr),
    /// The block overlaps bytes already received.
    #[error("block {0:?} overlaps bytes already received")]
    Overlap(BlockRepr),
    /// Content was given for a block of another length.
    #[error("block {0:?} came with {1} bytes of data")]
    Length(BlockRepr, usize),
}

/// What inserting a block did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Bytes of the block's file that became writable in order.
    pub written: u64,
    /// Whether the file is now complete.
    pub file_done: bool,
}

#[derive(Debug)]
struct Pending {
    len: u32,
    data: Option<Box<[u8]>>,
}

#[derive(Debug)]
struct FileState {
    size: u64,
    /// Bytes handed to the writer, in order from 0.
    written: u64,
    /// Blocks that arrived before the gap in front of them closed, by offset.
    pending: BTreeMap<u64, Pending>,
}

/// The receiver's block manager: takes blocks in any order, writes each file in
/// order.
#[derive(Debug)]
pub struct Reassembler {
    files: Vec<FileState>,
    held_bytes: u64,
    peak_held_bytes: u64,
    done_files: usize,
}

impl Reassembler {
    /// A block manager for files of these sizes (index = file index).
    pub fn new(sizes: impl IntoIterator<Item = u64>) -> Self {
        let files: Vec<FileState> = sizes
            .into_iter()
            .map(|size| FileState {
                size,
                written: 0,
                pending: BTreeMap::new(),
            })
            .collect();
        let done_files = files.iter().filter(|f| f.size == 0).count();
        Reassembler {
            files,
            held_bytes: 0,
            peak_held_bytes: 0,
            done_files,
        }
    }

    /// Takes block `b`, with its content when the caller carries content, and calls
    /// `write(file, offset, data, len)` for each run of bytes that is now in order
    /// (`data` is `None` when content is elided). Blocks are checked against the file
    /// list and against what has arrived: a bad block changes nothing.
    pub fn insert(
        &mut self,
        b: BlockRepr,
        data: Option<&[u8]>,
        mut write: impl FnMut(u32, u64, Option<&[u8]>, u32),
    ) -> Result<Progress, BlockError> {
        let f = self
            .files
            .get_mut(b.file as usize)
            .ok_or(BlockError::UnknownFile(b.file))?;
        if b.len == 0 || b.end() > f.size {
            return Err(BlockError::PastEnd(b));
        }
        if let Some(d) = data {
            if d.len() != b.len as usize {
                return Err(BlockError::Length(b, d.len()));
            }
        }
        let overlaps_next = f
            .pending
            .range(b.offset..)
            .next()
            .is_some_and(|(&o, _)| o < b.end());
        let overlaps_prev = f
            .pending
            .range(..b.offset)
            .next_back()
            .is_some_and(|(&o, p)| o + u64::from(p.len) > b.offset);
        if b.offset < f.written || overlaps_next || overlaps_prev {
            return Err(BlockError::Overlap(b));
        }
        let before = f.written;
        if b.offset == f.written {
            write(b.file, b.offset, data, b.len);
            f.written = b.end();
            // The block closed a gap: what waited behind it follows.
            while let Some(p) = f.pending.remove(&f.written) {
                write(b.file, f.written, p.data.as_deref(), p.len);
                self.held_bytes -= u64::from(p.len);
                f.written += u64::from(p.len);
            }
        } else {
            f.pending.insert(
                b.offset,
                Pending {
                    len: b.len,
                    data: data.map(Box::from),
                },
            );
            self.held_bytes += u64::from(b.len);
            self.peak_held_bytes = self.peak_held_bytes.max(self.held_bytes);
        }
        let file_done = f.written == f.size && before < f.size;
        if file_done {
            self.done_files += 1;
        }
        Ok(Progress {
            written: f.written - before,
            file_done,
        })
    }

    /// Bytes of file `file` written in order so far.
    pub fn written(&self, file: u32) -> u64 {
        self.files.get(file as usize).map_or(0, |f| f.written)
    }
    /// Whether every file is complete.
    pub fn is_done(&self) -> bool {
        self.done_files == self.files.len()
    }
    /// Bytes held now: blocks that arrived ahead of a gap.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }
    /// The most bytes held at once: the memory striping cost the receiver.
    pub fn peak_held_bytes(&self) -> u64 {
        self.peak_held_bytes
    }
}

/// Splits one channel's byte stream into blocks, whatever pieces it arrives in.
#[derive(Debug)]
pub struct Deframer {
    /// The largest block the session allows: a header claiming more is refused
    /// before anything is buffered for it.
    max_len: u32,
    header: Vec<u8>,
    current: Option<(BlockRepr, Vec<u8>)>,
}

/// A channel's stream that is not a sequence of blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed block header on a data channel (empty, past 2^64, or longer than the session's block size)")]
pub struct FramingError;

impl Deframer {
    /// A deframer for blocks of at most `max_len` bytes of data.
    pub fn new(max_len: u32) -> Self {
        Deframer {
            max_len,
            header: Vec::with_capacity(HEADER_LEN),
            current: None,
        }
    }

    /// Takes the next `bytes` of the stream; calls `block` for each block completed.
    pub fn push(
        &mut self,
        mut bytes: &[u8],
        mut block: impl FnMut(BlockRepr, &[u8]),
    ) -> Result<(), FramingError> {
        while !bytes.is_empty() {
            match &mut self.current {
                None => {
                    let take = (HEADER_LEN - self.header.len()).min(bytes.len());
                    self.header.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if self.header.len() == HEADER_LEN {
                        let p =
                            BlockPacket::new_checked(&self.header[..]).map_err(|_| FramingError)?;
                        let r = BlockRepr::parse(&p).map_err(|_| FramingError)?;
                        if r.len > self.max_len {
                            return Err(FramingError);
                        }
                        self.header.clear();
                        self.current = Some((r, Vec::with_capacity(r.len as usize)));
                    }
                }
                Some((r, data)) => {
                    let take = (r.len as usize - data.len()).min(bytes.len());
                    data.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if data.len() == r.len as usize {
                        let (r, data) = self.current.take().expect("present");
                        block(r, &data);
                    }
                }
            }
        }
        Ok(())
    }
    /// Whether the stream ended between blocks.
    pub fn at_boundary(&self) -> bool {
        self.header.is_empty() && self.current.is_none()
    }
}

#[cfg(test)]
mod tests;
