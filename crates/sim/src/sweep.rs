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
//!
//! An optional `[report]` says what to draw and tabulate beyond `sweep.csv` and the
//! goodput table of `results.md` (see [`Report`]):
//!
//! ```toml
//! [report]
//! labels = { "topology.links.1.delay" = "one-way delay" }  # names for titles and files
//! timeseries = { "topology.links.1.loss" = 0.0 }  # goodput vs time at these points
//! x = "topology.links.1.loss"       # goodput vs this grid key, one plot per other value
//! log_x = true
//! warmup = "6s"                     # left out of the stability figure
//! average = "seed"                  # a grid key averaged over (not a row of its own)
//! flows = { EF = 0, BE = 1 }        # report these flows one by one, not the total
//! metrics = ["goodput", "loss"]     # ... with these figures
//! together = [["goodput", "mathis"]] # also drawn in one plot
//! preface = "The paper saw ..."     # markdown at the top of results.md
//! source = "Paper, Figs. 7-10"      # where the published figures come from
//! [[report.expected]]               # a published figure per variant at a grid point
//! point = { "topology.links.1.delay" = "0.5ms", "topology.links.1.loss" = 0.0 }
//! values = { tcp = 953, udt = 908 }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::scenario::{set_path, Scenario, ScenarioError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    scenario: String,
    name: Option<String>,
    #[serde(default)]
    grid: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    variant: Vec<toml::Table>,
    report: Option<ReportFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportFile {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    timeseries: Option<toml::Table>,
    x: Option<String>,
    #[serde(default)]
    log_x: bool,
    warmup: Option<String>,
    source: Option<String>,
    #[serde(default)]
    expected: Vec<ExpectedFile>,
    #[serde(default)]
    flows: BTreeMap<String, usize>,
    #[serde(default)]
    metrics: Vec<String>,
    average: Option<String>,
    #[serde(default)]
    together: Vec<Vec<String>>,
    preface: Option<String>,
    gain: Option<GainFile>,
    #[serde(default)]
    rounds: bool,
    #[serde(default)]
    by_variant: bool,
    #[serde(default)]
    best: bool,
    #[serde(default)]
    published_best: Vec<PublishedBestFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishedBestFile {
    variant: String,
    label: String,
    x: f64,
    value: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GainFile {
    of: String,
    over: String,
}

/// A per-flow figure the report can tabulate and plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Goodput, Mb/s.
    Goodput,
    /// Loss rate (UDP).
    Loss,
    /// Completion time of a finite transfer, s.
    Completion,
    /// Mean one-way delay, ms (UDP).
    MeanDelay,
    /// Largest one-way delay, ms (UDP).
    MaxDelay,
    /// First to last data packet at the receiver, s (the SCTP study's transfer time).
    TransferTime,
    /// Bytes sent in the first slow-start round: what the initial window carried.
    FirstRound,
    /// Snoop's mean local (wireless) RTT, ms.
    SnoopRtt,
    /// Snoop's mean local RTO, ms.
    SnoopRto,
    /// Segments Snoop retransmitted locally.
    LocalRetransmits,
    /// The Mathis bound with delayed ACKs, `0.866 * B / (R * sqrt(p))` in Mb/s, as the
    /// DiffServ study computes it: B = 1000 bytes, R the flow's smoothed RTT, p its
    /// retransmitted share of segments, and 1e-6 where p = 0 (TCP).
    Mathis,
}

impl Metric {
    const ALL: [(&'static str, Metric); 11] = [
        ("goodput", Metric::Goodput),
        ("loss", Metric::Loss),
        ("completion", Metric::Completion),
        ("transfer_time", Metric::TransferTime),
        ("first_round", Metric::FirstRound),
        ("snoop_rtt", Metric::SnoopRtt),
        ("snoop_rto", Metric::SnoopRto),
        ("local_retransmits", Metric::LocalRetransmits),
        ("mean_delay", Metric::MeanDelay),
        ("max_delay", Metric::MaxDelay),
        ("mathis", Metric::Mathis),
    ];

    /// Its name in sweep files and file names.
    pub fn name(self) -> &'static str {
        Metric::ALL
            .iter()
            .find(|m| m.1 == self)
            .map_or("?", |m| m.0)
    }

    /// Whether it is a time, where lower is better (what `report.gain` compares).
    pub fn is_time(self) -> bool {
        matches!(
            self,
            Metric::Completion | Metric::TransferTime | Metric::MeanDelay | Metric::MaxDelay
        )
    }

    /// What it measures, with its unit.
    pub fn describe(self) -> &'static str {
        match self {
            Metric::Goodput => "goodput (Mb/s)",
            Metric::Loss => "loss rate",
            Metric::Completion => "completion time (s)",
            Metric::TransferTime => "transfer time, first to last data packet (s)",
            Metric::FirstRound => "bytes sent in the first round",
            Metric::SnoopRtt => "Snoop's local RTT (ms)",
            Metric::SnoopRto => "Snoop's local RTO (ms)",
            Metric::LocalRetransmits => "local retransmissions by Snoop",
            Metric::MeanDelay => "mean one-way delay (ms)",
            Metric::MaxDelay => "largest one-way delay (ms)",
            Metric::Mathis => "Mathis bound (Mb/s)",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedFile {
    point: toml::Table,
    values: BTreeMap<String, f64>,
}

/// What a sweep's report draws and tabulates.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Display names of grid keys, for titles and file names.
    pub labels: BTreeMap<String, String>,
    /// Grid values picking the points whose goodput-against-time is drawn (one plot per
    /// point, one line per variant); `None`: no such plots; empty: every point.
    pub timeseries: Option<Vec<(String, toml::Value)>>,
    /// The grid key on the x axis of the goodput-against-parameter plots.
    pub x: Option<String>,
    /// Whether that axis is logarithmic (points at x <= 0 are then left out).
    pub log_x: bool,
    /// Time at the start of each run left out of the stability figure, seconds.
    pub warmup_s: f64,
    /// Where the published figures come from.
    pub source: Option<String>,
    /// Published figures.
    pub expected: Vec<Expected>,
    /// Flows reported one by one (label, index), instead of the total goodput.
    pub flows: Vec<(String, usize)>,
    /// What is tabulated and plotted for those flows (default: goodput).
    pub metrics: Vec<Metric>,
    /// A grid key (such as `seed`) whose points are averaged into one.
    pub average: Option<String>,
    /// Metrics also drawn together, one plot per group.
    pub together: Vec<Vec<Metric>>,
    /// Markdown put at the top of `results.md` (say, the paper's observations).
    pub preface: Option<String>,
    /// Variants (of, over) compared in every table of a time metric: how much lower
    /// `of` is than `over`, in percent of `over`.
    pub gain: Option<(String, String)>,
    /// Whether to tabulate the bytes each flow sent per slow-start round.
    pub rounds: bool,
    /// Whether to draw, besides a plot per point of the other grid keys (a line per
    /// variant), a plot per variant (a line per point of the other grid keys).
    pub by_variant: bool,
    /// Whether to tabulate, per variant and point of the other grid keys, the `x`
    /// with the highest total (the optimum) and the first within 5 % of it.
    pub best: bool,
    /// Published optima to set beside ours: (variant, label, x, value).
    pub published_best: Vec<(String, String, f64, f64)>,
}

/// A published figure per variant at one grid point.
#[derive(Debug, Clone)]
pub struct Expected {
    /// The grid values of the point.
    pub point: Vec<(String, toml::Value)>,
    /// Total goodput, Mb/s, by variant name.
    pub values: BTreeMap<String, f64>,
}

impl Report {
    /// The display name of a grid key.
    pub fn label<'a>(&'a self, key: &'a str) -> &'a str {
        self.labels.get(key).map_or(key, String::as_str)
    }
}

/// Whether two grid values are the same (numbers compare as numbers, so `0` and
/// `0.0` match).
pub fn same_value(a: &toml::Value, b: &toml::Value) -> bool {
    use toml::Value::{Float, Integer};
    match (a, b) {
        (Integer(_) | Float(_), Integer(_) | Float(_)) => as_number(a) == as_number(b),
        _ => a == b,
    }
}

/// A grid value as a number, if it is one or a string that starts with one
/// (`"5Mbps"` is 5).
pub fn as_number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        toml::Value::String(s) => {
            let end = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            s[..end].parse().ok()
        }
        _ => None,
    }
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
    /// What the report adds.
    pub report: Report,
    /// How the points were made, kept to make a point's document again
    /// ([`Sweep::document`]) rather than holding one per point.
    recipe: Recipe,
}

