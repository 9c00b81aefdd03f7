//! The running process's lifecycle: signals, and the live reload SIGHUP asks for.
//!
//! - SIGTERM and SIGINT: [`Signals::until_stopped`] completes, and `server::Server::run`
//!   stops accepting, lets open requests finish for up to `server.shutdown_timeout`, saves
//!   the admission filters and closes the access log.
//! - SIGHUP: [`Reloader::reload`] reads the config file again and applies what a running
//!   server can change (see [`Config::reload`] for the list), logging the changed keys at
//!   info; keys that need a restart are named in a warning and keep their running values.
//!   [`Reloader::apply`] builds the whole next live snapshot (`live::Snapshot`) — the
//!   sites with their origin clients, the admission, the access log's writer, each rebuilt
//!   only when its keys changed, and the TLS listener's certificates, read again on every
//!   reload, changed or not (renewed files keep their names) — and swaps it in one step.
//!   A file that does not load or validate, or a part that cannot be built from it (an
//!   access-log file that cannot be opened, a certificate file that does not load),
//!   rejects the whole reload with an error naming the key: the running snapshot stays as
//!   it was.
//! - SIGUSR1: the access log in use reopens its file by path (after logrotate moved it).
//! - SIGUSR2: a binary upgrade ([`Upgrader`]): the binary is started again with the
//!   listening sockets, and once it reports ready, [`Signals::until_stopped`] completes
//!   with [`Stop::Handover`]: this process hands the cache directory over at once (see
//!   `server::Server::run`), then drains and exits as at SIGTERM.
//!   If it cannot start, its reason is logged and this process serves on. A second
//!   SIGUSR2 while one runs is refused (logged); SIGTERM or SIGINT while one runs kills
//!   the new process (not ready yet, it serves nothing) and stops this one.
//!
//! The handlers are installed by [`Signals::install`] before the server accepts anything,
//! so an early SIGHUP never meets the default action (which would end the process), and
//! before `server.pid_file` is written ([`PidFile`]), so that a signal sent to the pid
//! it names is always handled.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::access_log::{AccessLog, AccessLogError};
use crate::admission::{AdmissionError, Assembled};
use crate::config::{AdmissionConfig, Config, ConfigError};
use crate::live::{Certificate, Snapshot};
use crate::logging::LogReload;
use crate::lost_hits::LostHits;
use crate::origin::OriginError;
use crate::server::tls::{self, CertificateError};
use crate::sites::Sites;
use crate::tuning::{Models, Tuning, mode_of};
use crate::upgrade::{UpgradeError, Upgrader};

pub use crate::server::{LiveParts, Stop};

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
    /// A certificate file of the TLS listener does not load; names the key and the file.
    #[error("{0}")]
    Certificate(#[from] CertificateError),
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
    /// The diagnostic log's filter, for `log.level`; `None` where the process's subscriber
    /// is not this crate's (an embedding program, the tests).
    log: Option<LogReload>,
}

