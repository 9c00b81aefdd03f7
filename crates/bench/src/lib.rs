//! The bench harness and the offline simulator: what admission saves, on traffic like yours.
//!
//! - [`workload`]: seeded synthetic CDN traffic, or an operator's access log / CSV trace.
//! - [`synthetic_origin`]: the synthetic origin server the HTTP bench puts behind the proxy,
//!   `/obj/<id>/<size>` bodies cacheable for an hour.
//! - [`policies`]: `second-hit`, `auto`, `always`, and the bench-only `exact-second-hit` reference.
//! - [`driver`]: the HTTP bench, driving the real proxy over loopback.
//! - [`replay`]: `bench --target`, an access log's own requests sent to a running proxy.
//! - [`simulate`]: the same policies and the store's own index, without HTTP or disk.
//! - [`reference`](mod@reference): the simulator's reference caches, `s3fifo`, `sieve`, `w-tinylfu` and `lru`.
//! - [`report`]: the per-policy table, JSON and SVG chart, and the headline.
//! - [`goal`]: the goal table, `second-hit` beside the published policies on the synthetic
//!   CDN and few-reuse workloads at five cache sizes (`cargo bench --bench goal_table`).
//! - [`estimator`]: the online estimator's error against full simulations
//!   (`cargo bench --bench estimator`).
//! - [`recommend`]: `simulate --recommend`, from a trace to a config fragment, and the
//!   hit-ratio curve over cache sizes it (and `simulate --plot`) is based on.
//! - [`plot`]: `simulate --plot`, that curve and the hit ratio over the trace's time as SVG.
//! - [`html`]: `simulate --report`, the tables and the picture as one self-contained page.
//! - [`cli`]: the arguments of the two commands.
//!
//! `secondhit bench` ([`run_bench`]) and `secondhit simulate` ([`run_simulation`],
//! [`run_sweep`]) share the workload and policy code: one implementation of each.

pub mod cli;
pub mod driver;
pub mod estimator;
pub mod goal;
pub mod html;
pub mod plot;
pub mod policies;
pub mod recommend;
pub mod reference;
pub mod replay;
pub mod report;
pub mod simulate;
pub mod synthetic_origin;
pub mod workload;

use std::path::PathBuf;
use std::str::FromStr;

use driver::{BenchError, DriveOptions};
use report::{PolicyReport, Report};
use secondhit_admission::FilterHasher;
use secondhit_proxy::config::Config;
use simulate::SimCache;
use workload::{SyntheticSpec, Workload, WorkloadError};

/// Where a workload comes from.
#[derive(Clone, Debug)]
pub enum WorkloadSource {
    /// Generated from a seeded spec.
    Synthetic(SyntheticSpec),
    /// Read from a trace file: an access log, a CSV or a public trace format, in the format
    /// given or detected.
    Trace(PathBuf, Option<workload::TraceFormat>),
}

impl WorkloadSource {
    /// Builds or reads the workload.
    pub fn load(&self) -> Result<Workload, WorkloadError> {
        match self {
            WorkloadSource::Synthetic(spec) => workload::synthetic(spec),
            WorkloadSource::Trace(path, format) => workload::from_trace_as(path, *format),
        }
    }
}

/// The cache size every policy gets: bytes, or a share of the workload's unique bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheSize {
    /// An absolute budget in bytes.
    Bytes(u64),
    /// A fraction (0, 1] of the sum of the distinct objects' sizes.
    OfUniqueBytes(f64),
}

impl FromStr for CacheSize {
    type Err = String;

    /// `"5%"` or a size such as `"512MiB"` or `"1000000"`.
    fn from_str(text: &str) -> Result<CacheSize, String> {
        let text = text.trim();
        if let Some(percent) = text.strip_suffix('%') {
            return match percent.trim().parse::<f64>() {
                Ok(p) if p > 0.0 && p <= 100.0 => Ok(CacheSize::OfUniqueBytes(p / 100.0)),
                _ => Err(format!("{text:?}: a percentage must be in (0, 100]")),
            };
        }
        match text.parse::<bytesize::ByteSize>() {
            Ok(size) if size.as_u64() > 0 => Ok(CacheSize::Bytes(size.as_u64())),
            _ => Err(format!(
                "{text:?} is neither a percentage (\"5%\") nor a size (\"512MiB\")"
            )),
        }
    }
}

