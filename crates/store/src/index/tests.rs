//! Index invariants: the budget, global order across shards in both queues (small,
//! then main), placement rules.

use super::*;

fn fill(fill_id: FillId, size: u64) -> Fill {
    Fill { fill_id, size }
}

/// Pops everything, returning the keys in eviction order.
fn drain(index: &Index) -> Vec<u128> {
    std::iter::from_fn(|| index.pop_victim().map(|(k, _)| k.0)).collect()
}

#[test]
fn reservations_stay_inside_the_budget() {
    let index = Index::new(1000);
    assert!(index.try_reserve(600));
    assert!(!index.try_reserve(401), "600 + 401 > 1000");
    assert!(!index.could_fit(401), "evicting cannot free reserved bytes");
    assert!(index.could_fit(400));
    assert!(index.try_reserve(400));
    assert!(!index.try_reserve(1));
    assert_eq!(index.counts().reserved_bytes, 1000);
    index.release_reservation(400);
    // A 600-byte reservation becomes a 550-byte file: 50 come back.
    index.commit_reservation(600, 550);
    let counts = index.counts();
    assert_eq!((counts.reserved_bytes, counts.object_bytes), (0, 550));
    assert!(index.try_reserve(450));
    assert!(!index.try_reserve(1));
    index.release_object(550);
    assert!(index.try_reserve(550));
    assert!(
        !index.try_reserve(u64::MAX),
        "overflow is a refusal, not a wrap"
    );
    assert!(!Index::new(10).try_reserve(11));
}

/// The size of an entry not hit in the tests of eviction order; those hit are 1 byte,
/// so one entry not hit keeps the small queue over its share (a tenth of the indexed
/// bytes) against up to 9 * [`UNHIT`] - 1 hit ones in the main queue.
const UNHIT: u64 = 1000;

#[test]
fn eviction_walks_the_small_queue_in_global_fill_order_then_the_main_one() {
    let index = Index::new(u64::MAX);
    // Far more keys than shards, so every shard holds several.
    let keys: Vec<StoreHash> = (0..200u128)
        .map(|i| StoreHash(i * 0x9e37_79b9_7f4a_7c15))
        .collect();
    // Hit every third key, newest first: hits move nothing, so the order of the hits
    // does not matter.
    let touched: Vec<StoreHash> = keys.iter().copied().step_by(3).rev().collect();
    for (i, &k) in keys.iter().enumerate() {
        let size = if touched.contains(&k) { 1 } else { UNHIT };
        assert_eq!(
            index.place(k, fill(FillId(i as u64), size), Provenance::Live),
            Placed::New
        );
    }
    for &k in &touched {
        assert!(index.touch(k).is_some());
    }
    // The small queue's walk moves the hit keys to the main queue (their hit spent) and
    // evicts the others in fill order; then the main queue's, in the order they moved.
    let untouched = keys.iter().copied().filter(|k| !touched.contains(k));
    let expected: Vec<u128> = untouched
        .chain(keys.iter().copied().step_by(3))
        .map(|k| k.0)
        .collect();
    assert_eq!(drain(&index), expected);
    assert_eq!(index.len(), 0);
    assert_eq!(index.counts().evictions, 200);
}

#[test]
fn the_small_queue_is_walked_only_while_over_its_share() {
    let index = Index::new(u64::MAX);
    for key in 1..=9u128 {
        index.place(
            StoreHash(key),
            fill(FillId(key as u64), 10),
            Provenance::Live,
        );
        index.touch(StoreHash(key));
    }
    index.place(StoreHash(10), fill(FillId(10), 10), Provenance::Live);
    // All in the small queue: its walk moves 1 to 9 to the main queue and evicts 10.
    assert_eq!(drain_one(&index), Some(10));
    // 10 bytes of 100 are not over a tenth: the main queue gives up 1 (its hit was
    // spent moving), though 11 is newer and was never hit.
    index.place(StoreHash(11), fill(FillId(11), 10), Provenance::Live);
    assert_eq!(drain_one(&index), Some(1));
    // 30 bytes of 110 are: 11 goes, and 12 stays.
    index.place(StoreHash(12), fill(FillId(12), 20), Provenance::Live);
    assert_eq!(drain_one(&index), Some(11));
    assert!(index.contains(StoreHash(12)));
}

