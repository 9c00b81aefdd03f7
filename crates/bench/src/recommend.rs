//! `secondhit simulate --recommend`: from an operator's own trace to a config fragment.
//!
//! Three stages of simulations over the whole trace, each choosing one thing:
//! 1. **The curve**: every policy at cache sizes from 1% to 100% of the trace's unique bytes
//!    (and the `--cache-size` given, if any), `second-hit`'s filters sized to the objects
//!    each size holds, as a run without `--config` sizes them. The cache size is the one given,
//!    or else the smallest on the curve where `second-hit` has [`KNEE`] of the byte hit
//!    ratio it has with a cache that holds every object: past it, more disk buys little.
//! 2. **The generation** at that size: `expected_urls` from a quarter of to four times the
//!    objects the cache holds (`rotate = "fill"`), and `rotate = "auto"`.
//! 3. **`max_age`** with that generation, from 5 minutes to a day.
//!
//! Stages 2 and 3 choose, among the settings within [`TIE`] of the best byte hit ratio,
//! the one that writes the fewest bytes to disk (on equal writes the first listed, the
//! smaller): a difference under [`TIE`] is within what the filters' false positives move,
//! and disk writes are what admission is for. One stage at a time rather than every
//! combination: each stage's choice barely moves the next one's, at a fraction of the runs.
//!
//! Last ([`policy`]), `second-hit` with the chosen settings is set against `auto` (the
//! same filters, switched by its estimates each `admission.auto_epoch` of the trace's
//! clock) and `always` at the same size, and the same rule chooses among the three; a
//! write budget comes with a policy that writes more than a small share of `always`'s
//! bytes.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::report::{PolicyReport, Report, human_bytes};
use super::workload::Workload;
use super::{CacheSize, SweepRow, run_settings, run_simulation};
use secondhit_proxy::config::{Config, FilterSizing, MaxObjectSize, RotateMode};

mod curve;
mod fragment;
mod object_limit;
pub mod policy;

pub use curve::{CURVE_SHARES, TIME_STRETCHES, TraceSummary, curve, curve_sizes, timelines};
use curve::{config_at, curve_table, share};
pub use object_limit::ObjectLimit;
use policy::{Proposed, WriteBudget};

/// The share of `second-hit`'s byte hit ratio at the largest size the chosen size must reach.
pub const KNEE: f64 = 0.9;

/// Byte-hit-ratio differences below this (a quarter of a percentage point) count as equal.
pub const TIE: f64 = 0.0025;

/// `expected_urls` candidates, as multiples of the objects the cache holds.
const GENERATION_MULTIPLES: [f64; 5] = [0.25, 0.5, 1.0, 2.0, 4.0];

/// `max_age` candidates, in seconds: 5 minutes to a day.
const MAX_AGES: [u64; 7] = [300, 900, 1800, 3600, 7200, 21_600, 86_400];

/// Everything `--recommend` found, and the config it chose.
#[derive(Clone, Debug, Serialize)]
pub struct Recommendation {
    /// What the trace holds.
    pub trace: TraceSummary,
    /// Every policy at each cache size of the curve.
    pub curve: Vec<Report>,
    /// The chosen cache size in bytes.
    pub cache_size: u64,
    /// Why that size.
    pub cache_size_reason: String,
    /// What `cache.max_object_size` keeps out at that size, and the limit chosen.
    pub object_limit: ObjectLimit,
    /// `second-hit` with each generation candidate at the chosen size; the chosen one best.
    pub generation: Vec<SweepRow>,
    /// `second-hit` with each `max_age` candidate; the chosen one best.
    pub max_age: Vec<SweepRow>,
    /// Why that `max_age` (when the trace could not tell them apart).
    pub max_age_reason: Option<String>,
    /// `second-hit` with the chosen settings.
    pub second_hit: PolicyReport,
    /// `always` at the chosen size.
    pub always: PolicyReport,
    /// `second-hit`, `auto` and `always` at the chosen size, the proposed one best.
    pub policies: Vec<SweepRow>,
    /// What `auto` did over the trace: epochs, switches, requests under `always`.
    pub auto_run: crate::simulate::AutoRun,
    /// The policy proposed.
    pub policy: Proposed,
    /// The write budget proposed with it.
    pub write_budget: WriteBudget,
    /// The published policy the simulator runs (`s3fifo`, `sieve`, `w-tinylfu`) with the
    /// best byte hit ratio at the chosen size: what a better eviction could get there.
    pub published: Option<PolicyReport>,
    /// The chosen `expected_urls` (the generation, or with `rotate = "auto"` its cap).
    pub expected_urls: u64,
    /// The chosen config: `[cache]` and `[admission]` as the fragment writes them.
    #[serde(skip)]
    pub config: Config,
    /// The config fragment, ready to merge into a config file.
    pub fragment: String,
}

