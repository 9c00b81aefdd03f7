//! The cache directory lock: `<dir>/secondhit.lock`, held while a store is open.
//!
//! Two processes sharing one cache directory would delete each other's temp
//! files at start-up, evict each other's entries without telling the other's
//! index, and double the byte budget. So [`DirLock::acquire`] takes an
//! exclusive advisory lock (`flock` on Unix, through std's `File::try_lock`) on
//! the lock file and writes the holder's PID into it, so a refused process can
//! name the one in the way. The lock is released when the file is closed — on
//! drop, and by the kernel when the process dies, however it dies — so a crash
//! never leaves a stale lock. The file itself is left in place: removing it
//! would let a newcomer lock a fresh file while an old holder still locks the
//! unlinked one.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use super::StoreError;
use super::disk::io_err;

/// The lock file's name inside the cache directory.
pub(crate) const LOCK_FILE: &str = "secondhit.lock";

/// How often a waiting process tries the lock again.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// The held lock; dropping it releases the directory.
#[derive(Debug)]
pub(crate) struct DirLock {
    /// The open, locked file. Closing it releases the lock.
    _file: File,
}

impl DirLock {
    /// Locks `dir` (which must exist), waiting up to `timeout` for another
    /// holder to let go; then writes this process's PID into the lock file.
    /// Blocks the calling thread while it waits.
    pub(crate) fn acquire(dir: &Path, timeout: Duration) -> Result<DirLock, StoreError> {
        let path = dir.join(LOCK_FILE);
        // No truncation here: until the lock is ours, the PID in it is the holder's.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let waited = started.elapsed();
                    if waited >= timeout {
                        return Err(StoreError::Locked {
                            dir: dir.to_owned(),
                            lock_file: path.clone(),
                            holder: read_holder(&path),
                            waited,
                        });
                    }
                    std::thread::sleep(RETRY_EVERY.min(timeout - waited));
                }
                Err(TryLockError::Error(e)) => return Err(io_err(&path)(e)),
            }
        }
        file.set_len(0).map_err(io_err(&path))?;
        writeln!(file, "{}", std::process::id()).map_err(io_err(&path))?;
        Ok(DirLock { _file: file })
    }
}

/// The PID written by the current holder, if the file holds one.
fn read_holder(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// How a [`StoreError::Locked`] names the holder.
pub(crate) fn describe_holder(holder: &Option<u32>) -> String {
    match holder {
        Some(pid) => format!("pid {pid}"),
        None => "pid unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_waits_then_names_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path(), Duration::ZERO).unwrap();
        let pid = std::process::id();
        assert_eq!(read_holder(&dir.path().join(LOCK_FILE)), Some(pid));
        // flock locks belong to an open file, so a second open in this process conflicts too.
        let err = DirLock::acquire(dir.path(), Duration::from_millis(120)).unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains(&dir.path().display().to_string()), "{shown}");
        assert!(shown.contains(&format!("pid {pid}")), "{shown}");
        assert!(
            matches!(err, StoreError::Locked { waited, .. } if waited >= Duration::from_millis(120))
        );
        drop(first);
        let again = DirLock::acquire(dir.path(), Duration::ZERO).unwrap();
        drop(again);
    }
}
