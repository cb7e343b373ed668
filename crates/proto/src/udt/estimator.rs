//! The receiver's rate estimators (UDT4's `CPktTimeWindow`, `src/window.cpp`): the
//! packet arrival rate from the median-filtered mean of the last 16 arrival intervals,
//! and the link capacity from the same filter over the last 64 packet-pair gaps.

/// Arrival intervals kept (`m_iAWSize`).
pub(crate) const ARRIVALS: usize = 16;
/// Packet-pair gaps kept (`m_iPWSize`).
const PROBES: usize = 64;

/// Both windows, in µs.
#[derive(Debug, Clone)]
pub struct TimeWindow {
    arrivals: [u32; ARRIVALS],
    arrival_ptr: usize,
    probes: [u32; PROBES],
    probe_ptr: usize,
    last_arrival_us: Option<u64>,
    probe1_us: Option<u64>,
}

impl Default for TimeWindow {
    /// Arrival slots start at 1 s and probe slots at 1 ms, as in 4.11.
    fn default() -> Self {
        TimeWindow {
            arrivals: [1_000_000; ARRIVALS],
            arrival_ptr: 0,
            probes: [1000; PROBES],
            probe_ptr: 0,
            last_arrival_us: None,
            probe1_us: None,
        }
    }
}

/// The median of `w` as 4.11 computes it: `nth_element` over all but the last slot.
fn median(w: &[u32]) -> u32 {
    let mut copy = w[..w.len() - 1].to_vec();
    let mid = (w.len() / 2).min(copy.len() - 1);
    *copy.select_nth_unstable(mid).1
}

impl TimeWindow {
    /// A data packet arrived at `now_us`.
    pub fn on_arrival(&mut self, now_us: u64) {
        if let Some(last) = self.last_arrival_us {
            self.arrivals[self.arrival_ptr] = u32::try_from(now_us - last).unwrap_or(u32::MAX);
            self.arrival_ptr = (self.arrival_ptr + 1) % ARRIVALS;
        }
        self.last_arrival_us = Some(now_us);
    }

    /// The first packet of a pair (sequence number ≡ 0 mod 16) arrived.
    pub fn on_probe1(&mut self, now_us: u64) {
        self.probe1_us = Some(now_us);
    }

    /// The second packet of a pair arrived.
    pub fn on_probe2(&mut self, now_us: u64) {
        if let Some(p1) = self.probe1_us.take() {
            self.probes[self.probe_ptr] = u32::try_from(now_us - p1).unwrap_or(u32::MAX);
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
        if kept.len() > ARRIVALS / 2 {
            // 4.11 divides in integers before the float division.
            let mean = kept.iter().sum::<u64>() / kept.len() as u64;
            (1e6 / mean.max(1) as f64).ceil() as u32
        } else {
            0
        }
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
        (1e6 / (sum as f64 / count as f64).max(1.0)).ceil() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_arrivals_give_the_rate() {
        let mut w = TimeWindow::default();
        assert_eq!(
            w.recv_rate_pps(),
            1,
            "the initial 1 s slots: 1 packet per second"
        );
        for i in 0..40 {
            w.on_arrival(i * 100);
        }
        assert_eq!(w.recv_rate_pps(), 10_000);
    }

    #[test]
    fn outliers_are_filtered() {
        let mut w = TimeWindow::default();
        let mut t = 0;
        for i in 0..32 {
            t += if i % 8 == 0 { 50_000 } else { 100 };
            w.on_arrival(t);
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
            w.on_probe1(i * 1000);
            w.on_probe2(i * 1000 + 12);
        }
        assert_eq!(
            w.bandwidth_pps(),
            83_334,
            "12 µs per 1500-byte packet: 1 Gb/s"
        );
    }
}
