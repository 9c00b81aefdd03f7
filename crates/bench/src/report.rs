//! The bench report: one row per admission policy, as a table, JSON or an SVG chart.
//!
//! The table ends with the headline an operator adopts admission for: the disk writes
//! `second-hit` avoided relative to `always`, and what that cost in byte hit ratio.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

/// What one policy did with the workload. Field names are the JSON contract; a figure the
/// run could not observe (the disk and origin of a `--target` proxy) is `None` (`null`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyReport {
    /// `second-hit`, `always`, `exact-second-hit`, or (simulator only) `s3fifo`, `sieve`,
    /// `w-tinylfu` or `lru`.
    pub policy: String,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed (connection error or a non-2xx status).
    pub failed_requests: u64,
    /// Fraction of requests served from the cache.
    pub hit_ratio: f64,
    /// Fraction of requested body bytes served from the cache.
    pub byte_hit_ratio: f64,
    /// Entries written to disk.
    pub disk_write_objects: Option<u64>,
    /// Body bytes written to disk.
    pub disk_write_bytes: Option<u64>,
    /// Requests that reached the origin.
    pub origin_requests: Option<u64>,
    /// Body bytes the origin sent.
    pub origin_bytes: Option<u64>,
    /// Memory the admission policy held at the end, in bytes.
    pub admission_memory_bytes: Option<u64>,
    /// Requests per second over the run.
    pub throughput_rps: Option<f64>,
    /// Median latency in milliseconds (HTTP runs only).
    pub p50_ms: Option<f64>,
    /// 99th percentile latency in milliseconds (HTTP runs only).
    pub p99_ms: Option<f64>,
    /// 99.9th percentile latency in milliseconds (HTTP runs only).
    pub p999_ms: Option<f64>,
}

/// A whole run: what was driven, and each policy's row.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The workload's description.
    pub workload: String,
    /// The cache size every policy had, in bytes (0 for a `--target` run: not the bench's).
    pub cache_size_bytes: u64,
    /// Trace lines skipped as malformed (0 for synthetic workloads).
    pub malformed_lines: u64,
    /// One row per policy.
    pub policies: Vec<PolicyReport>,
    /// What a `--target` run sent and saw besides its row; absent from other runs' JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySummary>,
}

/// A `--target` run's figures beyond its row, all as its client saw them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplaySummary {
    /// The proxy driven.
    pub target: String,
    /// How fast the requests went (`as fast as answered`, `200 requests/s`, ...).
    pub pace: String,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Responses by the result their `Cache-Status` names (`hit`, `stale`, `miss`, `pass`,
    /// as the proxy's `/stats` counts them), and `none`: no entry of secondhit's.
    pub results: BTreeMap<&'static str, u64>,
    /// Responses by status class (`2xx`, `4xx`, ...).
    pub responses: BTreeMap<String, u64>,
    /// Requests that got no response, by why (`connect`, `timeout`, `broken`).
    pub errors: BTreeMap<&'static str, u64>,
    /// Log lines of other methods than GET and HEAD, not sent.
    pub skipped_methods: u64,
    /// Log lines whose target or host cannot be sent as they are, not sent.
    pub unsendable: u64,
}

impl ReplaySummary {
    /// The lines under the table: what the figures are, and the counts the row has no column for.
    fn write_text(&self, out: &mut String) {
        let join = |counts: &mut dyn Iterator<Item = (&str, u64)>| {
            counts
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "\nreplayed against {} ({}, {} at once); these are the client's view: results \
             from each response's Cache-Status, origin requests those it marks forwarded \
             (fwd=, not collapsed)",
            self.target, self.pace, self.concurrency
        );
        let mut results = self.results.iter().map(|(k, v)| (*k, *v));
        let _ = writeln!(out, "results: {}", join(&mut results));
        let mut responses = self.responses.iter().map(|(k, v)| (k.as_str(), *v));
        let _ = writeln!(out, "responses: {}", join(&mut responses));
        let mut errors = self.errors.iter().map(|(k, v)| (*k, *v));
        let _ = writeln!(out, "errors: {}", join(&mut errors));
        if self.skipped_methods > 0 {
            let _ = writeln!(
                out,
                "not sent: {} requests with other methods than GET and HEAD",
                self.skipped_methods
            );
        }
        if self.unsendable > 0 {
            let _ = writeln!(
                out,
                "not sent: {} requests whose target or host is not a valid one",
                self.unsendable
            );
        }
    }
}

