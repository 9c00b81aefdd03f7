//! Online estimates of what each admission setting would miss and write, at the configured
//! cache size and around it, from the live traffic: miniature simulations over a spatially
//! hashed sample of the keys.
//!
//! # Why miniature simulations over a spatial sample
//! Which setting misses least depends on the traffic (`second-hit` wins where most reused
//! objects come back many times, `always` where they come back only a few times, soon) and
//! traffic drifts, so the answer has to come from the live requests, and cheaply. SHARDS
//! (Waldspurger et al., "Efficient MRC Construction with SHARDS", FAST 2015) samples keys,
//! not requests: a key is in the sample when its hash is at most a limit, so the sample
//! keeps every request of a share `R` of the keys, reuse distances shrink by `R`, and a
//! cache of `R` times the bytes sees what the full one sees. "Miniature simulations"
//! (Waldspurger et al., "Cache Modeling and Optimization using Miniature Simulations", ATC
//! 2017) replay that sample through scaled-down copies of any policy, not only LRU's stack
//! distances, which is what second-hit's filters and the store's S3-FIFO-like eviction
//! need. Replaying a random share of the requests instead would break every reuse; a
//! model of the workload (a fitted Zipf) would miss exactly the short-reuse classes this
//! is for.
//!
//! # What is simulated
//! Each [`Candidate`] at each size factor (by default ¼, ½, 1, 2 and 4 times
//! `cache.max_size`) is one `miniature::Miniature`: the store's eviction
//! (`mini_index`, checked hit for hit against the store's index) at `R` times the bytes,
//! and for candidates that keep filters `second-hit`'s generations (`mini_filter`), their
//! bounds also times `R`. The candidates: `second-hit` as configured and `always` (what
//! the proxy can run today), `second-hit` with twice the window, a quarter of first sights
//! stored, and `always` with half the cache on probation (the store's small queue is a
//! tenth; longer probation suits short reuse distances) — settings between the two
//! policies, to learn whether one would be worth offering.
//!
//! # Following the traffic
//! Counts are weighted by `1 / R` (so written bytes estimate the full cache's) and kept
//! per epoch: [`Estimator::end_epoch`] multiplies what was counted by `decay`, so an
//! estimate weighs the last epoch most and forgets an old one geometrically. The caller
//! sets the epoch's pace (the `auto` policy, on its timer).
//!
//! # Bounded memory and cost
//! The miniatures hold keys: cached objects, ghosts and filter generations. When they
//! hold more than `max_keys`, the rate halves (the fixed-size variant of SHARDS): keys
//! above the new limit are dropped from every miniature and each cache shrinks to the new
//! `R` times its size, so the memory stays near `max_keys` times some 50–100 bytes,
//! however many keys the traffic has. On the request path an unsampled request costs one atomic
//! load and a compare ([`Estimator::observe`]); a sampled one takes the estimator's lock
//! and replays the request through every miniature (a few hash lookups each).
//!
//! The limits of the scaling: a miniature holds `R` times the objects of the cache it
//! stands for, and below a few hundred objects its estimate is noisy, and one object
//! larger than the whole miniature is not stored at all (the rate to choose is the one
//! that keeps the smallest modelled size above that: `benches/RESULTS.md` has the error
//! measured against full simulations).

mod candidate;
pub mod choose;
mod estimate;
mod mini_filter;
mod mini_index;
mod miniature;
mod sampler;
mod totals;

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use secondhit_admission::FilterHash;
use secondhit_admission::settings::AdmissionConfig;
use secondhit_store::settings::MaxObjectSize;

pub use candidate::Candidate;
pub use estimate::{Curve, Estimate, Point};
use mini_filter::Generations;
use miniature::{Miniature, Scale};
use sampler::Sampler;
use totals::Totals;

/// How an estimator samples and what it models.
#[derive(Clone, Debug, PartialEq)]
pub struct EstimatorConfig {
    /// The share of keys sampled at the start, in (0, 1].
    pub rate: f64,
    /// The most keys the miniatures hold together before the rate halves.
    pub max_keys: u64,
    /// The weight what was counted keeps at each [`Estimator::end_epoch`], in [0, 1].
    pub decay: f64,
    /// The candidates modelled.
    pub candidates: Vec<Candidate>,
    /// The cache sizes modelled, as multiples of `cache.max_size`.
    pub size_factors: Vec<f64>,
    /// Bytes an entry takes beside its body (its header and metadata).
    pub entry_overhead: u64,
    /// A bound on the replays' CPU, if any: see [`ReplayBudget`].
    pub replay_budget: Option<ReplayBudget>,
}

/// A bound on the CPU the replays take on the request path: when the replays within a
/// second (of the clock [`Estimator::observe`] is given) took more than `per_second` of
/// time, measured around each replay, the rate halves, but never below `least_rate`, where
/// a request costs little whatever the traffic; a rate above it costs only while the
/// traffic is light. Time, not a count of replays: what one costs depends on the CPU, the
/// miniatures' size and what else the CPU's caches hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplayBudget {
    /// Time the replays may take in a second before the rate halves.
    pub per_second: Duration,
    /// The rate the budget lowers no further.
    pub least_rate: f64,
}

