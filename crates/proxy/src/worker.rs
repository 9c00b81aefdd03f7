//! Which worker a thread serves: each worker (`server.workers`) numbers its thread and its
//! blocking threads, so that per-worker state (the counters' shards, the idle origin
//! connections) is found without a lock or a cache line shared by all workers.

use std::cell::Cell;
use std::num::NonZeroUsize;

thread_local! {
    /// This thread's worker; 0 for a thread no worker numbered.
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// Marks this thread as worker `index`'s (numbered from 0).
pub(crate) fn set(index: usize) {
    INDEX.with(|current| current.set(index));
}

/// The worker this thread serves; 0 on a thread no worker numbered.
pub(crate) fn index() -> usize {
    INDEX.with(Cell::get)
}

/// How many workers `server.workers` asks for: the number given, or one per CPU this
/// process may run on (its affinity mask).
pub(crate) fn count(configured: Option<usize>) -> usize {
    configured.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get))
}
