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
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
