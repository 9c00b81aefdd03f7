//! The estimator against full simulations (the bench's simulator, which runs the store's
//! own index and admission policies) on seeded workloads.

use std::time::{Duration, Instant};

use crate::simulate::{self, ENTRY_OVERHEAD, SimCache};
use crate::workload::{self, FewReuseSpec, SyntheticSpec, Workload};
use crate::{config_sized_to_cache, simulation_hasher};
use secondhit_proxy::config::Config;
use secondhit_tuning::*;

const FACTORS: [f64; 5] = [0.25, 0.5, 1.0, 2.0, 4.0];

/// A cache of 10% of the workload's unique bytes, with the filters sized for it: at a
/// sixteenth, the smallest miniature (a quarter of it) holds a few hundred objects.
fn setting(workload: &Workload) -> (Config, CacheShape) {
    let (_, unique) = workload.unique_objects_and_bytes();
    let max_size = unique / 10;
    let config = config_sized_to_cache(workload, max_size);
    let cache = CacheShape {
        max_size,
        max_object_size: config.cache.max_object_size,
    };
    (config, cache)
}

/// The estimator at `rate` after replaying `workload` (requests on the workload's clock).
fn estimate(workload: &Workload, rate: f64, max_keys: u64) -> Estimate {
    replay(workload, rate, max_keys, |_| {}).estimate()
}

/// An estimator of `second-hit` and `always` at `rate` and `max_keys`, which has replayed
/// `workload`; `after` sees it after each request.
fn replay(
    workload: &Workload,
    rate: f64,
    max_keys: u64,
    mut after: impl FnMut(&Estimator),
) -> Estimator {
    let (config, cache) = setting(workload);
    let hasher = simulation_hasher(&config);
    let estimator_config = EstimatorConfig {
        rate,
        max_keys,
        candidates: vec![Candidate::SECOND_HIT, Candidate::ALWAYS],
        size_factors: FACTORS.to_vec(),
        entry_overhead: ENTRY_OVERHEAD,
        ..EstimatorConfig::default()
    };
    let start = Instant::now();
    let estimator = Estimator::new(&estimator_config, &config.admission, cache, start);
    for request in &workload.requests {
        let hash = hasher.hash(&request.object.to_le_bytes());
        let now = start + Duration::from_secs_f64(request.at);
        estimator.observe(hash, request.size, now);
        after(&estimator);
    }
    estimator
}

/// The full simulation's object and byte miss ratios of `policy` at `factor` times the size.
fn simulated(workload: &Workload, policy: &str, factor: f64) -> (f64, f64) {
    let (config, cache) = setting(workload);
    let sim = SimCache {
        max_size: (cache.max_size as f64 * factor) as u64,
        max_object_size: cache.max_object_size,
    };
    let hasher = simulation_hasher(&config);
    let report = simulate::simulate(workload, policy, &config.admission, &hasher, sim)
        .expect("a known policy");
    (1.0 - report.hit_ratio, 1.0 - report.byte_hit_ratio)
}

/// The largest difference in object miss ratio between the estimate and full simulations,
/// over both policies and every size.
fn worst_object_error(workload: &Workload, estimate: &Estimate) -> f64 {
    let mut worst: f64 = 0.0;
    for (candidate, policy) in [
        (Candidate::SECOND_HIT, "second-hit"),
        (Candidate::ALWAYS, "always"),
    ] {
        for factor in FACTORS {
            let point = estimate.point(candidate, factor).expect("modelled");
            let (object, _) = simulated(workload, policy, factor);
            worst = worst.max((point.object_miss_ratio - object).abs());
        }
    }
    worst
}

fn zipf_workload() -> Workload {
    workload::synthetic(&SyntheticSpec {
        catalog: 40_000,
        requests: 400_000,
        one_hit_fraction: 0.5,
        seed: 11,
        ..SyntheticSpec::default()
    })
    .expect("valid spec")
}

#[test]
fn sampling_every_key_reproduces_the_full_simulation() {
    let workload = zipf_workload();
    let estimate = estimate(&workload, 1.0, u64::MAX);
    // Only the filters' false positives and the ghost's sharding differ.
    let worst = worst_object_error(&workload, &estimate);
    assert!(worst < 0.01, "worst object miss error {worst}");
}

