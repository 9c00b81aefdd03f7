//! The offline simulator: the proxy's admission policies and the store's own index,
//! run over a workload without HTTP or disk, at millions of requests per second; and,
//! beside them, the published caches of [`reference`](mod@reference) (`s3fifo`, `sieve`, `w-tinylfu`, `lru`) over
//! the same requests, sizes and byte budget.
//!
//! Per request it does what the proxy does: check and record the key in the admission
//! policy; a key in the index is a hit (and counts one for the index's CLOCK); otherwise
//! the origin is asked, and an admitted object no larger than `max_object_size` (its
//! `"auto"` default resolved against the simulated cache's size, as the proxy resolves it
//! against `cache.max_size`) is indexed, evicting in the index's order until it fits the
//! byte budget, and the policy is told of the fill, as the proxy tells it (`rotate =
//! "auto"` steers by the fills). Entry files are
//! counted at body size plus [`ENTRY_OVERHEAD`], the store's typical header, so the budget
//! means the same thing here as in the HTTP bench.
//!
//! `auto` runs as the proxy runs it ([`simulate_auto`] says what it did): its epochs
//! end every `admission.auto_epoch` of the workload's clock.
//!
//! Not modelled: expiry (the synthetic origin's objects stay fresh for an hour, longer
//! than a bench run), concurrent fills of one key, and fills dropped by a slow disk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::xxh3_128;

use crate::policies;
use crate::reference::{self, ReferenceCache};
use crate::report::PolicyReport;
use crate::workload::{Request, Workload};
use secondhit_admission::{
    Admission, FilterHash, FilterHasher, ObjectCount, Pending, Policy, ResponseInfo,
};
use secondhit_proxy::config::{AdmissionConfig, MaxObjectSize};
use secondhit_store::index::{Fill, Index, Provenance};
use secondhit_store::{FillId, StoreHash};

mod auto;

use auto::AutoDriver;
pub use auto::AutoRun;

/// Bytes an entry file adds to its body: the 512-byte aligned preamble and key, and two
/// metadata slots of the minimum 1 KiB (see `store::entry`); typical for the synthetic
/// origin's responses, whose metadata is a few hundred bytes.
pub const ENTRY_OVERHEAD: u64 = 512 + 2 * 1024;

/// How many requests ahead the replay prefetches the admission filter's blocks: a block
/// fetched from memory arrives while the requests in between are handled, so a check of a
/// large filter does not wait one memory latency (see [`secondhit_admission::Admission::prefetch`]).
const PREFETCH_AHEAD: usize = 16;

/// The longest span of a trace's clock the replay follows: a hundred years, in seconds.
const CENTURY_SECS: f64 = 100.0 * 365.25 * 86_400.0;

/// The cache the simulated proxy has.
#[derive(Clone, Copy, Debug)]
pub struct SimCache {
    /// `cache.max_size`: the byte budget of entry files.
    pub max_size: u64,
    /// `cache.max_object_size`: larger bodies are never stored.
    pub max_object_size: MaxObjectSize,
}

impl SimCache {
    /// The largest body the proxy's policies store: `max_object_size` resolved against
    /// `max_size`, as the proxy does.
    fn admission_limit(&self) -> u64 {
        self.max_object_size.resolve(self.max_size)
    }

    /// The largest body a reference cache stores: only a size the config names. The
    /// `"auto"` share is secondhit's own size-aware admission, not part of the published
    /// policies, which are compared as published (the byte budget alone bounds them).
    fn reference_limit(&self) -> u64 {
        self.max_object_size.explicit().unwrap_or(u64::MAX)
    }
}

/// Runs `workload` through the policy `policy` (sized by `config`) and the store's index of
/// `cache.max_size` bytes. The policy runs on the workload's clock (its request times), so
/// `max_age` means what it means in production; `rotate = "auto"` counts the index's
/// entries (scaled to a full cache, as the store does). `None` for an unknown policy name.
pub fn simulate(
    workload: &Workload,
    policy: &str,
    config: &AdmissionConfig,
    hasher: &FilterHasher,
    cache: SimCache,
) -> Option<PolicyReport> {
    replay(workload, policy, config, hasher, cache, |_, _| {})
}

/// What a stretch of the trace's time saw: the requests that fell in it and their hits.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct TimePoint {
    /// The stretch's end, in seconds since the trace's first request.
    pub until: f64,
    /// Requests in the stretch.
    pub requests: u64,
    /// Of them, hits.
    pub hits: u64,
    /// Body bytes requested in the stretch.
    pub bytes: u64,
    /// Of them, bytes served from the cache.
    pub hit_bytes: u64,
}

