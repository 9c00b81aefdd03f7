//! A miniature of `second-hit`'s filter pair (`admission::AgingPair`): the same
//! generations, ended by the same causes, with exact sets of sampled keys in place of
//! Bloom filters.
//!
//! A key is seen if the current or the previous generation holds it; a key new to the
//! current one is copied into it and counted. A generation ends at `max_age` (at
//! `2 · max_age` both are forgotten, as after an idle gap) or at its target of new keys:
//! under `rotate = "fill"` the filter's `generation_size`, under `"auto"` the miniature
//! cache's objects times the keys per object the pair's own controller steers
//! ([`secondhit_admission::steer`], by the fills its admissions led to), clamped to
//! `[AUTO_FLOOR, generation_size]`, with the burst hold. Both bounds are multiplied by the
//! sampling rate, as the cache is: a miniature generation then spans as many requests as
//! the full one.
//!
//! Why exact sets: a Bloom filter of a few hundred keys is mostly rounding, and the pair's
//! background thread per filter would be one thread per miniature. What is lost is the
//! filters' false positives (about 1%, up to 2% before a rotation, of first sights
//! admitted), and the saturation test, which only guards against a wrong count.

use std::collections::HashSet;
use std::time::Duration;

use foldhash::quality::RandomState;

use secondhit_admission::settings::RotateMode;
use secondhit_admission::{AUTO_FLOOR, BURST_HOLD_SHARE, steer};

/// What sizes the generations: the pair's settings, scaled to the sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Generations {
    /// `admission.max_age`.
    pub max_age: Duration,
    /// `admission.rotate`.
    pub rotate: RotateMode,
    /// `admission.min_generation_age`.
    pub min_generation_age: Duration,
    /// The filter's `generation_size`, times the sampling rate (at least 1).
    pub largest: u64,
    /// [`AUTO_FLOOR`] times the sampling rate (at least 1, at most `largest`).
    pub floor: u64,
    /// The window: targets under `"auto"` are this many times the pair's (a candidate
    /// that remembers longer).
    pub window: u64,
}

impl Generations {
    /// The pair's sizing with `generation_size` keys per filter, for a sample of `rate`.
    pub(super) fn scaled(
        max_age: Duration,
        rotate: RotateMode,
        min_generation_age: Duration,
        generation_size: u64,
        rate: f64,
    ) -> Generations {
        let largest = ((generation_size as f64 * rate) as u64).max(1);
        Generations {
            max_age,
            rotate,
            min_generation_age,
            largest,
            floor: ((AUTO_FLOOR as f64 * rate) as u64).clamp(1, largest),
            window: 1,
        }
    }

    /// The same at half the rate.
    pub(super) fn halved(self) -> Generations {
        let largest = (self.largest / 2).max(1);
        Generations {
            largest,
            floor: (self.floor / 2).clamp(1, largest),
            ..self
        }
    }
}

/// The miniature pair: see the module docs.
pub(super) struct MiniFilter {
    sizing: Generations,
    current: HashSet<u64, RandomState>,
    previous: HashSet<u64, RandomState>,
    /// When the current generation began (time since the estimator's start).
    started: Duration,
    /// New keys it took.
    inserts: u64,
    /// Fills its admissions led to.
    fills: u64,
    /// Fills of the generations ended (the controller's warm-up).
    fills_ended: u64,
    /// Its target of new keys, and how long reaching it does not end it.
    target: u64,
    hold: Duration,
}

impl MiniFilter {
    /// An empty pair whose first generation starts at `now`.
    pub(super) fn new(sizing: Generations, now: Duration) -> MiniFilter {
        let target = match sizing.rotate {
            RotateMode::Fill => sizing.largest,
            RotateMode::Auto => sizing.floor,
        };
        MiniFilter {
            sizing,
            current: HashSet::default(),
            previous: HashSet::default(),
            started: now,
            inserts: 0,
            fills: 0,
            fills_ended: 0,
            target,
            hold: Duration::ZERO,
        }
    }

    /// Records `key` at `now` and says whether it was seen before; `objects` is what the
    /// cache holds when full, for a generation that ends now.
    pub(super) fn check_and_record(&mut self, key: u64, now: Duration, objects: u64) -> bool {
        let age = now.saturating_sub(self.started);
        if age >= self.sizing.max_age {
            self.rotate(now, objects, age >= self.sizing.max_age * 2);
        }
        if !self.current.insert(key) {
            return true;
        }
        self.inserts += 1;
        let seen = self.previous.contains(&key);
        let age = now.saturating_sub(self.started);
        if self.inserts >= self.target && (self.inserts >= self.sizing.largest || age >= self.hold)
        {
            self.rotate(now, objects, false);
        }
        seen
    }