impl Report {
    /// The row of `policy`, if it ran.
    pub fn policy(&self, policy: &str) -> Option<&PolicyReport> {
        self.policies.iter().find(|row| row.policy == policy)
    }

    /// The side-by-side table with the headline under it.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "workload: {}", self.workload);
        // A target's cache is not the bench's to size.
        if self.replay.is_none() {
            let _ = writeln!(out, "cache size: {}", human_bytes(self.cache_size_bytes));
        }
        if self.malformed_lines > 0 {
            let _ = writeln!(
                out,
                "malformed trace lines skipped: {}",
                self.malformed_lines
            );
        }
        let _ = writeln!(
            out,
            "{:<17} {:>9} {:>7} {:>7} {:>11} {:>11} {:>11} {:>11} {:>10} {:>9} {:>8} {:>8} {:>8}",
            "policy",
            "requests",
            "hit%",
            "byte%",
            "disk objs",
            "disk bytes",
            "origin req",
            "origin B",
            "adm mem",
            "req/s",
            "p50 ms",
            "p99 ms",
            "p99.9 ms"
        );
        for row in &self.policies {
            let _ = writeln!(
                out,
                "{:<17} {:>9} {:>7.2} {:>7.2} {:>11} {:>11} {:>11} {:>11} {:>10} {:>9} {:>8} {:>8} {:>8}",
                row.policy,
                row.requests,
                row.hit_ratio * 100.0,
                row.byte_hit_ratio * 100.0,
                optional_count(row.disk_write_objects),
                optional_bytes(row.disk_write_bytes),
                optional_count(row.origin_requests),
                optional_bytes(row.origin_bytes),
                optional_bytes(row.admission_memory_bytes),
                optional(row.throughput_rps, 0),
                optional(row.p50_ms, 2),
                optional(row.p99_ms, 2),
                optional(row.p999_ms, 2),
            );
        }
        if let Some(headline) = self.headline() {
            let _ = writeln!(out, "\n{headline}");
        }
        if let Some(replay) = &self.replay {
            replay.write_text(&mut out);
        }
        // The table has no column for failures; a run with some must not pass for clean.
        for row in self.policies.iter().filter(|row| row.failed_requests > 0) {
            let _ = writeln!(
                out,
                "warning: {}: {} of {} requests failed (a connection error or a non-2xx status)",
                row.policy, row.failed_requests, row.requests
            );
        }
        out
    }

    /// `second-hit` against `always`: disk writes avoided and the byte-hit-ratio change.
    pub fn headline(&self) -> Option<String> {
        let (second, always) = (self.policy("second-hit")?, self.policy("always")?);
        let avoided = |new: u64, old: u64| {
            if old == 0 {
                0.0
            } else {
                100.0 * (1.0 - new as f64 / old as f64)
            }
        };
        Some(format!(
            "second-hit vs always: {:.1}% fewer disk write bytes ({:.1}% fewer objects), byte hit ratio {:+.2} points",
            avoided(second.disk_write_bytes?, always.disk_write_bytes?),
            avoided(second.disk_write_objects?, always.disk_write_objects?),
            (second.byte_hit_ratio - always.byte_hit_ratio) * 100.0,
        ))
    }

    /// Writes the report as pretty JSON.
    pub fn write_json(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }

    /// Draws byte hit ratio and disk write bytes per policy, side by side, as SVG, under a
    /// title naming the workload and the cache size, each bar labelled with its value.
    pub fn write_svg(&self, path: &Path) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let root = SVGBackend::new(path, (1000, 460)).into_drawing_area();
        root.fill(&WHITE)?;
        let title = format!(
            "{}; cache {}",
            self.workload,
            human_bytes(self.cache_size_bytes)
        );
        let root = root.titled(&title, ("sans-serif", 16))?;
        let panels = root.split_evenly((1, 2));
        let hit: Vec<(String, f64)> = self
            .policies
            .iter()
            .map(|r| (r.policy.clone(), r.byte_hit_ratio * 100.0))
            .collect();
        let writes: Vec<(String, f64)> = self
            .policies
            .iter()
            .map(|r| {
                (
                    r.policy.clone(),
                    r.disk_write_bytes.unwrap_or(0) as f64 / (1024.0 * 1024.0),
                )
            })
            .collect();
        bar_chart(&panels[0], "byte hit ratio (%)", &hit, |v| {
            format!("{v:.2}%")
        })?;
        bar_chart(&panels[1], "disk writes (MiB)", &writes, |v| {
            format!("{v:.1} MiB")
        })?;
        root.present()?;
        Ok(())
    }
}