/// Runs the three stages over `workload` (see the module doc). `given` is the
/// `--cache-size` the operator set, `file` the `--config` file; `policies` (which must
/// include `second-hit` and `always`) are drawn on the curve.
pub fn recommend(
    workload: &Workload,
    policies: &[String],
    file: Option<&Config>,
    given: Option<CacheSize>,
) -> Result<Recommendation, String> {
    for needed in ["second-hit", "always"] {
        if !policies.iter().any(|p| p == needed) {
            return Err(format!(
                "--recommend compares second-hit with always: keep {needed} in --policies"
            ));
        }
    }
    let trace = TraceSummary::of(workload);
    let given = given.map(|size| size.resolve(trace.unique_bytes));
    let curve = curve(
        workload,
        policies,
        file,
        &curve_sizes(trace.unique_bytes, given),
    )?;
    let (cache_size, cache_size_reason) = choose_cache_size(&curve, given, trace.unique_bytes);

    let mut base = config_at(workload, file, cache_size);
    let object_limit = object_limit::examine(workload, &base, cache_size)?;
    let limit_raised = object_limit.chosen != object_limit.limit;
    if limit_raised {
        base.cache.max_object_size = MaxObjectSize::Bytes(object_limit.chosen);
    }
    let (generation, sized, expected_urls) = generation_stage(workload, &base, cache_size)?;
    let (max_age, config, second_hit, max_age_reason) =
        max_age_stage(workload, sized, cache_size, &generation, &trace)?;
    let always = always_at(workload, &curve, &config, cache_size, limit_raised)?;
    let published = best_published(workload, &config, cache_size)?;
    let stage = policy::choose(workload, &config, cache_size, &second_hit, &always)?;
    let mut recommendation = Recommendation {
        trace,
        curve,
        cache_size,
        cache_size_reason,
        object_limit,
        generation,
        max_age,
        max_age_reason,
        second_hit,
        always,
        policies: stage.rows,
        auto_run: stage.auto_run,
        policy: stage.proposed,
        write_budget: stage.budget,
        published,
        expected_urls,
        config,
        fragment: String::new(),
    };
    recommendation.fragment = fragment::write(&recommendation);
    Ok(recommendation)
}

/// The `always` row at `cache_size`: the curve's, or run again under `config` when the
/// object size limit was raised (the curve's ran under the old limit).
fn always_at(
    workload: &Workload,
    curve: &[Report],
    config: &Config,
    cache_size: u64,
    limit_raised: bool,
) -> Result<PolicyReport, String> {
    let always = if limit_raised {
        let report = run_simulation(
            workload,
            &["always".to_owned()],
            config,
            CacheSize::Bytes(cache_size),
        )?;
        report.policy("always").cloned()
    } else {
        curve
            .iter()
            .find(|report| report.cache_size_bytes == cache_size)
            .and_then(|report| report.policy("always"))
            .cloned()
    };
    always.ok_or_else(|| "no always row at the chosen size".to_owned())
}

/// Stage 2: `second-hit` with each generation candidate at `cache_size` (see the module
/// doc); the rows, the chosen config and its `expected_urls`.
fn generation_stage(
    workload: &Workload,
    base: &Config,
    cache_size: u64,
) -> Result<(Vec<SweepRow>, Config, u64), String> {
    let held = objects_held(workload, cache_size);
    let mut candidates: Vec<u64> = GENERATION_MULTIPLES
        .iter()
        .map(|&multiple| ((held as f64 * multiple) as u64).max(1))
        .collect();
    candidates.dedup();
    let largest = candidates.last().copied().unwrap_or(held);
    let mut settings: Vec<(String, Config, CacheSize)> = candidates
        .iter()
        .map(|&n| {
            let mut config = base.clone();
            config.admission.sizing = FilterSizing::ExpectedUrls(n);
            config.admission.rotate = RotateMode::Fill;
            (
                format!("expected_urls={n}"),
                config,
                CacheSize::Bytes(cache_size),
            )
        })
        .collect();
    let mut auto = base.clone();
    auto.admission.sizing = FilterSizing::ExpectedUrls(largest);
    auto.admission.rotate = RotateMode::Auto;
    settings.push((
        format!("rotate=auto, expected_urls={largest}"),
        auto,
        CacheSize::Bytes(cache_size),
    ));
    let configs: Vec<Config> = settings.iter().map(|(_, c, _)| c.clone()).collect();
    let mut generation = run_settings(workload, settings)?;
    let chosen = mark_choice(&mut generation);
    let sized = configs[chosen].clone();
    let expected_urls = candidates.get(chosen).copied().unwrap_or(largest);

    Ok((generation, sized, expected_urls))
}

