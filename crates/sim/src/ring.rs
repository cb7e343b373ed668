//! A FIFO of small `Copy` records addressed by absolute position: what a link keeps
//! of the packets it holds.
//!
//! Every record pushed gets the next position (0, 1, 2, ...), kept until it is
//! popped; the front is the oldest position still held. A link walks its queue with
//! positions (the first packet whose transmission has not finished, the head that
//! arrives next), so a position it holds stays valid while records are pushed and
//! popped around it, with no index to shift on every pop.
//!
//! The slots are a power-of-two `Vec`, a position's slot its low bits. `VecDeque`
//! does the same job, but each access there wraps a logical index with a compare and
//! subtract after a length check; a link makes about seven accesses per packet it
//! carries, and the reference bench spent about 8 % of its instructions in
//! `VecDeque` code, most of it the links' (callgrind, 1 ms RTT); with this ring
//! (and the idle shortcut in `Link::advance`) it ran 1.2 % faster. Safe code only:
//! slots hold `T::default()` until written.
//!
//! Not a general container: no removal but from the front, no growth but doubling.

/// A FIFO of `T` with absolute positions.
#[derive(Debug, Clone, Default)]
pub struct Ring<T> {
    /// Power-of-two length (or empty before the first push). A boxed slice, not a
    /// `Vec`: no capacity word, so a link's ring takes 32 bytes of its hot line.
    slots: Box<[T]>,
    /// Position of the front record.
    head: u64,
    /// Position the next push gets.
    tail: u64,
}

impl<T: Copy + Default> Ring<T> {
    /// An empty ring; it allocates on the first push.
    pub fn new() -> Self {
        Ring {
            slots: Box::default(),
            head: 0,
            tail: 0,
        }
    }

    /// Records held.
    #[inline]
    pub fn len(&self) -> usize {
        (self.tail - self.head) as usize
    }

    /// Whether nothing is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tail == self.head
    }

    /// Whether the next push must grow the slots (always, before the first).
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len() == self.slots.len()
    }

    /// Position of the front record (the next push's, when empty).
    #[inline]
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Position the next push gets.
    #[inline]
    pub fn tail(&self) -> u64 {
        self.tail
    }

    #[inline]
    fn slot(&self, pos: u64) -> usize {
        pos as usize & (self.slots.len() - 1)
    }

    /// The record at `pos`, if it is held.
    #[inline]
    pub fn get(&self, pos: u64) -> Option<&T> {
        (pos >= self.head && pos < self.tail).then(|| &self.slots[self.slot(pos)])
    }

    /// The front record.
    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.get(self.head)
    }

    /// Appends `value` at position [`tail`](Self::tail).
    #[inline]
    pub fn push_back(&mut self, value: T) {
        if self.len() == self.slots.len() {
            self.grow();
        }
        let s = self.slot(self.tail);
        self.slots[s] = value;
        self.tail += 1;
    }

    /// Removes and returns the front record.
    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let v = self.slots[self.slot(self.head)];
        self.head += 1;
        Some(v)
    }

    /// The records held, front first.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (self.head..self.tail).map(|p| &self.slots[self.slot(p)])
    }

    /// Doubles the slots (at least 8), keeping each record at its position.
    #[cold]
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(8);
        let mut slots = vec![T::default(); cap].into_boxed_slice();
        for p in self.head..self.tail {
            slots[p as usize & (cap - 1)] = self.slots[self.slot(p)];
        }
        self.slots = slots;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    proptest::proptest! {
        /// Pushes and pops in any order hold the same records, in the same order, at
        /// the positions counted from the first push, as a `VecDeque` does, across
        /// growth and wrap-around.
        #[test]
        fn behaves_as_a_deque_with_positions(ops in proptest::collection::vec(0u8..3, 0..600)) {
            let mut ring = Ring::<u32>::new();
            let mut model = VecDeque::new();
            for (i, op) in ops.into_iter().enumerate() {
                if op == 0 {
                    proptest::prop_assert_eq!(ring.pop_front(), model.pop_front());
                } else {
                    ring.push_back(i as u32);
                    model.push_back(i as u32);
                }
                proptest::prop_assert_eq!(ring.len(), model.len());
                proptest::prop_assert_eq!(ring.head() + model.len() as u64, ring.tail());
                proptest::prop_assert_eq!(ring.front(), model.front());
                for (k, v) in model.iter().enumerate() {
                    proptest::prop_assert_eq!(ring.get(ring.head() + k as u64), Some(v));
                }
                proptest::prop_assert_eq!(ring.get(ring.tail()), None);
                if ring.head() > 0 {
                    proptest::prop_assert_eq!(ring.get(ring.head() - 1), None);
                }
                proptest::prop_assert!(ring.iter().eq(model.iter()));
            }
        }
    }
}
