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

use std::sync::{mpsc, Mutex};

use longhaul_proto::transfer::BlockRepr;

use super::super::TransferError;
use super::incoming::{store, Arrival, Incoming, Sink};
use super::session::Event;

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
        // Blocks being gathered now, in all files: counted only when this piece
        // would start another.
        let gathering = |all: &[Incoming]| all.iter().map(|f| f.assembling.len()).sum::<usize>();
        let starts_one = all
            .get(p.file as usize)
            .is_some_and(|f| !f.assembling.contains_key(&start));
        let full = starts_one && gathering(&all) >= sink.max_assemblies;
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
        if full {
            return Err(TransferError::Protocol(format!(
                "pieces of more than {} blocks at once (one per channel)",
                sink.max_assemblies
            )));
        }
        let a = f
            .assembling
            .entry(start)
            .or_insert_with(|| Assembly::new(block.len));
        if !a.put((p.offset - start) as u32, data) {
            return Err(TransferError::Protocol(format!(
                "piece {p:?} overlaps another piece of its block"
            )));
        }
        if !a.complete() {
            return Ok(());
        }
        let a = f.assembling.remove(&start).expect("just put");
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
    use std::sync::atomic::AtomicU64;

    const KEY: [u8; 32] = [9; 32];

    /// One file of `size` bytes in 100-byte blocks, checked and not written, with
    /// room to gather `max` blocks at once.
    fn setup(size: u64, max: usize) -> (Mutex<Vec<Incoming>>, Sink) {
        let f = Incoming::discarded(size);
        let sink = Sink {
            block_size: 100,
            block_key: KEY,
            stored: AtomicU64::new(0),
            pause_before_write: std::time::Duration::ZERO,
            max_assemblies: max,
        };
        (Mutex::new(vec![f]), sink)
    }

    /// The file's bytes: byte `i` is `i % 251`.
    fn bytes(offset: u64, len: u32) -> Vec<u8> {
        (offset..offset + u64::from(len))
            .map(|i| (i % 251) as u8)
            .collect()
    }

    fn piece(
        incoming: &Mutex<Vec<Incoming>>,
        events: &mpsc::Sender<Event>,
        sink: &Sink,
        (offset, len): (u64, u32),
    ) -> Result<(), TransferError> {
        let data = bytes(offset, len);
        let trailer = *blake3::keyed_hash(&KEY, &data).as_bytes();
        let p = BlockRepr {
            file: 0,
            offset,
            len,
        };
        store_piece(incoming, events, sink, p, &data, &trailer)
    }

    /// A block's pieces in any order make the block, hashed whole as the sender
    /// hashed it (so the file's digest checks it); the file is whole once.
    #[test]
    fn pieces_in_any_order_make_the_block_hashed_whole() {
        let (incoming, sink) = setup(250, 2);
        let (events, rx) = mpsc::channel();
        for p in [
            (130, 20),
            (0, 60),
            (100, 30),
            (60, 40),
            (150, 50),
            (200, 50),
        ] {
            piece(&incoming, &events, &sink, p).unwrap();
        }
        let all = incoming.lock().unwrap();
        let f = &all[0];
        assert_eq!(f.received, 250);
        assert!(f.assembling.is_empty());
        for (o, len) in [(0u64, 100u32), (100, 100), (200, 50)] {
            let whole = *blake3::keyed_hash(&KEY, &bytes(o, len)).as_bytes();
            assert_eq!(f.hashes[&o], whole, "block {o}");
        }
        drop(all);
        drop(events);
        let written = rx.iter().filter(|e| matches!(e, Event::Written(0))).count();
        assert_eq!(written, 1);
    }

    /// Refused: a piece across two blocks or past the end, overlapping another,
    /// or of more blocks at once than the session has channels. A damaged piece
    /// asks for its whole block; a piece of a block stored since is passed over.
    #[test]
    fn bad_pieces_are_refused_and_a_damaged_one_asks_for_its_block() {
        let (incoming, sink) = setup(250, 2);
        let (events, rx) = mpsc::channel();
        for p in [(90, 20), (240, 20)] {
            let e = piece(&incoming, &events, &sink, p).unwrap_err();
            assert!(e.to_string().contains("not within one"), "{p:?}: {e}");
        }
        piece(&incoming, &events, &sink, (0, 50)).unwrap();
        let e = piece(&incoming, &events, &sink, (40, 20)).unwrap_err();
        assert!(e.to_string().contains("overlaps"), "{e}");
        piece(&incoming, &events, &sink, (100, 50)).unwrap();
        let e = piece(&incoming, &events, &sink, (200, 10)).unwrap_err();
        assert!(e.to_string().contains("more than 2 blocks"), "{e}");
        // Damaged: the whole block is asked for.
        let p = BlockRepr {
            file: 0,
            offset: 150,
            len: 50,
        };
        store_piece(&incoming, &events, &sink, p, &[0; 50], &[0; 32]).unwrap();
        match rx.try_recv() {
            Ok(Event::Corrupt(0, 100, 100)) => {}
            _ => panic!("expected the block to be asked for again"),
        }
        // It comes whole, sent again; its gathered pieces are dropped, and a
        // late piece of it is passed over.
        let data = bytes(100, 100);
        let trailer = *blake3::keyed_hash(&KEY, &data).as_bytes();
        let b = BlockRepr {
            file: 0,
            offset: 100,
            len: 100,
        };
        store(
            &incoming,
            &events,
            &sink,
            b,
            &data,
            &trailer,
            Arrival::Resent,
        )
        .unwrap();
        piece(&incoming, &events, &sink, (150, 50)).unwrap();
        let all = incoming.lock().unwrap();
        assert_eq!(all[0].received, 100);
        assert_eq!(all[0].assembling.len(), 1);
    }

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
