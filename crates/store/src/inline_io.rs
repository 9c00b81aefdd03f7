//! Where a fill's file work runs: on the worker that serves it while the disk answers
//! quickly, on the blocking pool for a while after it did not.
//!
//! A small fill is two short calls (create the temp file; write the rest, rename). Each
//! hand-off to the blocking pool and back costs more CPU than the file work itself: a
//! dozen futex calls and an eventfd write per fill, a quarter of a stored miss's CPU
//! (`benches/RESULTS.md`, "a fill's file work on the worker"). nginx writes its cache
//! files on its event loop for the same reason. But a call that blocks (a disk behind
//! writeback throttling, a network filesystem) stalls every connection of that worker.
//! So each call run here that takes over [`NOTICE`] is checked for whether the thread
//! slept in it (gave up its CPU: a voluntary context switch, the kernel's count for the
//! thread), and the time spent in such calls is added up over [`WINDOW`]: past
//! [`STALL_BUDGET`] in one window (a worker stalled 10% of the time), the fills of every
//! worker use the blocking pool for [`BACKOFF`]. A call slow only because the scheduler
//! ran something else meanwhile is no sign of a slow disk (the worker would have waited as
//! long with the call elsewhere). A journaled ext4 stalls creates while it commits its
//! journal (every 5 s by default), for a small share of the time; nginx's workers wait
//! those out too, and moving fills to the pool for them cost more CPU per stored miss
//! without a better p99 (`benches/RESULTS.md`, "4,096 entry directories"), so the window is long
//! enough to see them as the small share they are, while a disk that stalls a tenth of
//! the time still sends fills to the pool. With `cache.fsync = true` each commit waits for the disk, so fills always use the
//! pool.
//!
//! While the store's `syncfs` runs (`cache.fsync` a duration: once a second by default),
//! the filesystem writes back every file changed since the last one and commits its
//! journal, and the fills' creates, writes and renames meanwhile wait on it: the worker
//! stalls once a sync, and every connection of the worker, its hits included, waits too (`benches/RESULTS.md`,
//! "hits while fills wait for the filesystem's sync"). So the gate is also closed while a
//! sync runs ([`InlineGate::syncing`]): the fills begun in that span pay the hand-off to
//! the pool and wait there, and the worker goes on serving.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Calls on the worker quicker than this are not checked for sleeping.
pub(super) const NOTICE: Duration = Duration::from_micros(200);

/// Time in calls that slept, per [`WINDOW`], past which fills move to the blocking pool.
pub(super) const STALL_BUDGET: Duration = Duration::from_secs(1);

/// The span the stalls are added up over: two of ext4's journal commits.
pub(super) const WINDOW: Duration = Duration::from_secs(10);

/// How long fills stay on the blocking pool once the stalls went over budget.
pub(super) const BACKOFF: Duration = Duration::from_secs(10);

/// Whether fills may run their file work on the worker.
#[derive(Debug)]
pub(super) struct InlineGate {
    /// Where the offsets below count from.
    start: Instant,
    /// Nanoseconds after `start` until which fills use the blocking pool.
    pool_until: AtomicU64,
    /// False when every fill must use the pool (`cache.fsync = true`).
    allowed: bool,
    /// Nanoseconds after `start` at which the current [`WINDOW`] began.
    window_start: AtomicU64,
    /// Nanoseconds spent in calls that slept in the current window.
    stalled: AtomicU64,
    /// Filesystem syncs running now ([`InlineGate::syncing`]).
    syncs: AtomicUsize,
    /// See [`FillCalls::worker`]. Relaxed: a plain counter.
    on_worker: AtomicU64,
    /// See [`FillCalls::pool`]. Relaxed: a plain counter.
    on_pool: AtomicU64,
}

/// A fill's file calls so far, by where they ran: a small fill makes one or two, and each
/// on the pool costs a hand-off to a blocking thread and back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FillCalls {
    /// Calls run on the worker that serves the fill.
    pub worker: u64,
    /// Calls sent to the blocking pool.
    pub pool: u64,
}

/// Holds the gate closed while a filesystem sync runs: see [`InlineGate::syncing`].
pub(super) struct Syncing<'a>(&'a InlineGate);

impl Drop for Syncing<'_> {
    fn drop(&mut self) {
        self.0.syncs.fetch_sub(1, Relaxed);
    }
}

impl InlineGate {
    /// A gate that lets fills run on the worker when `allowed`.
    pub(super) fn new(allowed: bool) -> InlineGate {
        InlineGate {
            start: Instant::now(),
            pool_until: AtomicU64::new(0),
            allowed,
            window_start: AtomicU64::new(0),
            stalled: AtomicU64::new(0),
            syncs: AtomicUsize::new(0),
            on_worker: AtomicU64::new(0),
            on_pool: AtomicU64::new(0),
        }
    }

    /// Counts a file call sent to the blocking pool.
    pub(super) fn count_pooled(&self) {
        self.on_pool.fetch_add(1, Relaxed);
    }

    /// The file calls counted so far.
    pub(super) fn calls(&self) -> FillCalls {
        FillCalls {
            worker: self.on_worker.load(Relaxed),
            pool: self.on_pool.load(Relaxed),
        }
    }

    /// Whether a file call may run on the worker at `now`.
    pub(super) fn open_at(&self, now: Instant) -> bool {
        self.allowed
            && self.syncs.load(Relaxed) == 0
            && self.offset(now) >= self.pool_until.load(Relaxed)
    }

