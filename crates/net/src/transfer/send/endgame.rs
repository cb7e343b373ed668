//! The endgame: when a channel has no block left to send, it sends a copy of a
//! block that a slower channel still has in flight, and whichever copy the
//! receiver has first is stored (BitTorrent's endgame mode, applied to striping).
//!
//! Without it the transfer ends when its slowest channel delivers its last block:
//! blocks cannot be split, so a channel slowed by its losses holds the file's tail
//! while the others stand idle, up to a block-time or more after them. With it,
//! the idle channels race the slow one for its last blocks, and a channel is
//! finished once every block it carried is acknowledged on some channel.
//!
//! What is in flight is learnt from the channels' own acknowledgements (a block's
//! buffer comes back when UDT has acknowledged its every packet:
//! `buffers.rs`). TCP channels hand their blocks to the kernel at once, so they
//! show nothing in flight and never copy.

use std::collections::VecDeque;

use longhaul_proto::transfer::BlockRepr;

/// A block written to a channel and not yet acknowledged on any channel.
#[derive(Debug, Clone, Copy)]
struct Flight {
    block: BlockRepr,
    /// Its keyed hash, to check a copy read again against.
    hash: [u8; 32],
    /// A copy is on its way (or this is one): it is not copied again.
    copied: bool,
}

/// One channel's blocks in flight, oldest first, and its bytes not yet
/// acknowledged as it last said.
#[derive(Debug, Default)]
struct Channel {
    flights: VecDeque<Flight>,
    unacked: usize,
}

/// What every channel of the session has in flight.
#[derive(Debug)]
pub(super) struct Flights {
    channels: Vec<Channel>,
}

impl Flights {
    pub(super) fn new(channels: usize) -> Self {
        Flights {
            channels: (0..channels).map(|_| Channel::default()).collect(),
        }
    }

    /// Channel `c` has written `block` (hashing to `hash`), a copy or not.
    pub(super) fn sent(&mut self, c: usize, block: BlockRepr, hash: [u8; 32], copy: bool) {
        self.channels[c].flights.push_back(Flight {
            block,
            hash,
            copied: copy,
        });
    }

    /// `block` is acknowledged whole on some channel: no channel carries it any
    /// more, its copy or its original.
    pub(super) fn delivered(&mut self, block: BlockRepr) {
        for ch in &mut self.channels {
            ch.flights.retain(|f| f.block != block);
        }
    }

    /// Channel `c` has `unacked` bytes written and not yet acknowledged.
    pub(super) fn report(&mut self, c: usize, unacked: usize) {
        self.channels[c].unacked = unacked;
    }

    /// Whether every block channel `c` wrote is acknowledged on some channel.
    pub(super) fn clear(&self, c: usize) -> bool {
        self.channels[c].flights.is_empty()
    }

    /// A block for channel `c`, which has nothing left to send, to copy (marked
    /// copied): the newest not yet copied of the channel with the most bytes
    /// unacknowledged, if that is at least half the block (a channel nearly
    /// done finishes before a copy could). `None`: nothing worth copying.
    pub(super) fn copy_for(&mut self, c: usize) -> Option<(BlockRepr, [u8; 32])> {
        let (_, ch) = self
            .channels
            .iter_mut()
            .enumerate()
            .filter(|(o, ch)| *o != c && ch.flights.iter().any(|f| !f.copied))
            .max_by_key(|(o, ch)| (ch.unacked, std::cmp::Reverse(*o)))?;
        let unacked = ch.unacked;
        let f = ch.flights.iter_mut().rev().find(|f| !f.copied)?;
        if unacked < f.block.len as usize / 2 {
            return None;
        }
        f.copied = true;
        Some((f.block, f.hash))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(offset: u64) -> BlockRepr {
        BlockRepr {
            file: 0,
            offset,
            len: 100,
        }
    }

    /// Channel 0 has two blocks in flight and 180 bytes unacknowledged, channel 1
    /// one block and 120, channel 2 none. Idle channel 2 copies channel 0's newest
    /// block, then its older one (it still has the most unacknowledged), then
    /// channel 1's; a copy is never copied; once a block is delivered (its copy
    /// or its original) neither channel carries it.
    #[test]
    fn an_idle_channel_copies_the_newest_block_of_the_most_loaded() {
        let mut f = Flights::new(3);
        f.sent(0, block(0), [1; 32], false);
        f.sent(0, block(100), [2; 32], false);
        f.sent(1, block(200), [3; 32], false);
        f.report(0, 180);
        f.report(1, 120);
        assert_eq!(f.copy_for(2), Some((block(100), [2; 32])));
        f.sent(2, block(100), [2; 32], true);
        f.report(2, 100);
        // Channel 2's copy is no candidate.
        assert_eq!(f.copy_for(2), Some((block(0), [1; 32])));
        assert_eq!(f.copy_for(2), Some((block(200), [3; 32])));
        assert_eq!(f.copy_for(2), None, "everything is copied once");
        assert!(!f.clear(2));
        f.delivered(block(100));
        assert!(f.clear(2), "its copy's original was acknowledged");
        assert_eq!(f.channels[0].flights.len(), 1);
    }

    /// A channel with less than half a block unacknowledged is left to finish.
    #[test]
    fn a_nearly_done_channel_is_not_copied() {
        let mut f = Flights::new(2);
        f.sent(0, block(0), [1; 32], false);
        f.report(0, 49);
        assert_eq!(f.copy_for(1), None);
        f.report(0, 50);
        assert_eq!(f.copy_for(1), Some((block(0), [1; 32])));
    }

    /// A channel never copies its own blocks, and none are copied once delivered.
    #[test]
    fn no_channel_copies_its_own_or_a_delivered_block() {
        let mut f = Flights::new(2);
        f.sent(0, block(0), [1; 32], false);
        f.report(0, 100);
        assert_eq!(f.copy_for(0), None);
        f.delivered(block(0));
        assert!(f.clear(0));
        assert_eq!(f.copy_for(1), None);
    }
}
