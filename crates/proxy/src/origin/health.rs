//! Origin server health: whether each server of a pool is in rotation, and its figures.
//!
//! A server leaves rotation in two ways, as nginx's upstreams and their health checks
//! do. Passively: `origin.max_fails` failures (a connection error, a timeout, a broken
//! exchange, an answer whose status is in `origin.fail_statuses`) within
//! `origin.fail_timeout` take it out for `fail_timeout`, or, with `origin.health_check`
//! set, until a probe passes. Actively: a probe that fails takes it out, and one that
//! passes puts it back (`super::probe`).
//!
//! Only the statuses `fail_statuses` names count (by default 502, 503 and 504, the
//! answers saying the server cannot serve now), as nginx counts only the statuses its
//! `proxy_next_upstream` names: a 500 from one URL is that URL's application failing,
//! and counting it would take the server out for every URL. The server's `failures`
//! figure still counts every 5xx answer, so the application's errors stay visible.
//!
//! The state of a server is kept in a [`Health`] registry keyed by its URL, which the
//! sites built by a reload take over from the running ones (`sites::Sites::health`): a
//! server that stays in the config keeps its state and its counters across reloads, and
//! two sites naming one URL share them. The registry holds weak references, so a server
//! that every site dropped leaves `/metrics` once the last snapshot naming it is gone.
//!
//! Reading whether a server is up is two atomic loads (the request path does it for
//! each server it considers); only a failure takes a lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::{DurationHistogram, HistogramCounts, ServerSample};

/// `down_until` of a server out of rotation until a probe passes.
const UNTIL_PROBE: u64 = u64::MAX;

/// Every origin server's state, by URL.
pub struct Health {
    servers: Mutex<HashMap<String, Weak<ServerState>>>,
    /// The instant `down_until` is counted from.
    epoch: Instant,
}

impl Default for Health {
    fn default() -> Self {
        Health::new()
    }
}

impl Health {
    /// An empty registry.
    pub fn new() -> Health {
        Health {
            servers: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
        }
    }

    /// The state of the server at `url`: the one in use if any, else a new one (up).
    pub(crate) fn server(&self, url: &str) -> Arc<ServerState> {
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = servers.get(url).and_then(Weak::upgrade) {
            return state;
        }
        servers.retain(|_, state| state.strong_count() > 0);
        let state = Arc::new(ServerState::new(url, self.epoch));
        servers.insert(url.to_owned(), Arc::downgrade(&state));
        state
    }

    /// Every server in use, by URL.
    pub fn samples(&self) -> Vec<ServerSample> {
        let servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        let mut samples: Vec<ServerSample> = (servers.values())
            .filter_map(Weak::upgrade)
            .map(|state| state.sample())
            .collect();
        samples.sort_by(|a, b| a.url.cmp(&b.url));
        samples
    }
}

/// When failures take a server out of rotation (the pool's `max_fails`, `fail_timeout`,
/// `fail_statuses` and whether it has a `health_check`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Passive {
    /// Failures within `fail_timeout` that take a server out; zero: never.
    pub(crate) max_fails: u32,
    /// The window failures are counted in, and how long a server is out without probes.
    pub(crate) fail_timeout: Duration,
    /// The answer statuses that are failures of the server.
    pub(crate) fail_statuses: FailStatuses,
    /// With probes, a server taken out stays out until one passes.
    pub(crate) until_probe: bool,
}

/// A set of 5xx statuses (`origin.fail_statuses`), one bit per status, so that the rule
/// stays `Copy` and a lookup is a shift.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FailStatuses(u128);

impl FailStatuses {
    /// The set of `statuses`; any outside 500 to 599 (which validation refuses) is left out.
    pub(crate) fn new(statuses: &[u16]) -> FailStatuses {
        let bits = (statuses.iter())
            .filter(|status| (500..=599).contains(*status))
            .fold(0u128, |bits, status| bits | 1 << (status - 500));
        FailStatuses(bits)
    }

    /// Whether an answer with `status` is a failure of the server.
    pub(crate) fn contains(self, status: u16) -> bool {
        (500..=599).contains(&status) && self.0 & 1 << (status - 500) != 0
    }
}

