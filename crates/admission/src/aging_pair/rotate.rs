//! How the pair rotates: when a generation ends (by age, idle gap, fill or saturation; the
//! fill and saturation tests are on the request path in `check_and_record_nanos`), the
//! target of the next one (under `rotate = "auto"` steered as `auto` says), and the
//! lock-free rotation itself (see the module docs of `aging_pair` for why it is safe).

use std::sync::atomic::Ordering;

use super::history::Record;
use super::slots::Slot;
use super::slots::{FilterState, State};
use super::{
    AUTO_KEYS_PER_OBJECT, BURST_HOLD_SHARE, Cause, Rotation, Shared, auto_floor, duration, nanos_of,
};

impl Shared {
    /// `Idle` at `2 · max_age` or more, `Age` at `max_age` or more, else none.
    pub(super) fn age_cause(&self, age: i64) -> Option<Cause> {
        // Negative (a clock reading from before the generation began) counts as zero.
        let age = age.max(0);
        if age >= self.max_age_nanos.saturating_mul(2) {
            Some(Cause::Idle)
        } else if age >= self.max_age_nanos {
            Some(Cause::Age)
        } else {
            None
        }
    }

    /// The target of new keys for a generation starting now; `ended` is the generation that
    /// ends with it (`None` at construction and restore), by which `rotate = "auto"` steers
    /// (see `auto`).
    pub(super) fn next_target(&self, ended: Option<u64>) -> u64 {
        let largest = self.params.generation_size;
        match &self.rotation {
            Rotation::Fill => largest,
            Rotation::Auto { objects, .. } => {
                let objects = objects();
                let keys_per_object = match ended {
                    Some(ended) => self.steer_after(ended, objects),
                    None => AUTO_KEYS_PER_OBJECT as f64,
                };
                // The cast saturates; at 2 keys per object it is exactly `2 * objects`.
                ((objects as f64 * keys_per_object) as u64).clamp(auto_floor(largest), largest)
            }
        }
    }

    /// The hold of a generation starting `now` after generation `ended` (see
    /// [`super::BURST_HOLD_SHARE`]): the age before which reaching its target does not end it.
    fn next_hold(&self, ended: u64, now: i64) -> i64 {
        let Rotation::Auto {
            min_generation_age, ..
        } = &self.rotation
        else {
            return 0; // `fill`'s target is already the most a generation takes
        };
        let Some((start, _)) = self.slot(ended).ready_for(ended) else {
            return 0; // the ended generation's slot is gone: nothing to measure a burst by
        };
        ((now - start).max(0) / BURST_HOLD_SHARE).min(nanos_of(*min_generation_age))
    }

    /// Whether a generation in `slot` that has counted `inserts` new keys, at least its
    /// target, and is `age` old ends now: at once, unless a burst hold keeps it open, and
    /// always at `generation_size` keys, so that its false-positive rate stays bounded.
    pub(super) fn fill_may_end(&self, slot: &Slot, inserts: u64, age: i64) -> bool {
        inserts >= self.params.generation_size || age >= slot.hold.load(Ordering::Relaxed)
    }

    /// Installs `state` directly (construction and restore only: no check runs yet), its
    /// generation starting at `start` with `inserts` counted.
    pub(super) fn begin(&self, state: State, start: i64, inserts: u64) {
        self.slot(state.number)
            .fill(state.number, start, self.next_target(None), inserts);
        for (i, filter_state) in self.filter_states.iter().enumerate() {
            if i == state.current || state.previous == Some(i) {
                filter_state.store(FilterState::InUse as u8, Ordering::Release);
            }
        }
        self.state.store(state.pack(), Ordering::Release);
    }

    /// Rotates the pair if generation `seen` is still live. Lock-free: when several threads
    /// try at once, one compare-and-swap wins and the others change nothing.
    pub(super) fn rotate(&self, seen: State, cause: Cause, now: i64) {
        if self.state.load(Ordering::Acquire) != seen.pack() {
            return;
        }
        let next = seen.number + 1;
        if !self.slot(next).claim_and_fill(next, now, || {
            let target = self.next_target(Some(seen.number));
            (target, self.next_hold(seen.number, now))
        }) {
            return; // a newer generation already uses the slot: `seen` is long gone
        }
        let Some(spare) = self.clean_spare(seen) else {
            return; // the pair rotated meanwhile
        };
        let state = State {
            number: next,
            current: spare,
            previous: (cause != Cause::Idle).then_some(seen.current),
        };
        let swapped = self.state.compare_exchange(
            seen.pack(),
            state.pack(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if swapped.is_err() {
            return;
        }
        self.filter_states[spare].store(FilterState::InUse as u8, Ordering::Release);
        let retired = [
            seen.previous,
            (cause == Cause::Idle).then_some(seen.current),
        ];
        for filter in retired.into_iter().flatten() {
            self.retired_at[filter].store(now, Ordering::Relaxed);
            self.filter_states[filter].store(FilterState::Retired as u8, Ordering::Release);
        }
        self.rotations[cause as usize].fetch_add(1, Ordering::Relaxed);
        self.last_cause.store(cause as u8 + 1, Ordering::Relaxed);
        let old = self.slot(seen.number);
        let ended_inserts = old.inserts.load(Ordering::Relaxed);
        let ended_nanos = now - old.start.load(Ordering::Relaxed);
        self.history.push(Record {
            generation: next,
            cause,
            at: now,
            ended_inserts,
            ended_nanos,
        });
        tracing::debug!(
            cause = cause.as_str(),
            generation = next,
            inserts = ended_inserts,
            age_secs = duration(ended_nanos).as_secs_f64(),
            next_target = self.slot(next).target.load(Ordering::Relaxed),
            "admission filters rotated"
        );
    }
}
