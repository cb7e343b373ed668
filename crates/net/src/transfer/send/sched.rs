//! Which block goes next, on which channel: the lanes (channel groups), each file's
//! hashes and verdict, and what the receiver already holds.
//!
//! The last blocks go in pieces. Blocks cannot be cut while most of the file is
//! left, since the receiver journals and resumes whole blocks; but when the blocks
//! run out, each channel is somewhere in its last block, and a channel that took
//! its last block late, or was slowed by its losses, held the file's tail up to a
//! block-time after the others. So the last blocks of the last file (one per
//! channel of its lane) are each split into two pieces per channel: the channel that
//! takes such a block reads and hashes it whole (its hash goes into the digest)
//! and sends the first piece, and the other pieces go to whichever channels ask
//! next, ahead of any block. A slowed channel then holds at most a piece
//! (`recv/pieces.rs` gathers them).

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use longhaul_proto::transfer::{BlockRepr, FileBlocks};

/// One file's progress on the sending side.
pub(super) struct FileState {
    /// Block hashes by block number (the digest hashes them in order); dropped once
    /// the digest is sent.
    pub(super) hashes: Vec<[u8; 32]>,
    /// Blocks hashed so far.
    pub(super) hashed: usize,
    /// Offsets of blocks the receiver held that differ here, sent again: they go
    /// with the digest, so the receiver does not check the file with its old copies.
    pub(super) changed: Vec<u64>,
    /// Size and modification time when a lane took the file, before any block of it
    /// was read (`None` for the generated file, or if it could not be read).
    pub(super) stamp: Option<(u64, std::time::SystemTime)>,
    /// The receiver's verdict, once it came.
    pub(super) done: Option<bool>,
    /// Written to while its blocks were read.
    pub(super) modified: bool,
    /// Sent whole to replace the receiver's copy, held whole with other contents.
    pub(super) replaced: bool,
}

impl FileState {
    /// A file of `blocks` blocks, none hashed yet.
    pub(super) fn new(blocks: usize) -> Self {
        FileState {
            hashes: vec![[0; 32]; blocks],
            hashed: 0,
            changed: vec![],
            stamp: None,
            done: None,
            modified: false,
            replaced: false,
        }
    }
}

/// A group of channels working on one file at a time.
#[derive(Default)]
pub(super) struct Lane {
    pub(super) blocks: Option<FileBlocks>,
    /// The file the lane took last.
    pub(super) file: Option<usize>,
    /// Whether the lane has started waiting for that file's verdict.
    pub(super) waiting: bool,
}

