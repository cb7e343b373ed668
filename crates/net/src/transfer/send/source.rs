//! Where blocks come from: a file's bytes, or the generated `synthetic` file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::super::TransferError;

/// Fills `buf` with the bytes of a `synthetic` file from `offset`: 64-bit words
/// of a Weyl sequence (word `i` is `i × 0x9E37_79B9_7F4A_7C15`, little-endian),
/// so that every block differs and a receiver can check any byte without the file.
pub fn synthetic_fill(buf: &mut [u8], offset: u64) {
    let word = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
    // Up to the first word boundary byte by byte, then whole words (fast enough
    // not to be what limits a 10 Gb/s sender), then the tail.
    let head = ((8 - offset % 8) % 8).min(buf.len() as u64) as usize;
    for (k, b) in buf[..head].iter_mut().enumerate() {
        let o = offset + k as u64;
        *b = word(o / 8)[(o % 8) as usize];
    }
    let mut i = (offset + head as u64) / 8;
    let mut words = buf[head..].chunks_exact_mut(8);
    for w in &mut words {
        w.copy_from_slice(&word(i));
        i += 1;
    }
    for (k, b) in words.into_remainder().iter_mut().enumerate() {
        *b = word(i)[k];
    }
}

/// Reads `data.len()` bytes of file `file` at `offset` (or generates them, for the
/// synthetic file), keeping the one file a channel works on open in `open`.
pub(super) fn read_block(
    sources: &[PathBuf],
    open: &mut Option<(u32, File)>,
    file: u32,
    data: &mut [u8],
    offset: u64,
) -> Result<(), TransferError> {
    let p = &sources[file as usize];
    if p.as_os_str().is_empty() {
        synthetic_fill(data, offset);
        return Ok(());
    }
    if open.as_ref().is_none_or(|(i, _)| *i != file) {
        let f = File::open(p).map_err(TransferError::io(p.display().to_string()))?;
        *open = Some((file, f));
    }
    let f = &open.as_ref().expect("opened above").1;
    f.read_exact_at(data, offset)
        .map_err(TransferError::io(format!(
            "{}: reading (did it shrink?)",
            p.display()
        )))
}

#[cfg(test)]
mod tests {
    use super::synthetic_fill;

    /// Any slice of the synthetic file, at any offset and length, is the same bytes
    /// as that range of the whole file generated at once.
    #[test]
    fn synthetic_slices_agree_with_the_whole() {
        let mut whole = vec![0u8; 1000];
        synthetic_fill(&mut whole, 0);
        assert_ne!(whole[..8], whole[8..16], "words differ");
        for offset in [0usize, 1, 7, 8, 9, 13, 500] {
            for len in [0usize, 1, 3, 8, 15, 16, 17, 200] {
                let mut part = vec![0u8; len];
                synthetic_fill(&mut part, offset as u64);
                assert_eq!(part, whole[offset..offset + len], "{offset}+{len}");
            }
        }
    }
}
