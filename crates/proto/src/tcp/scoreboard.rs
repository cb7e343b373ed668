//! The sender's scoreboard: per-segment state in a sequence-indexed ring.
//!
//! The stream is cut into segments at multiples of the MSS from offset 0 and a
//! segment is always (re)sent whole, so the segment holding byte `o` is at index
//! `o / mss - front` and every lookup is O(1). Cumulative ACKs pop from the front,
//! SACK blocks touch only the segments they newly cover, and the loss and retransmit
//! cursors only move forward, so the cost per ACK is amortised O(1) whatever the
//! window (ns-3 walks a list of the whole window on every ACK). Memory is proportional
//! to the data in flight, not to what was ever sent.
//!
//! ```text
//!   una                retx_scan        lost_scan           high_sacked      max
//!    |  lost/retransmitted  |   lost, not yet   |  in flight, some   |  sent,   |
//!    |     (repaired)       |   retransmitted   |  SACKed            | unSACKed |
//! ```

use std::collections::VecDeque;

use crate::cc::{RateSample, RateSampler, SendState};
use crate::time::{Duration, Instant};

const SACKED: u8 = 1;
const LOST: u8 = 2;
/// Retransmitted and not yet SACKed or acknowledged.
const RETRANS: u8 = 4;
/// Retransmitted at least once: no RTT sample from it (Karn's rule).
const EVER_RETRANS: u8 = 8;

#[derive(Debug, Clone, Copy)]
struct Segment {
    sent_at: Instant,
    flags: u8,
}

impl Segment {
    /// Whether the segment counts in the pipe (RFC 6675 §4): an original that is
    /// neither SACKed nor deemed lost, or a retransmission not yet SACKed.
    fn in_pipe(self) -> bool {
        self.flags & SACKED == 0 && (self.flags & LOST == 0 || self.flags & RETRANS != 0)
    }
}

/// Outcome of a cumulative acknowledgement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CumAck {
    /// Bytes newly acknowledged that had not been SACKed before.
    pub newly_acked: u64,
    /// Send time of the last newly acknowledged segment, if no segment this ACK
    /// newly acknowledges was ever retransmitted (see
    /// [`Scoreboard::on_cumulative_ack`]).
    pub rtt_sample_from: Option<Instant>,
}

/// Per-segment state of everything sent and not cumulatively acknowledged.
#[derive(Debug, Clone)]
pub struct Scoreboard {
    mss: u64,
    /// Stream length if known (the last segment may be short).
    end: u64,
    /// Where stream byte 0 sits on the segment grid: segments are cut at multiples of
    /// the MSS from `-base`, so the first one is `mss - base` bytes long (0 unless
    /// [`set_first_segment`](Self::set_first_segment) was called). Every offset kept
    /// inside is on that grid ("virtual"); the public methods take and return stream
    /// offsets.
    base: u64,
    /// Where the grid's current run of segments starts (virtual): the first segment
    /// at or after it starts there, so it may be short. `base` at first; moved by
    /// [`rebase_short_segment`](Self::rebase_short_segment).
    lo: u64,
    /// Index of the segment at `segs[0]`.
    front: u64,
    segs: VecDeque<Segment>,
    pipe: u64,
    sacked_bytes: u64,
    high_sacked: u64,
    lost_scan: u64,
    retx_scan: u64,
    /// The SACK blocks of the previous ACK, already applied.
    sack_cache: [(u64, u64); 4],
    /// `max_v` and the next new segment's length and room, kept up to date by
    /// [`refresh_next`](Self::refresh_next): they depend only on `front + segs.len()`,
    /// `lo` and `end`, which change when a segment is sent or the grid moves (a
    /// cumulative ACK moves `front` and `segs` together), while a sender asks for them
    /// several times per ACK.
    next: NextNew,
    /// Delivery-rate state per segment, beside `segs`, kept only for a controller
    /// that asks for it (BBR): a sender that does not pays nothing.
    rates: Option<Box<Rates>>,
    /// `SND.UNA` on the grid: `(front * mss).max(lo).min(end)`, kept up to date
    /// (by [`refresh_next`](Self::refresh_next) and the cumulative ACK) because a
    /// sender reads it a dozen times per ACK.
    una_v: u64,
}