/// A base document and the edits that make each point of it.
#[derive(Debug, Clone)]
struct Recipe {
    /// The sweep file (or what stands for it), for error messages.
    origin: PathBuf,
    /// The base scenario's document and its path (the points' default name).
    base: toml::Value,
    base_path: PathBuf,
    /// Named sets of edits, each crossed with the grid; one unnamed, empty one when
    /// the sweep has no variants.
    variants: Vec<(Option<String>, Vec<Edit>)>,
}

impl Recipe {
    /// The document of the point with these parameters (a `variant` entry first when
    /// there are variants, then the grid's values) and the name it is built under.
    fn document(
        &self,
        n: usize,
        params: &[(String, toml::Value)],
    ) -> Result<(toml::Value, String), ScenarioError> {
        let invalid = |key: String, message: String| ScenarioError::Invalid {
            path: self.origin.clone(),
            key,
            message,
        };
        let mut doc = self.base.clone();
        let mut grid = params;
        // With variants, a point's first parameter names its variant.
        let named = self.variants.iter().any(|v| v.0.is_some());
        if let Some((_, toml::Value::String(name))) = params.first().filter(|_| named) {
            grid = &params[1..];
            let edits = self
                .variants
                .iter()
                .find(|v| v.0.as_deref() == Some(name.as_str()))
                .map_or(&[][..], |v| &v.1[..]);
            for (k, v) in edits {
                set_path(&mut doc, k, v.clone()).map_err(|m| invalid(format!("variant.{k}"), m))?;
            }
        }
        for (k, v) in grid {
            // "a.b, c.d" sets both paths to the value.
            for one in k.split(',').map(str::trim) {
                set_path(&mut doc, one, v.clone()).map_err(|m| invalid(format!("grid.{k}"), m))?;
            }
        }
        let label = format!(
            "{} (sweep point {n}: {})",
            self.base_path.display(),
            describe(params)
        );
        Ok((doc, label))
    }
}

