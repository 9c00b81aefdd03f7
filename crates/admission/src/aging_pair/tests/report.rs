//! What the pair reports: rotation counters by cause, the timeline of recent rotations,
//! and fill and estimates at design load.

use super::*;
use crate::stats::RotationCounts;

#[test]
fn rotation_counters_by_cause() {
    let t0 = Instant::now();
    let pair = pair(small_generations(4), MINUTE, t0);
    let mut next = 100;
    fill_until_rotation(&pair, &mut next, t0);
    fill_until_rotation(&pair, &mut next, t0);
    // A fill rotation restarts the clock, so one minute after t0 is one age rotation.
    pair.check_and_record_at(key(1), t0 + MINUTE);
    // A clock reading older than the generation start (another thread's) changes nothing.
    pair.check_and_record_at(key(2), t0);
    let stats = pair.stats_at(t0 + MINUTE);
    assert_eq!(
        stats.rotations,
        RotationCounts {
            fill: 2,
            age: 1,
            saturation: 0,
            idle: 0,
            forced: 0
        }
    );
    assert_eq!(stats.rotations.total(), 3);
    assert_eq!(stats.last_rotation, Some(Cause::Age));
    assert_eq!(stats.generation, 3);
    assert_eq!(stats.generation_target, 4);
    assert_eq!(stats.current.inserts, 2);
    // The timeline: newest first, with how long ago and how long each generation lasted.
    let timeline: Vec<(u64, Cause, Duration, u64, Duration)> = stats
        .recent_rotations
        .iter()
        .map(|r| (r.generation, r.cause, r.ago, r.ended_inserts, r.ended_age))
        .collect();
    assert_eq!(
        timeline,
        [
            (3, Cause::Age, Duration::ZERO, 0, MINUTE),
            (2, Cause::Fill, MINUTE, 4, Duration::ZERO),
            (1, Cause::Fill, MINUTE, 4, Duration::ZERO),
        ]
    );
}

#[test]
fn the_timeline_keeps_the_last_sixteen_rotations() {
    let t0 = Instant::now();
    let pair = pair(small_generations(4), HOUR, t0);
    let mut next = 100;
    for _ in 0..20 {
        fill_until_rotation(&pair, &mut next, t0);
    }
    let generations: Vec<u64> = pair
        .stats_at(t0)
        .recent_rotations
        .iter()
        .map(|r| r.generation)
        .collect();
    assert_eq!(generations, (5..=20).rev().collect::<Vec<u64>>());
}

#[test]
fn statistics_at_design_load() {
    let t0 = Instant::now();
    let params = FilterParams::for_expected_keys(20_000, 0.01);
    let pair = pair(params, HOUR, t0);
    for i in 0..19_999 {
        pair.check_and_record_at(key(i), t0);
    }
    let stats = pair.stats_at(t0);
    assert_eq!(stats.generation, 0);
    let current = stats.current;
    // Each key sets k bits of the m: at n keys about 1 - e^(-kn/m) of them are set (44% at
    // k = 6 and 10.3 bits per key).
    let expected_ratio = 1.0 - (-f64::from(params.probes) / params.bits_per_key()).exp();
    assert!(
        (current.bits_set_ratio - expected_ratio).abs() < 0.02,
        "{current:?}, expected {expected_ratio}"
    );
    // Only false positives within the current filter skip their count.
    assert!(
        current.inserts > 19_700 && current.inserts <= 19_999,
        "{current:?}"
    );
    assert!(
        (current.estimated_keys / 20_000.0 - 1.0).abs() < 0.05,
        "{current:?}"
    );
    let rate = current.estimated_false_positive_rate;
    assert!((rate / 0.01 - 1.0).abs() < 0.15, "{rate}");
    let pair_rate = stats.estimated_pair_false_positive_rate;
    assert!(
        (pair_rate - rate).abs() < 1e-12,
        "no previous yet: {pair_rate} vs {rate}"
    );
    let (after, before) = stats.pair_false_positive_rate_range;
    assert!(after <= 0.01 && (before / after - 2.0).abs() < 0.02);
    assert_eq!(stats.expected_false_positive_rate, after);
}