/// The sender's delivery-rate estimator and each segment's state for it
/// (draft-cheng-iccrg-delivery-rate-estimation, as Linux's `tcp_rate.c`).
#[derive(Debug, Clone, Default)]
struct Rates {
    sampler: RateSampler,
    states: VecDeque<SendState>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct NextNew {
    max_v: u64,
    len: u64,
    room: u64,
}

impl Scoreboard {
    /// An empty scoreboard for segments of `mss` bytes.
    pub fn new(mss: u64) -> Self {
        let mut b = Scoreboard {
            mss,
            end: u64::MAX,
            base: 0,
            lo: 0,
            front: 0,
            segs: VecDeque::new(),
            pipe: 0,
            sacked_bytes: 0,
            high_sacked: 0,
            lost_scan: 0,
            retx_scan: 0,
            sack_cache: [(0, 0); 4],
            next: NextNew::default(),
            rates: None,
            una_v: 0,
        };
        b.refresh_next();
        b
    }

    /// Recomputes `next` and `una_v` (see there) after the grid or the stream end
    /// moved or a segment was sent.
    fn refresh_next(&mut self) {
        self.next = self.fresh_next();
        self.una_v = (self.front * self.mss).max(self.lo).min(self.end);
    }

    fn fresh_next(&self) -> NextNew {
        // The next segment's index is `front + len`; it starts at `max_v` unless the
        // grid's run starts later (`lo`) or the stream ended short of it (`end`, then
        // in the cell before). So the boundary after `max_v`, `(max_v / mss + 1) *
        // mss`, is found without a division.
        let b = (self.front + self.segs.len() as u64) * self.mss;
        let max_v = b.max(self.lo).min(self.end);
        let boundary = if max_v >= b { b + self.mss } else { b };
        debug_assert_eq!(boundary, (max_v / self.mss + 1) * self.mss);
        NextNew {
            max_v,
            len: boundary.min(self.end).saturating_sub(max_v),
            room: boundary - max_v,
        }
    }

    /// Makes the first segment `len % mss` bytes long (if that is not zero), so that
    /// later segments end where a first write of `len` bytes ended. Only before
    /// anything is sent.
    pub fn set_first_segment(&mut self, len: u64) {
        debug_assert!(self.segs.is_empty() && self.front == 0);
        let old = self.base;
        self.base = (self.mss - len % self.mss) % self.mss;
        self.lo = self.base;
        if self.end != u64::MAX {
            self.end = self.end - old + self.base;
        }
        self.high_sacked = self.base;
        self.lost_scan = self.base;
        self.retx_scan = self.base;
        self.refresh_next();
    }

    /// Lets the next new segment be the short `[max, written)` with nothing in flight
    /// (Nagle's rule lets such a segment go, RFC 1122 §4.2.3.4): the grid moves so
    /// that a segment ends at `written`, and later segments are cut from there.
    pub fn rebase_short_segment(&mut self, written: u64) {
        debug_assert!(self.segs.is_empty());
        let max = self.max();
        debug_assert!(written > max && written - max < self.mss);
        let old = self.base;
        self.base = (self.mss - written % self.mss) % self.mss;
        self.lo = max + self.base;
        self.front = self.lo / self.mss;
        if self.end != u64::MAX {
            self.end = self.end - old + self.base;
        }
        self.high_sacked = self.lo;
        self.lost_scan = self.lo;
        self.retx_scan = self.lo;
        self.sack_cache = [(0, 0); 4];
        self.refresh_next();
    }

    /// Sets the stream length once the application has closed it.
    pub fn set_end(&mut self, end: u64) {
        self.end = end.saturating_add(self.base);
        self.refresh_next();
    }

    #[inline]
    fn una_v(&self) -> u64 {
        debug_assert_eq!(
            self.una_v,
            (self.front * self.mss).max(self.lo).min(self.end)
        );
        self.una_v
    }
    fn max_v(&self) -> u64 {
        self.next.max_v
    }
    fn seg_start(&self, index: u64) -> u64 {
        (index * self.mss).max(self.lo)
    }