impl CacheSize {
    /// The budget in bytes for a workload with `unique_bytes` of distinct objects.
    pub fn resolve(self, unique_bytes: u64) -> u64 {
        match self {
            CacheSize::Bytes(bytes) => bytes,
            CacheSize::OfUniqueBytes(fraction) => ((unique_bytes as f64 * fraction) as u64).max(1),
        }
    }
}

/// Everything `secondhit bench` needs besides the workload.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The cache size of every policy.
    pub cache_size: CacheSize,
    /// Policies to compare, in order (see [`policies::POLICY_NAMES`]).
    pub policies: Vec<String>,
    /// Concurrency and progress display.
    pub drive: DriveOptions,
    /// The proxy's config (the `[admission]` section sizes `second-hit`).
    pub config: Config,
}

/// Runs the HTTP bench: each policy in turn against a fresh proxy.
pub async fn run_bench(workload: &Workload, options: &BenchOptions) -> Result<Report, BenchError> {
    let (_, unique_bytes) = workload.unique_objects_and_bytes();
    let cache_size = options.cache_size.resolve(unique_bytes);
    let mut rows = Vec::new();
    for name in &options.policies {
        rows.push(
            driver::run_policy(workload, name, &options.config, cache_size, &options.drive).await?,
        );
    }
    Ok(Report {
        workload: workload.name.clone(),
        cache_size_bytes: cache_size,
        malformed_lines: workload.malformed_lines,
        policies: rows,
        replay: None,
    })
}

/// `expected_urls` per object a cache holds in [`config_sized_to_cache`]: twice the most
/// `rotate = "auto"` takes ([`secondhit_admission::AUTO_KEYS_PER_OBJECT`]), so that the cap
/// leaves auto room when the cached objects are smaller than the workload's mean.
const EXPECTED_URLS_PER_OBJECT: u64 = 2 * secondhit_admission::AUTO_KEYS_PER_OBJECT;

/// The default config (`rotate = "auto"`) with the filters sized for a cache of `cache_size`
/// bytes: `expected_urls`, the largest generation, is `EXPECTED_URLS_PER_OBJECT` times the
/// objects such a cache holds for this workload (cache size / mean object size), at least
/// 1,000. Auto then sizes each generation as in the proxy, and the admission memory
/// reported is what that cache needs, not the million keys of the default `expected_urls`.
pub fn config_sized_to_cache(workload: &Workload, cache_size: u64) -> Config {
    let mut config = Config::default();
    let (objects, unique_bytes) = workload.unique_objects_and_bytes();
    let mean_object = (unique_bytes / objects.max(1)).max(1);
    let held = cache_size / mean_object;
    config.admission.sizing = secondhit_proxy::config::FilterSizing::ExpectedUrls(
        held.saturating_mul(EXPECTED_URLS_PER_OBJECT).max(1_000),
    );
    config
}

/// Runs the simulator once per policy over `workload` with a budget of `cache_size`.
pub fn run_simulation(
    workload: &Workload,
    policy_names: &[String],
    config: &Config,
    cache_size: CacheSize,
) -> Result<Report, String> {
    let (_, unique_bytes) = workload.unique_objects_and_bytes();
    let cache = SimCache {
        max_size: cache_size.resolve(unique_bytes),
        max_object_size: config.cache.max_object_size,
    };
    let hasher = simulation_hasher(config);
    let rows = policy_names
        .iter()
        .map(|name| {
            simulate::simulate(workload, name, &config.admission, &hasher, cache)
                .ok_or_else(|| format!("unknown policy {name:?}"))
        })
        .collect::<Result<Vec<PolicyReport>, String>>()?;
    Ok(Report {
        workload: workload.name.clone(),
        cache_size_bytes: cache.max_size,
        malformed_lines: workload.malformed_lines,
        policies: rows,
        replay: None,
    })
}

