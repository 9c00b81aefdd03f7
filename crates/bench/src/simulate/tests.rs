use super::*;

/// One request per second for each object in `objects`, each of 1000 bytes.
fn workload(objects: &[u64]) -> Workload {
    workload_of(objects, 1000)
}

/// One request per second for each object in `objects`, each of `size` bytes.
fn workload_of(objects: &[u64], size: u64) -> Workload {
    Workload {
        name: "test".into(),
        requests: (0u32..)
            .zip(objects)
            .map(|(second, &object)| Request {
                object,
                size,
                at: f64::from(second),
            })
            .collect(),
        malformed_lines: 0,
        ignored_lines: 0,
    }
}

const ROOMY: SimCache = SimCache {
    max_size: 1 << 30,
    max_object_size: MaxObjectSize::Bytes(1 << 20),
};

fn run(objects: &[u64], policy: &str, config: &AdmissionConfig, cache: SimCache) -> PolicyReport {
    simulate(
        &workload(objects),
        policy,
        config,
        &FilterHasher::new(1),
        cache,
    )
    .expect("known policy")
}

#[test]
fn always_stores_on_first_sight_and_second_hit_on_the_second() {
    let config = AdmissionConfig::default();
    let always = run(&[1, 1, 1, 2], "always", &config, ROOMY);
    assert_eq!(
        (always.disk_write_objects, always.origin_requests),
        (Some(2), Some(2))
    );
    assert!((always.hit_ratio - 0.5).abs() < 1e-9);
    let exact = run(&[1, 1, 1, 2], "exact-second-hit", &config, ROOMY);
    // 1: miss (first sight), miss (stored), hit; 2: miss (first sight).
    assert_eq!(
        (exact.disk_write_objects, exact.origin_requests),
        (Some(1), Some(3))
    );
    assert_eq!(exact.disk_write_bytes, Some(1000));
    assert!(
        simulate(
            &workload(&[1]),
            "nope",
            &config,
            &FilterHasher::new(1),
            ROOMY
        )
        .is_none()
    );
}

#[test]
fn the_budget_evicts_entries_not_hit_first() {
    // Room for two entries: 1 and 2 stored, 1 hit; 3 puts 1 back (spending its hit)
    // and evicts 2, so 1 still hits.
    let cache = SimCache {
        max_size: 2 * (1000 + ENTRY_OVERHEAD),
        max_object_size: MaxObjectSize::Bytes(1 << 20),
    };
    let report = run(
        &[1, 2, 1, 3, 1, 2],
        "always",
        &AdmissionConfig::default(),
        cache,
    );
    // Hits: the second and third requests of 1. Misses: 1, 2, 3, and 2 again.
    assert_eq!(report.origin_requests, Some(4));
    assert_eq!(report.disk_write_objects, Some(4));
}

#[test]
fn objects_over_the_size_limit_are_never_stored() {
    let cache = SimCache {
        max_size: 1 << 30,
        max_object_size: MaxObjectSize::Bytes(999),
    };
    let report = run(&[1, 1], "always", &AdmissionConfig::default(), cache);
    assert_eq!(report.disk_write_objects, Some(0));
    assert_eq!(report.hit_ratio, 0.0);
    let reference = run(&[1, 1], "s3fifo", &AdmissionConfig::default(), cache);
    assert_eq!(
        reference.disk_write_objects,
        Some(0),
        "a named size binds all"
    );
}