    /// Offset of the first unacknowledged byte (`SND.UNA`).
    pub fn una(&self) -> u64 {
        self.una_v() - self.base
    }
    /// Offset one past the highest byte sent (`SND.MAX`).
    pub fn max(&self) -> u64 {
        self.max_v() - self.base
    }
    /// Bytes sent and not cumulatively acknowledged.
    pub fn outstanding(&self) -> u64 {
        self.max() - self.una()
    }
    /// RFC 6675's pipe: bytes believed to be in the network.
    pub fn pipe(&self) -> u64 {
        self.pipe
    }
    /// Bytes SACKed above `una`.
    #[cfg(test)]
    pub fn sacked_bytes(&self) -> u64 {
        self.sacked_bytes
    }
    /// The highest SACKed offset on the grid (at least `SND.UNA`).
    fn high_sacked_v(&self) -> u64 {
        self.high_sacked.max(self.una_v())
    }
    /// Segments tracked (memory is proportional to this).
    pub fn len(&self) -> usize {
        self.segs.len()
    }
    /// Whether nothing is outstanding.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    fn seg_len(&self, index: u64) -> u64 {
        ((index + 1) * self.mss).min(self.end) - self.seg_start(index)
    }

    /// Length of the next new segment starting at [`max`](Self::max).
    pub fn next_new_len(&self) -> u64 {
        self.next_new().0
    }

    /// Room in the next new segment: the MSS, or less for a short first segment.
    pub fn next_new_room(&self) -> u64 {
        self.next_new().1
    }

    /// [`next_new_len`](Self::next_new_len) and
    /// [`next_new_room`](Self::next_new_room) at once.
    #[inline]
    pub fn next_new(&self) -> (u64, u64) {
        (self.next.len, self.next.room)
    }

    /// Keeps delivery-rate state per segment from now on (before anything is sent).
    pub fn enable_rate_sampling(&mut self) {
        let states = self.segs.iter().map(|_| SendState::default()).collect();
        self.rates = Some(Box::new(Rates {
            sampler: RateSampler::default(),
            states,
        }));
    }

    /// Starts one ACK's delivery-rate sample.
    pub fn begin_rate_sample(&mut self) {
        if let Some(r) = self.rates.as_deref_mut() {
            r.sampler.begin_ack();
        }
    }

    /// Ends the ACK's sample (see [`RateSampler::finish_ack`]), with the bytes
    /// delivered so far; `None` when rate sampling is off.
    pub fn finish_rate_sample(
        &mut self,
        now: Instant,
        prior_in_flight: u64,
        rtt: Option<Duration>,
        min_rtt: Option<Duration>,
    ) -> Option<(RateSample, u64)> {
        let r = self.rates.as_deref_mut()?;
        let rs = r.sampler.finish_ack(now, prior_in_flight, rtt, min_rtt);
        Some((rs, r.sampler.delivered()))
    }

    /// Records a new segment sent at `now` at offset [`max`](Self::max).
    pub fn on_send_new(&mut self, now: Instant) -> u64 {
        let len = self.next_new_len();
        debug_assert!(len > 0);
        if let Some(r) = self.rates.as_deref_mut() {
            r.states.push_back(r.sampler.on_send(now, self.pipe));
        }
        self.segs.push_back(Segment {
            sent_at: now,
            flags: 0,
        });
        self.pipe += len;
        self.refresh_next();
        len
    }