impl Default for EstimatorConfig {
    /// One key in 64; at most 262,144 keys (about 16 MiB); each epoch halves the weight of
    /// the ones before; every `Candidate::DEFAULT` at ¼ to 4 times the size; 2.5 KiB per
    /// entry (the store's typical header and metadata).
    fn default() -> Self {
        EstimatorConfig {
            rate: 1.0 / 64.0,
            max_keys: 1 << 18,
            decay: 0.5,
            candidates: Candidate::DEFAULT.to_vec(),
            size_factors: vec![0.25, 0.5, 1.0, 2.0, 4.0],
            entry_overhead: 512 + 2 * 1024,
            replay_budget: None,
        }
    }
}

/// The cache the estimates are for.
#[derive(Clone, Copy, Debug)]
pub struct CacheShape {
    /// `cache.max_size`.
    pub max_size: u64,
    /// `cache.max_object_size`, resolved per modelled size.
    pub max_object_size: MaxObjectSize,
}

/// Miniature simulations of every candidate at every size over a sample of the requests:
/// see the module docs. Shared by every worker (`Send + Sync`).
pub struct Estimator {
    sampler: Sampler,
    /// Every request, sampled or not (SHARDS' adjustment).
    totals: Totals,
    max_keys: u64,
    replay_budget: Option<ReplayBudget>,
    decay: f64,
    cache_bytes: u64,
    started: Instant,
    state: Mutex<State>,
}

/// What the lock guards.
struct State {
    scale: Scale,
    miniatures: Vec<Miniature>,
    /// Requests and bytes of the past epochs, decayed as the miniatures' counts are.
    past_totals: (f64, f64),
    /// Whether the key or replay budget has lowered the rate (a higher one would not fit).
    capped: bool,
    /// The second the replay budget counts in, and the time its replays took.
    replays: (Duration, Duration),
}

impl Estimator {
    /// An estimator for a cache of `cache`, with `second-hit` sized by `admission`; its
    /// clock starts at `now`.
    pub fn new(
        config: &EstimatorConfig,
        admission: &AdmissionConfig,
        cache: CacheShape,
        now: Instant,
    ) -> Estimator {
        let sampler = Sampler::new(config.rate);
        let filter = secondhit_admission::sizing(admission);
        let scale = Scale {
            rate: sampler.rate(),
            entry_overhead: config.entry_overhead,
            generations: Generations::scaled(
                admission.max_age,
                admission.rotate,
                admission.min_generation_age,
                filter.generation_size,
                sampler.rate(),
            ),
        };
        let miniatures = config
            .candidates
            .iter()
            .flat_map(|&candidate| {
                config.size_factors.iter().map(move |&factor| {
                    let full = (cache.max_size as f64 * factor) as u64;
                    let limit = cache.max_object_size.resolve(full);
                    Miniature::new(candidate, factor, full, limit, &scale, Duration::ZERO)
                })
            })
            .collect();
        Estimator {
            sampler,
            totals: Totals::new(),
            max_keys: config.max_keys,
            replay_budget: config.replay_budget,
            decay: config.decay.clamp(0.0, 1.0),
            cache_bytes: cache.max_size,
            started: now,
            state: Mutex::new(State {
                scale,
                miniatures,
                past_totals: (0.0, 0.0),
                capped: false,
                replays: (Duration::ZERO, Duration::ZERO),
            }),
        }
    }

    /// A request at `now` for a storable object with a body of `size` bytes (a hit, or a
    /// miss whose response the cache may store), under the filter hash of its key. Costs
    /// two additions to this thread's counters, a load and a compare unless the key is
    /// sampled.
    /// The proxy calls [`Estimator::observe_now`], which reads the clock only for a
    /// sampled key; this is the simulator's and the tests' form, on a clock of their own.
    #[inline]
    pub fn observe(&self, hash: FilterHash, size: u64, now: Instant) {
        self.totals.add(size);
        if let Some(key) = self.sampler.sample(hash) {
            self.replay(key, size, now);
        }
    }

    /// [`Estimator::observe`] on the clock of tokio's runtime (paused in tests), read only
    /// when the key is sampled: the request path's call.
    #[inline]
    pub fn observe_now(&self, hash: FilterHash, size: u64) {
        self.totals.add(size);
        if let Some(key) = self.sampler.sample(hash) {
            self.replay(key, size, tokio::time::Instant::now().into_std());
        }
    }

