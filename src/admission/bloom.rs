//! One plain Bloom filter: `m` bits, `k` probes, shared between threads.
//!
//! A Bloom filter (Bloom, "Space/Time Trade-offs in Hash Coding with Allowable
//! Errors", CACM 1970) answers "have I seen this key?" with no false negatives
//! and a tunable false-positive rate `p`. Inserting a key sets `k` bits; a key is
//! reported present when all its `k` bits are set. For `n` keys in `m` bits the
//! best `k` is `(m/n) ln 2`, which gives `p ≈ 0.6185^(m/n)`, i.e.
//! `m = -n ln p / (ln 2)^2` (9.6 bits per key for 1%, 14.4 for 0.1%).
//!
//! The `k` bit positions come from double hashing (Kirsch & Mitzenmacher, "Less
//! Hashing, Same Performance: Building a Better Bloom Filter", ESA 2006):
//! `g_i = h1 + i·h2 mod m`, with `h1` and `h2` the two 64-bit halves of the
//! 128-bit [`FilterHash`]. This has the same asymptotic false-positive rate as
//! `k` independent hashes, from one hash computation.
//!
//! The bits live in `AtomicU64` words so that many threads can insert and query
//! through `&self` without a lock. Every bit operation uses `Ordering::Relaxed`:
//! the filter's only promise is per-bit coherence (once an insert of a key
//! happens-before a query, the query's loads see that insert's bits, because a
//! load cannot read a value older in a word's modification order than one that
//! happens-before it), and every later change to a word is either another
//! `fetch_or` (which only adds bits) or [`BloomFilter::clear`], which callers
//! must serialise against queries themselves (the aging pair does it under a
//! write lock). No other memory is published through these bits, so no
//! acquire/release pairing is needed.

use std::sync::atomic::{AtomicU64, Ordering};

use super::FilterHash;

/// Sizing: bits m (rounded up to a multiple of 64), probes k, and the generation size n (new keys one filter takes before the pair rotates).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterParams {
    /// Bits per filter (`m`), a multiple of 64 and at least 64.
    pub bits: u64,
    /// Probes per key (`k`), at least 1.
    pub probes: u32,
    /// New keys one filter takes before the pair rotates (`n`), at least 1.
    pub generation_size: u64,
    /// The target false-positive rate of one filter holding `generation_size` keys.
    pub false_positive_rate: f64,
}

impl FilterParams {
    /// Sizes one filter for `n` keys at false-positive rate `p`:
    /// `m = ceil(-n ln p / (ln 2)^2)` rounded up to whole words, `k = max(1, round((m/n) ln 2))`.
    ///
    /// `p` must lie strictly inside (0, 1) (the config validates it); `n = 0` is treated as 1.
    pub fn for_expected_keys(n: u64, p: f64) -> FilterParams {
        debug_assert!(p > 0.0 && p < 1.0, "false-positive rate {p} outside (0, 1)");
        let n = n.max(1);
        let ln2_sq = std::f64::consts::LN_2 * std::f64::consts::LN_2;
        // `as` saturates (and maps NaN to 0), so no input can wrap; `whole_words` then
        // guarantees at least one word.
        let raw_bits = (-(n as f64) * p.ln() / ln2_sq).ceil() as u64;
        let bits = whole_words(raw_bits);
        FilterParams {
            bits,
            probes: optimal_probes(bits, n),
            generation_size: n,
            false_positive_rate: p,
        }
    }

    /// Sizes a pair of filters to fit `pair_bytes`: each filter gets `pair_bytes / 2`, floored to
    /// whole u64 words (at least one word); `n = max(1, floor(m (ln 2)^2 / -ln p))`; `k` as in
    /// [`FilterParams::for_expected_keys`].
    pub fn for_memory(pair_bytes: u64, p: f64) -> FilterParams {
        debug_assert!(p > 0.0 && p < 1.0, "false-positive rate {p} outside (0, 1)");
        let words = (pair_bytes / 2 / 8).max(1);
        let bits = words.saturating_mul(64);
        let ln2_sq = std::f64::consts::LN_2 * std::f64::consts::LN_2;
        let n = ((bits as f64 * ln2_sq / -p.ln()).floor() as u64).max(1);
        FilterParams {
            bits,
            probes: optimal_probes(bits, n),
            generation_size: n,
            false_positive_rate: p,
        }
    }