/// [`simulate`], also splitting the trace's time span into `stretches` equal stretches and
/// counting each one's requests and hits: how the hit ratio grows as the cache warms and
/// moves with the traffic. Stretches without requests are left out.
pub fn simulate_over_time(
    workload: &Workload,
    policy: &str,
    config: &AdmissionConfig,
    hasher: &FilterHasher,
    cache: SimCache,
    stretches: usize,
) -> Option<(PolicyReport, Vec<TimePoint>)> {
    let stretches = stretches.max(1);
    let first_at = workload.requests.first().map_or(0.0, |r| r.at);
    let last_at = workload
        .requests
        .iter()
        .fold(first_at, |end, r| end.max(r.at));
    let width = ((last_at - first_at) / stretches as f64).max(f64::MIN_POSITIVE);
    let mut points: Vec<TimePoint> = (1..=stretches)
        .map(|i| TimePoint {
            until: width * i as f64,
            ..TimePoint::default()
        })
        .collect();
    let report = replay(
        workload,
        policy,
        config,
        hasher,
        cache,
        |request, served| {
            // A request at the very end (or before the first, out of order) goes to the edge stretch.
            let at = ((request.at - first_at) / width).max(0.0) as usize;
            let point = &mut points[at.min(stretches - 1)];
            point.requests += 1;
            point.bytes += request.size;
            if served.hit {
                point.hits += 1;
                point.hit_bytes += request.size;
            }
        },
    )?;
    points.retain(|point| point.requests > 0);
    Some((report, points))
}

/// Body bytes `policy` wrote in the busiest minute of `workload`'s clock (minutes counted
/// from its first request), as [`simulate`] runs it: what a write budget counted a minute
/// at a time (`admission.max_write_rate`) would have to allow for it to skip no fill of
/// this trace. `None` for an unknown policy name.
pub fn busiest_minute_writes(
    workload: &Workload,
    policy: &str,
    config: &AdmissionConfig,
    hasher: &FilterHasher,
    cache: SimCache,
) -> Option<u64> {
    let first_at = workload.requests.first().map_or(0.0, |r| r.at);
    let mut minutes: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    replay(
        workload,
        policy,
        config,
        hasher,
        cache,
        |request, served| {
            if served.written {
                let minute = ((request.at - first_at).max(0.0) / 60.0) as u64;
                *minutes.entry(minute).or_default() += request.size;
            }
        },
    )?;
    Some(minutes.into_values().max().unwrap_or(0))
}

/// What the cache did with one request.
#[derive(Clone, Copy, Debug)]
struct Served {
    /// Served from the cache.
    hit: bool,
    /// A miss whose body was written to the cache.
    written: bool,
}

/// The replay behind [`simulate`]; `observe` sees each request and what was done with it.
fn replay(
    workload: &Workload,
    policy: &str,
    config: &AdmissionConfig,
    hasher: &FilterHasher,
    cache: SimCache,
    observe: impl FnMut(&Request, Served),
) -> Option<PolicyReport> {
    if let Some(reference) = reference::build(policy, cache.max_size) {
        return Some(replay_reference(workload, reference, cache, observe));
    }
    replay_admission(workload, policy, config, hasher, cache, observe)
}

/// What a replay counted; turned into the report at the end.
#[derive(Default)]
struct Tally {
    hits: u64,
    hit_bytes: u64,
    bytes: u64,
    origin_requests: u64,
    origin_bytes: u64,
    write_objects: u64,
    write_bytes: u64,
}

impl Tally {
    /// Counts a request of `size` bytes, a hit or a miss (which the origin answers).
    fn request(&mut self, size: u64, hit: bool) {
        self.bytes += size;
        if hit {
            self.hits += 1;
            self.hit_bytes += size;
        } else {
            self.origin_requests += 1;
            self.origin_bytes += size;
        }
    }

    /// Counts a body of `size` bytes written to the cache.
    fn write(&mut self, size: u64) {
        self.write_objects += 1;
        self.write_bytes += size;
    }

