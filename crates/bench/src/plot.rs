//! `secondhit simulate --plot FILE.svg`: the pictures an operator sizes a cache by.
//!
//! Three panels, one line per policy in each, in the same colour throughout:
//! - the byte hit ratio against the cache size (the miss-ratio curve, drawn as hits), on a
//!   log scale of the share of the trace's unique bytes, the chosen size marked;
//! - the bytes written to disk against the same sizes;
//! - the byte hit ratio over the trace's own time at the chosen size and settings, in
//!   equal stretches of time: how fast each policy warms up and how it follows the traffic.
//!
//! SVG only (plotters' SVG backend needs no font files: text is left to the viewer).

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::report::{Report, human_bytes};
use super::simulate::TimePoint;

/// What one picture shows.
pub struct Picture<'a> {
    /// The curve: one report (every policy) per cache size, smallest first.
    pub curve: &'a [Report],
    /// The sum of the distinct objects' sizes: the curve's 100%.
    pub unique_bytes: u64,
    /// The cache size marked on the curve, and used for the time series.
    pub chosen_size: u64,
    /// The settings of the time series, e.g. `expected_urls=320, max_age=30m`.
    pub setting: String,
    /// Each policy's byte hit ratio over the trace's time.
    pub timelines: &'a [(String, Vec<TimePoint>)],
}

type PlotResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The colour of `policy` in every panel.
fn colour(policy: &str) -> RGBColor {
    match policy {
        "second-hit" => RGBColor(31, 119, 180),
        "always" => RGBColor(255, 127, 14),
        "exact-second-hit" => RGBColor(44, 160, 44),
        "s3fifo" => RGBColor(148, 103, 189),
        "sieve" => RGBColor(227, 119, 194),
        "w-tinylfu" => RGBColor(23, 190, 207),
        "lru" => RGBColor(140, 86, 75),
        _ => RGBColor(120, 120, 120),
    }
}

/// The cache-size labels on the log axis: these shares (in %) get a label, other ticks none.
const LABELLED_SHARES: [f64; 13] = [
    0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0,
];

/// Writes `picture` as an SVG file at `path`.
pub fn write_svg(picture: &Picture, path: &Path) -> PlotResult {
    std::fs::write(path, render_svg(picture)?)?;
    Ok(())
}

/// `picture` as an SVG document (with a `viewBox`, so a page can scale it).
pub fn render_svg(picture: &Picture) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let mut svg = String::new();
    draw(picture, SVGBackend::with_string(&mut svg, (1200, 900)))?;
    Ok(svg)
}

/// Draws the three panels and the legend on `backend`, and finishes its document.
fn draw(picture: &Picture, backend: SVGBackend) -> PlotResult {
    let root = backend.into_drawing_area();
    root.fill(&WHITE)?;
    // One legend for the three panels, above them: a legend inside a panel would cover
    // the lines wherever they happen to run.
    let (strip, charts) = root.split_vertically(40);
    let policies: Vec<&str> = picture
        .curve
        .first()
        .map(|report| report.policies.iter().map(|r| r.policy.as_str()).collect())
        .unwrap_or_default();
    legend_strip(&strip, &policies, picture.chosen_size)?;
    let (top, bottom) = charts.split_vertically(430);
    let panels = top.split_evenly((1, 2));
    let share = |bytes: u64| 100.0 * bytes as f64 / picture.unique_bytes.max(1) as f64;
    // x is log10 of the share in percent, drawn on a linear axis so that the labels can be
    // limited to round shares (plotters' own log axis labels every light tick).
    let xs: Vec<f64> = picture
        .curve
        .iter()
        .map(|report| share(report.cache_size_bytes).log10())
        .collect();
    let x_range = xs.iter().copied().fold(f64::INFINITY, f64::min) - 0.1
        ..xs.iter().copied().fold(f64::NEG_INFINITY, f64::max) + 0.1;
    let chosen_x = share(picture.chosen_size).log10();

    let hits = series(picture.curve, &xs, |row| row.byte_hit_ratio * 100.0);
    let top_hits = max_of(&hits).max(1.0) * 1.15;
    let mut chart = curve_chart(
        &panels[0],
        "Byte hit ratio by cache size",
        x_range.clone(),
        top_hits,
        "byte hit ratio (%)",
    )?;
    draw_lines(&mut chart, &hits, chosen_x, top_hits)?;

    let most_written = picture
        .curve
        .iter()
        .flat_map(|report| &report.policies)
        .filter_map(|row| row.disk_write_bytes)
        .max()
        .unwrap_or(0);
    let (unit, scale) = byte_unit(most_written);
    let writes = series(picture.curve, &xs, |row| {
        row.disk_write_bytes.unwrap_or(0) as f64 / scale
    });
    let top_writes = max_of(&writes).max(1e-9) * 1.15;
    let mut chart = curve_chart(
        &panels[1],
        "Bytes written to disk by cache size",
        x_range,
        top_writes,
        &format!("disk writes ({unit})"),
    )?;
    draw_lines(&mut chart, &writes, chosen_x, top_writes)?;

    time_panel(&bottom, picture)?;
    root.present()?;
    Ok(())
}

