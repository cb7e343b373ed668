//! The names users give protocols, congestion controls and profiles (scenario files, the
//! command line, summaries), defined once, beside the types they name: each named
//! type has `name()` and `FromStr`, and its list of names for error messages and
//! command-line choices.

use core::fmt;

use crate::blast::Scheme;
use crate::cc::{
    ArUdtConfig, BbrConfig, CcAlgorithm, CubicConfig, FastConfig, LhChanges, SpwScope, UdtConfig,
    UdtProfile,
};
use crate::rtt::RtoFormula;
use crate::sctp::SctpConfig;
use crate::tcp::{TcpConfig, Timestamps};
use crate::udt::RateControl;

/// A name that is not one of `expected`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// What was given.
    pub given: String,
    /// The names there are.
    pub expected: &'static [&'static str],
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown `{}`: use ", self.given)?;
        for (i, n) in self.expected.iter().enumerate() {
            let sep = match i {
                0 => "",
                i if i + 1 == self.expected.len() => " or ",
                _ => ", ",
            };
            write!(f, "{sep}\"{n}\"")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownName {}

fn unknown(given: &str, expected: &'static [&'static str]) -> UnknownName {
    UnknownName {
        given: given.to_string(),
        expected,
    }
}

/// The transport protocols a flow, a transfer's channels or a summary names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCP (this crate's engine in the simulator, the kernel's in real transfers).
    Tcp,
    /// Plain UDP datagrams (the simulator's constant-rate and Poisson sources).
    Udp,
    /// UDT over UDP.
    Udt,
    /// SCTP.
    Sctp,
    /// A UDP blast protocol with TCP control (RBUDP, Tsunami, SABUL).
    Blast(Scheme),
}

impl Protocol {
    /// Every protocol's name.
    pub const NAMES: &'static [&'static str] =
        &["tcp", "udp", "udt", "sctp", "rbudp", "tsunami", "sabul"];

    /// Its name.
    pub const fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Udt => "udt",
            Protocol::Sctp => "sctp",
            Protocol::Blast(s) => s.name(),
        }
    }
}

impl core::str::FromStr for Protocol {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "tcp" => Ok(Protocol::Tcp),
            "udp" => Ok(Protocol::Udp),
            "udt" => Ok(Protocol::Udt),
            "sctp" => Ok(Protocol::Sctp),
            _ => match s.parse() {
                Ok(b) => Ok(Protocol::Blast(b)),
                Err(_) => Err(unknown(s, Self::NAMES)),
            },
        }
    }
}

impl CcAlgorithm {
    /// The names of TCP's congestion controls (`"reno"` is read as NewReno too).
    pub const NAMES: &'static [&'static str] = &[
        "newreno", "cubic", "bbr", "bbr-v3", "bbr-lh", "hstcp", "scalable", "bic", "htcp",
        "illinois", "vegas", "fast", "westwood",
    ];

    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            CcAlgorithm::NewReno(_) => "newreno",
            CcAlgorithm::Cubic(_) => "cubic",
            CcAlgorithm::Bbr(c) => c.name(),
            CcAlgorithm::HighSpeed => "hstcp",
            CcAlgorithm::Scalable => "scalable",
            CcAlgorithm::Bic => "bic",
            CcAlgorithm::Htcp => "htcp",
            CcAlgorithm::Illinois => "illinois",
            CcAlgorithm::Vegas => "vegas",
            CcAlgorithm::Fast(_) => "fast",
            CcAlgorithm::Westwood => "westwood",
        }
    }
}

impl core::str::FromStr for CcAlgorithm {
    type Err = UnknownName;
    /// The algorithm of that name, with its default configuration.
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "newreno" | "reno" => Ok(CcAlgorithm::NewReno(Default::default())),
            "cubic" => Ok(CcAlgorithm::Cubic(CubicConfig::default())),
            "bbr" => Ok(CcAlgorithm::Bbr(BbrConfig::default())),
            "bbr-v3" => Ok(CcAlgorithm::Bbr(BbrConfig::v3_loss())),
            "bbr-lh" => Ok(CcAlgorithm::Bbr(BbrConfig::lh())),
            "hstcp" => Ok(CcAlgorithm::HighSpeed),
            "scalable" => Ok(CcAlgorithm::Scalable),
            "bic" => Ok(CcAlgorithm::Bic),
            "htcp" => Ok(CcAlgorithm::Htcp),
            "illinois" => Ok(CcAlgorithm::Illinois),
            "vegas" => Ok(CcAlgorithm::Vegas),
            "fast" => Ok(CcAlgorithm::Fast(FastConfig::default())),
            "westwood" | "westwood+" => Ok(CcAlgorithm::Westwood),
            _ => Err(unknown(s, Self::NAMES)),
        }
    }
}

