//! The receiver's out-of-order store: a sorted set of byte ranges above `RCV.NXT`,
//! and the choice of SACK blocks (RFC 2018 §4).
//!
//! Random loss leaves a handful of holes, but a slow-start overshoot can leave one
//! hole every other segment across a whole window (168 000 of them in a 10 Gb/s x
//! 100 ms flow), so the structure must not cost more per segment as holes grow.
//! The ranges live in a sorted `VecDeque`, because a receiver's ranges change at
//! the two ends:
//! - After a loss, the window's worth of data behind the hole arrives above every
//!   range held. It either starts a new range past the last (a queue overflowing
//!   under slow start drops every other segment) or extends the last one: a push or
//!   an update at the back.
//! - The retransmissions fill the holes from the lowest up: the front range joins
//!   the in-order data, a pop at the front.
//!
//! Both are O(1). A segment landing elsewhere (a retransmission that overtook an
//! earlier lost one) finds its place by binary search and shifts the shorter side
//! of the deque, so it costs little while the holes are filled in order, as they
//! are. Two earlier designs were slower:
//! - A sorted `Vec` spent most of an overshoot moving memory on every front removal.
//! - A `BTreeMap` paid a full descent per new range: about 550 instructions an
//!   insert, and 3.4 % of all instructions of a 10 Gb/s overshoot.
//!
//! The SACK blocks to report are kept apart, as Linux keeps `selective_acks`: the
//! whole range that each recent out-of-order segment landed in, newest first, updated
//! on every insert in O(blocks). So an ACK's blocks cost nothing to produce.

use std::collections::VecDeque;

use super::MAX_SACK_BLOCKS;

