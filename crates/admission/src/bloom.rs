//! One blocked Bloom filter: `k` probes per key, all inside one 64-byte block, in two of
//! its eight words.
//!
//! A Bloom filter (Bloom, "Space/Time Trade-offs in Hash Coding with Allowable Errors",
//! CACM 1970) answers "have I seen this key?" with no false negatives and a tunable
//! false-positive rate: inserting a key sets `k` bits, and a key is reported present when
//! all its `k` bits are set. A plain filter scatters those bits over the whole array, so a
//! query costs up to `k` cache misses. A *blocked* Bloom filter (Putze, Sanders & Singler,
//! "Cache-, Hash- and Space-Efficient Bloom Filters", WEA 2007 / JEA 2009) first picks one
//! 512-bit block — one cache line — and puts all `k` bits of the key there, so a query or an
//! insert costs one cache miss. The price is accuracy: blocks receive unequal numbers of keys
//! (Poisson-distributed), and an overloaded block answers "yes" more often, so a blocked
//! filter needs a few more bits per key than a plain one for the same rate.
//!
//! # Two words per key: the cache-sectorized layout
//! Within its block a key's bits are not spread over all eight 64-bit words: the block is
//! two groups of four words, and the key picks one word in each group and puts `⌈k/2⌉` bits
//! in the first and `⌊k/2⌋` in the second (the "cache-sectorized" filter of Lang, Neumann,
//! Kemper & Boncz, "Performance-Optimal Filtering: Bloom Overtakes Cuckoo at High
//! Throughput", VLDB 2019). Why: once the block is in the cache (see [`BloomFilter::prefetch`])
//! the work is what remains, and here it is two loads, at most two atomic ORs, and masks
//! built in two registers. Spread over all eight words, a key would touch about four words
//! at `k = 6`, each insert would take one locked instruction per word, and building eight
//! masks from computed word indices would go through memory (`benches/filter.rs` has the
//! measurements of both layouts).
//! The accuracy cost is small at the default rate and paid in memory, not in the rate: the
//! sizing model (`params`) is this layout's own, and it asks 10.3 bits per key at 1% (9.9
//! with the bits spread over the block: +4%), 17.0 at 0.1% (15.5: +10%) and 26.0 at 0.01%
//! (21.9: +19%).
//!
//! Probe positions come from the one 128-bit [`FilterHash`]: the high half picks the block
//! (multiply-shift, Lemire's "fastrange", no division) and, from its lowest four bits (which
//! the block choice does not use), the two words; the bits inside the words come from double
//! hashing (Kirsch & Mitzenmacher, "Less Hashing, Same Performance", ESA 2006) in 64-bit
//! arithmetic, `g_i = lo + i·step`, with `lo` the low half and `step` an odd number from the
//! high half's remaining low bits. Each `g_i` then passes through a xor-shift-multiply
//! finaliser and gives its top 6 bits as the position. Why the finaliser: double hashing
//! taken straight into a range as small as a word leaves little entropy per key (a start and
//! a step), so keys sharing a word would share probe patterns far more often than
//! independent probes would; finalised, the measured rate matches the model (see the tests).
//! The finalisers of different probes do not depend on each other, so the CPU computes them
//! in parallel.
//!
//! # Concurrency and memory ordering
//! The bits live in `AtomicU64` words so that every worker thread can query and insert
//! through `&self` without a lock. Every bit operation uses `Ordering::Relaxed`. The only
//! promise a filter makes is: once an insert of a key *happens-before* a query of it, the
//! query finds it. Relaxed suffices for that because of coherence: a load cannot return a
//! value older, in that word's modification order, than a store that happens-before the
//! load; and every later modification of a word is either another `fetch_or` (which only
//! adds bits) or [`BloomFilter::clear`], which the aging pair calls only on a filter that no
//! generation uses any more (see its module docs for why that keeps every promise). No other
//! memory is published through the bits, so nothing needs acquire/release.
//!
//! There is deliberately no counter of bits set: an atomic add per insert is a second locked
//! instruction on the hot path. The fill is counted when statistics ask for it, and
//! estimated from a sample of blocks when the pair checks for saturation.

mod params;

use std::sync::atomic::{AtomicU64, Ordering};

use super::FilterHash;

use params::BLOCK_BITS;
pub use params::FilterParams;

/// 64-bit words per block (512 bits, one 64-byte cache line).
const WORDS: usize = 8;

/// Words per group: a key takes one word of each of the block's two groups.
const GROUP_WORDS: usize = WORDS / 2;

/// The odd multiplier of the probe finaliser (SplitMix64's second constant).
const FINALIZER: u64 = 0xbf58_476d_1ce4_e5b9;

/// One cache line of bits. The alignment makes every block start on a line boundary, so a
/// probe never straddles two lines.
#[repr(C, align(64))]
struct Block([AtomicU64; WORDS]);

