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

/// Resolves once the other tasks this worker has ready now have run: the task wakes itself
/// and goes to the back of the worker's queue.
///
/// `tokio::task::yield_now` does the same but defers the wake until the worker next polls
/// its sockets and timers, and with one request in flight that is an extra `epoll_wait`
/// and timer pass (about 2,000 instructions) each time (`benches/RESULTS.md`, "the end of
/// the scheduler pass without a driver turn"). A task that wakes itself while it runs is
/// queued behind the others by both of tokio's schedulers.
pub(crate) fn end_of_pass() -> EndOfPass {
    EndOfPass { yielded: false }
}

/// The future of [`end_of_pass`].
pub(crate) struct EndOfPass {
    yielded: bool,
}

impl std::future::Future for EndOfPass {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.yielded {
            return std::task::Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::end_of_pass;

    #[test]
    fn a_task_at_the_end_of_its_pass_lets_the_other_ready_tasks_run_first() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let order = Arc::new(Mutex::new(Vec::new()));
        let log = |step: &'static str| {
            let order = Arc::clone(&order);
            move || order.lock().expect("not poisoned").push(step)
        };
        runtime.block_on(async {
            let (before, after, other) = (log("before"), log("after"), log("other"));
            let yielding = tokio::spawn(async move {
                before();
                end_of_pass().await;
                after();
            });
            let other = tokio::spawn(async move { other() });
            yielding.await.expect("ran");
            other.await.expect("ran");
        });
        assert_eq!(
            *order.lock().expect("not poisoned"),
            ["before", "other", "after"]
        );
    }

    #[test]
    fn the_end_of_a_pass_comes_on_the_work_stealing_runtime_too() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let passed = runtime.block_on(async {
            let task = tokio::spawn(end_of_pass());
            tokio::time::timeout(Duration::from_secs(10), task).await
        });
        assert!(matches!(passed, Ok(Ok(()))), "{passed:?}");
    }
}
