//! What a replay's client saw, counted: each exchange's [`RequestResult`] (from the
//! response's `Cache-Status`), status class, body bytes and latency, or its [`Failure`].
//! The enums stay enums until [`Tally::summary`] and [`Tally::row`] render them.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use http::StatusCode;

use crate::driver::latency_histogram;
use crate::report::{PolicyReport, ReplaySummary};
use secondhit_proxy::outcome::{Forwarded, Outcome, RequestResult};

/// Why a request got no response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// The connection to the target could not be opened.
    Connect,
    /// No whole response within the timeout.
    Timeout,
    /// The connection failed during the exchange: closed, reset, or a response that is
    /// not HTTP.
    Broken,
}

impl Failure {
    const ALL: [Failure; 3] = [Failure::Connect, Failure::Timeout, Failure::Broken];

    /// The report's word for it.
    fn as_str(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Timeout => "timeout",
            Failure::Broken => "broken",
        }
    }
}

/// One response, read whole.
pub(super) struct Exchanged {
    pub(super) status: StatusCode,
    /// What its `Cache-Status` says this cache did; `None`: no entry of secondhit's.
    pub(super) outcome: Option<Outcome>,
    /// Body bytes received.
    pub(super) bytes: u64,
}

/// The counts of one worker, or of all of them added up.
pub(super) struct Tally {
    /// Responses by [`RequestResult`], in its counter order.
    results: [u64; 4],
    /// Their body bytes, likewise.
    result_bytes: [u64; 4],
    /// Responses without a `Cache-Status` entry of secondhit's.
    unlabelled: u64,
    /// Responses the proxy fetched from the origin for this request itself.
    forwarded: u64,
    forwarded_bytes: u64,
    /// Responses by the first digit of their status (`2` for 2xx).
    classes: [u64; 10],
    failures: [u64; 3],
    latency_us: Histogram<u64>,
}

impl Tally {
    pub(super) fn new() -> Tally {
        Tally {
            results: [0; 4],
            result_bytes: [0; 4],
            unlabelled: 0,
            forwarded: 0,
            forwarded_bytes: 0,
            classes: [0; 10],
            failures: [0; 3],
            latency_us: latency_histogram(),
        }
    }

    /// Counts one request that took `latency`.
    pub(super) fn record(&mut self, exchanged: Result<Exchanged, Failure>, latency: Duration) {
        let _ = self.latency_us.record(latency.as_micros().max(1) as u64);
        let exchanged = match exchanged {
            Ok(exchanged) => exchanged,
            Err(failure) => {
                self.failures[failure as usize] += 1;
                return;
            }
        };
        self.classes[usize::from(exchanged.status.as_u16() / 100) % 10] += 1;
        let Some(outcome) = exchanged.outcome else {
            self.unlabelled += 1;
            return;
        };
        let result = outcome.result() as usize;
        self.results[result] += 1;
        self.result_bytes[result] += exchanged.bytes;
        // A collapsed request waited for another's fetch: the origin saw only that one.
        if let Outcome::Forwarded(Forwarded {
            collapsed: false, ..
        }) = outcome
        {
            self.forwarded += 1;
            self.forwarded_bytes += exchanged.bytes;
        }
    }

    /// Adds `other`'s counts to these.
    pub(super) fn add(&mut self, other: &Tally) {
        let sum = |mine: &mut [u64], theirs: &[u64]| {
            mine.iter_mut().zip(theirs).for_each(|(a, b)| *a += b);
        };
        sum(&mut self.results, &other.results);
        sum(&mut self.result_bytes, &other.result_bytes);
        sum(&mut self.classes, &other.classes);
        sum(&mut self.failures, &other.failures);
        self.unlabelled += other.unlabelled;
        self.forwarded += other.forwarded;
        self.forwarded_bytes += other.forwarded_bytes;
        // Both histograms share bounds, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
    }

    /// Requests sent.
    fn requests(&self) -> u64 {
        self.classes.iter().sum::<u64>() + self.failures.iter().sum::<u64>()
    }

