//! Workloads for the bench harness and the simulator: seeded synthetic CDN traffic, or a
//! replay of an operator's own access log.
//!
//! A workload is a sequence of [`Request`]s, each naming an object (a 64-bit id) and its
//! size. The HTTP bench turns a request into the path `/obj/<id>/<size>` (the synthetic
//! origin reads the size from the path); the simulator uses the id directly.
//!
//! # Synthetic traffic
//! CDN request streams mix a popular catalog, whose popularity follows a Zipf law, with a
//! long tail of objects requested exactly once — "one-hit wonders", about three quarters
//! of the distinct objects at Akamai's edges (Maggs & Sitaraman, SIGCOMM CCR 2015). The
//! generator draws each request either from a Zipf catalog or as a brand-new object, with
//! the probability of the latter chosen so that one-hit wonders make up
//! `one_hit_fraction` of the distinct objects requested. Object sizes are lognormal
//! (default median 16 KiB, mean 48 KiB, so σ² = 2 ln(mean/median)), drawn once per object
//! from a generator seeded by the object id, so an object always has the same size.
//!
//! # Trace replay
//! An nginx/Apache access log in common or combined format (the request target and the
//! response size fields are used; only GET and HEAD lines count), a CSV of
//! `timestamp,key,size`, libCacheSim's `oracleGeneral` binary or Twitter's cache-trace CSV
//! (see [`trace`]). A malformed line is skipped and counted, never a panic. An access log
//! can also be read as the requests its clients sent ([`requests_from_trace`]), for
//! `bench --target` to send them again (`bench::replay`).

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal, Zipf};
use xxhash_rust::xxh3::xxh3_64;

pub mod few_reuse;
pub mod trace;

pub use few_reuse::{FewReuseSpec, few_reuse};
pub use trace::{
    LoggedRequest, RequestLog, TraceFormat, detect_format, from_trace, from_trace_as,
    parse_oracle_general, parse_request_log, parse_trace, requests_from_trace,
};

/// One request of a workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// The object requested (ids are opaque; equal ids are the same object).
    pub object: u64,
    /// The object's body size in bytes.
    pub size: u64,
    /// When the request was made, in seconds on the workload's own clock (only differences
    /// matter): the trace's timestamps, or the synthetic workload's steady request rate.
    pub at: f64,
}

impl Request {
    /// The URL path the HTTP bench requests: `/obj/<id in hex>/<size>`.
    pub fn path(&self) -> String {
        format!("/obj/{:016x}/{}", self.object, self.size)
    }
}

/// A sequence of requests with a description and what it took to read it.
#[derive(Clone, Debug)]
pub struct Workload {
    /// What the workload is, for reports.
    pub name: String,
    /// The requests, in order.
    pub requests: Vec<Request>,
    /// Trace lines skipped because they could not be parsed (0 for synthetic workloads).
    pub malformed_lines: u64,
    /// Trace lines skipped because they are not GET/HEAD requests.
    pub ignored_lines: u64,
}

impl Workload {
    /// Distinct objects requested, and the sum of their sizes.
    pub fn unique_objects_and_bytes(&self) -> (u64, u64) {
        let mut seen: HashMap<u64, u64> = HashMap::with_capacity(self.requests.len() / 2);
        for request in &self.requests {
            seen.entry(request.object).or_insert(request.size);
        }
        (seen.len() as u64, seen.values().sum())
    }
}

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A parameter of the synthetic workload is out of range.
    #[error("workload parameter {name}: {reason}")]
    Parameter {
        /// The parameter (the command-line flag without dashes).
        name: &'static str,
        /// The rule broken.
        reason: String,
    },
    /// The trace file cannot be read.
    #[error("cannot read trace {}: {source}", path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The trace records keys and sizes, not HTTP requests, so it cannot be replayed.
    #[error(
        "trace {} ({}) holds no HTTP requests to replay against --target, only keys and sizes: \
         replay an access log (common or combined format, or secondhit's JSON log), or use \
         this trace with `secondhit simulate` or the bench without --target",
        path.display(),
        format.name()
    )]
    NoRequests {
        /// The trace file.
        path: PathBuf,
        /// Its format.
        format: TraceFormat,
    },
    /// The trace holds no usable request.
    #[error("trace {} has no usable request ({malformed} malformed lines, {ignored} ignored)", path.display())]
    EmptyTrace {
        /// The trace file.
        path: PathBuf,
        /// Lines that could not be parsed.
        malformed: u64,
        /// Lines that were not GET/HEAD requests.
        ignored: u64,
    },
}