/// The filter seed a simulation uses: the configured one, or a fixed one (results must be
/// reproducible, and a simulation has no cache directory to keep a generated seed in).
pub(crate) fn simulation_hasher(config: &Config) -> FilterHasher {
    let seed = config
        .admission
        .seed
        .as_deref()
        .unwrap_or("secondhit simulate");
    FilterHasher::new(xxhash_rust::xxh3::xxh3_64(seed.as_bytes()))
}

/// A setting `simulate --sweep` varies.
#[derive(Clone, Debug, PartialEq)]
pub enum Sweep {
    /// `expected_urls=100000,1000000`: the filter's generation size.
    ExpectedUrls(Vec<u64>),
    /// `cache_size=1%,5%,1GiB`: the byte budget.
    CacheSize(Vec<CacheSize>),
    /// `max_age=10m,1h`: the longest a filter generation lasts, on the workload's clock.
    MaxAge(Vec<std::time::Duration>),
}

impl FromStr for Sweep {
    type Err = String;

    fn from_str(text: &str) -> Result<Sweep, String> {
        let (name, values) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: expected NAME=V1,V2,..."))?;
        let values: Vec<&str> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            return Err(format!("{text:?}: no values to sweep"));
        }
        match name.trim() {
            "expected_urls" => values
                .iter()
                .map(|v| {
                    v.parse::<u64>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| format!("expected_urls: {v:?} is not a count > 0"))
                })
                .collect::<Result<_, _>>()
                .map(Sweep::ExpectedUrls),
            "cache_size" => values
                .iter()
                .map(|v| v.parse())
                .collect::<Result<_, _>>()
                .map(Sweep::CacheSize),
            "max_age" => values
                .iter()
                .map(|v| {
                    humantime::parse_duration(v)
                        .ok()
                        .filter(|d| !d.is_zero())
                        .ok_or_else(|| {
                            format!("max_age: {v:?} is not a duration > 0 (\"10m\", \"1h\")")
                        })
                })
                .collect::<Result<_, _>>()
                .map(Sweep::MaxAge),
            other => Err(format!(
                "cannot sweep {other:?}: use expected_urls, max_age or cache_size"
            )),
        }
    }
}

/// One row of a sweep: the setting and what `second-hit` did with it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepRow {
    /// The setting, as `name=value`.
    pub setting: String,
    /// The simulated `second-hit` run.
    pub result: PolicyReport,
    /// True for the row with the highest byte hit ratio (fewest disk write bytes on a tie).
    pub best: bool,
}

/// Simulates `second-hit` once per value of `sweep` and marks the best row.
pub fn run_sweep(
    workload: &Workload,
    config: &Config,
    cache_size: CacheSize,
    sweep: &Sweep,
) -> Result<Vec<SweepRow>, String> {
    let settings: Vec<(String, Config, CacheSize)> = match sweep {
        Sweep::ExpectedUrls(values) => values
            .iter()
            .map(|&n| {
                let mut config = config.clone();
                config.admission.sizing = secondhit_proxy::config::FilterSizing::ExpectedUrls(n);
                (format!("expected_urls={n}"), config, cache_size)
            })
            .collect(),
        Sweep::MaxAge(values) => values
            .iter()
            .map(|&max_age| {
                let mut config = config.clone();
                config.admission.max_age = max_age;
                (
                    format!("max_age={}", humantime::format_duration(max_age)),
                    config,
                    cache_size,
                )
            })
            .collect(),
        Sweep::CacheSize(values) => values
            .iter()
            .map(|&size| {
                (
                    format!("cache_size={}", describe(size)),
                    config.clone(),
                    size,
                )
            })
            .collect(),
    };
    let mut rows = run_settings(workload, settings)?;
    let best = rows.iter().enumerate().max_by(|(_, a), (_, b)| {
        a.result
            .byte_hit_ratio
            .total_cmp(&b.result.byte_hit_ratio)
            .then(b.result.disk_write_bytes.cmp(&a.result.disk_write_bytes))
    });
    if let Some((index, _)) = best {
        rows[index].best = true;
    }
    Ok(rows)
}

