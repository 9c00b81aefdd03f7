//! `--recommend`'s look at `cache.max_object_size`: how much of the trace's requested
//! bytes the limit keeps out of the cache at the chosen size, and, when that is a large
//! share, which larger limit to set.
//!
//! A trace of large files behind a small limit shows almost no byte hits at any cache
//! size, and without this stage `--recommend` would blame the cache size. Candidates start
//! at the configured limit and double up to the largest object (at most the cache size);
//! the choice follows the other stages' rule (the fewest disk write bytes within
//! [`TIE`](super::TIE) of the best byte hit ratio), so a larger limit is recommended only
//! where the simulation shows it gains byte hits.

use serde::Serialize;

use super::mark_choice;
use crate::report::human_bytes;
use crate::workload::Workload;
use crate::{CacheSize, SweepRow, run_settings};
use secondhit_proxy::config::{Config, MaxObjectSize};

/// The share of the requested bytes kept out above which larger limits are simulated.
pub(super) const NOTABLE: f64 = 0.05;

/// Most limits simulated (the configured one included).
const MOST_CANDIDATES: usize = 8;

/// What the limit keeps out at the chosen size, and the limits simulated.
#[derive(Clone, Debug, Serialize)]
pub struct ObjectLimit {
    /// The configured limit at the chosen cache size, in bytes (`"auto"` resolved).
    pub limit: u64,
    /// Bytes the trace requests in all.
    pub requested_bytes: u64,
    /// Bytes of requests for objects over `limit`.
    pub kept_out_bytes: u64,
    /// Distinct objects over `limit`.
    pub objects_over: u64,
    /// `second-hit` with each candidate limit, the chosen one best; empty when the limit
    /// keeps out no more than `NOTABLE` of the bytes.
    pub rows: Vec<SweepRow>,
    /// The limit to use, in bytes: `limit` unless a larger one won.
    pub chosen: u64,
}

impl ObjectLimit {
    /// The share of the requested bytes the configured limit keeps out.
    pub fn kept_out_share(&self) -> f64 {
        self.kept_out_bytes as f64 / self.requested_bytes.max(1) as f64
    }

    /// One sentence on what the configured limit keeps out.
    pub fn describe(&self) -> String {
        format!(
            "max_object_size of {} keeps {} of the {} requested ({:.1}%, {} objects) out of \
             the cache",
            human_bytes(self.limit),
            human_bytes(self.kept_out_bytes),
            human_bytes(self.requested_bytes),
            self.kept_out_share() * 100.0,
            self.objects_over,
        )
    }
}

/// Measures what `base`'s limit keeps out of a cache of `cache_size` bytes and, when that
/// is more than [`NOTABLE`] of the requested bytes, simulates larger limits.
pub(super) fn examine(
    workload: &Workload,
    base: &Config,
    cache_size: u64,
) -> Result<ObjectLimit, String> {
    let limit = base.cache.max_object_bytes();
    let mut found = kept_out(workload, limit);
    if found.kept_out_share() <= NOTABLE {
        return Ok(found);
    }
    let largest = workload.requests.iter().map(|r| r.size).max().unwrap_or(0);
    // Rounded up, so the fragment names it in whole KiB or MiB.
    let unit = if largest >= 1 << 20 { 1 << 20 } else { 1 << 10 };
    let candidates = candidates(limit, largest.next_multiple_of(unit).min(cache_size));
    let settings = candidates
        .iter()
        .map(|&bytes| {
            let mut config = base.clone();
            config.cache.max_object_size = MaxObjectSize::Bytes(bytes);
            let name = format!("max_object_size={}", human_bytes(bytes));
            (name, config, CacheSize::Bytes(cache_size))
        })
        .collect();
    found.rows = run_settings(workload, settings)?;
    found.chosen = candidates[mark_choice(&mut found.rows)];
    Ok(found)
}

/// What `limit` keeps out of `workload`, with no limit simulated yet.
fn kept_out(workload: &Workload, limit: u64) -> ObjectLimit {
    let mut over = std::collections::HashSet::new();
    let (mut requested_bytes, mut kept_out_bytes) = (0u64, 0u64);
    for request in &workload.requests {
        requested_bytes += request.size;
        if request.size > limit {
            kept_out_bytes += request.size;
            over.insert(request.object);
        }
    }
    ObjectLimit {
        limit,
        requested_bytes,
        kept_out_bytes,
        objects_over: over.len() as u64,
        rows: Vec::new(),
        chosen: limit,
    }
}

/// `limit`, then doublings of it, up to and including `top` (when larger), at most
/// [`MOST_CANDIDATES`].
fn candidates(limit: u64, top: u64) -> Vec<u64> {
    let mut out = vec![limit];
    let mut next = limit.saturating_mul(2);
    while next < top && out.len() + 1 < MOST_CANDIDATES {
        out.push(next);
        next = next.saturating_mul(2);
    }
    if top > limit {
        out.push(top);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Request;

    fn workload(sizes: &[(u64, u64)]) -> Workload {
        Workload {
            name: "test".to_owned(),
            requests: sizes
                .iter()
                .enumerate()
                .map(|(i, &(object, size))| Request {
                    object,
                    size,
                    at: i as f64,
                })
                .collect(),
            malformed_lines: 0,
            ignored_lines: 0,
        }
    }

    #[test]
    fn candidates_double_from_the_limit_to_the_largest_object() {
        assert_eq!(candidates(10, 35), vec![10, 20, 35]);
        assert_eq!(candidates(10, 40), vec![10, 20, 40]);
        assert_eq!(candidates(10, 10), vec![10]);
        assert_eq!(candidates(10, 5), vec![10]);
        let many = candidates(1, u64::MAX);
        assert_eq!(many.len(), MOST_CANDIDATES);
        assert_eq!(many.last(), Some(&u64::MAX));
    }

    #[test]
    fn the_bytes_kept_out_count_every_request_and_each_object_once() {
        let trace = workload(&[(1, 100), (2, 900), (2, 900), (3, 50)]);
        let found = kept_out(&trace, 100);
        assert_eq!(found.requested_bytes, 1950);
        assert_eq!(found.kept_out_bytes, 1800);
        assert_eq!(found.objects_over, 1);
        assert!((found.kept_out_share() - 1800.0 / 1950.0).abs() < 1e-9);
    }

    #[test]
    fn a_limit_that_keeps_large_objects_out_is_raised_where_it_gains_byte_hits() {
        // Two large objects requested over and over, behind a 1 KiB limit in a cache
        // that holds both: a limit that lets them in wins every byte hit they bring.
        let mut sizes = Vec::new();
        for _ in 0..50 {
            sizes.extend([(1, 40_000), (2, 40_000), (3, 100)]);
        }
        let trace = workload(&sizes);
        let mut base = Config::default();
        base.cache.max_object_size = MaxObjectSize::Bytes(1024);
        let found = examine(&trace, &base, 1_000_000).expect("simulates");
        assert!(found.kept_out_share() > 0.9, "{}", found.describe());
        assert!(found.rows.len() > 1);
        assert!(found.chosen >= 40_000, "chosen {}", found.chosen);
        // A limit that keeps nothing out is not swept.
        base.cache.max_object_size = MaxObjectSize::Bytes(1_000_000);
        let found = examine(&trace, &base, 1_000_000).expect("simulates");
        assert!(found.rows.is_empty());
        assert_eq!(found.chosen, 1_000_000);
    }
}
