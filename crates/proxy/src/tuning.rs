//! The estimator as the proxy runs it ([`Tuning`]): fed on the request path, ended each
//! `admission.auto_epoch` by the server's epoch task, which also asks it what
//! `policy = "auto"` should run ([`choose`]): the glue between the config and the
//! estimator of `secondhit-tuning`.
//!
//! # The sampling rate
//! The estimate is accurate when the smallest miniature (¼ of the cache) holds a few
//! hundred objects (`benches/RESULTS.md`), and each sampled request costs a replay through
//! every miniature; so the rate aims at `TARGET_OBJECTS` there at the mean object
//! size. It starts from an assumed mean (`ASSUMED_MEAN_SIZE`) and follows the observed
//! one at each epoch's end: halved (keeping a subset of the sample and what it counted)
//! while it is more than twice what is needed, and rebuilt higher, starting its counts
//! afresh, when it is less than half of it and no budget lowered it. The key budget
//! (`EstimatorConfig::max_keys`) caps it whatever the traffic, and so does the replays'
//! CPU budget (`admission.estimate_budget`) down to 1/32: a small cache under heavy
//! traffic is sampled less than its accuracy asks, rather than cost the requests more.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};
#[cfg(test)]
use std::time::Duration;
use std::time::Instant;

use arc_swap::ArcSwap;

use secondhit_admission::{AutoMode, FilterHash};
use secondhit_tuning::choose::{Hysteresis, Rules, Score};
use secondhit_tuning::{CacheShape, Candidate, Estimator, EstimatorConfig, ReplayBudget};

use crate::config::{AdmissionConfig, AdmissionPolicy, Config, MaxObjectSize};

pub use secondhit_tuning::choose::{self, Verdict};
pub(crate) use secondhit_tuning::{Estimate, Point};

/// Objects the smallest miniature is meant to hold: the few hundred below which its
/// estimate turns noisy (the rate ends between this and twice it).
pub(crate) const TARGET_OBJECTS: f64 = 500.0;

/// The rate the replays' CPU bound (`admission.estimate_budget`, a `ReplayBudget`)
/// lowers no further: at 1/32 the estimates cost about 1% of a 1 KiB hit's CPU whatever
/// the traffic. The bound is time, since what a replay costs depends on what else the
/// CPU's caches hold: 2–3.5 µs alone (`benches/estimator.rs`), 7–12 µs inside the proxy
/// on the CDN mix. What the replays push out of those caches the proxy pays for later,
/// uncounted: under a bound of 2,000 replays a second the replays took 3.5% of the CDN
/// mix's CPU and the estimates 6% (`benches/RESULTS.md`, "the replay budget counts time,
/// not replays").
pub(crate) const LEAST_BUDGET_RATE: f64 = 1.0 / 32.0;

/// The mean object size assumed before any is observed (a CDN's typical mix).
pub(crate) const ASSUMED_MEAN_SIZE: f64 = 64.0 * 1024.0;

/// What the estimates model: a reload that changes it rebuilds them (see [`Models::of`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Models {
    /// `[admission]` but for the keys that change nothing modelled (the policy, the
    /// write budget, the epoch, the objective, the snapshots' period).
    admission: AdmissionConfig,
    max_size: u64,
    max_object_size: MaxObjectSize,
}

impl Models {
    /// What `config`'s estimates model: `second-hit`'s filters as `[admission]` sizes them
    /// (and the seed, which picks the sampled keys, and `estimate_budget`, which bounds how
    /// many), `cache.max_size` and `cache.max_object_size`.
    pub(crate) fn of(config: &Config) -> Models {
        let unmodelled = AdmissionConfig::default();
        Models {
            admission: AdmissionConfig {
                policy: AdmissionPolicy::SecondHit,
                max_write_rate: None,
                auto_epoch: unmodelled.auto_epoch,
                optimize: unmodelled.optimize,
                snapshot_every: unmodelled.snapshot_every,
                ..config.admission.clone()
            },
            max_size: config.cache.max_size,
            max_object_size: config.cache.max_object_size,
        }
    }
}

/// The live estimates and the choice made from them: see the module docs.
pub struct Tuning {
    /// Swapped only when the rate is rebuilt higher.
    estimator: ArcSwap<Estimator>,
    models: Models,
    state: Mutex<State>,
    switches: AtomicU64,
}

