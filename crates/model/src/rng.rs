//! Independent random streams from one seed: each component (a link direction's
//! loss, a UDP source's arrivals) draws from its own stream, named by a salt (which
//! kind of component) and an index (which one), so adding a component never changes
//! another's draws and a run follows from its seed alone.
//!
//! Streams are xoshiro256++ (Blackman and Vigna) seeded from `seed ^ salt`, then
//! moved `index + 1` jumps ahead; a jump is 2^128 draws (a long jump 2^192), far more
//! than any run takes, so streams never overlap.

use std::cell::RefCell;
use std::collections::HashMap;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

thread_local! {
    /// The last stream made of each kind: a topology builds its components' streams
    /// in index order, and stream `i + 1` is one jump past stream `i`, so building
    /// n of them costs n jumps instead of n^2 / 2 (a 1000-pair dumbbell's 4000
    /// loss streams took seconds). Only a cache: the streams are the same.
    static LAST: RefCell<HashMap<(u64, u64), (u64, Xoshiro256PlusPlus)>> =
        RefCell::new(HashMap::new());
}

/// Stream `index` of kind `salt` under `seed`, jumps of 2^128 apart.
pub fn stream(seed: u64, salt: u64, index: u64) -> Xoshiro256PlusPlus {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        let (mut rng, mut at) = match last.get(&(seed, salt)) {
            Some((i, r)) if *i <= index => (r.clone(), *i + 1),
            _ => (Xoshiro256PlusPlus::seed_from_u64(seed ^ salt), 0),
        };
        while at <= index {
            rng.jump();
            at += 1;
        }
        last.insert((seed, salt), (index, rng.clone()));
        rng
    })
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

    /// The cache of the last stream of a kind gives the streams that jumping from
    /// the seed gives, in any order of requests.
    #[test]
    fn the_cache_changes_no_stream() {
        let direct = |index: u64| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(9 ^ 3);
            for _ in 0..=index {
                rng.jump();
            }
            rng.next_u64()
        };
        for index in [0, 5, 6, 6, 2, 40, 39, 41] {
            assert_eq!(
                stream(9, 3, index).next_u64(),
                direct(index),
                "stream {index}"
            );
        }
    }
}
