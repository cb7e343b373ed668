//! Damage in flight, for the engines' pair tests: each engine's property test runs a
//! transfer whose datagrams this rewrites on the way, and checks the engine neither
//! panics nor hangs. (Compiled for tests only.)

/// A rewrite of a datagram in flight.
pub type Mangle = dyn FnMut(&mut Vec<u8>);

/// Damages about `percent` % of the datagrams it sees, from its own xorshift64
/// stream seeded with `seed`: a cut at a random length, a 32-bit word set to an
/// extreme (0, all ones, either side of 2^31: sequence numbers, lengths, ACK fields
/// and ranges far outside any window), or one to three bits flipped, half the time
/// within the first 64 bytes, where the headers are.
pub fn damage(seed: u64, percent: u64) -> Box<Mangle> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    Box::new(move |b: &mut Vec<u8>| {
        if next() % 100 >= percent || b.is_empty() {
            return;
        }
        match next() % 4 {
            0 => b.truncate((next() as usize) % b.len()),
            1 => {
                let w = (next() as usize % (b.len() / 4).max(1)) * 4;
                let v = [0u32, u32::MAX, 0x7fff_ffff, 0x8000_0000][next() as usize % 4];
                if w + 4 <= b.len() {
                    b[w..w + 4].copy_from_slice(&v.to_be_bytes());
                }
            }
            _ => {
                for _ in 0..1 + next() % 3 {
                    let span = if next() % 2 == 0 {
                        b.len().min(64)
                    } else {
                        b.len()
                    };
                    let i = next() as usize % span;
                    b[i] ^= 1 << (next() % 8);
                }
            }
        }
    })
}
