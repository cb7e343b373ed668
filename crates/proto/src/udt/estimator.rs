//! The receiver's rate estimators (UDT4's `CPktTimeWindow`, `src/window.cpp`): the
//! packet arrival rate from the median-filtered mean of the last 16 arrival intervals,
//! and the link capacity from the same filter over the last 64 packet-pair gaps.
//!
//! UDT4 times arrivals in whole microseconds and divides the mean interval in
//! integers. Above a few Gb/s that is most of the reading: 1500-byte packets at
//! 10 Gb/s arrive 1.2 µs apart, which read as 1 µs (1 M packets/s, 20 % over the
//! link) or, paced a little slower, 2 µs (500 k, 40 % under it); at 25 Gb/s
//! (a quarter of 100 Gb/s, one of four channels) most intervals read 0 and the
//! filter keeps too few to give a rate at all. [`ArrivalClock::Nanos`] keeps the
//! filter and the window and times in nanoseconds.

use crate::time::Instant;

/// Arrival intervals kept (`m_iAWSize`).
pub(crate) const ARRIVALS: usize = 16;
/// Packet-pair gaps kept (`m_iPWSize`).
const PROBES: usize = 64;

/// How a receiver times packet arrivals for the rates it reports (a receiver-side
/// choice, like [`NakReport`](super::NakReport): the ACK carries packets per second
/// either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArrivalClock {
    /// UDT4 4.11: whole microseconds, the mean interval divided in integers.
    #[default]
    Udt4,
    /// Nanoseconds, the mean in floating point: rates to within a packet in 2^32
    /// at any link speed the simulator or a host can clock.
    Nanos,
}

impl ArrivalClock {
    /// Nanoseconds per tick.
    fn tick_ns(self) -> u64 {
        match self {
            ArrivalClock::Udt4 => 1000,
            ArrivalClock::Nanos => 1,
        }
    }
}

/// Both windows, in ticks of the clock.
#[derive(Debug, Clone)]
pub struct TimeWindow {
    clock: ArrivalClock,
    arrivals: [u32; ARRIVALS],
    arrival_ptr: usize,
    probes: [u32; PROBES],
    probe_ptr: usize,
    last_arrival: Option<u64>,
    probe1: Option<u64>,
}

impl Default for TimeWindow {
    fn default() -> Self {
        TimeWindow::new(ArrivalClock::Udt4)
    }
}

/// The median of `w` as 4.11 computes it: `nth_element` over all but the last slot.
fn median(w: &[u32]) -> u32 {
    let mut copy = w[..w.len() - 1].to_vec();
    let mid = (w.len() / 2).min(copy.len() - 1);
    *copy.select_nth_unstable(mid).1
}

impl TimeWindow {
    /// Arrival slots start at 1 s and probe slots at 1 ms, as in 4.11.
    pub fn new(clock: ArrivalClock) -> Self {
        let per_ms = (1_000_000 / clock.tick_ns()) as u32;
        TimeWindow {
            clock,
            arrivals: [1000 * per_ms; ARRIVALS],
            arrival_ptr: 0,
            probes: [per_ms; PROBES],
            probe_ptr: 0,
            last_arrival: None,
            probe1: None,
        }
    }

    fn ticks(&self, now: Instant) -> u64 {
        let ns = now.saturating_duration_since(Instant::ZERO).as_nanos();
        u64::try_from(ns / u128::from(self.clock.tick_ns())).unwrap_or(u64::MAX)
    }

    /// Ticks per second.
    fn hz(&self) -> f64 {
        1e9 / self.clock.tick_ns() as f64
    }

    /// A data packet arrived at `now`.
    pub fn on_arrival(&mut self, now: Instant) {
        let t = self.ticks(now);
        if let Some(last) = self.last_arrival {
            // Saturating: a time before the last (which the drivers do not give)
            // reads as no interval, not as a panic or a wrap.
            self.arrivals[self.arrival_ptr] =
                u32::try_from(t.saturating_sub(last)).unwrap_or(u32::MAX);
            self.arrival_ptr = (self.arrival_ptr + 1) % ARRIVALS;
        }
        self.last_arrival = Some(t);
    }

    /// The first packet of a pair (sequence number ≡ 0 mod 16) arrived.
    pub fn on_probe1(&mut self, now: Instant) {
        self.probe1 = Some(self.ticks(now));
    }

    /// The second packet of a pair arrived.
    pub fn on_probe2(&mut self, now: Instant) {
        if let Some(p1) = self.probe1.take() {
            let t = self.ticks(now);
            self.probes[self.probe_ptr] = u32::try_from(t.saturating_sub(p1)).unwrap_or(u32::MAX);
            self.probe_ptr = (self.probe_ptr + 1) % PROBES;
        }
    }

