//! `auto` in the simulator: the proxy's [`Auto`] switch over the filter pair, the proxy's
//! estimates ([`Tuning`]) fed the requests the proxy feeds them, and its epochs ended on
//! the trace's clock every `admission.auto_epoch`, each choosing by `tuning::choose` as
//! the proxy's epoch task does. Nothing of the choice is simulated apart: the same calls,
//! on simulated time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::simulate::SimCache;
use secondhit_admission::{Auto, AutoMode, FilterHash, ObjectCount, Policy};
use secondhit_proxy::config::{AdmissionConfig, Config};
use secondhit_proxy::tuning::{Tuning, mode_of};
use secondhit_tuning::choose::Rules;

/// Epochs ended one by one across a gap in the trace; past them the estimates have
/// decayed to nothing (each epoch halves them), so the rest of the gap is skipped.
pub(super) const MOST_IDLE_EPOCHS: u32 = 64;

/// What `auto` did over a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct AutoRun {
    /// Epochs ended (skipped ones of a long gap not counted).
    pub epochs: u64,
    /// Switches between `second-hit` and `always`.
    pub switches: u64,
    /// Requests that arrived while it ran `always`.
    pub requests_as_always: u64,
}

/// The switch, the estimates and the epochs' clock of one replay of `auto`.
pub(super) struct AutoDriver {
    auto: Arc<Auto>,
    tuning: Tuning,
    config: Config,
    rules: Rules,
    every: Duration,
    /// When the next epoch ends, since the replay's start.
    next: Duration,
    started: Instant,
    run: AutoRun,
}

impl AutoDriver {
    /// `auto` sized by `admission` over a cache of `cache`, its filters counting `objects`
    /// for `rotate = "auto"`; its clock starts at `started`.
    pub(super) fn new(
        admission: &AdmissionConfig,
        cache: SimCache,
        objects: ObjectCount,
        started: Instant,
    ) -> (Policy, AutoDriver) {
        let (policy, auto) = secondhit_admission::auto_counting(admission, objects);
        let mut config = Config {
            admission: admission.clone(),
            ..Config::default()
        };
        config.cache.max_size = cache.max_size;
        config.cache.max_object_size = cache.max_object_size;
        let every = admission.auto_epoch.max(Duration::from_millis(1));
        let driver = AutoDriver {
            auto,
            tuning: Tuning::new(&config, started),
            rules: Rules {
                objective: admission.optimize,
                max_write_rate: admission.max_write_rate,
            },
            config,
            every,
            next: every,
            started,
            run: AutoRun::default(),
        };
        (policy, driver)
    }

    /// Ends the epochs due by `at` (since the replay's start), each applying its choice,
    /// before a request at `at` is handled; and counts the request under the mode then.
    pub(super) fn before_request(&mut self, at: Duration) {
        let mut ended = 0;
        while at >= self.next {
            if ended == MOST_IDLE_EPOCHS {
                let behind = (at - self.next).as_secs_f64() / self.every.as_secs_f64();
                let skipped = self.every.as_secs_f64() * (behind.floor() + 1.0);
                self.next += Duration::from_secs_f64(skipped);
                break;
            }
            self.end_epoch(self.started + self.next);
            self.next += self.every;
            ended += 1;
        }
        if self.auto.mode() == AutoMode::Always {
            self.run.requests_as_always += 1;
        }
    }

    /// As the proxy's epoch task: end the estimates' epoch, run what they choose.
    fn end_epoch(&mut self, now: Instant) {
        let ended = self.tuning.end_epoch(&self.config, now, &self.rules);
        self.auto.set_mode(mode_of(ended.current));
        self.run.epochs += 1;
        if ended.verdict.switched() {
            self.run.switches += 1;
        }
    }

    /// A request the proxy's estimates see (a hit, or a miss it may store) of `size`
    /// bytes under `hash`, at `now`.
    pub(super) fn observe(&self, hash: FilterHash, size: u64, now: Instant) {
        self.tuning.observe_at(hash, size, now);
    }

    /// What it did.
    pub(super) fn run(&self) -> AutoRun {
        self.run
    }
}
