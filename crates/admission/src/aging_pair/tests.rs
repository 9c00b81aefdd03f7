use super::*;
use crate::stats::{RotationCounts, SpareState};
use slots::FilterState;
use std::sync::atomic::AtomicU64;
use xxhash_rust::xxh3::xxh3_128;

mod properties;
mod report;

const HOUR: Duration = Duration::from_secs(3600);
const MINUTE: Duration = Duration::from_secs(60);
const FIRST: Decision = Decision::Reject(RejectReason::FirstSight);
const SEEN: Decision = Decision::Admit(AdmitReason::SeenBefore);

/// Deterministic test keys: the xxh3-128 of a counter.
fn key(i: u64) -> FilterHash {
    FilterHash(xxh3_128(&i.to_le_bytes()))
}

/// Roomy filters (false positives negligible) that rotate every `generation_size` new keys.
fn small_generations(generation_size: u64) -> FilterParams {
    FilterParams {
        generation_size,
        ..FilterParams::for_expected_keys(1_000, 0.001)
    }
}

/// A pair rotating on fill, starting at `t0`.
fn pair(params: FilterParams, max_age: Duration, t0: Instant) -> AgingPair {
    AgingPair::new(params, max_age, Rotation::Fill, t0)
}

/// Records fresh keys (from `*next` upwards) until the pair has rotated once more.
fn fill_until_rotation(pair: &AgingPair, next: &mut u64, now: Instant) {
    let before = pair.generation();
    for _ in 0..10_000 {
        pair.check_and_record_at(key(*next), now);
        *next += 1;
        if pair.generation() > before {
            return;
        }
    }
    panic!("no rotation after 10000 fresh keys");
}

#[test]
fn first_sight_rejected_second_admitted() {
    let t0 = Instant::now();
    let params = FilterParams::for_expected_keys(1_000, 0.01);
    let pair = pair(params, HOUR, t0);
    assert_eq!(pair.check_and_record_at(key(1), t0), FIRST);
    assert_eq!(pair.check_and_record_at(key(1), t0), SEEN);
    assert_eq!(pair.check_and_record_at(key(1), t0), SEEN);
    assert_eq!(pair.check_and_record_at(key(2), t0), FIRST);
    assert!(pair.contains(key(1)) && !pair.contains(key(3)));
    let stats = pair.stats_at(t0 + MINUTE);
    assert_eq!(stats.current.inserts, 2);
    assert_eq!(stats.current.age, MINUTE);
    assert_eq!(stats.previous, None);
    assert!(stats.current.bits_set > 0);
    assert_eq!(pair.params(), params);
    assert_eq!(pair.memory_bytes(), 3 * params.filter_bytes());
    assert_eq!(pair.kind(), AdmissionPolicy::SecondHit.into());
    assert!(pair.filter_stats().is_some());
}

#[test]
fn recorded_once_survives_one_rotation_and_is_forgotten_after_two() {
    let t0 = Instant::now();
    let mut next = 100;

    let pair1 = pair(small_generations(4), HOUR, t0);
    assert_eq!(pair1.check_and_record_at(key(1), t0), FIRST);
    fill_until_rotation(&pair1, &mut next, t0);
    assert_eq!(
        pair1.check_and_record_at(key(1), t0),
        SEEN,
        "still in previous"
    );

    let pair2 = pair(small_generations(4), HOUR, t0);
    assert_eq!(pair2.check_and_record_at(key(1), t0), FIRST);
    fill_until_rotation(&pair2, &mut next, t0);
    fill_until_rotation(&pair2, &mut next, t0);
    assert_eq!(pair2.stats_at(t0).rotations.fill, 2);
    assert_eq!(pair2.check_and_record_at(key(1), t0), FIRST, "forgotten");
}

#[test]
fn key_seen_every_generation_is_never_forgotten() {
    let t0 = Instant::now();
    let pair = pair(small_generations(8), HOUR, t0);
    let mut next = 100;
    assert_eq!(pair.check_and_record_at(key(1), t0), FIRST);
    for generation in 0..50 {
        fill_until_rotation(&pair, &mut next, t0);
        assert_eq!(
            pair.check_and_record_at(key(1), t0),
            SEEN,
            "lost after rotation {generation}"
        );
    }
    assert_eq!(pair.stats_at(t0).rotations.fill, 50);
}

