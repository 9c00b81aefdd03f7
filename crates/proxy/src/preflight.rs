//! What `serve` needs from this machine beyond a valid file: the run-as user and group, a
//! usable cache directory, an access log directory, and memory for the filters.
//!
//! [`crate::config::Config::load`] checks the file alone. [`check`] checks it against the
//! machine it is about to run on, so `check-config` refuses everything `serve` would refuse
//! at start-up (listening sockets aside: a running instance may hold them) and `serve`
//! refuses it with the same words before it binds anything. Every error names the key.
//!
//! Writability is judged for the account secondhit will run as (`server.user` when set,
//! otherwise the current one) from the permission bits and the owner, as the kernel would
//! for that account without ACLs; root as the run-as account may write anywhere that is not
//! mounted read-only.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::unistd::{Gid, Group, Uid, User};

use crate::admission::{self, AgingPair};
use crate::config::{AccessLog, Config, FilterSizing};

/// The account secondhit runs as after binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// `server.user`, as given.
    pub user: String,
    /// Its user id.
    pub uid: Uid,
    /// `server.group`'s id, or the user's primary group.
    pub gid: Gid,
}

/// A reason `serve` would refuse to start on this machine.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct PreflightError {
    /// The config key at fault.
    pub key: &'static str,
    /// What is wrong, and what to do about it.
    pub reason: String,
}

fn refuse(key: &'static str, reason: String) -> PreflightError {
    PreflightError { key, reason }
}

/// Checks `config` against this machine; returns the account to switch to after binding
/// (`None`: stay who started the process).
pub fn check(config: &Config) -> Result<Option<RunAs>, PreflightError> {
    let run_as = run_as(
        config.server.user.as_deref(),
        config.server.group.as_deref(),
    )?;
    let (uid, gids) = match &run_as {
        Some(account) => (account.uid, vec![account.gid]),
        None => (Uid::effective(), current_groups()),
    };
    let account = Account { uid, gids };
    check_cache_dir(&config.cache.dir, &account)?;
    if let AccessLog::File(path) = &config.log.access_log {
        check_log_file(path, &account)?;
    }
    check_filter_memory(config)?;
    Ok(run_as)
}

/// The ids of `user` and `group` on this machine.
fn run_as(user: Option<&str>, group: Option<&str>) -> Result<Option<RunAs>, PreflightError> {
    let Some(user) = user else {
        if group.is_some() {
            let reason = "is set without server.user; set server.user too (the group \
                          is taken on when the user is)"
                .to_owned();
            return Err(refuse("server.group", reason));
        }
        return Ok(None);
    };
    let found = User::from_name(user)
        .map_err(|error| refuse("server.user", format!("cannot look up {user:?}: {error}")))?
        .ok_or_else(|| refuse("server.user", format!("no user {user:?} on this machine")))?;
    let gid = match group {
        None => found.gid,
        Some(group) => {
            Group::from_name(group)
                .map_err(|error| {
                    refuse("server.group", format!("cannot look up {group:?}: {error}"))
                })?
                .ok_or_else(|| {
                    refuse(
                        "server.group",
                        format!("no group {group:?} on this machine"),
                    )
                })?
                .gid
        }
    };
    Ok(Some(RunAs {
        user: user.to_owned(),
        uid: found.uid,
        gid,
    }))
}

fn current_groups() -> Vec<Gid> {
    let mut gids = nix::unistd::getgroups().unwrap_or_default();
    gids.push(Gid::effective());
    gids
}

/// Who will write: a user id and its groups.
struct Account {
    uid: Uid,
    gids: Vec<Gid>,
}

impl Account {
    /// Whether the permission bits of `meta` let this account write (and, for a directory,
    /// enter) it.
    fn may_write(&self, meta: &Metadata) -> bool {
        if self.uid.is_root() {
            return true;
        }
        let mode = meta.mode();
        let (write, search) = if meta.uid() == self.uid.as_raw() {
            (0o200, 0o100)
        } else if self.gids.iter().any(|gid| gid.as_raw() == meta.gid()) {
            (0o020, 0o010)
        } else {
            (0o002, 0o001)
        };
        let needed = if meta.is_dir() { write | search } else { write };
        mode & needed == needed
    }
}

