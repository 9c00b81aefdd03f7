use super::*;

/// Requests `keys` in order, each object 1 byte; the hits.
fn replay(cache: &mut dyn ReferenceCache, keys: &[u64]) -> usize {
    keys.iter()
        .filter(|&&key| {
            let hit = cache.lookup(key).is_some();
            if !hit {
                assert!(cache.insert(key, 1), "key {key} fits");
            }
            hit
        })
        .count()
}

#[test]
fn lru_evicts_the_least_recently_used_bytes() {
    let mut lru = Lru::new(3);
    // 1, 2, 3 fill it; 1 is hit; 4 evicts 2 (least recent); 2 evicts 3; 1 still hits.
    let hits = replay(&mut lru, &[1, 2, 3, 1, 4, 2, 1, 3]);
    assert_eq!(hits, 2);
    assert!(!lru.insert(9, 4), "larger than the whole cache");
    let mut resident: Vec<u64> = lru.entries.iter().map(|(&k, _)| k).collect();
    resident.sort_unstable();
    assert_eq!(resident, [1, 2, 3]);
    assert_eq!(lru.used, 3);
}

/// A trace worked through by hand: 20 bytes, so the small FIFO's share is 2 bytes, the
/// main FIFO's 18 and the ghost's 18; every object is 1 byte.
#[test]
fn s3fifo_follows_the_paper_on_a_trace_worked_by_hand() {
    let mut cache = S3Fifo::new(20);
    assert_eq!(
        (
            cache.small_capacity,
            cache.main_capacity,
            cache.ghost_capacity
        ),
        (2, 18, 18)
    );
    let first: Vec<u64> = (1..=20).collect();
    // 1..=20: misses, all into the small FIFO (nothing is evicted until the cache is full).
    assert_eq!(replay(&mut cache, &first), 0);
    assert_eq!((cache.small.len(), cache.main.len()), (20, 0));
    // 1..=20 again: hits, frequency 1 each.
    assert_eq!(replay(&mut cache, &first), 20);
    // 21: the cache is full; the small FIFO's tail is walked: all 20 were hit, so all move
    // to the main FIFO (frequency reset to 0), the small one is empty without an eviction;
    // the main FIFO (20 > 18) then evicts its tail, 1, whose frequency is 0. 21 → small.
    assert_eq!(replay(&mut cache, &[21]), 0);
    assert!(!cache.resident.contains_key(&1));
    assert!(
        cache.ghost_members.is_empty(),
        "main evictions leave no ghost"
    );
    // 2: a hit in the main FIFO (frequency 1).
    assert_eq!(replay(&mut cache, &[2]), 1);
    // 22: main holds 19 > 18: CLOCK puts 2 back at the head with frequency 0 and evicts 3.
    assert_eq!(replay(&mut cache, &[22]), 0);
    assert!(!cache.resident.contains_key(&3));
    // 1: a miss (evicted from main, so not in the ghost). Main holds 18, not over its share:
    // the small FIFO's tail 21 (never hit) is evicted into the ghost; 1 → small.
    assert_eq!(replay(&mut cache, &[1]), 0);
    assert!(cache.ghost_members.contains_key(&21));
    // 21: a miss found in the ghost: 22 (never hit) leaves the small FIFO for the ghost,
    // and 21 goes straight to the main FIFO.
    assert_eq!(replay(&mut cache, &[21]), 0);
    // 2: still cached.
    assert_eq!(replay(&mut cache, &[2]), 1);

    let main: Vec<u64> = cache.main.iter().copied().collect();
    let expected_main: Vec<u64> = (4..=20).chain([2, 21]).collect();
    assert_eq!(main, expected_main);
    assert_eq!(cache.small.iter().copied().collect::<Vec<_>>(), [1]);
    assert_eq!(
        cache.ghost_members.keys().copied().collect::<Vec<_>>(),
        [22]
    );
    assert_eq!((cache.small_bytes, cache.main_bytes), (1, 19));
    assert_eq!(cache.resident.len(), 20);
}