/// What stage 3 found: its rows, the chosen config, `second-hit`'s result with it, and why
/// `max_age` was kept when the trace could not tell the candidates apart.
type MaxAgeFound = (Vec<SweepRow>, Config, PolicyReport, Option<String>);

/// Stage 3: `second-hit` with each `max_age` candidate, on the generation chosen before.
fn max_age_stage(
    workload: &Workload,
    sized: Config,
    cache_size: u64,
    generation: &[SweepRow],
    trace: &TraceSummary,
) -> Result<MaxAgeFound, String> {
    let settings: Vec<(String, Config, CacheSize)> = MAX_AGES
        .iter()
        .map(|&secs| {
            let mut config = sized.clone();
            config.admission.max_age = Duration::from_secs(secs);
            (
                format!(
                    "max_age={}",
                    humantime::format_duration(config.admission.max_age)
                ),
                config,
                CacheSize::Bytes(cache_size),
            )
        })
        .collect();
    let configs: Vec<Config> = settings.iter().map(|(_, c, _)| c.clone()).collect();
    let mut max_age = run_settings(workload, settings)?;
    let all_alike = max_age.windows(2).all(|pair| {
        (
            pair[0].result.byte_hit_ratio,
            pair[0].result.disk_write_bytes,
        ) == (
            pair[1].result.byte_hit_ratio,
            pair[1].result.disk_write_bytes,
        )
    });
    let (config, second_hit, max_age_reason) = if all_alike {
        // A trace shorter than the shortest candidate's generations cannot tell them
        // apart; choosing the shortest would then be a guess dressed as a finding.
        let config = sized.clone();
        let reason = format!(
            "every max_age gave the same result on this trace (it spans {}), so it keeps {}",
            humantime::format_duration(Duration::from_secs(trace.span_secs as u64)),
            humantime::format_duration(config.admission.max_age)
        );
        let same = generation
            .iter()
            .find(|row| row.best)
            .map(|row| row.result.clone())
            .ok_or("no generation was chosen")?;
        (config, same, Some(reason))
    } else {
        let chosen = mark_choice(&mut max_age);
        (
            configs[chosen].clone(),
            max_age[chosen].result.clone(),
            None,
        )
    };
    Ok((max_age, config, second_hit, max_age_reason))
}

/// Of the published policies the simulator runs, the one with the best byte hit ratio at
/// `cache_size`.
fn best_published(
    workload: &Workload,
    config: &Config,
    cache_size: u64,
) -> Result<Option<PolicyReport>, String> {
    let names: Vec<String> = PUBLISHED.iter().map(|&name| name.to_owned()).collect();
    let report = run_simulation(workload, &names, config, CacheSize::Bytes(cache_size))?;
    Ok(report
        .policies
        .into_iter()
        .max_by(|a, b| a.byte_hit_ratio.total_cmp(&b.byte_hit_ratio)))
}

/// The published policies `--recommend` sets second-hit against.
const PUBLISHED: [&str; 3] = ["s3fifo", "sieve", "w-tinylfu"];

impl Recommendation {
    /// True when `second-hit` loses more than [`TIE`] of byte hit ratio to `always`.
    pub fn second_hit_costs_hits(&self) -> bool {
        self.always.byte_hit_ratio - self.second_hit.byte_hit_ratio > TIE
    }

    /// The report: the curve, the two candidate tables, the verdict (no fragment).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "workload: {}", self.trace.workload);
        let _ = writeln!(out, "trace: {}\n", self.trace.describe());
        out.push_str(&curve_table(&self.curve, self.trace.unique_bytes));
        if let Some(note) = self.crossover() {
            let _ = writeln!(out, "{note}");
        }
        let _ = writeln!(
            out,
            "\ncache size {}: {}\n",
            human_bytes(self.cache_size),
            self.cache_size_reason
        );
        let why = format!(
            "chosen: the fewest disk write bytes within {:.2} points of the best byte hit ratio",
            TIE * 100.0
        );
        let _ = writeln!(out, "{}.", self.object_limit.describe());
        if !self.object_limit.rows.is_empty() {
            let _ = writeln!(out, "\nthe object limit at that size:");
            out.push_str(&super::sweep_table_noting(&self.object_limit.rows, &why));
            if self.object_limit.chosen != self.object_limit.limit {
                let _ = writeln!(
                    out,
                    "  the stages below use max_object_size = {}; the curve and the cache size \
                     above were simulated under the configured limit: run --recommend again \
                     with it in --config to see the curve under the new one",
                    human_bytes(self.object_limit.chosen)
                );
            }
            out.push('\n');
        }
        let _ = writeln!(out, "the filter's generation at that size:");
        out.push_str(&super::sweep_table_noting(&self.generation, &why));
        let _ = writeln!(out, "\nmax_age with that generation:");
        match &self.max_age_reason {
            Some(reason) => {
                out.push_str(&super::sweep_table_noting(&self.max_age, reason));
            }
            None => out.push_str(&super::sweep_table_noting(&self.max_age, &why)),
        }
        let _ = writeln!(out, "\nthe policy at that size:");
        out.push_str(&super::sweep_table_noting(&self.policies, &why));
        let _ = writeln!(out, "\n{}", self.verdict());
        out
    }

    /// From which size on the curve `always` gets more byte hits than `second-hit`, if any.
    pub fn crossover(&self) -> Option<String> {
        crossover(&self.curve, self.trace.unique_bytes)
    }

    /// One sentence: which policy is recommended, and what it saves or costs.
    pub fn verdict(&self) -> String {
        fragment::verdict(self)
    }
}