/// `cache.dir`: a directory this account can write, or one it can create.
fn check_cache_dir(dir: &Path, account: &Account) -> Result<(), PreflightError> {
    const KEY: &str = "cache.dir";
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => Err(refuse(
            KEY,
            format!("{shown} exists and is not a directory"),
        )),
        Ok(meta) => {
            if !account.may_write(&meta) {
                return Err(refuse(
                    KEY,
                    format!(
                        "{shown} is not writable by the user secondhit runs as (uid {})",
                        account.uid
                    ),
                ));
            }
            check_not_read_only(KEY, dir)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let (ancestor, meta) = existing_ancestor(KEY, dir)?;
            if !meta.is_dir() {
                let reason = format!(
                    "{shown} cannot be created: {} is not a directory",
                    ancestor.display()
                );
                return Err(refuse(KEY, reason));
            }
            if !account.may_write(&meta) {
                let reason = format!(
                    "{shown} does not exist and cannot be created: {} is not writable by the \
                     user secondhit runs as (uid {})",
                    ancestor.display(),
                    account.uid
                );
                return Err(refuse(KEY, reason));
            }
            check_not_read_only(KEY, &ancestor)
        }
        Err(error) => Err(refuse(KEY, format!("{shown}: {error}"))),
    }
}

/// `log.access_log` as a file: the file writable, or its directory writable to create it.
fn check_log_file(path: &Path, account: &Account) -> Result<(), PreflightError> {
    const KEY: &str = "log.access_log";
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(refuse(KEY, format!("{shown} is a directory"))),
        Ok(meta) if !account.may_write(&meta) => Err(refuse(
            KEY,
            format!(
                "{shown} is not writable by the user secondhit runs as (uid {})",
                account.uid
            ),
        )),
        Ok(_) => check_not_read_only(KEY, path),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let parent = path.parent().unwrap_or(Path::new("/"));
            match std::fs::metadata(parent) {
                Ok(meta) if meta.is_dir() && account.may_write(&meta) => {
                    check_not_read_only(KEY, parent)
                }
                Ok(_) => Err(refuse(
                    KEY,
                    format!(
                        "{shown} cannot be created: {} is not a directory writable by the user \
                         secondhit runs as (uid {})",
                        parent.display(),
                        account.uid
                    ),
                )),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Err(refuse(
                    KEY,
                    format!(
                        "{shown} cannot be created: {} does not exist",
                        parent.display()
                    ),
                )),
                Err(error) => Err(refuse(KEY, format!("{}: {error}", parent.display()))),
            }
        }
        Err(error) => Err(refuse(KEY, format!("{shown}: {error}"))),
    }
}

/// The nearest existing ancestor of `path`, with its metadata.
fn existing_ancestor(
    key: &'static str,
    path: &Path,
) -> Result<(PathBuf, Metadata), PreflightError> {
    let mut candidate = path.parent();
    while let Some(dir) = candidate {
        // `Path::parent` of a relative path ends in "", which means the current directory.
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        match std::fs::metadata(dir) {
            Ok(meta) => return Ok((dir.to_owned(), meta)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                candidate = dir.parent();
            }
            Err(error) => return Err(refuse(key, format!("{}: {error}", dir.display()))),
        }
    }
    Err(refuse(key, format!("no part of {} exists", path.display())))
}

/// A file system mounted read-only refuses every write, root's included.
fn check_not_read_only(key: &'static str, path: &Path) -> Result<(), PreflightError> {
    match rustix::fs::statvfs(path) {
        Ok(stats) if stats.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY) => Err(refuse(
            key,
            format!("{} is on a file system mounted read-only", path.display()),
        )),
        // Unknown is not refused: the write at start-up will tell.
        _ => Ok(()),
    }
}

/// The filters must fit in this machine's memory (they are allocated whole at start).
fn check_filter_memory(config: &Config) -> Result<(), PreflightError> {
    let Some(params) = admission::filter_params(&config.admission) else {
        return Ok(());
    };
    let needed = AgingPair::memory_for(&params);
    let Some(total) = total_memory() else {
        return Ok(());
    };
    if needed <= total {
        return Ok(());
    }
    let key = match config.admission.sizing {
        FilterSizing::ExpectedUrls(_) => "admission.expected_urls",
        FilterSizing::Memory(_) => "admission.memory",
    };
    Err(refuse(
        key,
        format!(
            "the filters need {needed} bytes (three filters of {} bytes), more than this \
             machine's {total} bytes of memory; lower it",
            params.filter_bytes()
        ),
    ))
}

/// `MemTotal` of `/proc/meminfo`, in bytes; `None` where it cannot be read.
fn total_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests;
