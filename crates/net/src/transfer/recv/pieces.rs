//! Blocks that arrive in pieces: the sender splits a file's last blocks over its
//! channels, so that when the blocks run out no channel is left with a whole block
//! to send while the others stand idle (`send/sched.rs` says when it splits).
//!
//! Each piece carries its own keyed hash and is checked on arrival. A block's
//! pieces are gathered in memory; once all are in, the block is hashed whole and
//! stored like any block, so the file's digest still checks every byte. At most
//! one block per channel is gathered at once: a sender that splits more is
//! refused, so a stranger's pieces could not take memory even if one got past
//! the ticket.

use std::collections::btree_map::Entry;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Mutex};

use longhaul_proto::transfer::BlockRepr;

use super::incoming::{store, Arrival, Incoming, Sink};
use super::session::Event;
use super::super::TransferError;

/// A block being gathered from its pieces.
#[derive(Debug)]
pub(super) struct Assembly {
    data: Vec<u8>,
    /// The byte ranges in, by start: (start, end) within the block.
    got: Vec<(u32, u32)>,
    filled: u32,
}

impl Assembly {
    fn new(len: u32) -> Self {
        Assembly {
            data: vec![0; len as usize],
            got: vec![],
            filled: 0,
        }
    }

    /// Puts `data` at `at`; false if it overlaps a piece already in.
    fn put(&mut self, at: u32, data: &[u8]) -> bool {
        let end = at + data.len() as u32;
        if self.got.iter().any(|&(s, e)| at < e && s < end) {
            return false;
        }
        self.got.push((at, end));
        self.data[at as usize..end as usize].copy_from_slice(data);
        self.filled += end - at;
        true
    }

    fn complete(&self) -> bool {
        self.filled as usize == self.data.len()
    }
}

/// Takes piece `p` (file, offset and length of the piece) of a block, checked by
/// its own `trailer`; stores the block once its last piece is in.
///
/// A damaged piece asks for its whole block again (it comes on the control
/// channel, and the pieces gathered are dropped when it is stored). A piece of a
/// block stored already is passed over: its block was sent again whole.
pub(super) fn store_piece(
    incoming: &Mutex<Vec<Incoming>>,
    events: &mpsc::Sender<Event>,
    sink: &Sink,
    p: BlockRepr,
    data: &[u8],
    trailer: &[u8],
) -> Result<(), TransferError> {
    let block_size = u64::from(sink.block_size);
    let start = p.offset - p.offset % block_size;
    let (block, data) = {
        let mut all = incoming.lock().expect("no panics hold it");
        let f = all
            .get_mut(p.file as usize)
            .filter(|f| p.offset < f.size && p.end() <= f.size.min(start + block_size))
            .ok_or_else(|| {
                TransferError::Protocol(format!(
                    "piece {p:?} is not within one of the offered files' blocks"
                ))
            })?;
        let block = BlockRepr {
            file: p.file,
            offset: start,
            len: (f.size - start).min(block_size) as u32,
        };
        if !f.start_replacing() {
            return Err(TransferError::Protocol(format!(
                "piece {p:?} of a file the receiver holds whole (the sender sends none)"
            )));
        }
        if f.hashes.contains_key(&start) && !f.kept.contains(&start) {
            return Ok(());
        }
        // Keyed: a piece and its hash rewritten together on the path do not match.
        if blake3::keyed_hash(&sink.block_key, data).as_bytes() != trailer {
            let _ = events.send(Event::Corrupt(block.file, block.offset, block.len));
            return Ok(());
        }
        let a = match f.assembling.entry(start) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(v) => {
                if sink.assemblies.fetch_add(1, Ordering::Relaxed) >= sink.max_assemblies {
                    sink.assemblies.fetch_sub(1, Ordering::Relaxed);
                    return Err(TransferError::Protocol(format!(
                        "pieces of more than {} blocks at once (one per channel)",
                        sink.max_assemblies
                    )));
                }
                v.insert(Assembly::new(block.len))
            }
        };
        if !a.put((p.offset - start) as u32, data) {
            return Err(TransferError::Protocol(format!(
                "piece {p:?} overlaps another piece of its block"
            )));
        }
        if !a.complete() {
            return Ok(());
        }
        let a = f.assembling.remove(&start).expect("just put");
        sink.assemblies.fetch_sub(1, Ordering::Relaxed);
        (block, a.data)
    };
    let hash = blake3::keyed_hash(&sink.block_key, &data);
    store(
        incoming,
        events,
        sink,
        block,
        &data,
        hash.as_bytes(),
        Arrival::Assembled,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_fill_a_block_once_and_never_overlap() {
        let mut a = Assembly::new(10);
        assert!(a.put(4, &[4, 5, 6]));
        assert!(!a.complete());
        assert!(!a.put(6, &[0, 0]), "overlaps the end of the first");
        assert!(!a.put(2, &[0, 0, 0]), "overlaps its start");
        assert!(a.put(0, &[0, 1, 2, 3]));
        assert!(a.put(7, &[7, 8, 9]));
        assert!(a.complete());
        assert_eq!(a.data, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }
}
