//! What an estimator reports: per candidate, its miss-ratio curve over the modelled cache
//! sizes, and the writes at each.

use super::candidate::Candidate;
use super::miniature::Counts;

/// The estimate at one moment: see [`super::Estimator::estimate`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// The sampling rate now.
    pub rate: f64,
    /// The configured cache size, which the size factors multiply.
    pub cache_bytes: u64,
    /// Bytes the estimator holds.
    pub memory_bytes: u64,
    /// One curve per candidate, in the order configured.
    pub curves: Vec<Curve>,
}

/// One candidate's curve.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Curve {
    /// The candidate.
    pub candidate: Candidate,
    /// One point per modelled size, smallest first.
    pub points: Vec<Point>,
}

/// One candidate at one cache size, over the recent epochs (decayed).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Point {
    /// The size as a multiple of the configured one.
    pub factor: f64,
    /// The size in bytes.
    pub cache_bytes: u64,
    /// Requests seen, sampled or not (decayed).
    pub requests: f64,
    /// Estimated share of requests that miss (0 without requests).
    pub object_miss_ratio: f64,
    /// Estimated share of body bytes that miss.
    pub byte_miss_ratio: f64,
    /// Estimated body bytes written to the cache, over the same (decayed) requests.
    pub written_bytes: f64,
    /// Estimated objects written.
    pub written_objects: f64,
}

impl Point {
    /// The point of a miniature of `cache_bytes` (`factor` times the configured size) that
    /// counted `counts`, over `totals` (requests and bytes, sampled or not): its misses,
    /// scaled by the inverse of the rate, over every request (SHARDS' adjustment; see
    /// `totals`), at most 1.
    pub(super) fn new(factor: f64, cache_bytes: u64, counts: Counts, totals: (f64, f64)) -> Point {
        let ratio = |part: f64, whole: f64| {
            if whole > 0.0 {
                (part / whole).min(1.0)
            } else {
                0.0
            }
        };
        Point {
            factor,
            cache_bytes,
            requests: totals.0,
            object_miss_ratio: ratio(counts.misses, totals.0),
            byte_miss_ratio: ratio(counts.miss_bytes, totals.1),
            written_bytes: counts.written_bytes,
            written_objects: counts.written_objects,
        }
    }
}

impl Estimate {
    /// The point of `candidate` at `factor` times the configured size, if modelled.
    pub fn point(&self, candidate: Candidate, factor: f64) -> Option<&Point> {
        self.curves
            .iter()
            .find(|curve| curve.candidate == candidate)?
            .points
            .iter()
            .find(|point| point.factor == factor)
    }
}
