//! How many entry files the store may keep open (`cache.open_files`), within the
//! process's open-file limit: every client and origin connection needs a descriptor
//! too, and running out of them makes `accept` fail.
//!
//! The held files are not the store's only descriptors: each body of at least
//! [`MAPPED_BODY_MIN`] in the memory tier is a sealed memory file, kept open (to send
//! it with `sendfile`), so `cache.memory_size` can account for up to one descriptor per
//! that many bytes beside the held files.

use std::os::fd::RawFd;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use tracing::{debug, warn};

use crate::store::mapped::MAPPED_BODY_MIN;

/// `configured` open entry files, or fewer: at most what the `mapped` bodies the memory
/// tier may hold (each a memory file kept open) leave of half the open-file limit (the other
/// half stays for connections, logs and the store's own work). The mapped bodies are
/// not limited here: when they alone may take half, no file is held and a warning
/// says to raise the limit or lower `cache.memory_size`.
///
/// The soft limit is raised to the hard one first, as nginx's `worker_rlimit_nofile`
/// and Go's runtime do: a shell's default soft limit of 1024 is a leftover of
/// `select(2)`, which nothing here uses, while the hard limit is what the operator
/// (or the systemd unit's `LimitNOFILE`) granted.
pub(super) fn budget(configured: usize, mapped: u64) -> usize {
    if let Err(error) = raise_soft_limit() {
        debug!(%error, "open-file limit left as it was");
    }
    // `None`: unlimited.
    let Some(limit) = getrlimit(Resource::Nofile).current else {
        return configured;
    };
    let half = limit / 2;
    if mapped >= half {
        warn!(
            mapped_bodies = mapped,
            limit,
            "the open-file limit is too low: the memory tier (cache.memory_size) may keep \
             mapped_bodies bodies mapped, one open file each, which is half the limit or \
             more, so no entry file is kept open between hits (cache.open_files is not \
             used); raise the limit (systemd: LimitNOFILE) or lower cache.memory_size"
        );
        return 0;
    }
    let room = usize::try_from(half - mapped).unwrap_or(usize::MAX);
    if configured > room {
        warn!(
            open_files = configured,
            mapped_bodies = mapped,
            limit,
            using = room,
            "the open-file limit is too low for cache.open_files: with the memory tier's \
             mapped bodies (one open file each), they would take more than half of it, so \
             only `using` entry files are kept open between hits; raise the limit \
             (systemd: LimitNOFILE) to keep cache.open_files open"
        );
        return room;
    }
    configured
}

/// Raises the open-file soft limit to the hard one (see [`budget`]).
fn raise_soft_limit() -> rustix::io::Result<()> {
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    if current != maximum {
        let raised = Rlimit {
            current: maximum,
            maximum,
        };
        setrlimit(Resource::Nofile, raised)?;
        debug!(
            ?current,
            ?maximum,
            "open-file limit raised to the hard limit"
        );
    }
    Ok(())
}

/// The most descriptors [`reserve_descriptor_table`] makes room for: the systemd unit's
/// `LimitNOFILE`, a table of half a megabyte in the kernel.
const TABLE_RESERVE_MAX: u64 = 65_536;

/// Raises the open-file soft limit to the hard one and has the kernel make room in the
/// process's descriptor table for that many descriptors (at most 65,536),
/// returning how many. Call it while the process has a single thread.
///
/// The kernel grows the table by doubling it, when a new descriptor does not fit, and
/// never shrinks it; in a process of several threads each growth waits for an RCU grace
/// period, tens of milliseconds, in the system call that needed the room: on a worker,
/// with every request of that worker (`benches/RESULTS.md`, "the descriptor table grown
/// at start"). With one thread it does not wait.
pub fn reserve_descriptor_table() -> std::io::Result<u64> {
    raise_soft_limit()?;
    let limit = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let room = limit.min(TABLE_RESERVE_MAX);
    let Ok(highest) = RawFd::try_from(room.saturating_sub(1)) else {
        return Ok(0);
    };
    let null = std::fs::File::open("/dev/null")?;
    // The lowest free descriptor at or above `highest`: the table grows to hold it, and
    // keeps that size once it is closed.
    drop(rustix::io::fcntl_dupfd_cloexec(&null, highest)?);
    Ok(room)
}

/// How many bodies the memory tier of `memory_size` bytes may hold mapped, each with
/// its entry file open: none when it keeps no body of [`MAPPED_BODY_MIN`] or more.
pub(super) fn mapped_bodies(memory_size: u64, memory_max_object_size: u64) -> u64 {
    if memory_max_object_size < MAPPED_BODY_MIN {
        return 0;
    }
    memory_size / MAPPED_BODY_MIN
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots of this process's descriptor table, from `/proc/self/status`.
    fn table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|line| line.starts_with("FDSize:"));
        line.and_then(|line| line["FDSize:".len()..].trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn the_descriptor_table_is_grown_to_the_open_file_limit_at_most_the_cap() {
        let room = reserve_descriptor_table().unwrap();
        let limit = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        assert_eq!(room, limit.min(TABLE_RESERVE_MAX));
        assert!(table_size() >= room, "{} slots for {room}", table_size());
    }

    #[test]
    fn held_files_and_mapped_bodies_stay_within_half_the_open_file_limit() {
        // After the first call, the soft limit is what `budget` raised it to.
        let small = budget(8, 0);
        let Some(limit) = getrlimit(Resource::Nofile).current else {
            eprintln!("skipped the clamp checks: this process has no open-file limit");
            assert_eq!(budget(usize::MAX, u64::MAX), usize::MAX);
            return;
        };
        let half = limit / 2;
        let as_count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        assert_eq!(small, 8.min(as_count(half)));
        assert_eq!(budget(usize::MAX, 0), as_count(half));
        assert_eq!(budget(as_count(half), 0), as_count(half));
        // The mapped bodies take their share first.
        let mapped = half / 2;
        assert_eq!(budget(usize::MAX, mapped), as_count(half - mapped));
        assert_eq!(budget(1, mapped), 1.min(as_count(half - mapped)));
        assert_eq!(budget(usize::MAX, half), 0, "no room left");
    }

    #[test]
    fn mapped_bodies_count_one_descriptor_per_smallest_mapped_body() {
        let memory_size = 64 * 1024 * 1024;
        assert_eq!(mapped_bodies(memory_size, 256 * 1024), 1024);
        assert_eq!(mapped_bodies(memory_size, MAPPED_BODY_MIN), 1024);
        assert_eq!(
            mapped_bodies(memory_size, MAPPED_BODY_MIN - 1),
            0,
            "none mapped"
        );
        assert_eq!(mapped_bodies(0, 256 * 1024), 0, "the tier is off");
    }
}
