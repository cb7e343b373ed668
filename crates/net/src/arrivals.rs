//! Arrival times for datagrams read in runs (UDP GRO), as UDT's receiver needs them.
//!
//! UDT's receiver times every data packet's arrival to report two figures in its
//! ACKs (`TimeWindow` in `longhaul-proto`, 4.11's `CPktTimeWindow`): the receive
//! rate, the median-filtered mean of the last 16 arrival intervals, from which the
//! sender sets its window (rate times RTT) and, leaving slow start, its sending
//! period; and the capacity, from packet pairs. Both assume each packet is timed
//! as it comes: back-to-back packets a bottleneck's spacing apart, idle gaps
//! filtered out as outliers.
//!
//! A datagram read alone is timed by the kernel's receive stamp (`SO_TIMESTAMPNS`),
//! when it came off the wire, not when it was read: while the receiver is busy,
//! datagrams wait in the socket and are then read back to back, so read times
//! measure the read loop, not the path. (Measured through `longhaul emu` at
//! 1 Gb/s, read-time readings of 0.47 to 11.8 Gb/s and a BBR model of the path
//! at 47 Gb/s; with GRO off as high.) Without a stamp, it is timed when read.
//!
//! A read that returns a run of `k` datagrams at once has one time for all of them,
//! read or stamped alike: the datagrams of one GSO send arrive, and are stamped,
//! together. Given to the engine as is, the run's `k - 1` zero intervals make the
//! median zero and the reported rate nothing, or, mixed with the gaps between
//! runs, one run per gap (measured: one channel on loopback fell from 6.0 to
//! 1.7 Gb/s). Spread evenly over the gap since the previous run, the intervals
//! give the average rate, idle time included, and a sender leaving slow start
//! (whose bursts are separated by waits for ACKs) takes that for the capacity and
//! stays there (measured: 4.4-5.2 Gb/s against 6.3-6.9).
//!
//! What a run's spacing was, no one can say: its datagrams came together, at least
//! as fast as this host takes them. So a run's datagrams are spaced by this host's
//! cost per datagram, measured on the runs before (from the read to the last
//! datagram handed over, over the run's length), the time one-at-a-time reads used
//! to put between them, and by at most the gap since the previous run, so the
//! times never go back. The spacing is at least 1 µs. UDT4's receivers count
//! whole µs, and intervals below one would read as zeros. `longhaul recv` times
//! in nanoseconds (`ArrivalClock::Nanos`), and a run's spacing is still at least
//! 1 µs: it is a guess, and this host's cost per datagram can be far below the
//! wire's spacing, which would let a run read many times the link.

use longhaul_proto::Instant;

/// The smallest spacing given (UDT4's resolution; see above).
const MIN_STEP_NANOS: u64 = 1_000;

/// The receiver's cost per datagram, and where the last run's times ended.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Arrivals {
    /// Nanoseconds per datagram, over the last run read.
    cost_nanos: u64,
    /// The time given to the last datagram of the last run.
    last: Instant,
}

/// The times of one run: `k` datagrams, the last at `now`, `step` apart.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    now: Instant,
    step_nanos: u64,
    last_index: usize,
}

impl Run {
    /// The time of the run's `i`-th datagram.
    pub(crate) fn at(&self, i: usize) -> Instant {
        let back = (self.last_index.saturating_sub(i) as u64).saturating_mul(self.step_nanos);
        Instant::from_nanos(self.now.as_nanos().saturating_sub(back))
    }
}

impl Arrivals {
    /// The times for a run of `k` datagrams that a read returned at `now`, the
    /// kernel's receive stamp `stamp` if it gave one. A lone datagram's stamp is
    /// its time, kept between the last time given and `now`, so times never go
    /// back (the stamps of a run read just before may be later than its read).
    pub(crate) fn run(&mut self, now: Instant, k: usize, stamp: Option<Instant>) -> Run {
        let last_index = k.max(1) - 1;
        let (end, step_nanos) = if last_index == 0 {
            (stamp.map_or(now, |t| t.max(self.last).min(now)), 0)
        } else {
            let room = now.nanos_since(self.last) / last_index as u64;
            (now, self.cost_nanos.max(MIN_STEP_NANOS).min(room))
        };
        self.last = end;
        Run {
            now: end,
            step_nanos,
            last_index,
        }
    }

