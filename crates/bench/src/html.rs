//! `secondhit simulate --report FILE.html`: the tables and the picture of a simulation as
//! one self-contained page to share with a team. Its only style is inline, it has no
//! script, and the picture is inline SVG, so it opens anywhere without a network.

use std::fmt::Write as _;

use super::SweepRow;
use super::recommend::Recommendation;
use super::report::{PolicyReport, Report, human_bytes};

/// What one page shows.
pub struct Page<'a> {
    /// The workload's description.
    pub workload: &'a str,
    /// The sum of the distinct objects' sizes (the curve's 100%).
    pub unique_bytes: u64,
    /// Every policy at each cache size.
    pub curve: &'a [Report],
    /// The picture, an SVG document.
    pub svg: &'a str,
    /// A plain run: every policy at `--cache-size`.
    pub run: Option<&'a Report>,
    /// A `--recommend` run: its choices, tables and fragment.
    pub recommendation: Option<&'a Recommendation>,
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1250px;\
padding:0 1rem;color:#222}table{border-collapse:collapse;margin:0.5rem 0 1.5rem;\
font-variant-numeric:tabular-nums}th,td{border:1px solid #ccc;padding:0.25rem 0.6rem;\
text-align:right}td{white-space:nowrap}th:first-child,td:first-child{text-align:left}tr.chosen{background:#e8f1fa;\
font-weight:600}pre{background:#f6f6f6;padding:1rem;overflow-x:auto}\
figure{margin:0}figure svg{max-width:100%;height:auto}";

/// The page as HTML.
pub fn render(page: &Page) -> String {
    let mut out = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>secondhit simulate: {workload}</title><style>{STYLE}</style></head><body>\n\
         <h1>secondhit simulate</h1>\n<p id=\"workload\">{workload}</p>\n",
        workload = escape(page.workload)
    );
    if let Some(recommendation) = page.recommendation {
        let _ = writeln!(
            out,
            "<p>{}</p>\n<h2>Recommendation</h2>\n<p id=\"verdict\">{}</p>\n<p>Cache size {}: {}</p>",
            escape(&recommendation.trace.describe()),
            escape(&recommendation.verdict()),
            human_bytes(recommendation.cache_size),
            escape(&recommendation.cache_size_reason)
        );
        if let Some(note) = recommendation.crossover() {
            let _ = writeln!(out, "<p>{}</p>", escape(&note));
        }
        let _ = writeln!(
            out,
            "<h3>Config fragment</h3>\n<pre id=\"fragment\">{}</pre>",
            escape(&recommendation.fragment)
        );
    }
    if let Some(run) = page.run {
        let _ = writeln!(
            out,
            "<h2>The policies with a cache of {}</h2>",
            human_bytes(run.cache_size_bytes)
        );
        policies_table(&mut out, &run.policies);
        if let Some(headline) = run.headline() {
            let _ = writeln!(out, "<p>{}</p>", escape(&headline));
        }
    }
    let _ = writeln!(
        out,
        "<h2>Pictures</h2>\n<figure id=\"picture\">{}</figure>",
        page.svg
    );
    curve_table(&mut out, page.curve, page.unique_bytes);
    if let Some(recommendation) = page.recommendation {
        let _ = writeln!(
            out,
            "<h2>The filter's generation at {}</h2>",
            human_bytes(recommendation.cache_size)
        );
        sweep_table(&mut out, &recommendation.generation);
        out.push_str("<h2>max_age with that generation</h2>\n");
        sweep_table(&mut out, &recommendation.max_age);
        if let Some(reason) = &recommendation.max_age_reason {
            let _ = writeln!(out, "<p>{}</p>", escape(reason));
        }
    }
    out.push_str("</body></html>\n");
    out
}

/// One row per policy: what it did at one cache size.
fn policies_table(out: &mut String, rows: &[PolicyReport]) {
    out.push_str(
        "<table id=\"policies\"><tr><th>policy</th><th>hit ratio</th><th>byte hit ratio</th>\
         <th>disk writes</th><th>disk write bytes</th><th>origin requests</th>\
         <th>admission memory</th></tr>\n",
    );
    for row in rows {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{:.2}%</td><td>{:.2}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&row.policy),
            row.hit_ratio * 100.0,
            row.byte_hit_ratio * 100.0,
            row.disk_write_objects.unwrap_or(0),
            human_bytes(row.disk_write_bytes.unwrap_or(0)),
            row.origin_requests.unwrap_or(0),
            human_bytes(row.admission_memory_bytes.unwrap_or(0)),
        );
    }
    out.push_str("</table>\n");
}

/// Byte hit ratio and disk write bytes per policy at each cache size.
fn curve_table(out: &mut String, curve: &[Report], unique_bytes: u64) {
    let Some(first) = curve.first() else {
        return;
    };
    out.push_str("<h2>By cache size</h2>\n<table id=\"curve\"><tr><th>cache size</th>");
    for row in &first.policies {
        let policy = escape(&row.policy);
        let _ = write!(
            out,
            "<th>{policy} byte hit ratio</th><th>{policy} disk writes</th>"
        );
    }
    out.push_str("</tr>\n");
    for report in curve {
        let _ = write!(
            out,
            "<tr><td>{:.1}% ({})</td>",
            100.0 * report.cache_size_bytes as f64 / unique_bytes.max(1) as f64,
            human_bytes(report.cache_size_bytes)
        );
        for row in &report.policies {
            let _ = write!(
                out,
                "<td>{:.2}%</td><td>{}</td>",
                row.byte_hit_ratio * 100.0,
                human_bytes(row.disk_write_bytes.unwrap_or(0))
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// A sweep's rows, the chosen one highlighted.
fn sweep_table(out: &mut String, rows: &[SweepRow]) {
    out.push_str(
        "<table class=\"sweep\"><tr><th>setting</th><th>hit ratio</th><th>byte hit ratio</th>\
         <th>disk writes</th><th>disk write bytes</th></tr>\n",
    );
    for row in rows {
        let r = &row.result;
        let _ = writeln!(
            out,
            "<tr{}><td>{}{}</td><td>{:.2}%</td><td>{:.2}%</td><td>{}</td><td>{}</td></tr>",
            if row.best { " class=\"chosen\"" } else { "" },
            escape(&row.setting),
            if row.best { " (chosen)" } else { "" },
            r.hit_ratio * 100.0,
            r.byte_hit_ratio * 100.0,
            r.disk_write_objects.unwrap_or(0),
            human_bytes(r.disk_write_bytes.unwrap_or(0)),
        );
    }
    out.push_str("</table>\n");
}

/// `text` safe as HTML element content or a quoted attribute value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("trace: <a&b>\"x\".log"),
            "trace: &lt;a&amp;b&gt;&quot;x&quot;.log"
        );
    }
}
