//! The background thread of a pair: it clears retired filters and ticks a coarse clock.
//!
//! Clearing a filter costs `O(m)` stores — milliseconds for a large one — far too long for a
//! request. So a rotation only marks the filter it drops as retired, and this thread clears
//! it [`GRACE`] later (checks that loaded the old generation just before the rotation finish
//! long before that; one that was preempted for longer may see the filter cleared, which the
//! pair's guarantee allows: it only covers checks that end before the second rotation after
//! the record).
//!
//! The same thread ticks a clock every [`TICK`]: `Instant::now()` costs about 25 ns here, a
//! good part of a whole check, and the pair needs the time on every check only to notice
//! `max_age`, which a few milliseconds of slack do not change. Reading the clock is one
//! relaxed load; it is behind the real time by at most about a tick (more if the machine
//! starves the thread), never ahead. Relaxed is enough: the value publishes nothing else.
//!
//! The thread holds only a `Weak` reference and ends at the first tick after the pair is
//! dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::Shared;

/// How often the thread wakes: the clock's resolution, and how soon a retired filter is
/// looked at.
pub(super) const TICK: Duration = Duration::from_millis(5);

/// How long a retired filter is left alone before it is cleared.
pub(super) const GRACE: Duration = Duration::from_millis(20);

/// A clock that costs one relaxed load to read.
pub(super) struct CoarseClock {
    /// Time zero of the pair.
    epoch: Instant,
    /// Nanoseconds since `epoch` at the last tick.
    nanos: AtomicU64,
    /// False when the thread could not be started: then [`CoarseClock::now`] reads the
    /// system clock.
    ticking: bool,
}

impl CoarseClock {
    /// The time: the last tick, or `Instant::now()` without a ticking thread.
    pub(super) fn now(&self) -> Instant {
        if !self.ticking {
            return Instant::now();
        }
        self.epoch + Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }

    fn tick(&self) {
        let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.store(nanos, Ordering::Relaxed);
    }
}

/// Starts the thread for `shared` and returns the clock it ticks (a system-clock one if the
/// thread cannot be started; retired filters are then cleared by the rotations that reuse
/// them).
pub(super) fn start(shared: &Arc<Shared>) -> Arc<CoarseClock> {
    let epoch = Instant::now();
    let ticked = Arc::new(CoarseClock {
        epoch,
        nanos: AtomicU64::new(0),
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
                nanos: AtomicU64::new(0),
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
        shared.clear_retired(clock.now());
        drop(shared);
        thread::sleep(TICK);
    }
}