/// An axis label: no decimals from 100 up, where they only widen the label.
fn short_number(value: f64) -> String {
    if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// One line per policy: `(x, value)` at each cache size.
fn series(
    curve: &[Report],
    xs: &[f64],
    value: impl Fn(&super::report::PolicyReport) -> f64,
) -> Vec<(String, Vec<(f64, f64)>)> {
    let Some(first) = curve.first() else {
        return Vec::new();
    };
    first
        .policies
        .iter()
        .map(|row| {
            let points = curve
                .iter()
                .zip(xs)
                .filter_map(|(report, &x)| report.policy(&row.policy).map(|r| (x, value(r))))
                .collect();
            (row.policy.clone(), points)
        })
        .collect()
}

fn max_of(lines: &[(String, Vec<(f64, f64)>)]) -> f64 {
    lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|&(_, y)| y))
        .fold(0.0, f64::max)
}

/// The unit the disk-write axis counts in, so its labels stay short.
fn byte_unit(most: u64) -> (&'static str, f64) {
    match most {
        m if m >= 10 << 30 => ("GiB", (1u64 << 30) as f64),
        m if m >= 10 << 20 => ("MiB", (1u64 << 20) as f64),
        _ => ("KiB", 1024.0),
    }
}

type CurveChart<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel whose x axis is the cache size (log10 of its share in %).
fn curve_chart<'a>(
    area: &DrawingArea<SVGBackend<'a>, Shift>,
    title: &str,
    x_range: std::ops::Range<f64>,
    top: f64,
    y_desc: &str,
) -> Result<CurveChart<'a>, Box<dyn std::error::Error + Send + Sync>> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(65)
        .build_cartesian_2d(x_range, 0.0..top)?;
    chart
        .configure_mesh()
        .x_labels(40)
        .x_label_formatter(&|x| {
            let percent = 10f64.powf(*x);
            LABELLED_SHARES
                .iter()
                .find(|&&share| (percent / share - 1.0).abs() < 0.012)
                .map_or_else(String::new, |share| format!("{share}%"))
        })
        .y_labels(8)
        .y_label_formatter(&|y| short_number(*y))
        .x_desc("cache size (% of the trace's unique bytes, log scale)")
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE)
        .draw()?;
    Ok(chart)
}

/// Draws each policy's line with its points, and the chosen size as a grey line.
fn draw_lines(
    chart: &mut CurveChart,
    lines: &[(String, Vec<(f64, f64)>)],
    chosen_x: f64,
    top: f64,
) -> PlotResult {
    for (policy, points) in lines {
        draw_line(chart, policy, points)?;
        chart.draw_series(
            points
                .iter()
                .map(|&point| Circle::new(point, 3, colour(policy).filled())),
        )?;
    }
    chart.draw_series(LineSeries::new([(chosen_x, 0.0), (chosen_x, top)], MARKER))?;
    Ok(())
}