/// What the epochs change.
struct State {
    hysteresis: Hysteresis,
    /// Seconds of the past epochs, decayed as the counts are.
    past_seconds: f64,
    epoch_started: Instant,
    epochs: u64,
    last: Option<Verdict>,
}

/// What one epoch's end decided, for the log.
pub struct Ended {
    /// What the choice did.
    pub verdict: Verdict,
    /// The candidate that ran before.
    pub before: Candidate,
    /// The candidate to run now.
    pub current: Candidate,
    /// The scores it chose by.
    pub scores: Vec<Score>,
}

/// What `/stats` and `/metrics` show.
pub(crate) struct Report {
    /// The curves.
    pub estimate: Estimate,
    /// Seconds of traffic the counts cover (decayed as they are): written bytes over it
    /// are bytes a second.
    pub seconds: f64,
    /// The candidate chosen (what `auto` runs, or would run under another policy).
    pub current: Candidate,
    /// Switches made since start-up (or the last rebuild).
    pub switches: u64,
    /// Epochs ended.
    pub epochs: u64,
    /// What the last epoch's choice did.
    pub last: Option<Verdict>,
}

impl Report {
    /// `point`'s estimated writes, in bytes a second.
    pub(crate) fn write_rate(&self, point: &Point) -> f64 {
        if self.seconds > 0.0 {
            point.written_bytes / self.seconds
        } else {
            0.0
        }
    }
}

impl Tuning {
    /// Estimates for `config`, from `now`.
    pub fn new(config: &Config, now: Instant) -> Tuning {
        let models = Models::of(config);
        let estimator = build(config, rate_for(config, ASSUMED_MEAN_SIZE), now);
        Tuning {
            estimator: ArcSwap::from_pointee(estimator),
            models,
            state: Mutex::new(State {
                hysteresis: Hysteresis::default(),
                past_seconds: 0.0,
                epoch_started: now,
                epochs: 0,
                last: None,
            }),
            switches: AtomicU64::new(0),
        }
    }

    /// Fresh estimates for `config` (a reload changed what they model) that go on
    /// running the candidate `previous` chose.
    pub(crate) fn following(previous: &Tuning, config: &Config, now: Instant) -> Tuning {
        let next = Tuning::new(config, now);
        next.lock().hysteresis.current = previous.current();
        next
    }

    /// What these estimates model.
    pub(crate) fn models(&self) -> &Models {
        &self.models
    }

    /// A hit, or a storable miss, of `size` body bytes under `hash`: see
    /// [`Estimator::observe`].
    #[inline]
    pub(crate) fn observe(&self, hash: FilterHash, size: u64) {
        self.estimator.load().observe_now(hash, size);
    }

    /// `Tuning::observe` at `now` on a clock of the caller's: the simulator's form, on a
    /// trace's clock.
    #[inline]
    pub fn observe_at(&self, hash: FilterHash, size: u64, now: Instant) {
        self.estimator.load().observe(hash, size, now);
    }

    /// The candidate chosen now.
    pub(crate) fn current(&self) -> Candidate {
        self.lock().hysteresis.current
    }

    /// Switches made.
    pub(crate) fn switches(&self) -> u64 {
        self.switches.load(Relaxed)
    }

    /// Ends an epoch at `now` for `config` and chooses by `rules`.
    pub fn end_epoch(&self, config: &Config, now: Instant, rules: &Rules) -> Ended {
        let estimator = self.estimator.load_full();
        estimator.end_epoch();
        let mut state = self.lock();
        let epoch = now.saturating_duration_since(state.epoch_started);
        state.past_seconds = state.past_seconds * estimator.decay() + epoch.as_secs_f64();
        state.epoch_started = now;
        state.epochs += 1;
        let scores = choose::scores(&estimator.estimate(), rules.objective, state.past_seconds);
        let before = state.hysteresis.current;
        let (next, verdict) = choose::choose(state.hysteresis, &scores, rules);
        state.hysteresis = next;
        state.last = Some(verdict);
        if verdict.switched() {
            self.switches.fetch_add(1, Relaxed);
        }
        if self.follow_mean_size(&estimator, config, now) {
            state.past_seconds = 0.0;
        }
        Ended {
            verdict,
            before,
            current: next.current,
            scores,
        }
    }

