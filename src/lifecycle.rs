//! The running process's lifecycle: signals, and the live reload SIGHUP asks for.
//!
//! - SIGTERM and SIGINT: [`Signals::until_stopped`] completes, and `server::Server::run`
//!   stops accepting, lets open requests finish for up to `server.shutdown_timeout`, saves
//!   the admission filters and closes the access log.
//! - SIGHUP: [`Reloader::reload`] reads the config file again and applies what a running
//!   server can change (see [`Config::reload`] for the list), logging the changed keys at
//!   info; keys that need a restart are named in a warning and keep their running values.
//!   The TLS listener's certificate files are read again on every reload, changed or not
//!   (renewed files keep their names); one that fails keeps its running version, with an
//!   error naming the file ([`crate::server::tls`]).
//!   A file that does not load or validate, or a part that cannot be rebuilt from it (an
//!   access-log file that cannot be opened, say), rejects the whole reload with an error
//!   naming the key: the running config stays as it was.
//! - SIGUSR1: the access log reopens its file by path (after logrotate moved it).
//!
//! The handlers are installed by [`Signals::install`] before the server accepts anything,
//! so an early SIGHUP never meets the default action (which would end the process).

use std::path::PathBuf;
use std::sync::Arc;

use crate::access_log::{self, AccessLog, AccessLogError};
use crate::admission::{AdmissionError, Assembled};
use crate::config::{Config, ConfigError};
use crate::logging::LogReload;
use crate::origin::OriginError;
use crate::sites::Sites;

pub use crate::server::LiveParts;