/// Parameters of the synthetic workload.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSpec {
    /// Objects in the popular (Zipf) catalog.
    pub catalog: u64,
    /// Zipf exponent of the catalog's popularity.
    pub zipf_exponent: f64,
    /// Fraction of the distinct objects requested that are one-hit wonders.
    pub one_hit_fraction: f64,
    /// Median object size in bytes.
    pub median_size: u64,
    /// Mean object size in bytes (must exceed the median: the lognormal's right skew).
    pub mean_size: u64,
    /// Largest object size generated (the lognormal tail is cut here).
    pub max_size: u64,
    /// Requests in the workload.
    pub requests: u64,
    /// Seed of every random choice: the same spec gives the same requests.
    pub seed: u64,
    /// Requests per second on the workload's clock (the simulator's `max_age` runs on it).
    pub rate: f64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec {
            // Sized so that `secondhit bench` takes about a minute on a 2-core machine.
            catalog: 12_000,
            zipf_exponent: 0.9,
            one_hit_fraction: 0.7,
            median_size: 16 * 1024,
            mean_size: 48 * 1024,
            max_size: 16 * 1024 * 1024,
            requests: 60_000,
            seed: 1,
            rate: 1_000.0,
        }
    }
}

/// Builds the synthetic workload described by `spec`.
pub fn synthetic(spec: &SyntheticSpec) -> Result<Workload, WorkloadError> {
    check_spec(spec)?;
    let zipf = Zipf::new(spec.catalog as f64, spec.zipf_exponent)
        .map_err(|e| parameter("zipf-exponent", format!("{e}")))?;
    let sizes = SizeModel::new(spec)?;
    let wonder_probability = wonder_probability(spec);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut next_wonder = spec.catalog;
    let requests = (0..spec.requests)
        .map(|index| {
            let object = if rng.random_bool(wonder_probability) {
                next_wonder += 1;
                next_wonder
            } else {
                // Zipf samples lie in 1..=catalog; ids 0..catalog are the popular objects.
                zipf.sample(&mut rng) as u64 - 1
            };
            // Mix the seed in so that two seeds give unrelated object ids and sizes.
            let object = xxh3_64(&[object.to_le_bytes(), spec.seed.to_le_bytes()].concat());
            Request {
                object,
                size: sizes.size_of(object),
                at: index as f64 / spec.rate,
            }
        })
        .collect();
    Ok(Workload {
        name: format!(
            "synthetic: {} requests, catalog {}, zipf {}, one-hit {:.0}%, seed {}",
            spec.requests,
            spec.catalog,
            spec.zipf_exponent,
            spec.one_hit_fraction * 100.0,
            spec.seed
        ),
        requests,
        malformed_lines: 0,
        ignored_lines: 0,
    })
}

fn parameter(name: &'static str, reason: String) -> WorkloadError {
    WorkloadError::Parameter { name, reason }
}

fn check_spec(spec: &SyntheticSpec) -> Result<(), WorkloadError> {
    if spec.catalog == 0 {
        return Err(parameter("catalog", "must be at least 1".into()));
    }
    if spec.requests == 0 {
        return Err(parameter("requests", "must be at least 1".into()));
    }
    if !(spec.zipf_exponent.is_finite() && spec.zipf_exponent >= 0.0) {
        return Err(parameter(
            "zipf-exponent",
            "must be a finite number >= 0".into(),
        ));
    }
    if !(0.0..1.0).contains(&spec.one_hit_fraction) {
        return Err(parameter("one-hit-fraction", "must be in [0, 1)".into()));
    }
    if spec.median_size == 0 || spec.mean_size <= spec.median_size {
        return Err(parameter(
            "mean-size",
            "must exceed the median size, which must be > 0".into(),
        ));
    }
    if !(spec.rate.is_finite() && spec.rate > 0.0) {
        return Err(parameter(
            "rate",
            "must be a number of requests per second > 0".into(),
        ));
    }
    if spec.max_size < spec.median_size {
        return Err(parameter(
            "max-size",
            "must be at least the median size".into(),
        ));
    }
    Ok(())
}

/// Lognormal object sizes, drawn once per object.
struct SizeModel {
    distribution: LogNormal<f64>,
    max_size: u64,
    seed: u64,
}

impl SizeModel {
    fn new(spec: &SyntheticSpec) -> Result<SizeModel, WorkloadError> {
        SizeModel::lognormal(spec.median_size, spec.mean_size, spec.max_size, spec.seed)
    }

    /// Lognormal sizes of the given median and mean, cut at `max_size`, drawn per object
    /// from a generator seeded by the object id and `seed`.
    fn lognormal(
        median: u64,
        mean: u64,
        max_size: u64,
        seed: u64,
    ) -> Result<SizeModel, WorkloadError> {
        // median = e^μ and mean = e^(μ + σ²/2), so σ² = 2 ln(mean / median).
        let mu = (median as f64).ln();
        let sigma = (2.0 * (mean as f64 / median as f64).ln()).sqrt();
        let distribution =
            LogNormal::new(mu, sigma).map_err(|e| parameter("mean-size", format!("{e}")))?;
        Ok(SizeModel {
            distribution,
            max_size,
            seed,
        })
    }