#[test]
fn far_below_its_budget_the_index_still_walks_the_small_queue_first() {
    // As when `cache.min_free` evicts: a budget of 1 GiB, a few KB indexed. The share is
    // of the indexed bytes, so the hit entry in the main queue outlives every fill not
    // hit; a share of the budget would walk the main queue and evict it at once.
    let index = Index::new(1 << 30);
    index.place(StoreHash(0), fill(FillId(0), 100), Provenance::Live);
    index.touch(StoreHash(0));
    for key in 1..=50u128 {
        index.place(
            StoreHash(key),
            fill(FillId(key as u64), 100),
            Provenance::Live,
        );
    }
    for key in 1..=50 {
        index.touch(StoreHash(0));
        assert_eq!(drain_one(&index), Some(key));
    }
    assert_eq!(drain(&index), vec![0]);
}

#[test]
fn each_hit_in_the_main_queue_buys_one_pass_up_to_seven() {
    let index = Index::new(u64::MAX);
    // Hit once in the small queue, 1 to 5 move to the main queue with no hits when
    // the first eviction walks it; 0, filled last and not hit, is the one evicted.
    for key in (1..6u128).chain([0]) {
        index.place(
            StoreHash(key),
            fill(FillId(key as u64), 1),
            Provenance::Live,
        );
        if key > 0 {
            index.touch(StoreHash(key));
        }
    }
    assert_eq!(drain_one(&index), Some(0));
    for (key, hits) in [(1u128, 9), (2, 7), (3, 2), (4, 0), (5, 1)] {
        for _ in 0..hits {
            index.touch(StoreHash(key));
        }
    }
    // 4 goes first; then 5 (1 hit), 3 (2 hits); 1 and 2 both saturated at 7, so the
    // older, 1, goes before 2, though it was hit more.
    assert_eq!(drain(&index), vec![4, 5, 3, 1, 2]);
}

fn drain_one(index: &Index) -> Option<u128> {
    index.pop_victim().map(|(k, _)| k.0)
}

#[test]
fn newer_fill_wins_and_live_beats_scanned() {
    let index = Index::new(u64::MAX);
    let k = 7;
    assert_eq!(
        index.place(StoreHash(k), fill(FillId(5), 1), Provenance::Live),
        Placed::New
    );
    assert_eq!(
        index.place(StoreHash(k), fill(FillId(4), 2), Provenance::Live),
        Placed::Lost
    );
    assert_eq!(
        index.place(StoreHash(k), fill(FillId(6), 3), Provenance::Live),
        Placed::Replaced(fill(FillId(5), 1))
    );
    // A scanned file never displaces a live one, even with a higher id.
    assert_eq!(
        index.place(StoreHash(k), fill(FillId(99), 4), Provenance::Scanned),
        Placed::Lost
    );
    assert_eq!(
        index.touch(StoreHash(k)).map(|(found, _)| found),
        Some(fill(FillId(6), 3))
    );
    assert_eq!(index.len(), 1);

    let s = 8;
    assert_eq!(
        index.place(StoreHash(s), fill(FillId(50), 1), Provenance::Scanned),
        Placed::New
    );
    assert_eq!(
        index.place(StoreHash(s), fill(FillId(40), 1), Provenance::Scanned),
        Placed::Lost
    );
    assert_eq!(
        index.place(StoreHash(s), fill(FillId(60), 2), Provenance::Scanned),
        Placed::Replaced(fill(FillId(50), 1))
    );
    // Any live fill beats a scanned one, even with a lower id (a clock that went back).
    assert_eq!(
        index.place(StoreHash(s), fill(FillId(1), 3), Provenance::Live),
        Placed::Replaced(fill(FillId(60), 2))
    );
    assert_eq!(index.len(), 2);
}

