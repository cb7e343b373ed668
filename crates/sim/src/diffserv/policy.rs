//! Ingress policies at a router: classify (match on addresses, protocol, ports and
//! DSCP), meter, then act per colour (transmit, mark or drop), like a Cisco
//! class-map / policy-map with `police` or `rate-limit` (CAR) on an input interface.
//!
//! Rules are tried in order; the first that matches decides. A packet no rule matches
//! passes unchanged. Each rule has one meter for all the packets it matches (an
//! aggregate, as CAR on an interface is).

use longhaul_proto::{Bandwidth, Instant};

use super::meter::{Car, Color, Mode, SrTcm, TrTcm};

/// What a rule matches; `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    /// IPv4 source address.
    pub src: Option<u32>,
    /// IPv4 destination address.
    pub dst: Option<u32>,
    /// IP protocol (6 TCP, 17 UDP).
    pub protocol: Option<u8>,
    /// Transport source port (TCP and UDP).
    pub src_port: Option<u16>,
    /// Transport destination port.
    pub dst_port: Option<u16>,
    /// DSCP on arrival.
    pub dscp: Option<u8>,
}

impl Match {
    /// Whether the packet with IPv4 header (and transport header after it) `hdr`
    /// matches.
    pub fn matches(&self, hdr: &[u8]) -> bool {
        let word = |i: usize| u32::from_be_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
        let port = |i: usize| hdr.get(i..i + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        let transport = matches!(hdr[9], 6 | 17);
        self.src.is_none_or(|a| word(12) == a)
            && self.dst.is_none_or(|a| word(16) == a)
            && self.protocol.is_none_or(|p| hdr[9] == p)
            && self.dscp.is_none_or(|d| hdr[1] >> 2 == d)
            && self
                .src_port
                .is_none_or(|p| transport && port(20) == Some(p))
            && self
                .dst_port
                .is_none_or(|p| transport && port(22) == Some(p))
    }
}

/// A meter's parameters (bursts in bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MeterSpec {
    /// Cisco CAR: rate, normal burst, extended burst (conform = green, exceed = red).
    Car {
        /// Committed rate.
        rate: Bandwidth,
        /// Normal burst.
        normal_burst: u64,
        /// Extended burst.
        extended_burst: u64,
    },
    /// RFC 2697.
    SrTcm {
        /// Committed information rate.
        cir: Bandwidth,
        /// Committed burst size.
        cbs: u64,
        /// Excess burst size.
        ebs: u64,
    },
    /// RFC 2698.
    TrTcm {
        /// Peak information rate.
        pir: Bandwidth,
        /// Peak burst size.
        pbs: u64,
        /// Committed information rate.
        cir: Bandwidth,
        /// Committed burst size.
        cbs: u64,
    },
}

/// What to do with a packet of a given colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send it on (with the rule's `set_dscp`, if any).
    Transmit,
    /// Send it on with this DSCP.
    Remark(u8),
    /// Drop it.
    Drop,
}

/// One rule.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    /// The node whose ingress applies it.
    pub node: usize,
    /// What it matches.
    pub matches: Match,
    /// The DSCP to set on transmitted packets (the marker).
    pub set_dscp: Option<u8>,
    /// The meter; without one every matched packet is green.
    pub meter: Option<MeterSpec>,
    /// Actions for green, yellow and red.
    pub actions: [Action; 3],
    /// Colour-aware metering (srTCM, trTCM): the DSCPs that arrive yellow and red;
    /// `None` is colour-blind.
    pub aware: Option<PreColors>,
}

/// Which incoming DSCPs carry which colour, for colour-aware meters (say AF12 and
/// AF13 as yellow and red).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreColors {
    /// DSCPs that arrive yellow.
    pub yellow: Vec<u8>,
    /// DSCPs that arrive red.
    pub red: Vec<u8>,
}

