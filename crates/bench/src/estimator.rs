//! The online estimator (`tuning`) against full simulations: on a workload, for each
//! sampling rate, the estimator replays every request (as the proxy would call it, the
//! unsampled ones included) and its estimate of `second-hit` and `always` at ¼ to 4 times
//! the configured size is set beside the simulator's full run at each of those sizes.
//! With its memory and CPU time per request.
//!
//! Run with `cargo bench --bench estimator` (`-- --requests N` for a quicker look).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::simulate::{self, ENTRY_OVERHEAD, SimCache};
use super::workload::Workload;
use super::{config_sized_to_cache, simulation_hasher};
use secondhit_proxy::config::Config;
use secondhit_tuning::{CacheShape, Candidate, Estimate, Estimator, EstimatorConfig};

/// The sizes modelled, as multiples of the configured one.
pub const FACTORS: [f64; 5] = [0.25, 0.5, 1.0, 2.0, 4.0];

/// The policies compared: the candidate's name and the simulator's.
const COMPARED: [(Candidate, &str); 2] = [
    (Candidate::SECOND_HIT, "second-hit"),
    (Candidate::ALWAYS, "always"),
];

/// One policy at one size: the full simulation's miss ratios and the estimate's.
#[derive(Clone, Debug)]
pub struct Compared {
    /// The policy.
    pub policy: &'static str,
    /// The size as a share of the unique bytes.
    pub share: f64,
    /// Object and byte miss ratio of the full simulation.
    pub simulated: (f64, f64),
    /// The same, estimated.
    pub estimated: (f64, f64),
    /// Written bytes, full simulation and estimate.
    pub written: (f64, f64),
}

/// One estimator run over one workload.
#[derive(Clone, Debug)]
pub struct EstimatorRun {
    /// The rate it started at.
    pub start_rate: f64,
    /// The rate it ended at (lower when the key budget was reached).
    pub end_rate: f64,
    /// Bytes it held at the end.
    pub memory_bytes: u64,
    /// Its CPU time per request of the workload, in nanoseconds.
    pub nanos_per_request: f64,
    /// Every policy at every size.
    pub compared: Vec<Compared>,
}

/// Runs the estimator at each of `rates` (with at most `max_keys` keys) over `workload`,
/// configured for a cache of `share` of the unique bytes, and the full simulations it is
/// compared with.
pub fn measure(
    workload: &Workload,
    share: f64,
    rates: &[f64],
    max_keys: u64,
) -> Result<Vec<EstimatorRun>, String> {
    let (_, unique) = workload.unique_objects_and_bytes();
    let max_size = ((unique as f64 * share) as u64).max(1);
    let config = config_sized_to_cache(workload, max_size);
    let full = full_runs(workload, &config, max_size)?;
    Ok(rates
        .iter()
        .map(|&rate| {
            let (estimate, nanos) = run_estimator(workload, &config, max_size, rate, max_keys);
            let compared = compare(&full, &estimate, share);
            EstimatorRun {
                start_rate: rate,
                end_rate: estimate.rate,
                memory_bytes: estimate.memory_bytes,
                nanos_per_request: nanos,
                compared,
            }
        })
        .collect())
}

/// The full simulations: per compared policy and factor, (object miss, byte miss, writes).
fn full_runs(
    workload: &Workload,
    config: &Config,
    max_size: u64,
) -> Result<Vec<(f64, f64, f64)>, String> {
    let hasher = simulation_hasher(config);
    let mut runs = Vec::new();
    for (_, policy) in COMPARED {
        for factor in FACTORS {
            let cache = SimCache {
                max_size: (max_size as f64 * factor) as u64,
                max_object_size: config.cache.max_object_size,
            };
            let report = simulate::simulate(workload, policy, &config.admission, &hasher, cache)
                .ok_or_else(|| format!("unknown policy {policy}"))?;
            let written = report.disk_write_bytes.unwrap_or(0) as f64;
            runs.push((1.0 - report.hit_ratio, 1.0 - report.byte_hit_ratio, written));
        }
    }
    Ok(runs)
}

