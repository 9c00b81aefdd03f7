//! The first stage of `--recommend`, which `simulate --plot` and `--report` draw too: what
//! the trace holds, and every policy at cache sizes from 1% to 100% of its unique bytes.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::report::{Report, human_bytes};
use crate::simulate::{SimCache, TimePoint, simulate_over_time};
use crate::workload::Workload;
use crate::{CacheSize, config_sized_to_cache, run_simulation, simulation_hasher};
use secondhit_proxy::config::Config;

/// Cache sizes of the curve, as shares of the trace's unique bytes.
pub const CURVE_SHARES: [f64; 7] = [0.01, 0.02, 0.05, 0.10, 0.20, 0.50, 1.0];

/// Stretches of the trace's time in the hit-ratio-over-time series.
pub const TIME_STRETCHES: usize = 60;

/// What the trace holds, for the report and the fragment's comments.
#[derive(Clone, Debug, Serialize)]
pub struct TraceSummary {
    /// The workload's description.
    pub workload: String,
    /// Requests replayed.
    pub requests: u64,
    /// Distinct objects requested.
    pub objects: u64,
    /// Of them, objects requested exactly once (one-hit wonders).
    pub requested_once: u64,
    /// The sum of the distinct objects' sizes.
    pub unique_bytes: u64,
    /// Seconds from the first request to the last, on the trace's clock.
    pub span_secs: f64,
}

impl TraceSummary {
    /// Counts `workload`'s objects and how many were requested once.
    pub fn of(workload: &Workload) -> TraceSummary {
        let mut counts: HashMap<u64, (u64, u64)> = HashMap::new();
        for request in &workload.requests {
            counts.entry(request.object).or_insert((0, request.size)).0 += 1;
        }
        let (first, last) = workload
            .requests
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                (lo.min(r.at), hi.max(r.at))
            });
        TraceSummary {
            workload: workload.name.clone(),
            requests: workload.requests.len() as u64,
            objects: counts.len() as u64,
            requested_once: counts.values().filter(|(n, _)| *n == 1).count() as u64,
            unique_bytes: counts.values().map(|(_, size)| size).sum(),
            span_secs: (last - first).max(0.0),
        }
    }

    /// `2500 requests, 2050 distinct objects (97.6% requested once, 20.0 MiB), over 4h 10m`.
    pub fn describe(&self) -> String {
        format!(
            "{} requests, {} distinct objects ({:.1}% requested once, {}), over {}",
            self.requests,
            self.objects,
            100.0 * self.requested_once as f64 / self.objects.max(1) as f64,
            human_bytes(self.unique_bytes),
            humantime::format_duration(Duration::from_secs(self.span_secs as u64)),
        )
    }
}

/// The curve's cache sizes in bytes: [`CURVE_SHARES`] of `unique_bytes`, and `given`.
pub fn curve_sizes(unique_bytes: u64, given: Option<u64>) -> Vec<u64> {
    let mut sizes: Vec<u64> = CURVE_SHARES
        .iter()
        .map(|&share| CacheSize::OfUniqueBytes(share).resolve(unique_bytes))
        .chain(given)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The config `second-hit` runs with at `cache_size`: the `--config` file's, or defaults
/// with the filters sized to the objects the cache holds ([`config_sized_to_cache`]).
pub(super) fn config_at(workload: &Workload, file: Option<&Config>, cache_size: u64) -> Config {
    let mut config = file
        .cloned()
        .unwrap_or_else(|| config_sized_to_cache(workload, cache_size));
    config.cache.max_size = cache_size;
    config
}

/// Simulates every policy in `policies` at each of `sizes`: one report per size.
pub fn curve(
    workload: &Workload,
    policies: &[String],
    file: Option<&Config>,
    sizes: &[u64],
) -> Result<Vec<Report>, String> {
    sizes
        .iter()
        .map(|&size| {
            let config = config_at(workload, file, size);
            run_simulation(workload, policies, &config, CacheSize::Bytes(size))
        })
        .collect()
}

/// Each policy's hit ratio over the trace's time with `config` at `cache_size`.
pub fn timelines(
    workload: &Workload,
    policies: &[String],
    config: &Config,
    cache_size: u64,
) -> Result<Vec<(String, Vec<TimePoint>)>, String> {
    let hasher = simulation_hasher(config);
    let cache = SimCache {
        max_size: cache_size,
        max_object_size: config.cache.max_object_size,
    };
    policies
        .iter()
        .map(|name| {
            simulate_over_time(
                workload,
                name,
                &config.admission,
                &hasher,
                cache,
                TIME_STRETCHES,
            )
            .map(|(_, points)| (name.clone(), points))
            .ok_or_else(|| format!("unknown policy {name:?}"))
        })
        .collect()
}

/// `5%`: `size` as a share of `unique_bytes`.
pub(super) fn share(size: u64, unique_bytes: u64) -> String {
    let percent = 100.0 * size as f64 / unique_bytes.max(1) as f64;
    if percent >= 10.0 || (percent - percent.round()).abs() < 0.05 {
        format!("{percent:.0}%")
    } else {
        format!("{percent:.1}%")
    }
}

/// The curve as a table: byte hit ratio and disk writes per policy at each size, and
/// what `second-hit` saves against `always`.
pub(super) fn curve_table(curve: &[Report], unique_bytes: u64) -> String {
    let mut out = String::from("byte hit ratio and disk write bytes by cache size:\n");
    let Some(first) = curve.first() else {
        return out;
    };
    let _ = write!(out, "{:<20}", "cache size");
    for row in &first.policies {
        let _ = write!(
            out,
            " {:>width$}",
            row.policy,
            width = row.policy.len().max(17)
        );
    }
    let _ = writeln!(out, "  second-hit vs always");
    for report in curve {
        let _ = write!(
            out,
            "{:<20}",
            format!(
                "{:>4} {}",
                share(report.cache_size_bytes, unique_bytes),
                human_bytes(report.cache_size_bytes)
            )
        );
        for row in &report.policies {
            let cell = format!(
                "{:.2}% {:>10}",
                row.byte_hit_ratio * 100.0,
                human_bytes(row.disk_write_bytes.unwrap_or(0))
            );
            let _ = write!(out, " {:>width$}", cell, width = row.policy.len().max(17));
        }
        if let (Some(second), Some(always)) = (report.policy("second-hit"), report.policy("always"))
        {
            let (written, baseline) = (
                second.disk_write_bytes.unwrap_or(0) as f64,
                always.disk_write_bytes.unwrap_or(0).max(1) as f64,
            );
            let _ = write!(
                out,
                "  {:.1}% fewer writes, {:+.2} points",
                100.0 * (1.0 - written / baseline),
                (second.byte_hit_ratio - always.byte_hit_ratio) * 100.0
            );
        }
        out.push('\n');
    }
    out
}
