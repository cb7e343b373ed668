//! A link whose parameters change over time: steps of rate, one-way delay and
//! loss at given times, as Pantheon's calibrated emulators and mahimahi's traces
//! vary a path. Written as a TOML file:
//!
//! ```toml
//! # Each step applies to both directions unless `direction` says "up" or "down".
//! [[step]]
//! at = "10s"          # since the run began
//! rate = "50Mbps"
//! delay = "40ms"      # one way
//! loss = "1e-3"       # as --loss: a probability or ge:P,R[,LG,LB]
//!
//! [[step]]
//! at = "20s"
//! rate = "100Mbps"
//! direction = "up"
//! ```
//!
//! A step changes only the keys it names. The queue is not re-sized: a queue given
//! in bandwidth-delay products keeps the size it had at the start.

use longhaul_proto::{Bandwidth, Duration};

use crate::units::{parse_rate, parse_time};
use crate::LossModel;

/// One change of a direction's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// When it takes effect, since the run began.
    pub at: Duration,
    /// The new serialisation rate (a constant-rate link only).
    pub rate: Option<Bandwidth>,
    /// The new one-way propagation delay.
    pub delay: Option<Duration>,
    /// The new loss model.
    pub loss: Option<LossModel>,
}

/// Both directions' steps, each in time order: `[up, down]`.
pub type Steps = [Vec<Step>; 2];

/// Reads a schedule file's text; errors name the step and key and say what to
/// write instead.
pub fn parse(text: &str) -> Result<Steps, String> {
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut out: Steps = [vec![], vec![]];
    for key in doc.keys() {
        if key != "step" {
            return Err(format!(
                "unknown key `{key}`: a schedule is a list of [[step]] tables"
            ));
        }
    }
    let Some(steps) = doc.get("step") else {
        return Err("no [[step]] tables: a schedule needs at least one step".into());
    };
    let steps = steps
        .as_array()
        .ok_or("`step` must be an array of tables: write [[step]]")?;
    for (i, s) in steps.iter().enumerate() {
        let n = i + 1;
        let t = s
            .as_table()
            .ok_or_else(|| format!("step {n} is not a table: write [[step]]"))?;
        let text_of = |key: &str| -> Result<Option<String>, String> {
            match t.get(key) {
                None => Ok(None),
                Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                Some(toml::Value::Float(f)) => Ok(Some(f.to_string())),
                Some(toml::Value::Integer(i)) => Ok(Some(i.to_string())),
                Some(v) => Err(format!(
                    "step {n}: `{key}` is {}, write a string such as \"10s\"",
                    v.type_str()
                )),
            }
        };
        let mut step = Step {
            at: Duration::ZERO,
            rate: None,
            delay: None,
            loss: None,
        };
        let mut dirs = [true, true];
        for key in t.keys() {
            let v = text_of(key)?.unwrap_or_default();
            let bad = |e: String| format!("step {n}: `{key}`: {e}");
            match key.as_str() {
                "at" => step.at = parse_time(&v).map_err(bad)?,
                "rate" => step.rate = Some(parse_rate(&v).map_err(bad)?),
                "delay" => step.delay = Some(parse_time(&v).map_err(bad)?),
                "loss" => step.loss = Some(LossModel::parse(&v).map_err(bad)?),
                "direction" => {
                    dirs = match v.as_str() {
                        "both" => [true, true],
                        "up" => [true, false],
                        "down" => [false, true],
                        _ => return Err(bad("write \"up\", \"down\" or \"both\"".into())),
                    }
                }
                _ => {
                    return Err(format!(
                        "step {n}: unknown key `{key}` (a step takes at, rate, delay, \
                         loss, direction)"
                    ))
                }
            }
        }
        if !t.contains_key("at") {
            return Err(format!("step {n} has no `at`: write e.g. at = \"10s\""));
        }
        if step.rate.is_none() && step.delay.is_none() && step.loss.is_none() {
            return Err(format!(
                "step {n} changes nothing: give rate, delay or loss"
            ));
        }
        for (d, on) in dirs.iter().enumerate() {
            if *on {
                if out[d].last().is_some_and(|p: &Step| p.at > step.at) {
                    return Err(format!(
                        "step {n} at {:?} comes before the step above it: list steps in \
                         time order",
                        step.at
                    ));
                }
                out[d].push(step);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_steps_per_direction() {
        let s = parse(
            r#"
            [[step]]
            at = "1s"
            rate = "50Mbps"
            loss = 0.01
            [[step]]
            at = "2s"
            delay = "5ms"
            direction = "down"
            "#,
        )
        .unwrap();
        assert_eq!(s[0].len(), 1);
        assert_eq!(s[1].len(), 2);
        assert_eq!(s[0][0].rate, Some(Bandwidth::from_mbps(50)));
        assert_eq!(s[0][0].loss, Some(LossModel::Bernoulli { p: 0.01 }));
        assert_eq!(s[1][1].delay, Some(Duration::from_millis(5)));
    }

    #[test]
    fn errors_name_the_step_and_key() {
        let e = parse("[[step]]\nat = \"1s\"\nrate = \"fast\"\n").unwrap_err();
        assert!(e.contains("step 1") && e.contains("`rate`"), "{e}");
        let e = parse("[[step]]\nat = \"1s\"\nbandwidth = \"1Gbps\"\n").unwrap_err();
        assert!(e.contains("unknown key `bandwidth`"), "{e}");
        let e = parse(
            "[[step]]\nat = \"2s\"\nrate = \"1Gbps\"\n[[step]]\nat = \"1s\"\nrate = \"1Gbps\"\n",
        )
        .unwrap_err();
        assert!(e.contains("time order"), "{e}");
        assert!(parse("[[step]]\nat = \"1s\"\n")
            .unwrap_err()
            .contains("changes nothing"));
        assert!(parse("").unwrap_err().contains("no [[step]]"));
    }
}
