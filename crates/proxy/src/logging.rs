//! The diagnostic log: lines on stdout, as text or JSON (`log.format`), filtered by
//! `log.level` — or by `RUST_LOG`, when it is set at start — through a filter that the
//! running process can replace ([`LogReload::apply`], on SIGHUP).
//!
//! The access log is not part of it: requests are logged by `access_log`, which
//! has its own destination and formats and never waits on this log's filter or lock.

/// Log lines for events that can come once per request, at most one per kind every few seconds.
pub use secondhit_store::throttle;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, fmt, reload};

use crate::config::{LogConfig, LogFormat};

/// Replaces the filter of the subscriber [`init`] installed, while the process runs.
pub struct LogReload {
    /// The filter sits in a `reload::Layer`, behind a reader lock that each event passes
    /// (stdout's own lock, taken for every line written, costs more).
    handle: reload::Handle<EnvFilter, Registry>,
    /// `RUST_LOG` was set at start: its directives win over `[log]`, at start and on every
    /// [`LogReload::apply`], so one environment variable overrides the file throughout.
    from_env: bool,
}

/// Installs the process's subscriber: stdout, `log.format`, with colours only for a
/// terminal, filtered by `RUST_LOG` when it holds valid directives and by the `[log]`
/// section otherwise. Returns the handle that replaces the filter later.
pub fn init(log: &LogConfig) -> LogReload {
    let (filter, from_env) = match EnvFilter::try_from_default_env() {
        Ok(filter) => (filter, true),
        Err(_) => (EnvFilter::new(&log.level), false),
    };
    let (filter, reload) = reloadable(filter, from_env);
    // Colours only for a terminal: log files and collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let registry = tracing_subscriber::registry().with(filter);
    match log.format {
        LogFormat::Text => registry.with(fmt::layer().with_ansi(ansi)).init(),
        LogFormat::Json => registry.with(fmt::layer().json().with_ansi(ansi)).init(),
    }
    reload
}

impl LogReload {
    /// Applies a new `[log]` section's level to the running subscriber; events are
    /// filtered by it from the next one on. While `RUST_LOG`
    /// (set at start) decides, nothing changes. `log.format` is not applied: the formatter
    /// is built once, by [`init`].
    ///
    /// Fails only if the subscriber is gone or a thread panicked while replacing the
    /// filter.
    pub fn apply(&self, log: &LogConfig) -> Result<(), reload::Error> {
        if self.from_env {
            tracing::info!("RUST_LOG is set: log.level is not applied");
            return Ok(());
        }
        self.handle.reload(EnvFilter::new(&log.level))
    }
}

/// `filter` as a layer that a [`LogReload`] can replace.
fn reloadable(
    filter: EnvFilter,
    from_env: bool,
) -> (reload::Layer<EnvFilter, Registry>, LogReload) {
    let (layer, handle) = reload::Layer::new(filter);
    (layer, LogReload { handle, from_env })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tracing::Subscriber;
    use tracing_subscriber::layer::{Context, Layer};

    use super::*;

    /// Counts the events that pass the filter below it.
    struct Count(Arc<AtomicUsize>);

    impl<S: Subscriber> Layer<S> for Count {
        fn on_event(&self, _: &tracing::Event<'_>, _: Context<'_, S>) {
            // Relaxed: the count is read on the thread that emitted the events.
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn section(level: &str) -> LogConfig {
        LogConfig {
            level: level.to_owned(),
            ..LogConfig::default()
        }
    }

    /// Runs `body` under a subscriber filtered by `start` (a `[log]` section, or
    /// `RUST_LOG`-like directives when `from_env`), with the count of events let through.
    fn with_filter(start: &str, from_env: bool, body: impl FnOnce(&LogReload, &dyn Fn() -> usize)) {
        let (filter, reload) = reloadable(EnvFilter::new(start), from_env);
        let seen = Arc::new(AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry()
            .with(filter)
            .with(Count(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            body(&reload, &|| seen.load(Ordering::Relaxed));
        });
    }

    #[test]
    fn apply_lets_through_a_level_the_old_filter_dropped() {
        with_filter("warn", false, |reload, seen| {
            // One callsite, so the cached interest in it must be rebuilt by the reload.
            let probe = || tracing::debug!("probe");
            probe();
            assert_eq!(seen(), 0, "debug is below warn");
            reload.apply(&section("debug")).expect("reload");
            probe();
            assert_eq!(seen(), 1, "debug passes once the level is debug");
        });
    }

    #[test]
    fn rust_log_set_at_start_keeps_deciding() {
        with_filter("warn", true, |reload, seen| {
            let probe = || tracing::debug!("probe");
            reload.apply(&section("debug")).expect("apply");
            probe();
            assert_eq!(seen(), 0, "RUST_LOG=warn still drops debug");
        });
    }
}
