//! Editing a scenario document before it is loaded: a value set at a dotted key
//! path (what a sweep's grid and variants do to their base scenario), and a flow
//! that stands for one per pair of a dumbbell expanded.

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

/// `per_pair = true` in a `[[flow]]` of a dumbbell stands for one such flow per pair,
/// `s<i>` to `r<i>`, in pair order (so a sweep over `topology.pairs` needs no list).
pub(super) fn expand_per_pair(doc: &mut toml::Value) -> Result<(), String> {
    let pairs = doc
        .get("topology")
        .filter(|t| t.get("kind").and_then(|k| k.as_str()) == Some("dumbbell"))
        .and_then(|t| t.get("pairs"))
        .and_then(|p| p.as_integer());
    let Some(flows) = doc.get_mut("flow").and_then(|f| f.as_array_mut()) else {
        return Ok(());
    };
    let mut out = Vec::with_capacity(flows.len());
    for (i, f) in flows.drain(..).enumerate() {
        let mut t = match f {
            toml::Value::Table(t) => t,
            other => {
                out.push(other);
                continue;
            }
        };
        match t.remove("per_pair") {
            None | Some(toml::Value::Boolean(false)) => out.push(toml::Value::Table(t)),
            Some(toml::Value::Boolean(true)) => {
                let Some(n) = pairs.filter(|&n| (1..=1000).contains(&n)) else {
                    return Err(format!(
                        "flow[{i}].per_pair needs a dumbbell topology with `pairs`"
                    ));
                };
                if t.contains_key("from") || t.contains_key("to") {
                    return Err(format!(
                        "flow[{i}]: `per_pair` sets `from` and `to` (s<i> to r<i>); remove them"
                    ));
                }
                for p in 0..n {
                    let mut c = t.clone();
                    c.insert("from".into(), toml::Value::String(format!("s{p}")));
                    c.insert("to".into(), toml::Value::String(format!("r{p}")));
                    out.push(toml::Value::Table(c));
                }
            }
            Some(_) => return Err(format!("flow[{i}].per_pair must be true or false")),
        }
    }
    *flows = out;
    Ok(())
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
