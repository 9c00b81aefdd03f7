//! What the pair reports about itself: fill, estimates, rotation counters and the recent
//! rotations ([`PairStats`]), read for metrics and the admin page, never on the request
//! path.

use std::sync::atomic::Ordering;
#[cfg(test)]
use std::time::Instant;

use super::slots::{FilterState, Slot};
use super::{AgingPair, Cause, duration};
use crate::stats::{FilterStats, PairStats, RecentRotation, RotationCounts, SpareState};

impl AgingPair {
    /// Fill, estimates and rotation counters (counts bits, so `O(m/64)`).
    #[cfg(test)]
    pub fn stats_at(&self, now: Instant) -> PairStats {
        self.stats_nanos(self.shared.nanos(now))
    }

    /// [`AgingPair::stats_at`] at `now` nanoseconds from the pair's epoch.
    pub(super) fn stats_nanos(&self, now: i64) -> PairStats {
        let shared = &*self.shared;
        let state = shared.state();
        let slot = shared.slot(state.number);
        let of = |filter: usize, slot: &Slot| {
            let age = slot.start.load(Ordering::Relaxed);
            FilterStats::of(
                &shared.filters[filter],
                slot.inserts.load(Ordering::Relaxed),
                duration(now - age),
            )
        };
        let previous = state
            .previous
            .map(|p| of(p, shared.slot(state.number.wrapping_sub(1))));
        let count = |cause: Cause| shared.rotations[cause as usize].load(Ordering::Relaxed);
        let spares = (0..shared.filters.len())
            .filter(|&i| i != state.current && state.previous != Some(i))
            .map(
                |i| match FilterState::from(shared.filter_states[i].load(Ordering::Relaxed)) {
                    // `InUse` here is a filter a rotation is retiring this instant.
                    FilterState::InUse | FilterState::Retired => SpareState::Retired,
                    FilterState::Clearing => SpareState::Clearing,
                    FilterState::Clean => SpareState::Clean,
                },
            )
            .collect();
        let recent_rotations = shared
            .history
            .recent()
            .into_iter()
            .map(|record| RecentRotation {
                generation: record.generation,
                cause: record.cause,
                ago: duration(now - record.at),
                ended_inserts: record.ended_inserts,
                ended_age: duration(record.ended_nanos),
            })
            .collect();
        let stats = PairStats::new(
            shared.params,
            state.number,
            slot.target.load(Ordering::Relaxed),
            of(state.current, slot),
            previous,
            RotationCounts {
                fill: count(Cause::Fill),
                age: count(Cause::Age),
                saturation: count(Cause::Saturation),
                idle: count(Cause::Idle),
                forced: count(Cause::Forced),
            },
            Cause::ALL
                .get(usize::from(shared.last_cause.load(Ordering::Relaxed)).wrapping_sub(1))
                .copied(),
        );
        PairStats {
            spares,
            recent_rotations,
            ..stats
        }
    }
}