impl Block {
    fn empty() -> Block {
        Block(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// The index of `hash`'s block in a filter of `blocks` blocks.
fn block_of(hash: FilterHash, blocks: usize) -> usize {
    let hi = (hash.0 >> 64) as u64;
    // Multiply-shift maps `hi` uniformly onto 0..blocks without a division; the product's
    // high half is below `blocks`, which is a usize, so the cast cannot truncate.
    ((u128::from(hi) * blocks as u128) >> 64) as usize
}

/// One probe position in a word: the top 6 bits of `g`, finalised, as a one-bit mask.
fn probe_bit(g: u64) -> u64 {
    1u64 << ((g ^ (g >> 29)).wrapping_mul(FINALIZER) >> 58)
}

/// Where one key's bits live: a block, one word in each half of it, and the bits to test or
/// set in each of the two words.
///
/// Computed once per request and applied to every filter of the pair (they share a size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    /// Index of the block.
    block: usize,
    /// The word of the first group (`0..4`) and of the second (`4..8`).
    words: [usize; 2],
    /// The key's bits in each of the two words.
    masks: [u64; 2],
}

impl Probe {
    /// The block, words and bit masks of `hash` in a filter of `blocks` blocks with `probes`
    /// probes: `⌈probes/2⌉` bits in the first word, `⌊probes/2⌋` in the second.
    pub(crate) fn new(hash: FilterHash, blocks: usize, probes: u32) -> Probe {
        let lo = hash.0 as u64;
        let hi = (hash.0 >> 64) as u64;
        let block = block_of(hash, blocks);
        // The block index depends on the top bits of `hi`; the words come from its lowest
        // four bits and the step from the ones above them.
        let words = [(hi & 3) as usize, GROUP_WORDS + ((hi >> 2) & 3) as usize];
        let step = (hi >> 4).rotate_left(32) | 1;
        let mut masks = [0u64; 2];
        let mut g = lo;
        // Alternate between the words with constant indices, so both masks stay in registers.
        for _ in 0..probes / 2 {
            masks[0] |= probe_bit(g);
            masks[1] |= probe_bit(g.wrapping_add(step));
            g = g.wrapping_add(step.wrapping_mul(2));
        }
        if probes % 2 == 1 {
            masks[0] |= probe_bit(g);
        }
        Probe {
            block,
            words,
            masks,
        }
    }
}

/// The bits of one probe that a filter lacked when it was read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Absent {
    /// The probe's block.
    block: usize,
    /// The probe's two words.
    words: [usize; 2],
    /// Missing bits in each of the two words.
    missing: [u64; 2],
}

impl Absent {
    /// True when no bit was missing: the filter holds the key (or a false positive).
    pub(crate) fn is_empty(&self) -> bool {
        self.missing[0] | self.missing[1] == 0
    }
}

/// A blocked Bloom filter over `AtomicU64` words, shared between threads through `&self`.
pub(crate) struct BloomFilter {
    /// The bit array, one cache line per block.
    blocks: Box<[Block]>,
    /// Probes per key (`k`).
    probes: u32,
}

impl BloomFilter {
    /// An empty filter of `params.blocks()` blocks with `params.probes` probes.
    pub(crate) fn new(params: &FilterParams) -> Self {
        let params = params.normalized();
        BloomFilter {
            blocks: (0..params.blocks()).map(|_| Block::empty()).collect(),
            probes: params.probes,
        }
    }

    /// Replaces the bit array with `words` (as [`BloomFilter::words`] gives them); false,
    /// changing nothing, when their number does not match the filter's size. Relaxed stores:
    /// for a filter no check uses yet (restoring a snapshot at start-up).
    pub(crate) fn store_words(&self, words: &[u64]) -> bool {
        if words.len() as u64 != self.bits() / 64 {
            return false;
        }
        for (block, chunk) in self.blocks.iter().zip(words.chunks_exact(WORDS)) {
            for (word, &value) in block.0.iter().zip(chunk) {
                word.store(value, Ordering::Relaxed);
            }
        }
        true
    }

    /// The probe of `hash` in this filter.
    pub(crate) fn probe(&self, hash: FilterHash) -> Probe {
        Probe::new(hash, self.blocks.len(), self.probes)
    }

    /// Asks the CPU to start loading `hash`'s block into its cache, without waiting for it
    /// and without changing anything: a hint, so that a check of the same key a little later
    /// finds the block there instead of waiting for memory.
    ///
    /// A prefetch instruction rather than a load: a load would have to complete before the
    /// next insert's locked instruction may execute (x86 keeps loads in order with locked
    /// instructions), so it would stall the caller for a whole memory latency; a prefetch is
    /// a hint the CPU keeps no order for.
    pub(crate) fn prefetch(&self, hash: FilterHash) {
        let block: *const Block = &self.blocks[block_of(hash, self.blocks.len())];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and has no effect a program can observe but time;
        // the pointer is to a live block anyway. SSE, which the intrinsic needs, is part of
        // the x86_64 baseline.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(block.cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = block;
    }

    /// Whether all of `hash`'s bits are set: false means certainly not inserted since the
    /// filter was last cleared. The pair checks through [`BloomFilter::absent`]; this is
    /// for tests.
    #[cfg(test)]
    pub(crate) fn contains(&self, hash: FilterHash) -> bool {
        self.absent(&self.probe(hash)).is_empty()
    }

