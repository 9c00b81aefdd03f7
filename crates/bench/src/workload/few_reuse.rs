//! Few-reuse traffic: about half the distinct objects are requested once, and each of the
//! others a few times (3–4 by default), its repeats close together.
//!
//! Large CDNs see traffic classes like this (downloads and media segments fetched a few
//! times by one client or a handful, then never again), and it is where storing on the
//! second request costs the most: a reused object's first request is always a miss under
//! any policy, and `second-hit` adds a second one, which a cache that stores first sights
//! turns into a hit when the repeat comes soon. The Zipf workloads of
//! [`super::synthetic`] have no such class: their reused objects come back many times or
//! after long gaps.
//!
//! Each request is either a repeat that has come due or a new object. A new object is a
//! one-hit wonder with probability `one_hit_fraction`; otherwise it draws its number of
//! requests uniformly from `repeats` and schedules each next one a lognormal number of
//! requests later (median `gap_median`, shape `gap_sigma`): the reuse distance. Repeats
//! due at the same position queue up behind each other. Sizes are the lognormal sizes of
//! [`super::synthetic`], drawn once per object.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::RangeInclusive;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal};
use xxhash_rust::xxh3::xxh3_64;

use super::{Request, SizeModel, SyntheticSpec, Workload, WorkloadError, check_spec, parameter};

/// Parameters of a few-reuse workload.
#[derive(Clone, Debug, PartialEq)]
pub struct FewReuseSpec {
    /// Requests in the workload.
    pub requests: u64,
    /// Fraction of the distinct objects requested exactly once.
    pub one_hit_fraction: f64,
    /// How many requests a reused object gets, drawn uniformly from this range (each ≥ 2).
    pub repeats: RangeInclusive<u32>,
    /// Median reuse distance, in requests between two requests of one object.
    pub gap_median: f64,
    /// Shape (σ) of the lognormal reuse distance: larger, a longer tail of late repeats.
    pub gap_sigma: f64,
    /// Median object size in bytes.
    pub median_size: u64,
    /// Mean object size in bytes (above the median).
    pub mean_size: u64,
    /// Largest object size generated.
    pub max_size: u64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Requests per second on the workload's clock.
    pub rate: f64,
}

impl Default for FewReuseSpec {
    fn default() -> Self {
        let sizes = SyntheticSpec::default();
        FewReuseSpec {
            requests: 60_000,
            one_hit_fraction: 0.5,
            repeats: 3..=4,
            gap_median: 500.0,
            gap_sigma: 1.0,
            median_size: sizes.median_size,
            mean_size: sizes.mean_size,
            max_size: sizes.max_size,
            seed: sizes.seed,
            rate: sizes.rate,
        }
    }
}

/// Builds the few-reuse workload described by `spec`.
pub fn few_reuse(spec: &FewReuseSpec) -> Result<Workload, WorkloadError> {
    check(spec)?;
    let sizes = SizeModel::lognormal(spec.median_size, spec.mean_size, spec.max_size, spec.seed)?;
    let gaps = LogNormal::new(spec.gap_median.ln(), spec.gap_sigma)
        .map_err(|e| parameter("gap-sigma", format!("{e}")))?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    // Repeats to come: (position due, object, requests left after that one).
    let mut due: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::new();
    let mut next_object = 0u64;
    let mut requests = Vec::with_capacity(spec.requests as usize);
    for index in 0..spec.requests {
        let (object, left) = match due.peek() {
            Some(&Reverse((at, object, left))) if at <= index => {
                due.pop();
                (object, left)
            }
            _ => {
                next_object += 1;
                let object =
                    xxh3_64(&[next_object.to_le_bytes(), spec.seed.to_le_bytes()].concat());
                let left = if rng.random_bool(spec.one_hit_fraction) {
                    0
                } else {
                    rng.random_range(spec.repeats.clone()) - 1
                };
                (object, left)
            }
        };
        if left > 0 {
            let gap = gaps.sample(&mut rng).round().max(1.0) as u64;
            due.push(Reverse((index + gap, object, left - 1)));
        }
        requests.push(Request {
            object,
            size: sizes.size_of(object),
            at: index as f64 / spec.rate,
        });
    }
    Ok(Workload {
        name: describe(spec),
        requests,
        malformed_lines: 0,
        ignored_lines: 0,
    })
}

