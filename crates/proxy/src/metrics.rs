//! The proxy's counters, and their export in the Prometheus text format.
//!
//! [`Metrics`] holds what only the request path can count: requests by result, admission
//! decisions, bytes admission kept off the disk, origin latency, errors, and the shadow
//! policy's counts. Every one is a plain `AtomicU64` in an array indexed by a small enum,
//! bumped with one `Relaxed` `fetch_add` (a counter publishes no other data): no lock, no
//! hashing of labels and no allocation per request, so a hit pays a few nanoseconds for
//! being counted. (prometheus-client's own `Family` would hash the label set and take a
//! lock on every increment.)
//!
//! Everything derived from the filters and the store — fill, estimated keys, rotations,
//! objects, bytes, evictions, bytes written — is read when `/metrics` is scraped, not
//! kept up to date per request: [`export::Exporter`] is a prometheus-client collector
//! that reads [`Metrics`], [`crate::store::Store::stats`] and
//! [`crate::admission::AdmissionStats::filter_stats`] (`O(m/64)`: once per scrape is cheap, once
//! per request would not be) and encodes them with prometheus-client's text encoder.
//!
//! # Which result a request counts as
//!
//! [`crate::outcome::Outcome::result`] says; the module docs of [`crate::outcome`] list
//! the mapping.

pub(crate) mod export;
mod process;
mod sites;

pub(crate) use sites::{SiteCounters, SiteTotals};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::header::CONTENT_LENGTH;
use http::{Method, Response, StatusCode};

use crate::admission::Decision;
use crate::config::RetryReason;
use crate::outcome::{ErrorKind, RequestResult};
use crate::policy::UnindexedTags;

/// Counters of body bytes, bumped as a body streams (see [`Metrics::add_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteCounter {
    /// Bytes of storable responses the admission policy kept off the disk.
    WritesAvoided,
    /// Bytes of responses stored in shadow mode that second-hit would not have written.
    ShadowWritesAvoided,
}

/// The request path's counters: see the module docs. Shared by the proxy, its cache and
/// origin client (each holds an `Arc`), and read by the admin listener.
#[derive(Debug)]
pub struct Metrics {
    /// When the proxy started, for "since start" figures.
    started: Instant,
    /// One set of counters per worker, summed when read: a worker bumps only its own, so
    /// no cache line of counters moves between cores per request.
    shards: Box<[Shard]>,
    /// Each `[[site]]`'s own counters, by name.
    sites: sites::SiteRegistry,
}