    /// Processes a cumulative ACK up to offset `ack` (a multiple of the MSS or the
    /// stream end). Offsets at or below `una` are ignored.
    // Inlined into the connection's two ACK paths (header prediction and the general
    // one): as a call it cost a prologue and spills on every ACK.
    #[inline(always)]
    pub fn on_cumulative_ack(&mut self, ack: u64, now: Instant) -> CumAck {
        let mut out = CumAck::default();
        let upto = ack.saturating_add(self.base).min(self.max_v());
        let mut una = self.una_v();
        let mut retransmitted = false;
        while una < upto {
            // The front segment is `[una, next)`: it starts inside the grid's run
            // (so at `una`) and ends at the next boundary or the stream's end.
            let next = ((self.front + 1) * self.mss).min(self.end);
            let len = next - una;
            debug_assert_eq!(len, self.seg_len(self.front));
            let seg = self.segs.pop_front().expect("una < max");
            if let Some(r) = self.rates.as_deref_mut() {
                let st = r.states.pop_front().unwrap_or_default();
                if seg.flags & SACKED == 0 {
                    r.sampler.on_delivered(now, &st, len);
                }
            }
            if seg.in_pipe() {
                self.pipe -= len;
            }
            if seg.flags & SACKED != 0 {
                self.sacked_bytes -= len;
            } else {
                out.newly_acked += len;
            }
            retransmitted |= seg.flags & EVER_RETRANS != 0;
            out.rtt_sample_from = (seg.flags & SACKED == 0).then_some(seg.sent_at);
            self.front += 1;
            una = next;
        }
        //= https://www.rfc-editor.org/rfc/rfc6298#section-3
        //# TCP MUST use Karn's algorithm [KP87] for taking RTT samples.  That is, RTT
        //# samples MUST NOT be made using segments that were retransmitted
        // ... nor, with a cumulative ACK, from the segments after one: an ACK that
        // covers a retransmission was sent when the retransmission filled the hole,
        // so the segments behind it (received long before, and never SACKed without
        // SACK) would time the whole recovery. Linux drops the sample the same way
        // (`FLAG_RETRANS_DATA_ACKED` in `tcp_clean_rtx_queue`).
        if retransmitted {
            out.rtt_sample_from = None;
        }
        self.una_v = una;
        let una = self.una_v();
        self.lost_scan = self.lost_scan.max(una);
        self.retx_scan = self.retx_scan.max(una);
        out
    }

    /// Applies the SACK blocks of one ACK; returns the bytes newly SACKed.
    ///
    /// A receiver's blocks only grow, and each ACK repeats most of the previous one's,
    /// so only the parts not covered by the previous ACK's blocks are walked (Linux's
    /// "SACK cache"); without this, every ACK in a recovery episode would walk its
    /// whole block, O(window) per ACK.
    pub fn on_sack_blocks(&mut self, blocks: &[(u64, u64)], now: Instant) -> u64 {
        let mut newly = 0;
        let cache = self.sack_cache;
        for &(l, r) in blocks {
            match uncached(&cache, l, r) {
                Uncached::Nothing => {}
                Uncached::One(pl, pr) => {
                    newly += self.on_sack_block(pl + self.base, pr + self.base, now)
                }
                Uncached::Parts(parts, n) => {
                    for &(pl, pr) in &parts[..n] {
                        newly += self.on_sack_block(pl + self.base, pr + self.base, now);
                    }
                }
            }
        }
        self.sack_cache = [(0, 0); 4];
        for (slot, b) in self.sack_cache.iter_mut().zip(blocks) {
            *slot = *b;
        }
        newly
    }

    /// Marks `[left, right)` SACKed; returns the bytes newly SACKed. Blocks outside
    /// `(una, max]` are clipped; only segments the block covers entirely are marked
    /// (the receiver never splits segments, but a cache remainder may start mid-way).
    fn on_sack_block(&mut self, left: u64, right: u64, now: Instant) -> u64 {
        let left = left.max(self.una_v());
        let right = right.min(self.max_v());
        if left >= right {
            return 0;
        }
        let first = if left <= self.lo {
            self.lo / self.mss
        } else {
            left.div_ceil(self.mss)
        };
        let mut newly = 0;
        let mut i = first;
        while i < self.front + self.segs.len() as u64 {
            let len = self.seg_len(i);
            if self.seg_start(i) + len > right {
                break;
            }
            let slot = &mut self.segs[(i - self.front) as usize];
            if slot.flags & SACKED == 0 {
                let was_in_pipe = slot.in_pipe();
                slot.flags = (slot.flags | SACKED) & !RETRANS;
                if was_in_pipe {
                    self.pipe -= len;
                }
                if let Some(r) = self.rates.as_deref_mut() {
                    let st = r.states[(i - self.front) as usize];
                    r.sampler.on_delivered(now, &st, len);
                }
                self.sacked_bytes += len;
                newly += len;
            }
            i += 1;
        }
        if newly > 0 {
            self.high_sacked = self.high_sacked.max(i * self.mss).min(self.max_v());
        }
        newly
    }

