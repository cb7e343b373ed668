//! The emulator's one clock reader: the monotonic clock as nanoseconds since the
//! clock was made, in the protocol engines' [`Instant`].

use longhaul_proto::Instant;

/// Monotonic time since the clock was made. Copies share the epoch, so threads that
/// timestamp probes and the emulator that forwards them agree on "now".
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    /// A clock whose zero is now.
    #[allow(clippy::disallowed_methods)] // a real-time emulator must read the clock
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
