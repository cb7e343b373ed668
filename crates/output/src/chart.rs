//! PNG charts drawn with plotters: lines against x, and scatter plots with each
//! series' mean. The font (DejaVu Sans) is compiled in, so charts render the same on
//! a machine without fonts.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

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

/// What drawing a chart returns.
pub type Res = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// One line of a plot.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// How a chart draws its series.
#[derive(Clone, Copy, PartialEq)]
enum Marks {
    /// Lines (with dots when a series has few points).
    Lines,
    /// Dots, and each series' mean as a ring.
    Points,
}

/// A line plot. The x axis spans the data (from 0 with `from_zero`); the y axis runs
/// from 0 to 10 % above the highest point.
pub fn draw_xy(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    from_zero: bool,
) -> Res {
    draw_chart(
        path,
        title,
        [x_label, y_label],
        series,
        from_zero,
        Marks::Lines,
    )
}

/// A scatter plot, one colour per series, both axes from 0 (Pantheon's
/// throughput-against-delay plot: x is the delay, lower is better). Each series'
/// mean is drawn as a larger ring.
pub fn draw_scatter(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Res {
    draw_chart(path, title, [x_label, y_label], series, true, Marks::Points)
}

fn draw_chart(
    path: &Path,
    title: &str,
    [x_label, y_label]: [&str; 2],
    series: &[Series],
    from_zero: bool,
    marks: Marks,
) -> Res {
    register_font();
    let root = BitMapBackend::new(path, (1024, 576)).into_drawing_area();
    root.fill(&WHITE)?;
    let xs = || series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let mut x_min = xs().fold(f64::INFINITY, f64::min);
    let mut x_max = xs().fold(f64::NEG_INFINITY, f64::max);
    if !x_min.is_finite() || !x_max.is_finite() {
        (x_min, x_max) = (0.0, 1.0);
    }
    if from_zero {
        x_min = x_min.min(0.0);
    }
    if marks == Marks::Points {
        // Room for the dots at the right edge.
        x_max *= 1.1;
    }
    if x_max - x_min < 1e-9 {
        x_max = x_min + 1.0;
    }
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
        .build_cartesian_2d(x_min..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts = &s.points;
        match marks {
            Marks::Lines => {
                chart
                    .draw_series(
                        LineSeries::new(pts.iter().copied(), color.stroke_width(2))
                            .point_size(if pts.len() <= 12 { 4 } else { 0 }),
                    )?
                    .label(s.label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
            }
            Marks::Points => {
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?
                    .label(s.label.clone())
                    .legend(move |(x, y)| Circle::new((x + 9, y), 5, color.filled()));
                if !pts.is_empty() {
                    let n = pts.len() as f64;
                    let mean = (
                        pts.iter().map(|p| p.0).sum::<f64>() / n,
                        pts.iter().map(|p| p.1).sum::<f64>() / n,
                    );
                    chart.draw_series(std::iter::once(Circle::new(
                        mean,
                        9,
                        color.stroke_width(3),
                    )))?;
                }
            }
        }
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