/// Out-of-order ranges `[start, end)` above the cumulative point.
#[derive(Debug, Clone, Default)]
pub struct Assembler {
    /// Sorted, disjoint and not touching (touching ranges merge).
    ranges: VecDeque<(u64, u64)>,
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
        if let Some(last) = self.ranges.back_mut() {
            let (ls, le) = *last;
            if start >= ls && start <= le {
                // Reaches into the last range (or touches its end): it grows.
                let e = le.max(end);
                last.1 = e;
                self.bytes += e - le;
                self.note_sack(ls, e);
                return end > le;
            }
            if start > le {
                // Past every range held.
                self.ranges.push_back((start, end));
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
        // The ranges [lo, hi) merge with the new one: `hi` starts at the first range
        // starting at or after `start`, `lo` there or one before.
        let mut lo = self.ranges.partition_point(|&(rs, _)| rs < start);
        let mut hi = lo;
        // A range starting before `start` that reaches it merges.
        if let Some(&(ps, pe)) = lo.checked_sub(1).and_then(|i| self.ranges.get(i)) {
            if pe >= start {
                covered += pe.min(end) - start;
                s = ps;
                e = e.max(pe);
                lo -= 1;
            }
        }
        // Ranges starting inside [start, end] merge too.
        while let Some(&(rs, re)) = self.ranges.get(hi).filter(|r| r.0 <= end) {
            covered += re.min(end).saturating_sub(rs);
            e = e.max(re);
            hi += 1;
        }
        for &(rs, re) in self.ranges.range(lo..hi) {
            self.bytes -= re - rs;
        }
        if hi > lo {
            self.ranges[lo] = (s, e);
            self.ranges.drain(lo + 1..hi);
        } else {
            self.ranges.insert(lo, (s, e));
        }
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
        while let Some(&(s, e)) = self.ranges.front() {
            if s > at {
                break;
            }
            self.ranges.pop_front();
            self.bytes -= e - s;
            // That range is now in order: it is no longer a SACK block.
            for b in &mut self.sack {
                if b.is_some_and(|(bs, _)| bs == s) {
                    *b = None;
                }
            }
            if e > at {
                self.release_if_empty();
                return Some(e);
            }
        }
        self.release_if_empty();
        None
    }

    /// Gives back the memory of a large overshoot's ranges once they are all filled:
    /// a deque keeps its capacity, and a flow should hold memory for its window now,
    /// not for its worst recovery.
    fn release_if_empty(&mut self) {
        if self.ranges.is_empty() && self.ranges.capacity() > 1024 {
            self.ranges = VecDeque::new();
        }
    }

    /// Up to `MAX_SACK_BLOCKS` blocks, the one holding the most recently received
    /// segment first, then the other recently changed ones (RFC 2018 §4).
    pub fn sack_blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        //= https://www.rfc-editor.org/rfc/rfc2018#section-4
        //# The first SACK block (i.e., the one immediately following the kind and
        //# length fields in the option) MUST specify the contiguous block of data
        //# containing the segment which triggered this ACK
        self.sack.iter().flatten().copied()
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
        assert_eq!(a.ranges, [(200, 500)]);
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
        assert_eq!(a.ranges.front(), Some(&(100, 601)));
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
                let top = fast.ranges.back().map_or(front, |&(_, e)| e);
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

    /// The maximal runs of set bytes: what the ranges must be.
    fn runs(held: &[bool]) -> Vec<(u64, u64)> {
        let mut out = vec![];
        let mut i = 0;
        while i < held.len() {
            if held[i] {
                let s = i;
                while i < held.len() && held[i] {
                    i += 1;
                }
                out.push((s as u64, i as u64));
            }
            i += 1;
        }
        out
    }

    proptest::proptest! {
        /// Against a byte map: any mix of inserts (in order, past the top, anywhere
        /// in between, overlapping) and fills at the front leaves exactly the runs of
        /// bytes held, counts them, says whether each insert brought a new byte, and
        /// hands back the right end when the front fills.
        #[test]
        fn holds_exactly_the_bytes_received(
            ops in proptest::collection::vec((0u64..2000, 1u64..120, 0u8..6), 1..300)
        ) {
            let mut a = Assembler::default();
            let mut held = vec![false; 2200];
            let mut front = 0u64;
            for (at, len, kind) in ops {
                if kind == 0 {
                    // RCV.NXT reaches `at`: ranges starting at or below it go.
                    let at = front.max(at);
                    let mut want = None;
                    for (s, e) in runs(&held) {
                        if s <= at {
                            held[s as usize..e as usize].fill(false);
                            if e > at {
                                want = Some(e);
                            }
                        }
                    }
                    proptest::prop_assert_eq!(a.take_front(at), want);
                    front = want.unwrap_or(at);
                } else {
                    // Out-of-order data lies above RCV.NXT.
                    let start = (front + 1).max(at);
                    let end = (start + len).min(held.len() as u64);
                    if start >= end {
                        continue;
                    }
                    let new = held[start as usize..end as usize].iter().any(|&b| !b);
                    held[start as usize..end as usize].fill(true);
                    proptest::prop_assert_eq!(a.insert(start, end), new, "{}..{}", start, end);
                }
                proptest::prop_assert_eq!(a.ranges.iter().copied().collect::<Vec<_>>(), runs(&held));
                proptest::prop_assert_eq!(a.bytes(), held.iter().filter(|&&b| b).count() as u64);
            }
        }
    }

    /// The ranges of an overshoot, every other segment of 5 000, take memory only
    /// until the holes are filled.
    #[test]
    fn memory_goes_back_once_the_holes_are_filled() {
        let mut a = Assembler::default();
        for i in 0..5000u64 {
            a.insert(200 * i + 100, 200 * i + 200);
        }
        assert!(a.ranges.capacity() >= 5000);
        assert_eq!(a.take_front(999_950), Some(1_000_000));
        assert!(a.is_empty());
        assert_eq!(a.ranges.capacity(), 0);
    }

    #[test]
    fn most_recent_block_first() {
        let mut a = Assembler::default();
        a.insert(200, 300);
        a.insert(500, 600);
        a.insert(800, 900);
        a.insert(300, 400);
        let blocks = |a: &Assembler| a.sack_blocks().collect::<Vec<_>>();
        assert_eq!(blocks(&a), [(200, 400), (800, 900), (500, 600)]);
        // Filling the hole at 100 puts 200..400 in order: it is no longer reported.
        assert_eq!(a.take_front(200), Some(400));
        assert_eq!(blocks(&a), [(800, 900), (500, 600)]);
        // A segment joining two ranges reports the joined range, once.
        a.insert(600, 800);
        assert_eq!(blocks(&a), [(500, 900)]);
    }
}