    /// Replays a sampled request through every miniature, and lowers the rate if the
    /// miniatures hold too many keys or the replays take more than their budget.
    fn replay(&self, key: u64, size: u64, now: Instant) {
        let at = now.saturating_duration_since(self.started);
        let mut state = self.lock();
        // The rate may have dropped between the sample and the lock.
        if !self.sampler.keeps(key) {
            return;
        }
        // The budget's clock is the machine's, whatever clock `now` is read from; read
        // only under a budget (the simulator has none).
        let started = self.replay_budget.map(|_| Instant::now());
        let State {
            scale, miniatures, ..
        } = &mut *state;
        for miniature in miniatures.iter_mut() {
            miniature.request(key, size, at, scale);
        }
        let took = started.map_or(Duration::ZERO, |started| started.elapsed());
        if state.keys() > self.max_keys || self.over_replay_budget(&mut state, at, took) {
            state.capped = true;
            self.lower_rate(&mut state);
        }
    }

    /// Counts a replay at `at` that `took` this long against the replay budget; true when
    /// the second's replays took more than it and halving the rate keeps it at or above
    /// the budget's least rate.
    fn over_replay_budget(&self, state: &mut State, at: Duration, took: Duration) -> bool {
        let Some(budget) = self.replay_budget else {
            return false;
        };
        let (since, spent) = &mut state.replays;
        if at.saturating_sub(*since) >= Duration::from_secs(1) {
            (*since, *spent) = (at, Duration::ZERO);
        }
        *spent += took;
        if *spent <= budget.per_second || self.sampler.rate() / 2.0 < budget.least_rate {
            return false;
        }
        *spent = Duration::ZERO;
        true
    }

    /// Halves the sampling rate and rescales every miniature to it.
    fn lower_rate(&self, state: &mut State) {
        let Some(limit) = self.sampler.halve() else {
            return;
        };
        state.scale.rate = self.sampler.rate();
        state.scale.generations = state.scale.generations.halved();
        let State {
            scale, miniatures, ..
        } = state;
        for miniature in miniatures.iter_mut() {
            miniature.rescale(limit, scale);
        }
        tracing::debug!(rate = scale.rate, "miniature simulations sample fewer keys");
    }

    /// Halves the rate while it is above twice `target` (which it then still covers).
    pub fn lower_rate_toward(&self, target: f64) {
        let mut state = self.lock();
        while self.sampler.rate() > 2.0 * target {
            let before = self.sampler.rate();
            self.lower_rate(&mut state);
            if self.sampler.rate() >= before {
                return;
            }
        }
    }

    /// Whether the key or replay budget has lowered the rate.
    pub fn capped(&self) -> bool {
        self.lock().capped
    }

    /// The mean body size of the requests counted (decayed), if any.
    pub fn mean_size(&self) -> Option<f64> {
        let state = self.lock();
        let (requests, bytes) = self.totals.read();
        let (requests, bytes) = (state.past_totals.0 + requests, state.past_totals.1 + bytes);
        (requests > 0.0).then(|| bytes / requests)
    }

    /// The weight the past keeps at each epoch's end.
    pub fn decay(&self) -> f64 {
        self.decay
    }

    /// Ends an epoch: what was counted so far keeps the configured `decay` of its weight.
    pub fn end_epoch(&self) {
        let mut state = self.lock();
        for miniature in state.miniatures.iter_mut() {
            miniature.end_epoch(self.decay);
        }
        let (requests, bytes) = self.totals.take();
        let (past_requests, past_bytes) = state.past_totals;
        state.past_totals = (
            past_requests * self.decay + requests,
            past_bytes * self.decay + bytes,
        );
    }

    /// The estimate now: each candidate's curve over the modelled sizes.
    pub fn estimate(&self) -> Estimate {
        let state = self.lock();
        let (requests, bytes) = self.totals.read();
        let totals = (state.past_totals.0 + requests, state.past_totals.1 + bytes);
        let mut curves: Vec<Curve> = Vec::new();
        for miniature in &state.miniatures {
            let candidate = miniature.candidate();
            let point = Point::new(
                miniature.factor(),
                miniature.full_bytes(),
                miniature.counts(),
                totals,
            );
            match curves.last_mut() {
                Some(curve) if curve.candidate == candidate => curve.points.push(point),
                _ => curves.push(Curve {
                    candidate,
                    points: vec![point],
                }),
            }
        }
        Estimate {
            rate: state.scale.rate,
            cache_bytes: self.cache_bytes,
            memory_bytes: state.memory_bytes(),
            curves,
        }
    }

    /// The share of keys sampled now.
    pub fn rate(&self) -> f64 {
        self.sampler.rate()
    }

    /// Keys the miniatures hold together (what `EstimatorConfig::max_keys` bounds).
    pub fn keys_held(&self) -> u64 {
        self.lock().keys()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic half-way through a replay leaves counts a request off, nothing worse.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Keys held by all miniatures.
    fn keys(&self) -> u64 {
        self.miniatures.iter().map(Miniature::keys).sum()
    }

    /// Bytes held by all miniatures.
    fn memory_bytes(&self) -> u64 {
        self.miniatures.iter().map(Miniature::memory_bytes).sum()
    }
}
