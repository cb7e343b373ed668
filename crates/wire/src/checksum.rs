//! The Internet checksum (RFC 1071): a ones'-complement sum of 16-bit words.

/// Adds `data` to a running 32-bit ones'-complement accumulator.
///
/// An odd trailing byte is padded with zero, as RFC 1071 specifies.
pub fn accumulate(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// Folds an accumulator to 16 bits and complements it.
pub fn finish(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The checksum of `data` alone.
pub fn compute(data: &[u8]) -> u16 {
    finish(accumulate(0, data))
}

/// Accumulates the IPv4 pseudo-header (RFC 9293 §3.1) for a transport checksum.
pub fn pseudo_header(src: [u8; 4], dst: [u8; 4], protocol: u8, length: u32) -> u32 {
    let mut acc = accumulate(0, &src);
    acc = accumulate(acc, &dst);
    acc += u32::from(protocol);
    // The length field is 16 bits on the wire; a simulated segment never exceeds it.
    acc + (length & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (before complement).
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(compute(&data), !0xddf2);
    }

    #[test]
    fn zero_padding_does_not_change_the_sum() {
        let data = [0x45, 0x00, 0x12, 0x34, 0xab];
        let mut padded = data.to_vec();
        padded.extend_from_slice(&[0; 7]);
        assert_eq!(compute(&data), compute(&padded));
    }
}