    /// Bytes of one filter's bit array.
    pub fn filter_bytes(&self) -> u64 {
        self.bits / 8
    }

    /// The same parameters with every field in its valid range (the fields are public, so a
    /// hand-built value may hold zeros): bits rounded up to whole words, at least one probe and a
    /// generation of at least one key.
    pub(super) fn normalized(&self) -> FilterParams {
        FilterParams {
            bits: whole_words(self.bits),
            probes: self.probes.max(1),
            generation_size: self.generation_size.max(1),
            false_positive_rate: self.false_positive_rate,
        }
    }
}

/// Rounds a bit count up to whole 64-bit words, at least one word.
fn whole_words(bits: u64) -> u64 {
    bits.div_ceil(64).max(1).saturating_mul(64)
}

/// `k = max(1, round((m/n) ln 2))`, the probe count that minimises the false-positive rate.
fn optimal_probes(bits: u64, n: u64) -> u32 {
    let k = (bits as f64 / n as f64 * std::f64::consts::LN_2).round();
    // Saturating float-to-int cast: an absurd ratio gives u32::MAX probes rather than wrapping.
    (k as u32).max(1)
}

/// A plain Bloom filter over AtomicU64 words; probes by double hashing (Kirsch & Mitzenmacher) from the two 64-bit halves of the FilterHash.
pub struct BloomFilter {
    /// The bit array; bit `i` is bit `i % 64` of word `i / 64`.
    words: Box<[AtomicU64]>,
    /// Bits in `words` (`m`), kept to avoid recomputing it per probe.
    bits: u64,
    /// Probes per key (`k`).
    probes: u32,
}

impl BloomFilter {
    /// An empty filter with `params.bits` bits (rounded up to whole words, at least one) and
    /// `params.probes` probes (at least one).
    pub fn new(params: &FilterParams) -> Self {
        let params = params.normalized();
        let words: Box<[AtomicU64]> = (0..params.bits / 64).map(|_| AtomicU64::new(0)).collect();
        BloomFilter {
            bits: params.bits,
            words,
            probes: params.probes,
        }
    }

    /// Whether all of `h`'s bits are set: false means certainly never inserted since the last clear.
    pub fn contains(&self, h: FilterHash) -> bool {
        self.probe_positions(h).all(|bit| {
            let (word, mask) = split(bit);
            self.words[word].load(Ordering::Relaxed) & mask != 0
        })
    }

    /// Sets all of `h`'s bits; returns true if at least one bit was newly set (false means the
    /// filter already reported `h` present, or another thread inserted the same bits meanwhile).
    pub fn insert(&self, h: FilterHash) -> bool {
        let mut newly_set = false;
        for bit in self.probe_positions(h) {
            let (word, mask) = split(bit);
            // fetch_or rather than load-then-store: two threads setting different bits of one
            // word must not overwrite each other.
            let old = self.words[word].fetch_or(mask, Ordering::Relaxed);
            newly_set |= old & mask == 0;
        }
        newly_set
    }

    /// Clears every bit. Not atomic as a whole: the caller must keep queries away meanwhile.
    pub fn clear(&self) {
        for word in self.words.iter() {
            word.store(0, Ordering::Relaxed);
        }
    }

    /// Number of bits set (a fill gauge; `O(m/64)`).
    pub fn bits_set(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }

    /// The `k` bit positions of `h`: `g_i = h1 + i·h2 mod m`.
    fn probe_positions(&self, h: FilterHash) -> impl Iterator<Item = u64> {
        let m = self.bits;
        let mut pos = (h.0 as u64) % m;
        // An odd step: `m` is a multiple of 64, so gcd(step, m) is odd and divides m/64, and the
        // sequence visits at least 64 distinct positions before repeating (never a zero step).
        let step = ((h.0 >> 64) as u64 % m) | 1;
        (0..self.probes).map(move |_| {
            let bit = pos;
            // pos + step mod m without overflow or division (both are < m).
            pos = if pos >= m - step {
                pos - (m - step)
            } else {
                pos + step
            };
            bit
        })
    }
}