    /// A read begun at `began` returned `k` datagrams, all handed over by `done`.
    pub(crate) fn took(&mut self, began: Instant, done: Instant, k: usize) {
        self.cost_nanos = done.nanos_since(began) / k.max(1) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(x: u64) -> Instant {
        Instant::from_nanos(x * 1_000)
    }

    #[test]
    fn a_lone_datagram_is_timed_when_read() {
        let mut a = Arrivals::default();
        a.took(us(0), us(5), 1);
        let r = a.run(us(100), 1, None);
        assert_eq!(r.at(0), us(100));
    }

    #[test]
    fn a_run_is_spaced_by_the_cost_per_datagram() {
        let mut a = Arrivals::default();
        // The last run: 10 datagrams read and handed over in 15 µs.
        a.run(us(1_000), 10, None);
        a.took(us(985), us(1_000), 10);
        // The next comes 200 µs later: 1.5 µs apart, ending at the read.
        let r = a.run(us(1_200), 4, None);
        let times: Vec<u64> = (0..4).map(|i| r.at(i).as_nanos()).collect();
        assert_eq!(times, [1_195_500, 1_197_000, 1_198_500, 1_200_000]);
    }

    #[test]
    fn a_run_never_reaches_back_past_the_last() {
        let mut a = Arrivals::default();
        a.run(us(1_000), 3, None);
        a.took(us(990), us(1_000), 2); // 5 µs each
                                       // Only 6 µs since: 4 datagrams get 2 µs each, the first at the last run's time.
        let r = a.run(us(1_006), 4, None);
        assert_eq!(r.at(0), us(1_000));
        assert_eq!(r.at(3), us(1_006));
        assert!((1..4).all(|i| r.at(i) > r.at(i - 1)));
    }

    #[test]
    fn the_spacing_is_at_least_a_microsecond() {
        let mut a = Arrivals::default();
        a.run(us(0), 1, None);
        a.took(us(0), Instant::from_nanos(40 * 300), 40); // 300 ns each
        let r = a.run(us(500), 40, None);
        assert_eq!(r.at(38), us(499), "1 µs apart, not 0.3");
    }

    #[test]
    fn a_lone_datagram_is_timed_by_its_stamp() {
        let mut a = Arrivals::default();
        a.run(us(100), 1, None);
        // Read at 500 µs, stamped on arrival at 130 µs.
        let r = a.run(us(500), 1, Some(us(130)));
        assert_eq!(r.at(0), us(130));
        // The next, read in the same loop 2 µs later, came 12 µs after it.
        let r = a.run(us(502), 1, Some(us(142)));
        assert_eq!(r.at(0), us(142));
    }

    #[test]
    fn a_stamp_is_kept_between_the_last_time_and_the_read() {
        let mut a = Arrivals::default();
        a.run(us(1_000), 1, None);
        assert_eq!(
            a.run(us(1_100), 1, Some(us(900))).at(0),
            us(1_000),
            "not before the last"
        );
        assert_eq!(
            a.run(us(1_200), 1, Some(us(1_300))).at(0),
            us(1_200),
            "not after the read"
        );
    }

    #[test]
    fn a_run_is_spaced_as_before_whatever_its_stamp() {
        let mut a = Arrivals::default();
        a.run(us(1_000), 10, None);
        a.took(us(985), us(1_000), 10);
        let r = a.run(us(1_200), 4, Some(us(1_150)));
        assert_eq!(r.at(0), Instant::from_nanos(1_195_500));
        assert_eq!(r.at(3), us(1_200));
    }
}
