//! Spare filters for rotations, the background thread that clears retired ones, and the
//! coarse clock that thread keeps.
//!
//! A rotation needs an empty filter at once, and clearing one costs `O(m)` stores — far too
//! long to spend on a request. So the pair keeps a small pool of already-cleared filters: a
//! rotation pops one, and sends the filter it retires to a dedicated thread. That thread
//! waits until nobody holds the retired filter any more (checks that loaded an older
//! generation may still be probing it), clears it and pushes it back into the pool.
//!
//! The pair always holds three filters: `current`, `previous` and one spare — or, when there
//! is no `previous` (at start-up, after an idle gap), two spares. So the pool starts with
//! three filters, one of which becomes the first `current`, and keeps up to [`MAX_SPARES`].
//!
//! The same thread ticks a coarse clock every [`TICK`]: reading `Instant::now()` costs about
//! 25 ns here (a quarter of a whole check), and the pair needs the time on every check only
//! to notice `max_age`, which a few milliseconds of slack do not change.
//!
//! Orderings: the cleaner owns a filter exclusively once `Arc::try_unwrap` succeeds
//! (acquire, against every other holder's release on drop), clears it through `&mut`, and
//! publishes it by pushing it into the pool under the `Mutex` (release); a rotation pops it
//! under the same `Mutex` (acquire) before publishing it through the pair's pointer swap.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::admission::bloom::{BloomFilter, FilterParams};

/// The most cleared filters kept in the pool.
const MAX_SPARES: usize = 2;

/// How long the cleaner sleeps before looking again at a retired filter still in use.
/// Checks hold a filter for well under a microsecond; snapshots and statistics for
/// milliseconds.
const RECHECK: Duration = Duration::from_micros(200);

/// How often the coarse clock advances.
const TICK: Duration = Duration::from_millis(5);

/// A clock that costs one relaxed load to read: `epoch` plus the milliseconds the cleaner
/// thread last stored. Behind the real time by at most about [`TICK`] (more if the machine
/// starves the thread); never ahead. Relaxed: the value publishes nothing else, and a
/// reader that sees a slightly older tick merely notices `max_age` a tick later.
struct CoarseClock {
    epoch: Instant,
    millis: AtomicU64,
}

impl CoarseClock {
    fn tick(&self) {
        let millis = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.millis.store(millis, Ordering::Relaxed);
    }
}

/// The pool of cleared filters and the channel to the cleaner thread.
pub(super) struct Spares {
    /// Sizing of every filter.
    params: FilterParams,
    /// Cleared filters, ready to become `current`. Held only to push or pop.
    pool: Arc<Mutex<Vec<BloomFilter>>>,
    /// To the cleaner thread; `None` when the thread could not be started, in which case
    /// retired filters are simply freed, rotations allocate, and [`Spares::now`] reads the
    /// system clock.
    retired: Option<Sender<Arc<BloomFilter>>>,
    /// Ticked by the cleaner thread.
    clock: Arc<CoarseClock>,
}

impl Spares {
    /// A pool of three cleared filters (the pair's whole memory), and its cleaner thread.
    /// The thread ends when the `Spares` is dropped (and the filters it waits for are
    /// released).
    pub(super) fn new(params: FilterParams) -> Spares {
        let filters = (0..=MAX_SPARES)
            .map(|_| BloomFilter::new(&params))
            .collect();
        let pool = Arc::new(Mutex::new(filters));
        let (sender, receiver) = mpsc::channel();
        let clock = Arc::new(CoarseClock {
            epoch: Instant::now(),
            millis: AtomicU64::new(0),
        });
        let (worker_pool, worker_clock) = (pool.clone(), clock.clone());
        let started = thread::Builder::new()
            .name("secondhit-filter-cleaner".to_owned())
            .spawn(move || clean(receiver, &worker_pool, &worker_clock));
        let retired = match started {
            Ok(_) => Some(sender),
            Err(error) => {
                tracing::warn!(%error, "cannot start the filter cleaner thread; rotations will allocate new filters");
                None
            }
        };
        Spares {
            params,
            pool,
            retired,
            clock,
        }
    }

    /// The coarse time: at most a few milliseconds behind `Instant::now()`, for a load.
    pub(super) fn now(&self) -> Instant {
        if self.retired.is_none() {
            return Instant::now();
        }
        self.clock.epoch + Duration::from_millis(self.clock.millis.load(Ordering::Relaxed))
    }

    /// A cleared filter: from the pool, or newly allocated when the pool is empty (rotations
    /// faster than the cleaner; logged at debug).
    pub(super) fn take(&self) -> Arc<BloomFilter> {
        Arc::new(self.take_owned())
    }

    /// A spare filter holding `words`; `None` (leaving the pool as it was) when their number
    /// does not fit the filters' size.
    pub(super) fn take_loaded(&self, words: &[u64]) -> Option<Arc<BloomFilter>> {
        let mut filter = self.take_owned();
        if filter.load_words(words) {
            Some(Arc::new(filter))
        } else {
            lock(&self.pool).push(filter);
            None
        }
    }

    /// Cleared filters in the pool now (for tests).
    #[cfg(test)]
    pub(super) fn ready(&self) -> usize {
        lock(&self.pool).len()
    }

    /// A cleared filter from the pool, or a new one.
    fn take_owned(&self) -> BloomFilter {
        let spare = lock(&self.pool).pop();
        spare.unwrap_or_else(|| {
            tracing::debug!("no cleared spare filter ready; allocating one");
            BloomFilter::new(&self.params)
        })
    }

    /// Returns a spare that was never published (its rotation lost the race). Nobody else
    /// can have touched it, so it is still clear; if some reference lingers, the cleaner
    /// takes it the usual way.
    pub(super) fn put_back(&self, spare: Arc<BloomFilter>) {
        match Arc::try_unwrap(spare) {
            Ok(filter) => {
                let mut pool = lock(&self.pool);
                if pool.len() < MAX_SPARES {
                    pool.push(filter);
                }
            }
            Err(shared) => self.retire(shared),
        }
    }

    /// Hands a filter no generation uses any more to the cleaner.
    pub(super) fn retire(&self, filter: Arc<BloomFilter>) {
        if let Some(sender) = &self.retired {
            // Fails only if the cleaner thread is gone; the filter is then just freed.
            let _ = sender.send(filter);
        }
    }
}

/// The cleaner thread: waits for each retired filter to be free, clears it, pools it; ticks
/// the clock meanwhile. Ends when the pair (the sender) is dropped.
fn clean(retired: Receiver<Arc<BloomFilter>>, pool: &Mutex<Vec<BloomFilter>>, clock: &CoarseClock) {
    loop {
        clock.tick();
        let filter = match retired.recv_timeout(TICK) {
            Ok(filter) => filter,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut filter = wait_until_unique(filter, clock);
        filter.clear();
        let mut pool = lock(pool);
        if pool.len() < MAX_SPARES {
            pool.push(filter);
        }
    }
}

/// The filter itself, once `arc` is its last reference; ticks the clock while it waits.
fn wait_until_unique(mut arc: Arc<BloomFilter>, clock: &CoarseClock) -> BloomFilter {
    loop {
        match Arc::try_unwrap(arc) {
            Ok(filter) => return filter,
            Err(shared) => {
                arc = shared;
                thread::sleep(RECHECK);
                clock.tick();
            }
        }
    }
}

/// Locks `mutex`, ignoring poisoning: every critical section is a single push, pop or send.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
