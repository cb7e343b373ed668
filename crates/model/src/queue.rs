//! Queue limits: how much a link direction holds, counting every packet that has
//! not finished serialisation (the one on the wire included).

use serde::Serialize;

/// A DropTail limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueLimit {
    /// At most this many packets.
    Packets(u32),
    /// At most this many bytes (IP packet lengths).
    Bytes(u64),
}

/// A limit as written: fixed, or in bandwidth-delay products (resolved once the
/// path's round trip is known).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueSpec {
    /// A fixed limit.
    Limit(QueueLimit),
    /// `f` times the link's rate times the path's base RTT, in bytes.
    Bdp(f64),
}