/// Why a reload was rejected (the running config is kept).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file does not load or validate; names the key.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A new origin client (of `[origin]` or a site's) cannot be built.
    #[error("{0}")]
    Origin(#[from] OriginError),
    /// The new access-log destination cannot be opened.
    #[error("{0}")]
    AccessLog(#[from] AccessLogError),
    /// The new admission cannot be built (its seed file, usually).
    #[error("admission: {0}")]
    Admission(#[from] AdmissionError),
    /// The task building the new admission failed.
    #[error("admission: cannot build the new policy: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Reloads the config file into a running server.
pub struct Reloader {
    /// The file `serve` was started with; `None`: started with the defaults, nothing to
    /// reload.
    path: Option<PathBuf>,
    parts: LiveParts,
    /// The diagnostic log's filter, for `log.level`.
    log: LogReload,
}

impl Reloader {
    /// A reloader of `path` into `parts`, applying `log.level` through `log`.
    pub fn new(path: Option<PathBuf>, parts: LiveParts, log: LogReload) -> Reloader {
        Reloader { path, parts, log }
    }

    /// Reads the config file again and applies it; logs what changed, what needs a
    /// restart, or why the file was rejected.
    pub async fn reload(&self) {
        let Some(path) = &self.path else {
            tracing::warn!("reload asked, but the server was started without --config");
            return;
        };
        let path_shown = path.display();
        let outcome = match Config::load(path) {
            Ok(next) => self.apply(next).await,
            Err(error) => Err(error.into()),
        };
        if let Err(error) = outcome {
            tracing::error!(
                path = %path_shown,
                %error,
                "config reload rejected; the running config is kept"
            );
        }
    }

    /// Applies `next` over the running config. Everything that can fail is built first;
    /// only then is anything swapped, so a failure changes nothing.
    async fn apply(&self, next: Config) -> Result<(), ReloadError> {
        let running = Arc::clone(&self.parts.settings.load());
        let (next, changes) = running.reload(next);
        check_object_size(&next)?;
        if !changes.restart.is_empty() {
            tracing::warn!(
                keys = %changes.restart.join(", "),
                "changed keys need a restart; their running values are kept"
            );
        }
        // Read whether or not the file names changed: a renewal writes over the same files.
        let certificates = match (&self.parts.certificates, &next.server.tls) {
            (Some(running), Some(tls)) => running
                .prepare(&tls.certificates)
                .map(|prepared| (running, prepared)),
            _ => None,
        };
        if changes.live.is_empty() {
            if let Some((running, prepared)) = certificates {
                running.swap(prepared);
            }
            tracing::info!("config reloaded; nothing to apply");
            return Ok(());
        }
        let rebuilt = self.rebuild(&running, &next).await?;
        if let Some(sites) = rebuilt.sites {
            self.parts.sites.store(Arc::new(sites));
        }
        if let Some((running, prepared)) = certificates {
            running.swap(prepared);
        }
        if let Some(admission) = rebuilt.admission {
            self.parts.admission.replace(admission);
        }
        if let Some(access_log) = rebuilt.access_log {
            self.parts.access_log.apply(access_log);
        }
        if next.log.level != running.log.level
            && let Err(error) = self.log.apply(&next.log)
        {
            tracing::warn!(%error, "log.level: cannot apply the new level");
        }
        self.parts.settings.replace(next);
        tracing::info!(changed = %changes.live.join(", "), "config reloaded");
        Ok(())
    }

    /// Builds the parts that `next` changes from `running` — the sites (their origin
    /// clients), the access log's destination, the admission — without swapping any.
    async fn rebuild(&self, running: &Config, next: &Config) -> Result<Rebuilt, ReloadError> {
        let sites_changed = (
            &next.origin,
            &next.sites,
            &next.rules,
            next.server.unknown_host,
        ) != (
            &running.origin,
            &running.sites,
            &running.rules,
            running.server.unknown_host,
        );
        let sites = sites_changed
            .then(|| Sites::new(next, &self.parts.metrics))
            .transpose()?;
        let access_changed = (&next.log.access_log, next.log.access_format)
            != (&running.log.access_log, running.log.access_format);
        let access_log = access_changed
            .then(|| AccessLog::prepare(&next.log))
            .transpose()?;
        let admission = if next.admission != running.admission {
            // Saved first, so that filters of the same size carry over: the new pair
            // restores this snapshot, as after a restart (other sizes start empty).
            self.parts.admission.save_in_background().await;
            let (config, store) = (next.admission.clone(), self.parts.store.clone());
            let built = tokio::task::spawn_blocking(move || {
                crate::server::assemble_admission(&config, &store)
            });
            Some(built.await??)
        } else {
            None
        };
        Ok(Rebuilt {
            sites,
            access_log,
            admission,
        })
    }
}

/// The parts a reload built anew, ready to be swapped in; `None`: unchanged.
struct Rebuilt {
    sites: Option<Sites>,
    access_log: Option<access_log::Prepared>,
    admission: Option<Assembled>,
}

/// Rejects a `next` whose largest object no longer fits the cache: the file was validated
/// whole, but `cache.max_size` keeps its running value.
fn check_object_size(next: &Config) -> Result<(), ReloadError> {
    if next.cache.max_size < next.cache.max_object_bytes() {
        let reason = format!(
            "{} bytes is over the running cache.max_size ({} bytes; changing it needs a restart)",
            next.cache.max_object_bytes(),
            next.cache.max_size
        );
        let key = "cache.max_object_size";
        return Err(ConfigError::Invalid { key, reason }.into());
    }
    Ok(())
}

/// The signals `serve` acts on, installed before it accepts connections.
#[cfg(unix)]
pub struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    user1: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Installs the handlers for SIGTERM, SIGINT, SIGHUP and SIGUSR1 (needs the tokio
    /// runtime).
    pub fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
            user1: signal(SignalKind::user_defined1())?,
        })
    }

    /// Handles SIGHUP (reload) and SIGUSR1 (reopen the access log) until SIGTERM or SIGINT
    /// arrives: the shutdown future for `server::Server::run`. A reload runs to its end
    /// before the next signal is looked at.
    pub async fn until_stopped(mut self, reloader: Reloader) {
        loop {
            tokio::select! {
                _ = self.terminate.recv() => {
                    tracing::info!("SIGTERM: shutting down");
                    return;
                }
                _ = self.interrupt.recv() => {
                    tracing::info!("SIGINT: shutting down");
                    return;
                }
                _ = self.hangup.recv() => {
                    tracing::info!("SIGHUP: reloading the config");
                    reloader.reload().await;
                }
                _ = self.user1.recv() => {
                    tracing::info!("SIGUSR1: reopening the access log");
                    reloader.parts.access_log.reopen();
                }
            }
        }
    }
}

/// Off Unix there are no such signals: Ctrl-C stops the server, and nothing reloads.
#[cfg(not(unix))]
pub struct Signals;

#[cfg(not(unix))]
impl Signals {
    /// Nothing to install off Unix.
    pub fn install() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    /// Completes on Ctrl-C.
    pub async fn until_stopped(self, reloader: Reloader) {
        let _ = reloader;
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    }
}
