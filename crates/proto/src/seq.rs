//! Sequence numbers with wrap-aware comparison.
//!
//! TCP's 32-bit [`TcpSeqNumber`] and UDT's 31-bit [`UdtSeqNumber`] live in
//! `longhaul-wire`, because they are field types there; they are re-exported here so
//! engines name all sequence types from one place. SCTP's TSN joins them with its
//! engine.

pub use longhaul_wire::udt::UdtSeqNumber;
pub use longhaul_wire::TcpSeqNumber;

/// Maps a 32-bit wire sequence number to a 64-bit stream offset, given a nearby
/// reference point whose offset and wire number are both known.
///
/// The result is correct when the true offset lies within 2^31 of `reference_offset`,
/// which TCP's windows guarantee. Engines keep 64-bit offsets internally so that
/// nothing downstream of the wire has to think about wrap-around.
pub fn unwrap_tcp(seq: TcpSeqNumber, reference: TcpSeqNumber, reference_offset: u64) -> i64 {
    reference_offset as i64 + i64::from(seq.distance(reference))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_across_the_wrap() {
        let reference = TcpSeqNumber(u32::MAX - 100);
        let seq = reference + 1000;
        assert_eq!(unwrap_tcp(seq, reference, 5_000_000_000), 5_000_001_000);
        assert_eq!(
            unwrap_tcp(TcpSeqNumber(u32::MAX - 200), reference, 500),
            400
        );
    }
}