impl Sweep {
    /// Loads `sweep.toml` and validates every point before anything runs.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = crate::scenario::read_text(path)?;
        let syntax = |m: String| ScenarioError::Syntax {
            path: path.to_owned(),
            message: m,
        };
        let file: SweepFile = toml::from_str(&text).map_err(|e| syntax(e.to_string()))?;
        let base_path: PathBuf = path.parent().unwrap_or(Path::new(".")).join(&file.scenario);
        let base_text = crate::scenario::read_text(&base_path)?;
        let base: toml::Value = toml::from_str(&base_text).map_err(|e| ScenarioError::Syntax {
            path: base_path.clone(),
            message: e.to_string(),
        })?;
        let default_name = path
            .parent()
            .and_then(|p| p.file_name())
            .map_or("sweep".into(), |s| s.to_string_lossy().into_owned());
        Self::build(path, file, base, &base_path, default_name)
    }

    /// A sweep given as values rather than files (the Python front's `sweep()`): the
    /// base scenario's document, the grid and the variants exactly as `sweep.toml`
    /// holds them, checked and expanded by the same code. `origin` names the sweep in
    /// error messages, `base_label` the base scenario (and its runs' default name).
    pub fn from_parts(
        origin: &Path,
        base: toml::Value,
        base_label: &Path,
        grid: BTreeMap<String, Vec<toml::Value>>,
        variant: Vec<toml::Table>,
        name: Option<String>,
    ) -> Result<Self, ScenarioError> {
        let file = SweepFile {
            scenario: base_label.display().to_string(),
            name,
            grid,
            variant,
            report: None,
        };
        Self::build(origin, file, base, base_label, "sweep".into())
    }

    fn build(
        path: &Path,
        file: SweepFile,
        base: toml::Value,
        base_path: &Path,
        default_name: String,
    ) -> Result<Self, ScenarioError> {
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
            if variants
                .iter()
                .any(|(n, _)| n.as_deref() == Some(name.as_str()))
            {
                return Err(ScenarioError::Invalid {
                    path: path.to_owned(),
                    key: format!("variant[{i}].name"),
                    message: format!(
                        "\"{name}\" names an earlier variant too; give each its own name"
                    ),
                });
            }
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
        let recipe = Recipe {
            origin: path.to_owned(),
            base,
            base_path: base_path.to_owned(),
            variants,
        };
        let keys: Vec<_> = file.grid.iter().collect();
        let mut points = Vec::with_capacity(total);
        for n in 0..total {
            let (variant_name, _) = &recipe.variants[n / grid_points];
            let mut params = vec![];
            if let Some(name) = variant_name {
                params.push(("variant".to_string(), toml::Value::String(name.clone())));
            }
            // Last key varies fastest.
            let mut rest = n % grid_points;
            let mut idx = vec![0; keys.len()];
            for (i, (_, vals)) in keys.iter().enumerate().rev() {
                idx[i] = rest % vals.len();
                rest /= vals.len();
            }
            params.extend(
                keys.iter()
                    .zip(idx)
                    .map(|((k, vals), i)| ((*k).clone(), vals[i].clone())),
            );
            let (doc, label) = recipe.document(n, &params)?;
            let scenario = Scenario::from_value(doc, Path::new(&label))?;
            points.push(Point { params, scenario });
        }
        let name = file.name.unwrap_or(default_name);
        let variant_names: Vec<&str> = recipe
            .variants
            .iter()
            .filter_map(|v| v.0.as_deref())
            .collect();
        let report = match file.report {
            None => Report::default(),
            Some(r) => load_report(path, r, &file.grid, &variant_names)?,
        };
        for (label, i) in &report.flows {
            if let Some(p) = points.iter().find(|p| *i >= p.scenario.flows.len()) {
                return Err(ScenarioError::Invalid {
                    path: path.to_owned(),
                    key: format!("report.flows.{label}"),
                    message: format!(
                        "flow {i} does not exist at {} (it has {} flows, numbered from 0)",
                        describe(&p.params),
                        p.scenario.flows.len()
                    ),
                });
            }
        }
        Ok(Sweep {
            name,
            points,
            report,
            recipe,
        })
    }

    /// The document point `n` was built from and the name it was built under:
    /// `Scenario::from_value(document, Path::new(&label))` gives the point's scenario
    /// again (before any seed override), which is how a point travels to another
    /// process or machine. `None` when there is no point `n`.
    pub fn document(&self, n: usize) -> Option<(toml::Value, String)> {
        let p = self.points.get(n)?;
        // The same edits succeeded when the sweep was built.
        self.recipe.document(n, &p.params).ok()
    }
}