/// How one request to a server went, as its health sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The server answered with this status.
    Answered(u16),
    /// The server could not be reached or broke the exchange (a connection error, a
    /// timeout, an invalid response): always a failure of the server.
    Broke,
    /// No response head within `origin.first_byte_timeout`, while the server answered
    /// other requests: this URL is slow, the server is not stopped. A failure in its
    /// figures, but not toward `max_fails`, so that one slow URL does not take server
    /// after server out of rotation.
    Slow,
    /// No answer, through no fault of the server's (the client's body, this proxy's own
    /// queue): neither a failure nor counted toward `max_fails`.
    Abandoned,
}

impl Attempt {
    /// Whether it goes into the server's `failures` figure: it broke or answered 5xx.
    fn failed(self) -> bool {
        match self {
            Attempt::Answered(status) => (500..=599).contains(&status),
            Attempt::Broke | Attempt::Slow => true,
            Attempt::Abandoned => false,
        }
    }

    /// Whether it counts toward `max_fails` under `rule`.
    fn counts(self, rule: &Passive) -> bool {
        match self {
            Attempt::Answered(status) => rule.fail_statuses.contains(status),
            Attempt::Broke => true,
            Attempt::Slow | Attempt::Abandoned => false,
        }
    }
}

/// One server's health and figures.
pub(crate) struct ServerState {
    url: String,
    epoch: Instant,
    /// Milliseconds after `epoch` until which failures keep it out of rotation (0: not
    /// out; [`UNTIL_PROBE`]: until a probe passes).
    down_until: AtomicU64,
    /// Whether the last probe failed.
    probe_down: AtomicBool,
    /// Milliseconds after `epoch`, plus one, when a request last got a response head
    /// from it (0: never): whether a server that keeps a request waiting is alive.
    answered: AtomicU64,
    /// Failures counted in the current window, and when it began.
    window: Mutex<(u32, Instant)>,
    /// Requests, failures and latency, one set per worker (by `worker::index() %
    /// SHARDS`), summed when read: every origin request counts here, and a counter all
    /// workers bump would move its cache line between cores on each.
    shards: Box<[ServerShard]>,
}

/// How many sets of counters a server keeps (as many as the origin pool's idle lists).
const SHARDS: usize = 64;

/// One worker's share of a server's figures, on cache lines of its own.
#[derive(Default)]
#[repr(align(128))]
struct ServerShard {
    requests: AtomicU64,
    failures: AtomicU64,
    latency: DurationHistogram,
}

impl ServerState {
    fn new(url: &str, epoch: Instant) -> ServerState {
        ServerState {
            url: url.to_owned(),
            epoch,
            down_until: AtomicU64::new(0),
            probe_down: AtomicBool::new(false),
            answered: AtomicU64::new(0),
            window: Mutex::new((0, epoch)),
            shards: (0..SHARDS).map(|_| ServerShard::default()).collect(),
        }
    }

    /// This worker's counters.
    fn shard(&self) -> &ServerShard {
        &self.shards[crate::worker::index() % SHARDS]
    }

    /// The server's URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Milliseconds from the epoch to now, plus one, so that 0 can mean "not out".
    fn now_ms(&self) -> u64 {
        self.ms_at(Instant::now())
    }

