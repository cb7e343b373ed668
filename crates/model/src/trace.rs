//! mahimahi link traces: one line per 1500-byte delivery opportunity, giving the
//! millisecond at which it occurs. The trace repeats with a period of its last
//! timestamp; an opportunity nobody uses is lost (mahimahi's `link_queue.cc`).

use longhaul_proto::Bandwidth;

/// Bytes one delivery opportunity carries.
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// A parsed trace: opportunity times in ms, non-decreasing, and the period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    ms: Vec<u64>,
    period_ms: u64,
}

/// The longest trace period, ms. Opportunity times are reckoned in nanoseconds
/// over the whole run (`time_ns`): with a period near `u64::MAX` ms they wrapped,
/// and the search for the next opportunity could go round for ever.
const MAX_PERIOD_MS: u64 = 1_000_000_000;

impl Trace {
    /// Parses a trace file's text. Blank lines are skipped; anything else must be a
    /// non-negative integer not below the line before. `what` names the source in
    /// errors (a file name).
    pub fn parse(text: &str, what: &str) -> Result<Trace, String> {
        let mut ms = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let t: u64 = line.parse().map_err(|_| {
                format!(
                    "{what}:{}: `{line}` is not a whole number of milliseconds \
                     (a mahimahi trace has one per line)",
                    i + 1
                )
            })?;
            if let Some(&prev) = ms.last() {
                if t < prev {
                    return Err(format!(
                        "{what}:{}: {t} ms comes after {prev} ms; the times must not decrease",
                        i + 1
                    ));
                }
            }
            ms.push(t);
        }
        Trace::new(ms).map_err(|e| format!("{what}: {e}"))
    }

    /// A trace from opportunity times (ms, non-decreasing, last one > 0).
    pub fn new(ms: Vec<u64>) -> Result<Trace, String> {
        let Some(&period_ms) = ms.last() else {
            return Err("the trace has no delivery opportunities".into());
        };
        if period_ms == 0 {
            return Err("the trace's last time is 0 ms, so it has no period".into());
        }
        if ms.windows(2).any(|w| w[1] < w[0]) {
            return Err("the trace's times decrease".into());
        }
        if period_ms > MAX_PERIOD_MS {
            return Err(format!(
                "the trace's last time, {period_ms} ms, is beyond {MAX_PERIOD_MS} ms \
                 (11.6 days); a trace is a period of seconds to minutes"
            ));
        }
        Ok(Trace { ms, period_ms })
    }

    /// A constant-rate trace of one period, as `mm-rate-to-events` would write it:
    /// `rate` spread evenly over `period_ms` milliseconds.
    pub fn constant(rate: Bandwidth, period_ms: u64) -> Trace {
        let per_period = (rate.as_bps() as u128 * period_ms as u128
            / (8 * OPPORTUNITY_BYTES as u128 * 1000))
            .max(1) as u64;
        let ms = (1..=per_period)
            .map(|k| (k * period_ms).div_ceil(per_period))
            .collect();
        Trace {
            ms,
            period_ms: period_ms.max(1),
        }
    }

    /// Opportunities per period.
    pub fn len(&self) -> usize {
        self.ms.len()
    }

    /// Never true: a trace has at least one opportunity.
    pub fn is_empty(&self) -> bool {
        self.ms.is_empty()
    }

    /// The long-run rate the trace offers.
    pub fn mean_rate(&self) -> Bandwidth {
        let bits = self.ms.len() as u64 * OPPORTUNITY_BYTES * 8;
        Bandwidth::from_bps((bits * 1000 / self.period_ms).max(1))
    }

    /// Time of opportunity number `k` (counting over all repetitions), ns.
    pub fn time_ns(&self, k: u64) -> u64 {
        let n = self.ms.len() as u64;
        ((k / n) * self.period_ms + self.ms[(k % n) as usize]) * 1_000_000
    }

    /// The first opportunity at or after `ns`.
    pub fn first_at_or_after(&self, ns: u64) -> u64 {
        let n = self.ms.len() as u64;
        let ms = ns.div_ceil(1_000_000);
        let cycle = ms / self.period_ms;
        let within = ms % self.period_ms;
        // In this cycle, the first index whose time is >= within; past the end, the
        // next cycle's first.
        let i = self.ms.partition_point(|&t| t < within) as u64;
        let k = cycle * n + i;
        // Times equal to the period belong to the cycle before (mahimahi's wrap), so
        // step back while the previous opportunity is still not before `ns`.
        let mut k = k;
        while k > 0 && self.time_ns(k - 1) >= ns {
            k -= 1;
        }
        while self.time_ns(k) < ns {
            k += 1;
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_bad_lines() {
        let t = Trace::parse("1\n1\n\n3\n4\n", "x.trace").unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.mean_rate().as_bps(), 4 * 1500 * 8 * 1000 / 4);
        let e = Trace::parse("1\nfast\n", "x.trace").unwrap_err();
        assert!(e.contains("x.trace:2") && e.contains("fast"), "{e}");
        let e = Trace::parse("5\n3\n", "x.trace").unwrap_err();
        assert!(e.contains("x.trace:2") && e.contains("decrease"), "{e}");
        assert!(Trace::parse("", "x").unwrap_err().contains("no delivery"));
        assert!(Trace::parse("0\n0\n", "x").unwrap_err().contains("period"));
        let e = Trace::parse("1\n18446744073709551615\n", "x").unwrap_err();
        assert!(e.contains("beyond 1000000000 ms"), "{e}");
        assert!(Trace::parse("1\n1000000000\n", "x").is_ok());
    }

    #[test]
    fn times_repeat_with_the_period() {
        let t = Trace::new(vec![1, 1, 3, 4]).unwrap();
        let ms: Vec<u64> = (0..8).map(|k| t.time_ns(k) / 1_000_000).collect();
        assert_eq!(ms, [1, 1, 3, 4, 5, 5, 7, 8]);
        assert_eq!(t.first_at_or_after(0), 0);
        assert_eq!(t.first_at_or_after(1_000_000), 0);
        assert_eq!(t.first_at_or_after(1_000_001), 2);
        assert_eq!(t.first_at_or_after(4_000_000), 3);
        assert_eq!(t.first_at_or_after(4_000_001), 4);
        assert_eq!(t.first_at_or_after(7_500_000), 7);
        for ns in (0..20_000_000).step_by(250_000) {
            let k = t.first_at_or_after(ns);
            assert!(t.time_ns(k) >= ns);
            assert!(k == 0 || t.time_ns(k - 1) < ns, "ns {ns} k {k}");
        }
    }

    #[test]
    fn a_constant_trace_has_its_rate() {
        for mbps in [12, 100, 1000] {
            let t = Trace::constant(Bandwidth::from_mbps(mbps), 1000);
            let got = t.mean_rate().as_bps() as f64;
            assert!(
                (got / (mbps as f64 * 1e6) - 1.0).abs() < 0.01,
                "{mbps}: {got}"
            );
        }
    }
}
