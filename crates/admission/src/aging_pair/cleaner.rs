//! The background thread of a pair: it clears retired filters and ticks a coarse clock.
//!
//! Clearing a filter costs `O(m)` stores — milliseconds for a large one — far too long for a
//! request. So a rotation only marks the filter it drops as retired, and this thread clears
//! it [`GRACE`] later (checks that loaded the old generation just before the rotation finish
//! long before that; one that was preempted for longer may see the filter cleared, which the
//! pair's guarantee allows: it only covers checks that end before the second rotation after
//! the record).
//!
//! The same thread ticks a clock every [`TICK`]: `Instant::now()` costs a good part of a
//! whole check (`benches/RESULTS.md`, "the coarse clock"), and the pair needs the time on
//! every check only to notice `max_age`, which a few milliseconds of slack do not change.
//! Reading the clock is one relaxed load; it is behind the real time by at most about a
//! tick (more if the machine starves the thread), never ahead. Relaxed is enough: the value
//! publishes nothing else.
//!
//! The thread holds only a `Weak` reference and ends at the first tick after the pair is
//! dropped. The clearing steps themselves (a compare-and-swap from retired to clearing, so
//! only one thread clears a filter) are here too: a rotation that finds its spare not yet
//! cleared — rotations faster than the grace period — uses them to clear it itself.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::Shared;
use super::slots::{FilterState, State};
use super::{nanos_of, nanos_since};

/// How often the thread wakes: the clock's resolution, and how soon a retired filter is
/// looked at.
pub(super) const TICK: Duration = Duration::from_millis(5);

/// How long a retired filter is left alone before it is cleared.
pub(super) const GRACE: Duration = Duration::from_millis(20);

/// A clock that costs one relaxed load to read: nanoseconds since the pair's epoch, the
/// unit the pair keeps its times in, so a check converts nothing.
pub(super) struct CoarseClock {
    /// Time zero of the pair.
    epoch: Instant,
    /// Nanoseconds since `epoch` at the last tick.
    nanos: AtomicI64,
    /// False when the thread could not be started: then [`CoarseClock::nanos`] reads the
    /// system clock.
    ticking: bool,
}

impl CoarseClock {
    /// The time in nanoseconds since the pair's epoch: the last tick, or the system clock
    /// without a ticking thread.
    pub(super) fn nanos(&self) -> i64 {
        if !self.ticking {
            return nanos_since(self.epoch, Instant::now());
        }
        self.nanos.load(Ordering::Relaxed)
    }

    fn tick(&self) {
        self.nanos
            .store(nanos_since(self.epoch, Instant::now()), Ordering::Relaxed);
    }
}

/// Starts the thread for `shared` and returns the clock it ticks (a system-clock one if the
/// thread cannot be started; retired filters are then cleared by the rotations that reuse
/// them).
pub(super) fn start(shared: &Arc<Shared>) -> Arc<CoarseClock> {
    let epoch = shared.epoch;
    let ticked = Arc::new(CoarseClock {
        epoch,
        nanos: AtomicI64::new(nanos_since(epoch, Instant::now())),
        ticking: true,
    });
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let clock = ticked.clone();
    let started = thread::Builder::new()
        .name("secondhit-filter-cleaner".to_owned())
        .spawn(move || run(&weak, &clock));
    match started {
        Ok(_) => ticked,
        Err(error) => {
            tracing::warn!(%error, "cannot start the filter cleaner thread; rotations will clear filters themselves");
            Arc::new(CoarseClock {
                epoch,
                nanos: AtomicI64::new(0),
                ticking: false,
            })
        }
    }
}

/// The thread's loop: tick, clear what has been retired for [`GRACE`], sleep.
fn run(shared: &Weak<Shared>, clock: &CoarseClock) {
    loop {
        clock.tick();
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.clear_retired(clock.nanos());
        drop(shared);
        thread::sleep(TICK);
    }
}

impl Shared {
    /// A filter that is neither current nor previous in `seen`, cleared — by the cleaner
    /// thread already, or here if it has not got to it yet. `None` if another rotation has
    /// taken it meanwhile.
    pub(super) fn clean_spare(&self, seen: State) -> Option<usize> {
        let candidates = (0..3).filter(|&i| i != seen.current && seen.previous != Some(i));
        // Prefer one the cleaner has finished.
        let spare = candidates
            .clone()
            .find(|&i| self.filter_state(i) == FilterState::Clean)
            .or_else(|| candidates.clone().next())?;
        loop {
            match self.filter_state(spare) {
                FilterState::Clean => return Some(spare),
                FilterState::Retired => {
                    self.clear_if_retired(spare);
                }
                // Another thread is clearing it: it finishes in O(m).
                FilterState::Clearing => std::thread::yield_now(),
                FilterState::InUse => return None,
            }
        }
    }

    pub(super) fn filter_state(&self, filter: usize) -> FilterState {
        FilterState::from(self.filter_states[filter].load(Ordering::Acquire))
    }

    /// Clears `filter` if it is retired and nobody else is clearing it.
    fn clear_if_retired(&self, filter: usize) {
        let claimed = self.filter_states[filter].compare_exchange(
            FilterState::Retired as u8,
            FilterState::Clearing as u8,
            Ordering::Acquire,
            Ordering::Relaxed,
        );
        if claimed.is_ok() {
            self.filters[filter].clear();
            self.filter_states[filter].store(FilterState::Clean as u8, Ordering::Release);
        }
    }

    /// The cleaner thread's work: clears the filters retired at least [`GRACE`] ago.
    pub(super) fn clear_retired(&self, now: i64) {
        let grace = nanos_of(GRACE);
        for filter in 0..3 {
            if self.filter_state(filter) == FilterState::Retired
                && now - self.retired_at[filter].load(Ordering::Relaxed) >= grace
            {
                self.clear_if_retired(filter);
            }
        }
    }
}
