//! What an emulated link is: per direction a loss model, a queue, a rate (or a
//! delivery trace) and a propagation delay.

use longhaul_proto::{Bandwidth, Duration};

pub use longhaul_model::fifo::{DirectionConfig, LinkRate};
pub use longhaul_model::{LossModel, QueueLimit};

/// A whole emulated link: `up` carries client -> server, `down` server -> client.
#[derive(Debug, Clone, PartialEq)]
pub struct EmuConfig {
    /// Client to server.
    pub up: DirectionConfig,
    /// Server to client.
    pub down: DirectionConfig,
    /// Seeds both directions' loss RNGs (each direction draws its own stream).
    pub seed: u64,
    /// MTU of the TUN devices, bytes (within [`MTU_RANGE`]).
    pub mtu: u16,
}

/// The MTUs the emulated link takes, bytes: IPv4's minimum datagram to jumbo frames.
pub const MTU_RANGE: std::ops::RangeInclusive<u16> = 576..=9000;

impl EmuConfig {
    /// A symmetric link: `rate` and `delay` each way, Bernoulli loss `loss` each way,
    /// and a DropTail queue of one bandwidth-delay product (rate × round-trip time)
    /// in bytes, but never less than 16 full-sized packets.
    pub fn symmetric(rate: Bandwidth, delay: Duration, loss: f64, seed: u64) -> Self {
        let mtu = 1500u16;
        let queue = QueueLimit::Bytes(bdp_bytes(rate, delay + delay).max(16 * u64::from(mtu)));
        let loss = if loss > 0.0 {
            LossModel::Bernoulli { p: loss }
        } else {
            LossModel::None
        };
        let dir = DirectionConfig::fifo(LinkRate::Constant(rate), delay, loss, queue);
        EmuConfig {
            up: dir.clone(),
            down: dir,
            seed,
            mtu,
        }
    }

    /// Checks the configuration makes sense; says which field does not.
    pub fn validate(&self) -> Result<(), String> {
        for (name, d) in [("up", &self.up), ("down", &self.down)] {
            d.validate().map_err(|e| format!("{name}: {e}"))?;
            match d.queue {
                QueueLimit::Packets(0) | QueueLimit::Bytes(0) => {
                    return Err(format!(
                        "{name}: the queue limit must be at least one packet"
                    ))
                }
                QueueLimit::Bytes(b) if b < u64::from(self.mtu) => {
                    return Err(format!(
                        "{name}: a queue of {b} bytes cannot hold one {}-byte packet",
                        self.mtu
                    ))
                }
                _ => {}
            }
        }
        if !MTU_RANGE.contains(&self.mtu) {
            return Err(format!("mtu {} is outside {MTU_RANGE:?}", self.mtu));
        }
        Ok(())
    }
}

/// Bytes in flight on a path of `rate` and round-trip time `rtt`.
pub fn bdp_bytes(rate: Bandwidth, rtt: Duration) -> u64 {
    rate.bytes_in(rtt)
}