#[test]
fn rotates_on_max_age() {
    let t0 = Instant::now();
    let pair = pair(FilterParams::for_expected_keys(1_000, 0.001), MINUTE, t0);
    assert_eq!(pair.check_and_record_at(key(1), t0), FIRST);
    assert_eq!(pair.check_and_record_at(key(2), t0 + MINUTE / 2), FIRST);
    assert_eq!(pair.generation(), 0);
    // At t0 + 1 min the first generation is over: key 3 lands in the new one.
    assert_eq!(pair.check_and_record_at(key(3), t0 + MINUTE), FIRST);
    let stats = pair.stats_at(t0 + MINUTE);
    assert_eq!((stats.rotations.age, stats.current.inserts), (1, 1));
    assert_eq!(
        stats.previous.map(|p| (p.inserts, p.age)),
        Some((2, MINUTE))
    );
    // Key 2 lives on in previous and is copied forward.
    assert_eq!(pair.check_and_record_at(key(2), t0 + MINUTE), SEEN);
    // The second generation began at t0 + 1 min; at t0 + 2 min the first one is dropped.
    assert_eq!(pair.check_and_record_at(key(4), t0 + 2 * MINUTE), FIRST);
    assert_eq!(pair.stats_at(t0).rotations.age, 2);
    assert_eq!(
        pair.check_and_record_at(key(1), t0 + 2 * MINUTE),
        FIRST,
        "aged out"
    );
    assert_eq!(pair.check_and_record_at(key(2), t0 + 2 * MINUTE), SEEN);
    assert_eq!(pair.stats_at(t0).rotations.fill, 0);
}

#[test]
fn an_idle_gap_of_two_max_ages_forgets_both_generations() {
    let t0 = Instant::now();
    let pair = pair(FilterParams::for_expected_keys(1_000, 0.001), MINUTE, t0);
    pair.check_and_record_at(key(1), t0);
    pair.check_and_record_at(key(2), t0 + MINUTE); // rotates: key 1 in previous
    assert!(pair.contains(key(1)) && pair.contains(key(2)));
    // Just under two max_ages after the live generation began: one ordinary rotation.
    let almost = t0 + MINUTE + 2 * MINUTE - Duration::from_millis(1);
    assert_eq!(pair.check_and_record_at(key(3), almost), FIRST);
    assert!(!pair.contains(key(1)) && pair.contains(key(2)));
    // Two max_ages of silence: both generations go.
    assert_eq!(pair.check_and_record_at(key(4), almost + 2 * MINUTE), FIRST);
    assert!(!pair.contains(key(2)) && !pair.contains(key(3)) && pair.contains(key(4)));
    let stats = pair.stats_at(almost + 2 * MINUTE);
    assert_eq!(stats.previous, None);
    assert_eq!(
        stats.rotations,
        RotationCounts {
            fill: 0,
            age: 2,
            saturation: 0,
            idle: 1,
            forced: 0
        }
    );
    assert_eq!(stats.generation, 3);
}

#[test]
fn a_filter_past_sixty_percent_rotates_whatever_its_count() {
    let t0 = Instant::now();
    // One block of 512 bits that believes it can take a million keys.
    let params = FilterParams {
        bits: 512,
        probes: 6,
        generation_size: 1_000_000,
        false_positive_rate: 0.01,
    };
    let pair = pair(params, HOUR, t0);
    let mut i = 0;
    while pair.generation() == 0 {
        pair.check_and_record_at(key(i), t0);
        i += 1;
        assert!(i < 10_000, "never rotated");
    }
    let stats = pair.stats_at(t0);
    assert_eq!(stats.rotations.saturation, 1);
    let previous = stats.previous.unwrap();
    assert!(
        (0.6..0.7).contains(&previous.bits_set_ratio),
        "{previous:?}"
    );
    assert!(previous.inserts < 200);
}

#[test]
fn auto_rotation_follows_the_object_count_within_its_clamp() {
    let t0 = Instant::now();
    let objects = Arc::new(AtomicU64::new(0));
    let source: ObjectCount = {
        let objects = objects.clone();
        Arc::new(move || objects.load(Ordering::Relaxed))
    };
    let params = FilterParams::for_expected_keys(100_000, 0.01);
    let rotation = Rotation::Auto {
        objects: source,
        min_generation_age: HOUR / 4,
    };
    let pair = AgingPair::new(params, HOUR, rotation, t0);
    // An empty cache: the floor, so the pair still remembers a little.
    assert_eq!(auto_floor(100_000), 1_024);
    assert_eq!(pair.stats_at(t0).generation_target, 1_024);
    let mut next = 0;
    fill_until_rotation(&pair, &mut next, t0);
    assert_eq!(next, 1_024);
    // A cache of 600 objects: 1,200 keys, above the floor.
    objects.store(600, Ordering::Relaxed);
    fill_until_rotation(&pair, &mut next, t0);
    assert_eq!(pair.stats_at(t0).generation_target, 1_200);
    // The target, two keys per object, is read at each generation's start.
    objects.store(5_000, Ordering::Relaxed);
    fill_until_rotation(&pair, &mut next, t0);
    assert_eq!(pair.stats_at(t0).generation_target, 10_000);
    objects.store(10_000_000, Ordering::Relaxed);
    fill_until_rotation(&pair, &mut next, t0);
    assert_eq!(pair.stats_at(t0).generation_target, 100_000);
    assert_eq!(
        auto_floor(500),
        500,
        "the floor never exceeds the largest generation"
    );
    assert_eq!(
        auto_floor(1_000_000),
        1_024,
        "the floor does not grow with the largest generation: a small cache is not starved"
    );
}