/// Replays the workload through an estimator of every default candidate; its final
/// estimate, and its CPU time per request (hashing the key not counted: the proxy has it).
fn run_estimator(
    workload: &Workload,
    config: &Config,
    max_size: u64,
    rate: f64,
    max_keys: u64,
) -> (Estimate, f64) {
    let hasher = simulation_hasher(config);
    let settings = EstimatorConfig {
        rate,
        max_keys,
        size_factors: FACTORS.to_vec(),
        entry_overhead: ENTRY_OVERHEAD,
        ..EstimatorConfig::default()
    };
    let cache = CacheShape {
        max_size,
        max_object_size: config.cache.max_object_size,
    };
    let start = Instant::now();
    let estimator = Estimator::new(&settings, &config.admission, cache, start);
    // Hashes and times made ahead, so that the timer sees the estimator alone.
    let hashes: Vec<_> = workload
        .requests
        .iter()
        .map(|r| {
            let at = start + Duration::from_secs_f64(r.at);
            (hasher.hash(&r.object.to_le_bytes()), r.size, at)
        })
        .collect();
    let timer = Instant::now();
    for &(hash, size, at) in &hashes {
        estimator.observe(hash, size, at);
    }
    let nanos = timer.elapsed().as_nanos() as f64 / hashes.len().max(1) as f64;
    let estimate = estimator.estimate();
    debug_assert_eq!(estimate.rate, estimator.rate());
    (estimate, nanos)
}

/// The estimate set beside the full runs (in [`full_runs`]' order).
fn compare(full: &[(f64, f64, f64)], estimate: &Estimate, share: f64) -> Vec<Compared> {
    let mut compared = Vec::new();
    for (i, (candidate, policy)) in COMPARED.iter().enumerate() {
        for (j, factor) in FACTORS.iter().enumerate() {
            let (object, byte, written) = full[i * FACTORS.len() + j];
            let Some(point) = estimate.point(*candidate, *factor) else {
                continue;
            };
            compared.push(Compared {
                policy,
                share: share * factor,
                simulated: (object, byte),
                estimated: (point.object_miss_ratio, point.byte_miss_ratio),
                written: (written, point.written_bytes),
            });
        }
    }
    compared
}

/// The runs of one workload as a table: per rate, each policy and size with the errors
/// in points, then the worst error, the memory and the time per request.
pub fn render(label: &str, runs: &[EstimatorRun]) -> String {
    let mut out = format!("{label}\n");
    let _ = writeln!(
        out,
        "{:<8} {:<11} {:>7} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>8}",
        "rate",
        "policy",
        "cache",
        "obj sim",
        "obj est",
        "err",
        "byte sim",
        "byte est",
        "err",
        "writes"
    );
    for run in runs {
        for c in &run.compared {
            let _ = writeln!(
                out,
                "1/{:<6} {:<11} {:>6}% {:>9.4} {:>9.4} {:>+7.2} {:>9.4} {:>9.4} {:>+7.2} {:>7.3}x",
                (1.0 / run.start_rate).round(),
                c.policy,
                c.share * 100.0,
                c.simulated.0,
                c.estimated.0,
                (c.estimated.0 - c.simulated.0) * 100.0,
                c.simulated.1,
                c.estimated.1,
                (c.estimated.1 - c.simulated.1) * 100.0,
                c.written.1 / c.written.0.max(1.0),
            );
        }
        let _ = writeln!(out, "{}", summary(run));
    }
    out
}

/// One run's worst errors, memory and time.
fn summary(run: &EstimatorRun) -> String {
    let worst =
        |f: fn(&Compared) -> f64| run.compared.iter().map(f).fold(0.0_f64, f64::max) * 100.0;
    let object = worst(|c| (c.estimated.0 - c.simulated.0).abs());
    let byte = worst(|c| (c.estimated.1 - c.simulated.1).abs());
    let mean = run
        .compared
        .iter()
        .map(|c| (c.estimated.0 - c.simulated.0).abs())
        .sum::<f64>()
        / run.compared.len().max(1) as f64
        * 100.0;
    format!(
        "  rate 1/{} (ended 1/{}): object miss error mean {mean:.2}, worst {object:.2} points; byte miss worst {byte:.2}; memory {}; {:.0} ns per request",
        (1.0 / run.start_rate).round(),
        (1.0 / run.end_rate).round(),
        super::report::human_bytes(run.memory_bytes),
        run.nanos_per_request
    )
}
