//! Independent random streams from one seed: each component (a link direction's
//! loss, a UDP source's arrivals) draws from its own stream, named by a salt (which
//! kind of component) and an index (which one), so adding a component never changes
//! another's draws and a run follows from its seed alone.
//!
//! Streams are xoshiro256++ (Blackman and Vigna) seeded from `seed ^ salt`, then
//! moved `index + 1` jumps ahead; a jump is 2^128 draws (a long jump 2^192), far more
//! than any run takes, so streams never overlap.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Stream `index` of kind `salt` under `seed`, jumps of 2^128 apart.
pub fn stream(seed: u64, salt: u64, index: u64) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ salt);
    for _ in 0..=index {
        rng.jump();
    }
    rng
}

/// Stream `index` of kind `salt` under `seed`, long jumps of 2^192 apart (a kind
/// of its own besides the jumped streams).
pub fn long_stream(seed: u64, salt: u64, index: u64) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ salt);
    for _ in 0..=index {
        rng.long_jump();
    }
    rng
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn streams_repeat_and_differ() {
        let draw = |mut r: Xoshiro256PlusPlus| (0..4).map(|_| r.next_u64()).collect::<Vec<_>>();
        assert_eq!(draw(stream(1, 7, 0)), draw(stream(1, 7, 0)));
        assert_ne!(draw(stream(1, 7, 0)), draw(stream(1, 7, 1)));
        assert_ne!(draw(stream(1, 7, 0)), draw(stream(1, 8, 0)));
        assert_ne!(draw(stream(1, 7, 0)), draw(long_stream(1, 7, 0)));
    }
}