#[test]
fn restore_ages_the_image() {
    let t0 = Instant::now();
    let params = FilterParams::for_expected_keys(1_000, 0.001);
    let source = pair(params, MINUTE, t0);
    source.check_and_record_at(key(1), t0);
    source.check_and_record_at(key(2), t0 + MINUTE); // key 1 → previous
    let image = source.image_at(t0 + MINUTE + Duration::from_secs(10));
    assert_eq!(image.current.age, Duration::from_secs(10));
    assert_eq!(
        image.previous.as_ref().map(|p| p.age),
        Some(Duration::from_secs(70))
    );

    // Young: restored as it was; its age counts toward max_age.
    let later = t0 + 10 * MINUTE;
    let young = pair(params, MINUTE, later);
    assert!(young.restore_at(image.clone(), later));
    assert!(young.contains(key(1)) && young.contains(key(2)));
    assert_eq!(young.generation(), 1);
    young.check_and_record_at(key(3), later + Duration::from_secs(50));
    assert_eq!(
        young.generation(),
        2,
        "10 s before plus 50 s after the restart"
    );

    // Past max_age: rotated on load, counted as an age rotation.
    let mut old = image.clone();
    old.current.age = MINUTE + Duration::from_secs(1);
    let aged = pair(params, MINUTE, later);
    assert!(aged.restore_at(old.clone(), later));
    assert!(!aged.contains(key(1)) && aged.contains(key(2)));
    assert_eq!(
        (aged.generation(), aged.stats_at(later).rotations.age),
        (2, 1)
    );

    // Past two max_ages: nothing is remembered.
    old.current.age = 2 * MINUTE;
    let idle = pair(params, MINUTE, later);
    assert!(idle.restore_at(old, later));
    assert!(!idle.contains(key(1)) && !idle.contains(key(2)));
    assert_eq!(idle.stats_at(later).rotations.idle, 1);

    // Arrays of another size are refused, changing nothing.
    let other = pair(
        FilterParams::for_expected_keys(100_000, 0.001),
        MINUTE,
        later,
    );
    other.check_and_record_at(key(9), later);
    assert!(!other.restore_at(image, later));
    assert!(other.contains(key(9)));
}

#[test]
fn retired_filters_are_cleared_in_the_background_and_reused() {
    let t0 = Instant::now();
    let pair = pair(small_generations(4), HOUR, t0);
    let mut next = 100;
    for _ in 0..20 {
        fill_until_rotation(&pair, &mut next, t0);
        let state = pair.shared.state();
        let spares: Vec<usize> = (0..3)
            .filter(|&i| i != state.current && state.previous != Some(i))
            .collect();
        assert_eq!(spares.len(), 1);
        // The cleaner thread clears the retired filter after its grace period. Wall clock:
        // the cleaner is a thread of its own that ticks and sleeps on the real clock.
        for _ in 0..2_000 {
            if pair.shared.filter_state(spares[0]) == FilterState::Clean {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(pair.shared.filter_state(spares[0]), FilterState::Clean);
        assert_eq!(pair.stats_at(t0).spares, [SpareState::Clean]);
        assert_eq!(pair.shared.filters[spares[0]].bits_set(), 0);
        assert_eq!(
            pair.stats_at(t0).current.bits_set,
            0,
            "the new current starts empty"
        );
    }
}

#[test]
fn a_rotation_clears_a_spare_the_cleaner_has_not_reached() {
    let t0 = Instant::now();
    let pair = pair(small_generations(4), HOUR, t0);
    let mut next = 100;
    // Rotations in a tight loop: faster than the cleaner's grace period.
    for _ in 0..10 {
        fill_until_rotation(&pair, &mut next, t0);
        assert_eq!(pair.stats_at(t0).current.bits_set, 0);
    }
    assert_eq!(pair.generation(), 10);
}

#[test]
fn concurrent_disjoint_keys_are_all_recorded() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 4_000;
    let t0 = Instant::now();
    // A target small enough to be counted exactly (see `COUNT_EXACT_BITS`), in a filter
    // roomy enough for few false positives.
    let params = FilterParams {
        generation_size: 32_767,
        ..FilterParams::for_expected_keys(100_000, 0.01)
    };
    let pair = pair(params, HOUR, t0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let pair = &pair;
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    pair.check_and_record(key(t * 1_000_000 + i));
                }
            });
        }
    });
    let stats = pair.stats_at(Instant::now());
    assert_eq!(stats.rotations.total(), 0);
    // Only a false positive (a key already "present") skips its count; there are few.
    let total = THREADS * PER_THREAD;
    assert!(stats.current.inserts <= total && stats.current.inserts >= total - 100);
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            assert_eq!(pair.check_and_record(key(t * 1_000_000 + i)), SEEN);
        }
    }
}