    /// Moves the rate toward what the observed mean size needs (module docs); true when
    /// the estimator was rebuilt, its counts started afresh.
    fn follow_mean_size(&self, estimator: &Estimator, config: &Config, now: Instant) -> bool {
        let Some(mean) = estimator.mean_size() else {
            return false;
        };
        let target = rate_for(config, mean);
        let rate = estimator.rate();
        if rate > 2.0 * target {
            estimator.lower_rate_toward(target);
            return false;
        }
        if rate < target / 2.0 && !estimator.capped() {
            tracing::info!(
                from = rate,
                to = target,
                mean_size = mean as u64,
                "miss-ratio estimates sample more keys for the objects' size; their counts start afresh"
            );
            self.estimator
                .store(std::sync::Arc::new(build(config, target, now)));
            return true;
        }
        false
    }

    /// The report at `now`.
    pub(crate) fn report(&self, now: Instant) -> Report {
        let estimate = self.estimator.load().estimate();
        let state = self.lock();
        let current = now.saturating_duration_since(state.epoch_started);
        Report {
            estimate,
            seconds: state.past_seconds + current.as_secs_f64(),
            current: state.hysteresis.current,
            switches: self.switches(),
            epochs: state.epochs,
            last: state.last,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Each update leaves the state whole; a panic between two is nothing worse.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The mode `auto` runs for `candidate` (the runnable ones: `always`, or `second-hit`).
pub fn mode_of(candidate: Candidate) -> AutoMode {
    match candidate == Candidate::ALWAYS {
        true => AutoMode::Always,
        false => AutoMode::SecondHit,
    }
}

/// The rate that puts [`TARGET_OBJECTS`] of `mean_size` bytes in the smallest miniature of
/// `config`'s cache (the estimator clamps it to (0, 1]).
fn rate_for(config: &Config, mean_size: f64) -> f64 {
    let defaults = EstimatorConfig::default();
    let smallest = defaults
        .size_factors
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let bytes = config.cache.max_size as f64 * smallest;
    let per_object = mean_size.max(1.0) + defaults.entry_overhead as f64;
    (TARGET_OBJECTS * per_object / bytes.max(1.0)).min(1.0)
}

/// An estimator of `config`'s cache at `rate`.
fn build(config: &Config, rate: f64, now: Instant) -> Estimator {
    let settings = EstimatorConfig {
        rate,
        replay_budget: Some(ReplayBudget {
            per_second: config.admission.estimate_budget,
            least_rate: LEAST_BUDGET_RATE,
        }),
        ..EstimatorConfig::default()
    };
    let cache = CacheShape {
        max_size: config.cache.max_size,
        max_object_size: config.cache.max_object_size,
    };
    Estimator::new(&settings, &config.admission, cache, now)
}

/// The load [`observe_cost`] puts on the estimates.
#[derive(Clone, Copy, Debug)]
pub struct ObserveLoad {
    /// Distinct keys the requests are drawn from.
    pub catalog: u64,
    /// Calls each thread makes.
    pub requests: usize,
    /// Threads calling at once.
    pub threads: usize,
}

/// What the estimates cost the request path, for `benches/observe.rs`: each of
/// `load.threads` threads calls `Tuning::observe` (as a hit or a storable miss does) for
/// `load.requests` keys of `size` bytes drawn from a catalog of `load.catalog`, on a
/// cache of `max_size` bytes sampled at the rate the proxy would choose once it has seen
/// the size. Returns that rate, the rate at the end (the replay budget may have lowered
/// it) and the mean nanoseconds a call took on its thread.
pub fn observe_cost(max_size: u64, size: u64, load: ObserveLoad) -> (f64, f64, f64) {
    let ObserveLoad {
        catalog,
        requests,
        threads,
    } = load;
    let mut config = Config::default();
    config.cache.max_size = max_size;
    let now = Instant::now();
    let tuning = Tuning {
        estimator: ArcSwap::from_pointee(build(&config, rate_for(&config, size as f64), now)),
        ..Tuning::new(&config, now)
    };
    let rate = tuning.estimator.load().rate();
    let nanos: u128 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let tuning = &tuning;
                scope.spawn(move || {
                    // Keys hashed ahead (the proxy has the hash already), drawn by a
                    // stride walk so that threads and rounds mix keys.
                    let hashes: Vec<FilterHash> = (0..requests as u64)
                        .map(|i| {
                            let key = (i * 7919 + thread as u64 * 104_729) % catalog.max(1);
                            let bytes = key.to_le_bytes();
                            FilterHash(xxhash_rust::xxh3::xxh3_128(&bytes))
                        })
                        .collect();
                    let start = Instant::now();
                    for &hash in &hashes {
                        tuning.observe(std::hint::black_box(hash), size);
                    }
                    start.elapsed().as_nanos()
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).sum()
    });
    let ended = tuning.estimator.load().rate();
    (rate, ended, nanos as f64 / (requests * threads) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimator(budget: ReplayBudget) -> Estimator {
        let settings = EstimatorConfig {
            rate: 1.0,
            replay_budget: Some(budget),
            ..EstimatorConfig::default()
        };
        let cache = CacheShape {
            max_size: 1 << 30,
            max_object_size: MaxObjectSize::Auto,
        };
        Estimator::new(
            &settings,
            &AdmissionConfig::default(),
            cache,
            Instant::now(),
        )
    }

    fn hash(i: u64) -> FilterHash {
        FilterHash(xxhash_rust::xxh3::xxh3_128(&i.to_le_bytes()))
    }

    #[test]
    fn the_rate_follows_the_observed_mean_object_size() {
        let mut config = Config::default();
        config.cache.max_size = 100 << 30;
        let start = Instant::now();
        let tuning = Tuning::new(&config, start);
        let rate = || tuning.estimator.load().rate();
        let assumed = rate();
        let rules = Rules {
            objective: secondhit_admission::settings::Optimize::Bytes,
            max_write_rate: None,
        };
        // Objects of 1 MiB, sixteen times the assumed mean: the rate is rebuilt higher, to
        // between one and two times what the size needs.
        for i in 0..200 {
            tuning.observe(hash(i), 1 << 20);
        }
        tuning.end_epoch(&config, start + Duration::from_secs(60), &rules);
        let needed = rate_for(&config, (1 << 20) as f64);
        assert!(rate() > 8.0 * assumed, "{} from {assumed}", rate());
        assert!(
            rate() >= needed && rate() <= 2.0 * needed,
            "{} for {needed}",
            rate()
        );
        // Objects of 1 KiB: far more fit the smallest miniature, so it samples fewer.
        let higher = rate();
        for i in 0..10_000 {
            tuning.observe(hash(1_000_000 + i), 1024);
        }
        tuning.end_epoch(&config, start + Duration::from_secs(120), &rules);
        let needed = rate_for(&config, 1024.0);
        assert!(rate() < higher / 8.0, "{} from {higher}", rate());
        assert!(rate() <= 2.0 * needed, "{} for {needed}", rate());
    }

    #[test]
    fn admission_estimate_budget_bounds_the_proxys_replays() {
        // A cache so small that every key is sampled at first.
        let mut config = Config::default();
        config.cache.max_size = 1 << 20;
        let start = Instant::now();
        let mut rate_after_replays = |budget| {
            config.admission.estimate_budget = budget;
            let tuning = Tuning::new(&config, start);
            assert_eq!(tuning.estimator.load().rate(), 1.0);
            for i in 0..100 {
                tuning.observe_at(hash(i), 1000, start);
            }
            tuning.estimator.load().rate()
        };
        assert_eq!(rate_after_replays(Duration::from_secs(1)), 1.0);
        assert_eq!(rate_after_replays(Duration::ZERO), LEAST_BUDGET_RATE);
    }

    #[test]
    fn the_replay_budget_counts_the_time_replays_take_and_lowers_the_rate_to_its_least() {
        let budget = |per_second| ReplayBudget {
            per_second,
            least_rate: 1.0 / 8.0,
        };
        let start = Instant::now();
        // 50 requests a second, each replay far under 2 ms: within 100 ms a second, every
        // key stays sampled.
        let light = estimator(budget(Duration::from_millis(100)));
        for i in 0..1_000 {
            light.observe(hash(i), 1000, start + Duration::from_millis(i * 20));
        }
        assert_eq!(light.rate(), 1.0);
        assert!(!light.capped());
        // 10,000 replays within one second of the clock: what counts is the time they
        // took, not how many they were. Under 100 s they are within the budget...
        let many = estimator(budget(Duration::from_secs(100)));
        for i in 0..10_000 {
            many.observe(hash(i), 1000, start);
        }
        assert_eq!(many.rate(), 1.0);
        assert!(!many.capped());
        // ... and every replay takes more than a nanosecond: the rate halves to 1/8 and
        // no further.
        let heavy = estimator(budget(Duration::from_nanos(1)));
        for i in 0..10_000 {
            heavy.observe(hash(i), 1000, start);
        }
        assert!((heavy.rate() - 1.0 / 8.0).abs() < 1e-9, "{}", heavy.rate());
        assert!(heavy.capped());
    }
}
