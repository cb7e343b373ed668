//! The limits a scenario must keep, in one place: the loader applies them for
//! `sim check` and `sim run` alike, and refuses with exit 2, naming the key and the
//! limit. Each says why it is where it is.

/// Largest application write (SCTP message) a scenario may ask for.
pub const MAX_MESSAGE: u32 = 1 << 20;

/// Most samples a series may hold (duration / interval).
pub const MAX_SAMPLES: u128 = 10_000_000;

/// The most flows a scenario may hold, transfer channels included: each flow gets
/// its own range of ports, and `check` and `run` both refuse more (one limit, one
/// place).
pub const MAX_FLOWS: usize = 10_000;

/// Largest scenario or sweep file read, bytes. Scenarios are a few kilobytes, and
/// [`MAX_FLOWS`] flows written out one by one about 1 MB; parsing costs some 50
/// bytes of memory per byte of TOML (a 15 MB file of links took 700 MB), so the
/// limit keeps `sim check` of the largest file allowed near 100 MB, and a key that
/// names a device or a huge file (`scenario = "/dev/zero"` in a sweep) from reading
/// until memory runs out. A larger file is refused by its size, before it is read.
pub const MAX_FILE_BYTES: u64 = 2 << 20;

/// A flow that may send more packets than this makes a run of minutes or more:
/// each packet is simulated, at a few events apiece. `check` and `run` warn (it is
/// not an error: a long run may be meant).
pub const LONG_RUN_PACKETS: f64 = 1e9;

/// Packets the simulator moves per second of wall time, for the estimate in that
/// warning: `longhaul sim bench` measures 10-12 M segments a second on one core of
/// the machines we run on (a segment and its ACK, each over two links).
pub const PACKETS_PER_WALL_SECOND: f64 = 10e6;