#[test]
fn small_generations_count_every_new_key_and_large_ones_a_weighted_sample() {
    // The saturation check of a 10M-key filter runs every 4096 counted inserts.
    let cadence = 4095;
    for target in [1, 1_000, 32_767] {
        assert!((0..1_000).all(|i| counted_weight(key(i), target, cadence) == Some(1)));
    }
    // 10M keys: one in 512 (10M >> 14 = 610, whose log2 is 9), weight 512.
    let counted: Vec<u64> = (0..1_000_000)
        .filter_map(|i| counted_weight(key(i), 10_000_000, cadence))
        .collect();
    assert!(counted.iter().all(|&w| w == 512));
    let expected = 1_000_000.0 / 512.0;
    assert!(
        (counted.len() as f64 / expected - 1.0).abs() < 0.1,
        "{} counted",
        counted.len()
    );
    // A filter whose fill is checked every 64 counted inserts never samples coarser.
    assert!((0..1_000).all(|i| counted_weight(key(i), 10_000_000, 63).is_none_or(|w| w == 64)));
}

#[test]
fn a_large_generation_ends_within_one_percent_of_its_target() {
    let t0 = Instant::now();
    // 200 000 keys: counted one in 8, so about 25 000 counted per generation.
    let params = FilterParams::for_expected_keys(200_000, 0.01);
    let pair = pair(params, HOUR, t0);
    let mut fed = 0u64;
    while pair.generation() == 0 {
        pair.check_and_record_at(key(fed), t0);
        fed += 1;
        assert!(fed < 300_000, "never rotated");
    }
    // The false positives of the filter filling up (0 to 1%) are not new keys: about 0.3%.
    let ratio = fed as f64 / 200_000.0;
    assert!((0.99..1.02).contains(&ratio), "rotated after {fed} keys");
    assert_eq!(pair.stats_at(t0).rotations.fill, 1);
}

#[test]
fn a_forced_rotation_starts_a_generation_and_keeps_the_last_one_answering() {
    let t0 = Instant::now();
    let pair = pair(small_generations(1_000), MINUTE, t0);
    assert_eq!(pair.stats_at(t0).last_rotation, None);
    pair.check_and_record_at(key(1), t0);
    assert_eq!(pair.force_rotation(), 1);
    let stats = pair.stats_at(t0);
    assert_eq!((stats.generation, stats.rotations.forced), (1, 1));
    assert_eq!(stats.rotations.total(), 1);
    assert_eq!(stats.last_rotation, Some(Cause::Forced));
    assert_eq!(stats.current.inserts, 0);
    // The key recorded before the rotation is in `previous` now: still seen.
    assert_eq!(
        pair.check_and_record_at(key(1), t0),
        Decision::Admit(AdmitReason::SeenBefore)
    );
    assert_eq!(AdmissionStats::rotate(&pair), Some(2));
}

/// A pair under `rotate = "auto"` over a nearly empty cache (ten objects: every generation
/// gets the floor's target, 1,024 keys) in filters sized for `largest` keys, starting at `t0`,
/// holding a burst for at most a quarter of an hour.
fn nearly_empty_auto_pair(largest: u64, t0: Instant) -> AgingPair {
    let rotation = Rotation::Auto {
        objects: Arc::new(|| 10),
        min_generation_age: HOUR / 4,
    };
    let pair = AgingPair::new(
        FilterParams::for_expected_keys(largest, 0.01),
        HOUR,
        rotation,
        t0,
    );
    assert_eq!(pair.stats_at(t0).generation_target, AUTO_FLOOR);
    pair
}