#[test]
fn the_auto_limit_binds_the_proxys_policies_not_the_references() {
    // "auto" allows an eighth of a cache of 8 MiB or more: 2 MiB here.
    const LIMIT: u64 = 2 * 1024 * 1024;
    let cache = SimCache {
        max_size: 8 * LIMIT,
        max_object_size: MaxObjectSize::Auto,
    };
    let config = AdmissionConfig::default();
    let replay = |size: u64, policy: &str| {
        let objects = workload_of(&[1, 1, 1], size);
        simulate(&objects, policy, &config, &FilterHasher::new(1), cache)
            .expect("known policy")
            .disk_write_objects
    };
    for policy in ["always", "second-hit"] {
        assert_eq!(replay(LIMIT + 1, policy), Some(0), "{policy}");
        // Stored on first (always) or second sight.
        assert_eq!(replay(LIMIT, policy), Some(1), "{policy}");
    }
    // A reference cache gets no limit (`lru`: S3-FIFO's small queue, a tenth of the cache,
    // could not take an eighth of it anyway).
    assert_eq!(replay(LIMIT + 1, "lru"), Some(1));
}

#[test]
fn the_time_series_splits_the_trace_and_adds_up_to_the_totals() {
    // Four requests of object 1 at t = 0..3: stretches [0, 1.5) and [1.5, 3].
    let (report, points) = simulate_over_time(
        &workload(&[1, 1, 1, 1]),
        "always",
        &AdmissionConfig::default(),
        &FilterHasher::new(1),
        ROOMY,
        2,
    )
    .expect("known policy");
    assert_eq!(points.len(), 2);
    assert_eq!((points[0].requests, points[0].hits), (2, 1));
    assert_eq!((points[1].requests, points[1].hits), (2, 2));
    assert_eq!(points[1].until, 3.0);
    assert_eq!(points.iter().map(|p| p.hit_bytes).sum::<u64>(), 3000);
    assert!((report.hit_ratio - 0.75).abs() < 1e-9);
}

#[test]
fn timestamps_ages_apart_do_not_overflow_the_clock() {
    let mut requests = workload(&[1, 1, 2]);
    requests.requests[1].at = 1e300;
    requests.requests[2].at = -1e300;
    let (report, points) = simulate_over_time(
        &requests,
        "second-hit",
        &AdmissionConfig::default(),
        &FilterHasher::new(1),
        ROOMY,
        4,
    )
    .expect("known policy");
    assert_eq!(report.requests, 3);
    assert_eq!(points.iter().map(|p| p.requests).sum::<u64>(), 3);
}

#[test]
fn max_age_runs_on_the_workload_clock() {
    // Object 1 at t=0 and t=1: admitted. Object 2 at t=2 and again at t=3602: after more
    // than two max_age rotations it is a first sight again.
    let config = AdmissionConfig {
        max_age: Duration::from_secs(1000),
        ..AdmissionConfig::default()
    };
    let mut requests = workload(&[1, 1, 2, 2]);
    requests.requests[3].at = 3602.0;
    let report = simulate(
        &requests,
        "second-hit",
        &config,
        &FilterHasher::new(1),
        ROOMY,
    )
    .expect("known policy");
    assert_eq!(
        report.disk_write_objects,
        Some(1),
        "only object 1 is stored"
    );
}

/// `auto` with epochs of `epoch_secs` on the workload's clock (one request a second).
fn auto_config(epoch_secs: u64) -> AdmissionConfig {
    AdmissionConfig {
        auto_epoch: Duration::from_secs(epoch_secs),
        ..AdmissionConfig::default()
    }
}

/// A cache of `entries` entries of 1000-byte bodies.
fn cache_of(entries: u64) -> SimCache {
    SimCache {
        max_size: entries * (1000 + ENTRY_OVERHEAD),
        max_object_size: MaxObjectSize::Bytes(1 << 20),
    }
}

