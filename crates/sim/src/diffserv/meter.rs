//! Meters and policers: what colour a packet is, from token buckets.
//!
//! - [`Car`]: Cisco's committed access rate. One bucket of depth Bc (the normal
//!   burst), filled at the rate; a packet that finds too few tokens may borrow
//!   them, up to the extended burst Be, under the compounded-debt rule.
//! - [`SrTcm`]: the single-rate three-colour marker of RFC 2697.
//! - [`TrTcm`]: the two-rate three-colour marker of RFC 2698.
//!
//! Buckets are refilled lazily on each packet from the time since the last one.

use longhaul_proto::{Bandwidth, Instant};

use super::nanobits;

/// A packet's colour: the outcome of a meter. For a two-action policer such as CAR,
/// green is "conform" and red "exceed".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Color {
    /// Within the committed rate and burst.
    Green,
    /// Within the excess burst (srTCM) or the peak rate (trTCM).
    Yellow,
    /// Beyond both.
    Red,
}

/// Whether a meter looks at the colour a packet already carries (RFC 2697 §3: a
/// colour-aware meter never promotes a packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every packet is treated as green on arrival.
    #[default]
    ColorBlind,
    /// A packet keeps at least its incoming colour.
    ColorAware,
}

/// A token bucket of `depth` nano-bits filled at `rate` bit/s, full at creation.
#[derive(Debug, Clone)]
struct Bucket {
    rate_bps: u128,
    depth: u128,
    tokens: u128,
}

impl Bucket {
    fn new(rate: Bandwidth, depth_bytes: u64) -> Self {
        let depth = nanobits(depth_bytes);
        Bucket {
            rate_bps: u128::from(rate.as_bps()),
            depth,
            tokens: depth,
        }
    }

    /// Adds `dt_ns` worth of tokens; returns what did not fit.
    fn fill(&mut self, dt_ns: u64) -> u128 {
        let add = self.rate_bps * u128::from(dt_ns);
        let room = self.depth - self.tokens;
        self.tokens += add.min(room);
        add.saturating_sub(room)
    }

    fn take(&mut self, cost: u128) -> bool {
        if self.tokens >= cost {
            self.tokens -= cost;
            true
        } else {
            false
        }
    }
}

/// Time since `last`, then `last = now`.
fn elapsed(last: &mut Instant, now: Instant) -> u64 {
    let dt = now.as_nanos().saturating_sub(last.as_nanos());
    *last = now.max(*last);
    dt
}

/// Cisco CAR: `rate`, normal burst Bc and extended burst Be (bytes, Be >= Bc).
///
/// ```text
/// tokens >= B            -> conform, tokens -= B
/// otherwise  a' = actual debt + (B - tokens),  c' = compounded debt + a'
///   Be == Bc or c' > Be  -> exceed; compounded debt = 0 (actual debt and tokens stay)
///   else                 -> conform; actual = a', compounded = c', tokens = 0
/// ```
///
/// Cisco's descriptions of CAR (committed access rate) give a worked example
/// (rate 1, Bc 2, Be 4, two 1-unit packets a tick: debts 1/1, 2/3, a drop leaving 2/0,
/// 3/3, a drop) that holds only if refills go to the tokens and not to the actual
/// debt while the bucket has room, so that is what this does: the debt is repaid only
/// by tokens that would overflow the bucket. Whether the compounded debt resets when
/// the actual debt is repaid is not stated; it is [`Car::reset_compounded_when_repaid`].
#[derive(Debug, Clone)]
pub struct Car {
    bucket: Bucket,
    extended: u128,
    actual_debt: u128,
    compounded_debt: u128,
    last: Instant,
    /// Reset the compounded debt when the actual debt reaches zero (default true).
    pub reset_compounded_when_repaid: bool,
}

impl Car {
    /// A policer with a full bucket at `now`.
    pub fn new(rate: Bandwidth, normal_burst: u64, extended_burst: u64, now: Instant) -> Self {
        Car {
            bucket: Bucket::new(rate, normal_burst),
            extended: nanobits(extended_burst.max(normal_burst)),
            actual_debt: 0,
            compounded_debt: 0,
            last: now,
            reset_compounded_when_repaid: true,
        }
    }

    /// Meters a packet of `bytes` at `now`: [`Color::Green`] (conform) or
    /// [`Color::Red`] (exceed).
    pub fn meter(&mut self, now: Instant, bytes: u64) -> Color {
        let overflow = self.bucket.fill(elapsed(&mut self.last, now));
        if self.actual_debt > 0 && overflow > 0 {
            self.actual_debt = self.actual_debt.saturating_sub(overflow);
            if self.actual_debt == 0 && self.reset_compounded_when_repaid {
                self.compounded_debt = 0;
            }
        }
        let cost = nanobits(bytes);
        if self.bucket.take(cost) {
            return Color::Green;
        }
        let actual = self.actual_debt + (cost - self.bucket.tokens);
        let compounded = self.compounded_debt + actual;
        if self.extended == self.bucket.depth || compounded > self.extended {
            self.compounded_debt = 0;
            Color::Red
        } else {
            self.actual_debt = actual;
            self.compounded_debt = compounded;
            self.bucket.tokens = 0;
            Color::Green
        }
    }