/// Checks a `[report]` against the grid and the variants.
fn load_report(
    path: &Path,
    r: ReportFile,
    grid: &BTreeMap<String, Vec<toml::Value>>,
    variants: &[&str],
) -> Result<Report, ScenarioError> {
    let err = |key: String, message: String| ScenarioError::Invalid {
        path: path.to_owned(),
        key,
        message,
    };
    let grid_keys = || grid.keys().cloned().collect::<Vec<_>>().join(", ");
    // `key = value` pairs that must name grid keys and values.
    let point = |at: &str, t: &toml::Table| -> Result<Vec<(String, toml::Value)>, ScenarioError> {
        let mut out = vec![];
        for (k, v) in t {
            let Some(vals) = grid.get(k) else {
                return Err(err(
                    format!("{at}.{k}"),
                    format!("is not a grid key (the grid has: {})", grid_keys()),
                ));
            };
            if !vals.iter().any(|g| same_value(g, v)) {
                return Err(err(
                    format!("{at}.{k}"),
                    format!("{} is not one of the grid's values", value_str(v)),
                ));
            }
            out.push((k.clone(), v.clone()));
        }
        Ok(out)
    };
    for k in r.labels.keys() {
        if !grid.contains_key(k) {
            return Err(err(
                format!("report.labels.{k}"),
                format!("is not a grid key (the grid has: {})", grid_keys()),
            ));
        }
    }
    let timeseries = match &r.timeseries {
        None => None,
        Some(t) => Some(point("report.timeseries", t)?),
    };
    if let Some(x) = &r.x {
        let Some(vals) = grid.get(x) else {
            return Err(err(
                "report.x".into(),
                format!("`{x}` is not a grid key (the grid has: {})", grid_keys()),
            ));
        };
        if let Some(v) = vals.iter().find(|v| as_number(v).is_none()) {
            return Err(err(
                "report.x".into(),
                format!(
                    "the grid's values of `{x}` must be numbers, or start with one (\"5Mbps\"), \
                     to be an axis ({} is not)",
                    value_str(v)
                ),
            ));
        }
    } else if r.log_x {
        return Err(err("report.log_x".into(), "needs `report.x`".into()));
    }
    let warmup_s = match &r.warmup {
        None => 0.0,
        Some(w) => longhaul_model::units::parse_time(w)
            .map_err(|m| err("report.warmup".into(), m))?
            .as_secs_f64(),
    };
    let mut expected = vec![];
    for (i, e) in r.expected.iter().enumerate() {
        let at = format!("report.expected[{i}]");
        let p = point(&format!("{at}.point"), &e.point)?;
        let averaged = r.average.as_ref().is_some_and(|a| grid.contains_key(a));
        if p.len() + usize::from(averaged) != grid.len()
            || r.average.as_ref().is_some_and(|a| e.point.contains_key(a))
        {
            return Err(err(
                format!("{at}.point"),
                format!("must give a value for every grid key ({})", grid_keys()),
            ));
        }
        if let Some(v) = e.values.keys().find(|v| !variants.contains(&v.as_str())) {
            return Err(err(
                format!("{at}.values.{v}"),
                format!(
                    "is not a variant (the variants are: {})",
                    variants.join(", ")
                ),
            ));
        }
        expected.push(Expected {
            point: p,
            values: e.values.clone(),
        });
    }
    if let Some(a) = &r.average {
        if !grid.contains_key(a) {
            return Err(err(
                "report.average".into(),
                format!("`{a}` is not a grid key (the grid has: {})", grid_keys()),
            ));
        }
        if r.x.as_ref() == Some(a) {
            return Err(err(
                "report.average".into(),
                "cannot also be `report.x`".into(),
            ));
        }
    }
    let metric = |key: String, m: &str| {
        Metric::ALL
            .iter()
            .find(|x| x.0 == m)
            .map(|x| x.1)
            .ok_or_else(|| {
                let names: Vec<&str> = Metric::ALL.iter().map(|x| x.0).collect();
                err(
                    key,
                    format!("unknown `{m}`: use one of {}", names.join(", ")),
                )
            })
    };
    let mut metrics = vec![];
    for (i, m) in r.metrics.iter().enumerate() {
        metrics.push(metric(format!("report.metrics[{i}]"), m)?);
    }
    let mut together = vec![];
    for (i, group) in r.together.iter().enumerate() {
        let mut g = vec![];
        for (j, m) in group.iter().enumerate() {
            g.push(metric(format!("report.together[{i}][{j}]"), m)?);
        }
        together.push(g);
    }
    if !together.is_empty() && (r.flows.is_empty() || r.x.is_none()) {
        return Err(err(
            "report.together".into(),
            "needs `report.flows` and `report.x`: it draws flows' metrics against x".into(),
        ));
    }
    if !metrics.is_empty() && r.flows.is_empty() {
        return Err(err(
            "report.metrics".into(),
            "needs `report.flows` (the flows to report, e.g. { EF = 0, BE = 1 })".into(),
        ));
    }
    if metrics.is_empty() {
        metrics.push(Metric::Goodput);
    }
    let gain = match r.gain {
        None => None,
        Some(g) => {
            for (k, v) in [("of", &g.of), ("over", &g.over)] {
                if !variants.contains(&v.as_str()) {
                    return Err(err(
                        format!("report.gain.{k}"),
                        format!(
                            "`{v}` is not a variant (the variants are: {})",
                            variants.join(", ")
                        ),
                    ));
                }
            }
            if r.flows.is_empty() {
                return Err(err(
                    "report.gain".into(),
                    "needs `report.flows`: it compares flows' metrics".into(),
                ));
            }
            Some((g.of, g.over))
        }
    };
    if (r.best || !r.published_best.is_empty() || r.by_variant) && r.x.is_none() {
        return Err(err(
            "report.best".into(),
            "`best`, `published_best` and `by_variant` need `report.x`".into(),
        ));
    }
    for (i, b) in r.published_best.iter().enumerate() {
        if !variants.contains(&b.variant.as_str()) {
            return Err(err(
                format!("report.published_best[{i}].variant"),
                format!(
                    "`{}` is not a variant (the variants are: {})",
                    b.variant,
                    variants.join(", ")
                ),
            ));
        }
    }
    if r.rounds && r.flows.is_empty() {
        return Err(err(
            "report.rounds".into(),
            "needs `report.flows`: it lists flows' bytes per round".into(),
        ));
    }
    Ok(Report {
        labels: r.labels,
        timeseries,
        x: r.x,
        log_x: r.log_x,
        warmup_s,
        source: r.source,
        expected,
        flows: r.flows.into_iter().collect(),
        metrics,
        average: r.average,
        together,
        preface: r.preface,
        gain,
        rounds: r.rounds,
        by_variant: r.by_variant,
        best: r.best || !r.published_best.is_empty(),
        published_best: r
            .published_best
            .into_iter()
            .map(|b| (b.variant, b.label, b.x, b.value))
            .collect(),
    })
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
    fn numbers_for_axes() {
        use toml::Value::{Float, Integer, String as S};
        assert_eq!(as_number(&Integer(3)), Some(3.0));
        assert_eq!(as_number(&Float(1e-4)), Some(1e-4));
        assert_eq!(as_number(&S("17Mbps".into())), Some(17.0));
        assert_eq!(as_number(&S("0.5ms".into())), Some(0.5));
        assert_eq!(as_number(&S("fast".into())), None);
        // Strings compare as strings: "5ms" and "5Mbps" are different points.
        assert!(!same_value(&S("5ms".into()), &S("5Mbps".into())));
        assert!(same_value(&Integer(0), &Float(0.0)));
    }
}