/// One panel: a bar per policy, its value (as `label` writes it) above it.
fn bar_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    bars: &[(String, f64)],
    label: impl Fn(f64) -> String,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    DB::ErrorType: 'static,
{
    let top = bars
        .iter()
        .map(|(_, v)| *v)
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(30)
        .y_label_area_size(55)
        // Bars centred on 0, 1, 2, …: the axis labels then sit under them.
        .build_cartesian_2d(-0.5..bars.len() as f64 - 0.5, 0.0..top)
        .map_err(|e| e.to_string())?;
    let names: Vec<String> = bars.iter().map(|(name, _)| name.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len())
        .x_label_formatter(&|x| {
            let nearest = x.round();
            if (x - nearest).abs() < 1e-6 && nearest >= 0.0 {
                names.get(nearest as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(|e| e.to_string())?;
    let colours = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
    ];
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, value))| {
            let colour = colours[i % colours.len()];
            Rectangle::new(
                [(i as f64 - 0.35, 0.0), (i as f64 + 0.35, *value)],
                colour.filled(),
            )
        }))
        .map_err(|e| e.to_string())?;
    let above = ("sans-serif", 13)
        .into_font()
        .into_text_style(area)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    chart
        .draw_series(
            bars.iter()
                .enumerate()
                .map(|(i, (_, value))| Text::new(label(*value), (i as f64, *value), &above)),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn optional_count(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn optional_bytes(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), human_bytes)
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// `123.4 MiB`-style sizes for the table.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(policy: &str, byte_hit_ratio: f64, disk_write_bytes: u64) -> PolicyReport {
        PolicyReport {
            policy: policy.to_owned(),
            requests: 1000,
            failed_requests: 0,
            hit_ratio: byte_hit_ratio,
            byte_hit_ratio,
            disk_write_objects: Some(disk_write_bytes / 100),
            disk_write_bytes: Some(disk_write_bytes),
            origin_requests: Some(500),
            origin_bytes: Some(50_000),
            admission_memory_bytes: Some(4096),
            throughput_rps: Some(1234.5),
            p50_ms: Some(0.5),
            p99_ms: Some(2.0),
            p999_ms: Some(9.0),
        }
    }

    fn report() -> Report {
        Report {
            workload: "test".into(),
            cache_size_bytes: 1 << 20,
            malformed_lines: 0,
            policies: vec![
                row("second-hit", 0.50, 40_000),
                row("always", 0.52, 100_000),
            ],
            replay: None,
        }
    }

    #[test]
    fn headline_compares_second_hit_with_always() {
        let headline = report().headline().expect("both policies ran");
        assert!(
            headline.contains("60.0% fewer disk write bytes"),
            "{headline}"
        );
        assert!(headline.contains("-2.00 points"), "{headline}");
        assert!(report().to_table().contains(&headline));
    }

    #[test]
    fn json_uses_the_documented_field_names() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("r.json");
        report().write_json(&path).expect("write json");
        let text = std::fs::read_to_string(&path).expect("read json");
        for field in [
            "policy",
            "requests",
            "hit_ratio",
            "byte_hit_ratio",
            "disk_write_objects",
            "disk_write_bytes",
            "origin_requests",
            "origin_bytes",
            "admission_memory_bytes",
            "throughput_rps",
            "p50_ms",
            "p99_ms",
            "p999_ms",
        ] {
            assert!(text.contains(&format!("\"{field}\"")), "missing {field}");
        }
    }

    #[test]
    fn svg_chart_is_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("r.svg");
        report().write_svg(&path).expect("write svg");
        let text = std::fs::read_to_string(&path).expect("read svg");
        assert!(text.starts_with("<svg") && text.contains("second-hit"));
        let report = report();
        assert!(
            text.contains(&report.workload),
            "the title names the workload"
        );
        for row in &report.policies {
            let value = format!("{:.2}%", row.byte_hit_ratio * 100.0);
            assert!(
                text.contains(&value),
                "the bar of {} says {value}",
                row.policy
            );
        }
    }

    #[test]
    fn sizes_are_human_readable() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(10 * 1024 * 1024 * 1024), "10.0 GiB");
    }
}
