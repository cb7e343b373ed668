//! A static HTML site of the studies' results (`longhaul report`): an index, and one
//! page per study with its question, the command that produced the results, each
//! sweep's tables (ours beside the paper's, as `results.md` has them) and plots, every
//! run's figures read from its `summary.json`, and the rest of the study's README (its
//! choices and findings). Pages are plain files with one stylesheet and no scripts:
//! they open from disk, with no server and no network.
//!
//! What it does not do: run anything (it reads results folders written by
//! `longhaul sim run studies/<name>`), or judge the figures.

mod markdown;

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

pub use markdown::{render, Place};

/// Something the site could not be built from.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SiteError {
    /// The file or folder.
    pub path: PathBuf,
    /// What is wrong, and what to do.
    pub message: String,
    /// Whether it is the user's input (a folder given that is not there) rather than
    /// the system (a file that could not be written).
    pub input: bool,
}

/// What [`build`] made.
#[derive(Debug, Default)]
pub struct Site {
    /// Studies with a page, by name.
    pub pages: Vec<String>,
    /// Studies without results yet, by name.
    pub not_run: Vec<String>,
}

const STYLE: &str = "\
body{font:16px/1.5 system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}
h1,h2,h3{line-height:1.2}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}
img{max-width:100%;display:block;margin:1rem 0;border:1px solid #eee}
pre{background:#f6f6f6;padding:.5rem 1rem;overflow-x:auto}
code{background:#f6f6f6}
nav{margin-bottom:1rem}
.sweep{border-top:2px solid #ddd;margin-top:2rem}
";

/// Builds the site in `out` from the studies in `studies` (each a folder with a
/// README.md) and their results under `results/<study>/`.
pub fn build(studies: &Path, results: &Path, out: &Path) -> Result<Site, SiteError> {
    let input = |path: &Path, message: &str| SiteError {
        path: path.to_owned(),
        message: message.into(),
        input: true,
    };
    if !studies.is_dir() {
        return Err(input(
            studies,
            "is not a folder of studies; give --studies the repository's studies/ folder",
        ));
    }
    if !results.is_dir() {
        return Err(input(
            results,
            "is not a results folder; run a study first (`longhaul sim run studies/NAME` \
             writes results/NAME) or give the folder that holds the studies' results",
        ));
    }
    let sys = |path: &Path| {
        let path = path.to_owned();
        move |e: io::Error| SiteError {
            path,
            message: e.to_string(),
            input: false,
        }
    };
    let mut names: Vec<String> = std::fs::read_dir(studies)
        .map_err(sys(studies))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("README.md").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    std::fs::create_dir_all(out).map_err(sys(out))?;
    std::fs::write(out.join("style.css"), STYLE).map_err(sys(out))?;
    let mut site = Site::default();
    let mut index = Vec::new();
    for name in &names {
        let src = studies.join(name);
        let readme = std::fs::read_to_string(src.join("README.md")).map_err(sys(&src))?;
        let res = results.join(name);
        let sweeps = sweeps_in(&res);
        let entry = Entry {
            name,
            title: title(&readme, name),
            intro: intro(&readme).to_string(),
            runs: sweeps.iter().map(|s| count_points(&s.1)).sum(),
            sweeps: sweeps.len(),
        };
        if sweeps.is_empty() {
            site.not_run.push(name.clone());
        } else {
            let dir = out.join(name);
            std::fs::create_dir_all(&dir).map_err(sys(&dir))?;
            let page = study_page(name, &readme, &src, &sweeps, &dir).map_err(sys(&dir))?;
            std::fs::write(dir.join("index.html"), page).map_err(sys(&dir))?;
            site.pages.push(name.clone());
        }
        index.push(entry);
    }
    std::fs::write(out.join("index.html"), index_page(&index)).map_err(sys(out))?;
    Ok(site)
}

struct Entry<'a> {
    name: &'a str,
    title: String,
    intro: String,
    runs: usize,
    sweeps: usize,
}

/// A study's sweeps: `(name, folder)`; a study of one sweep writes it into its results
/// folder itself, a study of several into subfolders named after them.
fn sweeps_in(res: &Path) -> Vec<(String, PathBuf)> {
    if res.join("results.md").is_file() || res.join("sweep.csv").is_file() {
        let name = res
            .file_name()
            .map_or("sweep".into(), |n| n.to_string_lossy().into());
        return vec![(name, res.to_owned())];
    }
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(res)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("sweep.csv").is_file())
        .map(|p| {
            (
                p.file_name().unwrap_or_default().to_string_lossy().into(),
                p,
            )
        })
        .collect();
    v.sort();
    v
}

fn count_points(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("point-"))
        .count()
}

/// The README's first heading.
fn title(readme: &str, name: &str) -> String {
    readme
        .lines()
        .find(|l| l.starts_with("# "))
        .map_or(name.to_string(), |l| l[2..].trim().to_string())
}

/// What comes before the README's first section: the study's question.
fn intro(readme: &str) -> &str {
    let body = readme.find('\n').map_or("", |i| &readme[i + 1..]);
    body.find("\n## ").map_or(body, |i| &body[..i])
}

/// The README from its first section on: choices, findings.
fn sections(readme: &str) -> &str {
    readme.find("\n## ").map_or("", |i| &readme[i + 1..])
}

/// Text for HTML.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

fn head(title: &str, css: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<link rel=\"stylesheet\" href=\"{css}\">\n</head>\n<body>\n",
        escape(title)
    )
}

