//! Time and rate: integer nanoseconds and bits per second.

pub use core::time::Duration;

/// A point in time: nanoseconds since an arbitrary epoch (the start of a simulation, or
/// the moment a socket driver started).
///
/// longhaul's own type, so that engines cannot read a clock by accident and the
/// simulator needs no conversions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// The far future; later than any deadline a run reaches.
    pub const MAX: Instant = Instant(u64::MAX);

    /// From nanoseconds since the epoch.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// `self + ns` nanoseconds, saturating.
    pub const fn add_nanos(self, ns: u64) -> Instant {
        Instant(self.0.saturating_add(ns))
    }
    /// Nanoseconds from `earlier` to `self`, zero if `earlier` is later.
    pub const fn nanos_since(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
    /// Seconds since the epoch, for reports.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl core::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl core::ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl core::ops::Sub<Instant> for Instant {
    type Output = Duration;
    /// # Panics
    /// In debug builds, if `rhs` is later than `self`.
    fn sub(self, rhs: Instant) -> Duration {
        debug_assert!(self >= rhs, "time went backwards");
        Duration::from_nanos(self.0.saturating_sub(rhs.0))
    }
}

impl core::fmt::Display for Instant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

/// A data rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bandwidth(u64);

impl Bandwidth {
    /// From bits per second.
    pub const fn from_bps(bps: u64) -> Self {
        Bandwidth(bps)
    }
    /// From megabits per second.
    pub const fn from_mbps(mbps: u64) -> Self {
        Bandwidth(mbps * 1_000_000)
    }
    /// Bits per second.
    pub const fn as_bps(self) -> u64 {
        self.0
    }
    /// Megabits per second, for reports.
    pub fn as_mbps_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }
    /// Time to serialise `bytes` at this rate, rounded up to the nanosecond.
    ///
    /// # Panics
    /// If the rate is zero (a validated configuration never has one).
    pub fn tx_time_nanos(self, bytes: u64) -> u64 {
        assert!(self.0 > 0, "zero bandwidth");
        let bits = u128::from(bytes) * 8 * 1_000_000_000;
        bits.div_ceil(u128::from(self.0)) as u64
    }
    /// Bytes that pass in `d` at this rate (the bandwidth-delay product of `d`).
    pub fn bytes_in(self, d: Duration) -> u64 {
        (u128::from(self.0) * d.as_nanos() / 8_000_000_000) as u64
    }
}

impl core::fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} Mb/s", self.as_mbps_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_time_and_bdp() {
        let gig = Bandwidth::from_mbps(1000);
        assert_eq!(gig.tx_time_nanos(1500), 12_000);
        assert_eq!(Bandwidth::from_bps(3).tx_time_nanos(1), 2_666_666_667);
        assert_eq!(gig.bytes_in(Duration::from_millis(100)), 12_500_000);
    }

    #[test]
    fn instant_arithmetic_saturates() {
        let t = Instant::from_nanos(10) + Duration::from_nanos(5);
        assert_eq!(t.as_nanos(), 15);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(
            t.saturating_duration_since(Instant::from_nanos(20)),
            Duration::ZERO
        );
    }
}