/// One worker's counters, on cache lines of their own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    /// Requests by [`RequestResult`], indexed by its position in `RequestResult::ALL`.
    requests: [AtomicU64; RequestResult::ALL.len()],
    /// Decisions applied to storable responses, indexed by [`Decision::index`].
    decisions: [AtomicU64; Decision::ALL.len()],
    /// Bytes by [`ByteCounter`].
    bytes: [AtomicU64; 2],
    /// Response body bytes by [`RequestResult`] (as declared: see [`body_len`]), for the
    /// byte hit ratio.
    body_bytes: [AtomicU64; RequestResult::ALL.len()],
    /// Fills second-hit would not have written (shadow mode).
    shadow_writes_avoided: AtomicU64,
    /// First hits on entries second-hit would not have had (shadow mode).
    shadow_hits_lost: AtomicU64,
    /// Body bytes of those hits' entries.
    shadow_hits_lost_bytes: AtomicU64,
    /// Misses answered from another request's fill of their key (`Cache-Status: collapsed`).
    collapsed: AtomicU64,
    /// Errors by [`ErrorKind`], indexed by its position in `ErrorKind::ALL`.
    errors: [AtomicU64; ErrorKind::ALL.len()],
    /// Client connections this worker accepted.
    connections: AtomicU64,
    /// Responses not stored because their cache tags could not all be indexed, indexed by
    /// the reason's position in `UnindexedTags::ALL`.
    unindexed_tags: [AtomicU64; UnindexedTags::ALL.len()],
    /// Time from sending an origin request to its response head (or its failure).
    origin: DurationHistogram,
    /// Requests sent to another server of their pool, by [`RetryReason`] (its position in
    /// `RetryReason::ALL`).
    origin_retries: [AtomicU64; RetryReason::ALL.len()],
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// All counters at zero, started now, for one worker.
    pub fn new() -> Metrics {
        Metrics::for_workers(1)
    }

    /// All counters at zero, started now, for `workers` workers (at least one).
    pub fn for_workers(workers: usize) -> Metrics {
        Metrics {
            started: Instant::now(),
            shards: (0..workers.max(1)).map(|_| Shard::default()).collect(),
            sites: sites::SiteRegistry::default(),
        }
    }

    /// The counters of the site called `name` (made on first use, kept across reloads).
    pub fn site(&self, name: &str) -> Arc<SiteCounters> {
        self.sites.site(name, self.shards.len())
    }

    /// Each site's name and totals, in the order the sites were first seen.
    pub fn site_totals(&self) -> Vec<(String, SiteTotals)> {
        self.sites.totals()
    }

    /// This thread's worker's counters.
    fn shard(&self) -> &Shard {
        let index = crate::worker::index();
        // Set only by the server, for the workers it counts: never out of range there.
        &self.shards[index % self.shards.len()]
    }

    /// Counts one request answered with `result`.
    pub fn count_request(&self, result: RequestResult) {
        self.shard().requests[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `bytes` (from [`body_len`]; nothing for `None`) to the body bytes of `result`.
    pub fn count_body_bytes(&self, result: RequestResult, bytes: Option<u64>) {
        if let Some(bytes) = bytes {
            self.shard().body_bytes[result as usize].fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Counts `decision`, applied to a storable response.
    pub fn count_decision(&self, decision: Decision) {
        self.shard().decisions[decision.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `bytes` to `counter`.
    pub fn add_bytes(&self, counter: ByteCounter, bytes: u64) {
        self.shard().bytes[counter as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts a fill that second-hit would not have written (its bytes are counted as the
    /// body streams, into [`ByteCounter::ShadowWritesAvoided`]).
    pub fn count_shadow_write_avoided(&self) {
        self.shard()
            .shadow_writes_avoided
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a hit second-hit would not have had, on an entry of `body_len` bytes.
    pub fn count_shadow_hit_lost(&self, body_len: u64) {
        let shard = self.shard();
        shard.shadow_hits_lost.fetch_add(1, Ordering::Relaxed);
        shard
            .shadow_hits_lost_bytes
            .fetch_add(body_len, Ordering::Relaxed);
    }

    /// Counts a miss answered from another request's fill of its key instead of an origin
    /// fetch of its own (request collapsing).
    pub fn count_collapsed(&self) {
        self.shard().collapsed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one error of `kind`.
    pub fn count_error(&self, kind: ErrorKind) {
        self.shard().errors[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a response not stored because its cache tags could not all be indexed.
    pub fn count_unindexed_tags(&self, reason: UnindexedTags) {
        self.shard().unindexed_tags[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Responses not stored since start because their cache tags could not all be
    /// indexed, for every reason.
    pub fn unindexed_tags(&self) -> u64 {
        (self.shards.iter())
            .flat_map(|shard| &shard.unindexed_tags)
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
    }

    /// Counts a client connection accepted by this thread's worker.
    pub fn count_connection(&self) {
        self.shard().connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Records how long an origin request took to its response head.
    pub fn observe_origin(&self, elapsed: Duration) {
        self.shard().origin.observe(elapsed);
    }

    /// Counts a request sent to another server of its pool after `reason`.
    pub fn count_origin_retry(&self, reason: RetryReason) {
        self.shard().origin_retries[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A consistent-enough copy of every counter (each read on its own), summed over
    /// the workers.
    pub fn snapshot(&self) -> Counts {
        let sum = |read: &dyn Fn(&Shard) -> &AtomicU64| -> u64 {
            self.shards
                .iter()
                .map(|shard| read(shard).load(Ordering::Relaxed))
                .sum()
        };
        Counts {
            uptime: self.started.elapsed(),
            requests: std::array::from_fn(|i| sum(&|s| &s.requests[i])),
            body_bytes: std::array::from_fn(|i| sum(&|s| &s.body_bytes[i])),
            decisions: std::array::from_fn(|i| sum(&|s| &s.decisions[i])),
            writes_avoided_bytes: sum(&|s| &s.bytes[ByteCounter::WritesAvoided as usize]),
            shadow_writes_avoided: sum(&|s| &s.shadow_writes_avoided),
            shadow_writes_avoided_bytes: sum(&|s| {
                &s.bytes[ByteCounter::ShadowWritesAvoided as usize]
            }),
            shadow_hits_lost: sum(&|s| &s.shadow_hits_lost),
            shadow_hits_lost_bytes: sum(&|s| &s.shadow_hits_lost_bytes),
            collapsed: sum(&|s| &s.collapsed),
            errors: std::array::from_fn(|i| sum(&|s| &s.errors[i])),
            unindexed_tags: std::array::from_fn(|i| sum(&|s| &s.unindexed_tags[i])),
            connections: (self.shards.iter())
                .map(|shard| shard.connections.load(Ordering::Relaxed))
                .collect(),
            origin: HistogramCounts::sum(self.shards.iter().map(|shard| shard.origin.snapshot())),
            origin_retries: std::array::from_fn(|i| sum(&|s| &s.origin_retries[i])),
        }
    }
}

/// The counters at one moment, for `/metrics` and `/stats`.
#[derive(Clone, Debug, PartialEq)]
pub struct Counts {
    /// Time since the proxy started.
    pub uptime: Duration,
    /// Requests, in the order of [`RequestResult::ALL`].
    pub requests: [u64; RequestResult::ALL.len()],
    /// Response body bytes (as declared, see [`body_len`]), in the order of
    /// [`RequestResult::ALL`].
    pub body_bytes: [u64; RequestResult::ALL.len()],
    /// Decisions, in the order of [`Decision::ALL`].
    pub decisions: [u64; Decision::ALL.len()],
    /// Body bytes of storable responses admission kept off the disk.
    pub writes_avoided_bytes: u64,
    /// Shadow mode: fills second-hit would not have written.
    pub shadow_writes_avoided: u64,
    /// Shadow mode: their body bytes.
    pub shadow_writes_avoided_bytes: u64,
    /// Shadow mode: hits second-hit would have lost.
    pub shadow_hits_lost: u64,
    /// Shadow mode: body bytes of the entries those hits served.
    pub shadow_hits_lost_bytes: u64,
    /// Misses answered from another request's fill of their key.
    pub collapsed: u64,
    /// Errors, in the order of [`ErrorKind::ALL`].
    pub errors: [u64; ErrorKind::ALL.len()],
    /// Responses not stored because their cache tags could not all be indexed, in the
    /// order of [`UnindexedTags::ALL`].
    pub unindexed_tags: [u64; UnindexedTags::ALL.len()],
    /// Client connections accepted, by worker.
    pub connections: Vec<u64>,
    /// Origin request durations.
    pub origin: HistogramCounts,
    /// Requests sent to another server of their pool, in the order of
    /// [`RetryReason::ALL`].
    pub origin_retries: [u64; RetryReason::ALL.len()],
}

impl Counts {
    /// Requests that counted as `result`.
    pub fn requests(&self, result: RequestResult) -> u64 {
        self.requests[result as usize]
    }

    /// `hit / (hit + stale + miss)`: the share of the requests the cache was allowed to
    /// answer that it answered fresh from storage; `None` before the first such request.
    pub fn hit_ratio(&self) -> Option<f64> {
        let hits = self.requests(RequestResult::Hit);
        let answerable =
            hits + self.requests(RequestResult::Stale) + self.requests(RequestResult::Miss);
        (answerable > 0).then(|| hits as f64 / answerable as f64)
    }

    /// [`Counts::hit_ratio`] in body bytes: the share of the bytes of answerable requests
    /// that fresh hits served; `None` before the first such byte.
    pub fn byte_hit_ratio(&self) -> Option<f64> {
        let bytes = |result: RequestResult| self.body_bytes[result as usize];
        let hits = bytes(RequestResult::Hit);
        let answerable = hits + bytes(RequestResult::Stale) + bytes(RequestResult::Miss);
        (answerable > 0).then(|| hits as f64 / answerable as f64)
    }
}

/// The body bytes a response to a `method` request sends, as far as known when its head is
/// ready: 0 for `HEAD`, 204 and 304, else the body's exact size or its `Content-Length`
/// (a hit streamed from disk has only the latter); `None` when neither says (a chunked
/// response from the origin), so such bytes count in neither side of the byte hit ratio. Declared
/// rather than counted as the body streams: counting per frame would put an atomic add on
/// every frame of every response, and a client that hangs up early is rare enough not to
/// move a ratio.
pub(crate) fn body_len<B: http_body::Body>(method: &Method, response: &Response<B>) -> Option<u64> {
    let status = response.status();
    if method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Some(0);
    }
    response.body().size_hint().exact().or_else(|| {
        response
            .headers()
            .get(CONTENT_LENGTH)?
            .to_str()
            .ok()?
            .parse()
            .ok()
    })
}

/// One origin server's figures, as `/metrics` and `/stats` show them: the origin client
/// keeps them (`origin::health`), which this module cannot name, so the exporter is
/// handed a function that reads them ([`ServerSource`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSample {
    /// The server's URL (`origin.servers`), which names its state across reloads.
    pub url: String,
    /// Whether it is in rotation now.
    pub up: bool,
    /// Requests sent to it (probes not included).
    pub requests: u64,
    /// Those that failed: a connection error, a timeout, or a 5xx answer.
    pub failures: u64,
    /// Time from sending each request to its response head (or its failure).
    pub latency: HistogramCounts,
}

/// Reads every origin server's [`ServerSample`] as of now.
pub(crate) type ServerSource = std::sync::Arc<dyn Fn() -> Vec<ServerSample> + Send + Sync>;

/// Reads the miss-ratio estimates in use (a reload may rebuild them), at each scrape.
pub(crate) type TuningSource =
    std::sync::Arc<dyn Fn() -> std::sync::Arc<crate::tuning::Tuning> + Send + Sync>;

/// Upper bounds of the origin latency buckets, in seconds: 1 ms to 30 s.
pub(crate) const ORIGIN_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A latency histogram of atomics (prometheus-client's `Histogram` takes a mutex per
/// observation): one count per bucket, and the sum in nanoseconds.
#[derive(Debug, Default)]
pub(crate) struct DurationHistogram {
    /// Observations per bucket of [`ORIGIN_BUCKETS`], the last one for above them all.
    buckets: [AtomicU64; ORIGIN_BUCKETS.len() + 1],
    /// Sum of all observations, in nanoseconds.
    sum_nanos: AtomicU64,
}

/// A histogram's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramCounts {
    /// `(upper bound in seconds, observations above the previous bound and at or below
    /// this one)`, ending with `+Inf`: per bucket, not cumulative (prometheus-client's
    /// encoder adds them up as it writes the `le` buckets).
    pub buckets: Vec<(f64, u64)>,
    /// Observations in all.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
}

impl HistogramCounts {
    /// The `q` quantile (0 to 1) estimated from the buckets as Prometheus's
    /// `histogram_quantile` does: linearly within the bucket it falls in; the largest
    /// finite bound when it falls above them all. `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * self.count as f64;
        let (mut below, mut lower) = (0u64, 0.0);
        for &(upper, count) in &self.buckets {
            if count > 0 && (below + count) as f64 >= rank {
                if upper.is_infinite() {
                    return Some(lower);
                }
                let within = (rank - below as f64) / count as f64;
                return Some(lower + (upper - lower) * within);
            }
            below += count;
            if upper.is_finite() {
                lower = upper;
            }
        }
        Some(lower)
    }

    /// The histogram of all the observations of `parts` (all over the same buckets).
    pub(crate) fn sum(parts: impl Iterator<Item = HistogramCounts>) -> HistogramCounts {
        let mut total = HistogramCounts {
            buckets: Vec::new(),
            count: 0,
            sum_seconds: 0.0,
        };
        for part in parts {
            if total.buckets.is_empty() {
                total.buckets = part.buckets.iter().map(|&(bound, _)| (bound, 0)).collect();
            }
            for (sum, (_, count)) in total.buckets.iter_mut().zip(part.buckets) {
                sum.1 += count;
            }
            total.count += part.count;
            total.sum_seconds += part.sum_seconds;
        }
        total
    }
}

impl DurationHistogram {
    /// Counts one observation of `elapsed`.
    pub(crate) fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = ORIGIN_BUCKETS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(ORIGIN_BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Its figures now.
    pub(crate) fn snapshot(&self) -> HistogramCounts {
        let bounds = ORIGIN_BUCKETS.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds
            .zip(&self.buckets)
            .map(|(bound, count)| (bound, count.load(Ordering::Relaxed)))
            .collect();
        HistogramCounts {
            count: buckets.iter().map(|(_, count)| count).sum(),
            buckets,
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http::HeaderValue;

    use super::*;

    #[test]
    fn body_len_is_what_the_response_declares() {
        use http_body_util::{Empty, Full};
        let full = |status: u16| {
            let mut response = Response::new(Full::new(bytes::Bytes::from_static(b"12345")));
            *response.status_mut() = StatusCode::from_u16(status).expect("status");
            response
        };
        assert_eq!(body_len(&Method::GET, &full(200)), Some(5));
        assert_eq!(body_len(&Method::HEAD, &full(200)), Some(0));
        assert_eq!(body_len(&Method::GET, &full(304)), Some(0));
        // A streamed body: only the header says.
        let mut streamed = Response::new(http_body_util::StreamBody::new(
            futures_util::stream::empty::<Result<http_body::Frame<bytes::Bytes>, Infallible>>(),
        ));
        assert_eq!(body_len(&Method::GET, &streamed), None);
        streamed
            .headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from_static("1000"));
        assert_eq!(body_len(&Method::GET, &streamed), Some(1000));
        assert_eq!(
            body_len(&Method::GET, &Response::new(Empty::<bytes::Bytes>::new())),
            Some(0)
        );
    }

    #[test]
    fn byte_hit_ratio_weighs_requests_by_their_bytes() {
        let metrics = Metrics::new();
        assert_eq!(metrics.snapshot().byte_hit_ratio(), None);
        metrics.count_body_bytes(RequestResult::Hit, Some(900));
        metrics.count_body_bytes(RequestResult::Miss, Some(100));
        metrics.count_body_bytes(RequestResult::Miss, None);
        // Passed requests are not the cache's to answer.
        metrics.count_body_bytes(RequestResult::Pass, Some(5000));
        assert_eq!(metrics.snapshot().byte_hit_ratio(), Some(0.9));
    }

    #[test]
    fn quantiles_interpolate_within_their_bucket() {
        let histogram = HistogramCounts {
            buckets: vec![(0.01, 50), (0.1, 40), (1.0, 9), (f64::INFINITY, 1)],
            count: 100,
            sum_seconds: 0.0,
        };
        let near = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
        assert!(
            near(histogram.quantile(0.5), 0.01),
            "{:?}",
            histogram.quantile(0.5)
        );
        // The 70th observation is halfway through the (0.01, 0.1] bucket.
        assert!(near(histogram.quantile(0.7), 0.055));
        assert!(near(histogram.quantile(0.99), 1.0));
        // Above every finite bound: the largest one.
        assert!(near(histogram.quantile(1.0), 1.0));
        let empty = HistogramCounts {
            buckets: vec![(1.0, 0)],
            count: 0,
            sum_seconds: 0.0,
        };
        assert_eq!(empty.quantile(0.5), None);
    }

    #[test]
    fn counters_and_histogram_add_up() {
        let metrics = Metrics::new();
        metrics.count_request(RequestResult::Hit);
        metrics.count_request(RequestResult::Hit);
        metrics.count_request(RequestResult::Miss);
        metrics.observe_origin(Duration::from_micros(500));
        metrics.observe_origin(Duration::from_millis(20));
        metrics.observe_origin(Duration::from_secs(60));
        let counts = metrics.snapshot();
        assert_eq!(counts.requests(RequestResult::Hit), 2);
        assert_eq!(counts.hit_ratio(), Some(2.0 / 3.0));
        assert_eq!(counts.origin.count, 3);
        assert_eq!(counts.origin.buckets[0], (0.001, 1));
        assert_eq!(counts.origin.buckets[4], (0.025, 1));
        assert_eq!(counts.origin.buckets.last(), Some(&(f64::INFINITY, 1)));
        assert!((counts.origin.sum_seconds - 60.0205).abs() < 1e-9);
    }
}
