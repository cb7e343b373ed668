//! What an emulated link is: per direction a loss model, a queue, a rate (or a
//! delivery trace) and a propagation delay.

use longhaul_proto::{Bandwidth, Duration};
use serde::Serialize;

use crate::trace::Trace;

/// How fast the bottleneck serialises packets.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkRate {
    /// A constant rate.
    Constant(Bandwidth),
    /// A mahimahi trace: 1500-byte delivery opportunities at given milliseconds.
    Trace(Trace),
}

impl LinkRate {
    /// The long-run rate: the constant, or the trace's mean.
    pub fn mean(&self) -> Bandwidth {
        match self {
            LinkRate::Constant(b) => *b,
            LinkRate::Trace(t) => t.mean_rate(),
        }
    }
}

/// Random loss before the queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum LossModel {
    /// No random loss.
    None,
    /// Each packet is lost with probability `p`, independently.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// The two-state Gilbert-Elliott chain: before each packet the chain moves from
    /// good to bad with probability `p` and from bad to good with probability `r`;
    /// the packet is then lost with probability `loss_good` or `loss_bad` (the
    /// classic Gilbert model is `loss_good = 0`, `loss_bad = 1`).
    GilbertElliott {
        /// P(good -> bad) per packet.
        p: f64,
        /// P(bad -> good) per packet.
        r: f64,
        /// Loss probability in the good state (1 - k).
        loss_good: f64,
        /// Loss probability in the bad state (1 - h).
        loss_bad: f64,
    },
}

impl LossModel {
    /// The stationary loss rate.
    pub fn mean(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                if p + r == 0.0 {
                    loss_good
                } else {
                    (r * loss_good + p * loss_bad) / (p + r)
                }
            }
        }
    }

    /// Checks every probability is in [0, 1].
    pub fn validate(&self) -> Result<(), String> {
        let probs: &[(&str, f64)] = match self {
            LossModel::None => &[],
            LossModel::Bernoulli { p } => &[("p", *p)],
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => &[
                ("p", *p),
                ("r", *r),
                ("loss_good", *loss_good),
                ("loss_bad", *loss_bad),
            ],
        };
        for (name, v) in probs {
            if !(0.0..=1.0).contains(v) {
                return Err(format!("loss {name} = {v} is not a probability in [0, 1]"));
            }
        }
        Ok(())
    }
}

/// The bottleneck queue's DropTail limit. The queue holds every packet that has not
/// finished serialisation, the one on the wire included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueLimit {
    /// At most this many packets.
    Packets(u32),
    /// At most this many bytes (IP packet lengths).
    Bytes(u64),
}

/// One direction of the link.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionConfig {
    /// Serialisation rate or trace.
    pub rate: LinkRate,
    /// One-way propagation delay, added after serialisation.
    pub delay: Duration,
    /// Random loss, applied on arrival.
    pub loss: LossModel,
    /// DropTail limit.
    pub queue: QueueLimit,
}

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
        let dir = DirectionConfig {
            rate: LinkRate::Constant(rate),
            delay,
            loss,
            queue,
        };
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
            d.loss.validate().map_err(|e| format!("{name}: {e}"))?;
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
