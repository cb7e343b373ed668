//! PNG plots drawn with plotters. The font (DejaVu Sans) is compiled in, so plots
//! render the same on a machine without fonts.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

use crate::metrics::RunResult;

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        // Registering a valid embedded TTF cannot fail; if it somehow did, plotters
        // reports a font error when drawing, which the caller surfaces.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

type Res = Result<(), Box<dyn std::error::Error + Send + Sync>>;

struct Series {
    label: String,
    points: Vec<(f64, f64)>,
}

fn draw(path: &Path, title: &str, y_label: &str, series: &[Series]) -> Res {
    register_font();
    let root = BitMapBackend::new(path, (1024, 576)).into_drawing_area();
    root.fill(&WHITE)?;
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        .max(1e-9);
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_label)
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    if series.len() > 1 || series.iter().any(|s| !s.label.is_empty()) {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Goodput of every flow against time.
pub fn throughput(path: &Path, r: &RunResult) -> Res {
    let series: Vec<Series> = r
        .goodput_series
        .iter()
        .enumerate()
        .take(12)
        .map(|(i, s)| Series {
            label: format!("flow {i} ({})", r.summary.flows[i].protocol),
            points: r
                .sample_times
                .iter()
                .copied()
                .zip(s.iter().copied())
                .collect(),
        })
        .collect();
    draw(
        path,
        &format!("{}: goodput", r.summary.scenario),
        "goodput (Mb/s)",
        &series,
    )
}

/// Queue length of the busiest link directions against time.
pub fn queues(path: &Path, r: &RunResult) -> Res {
    let mut order: Vec<usize> = (0..r.link_names.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(r.queue_series[i].iter().copied().max().unwrap_or(0)));
    let series: Vec<Series> = order
        .into_iter()
        .take(4)
        .map(|i| Series {
            label: r.link_names[i].clone(),
            points: r
                .sample_times
                .iter()
                .copied()
                .zip(r.queue_series[i].iter().map(|&q| f64::from(q)))
                .collect(),
        })
        .collect();
    draw(
        path,
        &format!("{}: queue length", r.summary.scenario),
        "packets",
        &series,
    )
}

/// Congestion window of every traced TCP flow against time.
pub fn cwnd(path: &Path, r: &RunResult) -> Res {
    let flows = r.summary.flows.len();
    let series: Vec<Series> = (0..flows)
        .take(12)
        .filter(|i| r.trace.iter().any(|t| t.flow == *i))
        .map(|i| Series {
            label: format!("flow {i} cwnd"),
            points: r
                .trace
                .iter()
                .filter(|t| t.flow == i)
                .map(|t| (t.time_s, t.cwnd_bytes as f64 / 1e3))
                .collect(),
        })
        .collect();
    draw(
        path,
        &format!("{}: congestion window", r.summary.scenario),
        "cwnd (kB)",
        &series,
    )
}
