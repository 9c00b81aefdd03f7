//! The async runtimes the server runs on, shaped by `server.workers` and
//! `server.blocking_threads`.
//!
//! - Each worker is one thread running tokio's single-threaded runtime, with listening
//!   sockets of its own (`listeners`): a connection is accepted, served and sent to the
//!   origin on one thread, with no cross-thread wake-up or hand-off on the request path
//!   (`benches/RESULTS.md`, "thread per core"). The first worker is the runtime `main`
//!   blocks on; `Server::run` starts the others.
//! - Each worker's blocking pool, where fills write and where reads go that must wait for
//!   the disk, gets its share of `server.blocking_threads` (at least one thread) instead of
//!   tokio's 512, so a burst of misses queues its file work rather than starting hundreds
//!   of threads.
//! - `server.runtime = "work-stealing"` builds one tokio multi-threaded runtime with that
//!   many workers and one blocking pool instead, on one set of sockets: where the workers
//!   share CPUs with other work it spends less CPU per cached hit and more per
//!   pass-through and stored miss (`benches/RESULTS.md`, "thread per core, per-worker origin connections, batched fsync").

use std::io;

use tokio::runtime::{Builder, Runtime};

use crate::config::{self, ServerConfig};

/// The threads of every worker's runtime are named this, so `top -H` and
/// `/proc/<pid>/task` tell them apart.
pub const THREAD_NAME: &str = "secondhit-rt";

/// The first worker's runtime, for `main` to block on (with work-stealing, the one
/// runtime): see the module docs.
pub fn build(config: &ServerConfig) -> io::Result<Runtime> {
    match config.runtime {
        config::Runtime::ThreadPerCore => worker(config, 0, THREAD_NAME),
        config::Runtime::WorkStealing => Builder::new_multi_thread()
            .worker_threads(workers(config))
            .max_blocking_threads(config.blocking_threads)
            .thread_name(THREAD_NAME)
            .enable_all()
            .build(),
    }
}

/// How many workers run a runtime of their own, each with its own sockets: all of them
/// with thread-per-core, one (the work-stealing runtime) otherwise.
pub fn own_runtimes(config: &ServerConfig) -> usize {
    match config.runtime {
        config::Runtime::ThreadPerCore => workers(config),
        config::Runtime::WorkStealing => 1,
    }
}

/// Worker `index`'s runtime: single-threaded, with its share of the blocking threads.
pub(super) fn worker(
    config: &ServerConfig,
    index: usize,
    thread_name: &str,
) -> io::Result<Runtime> {
    Builder::new_current_thread()
        .max_blocking_threads(blocking_share(config, index))
        // Its blocking threads count into the worker's counters, like the worker itself.
        .on_thread_start(move || crate::worker::set(index))
        .thread_name(thread_name)
        .enable_all()
        .build()
}

/// Worker `index`'s share of `server.blocking_threads`: an even split, the remainder to
/// the first workers, and at least one each.
fn blocking_share(config: &ServerConfig, index: usize) -> usize {
    let workers = workers(config);
    let share =
        config.blocking_threads / workers + usize::from(index < config.blocking_threads % workers);
    share.max(1)
}

/// `server.workers`, or one per CPU this process may run on (its affinity mask).
pub fn workers(config: &ServerConfig) -> usize {
    crate::worker::count(config.workers)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::runtime::RuntimeFlavor;

    use super::*;

    /// Threads of this process whose name is `name`.
    fn threads_named(name: &str) -> usize {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return 0;
        };
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim_end() == name)
            .count()
    }

    #[test]
    fn every_worker_is_a_single_threaded_runtime() {
        let three = ServerConfig {
            workers: Some(3),
            ..ServerConfig::default()
        };
        for index in 0..3 {
            let runtime = worker(&three, index, THREAD_NAME).expect("runtime");
            assert_eq!(
                runtime.handle().runtime_flavor(),
                RuntimeFlavor::CurrentThread
            );
        }
    }

    #[test]
    fn work_stealing_is_one_multi_threaded_runtime_with_every_worker() {
        let config = ServerConfig {
            workers: Some(3),
            runtime: config::Runtime::WorkStealing,
            ..ServerConfig::default()
        };
        let runtime = build(&config).expect("runtime");
        assert_eq!(
            runtime.handle().runtime_flavor(),
            RuntimeFlavor::MultiThread
        );
        assert_eq!(runtime.metrics().num_workers(), 3);
        assert_eq!(own_runtimes(&config), 1);
    }

    #[test]
    fn the_blocking_threads_are_split_over_the_workers() {
        let config = |workers, blocking_threads| ServerConfig {
            workers: Some(workers),
            blocking_threads,
            ..ServerConfig::default()
        };
        let shares = |c: &ServerConfig| -> Vec<usize> {
            (0..workers(c)).map(|i| blocking_share(c, i)).collect()
        };
        assert_eq!(shares(&config(1, 32)), [32]);
        assert_eq!(shares(&config(3, 32)), [11, 11, 10]);
        assert_eq!(shares(&config(4, 2)), [1, 1, 1, 1]);
    }

    #[test]
    fn blocking_work_never_runs_on_more_threads_than_configured() {
        let config = ServerConfig {
            workers: Some(1),
            blocking_threads: 2,
            ..ServerConfig::default()
        };
        // A name no other test's threads carry (at most 15 bytes, the kernel's limit).
        const NAME: &str = "sh-rt-bounded";
        let runtime = worker(&config, 0, NAME).expect("runtime");
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        runtime.block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|_| {
                    let (running, most) = (Arc::clone(&running), Arc::clone(&most));
                    tokio::task::spawn_blocking(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("blocking task");
            }
        });
        // Idle blocking threads linger (10 s), so all that were started are still here.
        assert_eq!(threads_named(NAME), 2);
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }
}