/// Word index and mask of a bit position.
fn split(bit: u64) -> (usize, u64) {
    // bit / 64 < words.len(), which is a usize, so the cast cannot truncate.
    ((bit / 64) as usize, 1u64 << (bit % 64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use xxhash_rust::xxh3::xxh3_128;

    /// Deterministic test keys: the xxh3-128 of a counter.
    fn key(i: u64) -> FilterHash {
        FilterHash(xxh3_128(&i.to_le_bytes()))
    }

    #[test]
    fn one_million_keys_at_one_percent() {
        let params = FilterParams::for_expected_keys(1_000_000, 0.01);
        let bits_per_key = params.bits as f64 / 1_000_000.0;
        assert!((9.58..9.60).contains(&bits_per_key), "{bits_per_key}");
        assert_eq!(params.probes, 7);
        assert_eq!(params.bits % 64, 0);
        assert_eq!(params.generation_size, 1_000_000);
        assert_eq!(params.filter_bytes(), params.bits / 8);
    }

    #[test]
    fn for_memory_round_trips() {
        for (n, p) in [(1_000_000, 0.01), (12_345, 0.001), (100, 0.05)] {
            let sized = FilterParams::for_expected_keys(n, p);
            let back = FilterParams::for_memory(2 * sized.filter_bytes(), p);
            assert_eq!(back.bits, sized.bits);
            assert_eq!(back.probes, sized.probes);
            // Rounding m up to whole words can only add a few keys of room.
            let diff = back.generation_size.abs_diff(n);
            assert!(diff <= n / 1000 + 8, "n={n}: got {}", back.generation_size);
        }
    }

    #[test]
    fn degenerate_sizes_still_make_a_usable_filter() {
        let tiny = FilterParams::for_memory(0, 0.01);
        assert_eq!(tiny.bits, 64);
        assert!(tiny.generation_size >= 1 && tiny.probes >= 1);
        let zero_keys = FilterParams::for_expected_keys(0, 0.01);
        assert_eq!(zero_keys.generation_size, 1);
        let filter = BloomFilter::new(&tiny);
        assert!(filter.insert(key(1)));
        assert!(filter.contains(key(1)));
    }

    #[test]
    fn no_false_negatives() {
        let filter = BloomFilter::new(&FilterParams::for_expected_keys(10_000, 0.01));
        for i in 0..10_000 {
            filter.insert(key(i));
        }
        for i in 0..10_000 {
            assert!(filter.contains(key(i)), "key {i} lost");
        }
    }

    #[test]
    fn false_positive_rate_at_design_load() {
        for p in [0.01, 0.001] {
            let params = FilterParams::for_expected_keys(10_000, p);
            let filter = BloomFilter::new(&params);
            for i in 0..10_000 {
                filter.insert(key(i));
            }
            let absent = 100_000;
            let false_positives = (10_000..10_000 + absent)
                .filter(|&i| filter.contains(key(i)))
                .count();
            let measured = false_positives as f64 / absent as f64;
            assert!(measured <= 1.5 * p, "p={p}: measured {measured}");
        }
    }

    #[test]
    fn insert_reports_new_bits_and_clear_empties() {
        let filter = BloomFilter::new(&FilterParams::for_expected_keys(1_000, 0.01));
        assert!(!filter.contains(key(7)));
        assert!(filter.insert(key(7)));
        assert!(!filter.insert(key(7)), "second insert sets nothing new");
        let set = filter.bits_set();
        assert!(set >= 1 && set <= u64::from(filter.probes));
        filter.clear();
        assert_eq!(filter.bits_set(), 0);
        assert!(!filter.contains(key(7)));
    }

    #[test]
    fn probes_are_distinct_and_in_range() {
        // 192 bits = 3 words: m has an odd factor, the case where a step could share one with m.
        let params = FilterParams {
            bits: 192,
            probes: 40,
            generation_size: 1,
            false_positive_rate: 0.5,
        };
        let filter = BloomFilter::new(&params);
        for i in 0..1_000 {
            let mut seen: Vec<u64> = filter.probe_positions(key(i)).collect();
            assert!(seen.iter().all(|&b| b < 192));
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), 40, "key {i} repeats a position");
        }
    }
}