#[test]
fn scanned_entries_are_evicted_before_anything_touched_since_start() {
    let index = Index::new(u64::MAX);
    index.place(StoreHash(1), fill(FillId(1), UNHIT), Provenance::Live);
    index.place(StoreHash(2), fill(FillId(2), UNHIT), Provenance::Scanned);
    index.place(StoreHash(3), fill(FillId(3), 1), Provenance::Scanned);
    index.place(StoreHash(4), fill(FillId(4), UNHIT), Provenance::Live);
    // A scanned entry that is hit moves to the main queue, behind the live ones.
    index.touch(StoreHash(3));
    assert_eq!(drain(&index), vec![2, 1, 4, 3]);
}

#[test]
fn remove_takes_only_the_named_fill() {
    let index = Index::new(u64::MAX);
    index.place(StoreHash(1), fill(FillId(10), 5), Provenance::Live);
    assert_eq!(
        index.remove(FillRef {
            key: StoreHash(1),
            fill: FillId(9)
        }),
        None
    );
    assert!(index.contains(StoreHash(1)));
    assert_eq!(
        index.remove(FillRef {
            key: StoreHash(1),
            fill: FillId(10)
        }),
        Some(fill(FillId(10), 5))
    );
    assert!(!index.contains(StoreHash(1)));
    assert_eq!(
        index.remove(FillRef {
            key: StoreHash(1),
            fill: FillId(10)
        }),
        None
    );
    assert_eq!(index.len(), 0);
    assert_eq!(index.counts().evictions, 0, "a removal is not an eviction");
}

/// A tiny deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// The two queues as plain vectors, oldest first, each entry with its unspent hits.
#[derive(Default)]
struct Model {
    small: Vec<(u128, Fill, u8)>,
    main: Vec<(u128, Fill, u8)>,
}

impl Model {
    /// The key's queue (true: small) and position.
    fn find(&self, key: u128) -> Option<(bool, usize)> {
        let at = |queue: &[(u128, Fill, u8)]| queue.iter().position(|e| e.0 == key);
        at(&self.main)
            .map(|i| (false, i))
            .or_else(|| at(&self.small).map(|i| (true, i)))
    }

    fn queue(&mut self, small: bool) -> &mut Vec<(u128, Fill, u8)> {
        if small {
            &mut self.small
        } else {
            &mut self.main
        }
    }

    /// S3-FIFO's eviction, written out: the small queue while it holds more than a
    /// tenth of the bytes (or the main one is empty), moving hit entries to the main one.
    fn evict(&mut self) -> Option<(StoreHash, Fill)> {
        let bytes = |queue: &[(u128, Fill, u8)]| queue.iter().map(|e| e.1.size).sum::<u64>();
        let (small_bytes, main_bytes) = (bytes(&self.small), bytes(&self.main));
        let mut small = small_bytes > (small_bytes + main_bytes) / 10 || self.main.is_empty();
        loop {
            if self.queue(small).is_empty() {
                small = !small;
                if self.queue(small).is_empty() {
                    return None;
                }
            }
            let (key, fill, hits) = self.queue(small).remove(0);
            match (hits, small) {
                (0, _) => return Some((StoreHash(key), fill)),
                (_, true) => self.main.push((key, fill, 0)),
                (hits, false) => self.main.push((key, fill, hits - 1)),
            }
        }
    }
}