    /// Milliseconds from the epoch to `at`, plus one.
    fn ms_at(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.epoch);
        u64::try_from(since.as_millis()).map_or(u64::MAX - 1, |ms| ms.saturating_add(1))
    }

    /// Whether a request got a response head from it after `at` (to the millisecond).
    pub(crate) fn answered_since(&self, at: Instant) -> bool {
        self.answered.load(Ordering::Relaxed) > self.ms_at(at)
    }

    /// Whether it is in rotation now.
    pub(crate) fn is_up(&self) -> bool {
        if self.probe_down.load(Ordering::Relaxed) {
            return false;
        }
        let until = self.down_until.load(Ordering::Relaxed);
        until == 0 || (until != UNTIL_PROBE && self.now_ms() >= until)
    }

    /// Records one request's outcome, which took `elapsed` and ended `now`, in the
    /// server's figures, and counts it toward taking the server out where it is a failure
    /// of the server. `passive`: the pool's rule, `None` where failures never take the
    /// server out.
    pub(crate) fn record(
        &self,
        elapsed: Duration,
        now: Instant,
        attempt: Attempt,
        passive: Option<Passive>,
    ) {
        let shard = self.shard();
        shard.requests.fetch_add(1, Ordering::Relaxed);
        shard.latency.observe(elapsed);
        if let Attempt::Answered(_) = attempt {
            self.answered.store(self.ms_at(now), Ordering::Relaxed);
        }
        if !attempt.failed() {
            return;
        }
        shard.failures.fetch_add(1, Ordering::Relaxed);
        let Some(rule) = passive.filter(|rule| rule.max_fails > 0 && attempt.counts(rule)) else {
            return;
        };
        let out = {
            let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
            if now.saturating_duration_since(window.1) >= rule.fail_timeout || window.0 == 0 {
                *window = (0, now);
            }
            window.0 += 1;
            let out = window.0 >= rule.max_fails;
            if out {
                window.0 = 0;
            }
            out
        };
        if out {
            let until = match rule.until_probe {
                true => UNTIL_PROBE,
                false => self.ms_at(now).saturating_add(millis(rule.fail_timeout)),
            };
            let was_up = self.is_up();
            self.down_until.store(until, Ordering::Relaxed);
            if was_up {
                tracing::warn!(server = %self.url, max_fails = rule.max_fails,
                    fail_timeout = ?rule.fail_timeout, "origin server out of rotation after failures");
            }
        }
    }

    /// Fits a state carried over from the previous config to this one's rules: without
    /// probes nothing would end a wait for one, so such a wait becomes `fail_timeout`
    /// from now (or ends, where failures take no server out: `passive` is `None`).
    pub(crate) fn adopt(&self, passive: Option<Passive>, probes: bool) {
        if probes {
            return;
        }
        self.probe_down.store(false, Ordering::Relaxed);
        let until = self.down_until.load(Ordering::Relaxed);
        match passive {
            None => self.down_until.store(0, Ordering::Relaxed),
            Some(rule) if until == UNTIL_PROBE => {
                let until = self.now_ms().saturating_add(millis(rule.fail_timeout));
                self.down_until.store(until, Ordering::Relaxed);
            }
            Some(_) => {}
        }
    }

    /// Records a probe's result: a pass puts the server back in rotation, a failure takes
    /// it out.
    pub(crate) fn probed(&self, passed: bool, detail: &str) {
        let was_up = self.is_up();
        self.probe_down.store(!passed, Ordering::Relaxed);
        if passed {
            self.down_until.store(0, Ordering::Relaxed);
        }
        match (was_up, passed) {
            (false, true) => {
                tracing::info!(server = %self.url, "origin server back in rotation: probe passed")
            }
            (true, false) => {
                tracing::warn!(server = %self.url, %detail, "origin server out of rotation: probe failed")
            }
            _ => tracing::debug!(server = %self.url, passed, %detail, "origin server probed"),
        }
    }

    fn sample(&self) -> ServerSample {
        ServerSample {
            url: self.url.clone(),
            up: self.is_up(),
            requests: self
                .shards
                .iter()
                .map(|s| s.requests.load(Ordering::Relaxed))
                .sum(),
            failures: self
                .shards
                .iter()
                .map(|s| s.failures.load(Ordering::Relaxed))
                .sum(),
            latency: HistogramCounts::sum(self.shards.iter().map(|s| s.latency.snapshot())),
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Passive = Passive {
        max_fails: 2,
        fail_timeout: Duration::from_secs(10),
        fail_statuses: FailStatuses(0),
        until_probe: false,
    };

    #[tokio::test(start_paused = true)]
    async fn max_fails_within_fail_timeout_take_a_server_out_for_fail_timeout() {
        let health = Health::new();
        let server = health.server("http://a");
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(RULE));
        assert!(server.is_up(), "one failure of two allowed");
        // The window has passed: the count starts again.
        tokio::time::advance(Duration::from_secs(11)).await;
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(RULE));
        assert!(server.is_up());
        server.record(
            Duration::ZERO,
            Instant::now(),
            Attempt::Answered(200),
            Some(RULE),
        );
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(RULE));
        assert!(!server.is_up(), "two failures within fail_timeout");
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(!server.is_up());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(server.is_up(), "back after fail_timeout");
        let sample = &health.samples()[0];
        assert_eq!((sample.requests, sample.failures), (4, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn with_probes_a_failing_server_stays_out_until_a_probe_passes() {
        let health = Health::new();
        let server = health.server("http://a");
        let rule = Passive {
            max_fails: 1,
            until_probe: true,
            ..RULE
        };
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(rule));
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(!server.is_up());
        server.probed(true, "200");
        assert!(server.is_up());
        server.probed(false, "503");
        assert!(!server.is_up());
        // Without a rule (a pool of one server), failures never take it out.
        server.probed(true, "200");
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, None);
        assert!(server.is_up());
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_waiting_for_a_probe_waits_fail_timeout_once_probes_are_gone() {
        let server = Health::new().server("http://a");
        let probed = Passive {
            until_probe: true,
            ..RULE
        };
        server.probed(false, "503");
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(probed));
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(probed));
        server.adopt(Some(probed), true);
        assert!(!server.is_up(), "probes still decide");
        server.adopt(Some(RULE), false);
        assert!(!server.is_up(), "out for fail_timeout from the reload");
        tokio::time::advance(RULE.fail_timeout).await;
        assert!(server.is_up());
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(probed));
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(probed));
        server.adopt(None, false);
        assert!(server.is_up(), "a pool of one is never out by failures");
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_fail_statuses_count_toward_max_fails_while_every_5xx_is_a_failure() {
        let health = Health::new();
        let server = health.server("http://a");
        let rule = Passive {
            max_fails: 1,
            fail_statuses: FailStatuses::new(&[502, 503, 504]),
            ..RULE
        };
        server.record(
            Duration::ZERO,
            Instant::now(),
            Attempt::Answered(500),
            Some(rule),
        );
        server.record(
            Duration::ZERO,
            Instant::now(),
            Attempt::Answered(404),
            Some(rule),
        );
        server.record(
            Duration::ZERO,
            Instant::now(),
            Attempt::Abandoned,
            Some(rule),
        );
        assert!(
            server.is_up(),
            "500, 404 and an abandoned request do not count"
        );
        server.record(
            Duration::ZERO,
            Instant::now(),
            Attempt::Answered(503),
            Some(rule),
        );
        assert!(!server.is_up(), "503 is one of fail_statuses");
        let sample = &health.samples()[0];
        assert_eq!(
            (sample.requests, sample.failures),
            (4, 2),
            "500 and 503 failed"
        );
        let none = FailStatuses::new(&[]);
        assert!((500..=599).all(|status| !none.contains(status)));
        let some = FailStatuses::new(&[500, 599, 500]);
        let listed: Vec<u16> = (0..=999).filter(|s| some.contains(*s)).collect();
        assert_eq!(listed, [500, 599]);
    }

    #[test]
    fn a_url_keeps_its_state_while_in_use_and_is_forgotten_after() {
        let health = Health::new();
        let first = health.server("http://a");
        first.probed(false, "refused");
        let again = health.server("http://a");
        assert!(Arc::ptr_eq(&first, &again));
        drop((first, again));
        assert!(health.samples().is_empty());
        assert!(health.server("http://a").is_up(), "a new server starts up");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_answer_is_a_failure_that_takes_no_server_out_and_answers_show_life() {
        let health = Health::new();
        let server = health.server("http://a");
        let rule = Passive {
            max_fails: 1,
            ..RULE
        };
        let asked = Instant::now();
        assert!(!server.answered_since(asked), "nothing answered yet");
        tokio::time::advance(Duration::from_millis(5)).await;
        server.record(
            Duration::ZERO,
            Instant::now(),
            Attempt::Answered(200),
            Some(rule),
        );
        assert!(server.answered_since(asked));
        assert!(!server.answered_since(Instant::now()), "nothing since now");
        server.record(Duration::ZERO, Instant::now(), Attempt::Slow, Some(rule));
        assert!(server.is_up(), "a slow URL takes no server out");
        assert_eq!(
            health.samples()[0].failures,
            1,
            "but is a failure in its figures"
        );
        server.record(Duration::ZERO, Instant::now(), Attempt::Broke, Some(rule));
        assert!(!server.is_up());
    }
}