impl RateControl {
    /// The names of UDT's rate controls.
    pub const NAMES: &'static [&'static str] = &["udt", "ar-udt", "bbr", "bbr-v3", "bbr-lh"];

    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            RateControl::Udt(_) => "udt",
            RateControl::ArUdt(..) => "ar-udt",
            RateControl::Bbr(c) => c.name(),
        }
    }

    /// The configuration of UDT's control it holds (AR-UDT's included); UDT's
    /// defaults with BBR's seed for BBR, which has none.
    pub fn udt_config(&self) -> UdtConfig {
        match *self {
            RateControl::Udt(c) | RateControl::ArUdt(c, _) => c,
            RateControl::Bbr(b) => UdtConfig {
                seed: b.seed,
                ..UdtConfig::default()
            },
        }
    }

    /// The rate control called `name`, UDT's configured with `udt`, AR-UDT's
    /// extra terms with their defaults, BBR seeded with UDT's seed.
    pub fn from_name(name: &str, udt: UdtConfig) -> Result<Self, UnknownName> {
        let bbr = |b: BbrConfig| BbrConfig {
            seed: udt.seed,
            ..b
        };
        match name {
            "udt" => Ok(RateControl::Udt(udt)),
            "ar-udt" => Ok(RateControl::ArUdt(udt, ArUdtConfig::default())),
            "bbr" => Ok(RateControl::Bbr(bbr(BbrConfig::default()))),
            "bbr-v3" => Ok(RateControl::Bbr(bbr(BbrConfig::v3_loss()))),
            "bbr-lh" => Ok(RateControl::Bbr(bbr(BbrConfig::lh()))),
            _ => Err(unknown(name, Self::NAMES)),
        }
    }
}

impl BbrConfig {
    /// The name of the preset this configuration is, or is closest to: `"bbr-lh"`
    /// with any of longhaul's changes, else `"bbr-v3"` with a loss bound, else
    /// `"bbr"`.
    pub fn name(&self) -> &'static str {
        if self.lh != LhChanges::NONE {
            "bbr-lh"
        } else if self.loss_threshold.is_some() {
            "bbr-v3"
        } else {
            "bbr"
        }
    }
}

impl UdtProfile {
    /// The names of UDT's profiles.
    pub const NAMES: &'static [&'static str] = &["udt4", "paper"];

    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            UdtProfile::Udt4 => "udt4",
            UdtProfile::Paper => "paper",
        }
    }
}

impl core::str::FromStr for UdtProfile {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "udt4" => Ok(UdtProfile::Udt4),
            "paper" => Ok(UdtProfile::Paper),
            _ => Err(unknown(s, Self::NAMES)),
        }
    }
}

impl SpwScope {
    /// The names of AR-UDT's PktSPW scopes.
    pub const NAMES: &'static [&'static str] = &["persistent", "syn"];
}

impl core::str::FromStr for SpwScope {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "persistent" => Ok(SpwScope::Persistent),
            "syn" => Ok(SpwScope::Syn),
            _ => Err(unknown(s, Self::NAMES)),
        }
    }
}

impl TcpConfig {
    /// The names of the TCP profiles.
    pub const PROFILES: &'static [&'static str] = &["default", "linux-2.6.15"];

    /// The profile called `name`.
    pub fn profile(name: &str) -> Result<Self, UnknownName> {
        match name {
            "default" => Ok(TcpConfig::default()),
            "linux-2.6.15" => Ok(TcpConfig::linux_2_6_15()),
            _ => Err(unknown(name, Self::PROFILES)),
        }
    }
}

