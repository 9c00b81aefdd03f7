//! The diagnostic log: lines on stdout, as text or JSON (`log.format`), filtered by
//! `log.level` and `log.access_log` — or by `RUST_LOG`, when it is set at start — through a
//! filter that the running process can replace ([`LogReload::apply`]).
//!
//! Access lines are `info` events with target `access`; the `[log]` directives keep them
//! even under a quieter level when `log.access_log = "stdout"`. Whether the proxy emits
//! them at all is read per request from the live settings (`config::SettingsHandle`), so a
//! reload applies a new `[log]` section in both places.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, fmt, reload};

use crate::config::{AccessLog, LogConfig, LogFormat};

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
        Err(_) => (EnvFilter::new(directives(log)), false),
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
    /// Applies a new `[log]` section's level and access-log directives to the running
    /// subscriber; events are filtered by them from the next one on. While `RUST_LOG`
    /// (set at start) decides, nothing changes. `log.format` is not applied: the formatter
    /// is built once, by [`init`].
    ///
    /// Fails only if the subscriber is gone or a thread panicked while replacing the
    /// filter.
    pub fn apply(&self, log: &LogConfig) -> Result<(), reload::Error> {
        if self.from_env {
            tracing::info!("RUST_LOG is set: the [log] level and access_log are not applied");
            return Ok(());
        }
        self.handle.reload(EnvFilter::new(directives(log)))
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

/// The filter directives of a `[log]` section: `log.level`, plus `access=info` when access
/// lines go to stdout, so they are kept even when the level is quieter.
fn directives(log: &LogConfig) -> String {
    match log.access_log {
        AccessLog::Stdout => format!("{},access=info", log.level),
        AccessLog::Off => log.level.clone(),
    }
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

    fn section(level: &str, access_log: AccessLog) -> LogConfig {
        LogConfig {
            level: level.to_owned(),
            access_log,
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
    fn directives_keep_access_lines_only_when_they_go_to_stdout() {
        assert_eq!(
            directives(&section("warn", AccessLog::Stdout)),
            "warn,access=info"
        );
        assert_eq!(directives(&section("debug", AccessLog::Off)), "debug");
    }

    #[test]
    fn apply_lets_through_a_level_the_old_filter_dropped() {
        let start = directives(&section("warn", AccessLog::Off));
        with_filter(&start, false, |reload, seen| {
            // One callsite, so the cached interest in it must be rebuilt by the reload.
            let probe = || tracing::debug!("probe");
            probe();
            assert_eq!(seen(), 0, "debug is below warn");
            reload
                .apply(&section("debug", AccessLog::Off))
                .expect("reload");
            probe();
            assert_eq!(seen(), 1, "debug passes once the level is debug");
        });
    }

    #[test]
    fn apply_turns_access_lines_off_and_on_under_a_quiet_level() {
        let start = directives(&section("warn", AccessLog::Stdout));
        with_filter(&start, false, |reload, seen| {
            let access = || tracing::info!(target: "access", "GET /");
            access();
            assert_eq!(seen(), 1, "access lines pass under warn");
            reload.apply(&section("warn", AccessLog::Off)).expect("off");
            access();
            assert_eq!(seen(), 1, "no access lines once they are off");
            reload
                .apply(&section("warn", AccessLog::Stdout))
                .expect("on");
            access();
            assert_eq!(seen(), 2, "access lines pass again");
        });
    }

    #[test]
    fn rust_log_set_at_start_keeps_deciding() {
        with_filter("warn", true, |reload, seen| {
            let probe = || tracing::debug!("probe");
            reload
                .apply(&section("debug", AccessLog::Off))
                .expect("apply");
            probe();
            assert_eq!(seen(), 0, "RUST_LOG=warn still drops debug");
        });
    }
}