    /// (actual debt, compounded debt), bytes.
    pub fn debts_bytes(&self) -> (f64, f64) {
        let b = |x: u128| x as f64 / 8e9;
        (b(self.actual_debt), b(self.compounded_debt))
    }
}

/// RFC 2697's single-rate three-colour marker: CIR, CBS and EBS (bytes).
#[derive(Debug, Clone)]
pub struct SrTcm {
    /// `Tc`, filled at CIR up to CBS; what overflows fills `Te`.
    committed: Bucket,
    excess: Bucket,
    last: Instant,
    mode: Mode,
}

impl SrTcm {
    /// A marker with both buckets full at `now`.
    pub fn new(cir: Bandwidth, cbs: u64, ebs: u64, mode: Mode, now: Instant) -> Self {
        SrTcm {
            committed: Bucket::new(cir, cbs),
            // RFC 2697 §3: Te is refilled only by what overflows Tc, at the same rate.
            excess: Bucket::new(cir, ebs),
            last: now,
            mode,
        }
    }

    /// Colours a packet of `bytes` that arrived with colour `incoming` (ignored when
    /// colour-blind).
    pub fn meter(&mut self, now: Instant, bytes: u64, incoming: Color) -> Color {
        let dt = elapsed(&mut self.last, now);
        let overflow = self.committed.fill(dt);
        self.excess.tokens = (self.excess.tokens + overflow).min(self.excess.depth);
        let cost = nanobits(bytes);
        let incoming = match self.mode {
            Mode::ColorBlind => Color::Green,
            Mode::ColorAware => incoming,
        };
        if incoming == Color::Green && self.committed.take(cost) {
            Color::Green
        } else if incoming != Color::Red && self.excess.take(cost) {
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

/// RFC 2698's two-rate three-colour marker: PIR/PBS and CIR/CBS (bytes).
#[derive(Debug, Clone)]
pub struct TrTcm {
    peak: Bucket,
    committed: Bucket,
    last: Instant,
    mode: Mode,
}

impl TrTcm {
    /// A marker with both buckets full at `now`.
    pub fn new(
        pir: Bandwidth,
        pbs: u64,
        cir: Bandwidth,
        cbs: u64,
        mode: Mode,
        now: Instant,
    ) -> Self {
        TrTcm {
            peak: Bucket::new(pir, pbs),
            committed: Bucket::new(cir, cbs),
            last: now,
            mode,
        }
    }

    /// Colours a packet of `bytes` that arrived with colour `incoming` (ignored when
    /// colour-blind).
    pub fn meter(&mut self, now: Instant, bytes: u64, incoming: Color) -> Color {
        let dt = elapsed(&mut self.last, now);
        self.peak.fill(dt);
        self.committed.fill(dt);
        let cost = nanobits(bytes);
        let incoming = match self.mode {
            Mode::ColorBlind => Color::Green,
            Mode::ColorAware => incoming,
        };
        // RFC 2698 §3: red if Tp < B; else yellow if Tc < B (Tp -= B); else green
        // (both -= B). Colour-aware: a red packet stays red, a yellow one at most yellow.
        if incoming == Color::Red || self.peak.tokens < cost {
            Color::Red
        } else if incoming == Color::Yellow || self.committed.tokens < cost {
            self.peak.tokens -= cost;
            Color::Yellow
        } else {
            self.peak.tokens -= cost;
            self.committed.tokens -= cost;
            Color::Green
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Color::{Green as G, Red as R, Yellow as Y};

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// One "unit" is 1000 bytes and one "tick" 1 ms, so rate 1 is 8 Mb/s.
    const UNIT: u64 = 1000;

    fn rate(units_per_tick: u64) -> Bandwidth {
        Bandwidth::from_bps(units_per_tick * UNIT * 8 * 1000)
    }

    /// The worked example of `reference/protocol-specs.md` §4: rate 1, Bc 2, Be 4, two
    /// 1-unit packets a tick. The second packet of each tick borrows: debts 1/1, then
    /// 2/3, then a drop leaving 2/0, then 3/3, then another drop.
    #[test]
    fn car_worked_example() {
        let mut car = Car::new(rate(1), 2 * UNIT, 4 * UNIT, ms(0));
        let mut second = vec![];
        for tick in 0..6 {
            let first = car.meter(ms(tick), UNIT);
            assert_eq!(first, G, "tick {tick}: the first packet uses the refill");
            let c = car.meter(ms(tick), UNIT);
            let (a, k) = car.debts_bytes();
            second.push((c, (a / UNIT as f64) as u64, (k / UNIT as f64) as u64));
        }
        assert_eq!(
            second,
            [
                (G, 0, 0), // tick 0: the full bucket covers both
                (G, 1, 1),
                (G, 2, 3),
                (R, 2, 0),
                (G, 3, 3),
                (R, 3, 0),
            ]
        );
    }

    /// Be == Bc means no extended burst: what does not fit is dropped.
    #[test]
    fn car_without_extended_burst_is_a_plain_token_bucket() {
        let mut car = Car::new(rate(1), 2 * UNIT, 2 * UNIT, ms(0));
        let got: Vec<Color> = (0..4).map(|_| car.meter(ms(0), UNIT)).collect();
        assert_eq!(got, [G, G, R, R]);
        assert_eq!(car.meter(ms(1), UNIT), G, "one unit refilled after a tick");
        assert_eq!(car.meter(ms(1), UNIT), R);
        assert_eq!(car.debts_bytes(), (0.0, 0.0));
    }

    /// Tokens that overflow the bucket repay the actual debt; with the reset on, the
    /// compounded debt goes with it.
    #[test]
    fn car_debt_is_repaid_by_overflowing_tokens() {
        let mut car = Car::new(rate(1), 2 * UNIT, 4 * UNIT, ms(0));
        for _ in 0..3 {
            assert_eq!(car.meter(ms(0), UNIT), G);
        }
        assert_eq!(car.debts_bytes(), (UNIT as f64, UNIT as f64));
        // 3 ticks: 2 fill the bucket, the third repays the debt.
        assert_eq!(car.meter(ms(3), 0), G);
        assert_eq!(car.debts_bytes(), (0.0, 0.0));
    }

    /// srTCM colour-blind, CBS 2 and EBS 1 units, CIR 1 unit a tick: the buckets
    /// start full; Tc refills first and only its overflow reaches Te.
    #[test]
    fn srtcm_colour_blind_sequence() {
        let mut m = SrTcm::new(rate(1), 2 * UNIT, UNIT, Mode::ColorBlind, ms(0));
        let t0: Vec<Color> = (0..4).map(|_| m.meter(ms(0), UNIT, G)).collect();
        assert_eq!(t0, [G, G, Y, R], "Tc 2, then Te 1, then nothing");
        // One tick refills Tc by one unit; Te gets nothing until Tc is full.
        let t1: Vec<Color> = (0..2).map(|_| m.meter(ms(1), UNIT, G)).collect();
        assert_eq!(t1, [G, R]);
        // Three idle ticks: Tc fills to 2 and one unit overflows into Te.
        let t4: Vec<Color> = (0..4).map(|_| m.meter(ms(4), UNIT, G)).collect();
        assert_eq!(t4, [G, G, Y, R]);
        // A 3-unit packet fits neither bucket: red, and nothing is taken.
        assert_eq!(m.meter(ms(7), 3 * UNIT, G), R);
        assert_eq!(m.meter(ms(7), 2 * UNIT, G), G);
    }

    /// srTCM colour-aware: a yellow packet may only use Te, a red one nothing.
    #[test]
    fn srtcm_colour_aware_never_promotes() {
        let mut m = SrTcm::new(rate(1), 2 * UNIT, 2 * UNIT, Mode::ColorAware, ms(0));
        assert_eq!(m.meter(ms(0), UNIT, R), R);
        assert_eq!(m.meter(ms(0), UNIT, Y), Y);
        assert_eq!(m.meter(ms(0), UNIT, G), G);
        assert_eq!(m.meter(ms(0), UNIT, G), G);
        assert_eq!(
            m.meter(ms(0), UNIT, G),
            Y,
            "Tc empty: green falls back to Te"
        );
        assert_eq!(m.meter(ms(0), UNIT, Y), R, "Te empty too");
    }

    /// trTCM colour-blind, PIR 2/PBS 3, CIR 1/CBS 1 (units, per tick).
    #[test]
    fn trtcm_colour_blind_sequence() {
        let mut m = TrTcm::new(rate(2), 3 * UNIT, rate(1), UNIT, Mode::ColorBlind, ms(0));
        let t0: Vec<Color> = (0..4).map(|_| m.meter(ms(0), UNIT, G)).collect();
        // Green takes from both (Tp 2, Tc 0); then yellow from Tp (1, 0); (0, 0); red.
        assert_eq!(t0, [G, Y, Y, R]);
        // One tick: Tp +2, Tc +1.
        let t1: Vec<Color> = (0..4).map(|_| m.meter(ms(1), UNIT, G)).collect();
        assert_eq!(t1, [G, Y, R, R]);
        // Bigger than PBS: always red.
        assert_eq!(m.meter(ms(10), 4 * UNIT, G), R);
    }

    /// trTCM colour-aware: pre-coloured packets are never promoted, and a red one
    /// takes no tokens.
    #[test]
    fn trtcm_colour_aware_never_promotes() {
        let mut m = TrTcm::new(
            rate(2),
            2 * UNIT,
            rate(1),
            2 * UNIT,
            Mode::ColorAware,
            ms(0),
        );
        assert_eq!(m.meter(ms(0), UNIT, R), R);
        assert_eq!(m.meter(ms(0), UNIT, Y), Y);
        assert_eq!(m.meter(ms(0), UNIT, G), G);
        assert_eq!(m.meter(ms(0), UNIT, G), R, "Tp is empty");
    }
}
