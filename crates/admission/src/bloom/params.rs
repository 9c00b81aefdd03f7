//! Sizing a blocked Bloom filter from a key count or a byte budget and a target rate.
//!
//! The textbook sizing, `m = -n ln p / (ln 2)^2` with `k = (m/n) ln 2`, assumes the `k`
//! bits of a key are spread over the whole array. In this filter they all fall in one
//! 512-bit block, in one word of each of its two 4-word groups (see the `bloom` module), so
//! the rate depends on how many keys share a block and a word. With `B` blocks and `n` keys
//! a block holds `J ~ Poisson(λ = n/B)` keys (Putze, Sanders & Singler, JEA 2009, section
//! 3), and, splitting that Poisson count by the pair of words each key takes (16 pairs, each
//! `Poisson(λ/16)`, independent), the two words an absent key probes hold `A + C` and
//! `D + C` keys with `A, D ~ Poisson(3λ/16)` and `C ~ Poisson(λ/16)` (the keys that took
//! both words). With `all_b(x)` the chance that `b` random probes all land on set bits of
//! a word into which `x` keys have put `b` random bits each (exact, see `AllSet`):
//!
//! ```text
//! fpr(n, B, k) = E_C[ E_A[all_⌈k/2⌉(A + C)] · E_D[all_⌊k/2⌋(D + C)] ]
//! ```
//!
//! (the expectations have positive terms only). Sizing searches for the fewest
//! blocks (or, from a byte budget, the most keys) for which the best `k` meets the target.
//! For a million keys this takes 10.3 bits per key at 1% (k = 6) against the textbook 9.6,
//! 17.0 at 0.1% (k = 8) against 14.4, and 26.0 at 0.01% (k = 10) against 19.2. The rate a
//! filter sized this way delivers is the configured one (the tests hold it within 0.8–1.25×
//! of the target; measurements in `benches/filter.rs`).

/// Bits in a block (one 64-byte cache line).
pub(crate) const BLOCK_BITS: u64 = 512;

/// The most probes considered: beyond this the block is so sparse that more probes gain
/// nothing measurable at any rate the config accepts in practice.
const MAX_PROBES: u32 = 32;

/// The most blocks the sizing search considers (2^40 blocks = 64 TiB per filter): keeps the
/// search finite for absurd targets; allocating such a filter fails long before.
const MAX_BLOCKS: u64 = 1 << 40;

/// Sizing of one filter: bits `m` (whole 512-bit blocks), probes `k`, and the generation
/// size `n` (new keys one filter takes before the pair rotates).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterParams {
    /// Bits per filter (`m`), a multiple of 512 and at least 512.
    pub bits: u64,
    /// Probes per key (`k`), at least 1.
    pub probes: u32,
    /// New keys one filter takes before the pair rotates (`n`), at least 1.
    pub generation_size: u64,
    /// The target false-positive rate of one filter holding `generation_size` keys.
    pub false_positive_rate: f64,
}

impl FilterParams {
    /// Sizes one filter for `n` keys (0 is treated as 1) at false-positive rate `p`, which
    /// must lie strictly inside (0, 1) (the config validates it): the fewest blocks whose
    /// best probe count gives a modelled rate of at most `p`.
    pub fn for_expected_keys(n: u64, p: f64) -> FilterParams {
        debug_assert!(p > 0.0 && p < 1.0, "false-positive rate {p} outside (0, 1)");
        let n = n.max(1);
        // Grow an upper bound from the textbook size (which the blocked filter never beats),
        // then bisect for the fewest blocks that meet the target.
        let textbook = (-(n as f64) * p.ln() / (std::f64::consts::LN_2.powi(2))).ceil();
        let mut hi = ((textbook / BLOCK_BITS as f64) as u64).clamp(1, MAX_BLOCKS);
        while hi < MAX_BLOCKS && best_probes(n, hi).1 > p {
            hi = (hi * 2).min(MAX_BLOCKS);
        }
        let blocks = first_in(0, hi, |blocks| best_probes(n, blocks).1 <= p);
        FilterParams {
            bits: blocks * BLOCK_BITS,
            probes: best_probes(n, blocks).0,
            generation_size: n,
            false_positive_rate: p,
        }
    }