    /// Closes the gate until the returned guard is dropped: for the span of a sync of
    /// the cache's filesystem, which the fills' calls would wait for (module docs).
    pub(super) fn syncing(&self) -> Syncing<'_> {
        self.syncs.fetch_add(1, Relaxed);
        Syncing(self)
    }

    /// Notes a call on the worker that ran from `began` to `now`: one over [`NOTICE`] in
    /// which the thread `slept` counts against this window's [`STALL_BUDGET`], and past it
    /// the gate closes for [`BACKOFF`] (said once).
    pub(super) fn ran(&self, began: Instant, now: Instant, slept: impl FnOnce() -> bool) {
        let took = now.saturating_duration_since(began);
        if took <= NOTICE || !slept() {
            return;
        }
        let (at, took_ns) = (self.offset(now), duration_ns(took));
        let window = self.window_start.load(Relaxed);
        // Two workers may both start a new window; either start is as good.
        let stalled = if at.saturating_sub(window) > duration_ns(WINDOW) {
            self.window_start.store(at, Relaxed);
            self.stalled.store(took_ns, Relaxed);
            took_ns
        } else {
            self.stalled.fetch_add(took_ns, Relaxed) + took_ns
        };
        if stalled <= duration_ns(STALL_BUDGET) {
            return;
        }
        let until = at.saturating_add(duration_ns(BACKOFF));
        if self.pool_until.swap(until, Relaxed) <= at {
            tracing::info!(
                stalled = ?Duration::from_nanos(stalled),
                backoff = ?BACKOFF,
                "fills' file calls on the worker slept over {STALL_BUDGET:?} in {WINDOW:?}: \
                 fills use the blocking pool for a while"
            );
        }
    }

    /// Runs `job` on this thread and notes how it went (see [`InlineGate::ran`]).
    pub(super) fn run<T>(&self, began: Instant, job: impl FnOnce() -> T) -> T {
        self.on_worker.fetch_add(1, Relaxed);
        self.timed(began, job)
    }

    /// Runs `job` on this thread and notes how it went, as [`InlineGate::run`] does, but
    /// not counted among the fills' calls: an eviction's unlinks (`evict`).
    pub(super) fn timed<T>(&self, began: Instant, job: impl FnOnce() -> T) -> T {
        let switches = voluntary_switches();
        let done = job();
        self.ran(began, Instant::now(), || voluntary_switches() != switches);
        done
    }

    /// `now` in nanoseconds after `start`.
    fn offset(&self, now: Instant) -> u64 {
        duration_ns(now.saturating_duration_since(self.start))
    }
}

/// `duration` in nanoseconds, saturating.
fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The calling thread's voluntary context switches so far; where the kernel does not
/// count them per thread, a value that changes on every call, so any slow call counts.
fn voluntary_switches() -> std::ffi::c_long {
    #[cfg(target_os = "linux")]
    if let Ok(usage) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD) {
        return usage.voluntary_context_switches();
    }
    static CALLS: AtomicU64 = AtomicU64::new(0);
    // Wrapping is fine: only a change is looked for.
    CALLS.fetch_add(1, Relaxed) as std::ffi::c_long
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_over_the_budget_in_one_window_send_fills_to_the_pool_for_the_backoff() {
        let gate = InlineGate::new(true);
        let t0 = Instant::now() + WINDOW * 2;
        let ms = Duration::from_millis;
        gate.ran(t0, t0 + NOTICE / 2, || true);
        gate.ran(t0, t0 + ms(50), || false);
        assert!(
            gate.open_at(t0),
            "quick calls and calls that never slept change nothing"
        );
        gate.ran(t0, t0 + ms(600), || true);
        assert!(gate.open_at(t0 + ms(600)), "600 ms of 1000");
        // A new window forgets the first stall.
        let t1 = t0 + WINDOW * 2;
        gate.ran(t1, t1 + ms(600), || true);
        assert!(gate.open_at(t1 + ms(600)), "600 ms of 1000 again");
        // Stalls spread over one window add up.
        let end = t1 + WINDOW - ms(1);
        gate.ran(end - ms(500), end, || true);
        assert!(!gate.open_at(end), "1100 ms in one window");
        assert!(!gate.open_at(end + BACKOFF - ms(1)));
        assert!(gate.open_at(end + BACKOFF));
    }

    #[test]
    fn the_gate_is_closed_while_a_sync_runs() {
        let gate = InlineGate::new(true);
        let now = Instant::now();
        let first = gate.syncing();
        let second = gate.syncing();
        assert!(!gate.open_at(now));
        drop(first);
        assert!(!gate.open_at(now), "one sync still runs");
        drop(second);
        assert!(gate.open_at(now));
    }

    #[test]
    fn a_gate_not_allowed_never_opens() {
        let gate = InlineGate::new(false);
        assert!(!gate.open_at(Instant::now() + BACKOFF * 2));
    }

    // Elsewhere every slow call counts (`voluntary_switches`).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_call_that_sleeps_counts_against_the_budget_and_one_that_spins_does_not() {
        let gate = InlineGate::new(true);
        let began = Instant::now();
        gate.run(began, || std::thread::sleep(NOTICE * 5));
        let stalled = Duration::from_nanos(gate.stalled.load(Relaxed));
        assert!(stalled >= NOTICE * 5, "{stalled:?}");
        let began = Instant::now();
        gate.run(began, || while began.elapsed() < NOTICE * 5 {});
        let after = Duration::from_nanos(gate.stalled.load(Relaxed));
        // A spinning thread may still be preempted, a switch the kernel counts as
        // involuntary: the sum stays as it was.
        assert_eq!(after, stalled);
    }
}
