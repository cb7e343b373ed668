//! Small input files (scenarios, sweeps, tokens, link traces), read with a bound.

use std::path::Path;

/// Reads a text file that must be a regular file of at most `max` bytes. Anything
/// else is an `InvalidInput` error saying which: a folder, a device that never ends
/// (`/dev/zero`), a FIFO (whose open would block), a file over the limit. The
/// command line reads the other small files its flags name (traces, tokens) with it.
pub fn read_small_file(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a folder, device or pipe)",
        ));
    }
    let too_big = || {
        let size = if max.is_multiple_of(1 << 20) {
            format!("{} MiB", max >> 20)
        } else {
            format!("{max} bytes")
        };
        Error::new(ErrorKind::InvalidInput, format!("larger than {size}"))
    };
    // Refused by its size, unread; then read no further than the limit all the
    // same (the file may grow between the two).
    if meta.len() > max {
        return Err(too_big());
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(too_big());
    }
    Ok(text)
}