fn index_page(studies: &[Entry<'_>]) -> String {
    let mut h = head("longhaul studies", "style.css");
    h.push_str("<h1>longhaul studies</h1>\n<p>Published studies reproduced with longhaul's simulator: one page each, with the command that ran it.</p>\n<table class=\"studies\">\n<tr><th>study</th><th>sweeps</th><th>runs</th><th>question</th></tr>\n");
    for s in studies {
        let first = s
            .intro
            .split("\n\n")
            .map(str::trim)
            .find(|p| !p.is_empty())
            .unwrap_or("");
        let summary = escape(&first.replace('\n', " "));
        if s.sweeps > 0 {
            let _ = writeln!(
                h,
                "<tr><td><a href=\"{n}/index.html\">{t}</a></td><td>{}</td><td>{}</td><td style=\"text-align:left\">{summary}</td></tr>",
                s.sweeps,
                s.runs,
                n = escape(s.name),
                t = escape(&s.title)
            );
        } else {
            let _ = writeln!(
                h,
                "<tr><td>{t}</td><td colspan=\"2\">not run yet: <code>longhaul sim run studies/{n}</code></td><td style=\"text-align:left\">{summary}</td></tr>",
                n = escape(s.name),
                t = escape(&s.title)
            );
        }
    }
    h.push_str("</table>\n</body>\n</html>\n");
    h
}

fn study_page(
    name: &str,
    readme: &str,
    src: &Path,
    sweeps: &[(String, PathBuf)],
    dir: &Path,
) -> io::Result<String> {
    let mut h = head(&title(readme, name), "../style.css");
    let here = Place {
        src,
        dst: &dir.join("study"),
        prefix: "study/",
    };
    let _ = write!(
        h,
        "<nav><a href=\"../index.html\">← all studies</a></nav>\n<h1>{}</h1>\n<h2>Question</h2>\n{}\
         <h2>Command</h2>\n<pre><code>longhaul sim run studies/{}</code></pre>\n\
         <p>Sweeps: {}. Each section below is that sweep's <code>results.md</code> (our figures \
         beside the published ones where the paper gives them), its plots, and every run's \
         figures from its <code>summary.json</code>.</p>\n",
        escape(&title(readme, name)),
        render(intro(readme), &here, 1)?,
        escape(name),
        sweeps
            .iter()
            .map(|(s, _)| format!("<a href=\"#sweep-{0}\">{0}</a>", escape(s)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (sweep, res) in sweeps {
        let sub = dir.join(sweep);
        let prefix = format!("{sweep}/");
        let place = Place {
            src: res,
            dst: &sub,
            prefix: &prefix,
        };
        let _ = writeln!(
            h,
            "<section class=\"sweep\" id=\"sweep-{0}\">\n<h2>Sweep: {0}</h2>",
            escape(sweep)
        );
        match std::fs::read_to_string(res.join("results.md")) {
            Ok(md) => h.push_str(&render(&md, &place, 2)?),
            Err(_) => h.push_str("<p>(no results.md: a sweep without variants)</p>\n"),
        }
        std::fs::create_dir_all(&sub)?;
        std::fs::copy(res.join("sweep.csv"), sub.join("sweep.csv"))?;
        h.push_str(&runs_table(sweep, res)?);
        h.push_str("</section>\n");
    }
    let rest = sections(readme);
    if !rest.is_empty() {
        h.push_str("<section class=\"sweep\">\n<h2>From the study's README</h2>\n");
        h.push_str(&render(rest, &here, 1)?);
        h.push_str("</section>\n");
    }
    h.push_str("</body>\n</html>\n");
    Ok(h)
}

/// Every run of a sweep, one row per flow, from its `point-NNNN/summary.json`; the
/// grid's values from `sweep.csv`.
fn runs_table(sweep: &str, res: &Path) -> io::Result<String> {
    let csv = std::fs::read_to_string(res.join("sweep.csv"))?;
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let n_params = header
        .iter()
        .position(|c| *c == "flow")
        .unwrap_or(1)
        .saturating_sub(1);
    let mut params: Vec<(usize, Vec<String>)> = vec![];
    for l in lines {
        let cells: Vec<&str> = l.split(',').collect();
        let Some(point) = cells.first().and_then(|p| p.parse::<usize>().ok()) else {
            continue;
        };
        if params.last().is_none_or(|(p, _)| *p != point) {
            let values = cells
                .iter()
                .skip(1)
                .take(n_params)
                .map(|s| s.to_string())
                .collect();
            params.push((point, values));
        }
    }
    let mut h = String::new();
    let mut rows = 0;
    let mut body = String::new();
    for (point, values) in &params {
        let path = res.join(format!("point-{point:04}")).join("summary.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(summary) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        for f in summary["flows"].as_array().into_iter().flatten() {
            rows += 1;
            let id = f["id"].as_u64().unwrap_or(0);
            let _ = write!(
                body,
                "<tr data-point=\"{point}\" data-flow=\"{id}\"><td>{point}</td>"
            );
            for v in values {
                let _ = write!(body, "<td>{}</td>", escape(v));
            }
            let _ = writeln!(
                body,
                "<td>{id}</td><td>{}</td><td class=\"goodput\">{:.3}</td><td class=\"bytes\">{}</td><td>{}</td></tr>",
                escape(f["protocol"].as_str().unwrap_or("")),
                f["goodput_mbps"].as_f64().unwrap_or(f64::NAN),
                f["delivered_bytes"].as_u64().unwrap_or(0),
                f["retransmits"].as_u64().map_or("".into(), |r| r.to_string()),
            );
        }
    }
    let _ = write!(
        h,
        "<details>\n<summary>Every run: {rows} flows of {} points, from each point's summary.json \
         (<a href=\"{s}/sweep.csv\">sweep.csv</a>)</summary>\n<table class=\"runs\" data-sweep=\"{s}\">\n<tr><th>point</th>",
        params.len(),
        s = escape(sweep)
    );
    for k in &header[1..1 + n_params] {
        let _ = write!(h, "<th>{}</th>", escape(k));
    }
    h.push_str("<th>flow</th><th>protocol</th><th>goodput (Mb/s)</th><th>delivered bytes</th><th>retransmits</th></tr>\n");
    h.push_str(&body);
    h.push_str("</table>\n</details>\n");
    Ok(h)
}