#[test]
fn s3fifo_forgets_ghosts_past_its_share_and_skips_stale_turns() {
    // 100 bytes: small 10, main 90, ghost 90; objects of 9 bytes.
    let mut cache = S3Fifo::new(100);
    assert!(
        !cache.insert(1, 10),
        "as large as the small FIFO: not cached"
    );
    for key in 0..200 {
        assert!(cache.lookup(key).is_none());
        assert!(cache.insert(key, 9));
        assert!(cache.used() <= 100);
        assert!(cache.ghost_bytes <= 90);
    }
    // Never hit: every eviction came from the small FIFO into the ghost, which keeps the
    // last 10 (90 bytes): keys 179..=188 (189..=199 are cached).
    let mut ghost: Vec<u64> = cache.ghost_members.keys().copied().collect();
    ghost.sort_unstable();
    assert_eq!(ghost, (179..=188).collect::<Vec<_>>());
    // A ghost hit frees the key's ghost bytes at once; its old turn is skipped later.
    assert!(cache.insert(179, 9));
    assert_eq!(cache.ghost_bytes, 90);
    assert_eq!(cache.main.iter().copied().collect::<Vec<_>>(), [179]);
    // 300 pushes 190 into the ghost: 179's stale turn is skipped, 180 forgotten.
    assert!(cache.insert(300, 9));
    let mut ghost: Vec<u64> = cache.ghost_members.keys().copied().collect();
    ghost.sort_unstable();
    assert_eq!(ghost, (181..=190).collect::<Vec<_>>());
    assert_eq!(cache.ghost_bytes, 90);
}

/// Capacity 3, objects of 1 byte; `[newest .. oldest]` is the queue, `^` the hand.
#[test]
fn sieve_follows_the_paper_on_a_trace_worked_by_hand() {
    let mut cache = Sieve::new(3);
    // 1, 2, 3: misses, [3 2 1]. 1: a hit, 1 visited (nothing moves).
    assert_eq!(replay(&mut cache, &[1, 2, 3, 1]), 1);
    assert_eq!(cache.keys_newest_first(), [3, 2, 1]);
    // 4: the hand starts at the tail: 1 visited → cleared, kept; 2 evicted; the hand stays
    // at 2's newer neighbour 3. [4 3^ 1].
    assert_eq!(replay(&mut cache, &[4]), 0);
    assert_eq!(cache.keys_newest_first(), [4, 3, 1]);
    assert_eq!(cache.hand_key(), Some(3));
    // 3: a hit. 5: 3 visited → cleared; 4 evicted; the hand passes the head. [5 3 1].
    assert_eq!(replay(&mut cache, &[3, 5]), 1);
    assert_eq!(cache.keys_newest_first(), [5, 3, 1]);
    assert_eq!(cache.hand_key(), None);
    // 1: a hit. 6: from the tail again: 1 visited → cleared; 3 (cleared before) evicted;
    // the hand at 5. [6 5^ 1].
    assert_eq!(replay(&mut cache, &[1, 6]), 1);
    assert_eq!(cache.keys_newest_first(), [6, 5, 1]);
    assert_eq!(cache.hand_key(), Some(5));
    // 4: 5 unvisited → evicted at once, the hand at 6. [4 6^ 1].
    assert_eq!(replay(&mut cache, &[4]), 0);
    assert_eq!(cache.keys_newest_first(), [4, 6, 1]);
    assert_eq!(cache.hand_key(), Some(6));
    assert_eq!(cache.used_bytes(), 3);
}

#[test]
fn sieve_evicts_as_many_objects_as_a_large_one_needs() {
    let mut cache = Sieve::new(10);
    for key in 1..=5 {
        assert!(cache.insert(key, 2));
    }
    assert_eq!(cache.lookup(1), Some(2));
    // 7 bytes need 4 objects of 2 gone (the hand clears 1, evicts 2, 3, 4, 5).
    assert!(cache.insert(9, 7));
    assert_eq!(cache.keys_newest_first(), [9, 1]);
    assert_eq!(cache.used_bytes(), 9);
    assert!(!cache.insert(10, 11), "larger than the whole cache");
}

