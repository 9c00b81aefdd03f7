//! Spatial sampling (SHARDS): a request is sampled when its key's hash falls at or below a
//! limit, so every request of a sampled key is, and the sample is a fixed share of the
//! keys whatever their popularity.
//!
//! The hash is the admission filter's ([`FilterHash`]), keyed with the deployment's secret
//! seed: a client cannot choose URLs that land in the sample (or avoid it), and the proxy
//! has computed it already. The limit is one atomic word, so the test on the request path
//! is a load and a compare; lowering the rate halves it, and every key sampled after is
//! one that was sampled before.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use secondhit_admission::FilterHash;

/// The rate never drops below this (one key in 2^24).
const LEAST_RATE: f64 = 1.0 / (1u64 << 24) as f64;

/// The sampling limit: see the module docs.
pub(super) struct Sampler {
    limit: AtomicU64,
}

impl Sampler {
    /// A sampler of `rate` (clamped to `[2^-24, 1]`).
    pub(super) fn new(rate: f64) -> Sampler {
        let rate = if rate.is_finite() { rate } else { 1.0 };
        let rate = rate.clamp(LEAST_RATE, 1.0);
        // The cast saturates: a rate of 1 samples every key.
        let limit = (rate * 2f64.powi(64)) as u64;
        Sampler {
            limit: AtomicU64::new(limit.max(1)),
        }
    }

    /// The sample key of `hash` (its low 64 bits) when it is sampled.
    #[inline]
    pub(super) fn sample(&self, hash: FilterHash) -> Option<u64> {
        let key = hash.0 as u64;
        (key <= self.limit.load(Relaxed)).then_some(key)
    }

    /// Whether `key` is still sampled (the rate may have dropped since).
    pub(super) fn keeps(&self, key: u64) -> bool {
        key <= self.limit.load(Relaxed)
    }

    /// The share of keys sampled.
    pub(super) fn rate(&self) -> f64 {
        (self.limit.load(Relaxed) as f64 + 1.0) / 2f64.powi(64)
    }

    /// Halves the rate, unless it is at its least; the new limit, or `None`.
    pub(super) fn halve(&self) -> Option<u64> {
        if self.rate() / 2.0 < LEAST_RATE {
            return None;
        }
        let limit = self.limit.load(Relaxed) / 2;
        self.limit.store(limit, Relaxed);
        Some(limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_samples_that_share_of_keys_and_halving_keeps_a_subset() {
        let sampler = Sampler::new(1.0 / 64.0);
        assert!((sampler.rate() - 1.0 / 64.0).abs() < 1e-12);
        let hash = |i: u64| FilterHash(u128::from(xxhash_rust::xxh3::xxh3_64(&i.to_le_bytes())));
        let sampled: Vec<u64> = (0..640_000)
            .filter_map(|i| sampler.sample(hash(i)))
            .collect();
        let share = sampled.len() as f64 / 640_000.0;
        assert!((share * 64.0 - 1.0).abs() < 0.03, "sampled {share}");
        let limit = sampler.halve().expect("far above the least rate");
        assert!((sampler.rate() - 1.0 / 128.0).abs() < 1e-12);
        let kept = (0..640_000).filter_map(|i| sampler.sample(hash(i))).count();
        assert!(kept * 2 > sampled.len() * 9 / 10 && kept * 2 < sampled.len() * 11 / 10);
        assert!(sampled.iter().filter(|&&k| k <= limit).count() == kept);
        assert_eq!(
            Sampler::new(1.0).sample(FilterHash(u128::MAX)),
            Some(u64::MAX)
        );
        assert_eq!(Sampler::new(f64::NAN).rate(), 1.0);
    }
}