/// A file's size and modification time, to tell whether it was written to.
pub(super) fn file_stamp(p: &Path) -> Option<(u64, std::time::SystemTime)> {
    if p.as_os_str().is_empty() {
        return None; // the generated file
    }
    let m = std::fs::metadata(p).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// What every channel thread shares: which blocks go next, and the files' state.
pub(super) struct Sched {
    pub(super) next_file: usize,
    pub(super) lanes: Vec<Lane>,
    pub(super) files: Vec<FileState>,
    pub(super) sizes: Vec<u64>,
    pub(super) block_size: u32,
    pub(super) pipelining: bool,
    /// Per file, the blocks the receiver holds already: their hashes by offset.
    pub(super) have: Vec<HashMap<u64, [u8; 32]>>,
    /// Per file, the digest of the copy the receiver holds whole already
    /// (`Accept.present`): none of its blocks is sent, only hashed for the digest.
    pub(super) present: Vec<Option<[u8; 32]>>,
    /// The receiver replaces files (`Accept.replace`): one it holds whole whose
    /// contents differ is sent whole once its digest shows it.
    pub(super) replace: bool,
    /// Files to send whole after all (they differ at the receiver, which
    /// replaces them), before the next file of the offer.
    pub(super) redo: std::collections::VecDeque<usize>,
    /// Files the receiver holds whole whose contents differ from this side's
    /// (indices), and which it does not replace: not sent.
    pub(super) differ: Vec<usize>,
    pub(super) sources: Arc<Vec<PathBuf>>,
    /// Blocks handed out to be sent, and the most that may be (a test's crash).
    pub(super) handed: u64,
    pub(super) limit: u64,
    pub(super) confirmation_waits: u64,
    /// Set when the session is over for the channels: the control channel failed,
    /// or a channel did.
    pub(super) abort: Option<String>,
    /// Channels per lane: how many of a file's last blocks are split, and into
    /// how many pieces.
    pub(super) lane_channels: u32,
    /// Pieces of split blocks waiting for a channel, first come first served.
    pub(super) pieces: std::collections::VecDeque<Piece>,
    /// Blocks a channel is reading to split: their pieces are still to come, so
    /// a channel with nothing else to do waits rather than ends.
    pub(super) splitting: usize,
    /// The blocks have started to go in pieces.
    pub(super) tail: bool,
    /// Blocks that may still be split: the session's channels in all, which is
    /// how many the receiver gathers at once (a file sent again whole, to replace
    /// the receiver's, could otherwise be split while another's pieces are out).
    pub(super) split_budget: u32,
    pub(super) log: Option<File>,
}

/// A piece of a split block: where it lies in its file, and its bytes (a slice of
/// the buffer the block was read into).
pub(super) struct Piece {
    pub(super) repr: BlockRepr,
    pub(super) data: Bytes,
}

/// A split block's pieces per channel of its lane.
pub(super) const PIECES_PER_CHANNEL: u32 = 2;

/// The smallest piece a block is split into (a choice, not a measurement): the
/// short last blocks of small files go whole.
pub(super) const MIN_PIECE: u32 = 64 << 10;

/// The pieces block `b` is split into, `k` of them, of equal length but the last.
pub(super) fn split(b: &BlockRepr, k: u32) -> Vec<BlockRepr> {
    let each = b.len.div_ceil(k.max(1));
    (0..b.len)
        .step_by(each as usize)
        .map(|at| BlockRepr {
            file: b.file,
            offset: b.offset + u64::from(at),
            len: each.min(b.len - at),
        })
        .collect()
}

/// What a channel should do next.
pub(super) enum Next {
    /// Send this block; or, if the receiver holds it (with this hash), only hash it,
    /// and send it only if it differs. The flag: the receiver holds the whole file.
    /// The count: pieces to split it into (1: send it whole).
    Block(BlockRepr, Option<[u8; 32]>, bool, u32),
    /// Send this piece of a block another channel read.
    Piece(Piece),
    /// Wait for the receiver to confirm the lane's last file, or for the pieces
    /// of a block another channel is reading, then ask again.
    Wait,
    /// Nothing is left for this lane.
    Done,
}

impl Sched {
    pub(super) fn next(&mut self, lane: usize, channel: usize) -> Next {
        loop {
            if self.abort.is_some() {
                return Next::Done;
            }
            if let Some(p) = self.pieces.pop_front() {
                return Next::Piece(p);
            }
            let last_file = self.next_file >= self.sizes.len() && self.redo.is_empty();
            let l = &mut self.lanes[lane];
            if let Some(b) = l.blocks.as_mut().and_then(Iterator::next) {
                let rest = l.blocks.as_ref().map_or(0, FileBlocks::remaining);
                let held = self
                    .have
                    .get(b.file as usize)
                    .and_then(|h| h.get(&b.offset))
                    .copied();
                let whole = self.present[b.file as usize].is_some();
                let mut pieces = 1;
                if held.is_none() && !whole {
                    if self.handed == self.limit {
                        return Next::Done;
                    }
                    self.hand_out(&b, channel);
                    // One of the last blocks, one per channel of the lane.
                    let tail = u64::from(self.lane_channels - 1) * u64::from(self.block_size);
                    let tail_block = self.lane_channels > 1 && last_file && rest <= tail;
                    if tail_block && self.split_budget > 0 {
                        pieces = (PIECES_PER_CHANNEL * self.lane_channels)
                            .min(b.len / MIN_PIECE)
                            .max(1);
                    }
                    if pieces > 1 {
                        self.splitting += 1;
                        self.split_budget -= 1;
                        self.tail = true;
                    }
                }
                return Next::Block(b, held, whole, pieces);
            }
            // A file to send whole after all goes first, whatever else waits: the
            // lane may be waiting for its very verdict.
            if let Some(f) = self.redo.pop_front() {
                self.take(lane, f);
                continue;
            }
            if self.next_file >= self.sizes.len() {
                if self.splitting > 0 {
                    return Next::Wait; // pieces are coming
                }
                return Next::Done;
            }
            if !self.pipelining {
                if let Some(f) = l.file {
                    if self.files[f].done.is_none() {
                        if !l.waiting {
                            l.waiting = true;
                            self.confirmation_waits += 1;
                        }
                        return Next::Wait;
                    }
                }
            }
            let f = self.next_file;
            self.next_file += 1;
            self.take(lane, f);
        }
    }

    /// `lane` starts on file `f`: its blocks from the first.
    pub(super) fn take(&mut self, lane: usize, f: usize) {
        self.files[f].stamp = file_stamp(&self.sources[f]);
        let l = &mut self.lanes[lane];
        l.blocks = Some(FileBlocks::new(f as u32, self.sizes[f], self.block_size));
        l.file = Some(f);
        l.waiting = false;
    }

    /// Block `b` goes out on `channel`: counted and logged.
    pub(super) fn hand_out(&mut self, b: &BlockRepr, channel: usize) {
        self.handed += 1;
        self.log(format_args!(
            "block {} {} {} {channel}",
            b.file, b.offset, b.len
        ));
    }

    /// Block `b`, which the receiver holds, differs here: it goes out on `channel`
    /// after all, and the file's digest will say so.
    pub(super) fn changed(&mut self, b: &BlockRepr, channel: usize) {
        self.hand_out(b, channel);
        self.files[b.file as usize].changed.push(b.offset);
    }

    /// One line to the block log, written whole (a crash leaves whole lines).
    pub(super) fn log(&mut self, line: std::fmt::Arguments) {
        if let Some(f) = &mut self.log {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }

    /// Records block `b`'s hash; returns the file's digest, and the held blocks
    /// that changed, once every block of it is hashed (at most once per file, but
    /// for a file the receiver replaces: see below). Then it also notes whether
    /// the file was written to while its blocks were read.
    pub(super) fn hashed(&mut self, b: &BlockRepr, hash: [u8; 32]) -> Option<Digest> {
        let i = b.file as usize;
        let f = &mut self.files[i];
        f.hashes[(b.offset / u64::from(self.block_size)) as usize] = hash;
        f.hashed += 1;
        if f.hashed < f.hashes.len() {
            return None;
        }
        if f.stamp.is_some() && f.stamp != file_stamp(&self.sources[i]) {
            self.files[i].modified = true;
        }
        let digest = digest_of(std::mem::take(&mut self.files[i].hashes));
        if self.present[i].is_some_and(|theirs| theirs != digest) {
            if !self.replace {
                // Another file of this name and size there: not sent, not replaced.
                self.differ.push(i);
            } else {
                // Another file there, which the receiver replaces: every block
                // goes now, and the digest after them. The first reading was
                // only hashed.
                self.present[i] = None;
                let f = &mut self.files[i];
                f.replaced = true;
                f.hashes =
                    vec![[0; 32]; self.sizes[i].div_ceil(u64::from(self.block_size)) as usize];
                f.hashed = 0;
                self.redo.push_back(i);
                return None;
            }
        }
        Some(Digest {
            digest,
            changed: std::mem::take(&mut self.files[i].changed),
            replaced: self.files[i].replaced,
        })
    }
}

/// What a file's `Digest` message says.
pub(super) struct Digest {
    pub(super) digest: [u8; 32],
    /// Held blocks that changed, sent again.
    pub(super) changed: Vec<u64>,
    /// Sent whole to replace the receiver's copy.
    pub(super) replaced: bool,
}

/// A file's digest: BLAKE3 over its blocks' hashes in order.
pub(super) fn digest_of(hashes: Vec<[u8; 32]>) -> [u8; 32] {
    let mut d = blake3::Hasher::new();
    for h in &hashes {
        d.update(h);
    }
    *d.finalize().as_bytes()
}

/// What the channel threads and the verdict thread share. (A channel waiting for a
/// verdict polls it every millisecond rather than sleeping on a condition: it has to
/// keep driving its UDT socket meanwhile.)
pub(super) type Shared = Arc<Mutex<Sched>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A schedule for one lane of `channels` channels sending one file of `blocks`
    /// blocks of 256 KiB, nothing held at the receiver, `budget` splits allowed.
    fn one_file(blocks: u64, channels: u32, budget: u32) -> Sched {
        let block_size = 256 << 10;
        Sched {
            next_file: 0,
            lanes: vec![Lane::default()],
            files: vec![FileState::new(blocks as usize)],
            sizes: vec![blocks * block_size],
            block_size: block_size as u32,
            pipelining: true,
            have: vec![HashMap::new()],
            present: vec![None],
            replace: false,
            redo: std::collections::VecDeque::new(),
            differ: vec![],
            sources: Arc::new(vec![PathBuf::new()]),
            handed: 0,
            limit: u64::MAX,
            confirmation_waits: 0,
            abort: None,
            lane_channels: channels,
            pieces: std::collections::VecDeque::new(),
            splitting: 0,
            tail: false,
            split_budget: budget,
            log: None,
        }
    }

    /// The pieces each block `next` hands out is split into, in order, until it
    /// would wait (a split block's pieces are still to come).
    fn pieces_handed(s: &mut Sched) -> Vec<u32> {
        let mut out = vec![];
        while let Next::Block(_, _, _, k) = s.next(0, 0) {
            out.push(k);
        }
        out
    }

    /// Of ten blocks on four channels the last four are split, into two pieces per
    /// channel but none under 64 KiB (256 KiB: four); the others go whole. While a
    /// split block's pieces are still to come, a channel with nothing left waits
    /// rather than ends; pieces go out before anything else, then it ends.
    #[test]
    fn the_last_block_per_channel_is_split_and_an_idle_channel_waits_for_its_pieces() {
        let mut s = one_file(10, 4, 4);
        assert_eq!(pieces_handed(&mut s), [1, 1, 1, 1, 1, 1, 4, 4, 4, 4]);
        assert!(s.tail);
        assert!(matches!(s.next(0, 1), Next::Wait));
        s.splitting = 0;
        let b = BlockRepr {
            file: 0,
            offset: 0,
            len: 10,
        };
        s.pieces.push_back(Piece {
            repr: b,
            data: Bytes::from_static(&[0; 10]),
        });
        assert!(matches!(s.next(0, 1), Next::Piece(p) if p.repr == b));
        assert!(matches!(s.next(0, 1), Next::Done));
    }

    /// No more blocks are split than the budget (the receiver's room), and one
    /// channel splits nothing.
    #[test]
    fn splits_stay_within_the_budget_and_one_channel_never_splits() {
        let mut s = one_file(10, 4, 2);
        assert_eq!(pieces_handed(&mut s), [1, 1, 1, 1, 1, 1, 4, 4, 1, 1]);
        let mut s = one_file(3, 1, 1);
        assert_eq!(pieces_handed(&mut s), [1, 1, 1]);
    }

    /// A block's pieces cover it exactly, in order, the last one shorter.
    #[test]
    fn pieces_cover_their_block() {
        let b = BlockRepr {
            file: 2,
            offset: 1000,
            len: 10,
        };
        let p: Vec<(u64, u32)> = split(&b, 4).iter().map(|p| (p.offset, p.len)).collect();
        assert_eq!(p, [(1000, 3), (1003, 3), (1006, 3), (1009, 1)]);
        assert_eq!(split(&b, 1), [b]);
    }
}