    /// Which bits of `probe` are not set, in each of its two words.
    pub(crate) fn absent(&self, probe: &Probe) -> Absent {
        let block = &self.blocks[probe.block].0;
        let missing =
            [0, 1].map(|i| probe.masks[i] & !block[probe.words[i]].load(Ordering::Relaxed));
        Absent {
            block: probe.block,
            words: probe.words,
            missing,
        }
    }

    /// [`BloomFilter::absent`] in this filter, and whether `other` holds the probe — both
    /// blocks read before either result is used, so the two cache misses overlap.
    ///
    /// Not inlined on purpose: inlined, the compiler may sink the second block's loads below
    /// the caller's branch on the first result, where they would start only after the first
    /// miss has been served (measured: about one extra memory latency per check).
    #[inline(never)]
    pub(crate) fn absent_here_and_in(
        &self,
        other: Option<&BloomFilter>,
        probe: &Probe,
    ) -> (Absent, bool) {
        let here = self.absent(probe);
        let in_other = other.is_some_and(|o| o.absent(probe).is_empty());
        (here, in_other)
    }

    /// Sets the bits `absent` (from [`BloomFilter::absent`] on this filter) found missing.
    pub(crate) fn insert_absent(&self, absent: &Absent) {
        let block = &self.blocks[absent.block].0;
        for (&word, &missing) in absent.words.iter().zip(&absent.missing) {
            if missing != 0 {
                // fetch_or, not load-then-store: two threads setting different bits of one
                // word must not overwrite each other. Its result is unused, so it compiles to
                // a single `lock or` rather than a compare-and-swap loop.
                block[word].fetch_or(missing, Ordering::Relaxed);
            }
        }
    }

    /// Sets all of `hash`'s bits; true if at least one of them was not set before. The
    /// pair inserts through [`BloomFilter::insert_absent`]; this is the tests' shorthand.
    #[cfg(test)]
    pub(crate) fn insert(&self, hash: FilterHash) -> bool {
        let absent = self.absent(&self.probe(hash));
        self.insert_absent(&absent);
        !absent.is_empty()
    }

    /// Clears every bit, with Relaxed stores. The caller makes sure the filter is retired:
    /// no generation uses it, so no check depends on its bits any more (see the aging pair).
    pub(crate) fn clear(&self) {
        for block in self.blocks.iter() {
            for word in &block.0 {
                word.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Bits set (counts them: `O(m/64)`).
    pub(crate) fn bits_set(&self) -> u64 {
        self.words().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The fraction of bits set in `samples` blocks spread evenly over the filter (all of
    /// them if it has fewer): an estimate of the fill for `O(samples)` reads. Keys pick blocks
    /// uniformly, so evenly spaced blocks are a fair sample; 32 blocks (16 384 bits) give
    /// the fill within about ±1% (two standard errors).
    pub(crate) fn sampled_fill(&self, samples: usize) -> f64 {
        let blocks = self.blocks.len();
        let samples = samples.clamp(1, blocks);
        let set: u64 = (0..samples)
            .map(|i| {
                // i < samples ≤ blocks, so the quotient is below `blocks`; u128 avoids overflow.
                let index = (i as u128 * blocks as u128 / samples as u128) as usize;
                let block = &self.blocks[index].0;
                block
                    .iter()
                    .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
                    .sum::<u64>()
            })
            .sum();
        set as f64 / (samples as u64 * BLOCK_BITS) as f64
    }

    /// Bits in the filter (`m`).
    pub(crate) fn bits(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK_BITS
    }

    /// Probes per key (`k`).
    pub(crate) fn probes(&self) -> u32 {
        self.probes
    }

    /// The words of the bit array, block by block (for snapshots). Relaxed loads: a copy taken
    /// while other threads insert holds every key inserted before the copy began.
    pub(crate) fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks
            .iter()
            .flat_map(|block| block.0.iter().map(|w| w.load(Ordering::Relaxed)))
    }

    /// The false-positive rate this filter's actual bits give a random absent key: the mean
    /// over blocks of the chance that its probes all find set bits. An absent key takes a
    /// word of each group at random and `b` random bits in it (`⌈k/2⌉`, `⌊k/2⌋`), so for a
    /// block that chance is `Π_group mean_word (set_w / 64)^b`. Unlike a formula from the
    /// overall fill this sees uneven blocks and words. Counts bits, so O(m/64).
    pub(crate) fn measured_false_positive_rate(&self) -> f64 {
        let bits = [self.probes.div_ceil(2), self.probes / 2].map(|b| b as i32);
        let sum: f64 = self
            .blocks
            .iter()
            .map(|block| {
                let group_rate = |group: &[AtomicU64], bits: i32| {
                    group
                        .iter()
                        .map(|w| {
                            (f64::from(w.load(Ordering::Relaxed).count_ones()) / 64.0).powi(bits)
                        })
                        .sum::<f64>()
                        / GROUP_WORDS as f64
                };
                let (first, second) = block.0.split_at(GROUP_WORDS);
                group_rate(first, bits[0]) * group_rate(second, bits[1])
            })
            .sum();
        sum / self.blocks.len() as f64
    }
}

#[cfg(test)]
mod tests;