/// Capacity 100 bytes: window 1, main 99, protected 79; objects of 20 bytes, so every new
/// object leaves the window at once as a candidate and protected holds three.
#[test]
fn w_tinylfu_follows_the_paper_on_a_trace_worked_by_hand() {
    let mut cache = WTinyLfu::new(100);
    let sized = |cache: &mut WTinyLfu, keys: &[u64]| {
        keys.iter()
            .filter(|&&key| {
                let hit = cache.lookup(key).is_some();
                if !hit {
                    assert!(cache.insert(key, 20));
                }
                hit
            })
            .count()
    };
    // 1..=5 fill the cache through the window into probation; 1 and 2 are hit, so move to
    // protected.
    assert_eq!(sized(&mut cache, &[1, 2, 3, 4, 5, 1, 2]), 2);
    assert_eq!(cache.segments(), [vec![], vec![3, 4, 5], vec![1, 2]]);
    // 6, seen once, meets probation's oldest 3, seen once: a tie keeps the victim.
    assert_eq!(sized(&mut cache, &[6]), 0);
    assert_eq!(cache.segments(), [vec![], vec![3, 4, 5], vec![1, 2]]);
    // 6 again (frequency 2) wins over 3 (1); then 3 (now 2) wins over 4 (1).
    assert_eq!(sized(&mut cache, &[6, 3]), 0);
    assert_eq!(cache.segments(), [vec![], vec![5, 6, 3], vec![1, 2]]);
    // Hits on 5, 6, 3 promote them; protected's overflow (80 > 79 bytes) demotes its least
    // recent, 1 and then 2, to probation.
    assert_eq!(sized(&mut cache, &[5, 6, 3]), 3);
    assert_eq!(cache.segments(), [vec![], vec![1, 2], vec![5, 6, 3]]);
    assert_eq!(cache.used_bytes(), 100);
    assert!(!cache.insert(7, 101), "larger than the whole cache");
}

#[test]
fn frequency_sketch_saturates_at_fifteen_and_halves_after_its_sample() {
    let mut cache = WTinyLfu::new(100);
    for _ in 0..20 {
        cache.sketch.increment(7);
    }
    assert_eq!(cache.sketch.frequency(7), 15);
    assert_eq!(cache.sketch.additions, 15, "a saturated key adds nothing");
    // 16 counters a row, so the 160th counted addition halves every counter.
    let mut key = 1_000;
    while cache.sketch.additions < 159 {
        cache.sketch.increment(key);
        key += 1;
    }
    assert_eq!(cache.sketch.frequency(7), 15);
    cache.sketch.increment(key + 1);
    assert_eq!(cache.sketch.additions, 80);
    assert_eq!(cache.sketch.frequency(7), 7);
}

mod properties {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::super::{REFERENCE_NAMES, build};

    proptest! {
        /// Every reference cache, on any sequence of requests: the bytes it holds never
        /// pass its capacity, and a hit returns the size the key was inserted with.
        #[test]
        fn reference_caches_stay_in_budget_and_hits_return_what_was_inserted(
            capacity in 1u64..2_000,
            requests in prop::collection::vec((0u64..64, 1u64..600), 1..400),
        ) {
            for name in REFERENCE_NAMES {
                let mut cache = build(name, capacity).expect("a named reference cache");
                let mut inserted: HashMap<u64, u64> = HashMap::new();
                for &(key, size) in &requests {
                    match cache.lookup(key) {
                        Some(cached) => prop_assert_eq!(Some(&cached), inserted.get(&key), "{}", name),
                        None => {
                            if cache.insert(key, size) {
                                inserted.insert(key, size);
                            }
                        }
                    }
                    prop_assert!(cache.used_bytes() <= capacity, "{} holds {} > {}", name, cache.used_bytes(), capacity);
                }
            }
        }
    }
}
