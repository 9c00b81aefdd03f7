//! Property tests of the pair's promises: no false negative within two rotations (also
//! under 8 threads with rotations under way), forgetting after two, restore fidelity, and
//! prefetches that change no answer.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::{Barrier, Mutex};

/// One step of a scripted run.
#[derive(Clone, Debug)]
enum Op {
    /// `check_and_record` of key `n` from a small universe (so keys repeat).
    Record(u64),
    /// `prefetch` of key `n`: a hint that must change no answer.
    Prefetch(u64),
    /// The generation reaches `max_age`: an ordinary rotation.
    Age,
    /// Two `max_age`s of silence: both generations forgotten.
    Idle,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (0..60u64).prop_map(Op::Record),
        5 => (0..60u64).prop_map(Op::Prefetch),
        3 => Just(Op::Age),
        1 => Just(Op::Idle),
    ]
}

/// Roomy filters that never rotate on fill: with at most 60 keys in a filter sized for
/// 100 000 at 0.1%, a false positive has a chance far below 1e-12 per check, so every
/// "first sight" below is a real forgetting.
fn roomy() -> FilterParams {
    FilterParams::for_expected_keys(100_000, 0.001)
}

/// Plays `ops` on `pair` from `t0` (one simulated minute per op) and checks every answer
/// against the model: a key is seen iff it was recorded in the live generation or the one
/// before, and no idle gap came since. Returns the clock at the end.
fn play(pair: &AgingPair, ops: &[Op], t0: Instant) -> Result<Instant, TestCaseError> {
    // Key → generation of its last record.
    let mut recorded: HashMap<u64, u64> = HashMap::new();
    // Generations before this one were forgotten by an idle gap.
    let mut forgotten_before = 0;
    let mut now = t0;
    let mut start = t0;
    for op in ops {
        match op {
            Op::Record(n) => {
                now += Duration::from_secs(1);
                let live = pair.generation();
                let expected = recorded
                    .get(n)
                    .is_some_and(|&g| g + 1 >= live && g >= forgotten_before);
                let decision = pair.check_and_record_at(key(*n), now);
                prop_assert_eq!(
                    decision.is_admit(),
                    expected,
                    "key {} in generation {}",
                    n,
                    live
                );
                recorded.insert(*n, live);
            }
            Op::Prefetch(n) => pair.prefetch(key(*n)),
            Op::Age | Op::Idle => {
                let gap = if matches!(op, Op::Age) {
                    HOUR
                } else {
                    2 * HOUR
                };
                now = start + gap;
                start = now;
                let before = pair.generation();
                // The rotation happens inside the next check; key 1000 is outside the universe.
                pair.check_and_record_at(key(1000), now);
                prop_assert_eq!(pair.generation(), before + 1);
                if matches!(op, Op::Idle) {
                    forgotten_before = before + 1;
                }
            }
        }
    }
    Ok(now)
}

proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(64))]

    /// No false negative for a key recorded in the current or the previous generation, and a
    /// key recorded once is forgotten after two rotations (or one idle gap).
    #[test]
    fn remembers_two_generations_and_forgets_after(ops in prop::collection::vec(op(), 1..300)) {
        let t0 = Instant::now();
        let pair = pair(roomy(), HOUR, t0);
        play(&pair, &ops, t0)?;
    }

    /// Snapshot → restore gives identical answers, for keys recorded and not, and the restored
    /// pair goes on behaving the same as the original.
    #[test]
    fn restore_answers_like_the_original(
        ops in prop::collection::vec(op(), 1..200),
        after in prop::collection::vec(0..80u64, 1..50),
    ) {
        let t0 = Instant::now();
        let original = pair(roomy(), HOUR, t0);
        let now = play(&original, &ops, t0)?;
        let copy = pair(roomy(), HOUR, now);
        prop_assert!(copy.restore_at(original.image_at(now), now));
        prop_assert_eq!(copy.generation(), original.generation());
        for n in 0..1_100 {
            prop_assert_eq!(copy.contains(key(n)), original.contains(key(n)), "key {}", n);
        }
        for n in after {
            let t = now + Duration::from_secs(n);
            prop_assert_eq!(
                copy.check_and_record_at(key(n), t),
                original.check_and_record_at(key(n), t)
            );
        }
    }
}

proptest! {
    // Each case runs 8 threads through tens of rotations; a few cases suffice.
    #![proptest_config(proptest::test_runner::Config::with_cases(6))]

    /// 8 threads check and record at once while the pair rotates on fill. Whenever a check of
    /// a key another thread recorded earlier (handed over through a mutex, so the record
    /// happens-before the check) comes back "first sight", at least two rotations must lie
    /// between the start of that record and the end of the check.
    #[test]
    fn concurrent_checks_never_lose_a_recorded_key(generation_size in 200..3_000u64) {
        const THREADS: usize = 8;
        const PER_THREAD: u64 = 2_500;
        let t0 = Instant::now();
        let pair = pair(small_generations(generation_size), HOUR, t0);
        // Per thread: (generation read before the record began, key) of its latest record.
        let published: Vec<Mutex<Option<(u64, u64)>>> =
            (0..THREADS).map(|_| Mutex::new(None)).collect();
        let violations = AtomicU64::new(0);
        let checks = AtomicU64::new(0);
        // Every thread publishes a first record before any starts its loop, so every check
        // finds a key to check however the threads are scheduled (on a loaded machine they
        // may otherwise run one after another, and the early ones would check nothing).
        let started = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (pair, published, violations, checks, started) =
                    (&pair, &published, &violations, &checks, &started);
                s.spawn(move || {
                    let first = ((t as u64) << 32) | PER_THREAD;
                    let before = pair.generation();
                    pair.check_and_record_at(key(first), t0);
                    *published[t].lock().unwrap() = Some((before, first));
                    started.wait();
                    for i in 0..PER_THREAD {
                        let n = ((t as u64) << 32) | i;
                        let before = pair.generation();
                        pair.check_and_record_at(key(n), t0);
                        *published[t].lock().unwrap() = Some((before, n));
                        // Check the latest key of the next thread round.
                        let other = (t + 1 + i as usize % (THREADS - 1)) % THREADS;
                        let Some((recorded_in, m)) = *published[other].lock().unwrap() else {
                            continue;
                        };
                        let decision = pair.check_and_record_at(key(m), t0);
                        let after = pair.generation();
                        checks.fetch_add(1, Ordering::Relaxed);
                        if !decision.is_admit() && after < recorded_in + 2 {
                            violations.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        prop_assert_eq!(violations.load(Ordering::Relaxed), 0);
        prop_assert_eq!(checks.load(Ordering::Relaxed), THREADS as u64 * PER_THREAD);
        prop_assert!(pair.generation() >= 5, "rotations were under way: {:?}", pair.stats_at(t0));
    }
}