    /// Marks as lost every unSACKed segment whose end lies at least `threshold_bytes`
    /// below the highest SACKed byte (a FACK-style reading of RFC 6675's IsLost(),
    /// chosen because it keeps the scan O(1) amortised). Returns bytes newly marked.
    pub fn detect_losses(&mut self, threshold_bytes: u64) -> u64 {
        let limit = self.high_sacked_v().saturating_sub(threshold_bytes);
        let mut newly = 0;
        while self.lost_scan < limit && self.lost_scan < self.max_v() {
            let i = self.lost_scan / self.mss;
            let len = self.seg_len(i);
            if self.lost_scan + len > limit {
                break;
            }
            newly += self.mark_lost(i);
            self.lost_scan += len;
        }
        newly
    }

    /// Marks the segment at `una` lost (NewReno without SACK: the third duplicate ACK,
    /// or a partial ACK). Returns bytes newly marked.
    pub fn mark_una_lost(&mut self) -> u64 {
        if self.segs.is_empty() {
            return 0;
        }
        let n = self.mark_lost(self.front);
        self.lost_scan = self.lost_scan.max(self.una_v() + self.seg_len(self.front));
        n
    }

    fn mark_lost(&mut self, index: u64) -> u64 {
        let len = self.seg_len(index);
        let slot = &mut self.segs[(index - self.front) as usize];
        if slot.flags & (SACKED | LOST) != 0 {
            return 0;
        }
        slot.flags |= LOST;
        self.pipe -= len; // an original in the pipe leaves it
        if let Some(r) = self.rates.as_deref_mut() {
            r.sampler.on_lost(len);
        }
        len
    }

    /// After a retransmission timeout: every unSACKed segment is lost and nothing is
    /// in the pipe (RFC 6675 §5.1 keeps the SACK information).
    pub fn on_rto(&mut self) {
        let mut newly_lost = 0;
        for seg in &mut self.segs {
            if seg.flags & SACKED == 0 {
                newly_lost += u64::from(seg.flags & LOST == 0);
                seg.flags = (seg.flags | LOST) & !RETRANS;
            }
        }
        if let Some(r) = self.rates.as_deref_mut() {
            r.sampler.on_lost(newly_lost * self.mss);
        }
        self.pipe = 0;
        self.lost_scan = self.max_v();
        self.retx_scan = self.una_v();
    }

    /// Whether [`next_retransmit`](Self::next_retransmit) might find a segment: false
    /// only when no segment deemed lost is left unretransmitted.
    pub fn may_retransmit(&self) -> bool {
        self.retx_scan < self.lost_scan
    }

    /// The next lost segment not yet retransmitted: `(offset, len)` (RFC 6675
    /// NextSeg() rule 1).
    pub fn next_retransmit(&mut self) -> Option<(u64, u64)> {
        while self.retx_scan < self.lost_scan {
            let i = self.retx_scan / self.mss;
            let seg = self.segs[(i - self.front) as usize];
            let len = self.seg_len(i);
            if seg.flags & LOST != 0 && seg.flags & (SACKED | RETRANS) == 0 {
                return Some((self.seg_start(i) - self.base, len));
            }
            self.retx_scan += len;
        }
        None
    }

    /// Records the retransmission at `now` of the segment [`next_retransmit`](Self::next_retransmit) returned.
    pub fn on_retransmit(&mut self, now: Instant, offset: u64) {
        let offset = offset + self.base;
        let i = offset / self.mss;
        let len = self.seg_len(i);
        if let Some(r) = self.rates.as_deref_mut() {
            r.states[(i - self.front) as usize] = r.sampler.on_send(now, self.pipe);
        }
        let slot = &mut self.segs[(i - self.front) as usize];
        slot.flags |= RETRANS | EVER_RETRANS;
        slot.sent_at = now;
        self.pipe += len;
        self.retx_scan = offset + len;
    }
}

/// What of a SACK block the previous ACK's blocks did not cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Uncached {
    /// Nothing: the block lies within one already walked.
    Nothing,
    /// One part, `[l, r)`: the whole block, or what it adds to a cached block.
    One(u64, u64),
    /// The general subtraction's parts (see [`subtract_cached`]).
    Parts([(u64, u64); 5], usize),
}