    fn size_of(&self, object: u64) -> u64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(object ^ self.seed.rotate_left(32));
        (self.distribution.sample(&mut rng) as u64).clamp(1, self.max_size)
    }
}

/// The per-request probability of a new one-hit wonder that makes wonders `one_hit_fraction`
/// of the distinct objects: with W = qR wonders and D(m) distinct catalog objects after
/// m = (1-q)R Zipf draws, solve W / (W + D) = f for q by bisection (the left side grows with q).
fn wonder_probability(spec: &SyntheticSpec) -> f64 {
    let f = spec.one_hit_fraction;
    if f == 0.0 {
        return 0.0;
    }
    let harmonic: f64 = (1..=spec.catalog)
        .map(|i| (i as f64).powf(-spec.zipf_exponent))
        .sum();
    let expected_distinct = |draws: f64| -> f64 {
        (1..=spec.catalog)
            .map(|i| 1.0 - (1.0 - (i as f64).powf(-spec.zipf_exponent) / harmonic).powf(draws))
            .sum()
    };
    let requests = spec.requests as f64;
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    for _ in 0..40 {
        let q = (low + high) / 2.0;
        let wonders = q * requests;
        let share =
            wonders / (wonders + expected_distinct((1.0 - q) * requests)).max(f64::MIN_POSITIVE);
        if share < f {
            low = q;
        } else {
            high = q;
        }
    }
    (low + high) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_spec() -> SyntheticSpec {
        SyntheticSpec {
            catalog: 2_000,
            requests: 40_000,
            ..SyntheticSpec::default()
        }
    }

    #[test]
    fn synthetic_workload_is_reproducible_and_seed_dependent() {
        let a = synthetic(&small_spec()).expect("valid spec");
        let b = synthetic(&small_spec()).expect("valid spec");
        assert_eq!(a.requests, b.requests);
        let c = synthetic(&SyntheticSpec {
            seed: 2,
            ..small_spec()
        })
        .expect("valid spec");
        assert_ne!(a.requests, c.requests);
        assert_eq!(a.requests.len(), 40_000);
    }

    #[test]
    fn one_hit_wonders_make_up_the_requested_fraction() {
        let workload = synthetic(&small_spec()).expect("valid spec");
        let mut counts: HashMap<u64, u32> = HashMap::new();
        for request in &workload.requests {
            *counts.entry(request.object).or_insert(0) += 1;
        }
        let once = counts.values().filter(|&&n| n == 1).count() as f64;
        let share = once / counts.len() as f64;
        // Popular objects requested once add a little to the wonders' 70%.
        assert!((0.68..0.80).contains(&share), "one-hit share {share}");
    }

    #[test]
    fn sizes_are_lognormal_with_the_requested_median_and_mean() {
        let spec = SyntheticSpec {
            one_hit_fraction: 0.9,
            requests: 200_000,
            ..small_spec()
        };
        let workload = synthetic(&spec).expect("valid spec");
        // Over distinct objects: repeats of popular objects would weight a few sizes.
        let distinct: HashMap<u64, u64> = workload
            .requests
            .iter()
            .map(|r| (r.object, r.size))
            .collect();
        let mut sizes: Vec<u64> = distinct.into_values().collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2] as f64;
        let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
        assert!((median / 16_384.0 - 1.0).abs() < 0.05, "median {median}");
        assert!((mean / 49_152.0 - 1.0).abs() < 0.10, "mean {mean}");
        let object = workload.requests[0].object;
        assert!(
            workload
                .requests
                .iter()
                .filter(|r| r.object == object)
                .all(|r| r.size == workload.requests[0].size)
        );
    }

    #[test]
    fn bad_parameters_name_the_parameter() {
        for (spec, name) in [
            (
                SyntheticSpec {
                    catalog: 0,
                    ..small_spec()
                },
                "catalog",
            ),
            (
                SyntheticSpec {
                    one_hit_fraction: 1.0,
                    ..small_spec()
                },
                "one-hit-fraction",
            ),
            (
                SyntheticSpec {
                    mean_size: 1_000,
                    ..small_spec()
                },
                "mean-size",
            ),
            (
                SyntheticSpec {
                    zipf_exponent: f64::NAN,
                    ..small_spec()
                },
                "zipf-exponent",
            ),
        ] {
            let error = synthetic(&spec).expect_err("invalid spec").to_string();
            assert!(error.contains(name), "{error}");
        }
    }
}