impl Reloader {
    /// A reloader of `path` into `parts`, applying `log.level` through `log`.
    pub fn new(path: Option<PathBuf>, parts: LiveParts, log: Option<LogReload>) -> Reloader {
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

    /// Applies `next` over the running config. The whole next snapshot is built first;
    /// only then is anything swapped, so a failure changes nothing.
    pub async fn apply(&self, next: Config) -> Result<(), ReloadError> {
        let current = self.parts.live.load_full();
        let running = &current.settings;
        let (next, changes) = running.reload(next);
        within_running_max_size(&next)?;
        if !changes.restart.is_empty() {
            tracing::warn!(
                keys = %changes.restart.join(", "),
                "changed keys need a restart (most apply through an upgrade, SIGUSR2); their running values are kept"
            );
        }
        if running.sites.is_empty()
            && let Some(warning) = next.unknown_hosts_warning()
        {
            tracing::warn!("the reloaded config adds [[site]]s: {warning}");
        }
        let built = self.build(&current, &next).await?;
        // Everything that can fail was built: from here on, nothing fails.
        let tuning = match Models::of(&next) == *current.tuning.models() {
            true => current.tuning.clone(),
            false => {
                let now = tokio::time::Instant::now().into_std();
                Arc::new(Tuning::following(&current.tuning, &next, now))
            }
        };
        let (admission, lost_hits) = match built.admission {
            Some(admission) => {
                if let Some(auto) = &admission.auto {
                    auto.set_mode(mode_of(tuning.current()));
                }
                self.parts.admission.replace(admission);
                let policy = next.admission.policy;
                self.parts.store.keep_ghost(policy.stores_first_sights());
                let lost = LostHits::for_policy(policy, &self.parts.store);
                (self.parts.admission.current(), lost)
            }
            None => (current.admission.clone(), current.lost_hits.clone()),
        };
        (self.parts.store).set_write_rate(next.admission.max_write_rate.unwrap_or(0));
        let log_level_changed = next.log.level != running.log.level;
        let log = next.log.clone();
        let certificates = built.certificates.len();
        self.parts.live.replace(Snapshot {
            settings: Arc::new(next),
            sites: built.sites,
            admission,
            lost_hits,
            tuning,
            access_log: built.access_log,
            certificates: built.certificates,
        });
        if certificates > 0 {
            tracing::info!(certificates, "TLS certificates reloaded");
        }
        if log_level_changed
            && let Some(reload) = &self.log
            && let Err(error) = reload.apply(&log)
        {
            tracing::warn!(%error, "log.level: cannot apply the new level");
        }
        match changes.live.is_empty() {
            true => tracing::info!("config reloaded; nothing to apply"),
            false => tracing::info!(changed = %changes.live.join(", "), "config reloaded"),
        }
        Ok(())
    }

    /// Builds the parts of the next snapshot: those whose keys differ from `current`'s —
    /// the sites with new origin clients, the access log's writer, the admission — new,
    /// the others reused; the certificates read again whenever a TLS listener runs.
    async fn build(&self, current: &Snapshot, next: &Config) -> Result<Built, ReloadError> {
        let running = &current.settings;
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
        let sites = match sites_changed {
            // The servers' health carries over: one that stays keeps its state.
            true => {
                let health = current.sites.health().clone();
                Arc::new(Sites::new(next, &self.parts.metrics, health)?)
            }
            false => current.sites.clone(),
        };
        let access_changed = (
            &next.log.access_log,
            &next.log.access_format,
            &next.log.trusted_proxies,
        ) != (
            &running.log.access_log,
            &running.log.access_format,
            &running.log.trusted_proxies,
        );
        let access_log = match access_changed {
            true => self.parts.access_logs.open(&next.log)?,
            false => current.access_log.clone(),
        };
        // Read whether or not the file names changed: a renewal writes over the same files.
        // `server.tls` needs a restart, so a listener runs exactly when it is still set.
        let certificates = match &next.server.tls {
            Some(tls) if !current.certificates.is_empty() => tls::load(tls)?,
            _ => current.certificates.clone(),
        };
        // The write budget is the store's: a change of it alone keeps the filters.
        let policy_of = |config: &Config| AdmissionConfig {
            max_write_rate: None,
            ..config.admission.clone()
        };
        let admission = match policy_of(next) != policy_of(running) {
            true => Some(self.assemble(next).await?),
            false => None,
        };
        Ok(Built {
            sites,
            access_log,
            certificates,
            admission,
        })
    }

    /// A new admission for `next.admission`.
    async fn assemble(&self, next: &Config) -> Result<Assembled, ReloadError> {
        // Saved first, so that filters of the same size carry over: the new pair restores
        // this snapshot, as after a restart (other sizes start empty).
        self.parts.admission.save_in_background().await;
        let (config, store) = (next.admission.clone(), self.parts.store.clone());
        let built =
            tokio::task::spawn_blocking(move || crate::server::assemble_admission(&config, &store));
        Ok(built.await??)
    }
}

/// Checks `cache.max_object_size` against `cache.max_size`: the file was validated whole,
/// but `cache.max_size` keeps its running value.
fn within_running_max_size(next: &Config) -> Result<(), ConfigError> {
    if next.cache.max_size >= next.cache.max_object_bytes() {
        return Ok(());
    }
    let reason = format!(
        "{} bytes is over the running cache.max_size ({} bytes; changing it needs a restart)",
        next.cache.max_object_bytes(),
        next.cache.max_size
    );
    let key = "cache.max_object_size";
    Err(ConfigError::Invalid { key, reason })
}

/// The parts of the next snapshot besides its settings, built before anything is swapped.
struct Built {
    /// The sites: new ones when an origin, a site, a rule or `server.unknown_host`
    /// changed, else the running ones (their origin pools kept).
    sites: Arc<Sites>,
    /// A new destination's writer when `log.access_log` or `log.access_format` changed,
    /// else the running one.
    access_log: AccessLog,
    /// The TLS listener's certificates, read again (empty without a listener).
    certificates: Arc<[Certificate]>,
    /// The new admission, when `[admission]` changed.
    admission: Option<Assembled>,
}

/// The signals `serve` acts on, installed before it accepts connections.
#[cfg(unix)]
pub struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    user1: tokio::signal::unix::Signal,
    user2: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Installs the handlers for SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 (needs the
    /// tokio runtime).
    pub fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
            user1: signal(SignalKind::user_defined1())?,
            user2: signal(SignalKind::user_defined2())?,
        })
    }

    /// Handles SIGHUP (reload), SIGUSR1 (reopen the access log) and SIGUSR2 (upgrade, with
    /// `upgrader`; refused without one) until SIGTERM or SIGINT arrives ([`Stop::Shutdown`])
    /// or an upgrade's new process is ready ([`Stop::Handover`]): the stop future for
    /// `server::Server::run`. A reload runs to its end before the next signal is looked
    /// at; an upgrade runs beside the signals.
    pub async fn until_stopped(mut self, reloader: Reloader, upgrader: Option<Upgrader>) -> Stop {
        // Dropping it (at SIGTERM) kills a new process not yet ready.
        let mut upgrading = None;
        loop {
            tokio::select! {
                _ = self.terminate.recv() => {
                    tracing::info!(upgrade_abandoned = upgrading.is_some(), "SIGTERM: shutting down");
                    return Stop::Shutdown;
                }
                _ = self.interrupt.recv() => {
                    tracing::info!(upgrade_abandoned = upgrading.is_some(), "SIGINT: shutting down");
                    return Stop::Shutdown;
                }
                _ = self.hangup.recv() => {
                    tracing::info!("SIGHUP: reloading the config");
                    reloader.reload().await;
                }
                _ = self.user1.recv() => {
                    tracing::info!("SIGUSR1: reopening the access log");
                    reloader.parts.live.load().access_log.reopen();
                }
                _ = self.user2.recv() => match (&upgrader, &upgrading) {
                    (None, _) => tracing::warn!(
                        "SIGUSR2: no upgrade: the binary this process was started from is unknown"
                    ),
                    (Some(_), Some(_)) => tracing::warn!(
                        "SIGUSR2: an upgrade is in progress already; this one is ignored"
                    ),
                    (Some(upgrader), None) => {
                        tracing::info!("SIGUSR2: upgrading: starting the new process");
                        upgrading = Some(Box::pin(upgrader.run()));
                    }
                },
                outcome = next_outcome(&mut upgrading), if upgrading.is_some() => {
                    upgrading = None;
                    if handed_over(outcome) {
                        return Stop::Handover;
                    }
                }
            }
        }
    }
}

