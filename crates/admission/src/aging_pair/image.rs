//! Copies of the pair for snapshots, and restoring one at start-up (see `persist`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::slots::{FilterState, State};
use super::{AgingPair, Cause, duration, nanos_of};

/// A copy of the pair's state, for snapshots (see `persist`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PairImage {
    /// The live generation's number.
    pub generation: u64,
    /// The current filter.
    pub current: FilterImage,
    /// The previous filter, if any.
    pub previous: Option<FilterImage>,
}

/// One filter of a [`PairImage`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FilterImage {
    /// The bit array, as [`BloomFilter::words`] gives it.
    pub words: Vec<u64>,
    /// New keys its generation took.
    pub inserts: u64,
    /// How long ago its generation began.
    pub age: Duration,
}

impl AgingPair {
    /// A copy of both filters and their counts (`O(m)`; runs beside checks, which carry on:
    /// every key recorded before the copy began is in it). Retried if the pair rotated during
    /// the copy, so the copy is of one generation.
    pub(crate) fn image_at(&self, now: Instant) -> PairImage {
        let shared = &*self.shared;
        let now = shared.nanos(now);
        loop {
            let state = shared.state();
            let image_of = |filter: usize, number: u64| {
                let slot = shared.slot(number);
                FilterImage {
                    words: shared.filters[filter].words().collect(),
                    inserts: slot.inserts.load(Ordering::Relaxed),
                    age: duration(now - slot.start.load(Ordering::Relaxed)),
                }
            };
            let image = PairImage {
                generation: state.number,
                current: image_of(state.current, state.number),
                previous: state
                    .previous
                    .map(|p| image_of(p, state.number.wrapping_sub(1))),
            };
            if shared.state().number == state.number {
                return image;
            }
        }
    }

    /// Replaces the pair's state with `image` (from a snapshot of a pair with the same
    /// params), aged as if no request had come since it was taken: a current generation older
    /// than `max_age` rotates (counted as `age`), one older than `2 · max_age` is forgotten
    /// with its predecessor (counted as `idle`). For start-up, before any check: returns
    /// false, changing nothing, if the image's arrays do not fit these params.
    pub(crate) fn restore_at(&self, image: PairImage, now: Instant) -> bool {
        let shared = &*self.shared;
        let words = shared.params.bits / 64;
        let fits = |f: &FilterImage| f.words.len() as u64 == words;
        // The state word holds 60 bits of generation number; generation 0 has no previous.
        let absurd =
            image.generation >= 1 << 59 || (image.generation == 0 && image.previous.is_some());
        if absurd || !fits(&image.current) || image.previous.as_ref().is_some_and(|p| !fits(p)) {
            return false;
        }
        let now = shared.nanos(now);
        for (filter, state) in shared.filters.iter().zip(&shared.filter_states) {
            filter.clear();
            state.store(FilterState::Clean as u8, Ordering::Release);
        }
        for slot in &shared.slots {
            slot.reset();
        }
        let start_of = |f: &FilterImage| now - nanos_of(f.age);
        let cause = shared.age_cause(nanos_of(image.current.age));
        // Filter 0 becomes current, filter 1 previous; filter 2 is the spare.
        let (state, loaded) = match cause {
            None => {
                shared.filters[0].store_words(&image.current.words);
                let previous = image.previous.as_ref().map(|p| {
                    shared.filters[1].store_words(&p.words);
                    let number = image.generation.wrapping_sub(1);
                    let target = shared.params.generation_size;
                    shared
                        .slot(number)
                        .fill(number, start_of(p), target, p.inserts);
                    1
                });
                let state = State {
                    number: image.generation,
                    current: 0,
                    previous,
                };
                (
                    state,
                    Some((start_of(&image.current), image.current.inserts)),
                )
            }
            Some(cause) => {
                shared.rotations[cause as usize].fetch_add(1, Ordering::Relaxed);
                let previous = (cause != Cause::Idle).then(|| {
                    shared.filters[1].store_words(&image.current.words);
                    let (number, target) = (image.generation, shared.params.generation_size);
                    let start = start_of(&image.current);
                    shared
                        .slot(number)
                        .fill(number, start, target, image.current.inserts);
                    1
                });
                let state = State {
                    number: image.generation + 1,
                    current: 0,
                    previous,
                };
                (state, None)
            }
        };
        let (start, inserts) = loaded.unwrap_or((now, 0));
        shared.begin(state, start, inserts);
        true
    }
}
