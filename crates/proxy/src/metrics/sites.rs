//! Requests and response body bytes by result for each `[[site]]`, so that a node serving
//! several sites shows each one's hit and byte hit ratios. Each site's counters are kept
//! by name (its first host, `default` for `[origin]`'s site) for the life of the process:
//! a reload that rebuilds the sites finds the same counters again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::outcome::RequestResult;

/// One site's counters, one set per worker (as [`super::Metrics`] keeps its own).
#[derive(Debug)]
pub struct SiteCounters {
    shards: Box<[SiteShard]>,
}

/// One worker's share of a site's counters, on cache lines of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct SiteShard {
    requests: [AtomicU64; RequestResult::ALL.len()],
    body_bytes: [AtomicU64; RequestResult::ALL.len()],
}

/// A site's totals: requests and response body bytes, each indexed as `RequestResult::ALL`.
pub(crate) type SiteTotals = (
    [u64; RequestResult::ALL.len()],
    [u64; RequestResult::ALL.len()],
);

impl SiteCounters {
    fn new(workers: usize) -> SiteCounters {
        SiteCounters {
            shards: (0..workers.max(1)).map(|_| SiteShard::default()).collect(),
        }
    }

    /// Counts one request of `result` whose response declared `bytes` of body.
    pub fn count(&self, result: RequestResult, bytes: Option<u64>) {
        let shard = &self.shards[crate::worker::index() % self.shards.len()];
        shard.requests[result as usize].fetch_add(1, Ordering::Relaxed);
        if let Some(bytes) = bytes {
            shard.body_bytes[result as usize].fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// The sums over the workers.
    pub fn totals(&self) -> SiteTotals {
        let sum = |pick: &dyn Fn(&SiteShard) -> &AtomicU64| {
            self.shards
                .iter()
                .map(|shard| pick(shard).load(Ordering::Relaxed))
                .sum()
        };
        (
            std::array::from_fn(|i| sum(&|s| &s.requests[i])),
            std::array::from_fn(|i| sum(&|s| &s.body_bytes[i])),
        )
    }
}

/// Every site's counters by name, in the order the sites were first seen.
#[derive(Debug, Default)]
pub(super) struct SiteRegistry {
    sites: Mutex<Vec<(String, Arc<SiteCounters>)>>,
}

impl SiteRegistry {
    /// The counters of the site `name`, made on first use.
    pub(super) fn site(&self, name: &str, workers: usize) -> Arc<SiteCounters> {
        let mut sites = self.sites.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, counters)) = sites.iter().find(|(known, _)| known == name) {
            return counters.clone();
        }
        let counters = Arc::new(SiteCounters::new(workers));
        sites.push((name.to_owned(), counters.clone()));
        counters
    }

    /// Each site's name and totals.
    pub(super) fn totals(&self) -> Vec<(String, SiteTotals)> {
        let sites = self.sites.lock().unwrap_or_else(PoisonError::into_inner);
        sites
            .iter()
            .map(|(name, counters)| (name.clone(), counters.totals()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_keeps_its_counters_by_name() {
        let registry = SiteRegistry::default();
        let a = registry.site("a.example", 2);
        a.count(RequestResult::Hit, Some(100));
        a.count(RequestResult::Miss, None);
        // A reload asks again: the same counters.
        registry
            .site("a.example", 2)
            .count(RequestResult::Hit, Some(50));
        registry
            .site("b.example", 2)
            .count(RequestResult::Pass, Some(7));
        let totals = registry.totals();
        assert_eq!(totals.len(), 2);
        let (name, (requests, bytes)) = &totals[0];
        assert_eq!(name, "a.example");
        assert_eq!(requests[RequestResult::Hit as usize], 2);
        assert_eq!(requests[RequestResult::Miss as usize], 1);
        assert_eq!(bytes[RequestResult::Hit as usize], 150);
        assert_eq!(bytes[RequestResult::Miss as usize], 0);
        assert_eq!(totals[1].1.0[RequestResult::Pass as usize], 1);
    }
}