/// The outcome of the upgrade in progress; pending without one.
#[cfg(unix)]
async fn next_outcome<F>(upgrading: &mut Option<std::pin::Pin<Box<F>>>) -> F::Output
where
    F: std::future::Future,
{
    match upgrading {
        Some(upgrade) => upgrade.await,
        None => std::future::pending().await,
    }
}

/// Logs an upgrade's outcome; true when the new process is ready and this one stops.
#[cfg(unix)]
fn handed_over(outcome: Result<u32, UpgradeError>) -> bool {
    match outcome {
        Ok(pid) => {
            tracing::info!(
                new_pid = pid,
                "upgrade: the new process is ready; no new connections here, handing \
                 the cache directory over, then draining"
            );
            true
        }
        Err(error) => {
            tracing::error!(%error, "upgrade failed; this process serves on as before");
            false
        }
    }
}

/// The file `server.pid_file` names, holding this process's id while it runs.
///
/// Written once the signal handlers are installed, so that whoever reads it (logrotate's
/// `kill -USR1`) never meets a signal's default action, which would end the process.
/// Dropping it removes the file if it still holds this process's id: another process
/// started on the same file since owns it now.
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
    contents: String,
}

impl PidFile {
    /// Writes this process's id to `path`: to a temporary file beside it first, then
    /// renamed into place, so that a reader never sees a half-written number.
    pub fn write(path: &Path) -> std::io::Result<PidFile> {
        let contents = format!("{}\n", std::process::id());
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        // A new file, never one found there (a link an attacker placed would be followed).
        match std::fs::remove_file(&temporary) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        std::io::Write::write_all(&mut file, contents.as_bytes())?;
        drop(file);
        if let Err(error) = std::fs::rename(&temporary, path) {
            let _ = std::fs::remove_file(&temporary);
            return Err(error);
        }
        Ok(PidFile {
            path: path.to_owned(),
            contents,
        })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path).is_ok_and(|text| text == self.contents);
        if ours && let Err(error) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), %error, "cannot remove the pid file");
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
    pub async fn until_stopped(self, reloader: Reloader, upgrader: Option<Upgrader>) -> Stop {
        let _ = (reloader, upgrader);
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
        Stop::Shutdown
    }
}