#[test]
fn auto_switches_to_always_where_objects_come_back_a_few_times_soon() {
    // Each object requested three times within a few requests, a one-hit wonder between:
    // second-hit misses two of three requests of each, always one.
    let objects: Vec<u64> = (0..3_000u64)
        .flat_map(|object| [object, 1_000_000 + object, object, object])
        .collect();
    let cache = cache_of(100);
    let config = auto_config(200);
    let workload = workload(&objects);
    let (auto, run) = simulate_auto(&workload, &config, &FilterHasher::new(1), cache);
    let second_hit = run_on(&workload, "second-hit", &config, cache);
    let always = run_on(&workload, "always", &config, cache);
    assert!(always.hit_ratio > second_hit.hit_ratio + 0.2, "{always:?}");
    assert_eq!(
        run.epochs,
        11_999 / 200,
        "an epoch ends every 200 s of the clock"
    );
    assert!(run.switches >= 1, "{run:?}");
    // It ran second-hit until the estimates had led by the margin two epochs running.
    assert!(run.requests_as_always >= 12_000 - 4 * 200, "{run:?}");
    assert!(auto.hit_ratio > second_hit.hit_ratio + 0.2, "{auto:?}");
    assert!(
        always.hit_ratio - auto.hit_ratio < 0.03,
        "{auto:?} {always:?}"
    );
}

#[test]
fn auto_stays_second_hit_where_one_hit_wonders_would_flush_a_hot_set() {
    // Twenty hot objects cycling, ten one-hit wonders after each: a cache of 30 entries
    // holds the hot set only if the wonders are kept out.
    let objects: Vec<u64> = (0..12_000u64)
        .map(|i| match i % 11 {
            0 => (i / 11) % 20,
            _ => 1_000_000 + i,
        })
        .collect();
    let cache = cache_of(30);
    let config = auto_config(200);
    let workload = workload(&objects);
    let (auto, run) = simulate_auto(&workload, &config, &FilterHasher::new(1), cache);
    let always = run_on(&workload, "always", &config, cache);
    assert_eq!(
        run.epochs,
        11_999 / 200,
        "an epoch ends every 200 s of the clock"
    );
    assert_eq!((run.switches, run.requests_as_always), (0, 0), "{run:?}");
    assert!(
        auto.hit_ratio > always.hit_ratio + 0.02,
        "{auto:?} {always:?}"
    );
    assert!(
        auto.disk_write_bytes.unwrap_or(0) * 5 < always.disk_write_bytes.unwrap_or(0),
        "{auto:?} {always:?}"
    );
}

#[test]
fn a_long_gap_in_the_trace_ends_a_bounded_number_of_epochs() {
    let mut workload = workload(&[1, 2, 1, 2]);
    // Ten years of silence between the second and third requests.
    for request in &mut workload.requests[2..] {
        request.at += 10.0 * 365.25 * 86_400.0;
    }
    let (report, run) = simulate_auto(&workload, &auto_config(60), &FilterHasher::new(1), ROOMY);
    assert_eq!(report.requests, 4);
    assert_eq!(run.epochs, u64::from(auto::MOST_IDLE_EPOCHS), "{run:?}");
}

fn run_on(
    workload: &Workload,
    policy: &str,
    config: &AdmissionConfig,
    cache: SimCache,
) -> PolicyReport {
    simulate(workload, policy, config, &FilterHasher::new(1), cache).expect("known policy")
}

#[test]
fn the_busiest_minute_counts_the_bytes_written_in_it() {
    // Minute 0: objects 1, 2, 3 written (1 hits); minute 1: 4 written, 1 and 2 hit.
    let mut workload = workload(&[1, 2, 1, 3, 4, 1, 2]);
    for (request, at) in workload.requests.iter_mut().zip([0, 1, 2, 3, 60, 61, 62]) {
        request.at = f64::from(at);
    }
    let config = AdmissionConfig::default();
    let hasher = FilterHasher::new(1);
    let always = busiest_minute_writes(&workload, "always", &config, &hasher, ROOMY);
    assert_eq!(always, Some(3_000));
    // second-hit writes only 1, on its second request, in minute 0.
    let second = busiest_minute_writes(&workload, "second-hit", &config, &hasher, ROOMY);
    assert_eq!(second, Some(1_000));
    assert_eq!(
        busiest_minute_writes(&workload, "nope", &config, &hasher, ROOMY),
        None
    );
}
