//! Blast flows (`protocol = "rbudp" | "tsunami" | "sabul"`): a file of `size`
//! bytes, data over UDP at a `rate`, control over the simulator's TCP.

use longhaul_model::units::{parse_rate, parse_size};
use longhaul_proto::blast::{BlastConfig, Scheme};
use longhaul_proto::tcp::TcpConfig;
use longhaul_proto::{Bandwidth, Instant};

use super::schema::BlastFlowFile;
use super::{Loader, ScenarioError};
use crate::app::BlastFlowSpec;

/// The largest file one blast flow moves: block numbers are 32 bits.
const MAX_BLOCKS: u64 = u32::MAX as u64;

impl Loader<'_> {
    pub(super) fn blast_flow(
        &self,
        key: &str,
        scheme: Scheme,
        b: &BlastFlowFile,
        from: usize,
        to: usize,
        start: Instant,
    ) -> Result<BlastFlowSpec, ScenarioError> {
        let k = |f: &str| format!("{key}.{f}");
        let name = scheme.name();
        let size = match &b.size {
            None => {
                return Err(self.err(
                    k("size"),
                    format!("{name} moves a file: give its size (\"100MB\")"),
                ))
            }
            Some(s) => match parse_size(s) {
                Ok(0) => return Err(self.err(k("size"), "must be above zero")),
                Ok(n) => n,
                Err(m) => return Err(self.err(k("size"), m)),
            },
        };
        let rate = match (&b.rate, scheme) {
            (Some(r), _) => parse_rate(r).map_err(|m| self.err(k("rate"), m))?,
            // SABUL's release: 10 us between 1500-byte packets at its fastest.
            (None, Scheme::Sabul) => Bandwidth::from_bps(1_200_000_000),
            (None, _) => {
                return Err(self.err(
                    k("rate"),
                    format!(
                        "{name} sends at a rate the user sets: give one (\"950Mbps\"), a \
                         little below the path's bottleneck"
                    ),
                ))
            }
        };
        if rate.as_bps() == 0 {
            return Err(self.err(k("rate"), "must be above zero"));
        }
        let mut c = BlastConfig::new(scheme, size, rate);
        if let Some(d) = b.datagram {
            if !(64..=65507).contains(&d) {
                return Err(self.err(
                    k("datagram"),
                    "must be from 64 to 65507 bytes (a UDP payload, its 8-byte block header included)",
                ));
            }
            c.datagram = d;
        }
        if c.size.div_ceil(c.block_len()) > MAX_BLOCKS {
            return Err(self.err(
                k("size"),
                "is more than 2^32 blocks: use a larger datagram or split the file",
            ));
        }
        let only = |field: &str, set: bool, s: Scheme| {
            if set && scheme != s {
                Err(self.err(
                    k(field),
                    format!("applies to protocol = \"{}\" only", s.name()),
                ))
            } else {
                Ok(())
            }
        };
        only("error_rate", b.error_rate.is_some(), Scheme::Tsunami)?;
        only("update", b.update.is_some(), Scheme::Tsunami)?;
        only("window", b.window.is_some(), Scheme::Sabul)?;
        if let Some(e) = b.error_rate {
            if !(0.0..100.0).contains(&e) {
                return Err(self.err(
                    k("error_rate"),
                    format!("is {e}; need a percentage from 0 to below 100"),
                ));
            }
            c.tsunami.error_rate = (e * 1000.0).round() as u32;
        }
        if let Some(u) = &b.update {
            let d = self.time(&k("update"), u)?;
            if d.is_zero() {
                return Err(self.err(k("update"), "must be above zero"));
            }
            c.tsunami.update = d;
        }
        if let Some(w) = b.window {
            if w < 2 {
                return Err(self.err(k("window"), "must be at least 2 blocks"));
            }
            c.sabul.window = w;
        }
        Ok(BlastFlowSpec {
            from,
            to,
            config: c,
            control: TcpConfig::default(),
            start,
        })
    }
}