    /// Sizes a pair of filters to fit `pair_bytes`: each filter gets half, floored to whole
    /// 64-byte blocks (at least one); `n` is the most keys for which the best probe count
    /// still gives a modelled rate of at most `p` (at least 1).
    pub fn for_memory(pair_bytes: u64, p: f64) -> FilterParams {
        debug_assert!(p > 0.0 && p < 1.0, "false-positive rate {p} outside (0, 1)");
        let blocks = (pair_bytes / 2 / (BLOCK_BITS / 8)).clamp(1, MAX_BLOCKS);
        // The rate grows with n: the largest n that meets the target is one below the first
        // that misses it (searched up to one key per bit, which never meets any target).
        let most = blocks * BLOCK_BITS;
        let n = (first_in(1, most, |n| best_probes(n, blocks).1 > p) - 1).max(1);
        FilterParams {
            bits: blocks * BLOCK_BITS,
            probes: best_probes(n, blocks).0,
            generation_size: n,
            false_positive_rate: p,
        }
    }

    /// Blocks in one filter.
    pub fn blocks(&self) -> u64 {
        self.bits / BLOCK_BITS
    }

    /// Bytes of one filter's bit array.
    pub fn filter_bytes(&self) -> u64 {
        self.bits / 8
    }

    /// Bits per key of one filter at its design load.
    pub fn bits_per_key(&self) -> f64 {
        self.bits as f64 / self.generation_size as f64
    }

    /// The modelled false-positive rate of one filter holding `keys` keys.
    pub fn false_positive_rate_at(&self, keys: u64) -> f64 {
        sectorized_false_positive_rate(keys, self.blocks(), self.probes)
    }

    /// The pair's modelled false-positive rate just after a rotation (`previous` holds a full
    /// generation, `current` nothing) and just before the next (both full): about `p` and
    /// `2p`. A key is a false positive if either filter says yes.
    pub fn pair_false_positive_rates(&self) -> (f64, f64) {
        let p = self.false_positive_rate_at(self.generation_size);
        (p, 1.0 - (1.0 - p) * (1.0 - p))
    }

    /// The same parameters with every field in its valid range (the fields are public, so a
    /// hand-built value may hold zeros): bits rounded up to whole blocks, at least one
    /// probe and a generation of at least one key.
    pub(crate) fn normalized(&self) -> FilterParams {
        FilterParams {
            bits: self
                .bits
                .div_ceil(BLOCK_BITS)
                .clamp(1, MAX_BLOCKS)
                .saturating_mul(BLOCK_BITS),
            probes: self.probes.clamp(1, MAX_PROBES),
            generation_size: self.generation_size.max(1),
            false_positive_rate: self.false_positive_rate,
        }
    }
}