    /// Packets per second, or 0 if no more than half the intervals pass the filter
    /// (`getPktRcvSpeed`).
    pub fn recv_rate_pps(&self) -> u32 {
        let m = median(&self.arrivals);
        let (upper, lower) = (m.saturating_mul(8), m >> 3);
        let kept: Vec<u64> = self
            .arrivals
            .iter()
            .filter(|&&x| x < upper && x > lower)
            .map(|&x| u64::from(x))
            .collect();
        if kept.len() <= ARRIVALS / 2 {
            return 0;
        }
        let sum = kept.iter().sum::<u64>();
        let mean = match self.clock {
            // 4.11 divides in integers before the float division.
            ArrivalClock::Udt4 => (sum / kept.len() as u64).max(1) as f64,
            ArrivalClock::Nanos => sum as f64 / kept.len() as f64,
        };
        (self.hz() / mean).ceil() as u32
    }

    /// Link capacity, packets per second (`getBandwidth`; the median always counts).
    pub fn bandwidth_pps(&self) -> u32 {
        let m = median(&self.probes);
        let (upper, lower) = (m.saturating_mul(8), m >> 3);
        let mut sum = u64::from(m);
        let mut count = 1u64;
        for &x in &self.probes {
            if x < upper && x > lower {
                sum += u64::from(x);
                count += 1;
            }
        }
        (self.hz() / (sum as f64 / count as f64).max(1.0)).ceil() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn at_us(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    #[test]
    fn steady_arrivals_give_the_rate() {
        let mut w = TimeWindow::default();
        assert_eq!(
            w.recv_rate_pps(),
            1,
            "the initial 1 s slots: 1 packet per second"
        );
        for i in 0..40 {
            w.on_arrival(at_us(i * 100));
        }
        assert_eq!(w.recv_rate_pps(), 10_000);
    }

    #[test]
    fn outliers_are_filtered() {
        let mut w = TimeWindow::default();
        let mut t = 0;
        for i in 0..32 {
            t += if i % 8 == 0 { 50_000 } else { 100 };
            w.on_arrival(at_us(t));
        }
        assert_eq!(
            w.recv_rate_pps(),
            10_000,
            "the 50 ms gaps are more than 8x the median"
        );
    }

    #[test]
    fn packet_pairs_give_the_capacity() {
        let mut w = TimeWindow::default();
        assert_eq!(w.bandwidth_pps(), 1000);
        for i in 0..64u64 {
            w.on_probe1(at_us(i * 1000));
            w.on_probe2(at_us(i * 1000 + 12));
        }
        assert_eq!(
            w.bandwidth_pps(),
            83_334,
            "12 µs per 1500-byte packet: 1 Gb/s"
        );
    }

    /// 1500-byte packets at 10 Gb/s, 1200 ns apart: 833 333 packets/s. UDT4's
    /// clock reads every interval as 1 µs or 2 and the integer mean as 1 µs,
    /// 1 M packets/s (20 % over); nanoseconds read the rate. At 25 Gb/s (480 ns)
    /// UDT4's reads no rate at all.
    #[test]
    fn nanoseconds_read_a_fast_link() {
        let read = |clock, gap_ns: u64| {
            let mut w = TimeWindow::new(clock);
            for i in 0..40 {
                w.on_arrival(Instant::ZERO + Duration::from_nanos(7_000_000 + i * gap_ns));
            }
            w.recv_rate_pps()
        };
        assert_eq!(read(ArrivalClock::Udt4, 1200), 1_000_000);
        assert_eq!(read(ArrivalClock::Nanos, 1200), 833_334);
        assert_eq!(read(ArrivalClock::Udt4, 480), 0);
        assert_eq!(read(ArrivalClock::Nanos, 480), 2_083_334);
        // At 1 Gb/s (12 µs) the two agree.
        assert_eq!(read(ArrivalClock::Udt4, 12_000), 83_334);
        assert_eq!(read(ArrivalClock::Nanos, 12_000), 83_334);
    }

    /// Both clocks start from the same slots, so a receiver reports the same
    /// figures before it has measured anything.
    #[test]
    fn both_clocks_start_alike() {
        let (u, n) = (
            TimeWindow::new(ArrivalClock::Udt4),
            TimeWindow::new(ArrivalClock::Nanos),
        );
        assert_eq!(u.recv_rate_pps(), n.recv_rate_pps());
        assert_eq!(u.bandwidth_pps(), n.bandwidth_pps());
        assert_eq!(n.bandwidth_pps(), 1000);
    }
}
