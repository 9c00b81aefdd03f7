//! The binary upgrade SIGUSR2 asks for: a new process takes over the listening sockets
//! while the running one drains, as nginx's `USR2` does.
//!
//! The running process ([`Upgrader::run`]) starts the binary it was started from (its
//! path resolved at start-up: after a package upgrade `/proc/self/exe` names a deleted
//! file) with the same arguments, passing its listening sockets as systemd would, on file
//! descriptors 3, 4, … with `LISTEN_FDS` and `LISTEN_FDNAMES` (`server::Listeners::open`
//! reads them; `LISTEN_PID` unset, which `listenfd` takes as "for this process"), and the
//! write end of a pipe, named by [`READY_FD`]. The new process does every step that can fail
//! without the cache directory — the config, the listeners, the origin clients, the access
//! log, the certificates — and then writes `ready` on the pipe ([`Handoff::ready`]).
//!
//! Until then nothing changed: if it exits first, closes the pipe without a word, or is not
//! ready within [`READY_TIMEOUT`] (then it is killed), the running process logs why and
//! goes on serving. Once it is ready, the running process stops accepting (the kernel
//! queues new connections on the shared sockets for the new one), saves the admission
//! filters and hands the cache directory over at once (`server::Stop::Handover`: its
//! store closes, syncs and releases the directory's lock without waiting for the open
//! connections), then drains them as at a shutdown and exits; the new process waits for
//! that lock (`cache.lock_timeout` plus `server.shutdown_timeout`), opens the store,
//! restores the filters and accepts. The store is never open in two processes at once.

use std::ffi::OsString;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use command_fds::{CommandFdExt, FdMapping};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

/// The environment variable naming the file descriptor of the readiness pipe in a process
/// an upgrade started.
pub const READY_FD: &str = "SECONDHIT_UPGRADE_READY_FD";

/// What the new process writes on the pipe once it is ready.
const READY: &[u8] = b"ready\n";

/// What the new process writes before the reason when it cannot start.
const FAILED: &str = "failed: ";

/// The most of the pipe read: a reason is one line.
const SAID_MAX: u64 = 4096;

/// How long the new process may take to get ready before it is killed and the upgrade
/// given up: its steps read files and build clients, and take well under a second.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The first file descriptor the sockets are passed on, as with systemd.
const FIRST_FD: RawFd = 3;

/// Why an upgrade was given up; the running process serves on.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The sockets or the pipe could not be set up for the new process.
    #[error("cannot pass the listening sockets: {0}")]
    Pass(std::io::Error),
    /// The binary could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The binary.
        program: String,
        /// Why not.
        source: std::io::Error,
    },
    /// The new process cannot start, and says why.
    #[error("the new process (pid {pid}) cannot start: {reason}")]
    Refused {
        /// Its pid.
        pid: u32,
        /// Its error.
        reason: String,
    },
    /// The new process ended before it was ready (its own log says why).
    #[error("the new process (pid {pid}) exited before it was ready ({status})")]
    Exited {
        /// Its pid.
        pid: u32,
        /// How it ended.
        status: ExitStatus,
    },
    /// The new process closed the pipe without reporting ready.
    #[error(
        "the new process (pid {pid}) closed its readiness pipe without reporting ready; it was killed"
    )]
    Silent {
        /// Its pid.
        pid: u32,
    },
    /// The new process was not ready in time.
    #[error("the new process (pid {pid}) was not ready within {READY_TIMEOUT:?}; it was killed")]
    TimedOut {
        /// Its pid.
        pid: u32,
    },
    /// Reading the pipe or waiting for the process failed.
    #[error("the new process (pid {pid}): {source}")]
    Wait {
        /// Its pid.
        pid: u32,
        /// Why.
        source: std::io::Error,
    },
}