/// Random operations against [`Model`]: the index must agree on contents and on every
/// eviction, with the small queue now over its share and now within it.
#[test]
fn matches_a_simple_model_under_random_operations() {
    for seed in 1..=20u64 {
        let index = Index::new(u64::MAX);
        let mut model = Model::default();
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut next_id = 1;
        for _ in 0..2000 {
            // Keys spread over the shards: a multiplier scatters the low bits.
            let key = u128::from(rng.below(64)) * 0x1_0000_0001;
            match rng.below(4) {
                0 => {
                    let f = fill(FillId(next_id), rng.below(100));
                    next_id += 1;
                    // A live refill keeps the key's queue and hits, at the new end.
                    let expected = match model.find(key) {
                        Some((small, i)) => {
                            let (_, old, hits) = model.queue(small).remove(i);
                            model.queue(small).push((key, f, hits));
                            Placed::Replaced(old)
                        }
                        None => {
                            model.small.push((key, f, 0));
                            Placed::New
                        }
                    };
                    assert_eq!(index.place(StoreHash(key), f, Provenance::Live), expected);
                }
                1 => {
                    let expected = model.find(key).map(|(small, i)| {
                        let entry = &mut model.queue(small)[i];
                        entry.2 = (entry.2 + 1).min(MAX_HITS);
                        entry.1
                    });
                    assert_eq!(
                        index.touch(StoreHash(key)).map(|(found, _)| found),
                        expected
                    );
                }
                2 => assert_eq!(index.pop_victim(), model.evict(), "seed {seed}"),
                _ => {
                    let expected = model
                        .find(key)
                        .map(|(small, i)| model.queue(small).remove(i).1);
                    let fill = expected.map_or(FillId(0), |f| f.fill_id);
                    let at = FillRef {
                        key: StoreHash(key),
                        fill,
                    };
                    assert_eq!(index.remove(at), expected);
                }
            }
            let entries = model.small.len() + model.main.len();
            assert_eq!(index.len(), entries as u64);
        }
    }
}

proptest::proptest! {
    /// The store's fill path under random requests of random sizes: evicting until
    /// the reservation fits keeps entry bytes plus reservations inside the budget.
    #[test]
    fn the_budget_always_holds(
        requests in proptest::collection::vec((0u128..40, 1u64..300), 1..400),
        budget in 300u64..2000,
    ) {
        let index = Index::new(budget);
        for (i, &(key, size)) in requests.iter().enumerate() {
            if index.touch(StoreHash(key)).is_some() {
                continue;
            }
            let mut fits = true;
            while !index.try_reserve(size) {
                match index.pop_victim() {
                    Some((_, evicted)) => index.release_object(evicted.size),
                    None => {
                        fits = false;
                        break;
                    }
                }
            }
            proptest::prop_assert!(fits, "{size} <= {budget} always fits an empty cache");
            index.place(StoreHash(key), fill(FillId(i as u64), size), Provenance::Live);
            index.commit_reservation(size, size);
            let counts = index.counts();
            proptest::prop_assert!(counts.object_bytes + counts.reserved_bytes <= budget);
        }
    }

    /// With no request after them, every entry hit since its fill outlives every
    /// entry that was not, whatever the fill order and the hits, while the small
    /// queue is over its share (here: the entries hit are small, see [`UNHIT`]).
    #[test]
    fn an_entry_hit_since_its_fill_outlives_one_that_was_not(
        hit in proptest::collection::vec(proptest::bool::ANY, 1..120),
    ) {
        // Key i is i * STRIDE: spread over the shards, and its number is key / STRIDE.
        const STRIDE: u128 = 0x9e37_79b9;
        let index = Index::new(u64::MAX);
        for (i, &hit) in hit.iter().enumerate() {
            let size = if hit { 1 } else { UNHIT };
            index.place(StoreHash(i as u128 * STRIDE), fill(FillId(i as u64), size), Provenance::Live);
        }
        for (i, &hit) in hit.iter().enumerate() {
            if hit {
                index.touch(StoreHash(i as u128 * STRIDE));
            }
        }
        let order = drain(&index);
        proptest::prop_assert_eq!(order.len(), hit.len());
        let was_hit = |key: &u128| hit[(key / STRIDE) as usize];
        if let (Some(last_not_hit), Some(first_hit)) = (
            order.iter().rposition(|key| !was_hit(key)),
            order.iter().position(was_hit),
        ) {
            proptest::prop_assert!(last_not_hit < first_hit, "{:?}", order);
        }
    }
}

