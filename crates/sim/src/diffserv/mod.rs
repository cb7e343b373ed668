//! DiffServ for routers: meters and policers ([`meter`]), ingress rules that classify,
//! meter and mark ([`policy`]), and egress schedulers ([`sched`]).
//!
//! What is here: Cisco CAR (a token bucket with normal and extended burst and the
//! compounded-debt rule), srTCM (RFC 2697) and trTCM (RFC 2698); first-match ingress
//! rules on addresses, protocol, ports and DSCP with per-colour actions (transmit,
//! re-mark, drop); a strict-priority queue policed at its rate only under congestion
//! (Cisco LLQ) in front of deficit round robin over classes with quanta proportional
//! to their bandwidth and per-class limits, DropTail or RED/WRED (the Assured
//! Forwarding PHB's drop precedences; the algorithm is `longhaul_model::red`). A [`crate::link::Link`] runs the
//! scheduler when its scenario gives it an `egress`; the simulation applies a node's
//! rules to packets arriving from links.
//!
//! What is not (yet): shaping, and ECN marking (the simulator's packets carry no ECN
//! field).
//! Everything here is a plain value driven with an explicit `now`, like the engines,
//! so it is tested on its own.

pub mod meter;
pub mod policy;
pub mod sched;

/// Token-bucket arithmetic in nano-bits: a rate in bit/s adds exactly `rate` units per
/// nanosecond and a packet of `b` bytes costs `8e9 * b`, so refills and debits are
/// exact integers whatever the rate and the time step.
pub(crate) fn nanobits(bytes: u64) -> u128 {
    u128::from(bytes) * 8_000_000_000
}