/// Starts the new process of an upgrade, in the running one.
#[derive(Debug)]
pub struct Upgrader {
    /// The binary this process was started from.
    program: PathBuf,
    /// This process's arguments, after the program's name.
    args: Vec<OsString>,
    /// The listening sockets, named by role (`server::Listeners::passable`).
    sockets: Vec<(&'static str, OwnedFd)>,
}

impl Upgrader {
    /// An upgrader that starts `program` with `args`, passing `sockets`.
    pub fn new(
        program: PathBuf,
        args: Vec<OsString>,
        sockets: Vec<(&'static str, OwnedFd)>,
    ) -> Upgrader {
        Upgrader {
            program,
            args,
            sockets,
        }
    }

    /// Starts the new process and waits until it is ready: `Ok` with its pid, or why it
    /// was given up (a process that did not get ready is killed). Dropping the future
    /// kills a process not yet ready.
    pub async fn run(&self) -> Result<u32, UpgradeError> {
        let (sender, mut receiver) = tokio::net::unix::pipe::pipe().map_err(UpgradeError::Pass)?;
        let ready_end = sender.into_blocking_fd().map_err(UpgradeError::Pass)?;
        let mut command = self.command(ready_end)?;
        let child = command.spawn().map_err(|source| UpgradeError::Spawn {
            program: self.program.display().to_string(),
            source,
        })?;
        // Closes this process's copies of the passed descriptors (the pipe's write end
        // among them), so that the pipe ends when the new process closes it or dies.
        drop(command);
        let mut starting = Starting(Some(child));
        let pid = starting.pid();
        let mut said = Vec::new();
        // Read to the end: the new process closes the pipe after its one message.
        let read = tokio::time::timeout(READY_TIMEOUT, async {
            let mut limited = (&mut receiver).take(SAID_MAX);
            limited.read_to_end(&mut said).await
        });
        match read.await {
            Err(_) => return Err(UpgradeError::TimedOut { pid }),
            Ok(Err(source)) => return Err(UpgradeError::Wait { pid, source }),
            Ok(Ok(_)) if said == READY => return Ok(starting.detach()),
            Ok(Ok(_)) => {}
        }
        let said = String::from_utf8_lossy(&said);
        if let Some(reason) = said.strip_prefix(FAILED) {
            let reason = reason.trim_end().to_owned();
            return Err(UpgradeError::Refused { pid, reason });
        }
        // Closed without a word: it exited, or will be killed on return.
        let exited = tokio::time::timeout(Duration::from_millis(500), starting.wait()).await;
        match exited {
            Ok(Ok(status)) => Err(UpgradeError::Exited { pid, status }),
            Ok(Err(source)) => Err(UpgradeError::Wait { pid, source }),
            Err(_) => Err(UpgradeError::Silent { pid }),
        }
    }

    /// The command of the new process, with the sockets and `ready_end` on its
    /// descriptors 3, 4, ….
    fn command(&self, ready_end: OwnedFd) -> Result<Command, UpgradeError> {
        let count = self.sockets.len();
        let names: Vec<&str> = self.sockets.iter().map(|(name, _)| *name).collect();
        let mut mappings = Vec::with_capacity(count + 1);
        for (child_fd, (_, socket)) in (FIRST_FD..).zip(&self.sockets) {
            let parent_fd = socket.try_clone().map_err(UpgradeError::Pass)?;
            mappings.push(FdMapping {
                parent_fd,
                child_fd,
            });
        }
        let ready_fd = FIRST_FD + RawFd::try_from(count).unwrap_or(RawFd::MAX - FIRST_FD);
        mappings.push(FdMapping {
            parent_fd: ready_end,
            child_fd: ready_fd,
        });
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env("LISTEN_FDS", count.to_string())
            .env("LISTEN_FDNAMES", names.join(":"))
            .env_remove("LISTEN_PID")
            .env_remove("LISTEN_FDS_FIRST_FD")
            .env(READY_FD, ready_fd.to_string())
            .stdin(Stdio::null());
        command.fd_mappings(mappings).map_err(|collision| {
            UpgradeError::Pass(std::io::Error::other(collision.to_string()))
        })?;
        Ok(command)
    }
}

/// A new process not yet ready: killed if dropped so.
struct Starting(Option<Child>);

impl Starting {
    fn pid(&self) -> u32 {
        self.0.as_ref().and_then(Child::id).unwrap_or_default()
    }

    /// Waits for it to exit.
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match &mut self.0 {
            Some(child) => child.wait().await,
            None => Err(std::io::Error::other("not started")),
        }
    }

    /// It is ready: it lives on, this process no longer waits for it. Returns its pid.
    fn detach(mut self) -> u32 {
        let pid = self.pid();
        self.0 = None;
        pid
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            // Exited already, or being killed: either way it serves nothing.
            let _ = child.start_kill();
        }
    }
}

/// The readiness pipe of a process an upgrade started.
#[derive(Debug)]
pub struct Handoff {
    ready: std::fs::File,
}

impl Handoff {
    /// The pipe [`READY_FD`] names, if this process was started by an upgrade; an error
    /// when the variable names no pipe.
    pub fn from_env() -> Option<Result<Handoff, String>> {
        let value = std::env::var_os(READY_FD)?;
        Some(Handoff::open(&value))
    }

    fn open(value: &std::ffi::OsStr) -> Result<Handoff, String> {
        let shown = value.to_string_lossy();
        let fd: RawFd = shown
            .parse()
            .map_err(|_| format!("{READY_FD}={shown} is not a file descriptor"))?;
        // SAFETY: only looked at through the borrow, which ends before anything closes it.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let stat =
            rustix::fs::fstat(borrowed).map_err(|error| format!("{READY_FD}={fd}: {error}"))?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Fifo {
            return Err(format!("{READY_FD}={fd} is not a pipe"));
        }
        rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::CLOEXEC)
            .map_err(|error| format!("{READY_FD}={fd}: {error}"))?;
        // SAFETY: the descriptor is open (fstat succeeded) and the process that started
        // this one passed it for this process to own; nothing else here uses it.
        let ready = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Handoff { ready })
    }

    /// Tells the running process that this one is ready to take over, and closes the pipe.
    pub fn ready(mut self) -> std::io::Result<()> {
        std::io::Write::write_all(&mut self.ready, READY)
    }

    /// Tells the running process why this one cannot start (it serves on), and closes the
    /// pipe. A pipe the running process no longer reads is no matter: it gave up already.
    pub fn failed(mut self, reason: &str) {
        let line = format!("{FAILED}{}\n", reason.replace('\n', " "));
        let _ = std::io::Write::write_all(&mut self.ready, line.as_bytes());
    }
}