#[test]
fn objects_when_full_extrapolates_the_mean_entry_size() {
    let index = Index::new(10_000);
    assert_eq!(
        index.objects_when_full(),
        0,
        "an empty cache says nothing yet"
    );
    for key in 0..4u128 {
        assert!(index.try_reserve(500));
        index.place(
            StoreHash(key),
            fill(FillId(key as u64 + 1), 500),
            Provenance::Live,
        );
        index.commit_reservation(500, 500);
    }
    // 4 entries of 500 bytes in 2,000 bytes: a full 10,000-byte cache holds 20.
    assert_eq!(index.objects_when_full(), 20);
}

/// A key hash for the ghost's tests: its low bits pick shard `n % SHARDS`, its high bits
/// (what the ghost keeps) are `n`.
fn spread(n: u128) -> u128 {
    (n << 64) | n
}

/// Nine hit entries of 10 bytes in the main queue, and `spread(10)` evicted unhit from
/// the small queue (and so remembered when the ghost is on).
fn with_ten_evicted_unhit(ghost: bool) -> Index {
    let index = Index::new(10_000);
    index.keep_ghost(ghost);
    for n in 1..=9u128 {
        index.place(
            StoreHash(spread(n)),
            fill(FillId(n as u64), 10),
            Provenance::Live,
        );
        index.touch(StoreHash(spread(n)));
    }
    index.place(
        StoreHash(spread(10)),
        fill(FillId(10), 10),
        Provenance::Live,
    );
    assert_eq!(drain_one(&index), Some(spread(10)));
    index
}

#[test]
fn with_the_ghost_on_a_key_evicted_unhit_is_filled_again_into_the_main_queue() {
    for ghost in [false, true] {
        let index = with_ten_evicted_unhit(ghost);
        assert_eq!(
            index.place(
                StoreHash(spread(10)),
                fill(FillId(20), 10),
                Provenance::Live
            ),
            Placed::New
        );
        index.place(
            StoreHash(spread(11)),
            fill(FillId(21), 20),
            Provenance::Live,
        );
        // The small queue is over its share: its oldest unhit entry goes. With the
        // ghost, 10 skipped the small queue and 11 is its only entry.
        let expected = if ghost { spread(11) } else { spread(10) };
        assert_eq!(drain_one(&index), Some(expected), "ghost {ghost}");
    }
}

#[test]
fn turning_the_ghost_off_forgets_the_keys_it_remembered() {
    let index = with_ten_evicted_unhit(true);
    index.keep_ghost(false);
    index.keep_ghost(true);
    index.place(
        StoreHash(spread(10)),
        fill(FillId(20), 10),
        Provenance::Live,
    );
    index.place(
        StoreHash(spread(11)),
        fill(FillId(21), 20),
        Provenance::Live,
    );
    assert_eq!(
        drain_one(&index),
        Some(spread(10)),
        "10 went to the small queue"
    );
}

#[test]
fn the_ghost_forgets_keys_past_nine_tenths_of_the_budget() {
    // 900 bytes over all shards: each key here is larger than a shard's 32nd of them.
    let index = Index::new(1000);
    index.keep_ghost(true);
    // Keys of shard 0, evicted unhit in this order.
    let keys: Vec<StoreHash> = (1..=3u128).map(|n| StoreHash(n << 64)).collect();
    for (i, &key) in keys.iter().enumerate() {
        index.place(key, fill(FillId(i as u64), 400), Provenance::Live);
    }
    assert_eq!(drain(&index), keys.iter().map(|k| k.0).collect::<Vec<_>>());
    assert_eq!(
        index.counts().ghost_keys,
        2,
        "1200 bytes evicted, 900 remembered at most"
    );
    // The first key was forgotten, the others are remembered.
    for (i, &key) in keys.iter().enumerate() {
        index.place(key, fill(FillId(10 + i as u64), 400), Provenance::Live);
    }
    let new = 99 << 64;
    index.place(StoreHash(new), fill(FillId(20), 400), Provenance::Live);
    // Small queue: the forgotten first key and the new one; main: the other two.
    assert_eq!(drain(&index), vec![keys[0].0, new, keys[1].0, keys[2].0]);
}