impl PreColors {
    fn of(&self, dscp: u8) -> Color {
        if self.red.contains(&dscp) {
            Color::Red
        } else if self.yellow.contains(&dscp) {
            Color::Yellow
        } else {
            Color::Green
        }
    }
}

#[derive(Debug, Clone)]
enum AnyMeter {
    Car(Car),
    SrTcm(SrTcm),
    TrTcm(TrTcm),
}

/// Counters of one rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuleStats {
    /// Packets matched, by colour (green, yellow, red).
    pub colored: [u64; 3],
    /// Packets dropped.
    pub dropped: u64,
}

/// A rule at run time.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Its parameters.
    pub spec: RuleSpec,
    meter: Option<AnyMeter>,
    /// Its counters.
    pub stats: RuleStats,
}

impl Rule {
    /// A rule with full buckets at `now`.
    pub fn new(spec: RuleSpec, now: Instant) -> Rule {
        let mode = if spec.aware.is_some() {
            Mode::ColorAware
        } else {
            Mode::ColorBlind
        };
        let meter = spec.meter.map(|m| match m {
            MeterSpec::Car {
                rate,
                normal_burst,
                extended_burst,
            } => AnyMeter::Car(Car::new(rate, normal_burst, extended_burst, now)),
            MeterSpec::SrTcm { cir, cbs, ebs } => {
                AnyMeter::SrTcm(SrTcm::new(cir, cbs, ebs, mode, now))
            }
            MeterSpec::TrTcm { pir, pbs, cir, cbs } => {
                AnyMeter::TrTcm(TrTcm::new(pir, pbs, cir, cbs, mode, now))
            }
        });
        Rule {
            spec,
            meter,
            stats: RuleStats::default(),
        }
    }

