//! Quantities as scenario files and command lines write them: `"1Gbps"`, `"50ms"`,
//! `"64MiB"`, `"1bdp"`. Each parser says what it expected when it fails.

use longhaul_proto::{Bandwidth, Duration};

use crate::queue::{QueueLimit, QueueSpec};

/// Splits `"12.5ms"` into `(12.5, "ms", true)`: the longest prefix that parses as a
/// number, and the rest. The flag is false when there is no number.
fn split(s: &str) -> (f64, &str, bool) {
    let s = s.trim();
    let end = (1..=s.len())
        .rev()
        .filter(|&i| s.is_char_boundary(i))
        .find(|&i| s[..i].parse::<f64>().is_ok());
    match end {
        Some(i) => (s[..i].parse().unwrap_or(f64::NAN), s[i..].trim(), true),
        None => (f64::NAN, s, false),
    }
}

/// The largest rate a scenario may give, bits per second.
const MAX_RATE_BPS: f64 = 1e15;

/// Parses a rate: a number and one of `bps`, `kbps`, `Mbps`, `Gbps`, `Tbps` (or the
/// `b/s` spellings), from 1 bps to 1000 Tbps.
pub fn parse_rate(s: &str) -> Result<Bandwidth, String> {
    let (n, unit, ok) = split(s);
    // Case matters: "MB/s" (bytes) and "mbps" (millibits) are not what anyone means.
    let unit = unit.replace("bit/s", "bps").replace("b/s", "bps");
    let mult = match unit.as_str() {
        "bps" => 1.0,
        "kbps" | "Kbps" => 1e3,
        "Mbps" => 1e6,
        "Gbps" => 1e9,
        "Tbps" => 1e12,
        _ => return Err(format!("`{s}` is not a rate: write a number and a unit, e.g. \"1Gbps\", \"250 Mbps\", \"56kbps\"")),
    };
    if !ok || n.is_nan() || n <= 0.0 || !(n * mult).is_finite() || n * mult < 1.0 {
        return Err(format!("`{s}` is not a positive rate of at least 1 bps"));
    }
    if n * mult > MAX_RATE_BPS {
        // Without this, the conversion below would saturate and the run would go
        // at some other rate than the one written.
        return Err(format!(
            "`{s}` is above the largest rate, 1000 Tbps (the clock ticks in nanoseconds: a \
             1500-byte packet takes 12 ns there)"
        ));
    }
    Ok(Bandwidth::from_bps((n * mult).round() as u64))
}

/// Parses a time: a number and one of `ns`, `us`, `ms`, `s`, `min`.
pub fn parse_time(s: &str) -> Result<Duration, String> {
    let (n, unit, ok) = split(s);
    let mult = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "min" => 60.0,
        _ => {
            return Err(format!(
                "`{s}` is not a time: write a number and a unit, e.g. \"50ms\", \"60s\", \"250us\""
            ))
        }
    };
    if !ok || n.is_nan() || n < 0.0 || n * mult > 1e9 {
        // (1e9 s, some 32 years, keeps nanosecond arithmetic far from overflow:
        // 1e18 ns, a tenth of what a u64 holds.)
        return Err(format!(
            "`{s}` is not a time from 0 to 1e9 s (about 32 years)"
        ));
    }
    Ok(Duration::from_nanos((n * mult * 1e9).round() as u64))
}

/// Parses a size: a number and one of `B`, `kB`, `MB`, `GB`, `TB` (powers of 1000) or
/// `KiB`, `MiB`, `GiB` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (n, unit, ok) = split(s);
    let mult = match unit {
        "B" | "bytes" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
            "`{s}` is not a size: write a number and a unit, e.g. \"55441B\", \"5GB\", \"64MiB\""
        ))
        }
    };
    if !ok || n.is_nan() || n < 0.0 || n * mult >= 1.8e19 {
        return Err(format!("`{s}` is not a non-negative size"));
    }
    Ok((n * mult).round() as u64)
}

/// Parses a queue limit: `"1bdp"` (bandwidth-delay products), `"100pkts"` (packets)
/// or a size (`"1MB"`).
pub fn parse_queue(s: &str) -> Result<QueueSpec, String> {
    let (n, unit, ok) = split(s);
    match unit.to_ascii_lowercase().as_str() {
        "bdp" if ok && n > 0.0 && n.is_finite() => Ok(QueueSpec::Bdp(n)),
        "pkts" | "packets" | "p" if ok && n >= 1.0 && n.fract() == 0.0 && n < 4e9 => {
            Ok(QueueSpec::Limit(QueueLimit::Packets(n as u32)))
        }
        _ => match parse_size(s) {
            Ok(b) if b > 0 => Ok(QueueSpec::Limit(QueueLimit::Bytes(b))),
            _ => Err(format!("`{s}` is not a queue limit: write e.g. \"1bdp\", \"0.5bdp\", \"100pkts\" or \"1MB\"")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1Gbps").unwrap().as_bps(), 1_000_000_000);
        assert_eq!(parse_rate("2.5 Mb/s").unwrap().as_bps(), 2_500_000);
        assert_eq!(parse_rate("28kbps").unwrap().as_bps(), 28_000);
        assert_eq!(
            parse_rate("1000Tbps").unwrap().as_bps(),
            1_000_000_000_000_000
        );
        // Above that the conversion to an integer saturated: refused, not run at
        // another rate.
        for s in ["1001Tbps", "1e30Gbps", "1e300bps"] {
            let e = parse_rate(s).unwrap_err();
            assert!(e.contains("largest rate"), "{s}: {e}");
        }
        assert!(parse_rate("1GB/s").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0Mbps").is_err());
        assert!(parse_rate("-3Mbps").is_err());
    }

    #[test]
    fn times_sizes_queues() {
        assert_eq!(parse_time("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_time("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_time("0s").unwrap(), Duration::ZERO);
        assert!(parse_time("50").is_err());
        // The documented limit is inclusive.
        assert_eq!(
            parse_time("1e9s").unwrap(),
            Duration::from_secs(1_000_000_000)
        );
        for bad in ["-5ms", "1e30s", "nanms", "1.000001e9s"] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains("from 0 to 1e9 s"), "{bad}: {e}");
        }
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("5GB").unwrap(), 5_000_000_000);
        assert_eq!(parse_size("1e3B").unwrap(), 1000);
        assert_eq!(parse_queue("1bdp").unwrap(), QueueSpec::Bdp(1.0));
        assert_eq!(
            parse_queue("100pkts").unwrap(),
            QueueSpec::Limit(QueueLimit::Packets(100))
        );
        assert_eq!(
            parse_queue("1MB").unwrap(),
            QueueSpec::Limit(QueueLimit::Bytes(1_000_000))
        );
        assert!(parse_queue("1.5pkts").is_err());
        assert!(parse_queue("lots").is_err());
    }
}