    /// The report's row: the hit ratios as the proxy's `/stats` computes them, hits over
    /// the requests the cache was allowed to answer (hit, stale, miss), in requests and in
    /// body bytes.
    pub(super) fn row(&self, policy: &str, elapsed: Duration) -> PolicyReport {
        let hit_share = |counts: &[u64; 4]| {
            let hits = counts[RequestResult::Hit as usize];
            let answerable =
                hits + counts[RequestResult::Stale as usize] + counts[RequestResult::Miss as usize];
            if answerable == 0 {
                0.0
            } else {
                hits as f64 / answerable as f64
            }
        };
        let millis = |quantile: f64| self.latency_us.value_at_quantile(quantile) as f64 / 1000.0;
        let requests = self.requests();
        PolicyReport {
            policy: policy.to_owned(),
            requests,
            failed_requests: requests - self.classes[2],
            hit_ratio: hit_share(&self.results),
            byte_hit_ratio: hit_share(&self.result_bytes),
            disk_write_objects: None,
            disk_write_bytes: None,
            origin_requests: Some(self.forwarded),
            origin_bytes: Some(self.forwarded_bytes),
            admission_memory_bytes: None,
            throughput_rps: Some(requests as f64 / elapsed.as_secs_f64().max(1e-9)),
            p50_ms: Some(millis(0.5)),
            p99_ms: Some(millis(0.99)),
            p999_ms: Some(millis(0.999)),
        }
    }

    /// The counts the row has no column for; the caller fills in what the tally does not know.
    pub(super) fn summary(&self) -> ReplaySummary {
        let mut results: BTreeMap<&'static str, u64> = (RequestResult::ALL.iter())
            .map(|&result| (result.as_str(), self.results[result as usize]))
            .collect();
        results.insert("none", self.unlabelled);
        let responses = (self.classes.iter().enumerate())
            .filter(|&(_, &count)| count > 0)
            .map(|(class, &count)| (format!("{class}xx"), count))
            .collect();
        let errors = (Failure::ALL.iter())
            .map(|&failure| (failure.as_str(), self.failures[failure as usize]))
            .collect();
        ReplaySummary {
            target: String::new(),
            pace: String::new(),
            concurrency: 0,
            results,
            responses,
            errors,
            skipped_methods: 0,
            unsendable: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secondhit_proxy::outcome::{Detail, Forward};

    fn answer(status: u16, outcome: Option<Outcome>, bytes: u64) -> Result<Exchanged, Failure> {
        Ok(Exchanged {
            status: StatusCode::from_u16(status).expect("valid status"),
            outcome,
            bytes,
        })
    }

    #[test]
    fn results_ratios_and_origin_load_follow_cache_status() {
        let mut tally = Tally::new();
        let latency = Duration::from_millis(1);
        tally.record(answer(200, Some(Outcome::hit()), 300), latency);
        tally.record(
            answer(200, Some(Outcome::hit().detail(Detail::MaxStale)), 100),
            latency,
        );
        let miss = Outcome::forward(Forward::UriMiss);
        tally.record(answer(200, Some(miss), 100), latency);
        tally.record(answer(200, Some(miss.collapsed()), 100), latency);
        tally.record(
            answer(404, Some(Outcome::forward(Forward::Method)), 9),
            latency,
        );
        tally.record(answer(200, None, 1), latency);
        tally.record(Err(Failure::Timeout), latency);
        let row = tally.row("target", Duration::from_secs(1));
        assert_eq!((row.requests, row.failed_requests), (7, 2));
        // hit / (hit + stale + miss): the pass, the unlabelled and the failure are not the
        // cache's to answer; the collapsed miss is a miss, as the proxy counts it.
        assert_eq!(row.hit_ratio, 0.25);
        assert_eq!(row.byte_hit_ratio, 0.5);
        assert_eq!(
            (row.origin_requests, row.origin_bytes),
            (Some(2), Some(109))
        );
        let summary = tally.summary();
        assert_eq!(summary.results["miss"], 2);
        assert_eq!(summary.results["none"], 1);
        assert_eq!(summary.responses["4xx"], 1);
        assert_eq!(summary.errors["timeout"], 1);
        assert_eq!(summary.errors["connect"], 0);
    }
}
