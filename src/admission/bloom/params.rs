//! Sizing a blocked Bloom filter from a key count or a byte budget and a target rate.
//!
//! The textbook sizing, `m = -n ln p / (ln 2)^2` with `k = (m/n) ln 2`, assumes the `k`
//! bits of a key are spread over the whole array. In a blocked filter they all fall in one
//! 512-bit block, and the number of keys per block varies: with `B` blocks and `n` keys a
//! block holds `J ~ Poisson(λ = n/B)` keys. A block with `j` keys has a fraction
//! `1 - (1 - 1/512)^(k j)` of its bits set, and an absent key landing there is a false
//! positive with that fraction to the power `k`. Averaging over `J` gives the blocked
//! filter's rate (Putze, Sanders & Singler, JEA 2009, section 3):
//!
//! ```text
//! fpr(n, B, k) = Σ_j P(J = j) · (1 - (1 - 1/512)^(k j))^k
//! ```
//!
//! Sizing searches for the fewest blocks (or, from a byte budget, the most keys) for which
//! the best `k` meets the target. For a million keys this takes 9.9 bits per key at 1%
//! (k = 6) instead of the textbook 9.6, 15.5 at 0.1% (k = 9) instead of 14.4, and 21.9 at
//! 0.01% (k = 12) instead of 19.2. The model matches measurement (see the accuracy tests and
//! the `bloom` module docs), so the configured rate is what the filter delivers.

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
        blocked_false_positive_rate(keys, self.blocks(), self.probes)
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
    let mut best = (1, blocked_false_positive_rate(n, blocks, 1));
    for k in 2..=MAX_PROBES {
        let rate = blocked_false_positive_rate(n, blocks, k);
        if rate < best.1 {
            best = (k, rate);
        } else {
            // The rate is unimodal in k: once it rises it keeps rising.
            break;
        }
    }
    best
}

/// The modelled false-positive rate of a blocked filter (512-bit blocks) holding `n` keys in
/// `blocks` blocks with `k` probes: `Σ_j Poisson(j; n/blocks) · (1 - (1 - 1/512)^(k j))^k`.
pub(crate) fn blocked_false_positive_rate(n: u64, blocks: u64, k: u32) -> f64 {
    let lambda = n as f64 / blocks.max(1) as f64;
    if lambda == 0.0 {
        return 0.0;
    }
    // Chance that one probe leaves a given bit unset.
    let miss = 1.0 - 1.0 / BLOCK_BITS as f64;
    let rate_given = |j: f64| (1.0 - miss.powf(f64::from(k) * j)).powi(k as i32);
    // Sum outwards from the mode, where the Poisson mass is largest, until the terms vanish.
    let mode = lambda.floor();
    let mode_pmf = (mode * lambda.ln() - lambda - ln_factorial(mode)).exp();
    let mut total = mode_pmf * rate_given(mode);
    let (mut j, mut pmf) = (mode, mode_pmf);
    while pmf > 1e-18 * mode_pmf {
        pmf *= lambda / (j + 1.0);
        j += 1.0;
        total += pmf * rate_given(j);
    }
    let (mut j, mut pmf) = (mode, mode_pmf);
    while j > 0.0 && pmf > 1e-18 * mode_pmf {
        pmf *= j / lambda;
        j -= 1.0;
        total += pmf * rate_given(j);
    }
    total.min(1.0)
}

/// `ln(x!)` for a whole number `x ≥ 0`: exact below 20, Stirling's series above (error < 1e-12).
fn ln_factorial(x: f64) -> f64 {
    if x < 20.0 {
        return (2..=(x as u32)).map(|i| f64::from(i).ln()).sum();
    }
    let pi2 = 2.0 * std::f64::consts::PI;
    x * x.ln() - x + 0.5 * (pi2 * x).ln() + 1.0 / (12.0 * x) - 1.0 / (360.0 * x.powi(3))
}