/// The workload's name in reports.
fn describe(spec: &FewReuseSpec) -> String {
    format!(
        "few-reuse: {} requests, one-hit {:.0}%, {}-{} requests per reused object, gap median {} (sigma {}), seed {}",
        spec.requests,
        spec.one_hit_fraction * 100.0,
        spec.repeats.start(),
        spec.repeats.end(),
        spec.gap_median,
        spec.gap_sigma,
        spec.seed
    )
}

/// Checks the parameters; the sizes, rate and count as [`super::synthetic`] checks them.
fn check(spec: &FewReuseSpec) -> Result<(), WorkloadError> {
    check_spec(&SyntheticSpec {
        requests: spec.requests,
        median_size: spec.median_size,
        mean_size: spec.mean_size,
        max_size: spec.max_size,
        rate: spec.rate,
        ..SyntheticSpec::default()
    })?;
    if !(0.0..1.0).contains(&spec.one_hit_fraction) {
        return Err(parameter("one-hit-fraction", "must be in [0, 1)".into()));
    }
    if *spec.repeats.start() < 2 || spec.repeats.is_empty() {
        return Err(parameter(
            "repeats",
            "a reused object has at least 2 requests, and the range is not empty".into(),
        ));
    }
    if !(spec.gap_median.is_finite() && spec.gap_median >= 1.0) {
        return Err(parameter("gap-median", "must be at least 1 request".into()));
    }
    if !(spec.gap_sigma.is_finite() && spec.gap_sigma >= 0.0) {
        return Err(parameter(
            "gap-sigma",
            "must be a finite number >= 0".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn half_the_objects_come_once_and_the_rest_three_or_four_times_soon_after() {
        let spec = FewReuseSpec {
            requests: 100_000,
            ..FewReuseSpec::default()
        };
        let workload = few_reuse(&spec).expect("valid spec");
        assert_eq!(workload.requests.len(), 100_000);
        let mut seen: HashMap<u64, (u32, usize, Vec<usize>)> = HashMap::new();
        for (i, request) in workload.requests.iter().enumerate() {
            let (count, last, gaps) = seen.entry(request.object).or_insert((0, i, Vec::new()));
            if *count > 0 {
                gaps.push(i - *last);
            }
            *count += 1;
            *last = i;
        }
        // Objects first requested in the last tenth may not have had all their repeats.
        let counts: Vec<u32> = seen.values().map(|(count, _, _)| *count).collect();
        let once = counts.iter().filter(|&&n| n == 1).count() as f64 / counts.len() as f64;
        assert!((0.48..0.56).contains(&once), "one-hit share {once}");
        assert!(counts.iter().all(|&n| n <= 4), "at most four requests each");
        let reused = counts.iter().filter(|&&n| n >= 3).count() as f64 / counts.len() as f64;
        assert!(
            reused > 0.40,
            "reused objects mostly get 3-4 requests: {reused}"
        );
        let mut gaps: Vec<usize> = seen.values().flat_map(|(_, _, g)| g.clone()).collect();
        gaps.sort_unstable();
        let median = gaps[gaps.len() / 2] as f64;
        assert!(
            (400.0..650.0).contains(&median),
            "median reuse distance {median}"
        );
    }

    #[test]
    fn the_same_spec_gives_the_same_requests_and_bad_parameters_are_named() {
        let a = few_reuse(&FewReuseSpec::default()).expect("valid spec");
        let b = few_reuse(&FewReuseSpec::default()).expect("valid spec");
        assert_eq!(a.requests, b.requests);
        let bad = FewReuseSpec {
            repeats: 1..=3,
            ..FewReuseSpec::default()
        };
        let error = few_reuse(&bad)
            .expect_err("one request is no reuse")
            .to_string();
        assert!(error.contains("repeats"), "{error}");
    }
}