/// The chosen cache size's vertical line.
const MARKER: RGBColor = RGBColor(110, 110, 110);

/// `exact-second-hit` is dashed: it often runs on top of `second-hit`, which stays visible
/// between its dashes (drawn after it, as the policies are listed).
fn dashed(policy: &str) -> bool {
    policy == "exact-second-hit"
}

fn draw_line(chart: &mut CurveChart, policy: &str, points: &[(f64, f64)]) -> PlotResult {
    let style = colour(policy).stroke_width(2);
    if dashed(policy) {
        chart.draw_series(DashedLineSeries::new(points.iter().copied(), 7, 5, style))?;
    } else {
        chart.draw_series(LineSeries::new(points.iter().copied(), style))?;
    }
    Ok(())
}

/// The legend: a key per policy and one for the chosen size, in a row.
fn legend_strip(
    area: &DrawingArea<SVGBackend, Shift>,
    policies: &[&str],
    chosen_size: u64,
) -> PlotResult {
    let y = 22;
    let mut x = 80;
    let chosen = format!("chosen cache size ({})", human_bytes(chosen_size));
    let keys = policies
        .iter()
        .map(|&policy| (policy.to_owned(), colour(policy), dashed(policy), 2))
        .chain([(chosen, MARKER, false, 1)]);
    for (label, colour, dashed, width) in keys {
        let style = colour.stroke_width(width);
        if dashed {
            area.draw(&PathElement::new(vec![(x, y), (x + 10, y)], style))?;
            area.draw(&PathElement::new(vec![(x + 16, y), (x + 28, y)], style))?;
        } else {
            area.draw(&PathElement::new(vec![(x, y), (x + 28, y)], style))?;
        }
        // The SVG backend measures no text: about 8 px a character at 15 px.
        let text_width = 8 * label.chars().count() as i32;
        area.draw(&Text::new(
            label,
            (x + 36, y - 8),
            ("sans-serif", 15).into_font().color(&BLACK),
        ))?;
        x += 36 + text_width + 40;
    }
    Ok(())
}

/// The bottom panel: each policy's byte hit ratio per stretch of the trace's time.
fn time_panel(area: &DrawingArea<SVGBackend, Shift>, picture: &Picture) -> PlotResult {
    let end = picture
        .timelines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.until))
        .fold(0.0, f64::max);
    // Seconds, minutes or hours: whichever keeps the axis's numbers between about 1 and 300.
    let (unit, scale) = match end {
        e if e >= 5.0 * 3600.0 => ("h", 3600.0),
        e if e >= 300.0 => ("min", 60.0),
        _ => ("s", 1.0),
    };
    let lines: Vec<(String, Vec<(f64, f64)>)> = picture
        .timelines
        .iter()
        .map(|(policy, points)| {
            let values = points
                .iter()
                .map(|p| {
                    let ratio = p.hit_bytes as f64 / p.bytes.max(1) as f64;
                    (p.until / scale, ratio * 100.0)
                })
                .collect();
            (policy.clone(), values)
        })
        .collect();
    let top = max_of(&lines).max(1.0) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "Byte hit ratio over the trace's time (cache {}, {})",
                human_bytes(picture.chosen_size),
                picture.setting
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..(end / scale).max(1e-9), 0.0..top)?;
    chart
        .configure_mesh()
        .x_labels(12)
        .y_labels(8)
        .x_desc(format!(
            "time since the trace's first request ({unit}); each point: one {}th of the trace",
            super::recommend::TIME_STRETCHES
        ))
        .y_desc("byte hit ratio in the stretch (%)")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE)
        .draw()?;
    for (policy, points) in &lines {
        draw_line(&mut chart, policy, points)?;
    }
    Ok(())
}