/// Marks and returns the row to choose: within [`TIE`] of the best byte hit ratio, the
/// fewest disk write bytes, the first listed on equal writes.
fn mark_choice(rows: &mut [SweepRow]) -> usize {
    let best = rows
        .iter()
        .map(|row| row.result.byte_hit_ratio)
        .fold(f64::NEG_INFINITY, f64::max);
    let chosen = rows
        .iter()
        .enumerate()
        .filter(|(_, row)| best - row.result.byte_hit_ratio <= TIE)
        .min_by_key(|(index, row)| (row.result.disk_write_bytes.unwrap_or(0), *index))
        .map_or(0, |(index, _)| index);
    for (index, row) in rows.iter_mut().enumerate() {
        row.best = index == chosen;
    }
    chosen
}

/// About how many objects a cache of `cache_size` holds (cache size / mean object size),
/// as [`super::config_sized_to_cache`] counts them.
fn objects_held(workload: &Workload, cache_size: u64) -> u64 {
    let (objects, unique_bytes) = workload.unique_objects_and_bytes();
    let mean = (unique_bytes / objects.max(1)).max(1);
    (cache_size / mean).max(1)
}

/// `policy`'s byte hit ratio in `report` (0 when it did not run).
fn byte_hit_ratio(report: &Report, policy: &str) -> f64 {
    report.policy(policy).map_or(0.0, |row| row.byte_hit_ratio)
}

/// The cache size: `given`, or the smallest on the curve where `second-hit` has [`KNEE`]
/// of the byte hit ratio it has at the largest size; and why, with the numbers.
///
/// `second-hit`'s own curve, not the best of all policies': `always` keeps gaining far
/// past the point where the objects requested again fit (it fills the cache with the
/// one-hit wonders too), so its curve would choose caches of half the unique bytes, where
/// it beats `second-hit` because the cache is large, not because the traffic calls for it.
fn choose_cache_size(curve: &[Report], given: Option<u64>, unique_bytes: u64) -> (u64, String) {
    if let Some(size) = given {
        return (
            size,
            format!(
                "the --cache-size given ({} of the trace's unique bytes)",
                share(size, unique_bytes)
            ),
        );
    }
    let attainable = curve
        .last()
        .map_or(0.0, |report| byte_hit_ratio(report, "second-hit"));
    let knee = curve
        .iter()
        .find(|report| byte_hit_ratio(report, "second-hit") >= KNEE * attainable)
        .or(curve.last());
    match knee {
        Some(report) => (
            report.cache_size_bytes,
            format!(
                "{} of the trace's unique bytes, the smallest size simulated where second-hit \
                 has {:.0}% of the byte hit ratio it has with the largest ({:.2}% of {:.2}%); \
                 give --cache-size for the size of your disk",
                share(report.cache_size_bytes, unique_bytes),
                KNEE * 100.0,
                byte_hit_ratio(report, "second-hit") * 100.0,
                attainable * 100.0
            ),
        ),
        None => (unique_bytes, "the trace's unique bytes".to_owned()),
    }
}

/// Where on the curve `always` starts to get more byte hits than `second-hit`, if it does:
/// a cache that large keeps the one-hit wonders' bytes and still holds what is requested
/// again, and `second-hit` only pays its one extra miss per object.
fn crossover(curve: &[Report], unique_bytes: u64) -> Option<String> {
    let report = curve.iter().find(|report| {
        byte_hit_ratio(report, "always") - byte_hit_ratio(report, "second-hit") > TIE
    })?;
    Some(format!(
        "From {} of the unique bytes ({}) on, always gets more byte hits than second-hit: a \
         cache that large holds the one-hit wonders as well as the objects requested again, \
         and second-hit only pays its extra miss per object.",
        share(report.cache_size_bytes, unique_bytes),
        human_bytes(report.cache_size_bytes)
    ))
}

#[cfg(test)]
mod tests;