/// Simulates `second-hit` once per `(setting, config, cache size)`; no row is marked best.
fn run_settings(
    workload: &Workload,
    settings: Vec<(String, Config, CacheSize)>,
) -> Result<Vec<SweepRow>, String> {
    let second_hit = ["second-hit".to_owned()];
    settings
        .into_iter()
        .map(|(setting, config, size)| {
            let mut report = run_simulation(workload, &second_hit, &config, size)?;
            let result = report.policies.remove(0);
            Ok(SweepRow {
                setting,
                result,
                best: false,
            })
        })
        .collect()
}

fn describe(size: CacheSize) -> String {
    match size {
        CacheSize::Bytes(bytes) => report::human_bytes(bytes),
        CacheSize::OfUniqueBytes(fraction) => format!("{}%", fraction * 100.0),
    }
}

/// The sweep as a table, best row marked with `*`.
pub fn sweep_table(rows: &[SweepRow]) -> String {
    sweep_table_noting(
        rows,
        "best byte hit ratio (fewest disk write bytes on a tie)",
    )
}

/// The sweep as a table, the row marked best with `*` and `why` said under it.
fn sweep_table_noting(rows: &[SweepRow], why: &str) -> String {
    let mut out = format!(
        "{:<2}{:<34} {:>7} {:>7} {:>11} {:>11} {:>10}\n",
        "", "setting", "hit%", "byte%", "disk objs", "disk bytes", "adm mem"
    );
    for row in rows {
        let r = &row.result;
        out.push_str(&format!(
            "{:<2}{:<34} {:>7.2} {:>7.2} {:>11} {:>11} {:>10}\n",
            if row.best { "*" } else { "" },
            row.setting,
            r.hit_ratio * 100.0,
            r.byte_hit_ratio * 100.0,
            r.disk_write_objects.unwrap_or(0),
            report::human_bytes(r.disk_write_bytes.unwrap_or(0)),
            report::human_bytes(r.admission_memory_bytes.unwrap_or(0)),
        ));
    }
    out.push_str(&format!("* {why}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_as_percentages_or_sizes() {
        assert_eq!("5%".parse(), Ok(CacheSize::OfUniqueBytes(0.05)));
        assert_eq!("512MiB".parse(), Ok(CacheSize::Bytes(512 * 1024 * 1024)));
        assert_eq!("1000".parse(), Ok(CacheSize::Bytes(1000)));
        assert!("0%".parse::<CacheSize>().is_err());
        assert!("150%".parse::<CacheSize>().is_err());
        assert!("lots".parse::<CacheSize>().is_err());
        assert_eq!(CacheSize::OfUniqueBytes(0.5).resolve(1000), 500);
    }

    #[test]
    fn sweeps_parse_and_reject_unknown_settings() {
        assert_eq!(
            "expected_urls=10,20".parse(),
            Ok(Sweep::ExpectedUrls(vec![10, 20]))
        );
        assert_eq!(
            "cache_size=1%,2GiB"
                .parse::<Sweep>()
                .map(|s| matches!(s, Sweep::CacheSize(v) if v.len() == 2)),
            Ok(true)
        );
        assert_eq!(
            "max_age=10m,1h"
                .parse::<Sweep>()
                .map(|s| matches!(s, Sweep::MaxAge(v) if v.len() == 2)),
            Ok(true)
        );
        assert!("max_age=soon".parse::<Sweep>().is_err());
        assert!("rate=5".parse::<Sweep>().is_err());
        assert!("expected_urls=0".parse::<Sweep>().is_err());
        assert!("expected_urls".parse::<Sweep>().is_err());
    }

    #[test]
    fn a_sweep_marks_exactly_one_best_row() {
        let spec = SyntheticSpec {
            catalog: 1_000,
            requests: 20_000,
            ..SyntheticSpec::default()
        };
        let workload = workload::synthetic(&spec).expect("valid spec");
        let sweep = Sweep::ExpectedUrls(vec![100, 1_000, 100_000]);
        let rows = run_sweep(
            &workload,
            &Config::default(),
            CacheSize::OfUniqueBytes(0.05),
            &sweep,
        )
        .expect("sweep runs");
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.iter().filter(|r| r.best).count(), 1);
        assert!(sweep_table(&rows).contains("expected_urls=1000"));
    }
}

#[cfg(test)]
mod estimates_tests;
