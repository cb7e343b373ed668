//! A channel's block buffers: each block is read, hashed and framed in one, then
//! lent to the data channel, whose UDT send buffer holds slices of it until they are
//! acknowledged (no copy of the block into the send buffer). A buffer comes back
//! for the next block once nothing else holds it.
//!
//! How many are lent at once is bounded by the UDT send buffer: it holds a few
//! blocks' worth of packets, and the writer waits for it to drain before it
//! takes the next block. Over TCP a block is copied into the kernel as it is
//! written, so one buffer serves every block.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Buffers of `capacity` bytes: lent ones, oldest first, and free ones.
#[derive(Debug)]
pub(super) struct BlockBuffers {
    capacity: usize,
    lent: VecDeque<Bytes>,
    free: Vec<BytesMut>,
}

impl BlockBuffers {
    pub(super) fn new(capacity: usize) -> Self {
        BlockBuffers {
            capacity,
            lent: VecDeque::new(),
            free: Vec::new(),
        }
    }

    /// A buffer of `len` bytes (at most the capacity), its contents unspecified:
    /// one that has come back if there is one, else a new one.
    pub(super) fn take(&mut self, len: usize) -> BytesMut {
        // Blocks are acknowledged in the order they were sent.
        while self.lent.front().is_some_and(Bytes::is_unique) {
            let back = self.lent.pop_front().expect("just seen");
            if let Ok(b) = back.try_into_mut() {
                self.free.push(b);
            }
        }
        let mut b = self
            .free
            .pop()
            .unwrap_or_else(|| BytesMut::with_capacity(self.capacity));
        b.resize(len.min(self.capacity), 0);
        b
    }

    /// `b` is out with the channel until it is unique again.
    pub(super) fn lent(&mut self, b: Bytes) {
        self.lent.push_back(b);
    }

    /// `b` was not sent after all.
    pub(super) fn give_back(&mut self, b: BytesMut) {
        self.free.push(b);
    }

    /// Buffers made so far (lent and free).
    #[cfg(test)]
    fn made(&self) -> usize {
        self.lent.len() + self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_only_when_nothing_holds_it() {
        let mut p = BlockBuffers::new(100);
        let mut a = p.take(100);
        a[0] = 1;
        let a = a.freeze();
        let held = a.slice(10..20); // the send buffer's packet
        p.lent(a);
        let b = p.take(60);
        assert_eq!(b.len(), 60);
        assert_eq!(p.made(), 1, "the first is still held: a second is made");
        p.give_back(b);
        drop(held);
        let c = p.take(100);
        assert_eq!(c.len(), 100);
        assert_eq!(p.made(), 1, "both are free again; one is reused");
        assert!(c.capacity() >= 100);
    }

    #[test]
    fn a_buffer_never_grows_past_its_capacity() {
        let mut p = BlockBuffers::new(50);
        assert_eq!(p.take(80).len(), 50);
    }
}
