//! Shared helpers for the simulator's integration tests.

#![allow(dead_code)]

use std::path::Path;

use longhaul_sim::{simulate, RunResult, Scenario};

/// Parses scenario text (panicking with the loader's message if it is invalid).
pub fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, Path::new("<test>")).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs scenario text.
pub fn run(text: &str) -> RunResult {
    simulate(&scenario(text)).expect("run")
}

/// A chain: 10 Gb/s access, then a bottleneck with the given parameters.
pub fn chain(
    duration: &str,
    rate: &str,
    one_way: &str,
    queue: &str,
    loss: f64,
    flows: &str,
) -> String {
    format!(
        r#"
duration = "{duration}"
seed = 1
[topology]
kind = "chain"
[[topology.links]]
rate = "10Gbps"
delay = "0ms"
queue = "1bdp"
[[topology.links]]
rate = "{rate}"
delay = "{one_way}"
queue = "{queue}"
loss = {loss:e}
{flows}
[outputs]
plots = false
"#
    )
}