#[test]
fn a_full_count_gives_a_version_that_every_change_of_its_shard_ends() {
    let index = Index::new(1 << 20);
    let (key, neighbour) = (3u128, 3 + SHARDS as u128);
    index.place(StoreHash(key), fill(FillId(1), 100), Provenance::Live);
    // The count fills on the MAX_HITS-th hit; only then is there nothing left to count.
    for _ in 1..MAX_HITS {
        assert_eq!(
            index.touch(StoreHash(key)).map(|(_, version)| version),
            Some(None)
        );
    }
    let (_, Some(version)) = index.touch(StoreHash(key)).unwrap() else {
        panic!("a full count gives a version");
    };
    assert!(index.unchanged_since(StoreHash(key), version));
    // Hits change nothing.
    index.touch(StoreHash(key));
    index.touch(StoreHash(neighbour));
    assert!(index.unchanged_since(StoreHash(key), version));
    // A fill of another key of the shard does.
    index.place(StoreHash(neighbour), fill(FillId(2), 100), Provenance::Live);
    assert!(!index.unchanged_since(StoreHash(key), version));

    let (_, Some(version)) = index.touch(StoreHash(key)).unwrap() else {
        panic!("the count is still full");
    };
    assert!(
        index
            .remove(FillRef {
                key: StoreHash(neighbour),
                fill: FillId(2)
            })
            .is_some()
    );
    assert!(!index.unchanged_since(StoreHash(key), version));

    let (_, Some(version)) = index.touch(StoreHash(key)).unwrap() else {
        panic!("the count is still full");
    };
    // An eviction pass spends counts and moves entries.
    index.pop_victim();
    assert!(!index.unchanged_since(StoreHash(key), version));
}

#[test]
fn a_key_found_absent_is_found_once_placed() {
    let index = Index::new(u64::MAX);
    assert_eq!(index.touch(StoreHash(42)), None);
    assert_eq!(index.touch(StoreHash(42)), None, "still absent");
    index.place(StoreHash(42), fill(FillId(1), 10), Provenance::Live);
    assert_eq!(
        index.touch(StoreHash(42)).map(|(found, _)| found),
        Some(fill(FillId(1), 10))
    );
    assert!(
        index
            .remove(FillRef {
                key: StoreHash(42),
                fill: FillId(1)
            })
            .is_some()
    );
    assert_eq!(index.touch(StoreHash(42)), None, "gone once removed");
}

#[test]
fn a_key_found_absent_again_on_a_thread_takes_no_lock() {
    let index = std::sync::Arc::new(Index::new(u64::MAX));
    let (to_main, from_worker) = std::sync::mpsc::channel();
    let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn({
        let index = index.clone();
        move || {
            let first = index.touch(StoreHash(7));
            to_main.send(first.is_none()).expect("main waits");
            from_main.recv().expect("main says when");
            to_main
                .send(index.touch(StoreHash(7)).is_none())
                .expect("main waits");
        }
    });
    assert_eq!(from_worker.recv(), Ok(true), "absent");
    let held = index.shard(StoreHash(7));
    to_worker.send(()).expect("the worker waits");
    // Taking the lock would block until it is dropped below, past this wait.
    let answered = from_worker.recv_timeout(std::time::Duration::from_secs(10));
    drop(held);
    worker.join().expect("the worker thread");
    assert_eq!(
        answered,
        Ok(true),
        "answered while the shard's lock was held"
    );
}
