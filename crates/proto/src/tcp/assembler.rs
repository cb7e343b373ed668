//! The receiver's out-of-order store: a sorted set of byte ranges above `RCV.NXT`,
//! and the choice of SACK blocks (RFC 2018 §4).
//!
//! Random loss leaves a handful of holes, but a slow-start overshoot can leave one
//! hole every other segment across a whole window, so ranges live in a `BTreeMap`
//! (start -> end): O(log holes) per segment either way (a sorted `Vec` spent most of
//! such a run moving memory).
//!
//! The SACK blocks to report are kept apart, as Linux keeps `selective_acks`: the
//! whole range that each recent out-of-order segment landed in, newest first, updated
//! on every insert in O(blocks). So an ACK's blocks cost nothing to produce.
//!
//! After a loss, the window's worth of data behind the hole arrives above every range
//! held: as a new range past the last one (a queue overflowing under slow start
//! drops every other segment) or extending it. Those two cases change only the last
//! entry, found on the tree's right spine, instead of the general merge's three
//! searches; the general path would do exactly the same (a test holds the two to
//! that).

use std::collections::BTreeMap;

use super::MAX_SACK_BLOCKS;

/// Out-of-order ranges `[start, end)` above the cumulative point.
#[derive(Debug, Clone, Default)]
pub struct Assembler {
    ranges: BTreeMap<u64, u64>,
    /// The ranges holding the most recently received out-of-order segments, newest
    /// first (each exactly as it stands in `ranges`).
    sack: [Option<(u64, u64)>; MAX_SACK_BLOCKS],
    bytes: u64,
}

impl Assembler {
    /// Bytes held out of order.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Adds `[start, end)`; returns whether any byte was new.
    pub fn insert(&mut self, start: u64, end: u64) -> bool {
        if let Some(mut last) = self.ranges.last_entry() {
            let (ls, le) = (*last.key(), *last.get());
            if start >= ls && start <= le {
                // Reaches into the last range (or touches its end): it grows.
                let e = le.max(end);
                *last.get_mut() = e;
                self.bytes += e - le;
                self.note_sack(ls, e);
                return end > le;
            }
            if start > le {
                // Past every range held.
                self.ranges.insert(start, end);
                self.bytes += end - start;
                self.note_sack(start, end);
                return end > start;
            }
        }
        self.insert_general(start, end)
    }

    /// [`insert`](Self::insert) for any range: merges with every range it reaches.
    fn insert_general(&mut self, start: u64, end: u64) -> bool {
        let (mut s, mut e) = (start, end);
        let mut covered = 0;
        // A range starting before `start` that reaches it merges.
        if let Some((&ps, &pe)) = self.ranges.range(..start).next_back() {
            if pe >= start {
                covered += pe.min(end) - start;
                s = ps;
                e = e.max(pe);
                self.ranges.remove(&ps);
                self.bytes -= pe - ps;
            }
        }
        // Ranges starting inside [start, end] merge too.
        while let Some((&rs, &re)) = self.ranges.range(start..=end).next() {
            covered += re.min(end).saturating_sub(rs);
            e = e.max(re);
            self.ranges.remove(&rs);
            self.bytes -= re - rs;
        }
        self.ranges.insert(s, e);
        self.bytes += e - s;
        self.note_sack(s, e);
        covered < end - start
    }

    /// `[s, e)` is the range the newest segment landed in: it goes first; blocks it
    /// swallowed go; the rest move down.
    fn note_sack(&mut self, s: u64, e: u64) {
        let mut blocks = [None; MAX_SACK_BLOCKS];
        blocks[0] = Some((s, e));
        let mut n = 1;
        for b in self.sack.iter().flatten() {
            if (b.1 < s || b.0 > e) && n < MAX_SACK_BLOCKS {
                blocks[n] = Some(*b);
                n += 1;
            }
        }
        self.sack = blocks;
    }

    /// Removes and returns the end of the range that starts at or below `at` and
    /// reaches past it (the hole at `RCV.NXT` was just filled up to `at`), if there
    /// is one; ranges wholly at or below `at` are discarded.
    pub fn take_front(&mut self, at: u64) -> Option<u64> {
        while let Some((&s, &e)) = self.ranges.first_key_value() {
            if s > at {
                break;
            }
            self.ranges.pop_first();
            self.bytes -= e - s;
            // That range is now in order: it is no longer a SACK block.
            for b in &mut self.sack {
                if b.is_some_and(|(bs, _)| bs == s) {
                    *b = None;
                }
            }
            if e > at {
                return Some(e);
            }
        }
        None
    }