/// Real keys `0..500`, one a second from `t0`; then at `t0 + 10 min` a burst of `junk`
/// first sights (from key 1,000,000 on), 1,000 a second. Returns when the burst ended.
fn real_keys_then_a_burst(pair: &AgingPair, junk: u64, t0: Instant) -> Instant {
    for i in 0..500 {
        pair.check_and_record_at(key(i), t0 + Duration::from_secs(i));
    }
    let burst = t0 + 10 * MINUTE;
    for i in 0..junk {
        pair.check_and_record_at(key(1_000_000 + i), burst + Duration::from_millis(i));
    }
    burst + Duration::from_millis(junk)
}

#[test]
fn a_burst_of_first_sights_does_not_flush_the_keys_seen_just_before_it() {
    let t0 = Instant::now();
    let pair = nearly_empty_auto_pair(100_000, t0);
    // Twenty times the generation the nearly empty cache sizes: without the hold, twenty
    // rotations, and the real keys dropped with the second.
    let end = real_keys_then_a_burst(&pair, 20_000, t0);
    let forgotten = (0..500).filter(|&i| !pair.contains(key(i))).count();
    assert_eq!(forgotten, 0, "real keys forgotten by the burst");
    // One rotation (the real keys' generation reached its target), then the next generation
    // held the rest of the burst: it began 10 minutes after the one before, so it is held
    // for 5 minutes, and the burst lasted 20 seconds.
    assert_eq!(pair.generation(), 1);
    assert_eq!(pair.check_and_record_at(key(7), end), SEEN);
    // The hold ends: the next new key past the target ends the generation as usual.
    pair.check_and_record_at(key(2_000_000), end + 5 * MINUTE);
    assert_eq!(pair.generation(), 2);
}

#[test]
fn a_held_generation_still_ends_at_the_keys_its_filter_is_sized_for() {
    let t0 = Instant::now();
    let pair = nearly_empty_auto_pair(5_000, t0);
    let largest = pair.params().generation_size;
    let mut most = 0;
    let mut generation = 0;
    // A burst of six times the filter's capacity, in 30 s: held or not, no generation takes
    // more keys than its filter keeps at the configured false-positive rate.
    for i in 0..500 {
        pair.check_and_record_at(key(i), t0 + Duration::from_secs(i));
    }
    let burst = t0 + 10 * MINUTE;
    for i in 0..6 * largest {
        let now = burst + Duration::from_micros(i);
        pair.check_and_record_at(key(1_000_000 + i), now);
        if pair.generation() != generation {
            generation = pair.generation();
            let stats = pair.stats_at(now);
            let ended = stats.previous.expect("a rotation leaves a previous filter");
            most = most.max(ended.inserts);
            assert!(ended.bits_set_ratio < SATURATION, "{ended:?}");
            assert_eq!(stats.last_rotation, Some(Cause::Fill));
        }
    }
    assert!(
        most <= largest,
        "{most} new keys in a filter sized for {largest}"
    );
    assert_eq!(most, largest, "the burst was held to the filter's capacity");
    assert!(generation >= 3, "a burst past the capacity still rotates");
}

#[test]
fn steady_traffic_is_not_held_and_keys_still_age_out() {
    let t0 = Instant::now();
    let pair = nearly_empty_auto_pair(100_000, t0);
    for i in 0..500 {
        pair.check_and_record_at(key(i), t0);
    }
    // A steady 20 new keys a second: each generation reaches its 1,024 keys in about 51 s,
    // as fast as the one before, so none is held.
    let mut next = 1_000_000;
    for tick in 0..10 * 60 * 20 {
        pair.check_and_record_at(key(next), t0 + Duration::from_millis(50 * tick));
        next += 1;
    }
    let stats = pair.stats_at(t0 + 10 * MINUTE);
    // 500 real and 12,000 junk new keys, 1,024 a generation: every rotation on its target.
    assert_eq!(stats.rotations.fill, 12, "{:?}", stats.rotations);
    let remembered = (0..500).filter(|&i| pair.contains(key(i))).count();
    assert!(remembered < 25, "{remembered} of 500 keys still remembered");

    // A trickle, one new key every 5 minutes, never reaches the target: `max_age` still
    // ends each generation, and two of them forget the keys.
    let pair = nearly_empty_auto_pair(100_000, t0);
    for i in 0..500 {
        pair.check_and_record_at(key(i), t0);
    }
    for step in 1..=25 {
        pair.check_and_record_at(key(next), t0 + step * 5 * MINUTE);
        next += 1;
    }
    assert_eq!(pair.stats_at(t0 + 125 * MINUTE).rotations.age, 2);
    let remembered = (0..500).filter(|&i| pair.contains(key(i))).count();
    assert!(remembered < 25, "{remembered} of 500 keys still remembered");
}
