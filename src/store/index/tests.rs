//! Index invariants: the budget, global LRU order across shards, placement rules.

use super::*;

fn fill(fill_id: u64, size: u64) -> Fill {
    Fill { fill_id, size }
}

/// Pops everything, returning the keys in eviction order.
fn drain(index: &Index) -> Vec<u128> {
    std::iter::from_fn(|| index.pop_lru().map(|(k, _)| k)).collect()
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

#[test]
fn eviction_follows_global_recency_across_shards() {
    let index = Index::new(u64::MAX);
    // Far more keys than shards, so every shard holds several.
    let keys: Vec<u128> = (0..200u128).map(|i| i * 0x9e37_79b9_7f4a_7c15).collect();
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(
            index.place(k, fill(i as u64, 10), Provenance::Live),
            Placed::New
        );
    }
    // Touch every third key, newest last: those become the most recent, in that order.
    let touched: Vec<u128> = keys.iter().copied().step_by(3).rev().collect();
    for &k in &touched {
        assert!(index.touch(k).is_some());
    }
    let untouched = keys.iter().copied().filter(|k| !touched.contains(k));
    let expected: Vec<u128> = untouched.chain(touched.iter().copied()).collect();
    assert_eq!(drain(&index), expected);
    assert_eq!(index.len(), 0);
    assert_eq!(index.counts().evictions, 200);
}

#[test]
fn newer_fill_wins_and_live_beats_scanned() {
    let index = Index::new(u64::MAX);
    let k = 7;
    assert_eq!(index.place(k, fill(5, 1), Provenance::Live), Placed::New);
    assert_eq!(index.place(k, fill(4, 2), Provenance::Live), Placed::Lost);
    assert_eq!(
        index.place(k, fill(6, 3), Provenance::Live),
        Placed::Replaced(fill(5, 1))
    );
    // A scanned file never displaces a live one, even with a higher id.
    assert_eq!(
        index.place(k, fill(99, 4), Provenance::Scanned),
        Placed::Lost
    );
    assert_eq!(index.touch(k), Some(fill(6, 3)));
    assert_eq!(index.len(), 1);

    let s = 8;
    assert_eq!(
        index.place(s, fill(50, 1), Provenance::Scanned),
        Placed::New
    );
    assert_eq!(
        index.place(s, fill(40, 1), Provenance::Scanned),
        Placed::Lost
    );
    assert_eq!(
        index.place(s, fill(60, 2), Provenance::Scanned),
        Placed::Replaced(fill(50, 1))
    );
    // Any live fill beats a scanned one, even with a lower id (a clock that went back).
    assert_eq!(
        index.place(s, fill(1, 3), Provenance::Live),
        Placed::Replaced(fill(60, 2))
    );
    assert_eq!(index.len(), 2);
}

#[test]
fn scanned_entries_are_evicted_before_anything_touched_since_start() {
    let index = Index::new(u64::MAX);
    index.place(1, fill(1, 1), Provenance::Live);
    index.place(2, fill(2, 1), Provenance::Scanned);
    index.place(3, fill(3, 1), Provenance::Scanned);
    index.place(4, fill(4, 1), Provenance::Live);
    // A scanned entry that is hit joins the live ones.
    index.touch(3);
    assert_eq!(drain(&index), vec![2, 1, 4, 3]);
}

#[test]
fn remove_takes_only_the_named_fill() {
    let index = Index::new(u64::MAX);
    index.place(1, fill(10, 5), Provenance::Live);
    assert_eq!(index.remove(1, 9), None);
    assert!(index.contains(1));
    assert_eq!(index.remove(1, 10), Some(fill(10, 5)));
    assert!(!index.contains(1));
    assert_eq!(index.remove(1, 10), None);
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

/// Random operations against a plain vector kept in recency order (least
/// recent first): the index must agree on contents and on every eviction.
#[test]
fn matches_a_simple_model_under_random_operations() {
    for seed in 1..=20u64 {
        let index = Index::new(u64::MAX);
        let mut model: Vec<(u128, Fill)> = Vec::new();
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut next_id = 1;
        for _ in 0..2000 {
            // Keys spread over the shards: a multiplier scatters the low bits.
            let key = u128::from(rng.below(64)) * 0x1_0000_0001;
            match rng.below(4) {
                0 => {
                    let f = fill(next_id, rng.below(100));
                    next_id += 1;
                    let old = model.iter().position(|(k, _)| *k == key);
                    let expected = match old {
                        Some(i) => Placed::Replaced(model.remove(i).1),
                        None => Placed::New,
                    };
                    model.push((key, f));
                    assert_eq!(index.place(key, f, Provenance::Live), expected);
                }
                1 => {
                    let expected = model.iter().position(|(k, _)| *k == key).map(|i| {
                        let entry = model.remove(i);
                        model.push(entry);
                        entry.1
                    });
                    assert_eq!(index.touch(key), expected);
                }
                2 => {
                    let expected = (!model.is_empty()).then(|| model.remove(0));
                    assert_eq!(index.pop_lru(), expected, "seed {seed}");
                }
                _ => {
                    let present = model.iter().position(|(k, _)| *k == key);
                    let expected = present.map(|i| model.remove(i).1);
                    let id = expected.map_or(0, |f| f.fill_id);
                    assert_eq!(index.remove(key, id), expected);
                }
            }
            assert_eq!(index.len(), model.len() as u64);
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
        index.place(key, fill(key as u64 + 1, 500), Provenance::Live);
        index.commit_reservation(500, 500);
    }
    // 4 entries of 500 bytes in 2,000 bytes: a full 10,000-byte cache holds 20.
    assert_eq!(index.objects_when_full(), 20);
}