#[test]
fn a_sixteenth_of_the_keys_estimates_every_size_within_five_points() {
    let workload = zipf_workload();
    let estimate = estimate(&workload, 1.0 / 16.0, u64::MAX);
    assert_eq!(estimate.rate, 1.0 / 16.0);
    // Sampling error, mostly the few hottest keys in or out of the sample: a cache not
    // scaled by the rate would be off by tens of points.
    let worst = worst_object_error(&workload, &estimate);
    assert!(worst < 0.05, "worst object miss error {worst}");
    // Written bytes are scaled back to the full traffic (within the noise of a few large
    // objects in or out of the sample; unscaled they would be a sixteenth).
    let (config, cache) = setting(&workload);
    let hasher = simulation_hasher(&config);
    let sim = SimCache {
        max_size: cache.max_size,
        max_object_size: cache.max_object_size,
    };
    let full = simulate::simulate(&workload, "always", &config.admission, &hasher, sim)
        .and_then(|r| r.disk_write_bytes)
        .expect("counted") as f64;
    let point = estimate.point(Candidate::ALWAYS, 1.0).expect("modelled");
    assert!(
        (point.written_bytes / full - 1.0).abs() < 0.25,
        "{} vs {full}",
        point.written_bytes
    );
}

#[test]
fn on_few_reuse_traffic_the_estimate_ranks_always_ahead_as_the_full_simulation_does() {
    let workload = workload::few_reuse(&FewReuseSpec {
        requests: 300_000,
        ..FewReuseSpec::default()
    })
    .expect("valid spec");
    let estimate = estimate(&workload, 1.0 / 16.0, u64::MAX);
    for factor in FACTORS {
        let second = estimate
            .point(Candidate::SECOND_HIT, factor)
            .expect("modelled");
        let always = estimate.point(Candidate::ALWAYS, factor).expect("modelled");
        let (full_second, _) = simulated(&workload, "second-hit", factor);
        let (full_always, _) = simulated(&workload, "always", factor);
        let (second, always) = (second.object_miss_ratio, always.object_miss_ratio);
        assert!(full_second > full_always + 0.02, "the workload's point");
        assert!(second > always + 0.02, "at {factor}");
        assert!((second - full_second).abs() < 0.05, "at {factor}");
        assert!((always - full_always).abs() < 0.05, "at {factor}");
    }
}

#[test]
fn a_key_budget_lowers_the_rate_and_bounds_the_keys_held() {
    let workload = zipf_workload();
    let budget = 20_000;
    let estimator = replay(&workload, 1.0 / 4.0, budget, |estimator| {
        assert!(estimator.keys_held() <= budget, "held past the budget");
    });
    assert!(
        estimator.rate() < 1.0 / 4.0,
        "the rate dropped: {}",
        estimator.rate()
    );
    let estimate = estimator.estimate();
    let worst = worst_object_error(&workload, &estimate);
    assert!(
        worst < 0.06,
        "worst object miss error {worst} at rate {}",
        estimate.rate
    );
}

#[test]
fn epochs_let_the_estimate_follow_a_change_of_traffic() {
    let config = Config::default();
    let cache = CacheShape {
        max_size: 64 * 1024 * 1024,
        max_object_size: config.cache.max_object_size,
    };
    let estimator_config = EstimatorConfig {
        rate: 1.0,
        ..EstimatorConfig::default()
    };
    let start = Instant::now();
    let estimator = Estimator::new(&estimator_config, &config.admission, cache, start);
    let hasher = simulation_hasher(&config);
    let mut key = 0u64;
    let epoch = |keys: &mut dyn FnMut() -> u64| {
        for _ in 0..10_000 {
            estimator.observe(hasher.hash(&keys().to_le_bytes()), 10_000, start);
        }
        estimator.end_epoch();
    };
    // Every request a new key: all miss.
    for _ in 0..4 {
        epoch(&mut || {
            key += 1;
            key
        });
    }
    let before = estimator.estimate();
    let always = |e: &Estimate| {
        e.point(Candidate::ALWAYS, 1.0)
            .expect("modelled")
            .object_miss_ratio
    };
    assert_eq!(always(&before), 1.0);
    // Then a hot set of a hundred keys, which every policy holds.
    let mut hot = 0u64;
    for _ in 0..4 {
        epoch(&mut || {
            hot = (hot + 1) % 100;
            u64::MAX - hot
        });
    }
    let after = always(&estimator.estimate());
    assert!(after < 0.1, "the old epochs weigh a sixteenth: {after}");
}
