//! The receiver's out-of-order store: a sorted set of byte ranges above `RCV.NXT`,
//! and the choice of SACK blocks (RFC 2018 §4).
//!
//! Random loss leaves a handful of holes, so a sorted `Vec` of ranges is both the
//! simplest and the fastest structure here; the cost per segment grows with the
//! number of holes, never with the window.

use super::MAX_SACK_BLOCKS;

/// Out-of-order ranges `[start, end)` above the cumulative point.
#[derive(Debug, Clone, Default)]
pub struct Assembler {
    ranges: Vec<(u64, u64)>,
    /// Offsets of the most recently received out-of-order segments, newest first.
    recent: [Option<u64>; MAX_SACK_BLOCKS],
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
        // First range that ends at or after `start` (may merge with it).
        let i = self.ranges.partition_point(|&(_, e)| e < start);
        let mut j = i;
        let (mut s, mut e) = (start, end);
        let mut covered = 0;
        while j < self.ranges.len() && self.ranges[j].0 <= end {
            let (rs, re) = self.ranges[j];
            covered += re.min(end).saturating_sub(rs.max(start));
            s = s.min(rs);
            e = e.max(re);
            j += 1;
        }
        let new = (end - start) - covered;
        let old: u64 = self.ranges[i..j].iter().map(|(a, b)| b - a).sum();
        self.ranges.splice(i..j, std::iter::once((s, e)));
        self.bytes = self.bytes - old + (e - s);
        self.recent.rotate_right(1);
        self.recent[0] = Some(start);
        new > 0
    }

    /// Removes and returns the range starting at `at` (the hole at `RCV.NXT` was just
    /// filled up to `at`), if there is one; ranges wholly below `at` are discarded.
    pub fn take_front(&mut self, at: u64) -> Option<u64> {
        let mut end = None;
        while let Some(&(s, e)) = self.ranges.first() {
            if s > at {
                break;
            }
            self.ranges.remove(0);
            self.bytes -= e - s;
            if e > at {
                end = Some(e);
                break;
            }
        }
        end
    }

    /// Up to `MAX_SACK_BLOCKS` blocks, the one holding the most recent segment first
    /// (RFC 2018 §4), then other recently changed ones, all above `rcv_nxt`.
    pub fn sack_blocks(&self, rcv_nxt: u64) -> [Option<(u64, u64)>; MAX_SACK_BLOCKS] {
        let mut out = [None; MAX_SACK_BLOCKS];
        let mut n = 0;
        //= https://www.rfc-editor.org/rfc/rfc2018#section-4
        //# The first SACK block (i.e., the one immediately following the kind and
        //# length fields in the option) MUST specify the contiguous block of data
        //# containing the segment which triggered this ACK
        for off in self.recent.iter().flatten() {
            if *off < rcv_nxt {
                continue;
            }
            let i = self.ranges.partition_point(|&(_, e)| e <= *off);
            if let Some(&r) = self.ranges.get(i) {
                if r.0 <= *off && !out[..n].contains(&Some(r)) {
                    out[n] = Some(r);
                    n += 1;
                }
            }
        }
        // Fill the remaining room with the lowest ranges, which the sender needs most.
        for r in &self.ranges {
            if n == MAX_SACK_BLOCKS {
                break;
            }
            if !out[..n].contains(&Some(*r)) {
                out[n] = Some(*r);
                n += 1;
            }
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
        assert_eq!(a.ranges, vec![(200, 500)]);
        assert_eq!(a.bytes(), 300);
        assert_eq!(a.take_front(100), None);
        assert_eq!(a.take_front(200), Some(500));
        assert!(a.is_empty());
        assert_eq!(a.bytes(), 0);
    }

    #[test]
    fn most_recent_block_first() {
        let mut a = Assembler::default();
        a.insert(200, 300);
        a.insert(500, 600);
        a.insert(800, 900);
        a.insert(300, 400);
        let b = a.sack_blocks(100);
        assert_eq!(b[0], Some((200, 400)));
        assert_eq!(b[1], Some((800, 900)));
        assert_eq!(b[2], Some((500, 600)));
        assert_eq!(b[3], None);
    }
}
