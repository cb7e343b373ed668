//! The one place that reads the OS clock: engines get `now` from here.

use longhaul_proto::Instant;

/// Monotonic time since the clock was made, as the engines' [`Instant`].
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    /// A clock whose zero is now.
    #[allow(clippy::disallowed_methods)] // the driver owns the clock
    pub fn new() -> Self {
        Clock {
            epoch: std::time::Instant::now(),
        }
    }
    /// Now.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// When, on this clock, the kernel stamped a datagram it received: the stamp is
    /// wall-clock time (`SO_TIMESTAMPNS` stamps by `CLOCK_REALTIME`, since the Unix
    /// epoch), so it is mapped by its age, read on the wall clock now. A stamp
    /// that the wall clock says is in the future (the clock was stepped back since)
    /// maps to now.
    #[allow(clippy::disallowed_methods)] // the driver owns the clock
    pub fn from_wall(&self, stamp: std::time::Duration) -> Instant {
        let now = self.now();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let age = wall.saturating_sub(stamp).as_nanos();
        Instant::from_nanos(
            now.as_nanos()
                .saturating_sub(u64::try_from(age).unwrap_or(u64::MAX)),
        )
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // reads the wall clock to make stamps
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn wall() -> Duration {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
    }

    #[test]
    fn a_wall_stamp_maps_by_its_age() {
        let c = Clock::new();
        std::thread::sleep(Duration::from_millis(20));
        // A stamp 10 ms old when the wall clock was read, between `before` and `after`.
        let before = c.now();
        let at = c.from_wall(wall() - Duration::from_millis(10));
        let after = c.now();
        // Within 0.1 ms for the two clocks' rates (NTP slews by at most 0.05 %).
        let slack = 100_000;
        assert!(
            at.as_nanos() + slack >= before.as_nanos() - 10_000_000
                && at.as_nanos() <= after.as_nanos() - 10_000_000 + slack,
            "{at:?} not 10 ms before [{before:?}, {after:?}]"
        );
    }

    #[test]
    fn a_stamp_from_the_future_maps_to_now() {
        let c = Clock::new();
        let before = c.now();
        let at = c.from_wall(wall() + Duration::from_secs(5));
        assert!(at >= before && at <= c.now());
    }
}