/// The smallest `x` in `(lo, hi]` for which `ok(x)` holds, by bisection; `ok` must be
/// monotone (false, then true) on that range, and is assumed true at `hi`.
fn first_in(mut lo: u64, mut hi: u64, ok: impl Fn(u64) -> bool) -> u64 {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The probe count with the lowest modelled rate for `n` keys in `blocks` blocks, and that rate.
fn best_probes(n: u64, blocks: u64) -> (u32, f64) {
    let mut best = (1, sectorized_false_positive_rate(n, blocks, 1));
    for k in 2..=MAX_PROBES {
        let rate = sectorized_false_positive_rate(n, blocks, k);
        if rate < best.1 {
            best = (k, rate);
        } else {
            // The rate is unimodal in k: once it rises it keeps rising.
            break;
        }
    }
    best
}

/// The modelled false-positive rate of this layout (512-bit blocks, one word of each 4-word
/// group per key) holding `n` keys in `blocks` blocks with `k` probes: see the module docs.
pub(crate) fn sectorized_false_positive_rate(n: u64, blocks: u64, k: u32) -> f64 {
    let lambda = n as f64 / blocks.max(1) as f64;
    if lambda == 0.0 {
        return 0.0;
    }
    if lambda > 4096.0 {
        // Eight keys or more per bit: a word with even one probe per key is full but for a
        // chance below e^-16, so the rate is 1 to that precision, and summing the Poisson
        // terms (thousands on each side of the mean) would only cost time.
        return 1.0;
    }
    let (first_set, second_set) = (AllSet::new(k.div_ceil(2)), AllSet::new(k / 2));
    let (shared, own) = (lambda / 16.0, 3.0 * lambda / 16.0);
    let rate = poisson_expectation(shared, |both| {
        poisson_expectation(own, |only| first_set.given(only + both))
            * poisson_expectation(own, |only| second_set.given(only + both))
    });
    rate.min(1.0)
}

/// The chance that `bits` probes of an absent key all land on set bits of one 64-bit word
/// into which `x` keys have put `bits` uniformly random bits each — exactly, not as
/// `(fraction set)^bits`: the fraction set varies from word to word, and with only 64
/// bits that variance changes the rate noticeably at every target rate (`benches/RESULTS.md`,
/// "the sizing model's exact word probability").
///
/// The probes hit `d` distinct positions with chance `64·63···(64-d+1) · S(bits, d) / 64^bits`
/// (`S` the Stirling numbers of the second kind), and `d` given positions are all set with
/// chance `Σ_i C(d, i) (-1)^i (1 - i/64)^(bits·x)` (inclusion–exclusion over the unset ones).
/// Collected by `i`, that is `Σ_i c_i (1 - i/64)^(bits·x)`, coefficients computed once.
struct AllSet {
    /// Probes per key in the word.
    bits: u32,
    /// `(c_i, ln(1 - i/64))` for `i` in `0..=bits`.
    terms: Vec<(f64, f64)>,
}

impl AllSet {
    fn new(bits: u32) -> AllSet {
        let b = bits as usize;
        // stirling[d] = S(bits, d), by the recurrence S(n, d) = d·S(n-1, d) + S(n-1, d-1).
        let mut stirling = vec![0.0f64; b + 1];
        stirling[0] = 1.0;
        for n in 1..=b {
            for d in (1..=n).rev() {
                stirling[d] = d as f64 * stirling[d] + stirling[d - 1];
            }
            stirling[0] = 0.0;
        }
        // distinct[d]: the chance that the probes hit exactly d distinct positions.
        let mut falling = 1.0;
        let distinct: Vec<f64> = (0..=b)
            .map(|d| {
                if d > 0 {
                    falling *= (64 - (d - 1)) as f64;
                }
                falling * stirling[d] / 64f64.powi(bits as i32)
            })
            .collect();
        let terms = (0..=b)
            .map(|i| {
                let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
                let coefficient = sign * (i..=b).map(|d| distinct[d] * binomial(d, i)).sum::<f64>();
                (coefficient, (1.0 - i as f64 / 64.0).ln())
            })
            .collect();
        AllSet { bits, terms }
    }

    /// The chance for a word holding `x` keys' bits.
    fn given(&self, x: f64) -> f64 {
        let draws = f64::from(self.bits) * x;
        let rate: f64 = self
            .terms
            .iter()
            .map(|(coefficient, ln_unset)| coefficient * (draws * ln_unset).exp())
            .sum();
        rate.clamp(0.0, 1.0)
    }
}

/// `C(n, k)` as a float.
fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, j| acc * (n - j) as f64 / (j + 1) as f64)
}

/// `E[f(X)]` for `X ~ Poisson(mean)`, summed outwards from the mode (where the mass is
/// largest) until the probabilities fall below 1e-12 of the mode's.
fn poisson_expectation(mean: f64, f: impl Fn(f64) -> f64) -> f64 {
    if mean == 0.0 {
        return f(0.0);
    }
    let mode = mean.floor();
    let mode_pmf = (mode * mean.ln() - mean - ln_factorial(mode)).exp();
    let mut total = mode_pmf * f(mode);
    let (mut x, mut pmf) = (mode, mode_pmf);
    while pmf > 1e-12 * mode_pmf {
        pmf *= mean / (x + 1.0);
        x += 1.0;
        total += pmf * f(x);
    }
    let (mut x, mut pmf) = (mode, mode_pmf);
    while x > 0.0 && pmf > 1e-12 * mode_pmf {
        pmf *= x / mean;
        x -= 1.0;
        total += pmf * f(x);
    }
    total
}

/// `ln(x!)` for a whole number `x ≥ 0`: exact below 20, Stirling's series above (error < 1e-12).
fn ln_factorial(x: f64) -> f64 {
    if x < 20.0 {
        return (2..=(x as u32)).map(|i| f64::from(i).ln()).sum();
    }
    let pi2 = 2.0 * std::f64::consts::PI;
    x * x.ln() - x + 0.5 * (pi2 * x).ln() + 1.0 / (12.0 * x) - 1.0 / (360.0 * x.powi(3))
}
