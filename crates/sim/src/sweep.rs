//! Sweeps: a base scenario and a grid of parameter values, one run per point.
//!
//! ```toml
//! # sweep.toml, beside the base scenario
//! scenario = "base.toml"
//! [grid]
//! "topology.links.1.delay" = ["10ms", "50ms"]
//! seed = [1, 2, 3]
//!
//! [[variant]]                      # optional: named edits, each crossed with the grid
//! name = "tcp"
//! "flow.0" = { protocol = "tcp", cc = "cubic" }
//! [[variant]]
//! name = "ar-udt"
//! "flow.0" = { protocol = "udt", cc = "ar-udt" }
//! ```
//! Keys are dotted paths into the base document (array elements by index); a value
//! replaces what is there, tables included. Points are the cartesian product of the
//! grid, in the order of the sorted keys, for each variant in turn; each point is an
//! independent, seeded run, so the results do not depend on how many threads run them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::scenario::{Scenario, ScenarioError};

/// Sets the value at dotted `path` in a TOML document, creating tables as needed.
pub fn set_path(doc: &mut toml::Value, path: &str, value: toml::Value) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = doc;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        cur = match cur {
            toml::Value::Table(t) => {
                if last {
                    t.insert(part.to_string(), value);
                    return Ok(());
                }
                t.entry(part.to_string())
                    .or_insert_with(|| toml::Value::Table(Default::default()))
            }
            toml::Value::Array(a) => {
                let idx: usize = part
                    .parse()
                    .map_err(|_| format!("`{path}`: `{part}` must be an index into an array"))?;
                let len = a.len();
                let slot = a.get_mut(idx).ok_or_else(|| {
                    format!("`{path}`: index {idx} is past the end (length {len})")
                })?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            _ => {
                return Err(format!(
                    "`{path}`: `{}` is not a table or an array",
                    parts[..i].join(".")
                ))
            }
        };
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    scenario: String,
    name: Option<String>,
    #[serde(default)]
    grid: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    variant: Vec<toml::Table>,
}

/// A dotted path and the value to put there.
type Edit = (String, toml::Value);

/// One point of a sweep.
#[derive(Debug, Clone)]
pub struct Point {
    /// The parameter values of this point, by key.
    pub params: Vec<(String, toml::Value)>,
    /// The scenario with those values applied.
    pub scenario: Scenario,
}

/// A loaded sweep, every point validated.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Name (for the output folder).
    pub name: String,
    /// The points, in grid order.
    pub points: Vec<Point>,
}

impl Sweep {
    /// Loads `sweep.toml` and validates every point before anything runs.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let io = |p: &Path| {
            let p = p.to_owned();
            move |source| ScenarioError::Io { path: p, source }
        };
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let syntax = |m: String| ScenarioError::Syntax {
            path: path.to_owned(),
            message: m,
        };
        let file: SweepFile = toml::from_str(&text).map_err(|e| syntax(e.to_string()))?;
        let base_path: PathBuf = path.parent().unwrap_or(Path::new(".")).join(&file.scenario);
        let base_text = std::fs::read_to_string(&base_path).map_err(io(&base_path))?;
        let base: toml::Value = toml::from_str(&base_text).map_err(|e| ScenarioError::Syntax {
            path: base_path.clone(),
            message: e.to_string(),
        })?;
        for (k, vals) in &file.grid {
            if vals.is_empty() {
                return Err(ScenarioError::Invalid {
                    path: path.to_owned(),
                    key: format!("grid.{k}"),
                    message: "needs at least one value".into(),
                });
            }
        }
        // Variants: named sets of edits (e.g. one per protocol), each crossed with the
        // grid. Without any, there is one unnamed variant that edits nothing.
        let mut variants: Vec<(Option<String>, Vec<Edit>)> = vec![];
        for (i, v) in file.variant.iter().enumerate() {
            let name = match v.get("name") {
                Some(toml::Value::String(n)) => n.clone(),
                _ => {
                    return Err(ScenarioError::Invalid {
                        path: path.to_owned(),
                        key: format!("variant[{i}].name"),
                        message: "every [[variant]] needs a name (a string)".into(),
                    })
                }
            };
            let edits = v
                .iter()
                .filter(|(k, _)| *k != "name")
                .map(|(k, x)| (k.clone(), x.clone()))
                .collect();
            variants.push((Some(name), edits));
        }
        if variants.is_empty() {
            variants.push((None, vec![]));
        }
        let grid_points: usize = file.grid.values().map(Vec::len).product();
        let total = grid_points * variants.len();
        if total > 100_000 {
            return Err(ScenarioError::Invalid {
                path: path.to_owned(),
                key: "grid".into(),
                message: format!("{total} points is too many (at most 100000)"),
            });
        }
        let mut points = Vec::with_capacity(total);
        for n in 0..total {
            let (variant_name, edits) = &variants[n / grid_points];
            let mut rest = n % grid_points;
            let mut doc = base.clone();
            let mut params = vec![];
            if let Some(name) = variant_name {
                params.push(("variant".to_string(), toml::Value::String(name.clone())));
            }
            for (k, v) in edits {
                set_path(&mut doc, k, v.clone()).map_err(|m| ScenarioError::Invalid {
                    path: path.to_owned(),
                    key: format!("variant.{k}"),
                    message: m,
                })?;
            }
            // Last key varies fastest.
            let keys: Vec<_> = file.grid.iter().collect();
            let mut idx = vec![0; keys.len()];
            for (i, (_, vals)) in keys.iter().enumerate().rev() {
                idx[i] = rest % vals.len();
                rest /= vals.len();
            }
            for (i, (k, vals)) in keys.iter().enumerate() {
                let v = vals[idx[i]].clone();
                set_path(&mut doc, k, v.clone()).map_err(|m| ScenarioError::Invalid {
                    path: path.to_owned(),
                    key: format!("grid.{k}"),
                    message: m,
                })?;
                params.push(((*k).clone(), v));
            }
            let label = format!(
                "{} (sweep point {n}: {})",
                base_path.display(),
                describe(&params)
            );
            let scenario = Scenario::from_value(doc, Path::new(&label))?;
            points.push(Point { params, scenario });
        }
        let name = file.name.unwrap_or_else(|| {
            path.parent()
                .and_then(|p| p.file_name())
                .map_or("sweep".into(), |s| s.to_string_lossy().into_owned())
        });
        Ok(Sweep { name, points })
    }
}

/// `key=value, key=value` for labels and CSV.
pub fn describe(params: &[(String, toml::Value)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={}", value_str(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A TOML value as plain text (strings without quotes).
pub fn value_str(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_path_in_tables_and_arrays() {
        let mut v: toml::Value = toml::from_str("a = 1\n[[l]]\nx = 1\n[[l]]\nx = 2\n").unwrap();
        set_path(&mut v, "l.1.x", toml::Value::Integer(5)).unwrap();
        set_path(&mut v, "t.y", toml::Value::Integer(6)).unwrap();
        assert_eq!(v["l"][1]["x"].as_integer(), Some(5));
        assert_eq!(v["t"]["y"].as_integer(), Some(6));
        assert!(set_path(&mut v, "l.9.x", toml::Value::Integer(5))
            .unwrap_err()
            .contains("past the end"));
        assert!(set_path(&mut v, "a.b", toml::Value::Integer(5)).is_err());
    }
}