    fn report(
        self,
        policy: &str,
        requests: u64,
        started: Instant,
        admission_memory: u64,
    ) -> PolicyReport {
        let elapsed = started.elapsed().as_secs_f64().max(1e-9);
        let ratio = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 / whole as f64
            }
        };
        PolicyReport {
            policy: policy.to_owned(),
            requests,
            failed_requests: 0,
            hit_ratio: ratio(self.hits, requests),
            byte_hit_ratio: ratio(self.hit_bytes, self.bytes),
            disk_write_objects: Some(self.write_objects),
            disk_write_bytes: Some(self.write_bytes),
            origin_requests: Some(self.origin_requests),
            origin_bytes: Some(self.origin_bytes),
            admission_memory_bytes: Some(admission_memory),
            throughput_rps: Some(requests as f64 / elapsed),
            p50_ms: None,
            p99_ms: None,
            p999_ms: None,
        }
    }
}

/// A reference cache (`s3fifo`, `sieve`, `w-tinylfu`, `lru`): it admits every miss and evicts by its own order.
fn replay_reference(
    workload: &Workload,
    mut reference: Box<dyn ReferenceCache>,
    cache: SimCache,
    mut observe: impl FnMut(&Request, Served),
) -> PolicyReport {
    let started = Instant::now();
    let mut tally = Tally::default();
    for request in &workload.requests {
        let hit = reference.lookup(request.object).is_some();
        tally.request(request.size, hit);
        let written = !hit
            && request.size <= cache.reference_limit()
            && reference.insert(request.object, request.size + ENTRY_OVERHEAD);
        if written {
            tally.write(request.size);
        }
        observe(request, Served { hit, written });
        debug_assert!(reference.used_bytes() <= cache.max_size);
    }
    let requests = workload.requests.len() as u64;
    tally.report(reference.name(), requests, started, 0)
}

/// An admission policy of the proxy over the store's own index.
fn replay_admission(
    workload: &Workload,
    policy: &str,
    config: &AdmissionConfig,
    hasher: &FilterHasher,
    cache: SimCache,
    observe: impl FnMut(&Request, Served),
) -> Option<PolicyReport> {
    let started = Instant::now();
    // As the proxy does under the policies that store first sights (`Store::keep_ghost`).
    let (index, objects) = index_for(cache, matches!(policy, "always" | "auto"));
    let (built, auto) = match policy {
        "auto" => {
            let (policy, driver) = AutoDriver::new(config, cache, objects, started);
            (policy, Some(driver))
        }
        _ => (policies::build(policy, config, objects)?, None),
    };
    let replay = Replay {
        index,
        policy: built,
        auto,
        started,
    };
    Some(replay.run(workload, hasher, cache, observe).0)
}

/// [`simulate`] for `auto`, with what it did: epochs, switches, requests under `always`.
pub fn simulate_auto(
    workload: &Workload,
    config: &AdmissionConfig,
    hasher: &FilterHasher,
    cache: SimCache,
) -> (PolicyReport, AutoRun) {
    let started = Instant::now();
    let (index, objects) = index_for(cache, true);
    let (policy, driver) = AutoDriver::new(config, cache, objects, started);
    let replay = Replay {
        index,
        policy,
        auto: Some(driver),
        started,
    };
    let (report, run) = replay.run(workload, hasher, cache, |_, _| {});
    (report, run.unwrap_or_default())
}

/// The store's index of `cache.max_size` bytes, keeping a ghost or not, and the count of
/// its objects `rotate = "auto"` steers by (scaled to a full cache, as the store counts).
fn index_for(cache: SimCache, ghost: bool) -> (Arc<Index>, ObjectCount) {
    let index = Arc::new(Index::new(cache.max_size));
    index.keep_ghost(ghost);
    let objects: ObjectCount = {
        let index = index.clone();
        Arc::new(move || index.objects_when_full())
    };
    (index, objects)
}

/// One replay of a proxy policy: the index, the policy, and `auto`'s epochs if it runs.
struct Replay {
    index: Arc<Index>,
    policy: Policy,
    auto: Option<AutoDriver>,
    started: Instant,
}

