//! Dropping root after the listening sockets are bound (`server.user`, `server.group`).
//!
//! The order is the one every privilege-separating server uses: supplementary groups
//! first (only root may set them), then the group, then the user — after `setuid` the
//! process could no longer change its groups. The calls go through libc, whose `setuid`
//! changes every thread of the process (a raw system call would change only the calling
//! one), though secondhit calls this before its runtime starts any thread. Afterwards the
//! switch is checked: getting root back must fail.

use nix::unistd::{Gid, Uid, setgid, setgroups, setuid};

use super::StartError;
use crate::preflight::{PreflightError, RunAs};

/// Switches the process to `run_as` for good. Already running as that account (user and
/// group) is fine and changes nothing; any other account needs root.
pub fn drop_to(run_as: &RunAs) -> Result<(), StartError> {
    if Uid::effective() == run_as.uid && Gid::effective() == run_as.gid {
        return Ok(());
    }
    let user = &run_as.user;
    if !Uid::effective().is_root() {
        let reason = format!(
            "cannot switch to {user:?}: only root can, and secondhit runs as uid {}",
            Uid::effective()
        );
        return Err(refuse("server.user", reason));
    }
    setgroups(&[run_as.gid]).map_err(|errno| {
        refuse(
            "server.group",
            format!("cannot set the supplementary groups: {errno}"),
        )
    })?;
    setgid(run_as.gid).map_err(|errno| {
        refuse(
            "server.group",
            format!("cannot switch to gid {}: {errno}", run_as.gid),
        )
    })?;
    setuid(run_as.uid)
        .map_err(|errno| refuse("server.user", format!("cannot switch to {user:?}: {errno}")))?;
    if !run_as.uid.is_root() && setuid(Uid::from_raw(0)).is_ok() {
        let reason = format!("switched to {user:?}, but root could be taken back; refusing to run");
        return Err(refuse("server.user", reason));
    }
    tracing::info!(user = %user, uid = %run_as.uid, gid = %run_as.gid, "dropped privileges");
    Ok(())
}

fn refuse(key: &'static str, reason: String) -> StartError {
    StartError::Preflight(PreflightError { key, reason })
}