    /// Counts a fill of a key this pair admitted as seen before.
    pub(super) fn note_fill(&mut self) {
        self.fills += 1;
    }

    /// Ends the current generation at `now`; `idle` forgets the previous one too.
    fn rotate(&mut self, now: Duration, objects: u64, idle: bool) {
        let length = now.saturating_sub(self.started);
        let sizing = self.sizing;
        self.fills_ended += self.fills;
        (self.target, self.hold) = match sizing.rotate {
            RotateMode::Fill => (sizing.largest, Duration::ZERO),
            RotateMode::Auto => {
                let sized = self.target as f64 / (objects.max(1) * sizing.window) as f64;
                let warm = self.fills_ended >= objects;
                let keys = steer(sized, self.inserts, self.fills, warm);
                let target = (objects as f64 * keys) as u64 * sizing.window;
                let hold = (length / BURST_HOLD_SHARE as u32).min(sizing.min_generation_age);
                (target.clamp(sizing.floor, sizing.largest), hold)
            }
        };
        std::mem::swap(&mut self.current, &mut self.previous);
        self.current.clear();
        if idle {
            self.previous.clear();
        }
        self.started = now;
        self.inserts = 0;
        self.fills = 0;
    }

    /// Forgets keys above `limit` and takes the sizing of the lower rate.
    pub(super) fn rescale(&mut self, limit: u64, sizing: Generations) {
        self.current.retain(|key| *key <= limit);
        self.previous.retain(|key| *key <= limit);
        self.target = (self.target / 2).max(1);
        self.sizing = sizing;
    }

    /// The sizing in use.
    pub(super) fn sizing(&self) -> Generations {
        self.sizing
    }

    /// Keys held in both generations.
    pub(super) fn keys(&self) -> u64 {
        (self.current.len() + self.previous.len()) as u64
    }

    /// Bytes allocated by both sets.
    pub(super) fn memory_bytes(&self) -> u64 {
        let bucket = (size_of::<u64>() + 1) as u64;
        (self.current.capacity() + self.previous.capacity()) as u64 * bucket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill_sized(largest: u64) -> Generations {
        Generations {
            max_age: Duration::from_secs(3600),
            rotate: RotateMode::Fill,
            min_generation_age: Duration::ZERO,
            largest,
            floor: 1,
            window: 1,
        }
    }

    #[test]
    fn a_key_is_seen_on_its_second_request_for_one_to_two_generations() {
        let mut filter = MiniFilter::new(fill_sized(3), Duration::ZERO);
        let at = Duration::from_secs(1);
        assert!(!filter.check_and_record(1, at, 0));
        assert!(filter.check_and_record(1, at, 0));
        // Keys 2 and 3 fill the generation: 1 is now in the previous one.
        assert!(!filter.check_and_record(2, at, 0));
        assert!(!filter.check_and_record(3, at, 0));
        assert!(
            filter.check_and_record(1, at, 0),
            "found in the previous generation"
        );
        // Copied into the current one, it survives the next rotation; 2 does not.
        for key in 10..13 {
            filter.check_and_record(key, at, 0);
        }
        assert!(filter.check_and_record(1, at, 0));
        assert!(!filter.check_and_record(2, at, 0));
    }

    #[test]
    fn max_age_ends_a_generation_and_twice_it_forgets_both() {
        let mut filter = MiniFilter::new(fill_sized(1_000), Duration::ZERO);
        assert!(!filter.check_and_record(1, Duration::ZERO, 0));
        let hour = Duration::from_secs(3600);
        assert!(filter.check_and_record(1, hour, 0), "previous generation");
        assert!(!filter.check_and_record(2, hour, 0));
        assert!(
            !filter.check_and_record(2, hour * 3, 0),
            "an idle gap forgets"
        );
    }

    #[test]
    fn auto_generations_follow_the_cache_and_scale_with_the_rate() {
        let sizing = Generations::scaled(
            Duration::from_secs(3600),
            RotateMode::Auto,
            Duration::ZERO,
            1_000_000,
            1.0 / 64.0,
        );
        assert_eq!((sizing.largest, sizing.floor), (15_625, 16));
        let mut filter = MiniFilter::new(sizing, Duration::ZERO);
        let at = Duration::from_secs(1);
        // Before the cache is warm a generation is twice its objects: 100 here.
        for key in 0..16 {
            filter.check_and_record(key, at, 50);
        }
        for key in 100..200 {
            filter.check_and_record(key, at, 50);
        }
        assert!(!filter.check_and_record(0, at, 50), "two generations ago");
        assert!(filter.check_and_record(150, at, 50));
        assert_eq!(sizing.halved().largest, 7_812);
    }
}