/// The parts of SACK block `[l, r)` outside every block of `cache` (the previous
/// ACK's).
///
/// An ACK's blocks mostly repeat the previous ACK's, extend one of them to the right
/// by the segment that just arrived, or are new (a segment that landed past every
/// range the receiver holds, as after a slow-start overshoot); those three cases are
/// answered here at once, without the general subtraction's array of parts, whose
/// result they equal (a proptest holds them to that). In a recovery this runs for
/// every block of every ACK.
#[inline]
fn uncached(cache: &[(u64, u64); 4], l: u64, r: u64) -> Uncached {
    if let Some(&(_, cr)) = cache.iter().find(|&&(cl, cr)| cl <= l && l < cr) {
        if r <= cr {
            return Uncached::Nothing; // within a block already walked
        }
        // Extends that block to the right: the extension is new, unless another
        // cached block reaches into it.
        if !cache.iter().any(|&(ol, or)| ol < or && ol < r && or > cr) {
            return Uncached::One(cr, r);
        }
    } else if !cache.iter().any(|&(cl, cr)| cl < cr && cl < r && l < cr) {
        return Uncached::One(l, r); // touches no cached block
    }
    let (parts, n) = subtract_cached(cache, l, r);
    Uncached::Parts(parts, n)
}

/// `[l, r)` minus every block of `cache`, block by block (a cached block strictly
/// inside leaves two parts, so four blocks leave at most five).
fn subtract_cached(cache: &[(u64, u64); 4], l: u64, r: u64) -> ([(u64, u64); 5], usize) {
    let mut parts = [(l, r), (0, 0), (0, 0), (0, 0), (0, 0)];
    let mut n = 1;
    for &(cl, cr) in cache {
        if cl >= cr {
            continue;
        }
        let mut k = 0;
        while k < n {
            let (pl, pr) = parts[k];
            if cr <= pl || cl >= pr {
                k += 1;
                continue;
            }
            match (cl <= pl, cr >= pr) {
                (true, true) => {
                    parts[k] = parts[n - 1];
                    n -= 1;
                    continue;
                }
                (true, false) => parts[k] = (cr, pr),
                (false, true) => parts[k] = (pl, cl),
                (false, false) => {
                    parts[k] = (pl, cl);
                    if n < parts.len() {
                        parts[n] = (cr, pr);
                        n += 1;
                    }
                }
            }
            k += 1;
        }
    }
    (parts, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    const MSS: u64 = 100;

    /// The non-empty intervals of `parts[..n]`, sorted.
    fn normalised((parts, n): ([(u64, u64); 5], usize)) -> Vec<(u64, u64)> {
        let mut v: Vec<_> = parts[..n].iter().copied().filter(|(a, b)| a < b).collect();
        v.sort_unstable();
        v
    }

    proptest::proptest! {
        /// The shortcuts for a repeated, right-extended or new block leave the same
        /// parts as the general subtraction: for blocks built like a receiver's (a
        /// cached block, extended, possibly swallowing others) and for arbitrary ones,
        /// disjoint, overlapping, empty or reversed.
        #[test]
        fn uncached_matches_the_general_subtraction(
            cache in proptest::array::uniform4((0u64..40, 0u64..40)),
            pick in 0usize..4,
            grow in 0u64..20,
            (l, r) in (0u64..45, 0u64..45),
        ) {
            let (cl, cr) = cache[pick];
            for (l, r) in [(l, r), (cl, cr), (cl, cr + grow), (cl.saturating_sub(grow), cr + grow)] {
                let fast = match uncached(&cache, l, r) {
                    Uncached::Nothing => ([(0, 0); 5], 0),
                    Uncached::One(pl, pr) => ([(pl, pr), (0, 0), (0, 0), (0, 0), (0, 0)], 1),
                    Uncached::Parts(parts, n) => (parts, n),
                };
                proptest::prop_assert_eq!(
                    normalised(fast),
                    normalised(subtract_cached(&cache, l, r)),
                    "block {}..{} against {:?}", l, r, cache
                );
            }
        }
    }

    fn board(n: usize) -> Scoreboard {
        let mut b = Scoreboard::new(MSS);
        for _ in 0..n {
            b.on_send_new(Instant::ZERO);
        }
        b
    }

    /// With rate sampling on, a SACKed segment counts as delivered when it is
    /// SACKed and not again when the cumulative ACK passes it; a lost one counts as
    /// lost; a retransmission's sample measures from its new send. Ten segments of
    /// 100 bytes leave 1 ms apart; 1..=4 are SACKed at 50 ms, 0 is lost and resent
    /// at 60 ms, and the cumulative ACK of everything comes at 110 ms.
    #[test]
    fn rate_samples_count_each_delivery_once() {
        let ms = |n: u64| Instant::from_nanos(n * 1_000_000);
        let mut b = Scoreboard::new(MSS);
        b.enable_rate_sampling();
        for i in 0..10 {
            b.on_send_new(ms(i));
        }
        b.begin_rate_sample();
        b.on_sack_blocks(&[(100, 500)], ms(50));
        b.detect_losses(3 * MSS);
        let (rs, delivered) = b.finish_rate_sample(ms(50), 1000, None, None).unwrap();
        assert_eq!((rs.newly_acked, delivered, rs.newly_lost), (400, 400, 100));
        // Segment 4 (sent at 4 ms, first send at 0) is the newest: 400 bytes over
        // max(send 4 ms, ACK 50 ms).
        assert_eq!(rs.interval, Duration::from_millis(50));
        b.on_retransmit(ms(60), 0);
        b.begin_rate_sample();
        b.on_cumulative_ack(1000, ms(110));
        let (rs, delivered) = b.finish_rate_sample(ms(110), 600, None, None).unwrap();
        // Segments 0 and 5..=9 are new; 1..=4 were counted at 50 ms.
        assert_eq!((rs.newly_acked, delivered, rs.newly_lost), (600, 1000, 0));
        // The newest send among them is the retransmission at 60 ms, made when 400
        // bytes were delivered (at 50 ms): 600 bytes over 60 ms of ACK interval.
        assert_eq!(rs.prior_delivered, 400);
        assert_eq!(rs.delivered, 600);
        assert_eq!(rs.interval, Duration::from_millis(60));
        // Rate sampling off: nothing to finish.
        assert!(board(1).finish_rate_sample(ms(1), 0, None, None).is_none());
    }

    #[test]
    fn sack_then_loss_then_retransmit_keeps_the_pipe_right() {
        let mut b = board(10);
        assert_eq!(b.pipe(), 1000);
        // Segment 0 lost; 1..=4 SACKed.
        assert_eq!(b.on_sack_blocks(&[(100, 500)], Instant::ZERO), 400);
        assert_eq!(b.pipe(), 600);
        assert_eq!(b.detect_losses(3 * MSS), 100);
        assert_eq!(b.pipe(), 500);
        assert_eq!(b.next_retransmit(), Some((0, 100)));
        b.on_retransmit(Instant::ZERO, 0);
        assert_eq!(b.pipe(), 600);
        assert_eq!(b.next_retransmit(), None);
        let ack = b.on_cumulative_ack(500, Instant::ZERO);
        assert_eq!(ack.newly_acked, 100);
        assert_eq!(
            ack.rtt_sample_from, None,
            "Karn: no sample from SACKed/retransmitted"
        );
        assert_eq!(b.pipe(), 500);
        assert_eq!(b.sacked_bytes(), 0);
        assert_eq!(b.una(), 500);
    }

    /// Without SACK, the ACK that a retransmission fills a hole with covers segments
    /// received long before it: none of them may time the path (Karn), or SRTT takes
    /// in the whole recovery.
    #[test]
    fn an_ack_covering_a_retransmission_gives_no_rtt_sample() {
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        let mut b = Scoreboard::new(MSS);
        for i in 0..4 {
            b.on_send_new(t(i));
        }
        assert_eq!(
            b.on_cumulative_ack(100, Instant::ZERO).rtt_sample_from,
            Some(t(0))
        );
        assert_eq!(b.mark_una_lost(), 100);
        assert_eq!(b.next_retransmit(), Some((100, 100)));
        b.on_retransmit(t(500), 100);
        let ack = b.on_cumulative_ack(400, Instant::ZERO);
        assert_eq!(ack.newly_acked, 300);
        assert_eq!(ack.rtt_sample_from, None, "sampled segment 3, sent at 3 ms");
    }

    #[test]
    fn rto_marks_everything_lost_and_retransmits_from_una() {
        let mut b = board(5);
        b.on_sack_blocks(&[(300, 400)], Instant::ZERO);
        b.on_rto();
        assert_eq!(b.pipe(), 0);
        let mut order = vec![];
        while let Some((off, _)) = b.next_retransmit() {
            b.on_retransmit(Instant::ZERO, off);
            order.push(off);
        }
        assert_eq!(order, vec![0, 100, 200, 400]);
        assert_eq!(b.pipe(), 400);
    }

    /// The cached SND.MAX and next segment stay what a fresh computation gives, and
    /// what the grid says, through sends, SACKs, losses, retransmissions, timeouts,
    /// cumulative ACKs, a short first segment, a Nagle rebase and a stream end.
    #[test]
    fn cached_next_segment_follows_every_change() {
        let check = |b: &Scoreboard, what: &str| {
            assert_eq!(b.next, b.fresh_next(), "stale after {what}");
            let start = b.max_v();
            assert_eq!(b.next_new_room(), (start / MSS + 1) * MSS - start, "{what}");
        };
        let mut b = Scoreboard::new(MSS);
        b.set_first_segment(1030); // first segment 30 bytes
        check(&b, "set_first_segment");
        assert_eq!(b.on_send_new(Instant::ZERO), 30);
        check(&b, "the short first segment");
        for _ in 0..8 {
            b.on_send_new(Instant::ZERO);
            check(&b, "a send");
        }
        b.on_sack_blocks(&[(230, 530)], Instant::ZERO);
        check(&b, "SACK");
        b.detect_losses(3 * MSS);
        check(&b, "loss detection");
        while let Some((off, _)) = b.next_retransmit() {
            b.on_retransmit(Instant::ZERO, off);
            check(&b, "a retransmission");
        }
        b.on_cumulative_ack(130, Instant::ZERO);
        check(&b, "a cumulative ACK");
        b.on_rto();
        check(&b, "a timeout");
        b.on_cumulative_ack(b.max(), Instant::ZERO);
        check(&b, "acknowledging everything");
        let max = b.max();
        b.rebase_short_segment(max + 40);
        check(&b, "a Nagle rebase");
        assert_eq!(b.next_new_len(), 40);
        b.on_send_new(Instant::ZERO);
        assert_eq!(b.on_send_new(Instant::ZERO), 100);
        // The stream ends inside the next segment.
        b.set_end(max + 40 + 150);
        check(&b, "set_end");
        assert_eq!(b.on_send_new(Instant::ZERO), 50);
        check(&b, "the last segment");
        assert_eq!(b.next_new_len(), 0);
    }

    #[test]
    fn short_last_segment() {
        let mut b = Scoreboard::new(MSS);
        b.set_end(250);
        assert_eq!(b.on_send_new(Instant::ZERO), 100);
        assert_eq!(b.on_send_new(Instant::ZERO), 100);
        assert_eq!(b.next_new_len(), 50);
        assert_eq!(b.on_send_new(Instant::ZERO), 50);
        assert_eq!(b.next_new_len(), 0);
        assert_eq!(b.max(), 250);
        assert_eq!(b.on_sack_blocks(&[(200, 250)], Instant::ZERO), 50);
        assert_eq!(b.on_cumulative_ack(250, Instant::ZERO).newly_acked, 200);
        assert!(b.is_empty());
    }

    #[test]
    fn growing_blocks_are_applied_once() {
        let mut b = board(100);
        // Segment 0 lost; the block grows by one segment per ACK.
        for k in 2..=100u64 {
            let newly = b.on_sack_blocks(&[(100, k * MSS)], Instant::ZERO);
            assert_eq!(newly, MSS, "ACK {k}");
        }
        // A second hole splits the block; a new block appears above a cached one.
        let mut b = board(20);
        b.on_sack_blocks(&[(500, 800)], Instant::ZERO);
        assert_eq!(
            b.on_sack_blocks(&[(900, 1000), (100, 300), (500, 800)], Instant::ZERO),
            300
        );
        assert_eq!(
            b.on_sack_blocks(&[(100, 1000)], Instant::ZERO),
            300,
            "only 300..500 and 800..900 are new"
        );
        assert_eq!(b.sacked_bytes(), 900);
    }

    #[test]
    fn memory_follows_the_window_not_the_history() {
        let mut b = Scoreboard::new(MSS);
        for round in 0..1000u64 {
            for _ in 0..10 {
                b.on_send_new(Instant::ZERO);
            }
            b.on_cumulative_ack((round + 1) * 10 * MSS, Instant::ZERO);
        }
        assert!(b.is_empty());
        assert!(b.segs.capacity() < 64);
    }
}