impl Replay {
    /// Replays `workload`; `observe` sees each request and what was done with it.
    fn run(
        self,
        workload: &Workload,
        hasher: &FilterHasher,
        cache: SimCache,
        mut observe: impl FnMut(&Request, Served),
    ) -> (PolicyReport, Option<AutoRun>) {
        let Replay {
            index,
            policy: Policy { admission, stats },
            mut auto,
            started,
        } = self;
        let max_object_size = cache.admission_limit();
        let first_at = workload.requests.first().map_or(0.0, |r| r.at);
        let mut tally = Tally::default();
        let mut hashes = Prefetched::new(workload, hasher, admission.as_ref());
        for (i, request) in workload.requests.iter().enumerate() {
            let filter_hash = hashes.next(i);
            // The store names entries by an unkeyed hash, the filter by a keyed one — as in the proxy.
            let key_hash = StoreHash(xxh3_128(&request.object.to_le_bytes()));
            // A trace out of order never moves the clock back before its first request, and
            // one whose timestamps lie centuries apart stops at a century: `Duration` and
            // `Instant` arithmetic would overflow (and panic) past that.
            let offset = Duration::from_secs_f64((request.at - first_at).clamp(0.0, CENTURY_SECS));
            let now = started + offset;
            if let Some(auto) = &mut auto {
                auto.before_request(offset);
            }
            let pending = admission.on_request_at(filter_hash, now);
            let hit = index.touch(key_hash).is_some();
            tally.request(request.size, hit);
            let storable = request.size <= max_object_size;
            if let Some(auto) = &auto
                && (hit || storable)
            {
                // As the proxy feeds its estimates: a hit, or a miss it may store.
                auto.observe(filter_hash, request.size, now);
            }
            let miss = Miss {
                size: request.size,
                key_hash,
                fill_id: FillId(i as u64),
            };
            let written = !hit && storable && offer(&index, admission.as_ref(), pending, miss);
            if written {
                tally.write(request.size);
            }
            observe(request, Served { hit, written });
        }
        let requests = workload.requests.len() as u64;
        let report = tally.report(
            stats.kind().as_str(),
            requests,
            started,
            stats.memory_bytes(),
        );
        (report, auto.map(|auto| auto.run()))
    }
}

/// Request `i`'s filter hash, computed and prefetched [`PREFETCH_AHEAD`] requests
/// earlier: a block fetched from memory arrives while the requests in between are handled.
struct Prefetched<'a> {
    requests: &'a [Request],
    hasher: &'a FilterHasher,
    admission: &'a dyn Admission,
    ahead: [FilterHash; PREFETCH_AHEAD],
}

impl<'a> Prefetched<'a> {
    fn new(
        workload: &'a Workload,
        hasher: &'a FilterHasher,
        admission: &'a dyn Admission,
    ) -> Prefetched<'a> {
        let mut prefetched = Prefetched {
            requests: &workload.requests,
            hasher,
            admission,
            ahead: [FilterHash(0); PREFETCH_AHEAD],
        };
        for i in 0..PREFETCH_AHEAD.min(workload.requests.len()) {
            prefetched.ahead[i] = prefetched.hash(i);
        }
        prefetched
    }

    /// Request `index`'s hash and prefetch.
    fn hash(&self, index: usize) -> FilterHash {
        let hash = self.hasher.hash(&self.requests[index].object.to_le_bytes());
        self.admission.prefetch(hash);
        hash
    }

    /// Request `i`'s hash (requests taken in order), prefetching the one `PREFETCH_AHEAD` on.
    fn next(&mut self, i: usize) -> FilterHash {
        let hash = self.ahead[i % PREFETCH_AHEAD];
        if i + PREFETCH_AHEAD < self.requests.len() {
            self.ahead[i % PREFETCH_AHEAD] = self.hash(i + PREFETCH_AHEAD);
        }
        hash
    }
}

/// A miss of an object small enough to store, as [`offer`] needs it.
struct Miss {
    size: u64,
    key_hash: StoreHash,
    fill_id: FillId,
}

/// Offers a miss for storage as the proxy does: admission's second phase, then a place
/// in the index, evicting for it. True when it was stored (a disk write).
fn offer(index: &Index, admission: &dyn Admission, pending: Pending, miss: Miss) -> bool {
    // As the proxy asks for a storable answer to a miss: a trace knows only its size.
    let response = ResponseInfo {
        size: Some(miss.size),
        content_type: None,
        status: 200,
    };
    let decision = admission.on_response(pending, &response);
    let file_size = miss.size + ENTRY_OVERHEAD;
    if !decision.is_admit() || !reserve(index, file_size) {
        return false;
    }
    // A miss means the key has no entry, so placing it cannot replace one.
    let fill = Fill {
        fill_id: miss.fill_id,
        size: file_size,
    };
    index.place(miss.key_hash, fill, Provenance::Live);
    index.commit_reservation(file_size, file_size);
    // As the proxy tells the policy of each fill it began (`rotate = "auto"` counts them).
    admission.note_fill(decision);
    true
}

/// Reserves `size` bytes, evicting in the index's order as the store does; false
/// when the object cannot fit even in an empty cache.
fn reserve(index: &Index, size: u64) -> bool {
    while !index.try_reserve(size) {
        match index.pop_victim() {
            Some((_, evicted)) => index.release_object(evicted.size),
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests;
