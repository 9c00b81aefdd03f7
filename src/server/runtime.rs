//! The async runtime the server runs on, shaped by `server.workers` and
//! `server.blocking_threads`.
//!
//! - One worker gets tokio's single-threaded runtime: with nothing to steal work from
//!   or hand it to, the multi-threaded scheduler only adds cross-thread wakeups, which
//!   slow down uncacheable requests passed to the origin (`benches/RESULTS.md`, "one
//!   worker on the current-thread runtime").
//! - Several workers get the work-stealing runtime with that many threads.
//! - The blocking pool, where fills write and where reads go that must wait for the
//!   disk, is bounded by `server.blocking_threads` instead of tokio's 512, so a burst of
//!   misses queues its file work rather than starting hundreds of threads.

use std::io;
use std::num::NonZeroUsize;

use tokio::runtime::{Builder, Runtime};

use crate::config::ServerConfig;

/// The runtime for `config`: see the module docs. Its threads are named
/// `secondhit-rt`, so `top -H` and `/proc/<pid>/task` tell them apart.
pub fn build(config: &ServerConfig) -> io::Result<Runtime> {
    build_named(config, "secondhit-rt")
}

fn build_named(config: &ServerConfig, thread_name: &str) -> io::Result<Runtime> {
    let mut builder = match workers(config) {
        1 => Builder::new_current_thread(),
        workers => {
            let mut builder = Builder::new_multi_thread();
            builder.worker_threads(workers);
            builder
        }
    };
    builder
        .max_blocking_threads(config.blocking_threads)
        .thread_name(thread_name)
        .enable_all()
        .build()
}

/// `server.workers`, or one per CPU this process may run on (its affinity mask).
pub fn workers(config: &ServerConfig) -> usize {
    config
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get))
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
    fn one_worker_is_a_single_threaded_runtime_and_more_are_work_stealing() {
        let one = ServerConfig {
            workers: Some(1),
            ..ServerConfig::default()
        };
        let runtime = build(&one).expect("runtime");
        assert_eq!(
            runtime.handle().runtime_flavor(),
            RuntimeFlavor::CurrentThread
        );
        let three = ServerConfig {
            workers: Some(3),
            ..ServerConfig::default()
        };
        let runtime = build(&three).expect("runtime");
        assert_eq!(
            runtime.handle().runtime_flavor(),
            RuntimeFlavor::MultiThread
        );
        assert_eq!(runtime.metrics().num_workers(), 3);
    }

    #[test]
    fn blocking_work_never_runs_on_more_threads_than_configured() {
        if !std::path::Path::new("/proc/self/task").is_dir() {
            eprintln!("skipped: no /proc/self/task to count threads on this system");
            return;
        }
        let config = ServerConfig {
            workers: Some(1),
            blocking_threads: 2,
            ..ServerConfig::default()
        };
        // A name no other test's threads carry (at most 15 bytes, the kernel's limit).
        const NAME: &str = "sh-rt-bounded";
        let runtime = build_named(&config, NAME).expect("runtime");
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