impl SctpConfig {
    /// The names of the SCTP profiles: RFC 9260 as written, and the SCTP study's
    /// stack (lksctp in Linux 2.6.15: RFC 4960 with RFC 4460's errata).
    pub const PROFILES: &'static [&'static str] = &["rfc9260", "linux-2.6.15"];

    /// The profile called `name`.
    pub fn profile(name: &str) -> Result<Self, UnknownName> {
        match name {
            "rfc9260" => Ok(SctpConfig::RFC9260),
            "linux-2.6.15" => Ok(SctpConfig::LINUX_2_6_15),
            _ => Err(unknown(name, Self::PROFILES)),
        }
    }
}

impl Scheme {
    /// Every blast protocol's name.
    pub const NAMES: &'static [&'static str] = &["rbudp", "tsunami", "sabul"];

    /// Its name.
    pub const fn name(self) -> &'static str {
        match self {
            Scheme::Rbudp => "rbudp",
            Scheme::Tsunami => "tsunami",
            Scheme::Sabul => "sabul",
        }
    }
}

impl core::str::FromStr for Scheme {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "rbudp" => Ok(Scheme::Rbudp),
            "tsunami" => Ok(Scheme::Tsunami),
            "sabul" => Ok(Scheme::Sabul),
            _ => Err(unknown(s, Self::NAMES)),
        }
    }
}

impl RtoFormula {
    /// Every formula's name.
    pub const NAMES: &'static [&'static str] = &["rfc6298", "linux"];

    /// Its name.
    pub const fn name(self) -> &'static str {
        match self {
            RtoFormula::Rfc6298 => "rfc6298",
            RtoFormula::Linux => "linux",
        }
    }
}

impl core::str::FromStr for RtoFormula {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "rfc6298" => Ok(RtoFormula::Rfc6298),
            "linux" => Ok(RtoFormula::Linux),
            _ => Err(unknown(s, Self::NAMES)),
        }
    }
}

impl Timestamps {
    /// Every setting's name.
    pub const NAMES: &'static [&'static str] = &["linux", "rfc7323", "off"];

    /// Its name.
    pub const fn name(self) -> &'static str {
        match self {
            Timestamps::Linux => "linux",
            Timestamps::Rfc7323 => "rfc7323",
            Timestamps::Off => "off",
        }
    }
}

impl core::str::FromStr for Timestamps {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "linux" => Ok(Timestamps::Linux),
            "rfc7323" => Ok(Timestamps::Rfc7323),
            "off" => Ok(Timestamps::Off),
            _ => Err(unknown(s, Self::NAMES)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed name reads back as a value whose name is itself, and an unknown
    /// name's error lists them all.
    #[test]
    fn names_round_trip() {
        for n in CcAlgorithm::NAMES {
            assert_eq!(n.parse::<CcAlgorithm>().unwrap().name(), *n);
        }
        assert_eq!("reno".parse::<CcAlgorithm>().unwrap().name(), "newreno");
        for n in RateControl::NAMES {
            assert_eq!(
                RateControl::from_name(n, UdtConfig::default())
                    .unwrap()
                    .name(),
                *n
            );
        }
        for n in UdtProfile::NAMES {
            assert_eq!(n.parse::<UdtProfile>().unwrap().name(), *n);
        }
        for n in SpwScope::NAMES {
            assert!(n.parse::<SpwScope>().is_ok());
        }
        for n in RtoFormula::NAMES {
            assert_eq!(n.parse::<RtoFormula>().unwrap().name(), *n);
        }
        for n in Protocol::NAMES {
            assert_eq!(n.parse::<Protocol>().unwrap().name(), *n);
        }
        for n in TcpConfig::PROFILES {
            assert!(TcpConfig::profile(n).is_ok());
        }
        assert_eq!(
            TcpConfig::profile("linux-2.6.15").unwrap(),
            TcpConfig::linux_2_6_15()
        );
        for n in SctpConfig::PROFILES {
            assert!(SctpConfig::profile(n).is_ok());
        }
        let e = "compound".parse::<CcAlgorithm>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown `compound`: use \"newreno\", \"cubic\", \"bbr\", \"bbr-v3\", \"bbr-lh\", \"hstcp\", \"scalable\", \"bic\", \"htcp\", \"illinois\", \"vegas\", \"fast\" or \"westwood\""
        );
        for n in CcAlgorithm::NAMES {
            assert_eq!(n.parse::<CcAlgorithm>().unwrap().name(), *n);
        }
        for n in RateControl::NAMES {
            let rc = RateControl::from_name(n, UdtConfig::default()).unwrap();
            assert_eq!(rc.name(), *n);
        }
    }
}