    /// Up to `MAX_SACK_BLOCKS` blocks, the one holding the most recently received
    /// segment first, then the other recently changed ones (RFC 2018 §4).
    pub fn sack_blocks(&self) -> [Option<(u64, u64)>; MAX_SACK_BLOCKS] {
        //= https://www.rfc-editor.org/rfc/rfc2018#section-4
        //# The first SACK block (i.e., the one immediately following the kind and
        //# length fields in the option) MUST specify the contiguous block of data
        //# containing the segment which triggered this ACK
        let mut out = [None; MAX_SACK_BLOCKS];
        for (slot, b) in out.iter_mut().zip(self.sack.iter().flatten()) {
            *slot = Some(*b);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_fill() {
        let mut a = Assembler::default();
        assert!(a.insert(200, 300));
        assert!(a.insert(400, 500));
        assert!(!a.insert(200, 300));
        assert!(a.insert(300, 400));
        assert_eq!(
            a.ranges.iter().map(|(&s, &e)| (s, e)).collect::<Vec<_>>(),
            vec![(200, 500)]
        );
        assert_eq!(a.bytes(), 300);
        assert_eq!(a.take_front(100), None);
        assert_eq!(a.take_front(200), Some(500));
        assert!(a.is_empty());
        assert_eq!(a.bytes(), 0);
    }

    #[test]
    fn overlapping_inserts_merge_and_count_new_bytes() {
        let mut a = Assembler::default();
        a.insert(100, 200);
        a.insert(300, 400);
        a.insert(500, 600);
        assert!(a.insert(150, 550), "fills 200..300 and 400..500");
        assert_eq!(a.ranges.len(), 1);
        assert_eq!(a.bytes(), 500);
        assert!(!a.insert(120, 580));
        assert!(a.insert(600, 601), "touching ranges merge");
        assert_eq!(a.ranges.iter().next(), Some((&100, &601)));
    }

    proptest::proptest! {
        /// The fast paths at the top end leave the same ranges, byte count and SACK
        /// blocks, and return the same answer, as the general merge.
        #[test]
        fn fast_paths_match_the_general_merge(
            ops in proptest::collection::vec((0u64..60, 1u64..8, 0u8..8), 1..200)
        ) {
            let mut fast = Assembler::default();
            let mut general = Assembler::default();
            let mut front = 0;
            for (at, len, kind) in ops {
                if kind == 0 {
                    // Fill the hole at the front up to `at`.
                    front = front.max(at * 100);
                    proptest::prop_assert_eq!(fast.take_front(front), general.take_front(front));
                    continue;
                }
                // Mostly near and above the top, as after a loss; sometimes anywhere.
                let top = fast.ranges.last_key_value().map_or(front, |(_, &e)| e);
                let start = if kind < 6 { top.saturating_sub(150) + at * 10 } else { at * 100 };
                let (start, end) = (start.max(front + 1), start.max(front + 1) + len * 50);
                let a = fast.insert(start, end);
                let b = general.insert_general(start, end);
                proptest::prop_assert_eq!(a, b, "insert {}..{}", start, end);
                proptest::prop_assert_eq!(&fast.ranges, &general.ranges);
                proptest::prop_assert_eq!(fast.bytes, general.bytes);
                proptest::prop_assert_eq!(fast.sack, general.sack);
            }
        }
    }

    #[test]
    fn most_recent_block_first() {
        let mut a = Assembler::default();
        a.insert(200, 300);
        a.insert(500, 600);
        a.insert(800, 900);
        a.insert(300, 400);
        let b = a.sack_blocks();
        assert_eq!(b[0], Some((200, 400)));
        assert_eq!(b[1], Some((800, 900)));
        assert_eq!(b[2], Some((500, 600)));
        assert_eq!(b[3], None);
        // Filling the hole at 100 puts 200..400 in order: it is no longer reported.
        assert_eq!(a.take_front(200), Some(400));
        assert_eq!(
            a.sack_blocks(),
            [Some((800, 900)), Some((500, 600)), None, None]
        );
        // A segment joining two ranges reports the joined range, once.
        a.insert(600, 800);
        assert_eq!(a.sack_blocks(), [Some((500, 900)), None, None, None]);
    }
}