    /// Applies the rule to a matching packet of `bytes` (its IPv4 header in `hdr`):
    /// returns false if it is to be dropped; marks it otherwise.
    pub fn apply(&mut self, now: Instant, hdr: &mut [u8], bytes: u32) -> bool {
        let incoming = self
            .spec
            .aware
            .as_ref()
            .map_or(Color::Green, |c| c.of(hdr[1] >> 2));
        let color = match &mut self.meter {
            None => Color::Green,
            Some(AnyMeter::Car(m)) => m.meter(now, u64::from(bytes)),
            Some(AnyMeter::SrTcm(m)) => m.meter(now, u64::from(bytes), incoming),
            Some(AnyMeter::TrTcm(m)) => m.meter(now, u64::from(bytes), incoming),
        };
        let i = color as usize;
        self.stats.colored[i] += 1;
        let dscp = match self.spec.actions[i] {
            Action::Drop => {
                self.stats.dropped += 1;
                return false;
            }
            Action::Transmit => self.spec.set_dscp,
            Action::Remark(d) => Some(d),
        };
        if let Some(d) = dscp {
            // DSCP in the upper six bits of TOS, ECN kept. (The simulator does not
            // keep IP checksums on the hot path; pcap capture fills them in.)
            hdr[1] = (d << 2) | (hdr[1] & 3);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 + UDP header from 10.0.0.1:5000 to 10.0.0.3:9 with DSCP 0.
    fn udp_header() -> [u8; 28] {
        let mut h = [0u8; 28];
        h[0] = 0x45;
        h[9] = 17;
        h[12..16].copy_from_slice(&[10, 0, 0, 1]);
        h[16..20].copy_from_slice(&[10, 0, 0, 3]);
        h[20..22].copy_from_slice(&5000u16.to_be_bytes());
        h[22..24].copy_from_slice(&9u16.to_be_bytes());
        h
    }

    #[test]
    fn matching_on_each_field() {
        let h = udp_header();
        assert!(Match::default().matches(&h));
        let m = |f: fn(&mut Match)| {
            let mut x = Match::default();
            f(&mut x);
            x.matches(&h)
        };
        assert!(m(|x| x.src = Some(0x0a00_0001)));
        assert!(!m(|x| x.src = Some(0x0a00_0002)));
        assert!(m(|x| x.dst = Some(0x0a00_0003)));
        assert!(m(|x| x.protocol = Some(17)));
        assert!(!m(|x| x.protocol = Some(6)));
        assert!(m(|x| x.src_port = Some(5000)));
        assert!(m(|x| x.dst_port = Some(9)));
        assert!(!m(|x| x.dst_port = Some(10)));
        assert!(m(|x| x.dscp = Some(0)));
        assert!(!m(|x| x.dscp = Some(46)));
    }

    /// CAR at the edge: conforming packets are marked EF, exceeding ones dropped.
    #[test]
    fn car_marks_and_drops() {
        let spec = RuleSpec {
            node: 1,
            matches: Match::default(),
            set_dscp: Some(46),
            meter: Some(MeterSpec::Car {
                rate: Bandwidth::from_mbps(8),
                normal_burst: 2000,
                extended_burst: 2000,
            }),
            actions: [Action::Transmit, Action::Drop, Action::Drop],
            aware: None,
        };
        let mut r = Rule::new(spec, Instant::ZERO);
        let mut h = udp_header();
        h[1] = 0b0000_0001; // ECN bit set: it must survive the marking
        assert!(r.apply(Instant::ZERO, &mut h, 1000));
        assert_eq!(h[1], (46 << 2) | 1);
        assert!(r.apply(Instant::ZERO, &mut h, 1000));
        assert!(!r.apply(Instant::ZERO, &mut h, 1000), "bucket empty");
        // 1 ms at 8 Mb/s refills 1000 bytes.
        assert!(r.apply(Instant::from_nanos(1_000_000), &mut h, 1000));
        assert_eq!(r.stats.colored, [3, 0, 1]);
        assert_eq!(r.stats.dropped, 1);
    }

    /// srTCM with yellow re-marked (AF11 -> AF12, say) and red dropped.
    #[test]
    fn three_colour_actions() {
        let spec = RuleSpec {
            node: 1,
            matches: Match::default(),
            set_dscp: Some(10),
            meter: Some(MeterSpec::SrTcm {
                cir: Bandwidth::from_mbps(8),
                cbs: 1000,
                ebs: 1000,
            }),
            actions: [Action::Transmit, Action::Remark(12), Action::Drop],
            aware: None,
        };
        let mut r = Rule::new(spec, Instant::ZERO);
        let mut h = udp_header();
        assert!(r.apply(Instant::ZERO, &mut h, 1000));
        assert_eq!(h[1] >> 2, 10);
        assert!(r.apply(Instant::ZERO, &mut h, 1000));
        assert_eq!(h[1] >> 2, 12);
        assert!(!r.apply(Instant::ZERO, &mut h, 1000));
        assert_eq!(r.stats.colored, [1, 1, 1]);
    }

    /// Colour-aware: a packet arriving as AF12 (yellow) is never coloured green, even
    /// with tokens to spare.
    #[test]
    fn colour_aware_rule_keeps_incoming_colours() {
        let spec = RuleSpec {
            node: 1,
            matches: Match::default(),
            set_dscp: None,
            meter: Some(MeterSpec::TrTcm {
                pir: Bandwidth::from_mbps(8),
                pbs: 10_000,
                cir: Bandwidth::from_mbps(8),
                cbs: 10_000,
            }),
            actions: [Action::Transmit, Action::Remark(12), Action::Drop],
            aware: Some(PreColors {
                yellow: vec![12],
                red: vec![14],
            }),
        };
        let mut r = Rule::new(spec, Instant::ZERO);
        let mut h = udp_header();
        h[1] = 12 << 2;
        assert!(r.apply(Instant::ZERO, &mut h, 1000));
        h[1] = 14 << 2;
        assert!(!r.apply(Instant::ZERO, &mut h, 1000));
        h[1] = 10 << 2;
        assert!(r.apply(Instant::ZERO, &mut h, 1000));
        assert_eq!(r.stats.colored, [1, 1, 1]);
    }
}
