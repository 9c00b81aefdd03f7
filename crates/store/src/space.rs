//! Room on the cache's filesystem: the `cache.min_free` floor, kept by evicting before
//! writing, and the back-off after a write failed for lack of space or with an I/O error.
//!
//! The byte budget (`cache.max_size`) counts only the cache's own files; the disk can
//! still fill up with other files, or be smaller than the budget. So before a fill
//! reserves bytes, [`Space::check`] compares the filesystem's free space (`statvfs`)
//! with the floor plus what the fill needs. The reading is cached, not taken per
//! request: it is refreshed when it is [`REFRESH_AFTER`] old, or once the bytes
//! reserved since it could have used a quarter of the headroom above the floor (so
//! the nearer the floor, the fresher the reading; inodes likewise). Between readings,
//! reserved bytes are subtracted and evicted ones added back, rounded to the
//! filesystem's blocks. A new reading forgets reservations not yet written, so the
//! estimate can run over by what fills in flight have still to write; a write that
//! then meets a full disk is the back-off's case.
//! Inodes are kept the same way: a new fill needs up to [`INODES_PER_FILL`], and the
//! floor keeps the same share of the filesystem's inodes free as `min_free` is of its
//! bytes (a filesystem that reports no inode limit has no inode floor).
//!
//! When a write fails with `ENOSPC`, `EDQUOT` or `EIO` ([`Trouble::of`]), new fills
//! back off: none starts for [`BACKOFF_MIN`], doubling up to [`BACKOFF_MAX`] while
//! failures repeat, and a fill that commits ends the back-off. Once a back-off period
//! is over, a fresh reading decides whether the next fill may try. Each back-off
//! period is logged once, at warn; fills refused meanwhile are counted, not logged.
//! Nothing here is on the hit path: only fills ask.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use tracing::{debug, info, warn};

use super::{Inner, StoreError};
use crate::throttle::Throttle;

/// A reading older than this is taken again before it is trusted.
pub(super) const REFRESH_AFTER: Duration = Duration::from_millis(100);
/// The first back-off period after a write failed.
pub(super) const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// The longest back-off period, reached by doubling while failures repeat.
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Inodes a new fill may take: its file, and `objects/a/` and `objects/a/bc/` when
/// it must make them (it reserves before it makes them, so that a disk short of
/// inodes evicts for them rather than refusing the fill at the `mkdir`).
pub(super) const INODES_PER_FILL: u64 = 3;
/// Directories under `objects/` at most: 16 of `objects/a/` and the 4,096 of `objects/a/bc/`.
const ENTRY_DIRS: u64 = 16 + crate::leaf_dirs::LEAVES as u64;

/// Throttles the line about a failing `statvfs`, which every fill would otherwise write.
static STATVFS_LOG: Throttle = Throttle::new();

/// A write failure that says the disk cannot take fills for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trouble {
    /// `ENOSPC` (no blocks or no inodes left) or `EDQUOT`.
    NoSpace,
    /// `EIO`: the device failed the write.
    Io,
}

impl Trouble {
    /// The trouble an I/O error reports, if it is one that more fills would only repeat.
    pub fn of(error: &io::Error) -> Option<Trouble> {
        match Errno::from_io_error(error)? {
            Errno::NOSPC | Errno::DQUOT => Some(Trouble::NoSpace),
            Errno::IO => Some(Trouble::Io),
            _ => None,
        }
    }
}

/// One `statvfs` of the cache directory's filesystem, and what was reserved and freed
/// since.
#[derive(Clone, Copy, Debug)]
struct Reading {
    at: Instant,
    /// Bytes available to an unprivileged writer (`f_bavail`).
    free_bytes: u64,
    /// Inodes available (`f_favail`); `None` when the filesystem reports no limit.
    free_inodes: Option<u64>,
    /// The inode floor derived from `min_free` (see the module docs).
    inode_floor: u64,
    /// The fundamental block size: freed and reserved bytes are rounded up to it.
    block: u64,
    /// Bytes reserved since the reading, minus bytes evicted since.
    spent: i128,
    /// Inodes taken since the reading, minus inodes freed since.
    spent_inodes: i128,
}

impl Reading {
    fn estimated_free(&self) -> (i128, Option<i128>) {
        let bytes = i128::from(self.free_bytes) - self.spent;
        let inodes = self.free_inodes.map(|n| i128::from(n) - self.spent_inodes);
        (bytes, inodes)
    }
}

/// The back-off state: when new fills may start again, and how long the next period is.
#[derive(Clone, Copy, Debug, Default)]
struct Backoff {
    /// New fills wait until then; `None` when no back-off is running.
    until: Option<Instant>,
    /// The last period's length; zero once a fill committed.
    period: Duration,
    /// What started the back-off.
    cause: Option<Trouble>,
}

impl Backoff {
    /// Whether new fills must wait at `now`.
    fn holds(&self, now: Instant) -> bool {
        self.until.is_some_and(|until| now < until)
    }

    /// Records a failure at `now`; returns the new period when this failure starts one
    /// (a failure during a running period belongs to it and changes nothing).
    fn fail(&mut self, trouble: Trouble, now: Instant) -> Option<Duration> {
        if self.holds(now) {
            return None;
        }
        self.period = if self.period.is_zero() {
            BACKOFF_MIN
        } else {
            (self.period * 2).min(BACKOFF_MAX)
        };
        self.until = Some(now + self.period);
        self.cause = Some(trouble);
        Some(self.period)
    }

    /// A fill committed: the disk takes writes again.
    fn succeed(&mut self) {
        *self = Backoff::default();
    }
}

/// How much more room a fill's reservation needs than the filesystem has above the floor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Shortfall {
    /// Bytes to free.
    pub bytes: u64,
    /// Inodes to free.
    pub inodes: u64,
}

/// What the store could free by evicting every entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Evictable {
    /// Entries in the index (one inode each).
    pub objects: u64,
    /// Bytes of their files.
    pub bytes: u64,
}

/// Whether a fill may reserve now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// There is room above the floor.
    Room,
    /// Evicting entries would make room; this much is missing.
    Short(Shortfall),
    /// Evicting every entry would not make room: other files fill the disk.
    Hopeless(Shortfall),
    /// New fills are backing off after a failure of this kind; retry in this long.
    BackingOff(Trouble, Duration),
}

/// The disk-space figures, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Free bytes at the last reading (0 before the first).
    pub free_bytes: u64,
    /// Free inodes at the last reading (`None`: no reading, or no inode limit).
    pub free_inodes: Option<u64>,
    /// True while new fills are held back after a write failed.
    pub backing_off: bool,
    /// Fills not started because the disk had no room above `cache.min_free` that
    /// eviction could make, or because fills were backing off.
    pub refused_fills: u64,
    /// Writes that failed with `ENOSPC`, `EDQUOT` or `EIO`.
    pub write_failures: u64,
}

/// The free-space floor and the back-off of one store (see the module docs).
#[derive(Debug)]
pub(super) struct Space {
    /// The cache directory: `statvfs` reads its filesystem.
    dir: PathBuf,
    /// `cache.min_free`.
    min_free: u64,
    state: Mutex<State>,
    /// See [`DiskStats::refused_fills`]. Relaxed: a plain counter.
    refused: AtomicU64,
    /// See [`DiskStats::write_failures`]. Relaxed: a plain counter.
    failures: AtomicU64,
    /// Body bytes that fills hold in memory for a later write, beyond the room they
    /// allocated on the disk: taken and counted in their reservations, but not yet in
    /// what `statvfs` reports, so a new reading starts with them spent.
    unwritten: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// The last reading; kept for metrics even when `statvfs` failed since.
    reading: Option<Reading>,
    /// Set when a write failed: the disk is not what the reading says, so the next
    /// check reads it again.
    reread: bool,
    backoff: Backoff,
}

impl Space {
    /// The floor of the filesystem holding `dir`, keeping `min_free` bytes free.
    pub(super) fn new(dir: PathBuf, min_free: u64) -> Space {
        Space {
            dir,
            min_free,
            state: Mutex::new(State::default()),
            refused: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            unwritten: AtomicU64::new(0),
        }
    }

    /// A fill holds `bytes` more in memory, to be written later (see `unwritten`).
    pub(super) fn hold_unwritten(&self, bytes: u64) {
        self.unwritten.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A fill wrote (or dropped) `bytes` it held.
    pub(super) fn release_unwritten(&self, bytes: u64) {
        self.unwritten.fetch_sub(bytes, Ordering::Relaxed);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `bytes` more (and, for a new fill, its inodes) fit above the floor at
    /// `now`, or evicting some of `evictable` would make them fit; a new fill is also
    /// held back while fills back off. Room found is counted as spent until the next
    /// reading.
    pub(super) fn check(
        &self,
        bytes: u64,
        new_fill: bool,
        evictable: Evictable,
        now: Instant,
    ) -> Verdict {
        let mut state = self.state();
        if new_fill && let Some(until) = state.backoff.until.filter(|&u| now < u) {
            let cause = state.backoff.cause.unwrap_or(Trouble::NoSpace);
            // Whole milliseconds: the figure is for people.
            let left = until - now;
            let retry_in =
                Duration::from_millis(u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
            return Verdict::BackingOff(cause, retry_in);
        }
        let inodes = if new_fill { INODES_PER_FILL } else { 0 };
        let Some(reading) = self.fresh_reading(&mut state, bytes, inodes, now) else {
            // No reading: nothing to keep; the writes themselves will tell.
            return Verdict::Room;
        };
        let rounded = round_up(bytes, reading.block);
        let (free, free_inodes) = reading.estimated_free();
        let short_bytes = i128::from(self.min_free) + i128::from(rounded) - free;
        let short_inodes = free_inodes.map_or(0, |n| {
            i128::from(reading.inode_floor) + i128::from(inodes) - n
        });
        if short_bytes > 0 || short_inodes > 0 {
            let clamp = |n: i128| u64::try_from(n.max(0)).unwrap_or(u64::MAX);
            let shortfall = Shortfall {
                bytes: clamp(short_bytes),
                inodes: clamp(short_inodes),
            };
            // At most one partly used block per file on top of its bytes.
            let slack = evictable.objects.saturating_mul(reading.block);
            let could_free = evictable.bytes.saturating_add(slack);
            if shortfall.bytes > could_free || shortfall.inodes > evictable.objects {
                return Verdict::Hopeless(shortfall);
            }
            return Verdict::Short(shortfall);
        }
        if let Some(reading) = state.reading.as_mut() {
            reading.spent += i128::from(rounded);
            reading.spent_inodes += i128::from(inodes);
        }
        Verdict::Room
    }

    /// The reading to judge `bytes` and `inodes` more by: the cached one while it is
    /// fresh enough, else a new one. `None` when `statvfs` fails (logged).
    fn fresh_reading(
        &self,
        state: &mut State,
        bytes: u64,
        inodes: u64,
        now: Instant,
    ) -> Option<Reading> {
        let stale = state.reread
            || state.reading.is_none_or(|r| {
                let (free, free_inodes) = r.estimated_free();
                let headroom = free - i128::from(self.min_free);
                let inodes_tight = free_inodes.is_some_and(|n| {
                    let headroom = n - i128::from(r.inode_floor);
                    (r.spent_inodes + i128::from(inodes)) * 4 >= headroom
                });
                now.duration_since(r.at) >= REFRESH_AFTER
                    || (r.spent + i128::from(bytes)) * 4 >= headroom
                    || inodes_tight
            });
        if !stale {
            return state.reading;
        }
        state.reread = false;
        match self.read(now) {
            Ok(reading) => {
                state.reading = Some(reading);
                Some(reading)
            }
            Err(error) => {
                if let Some(held_back) = STATVFS_LOG.admit() {
                    warn!(dir = %self.dir.display(), %error, held_back, "cannot read the cache disk's free space; cache.min_free is not kept meanwhile");
                }
                None
            }
        }
    }

    /// Takes a reading: one `statvfs`, a few microseconds on a local filesystem, made at
    /// most once per fill (and usually once per [`REFRESH_AFTER`] for all of them).
    fn read(&self, now: Instant) -> io::Result<Reading> {
        let stat = rustix::fs::statvfs(&self.dir)?;
        let block = stat.f_frsize.max(1);
        let total_bytes = stat.f_blocks.saturating_mul(block);
        // The floor's share of the bytes, applied to the inodes.
        let inode_floor = if total_bytes == 0 {
            0
        } else {
            let share = u128::from(stat.f_files) * u128::from(self.min_free);
            u64::try_from(share.div_ceil(u128::from(total_bytes))).unwrap_or(u64::MAX)
        };
        Ok(Reading {
            at: now,
            free_bytes: stat.f_bavail.saturating_mul(block),
            free_inodes: (stat.f_files > 0).then_some(stat.f_favail),
            inode_floor,
            block,
            spent: i128::from(self.unwritten.load(Ordering::Relaxed)),
            spent_inodes: 0,
        })
    }

    /// The cache filesystem's allocation unit (`f_frsize`) from the latest reading;
    /// `None` before the first.
    pub(super) fn block_size(&self) -> Option<u64> {
        self.state().reading.map(|reading| reading.block)
    }

    /// An entry of `size` bytes was unlinked to make room.
    pub(super) fn freed(&self, size: u64, inodes: u64) {
        if let Some(reading) = self.state().reading.as_mut() {
            reading.spent -= i128::from(round_up(size, reading.block));
            reading.spent_inodes -= i128::from(inodes);
        }
    }

    /// Whether an eviction should remove the directories it leaves empty: only while the
    /// filesystem's free inodes (as last read, with what was taken and freed since) are
    /// within twice [`ENTRY_DIRS`] of the inode floor. Elsewhere the directories stay: a
    /// small cache spread over 4,096 of them empties one at most evictions, and the next
    /// fill into it made it again, an `rmdir` and a `mkdir` per entry that churned the
    /// filesystem's inode table (`benches/RESULTS.md`, "the CDN mix's directory churn").
    pub(super) fn inodes_scarce(&self) -> bool {
        let Some(reading) = self.state().reading else {
            return false;
        };
        let (_, free_inodes) = reading.estimated_free();
        let keep_above = i128::from(reading.inode_floor) + 2 * i128::from(ENTRY_DIRS);
        free_inodes.is_some_and(|free| free < keep_above)
    }

    /// The error refusing a reservation `shortfall` short of the floor.
    pub(super) fn disk_full(&self, shortfall: Shortfall) -> StoreError {
        StoreError::DiskFull {
            short_bytes: shortfall.bytes,
            short_inodes: shortfall.inodes,
            min_free: self.min_free,
        }
    }

    /// A fill was refused (see [`DiskStats::refused_fills`]).
    pub(super) fn count_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Eviction cannot make room above the floor: other files fill the disk. Starts (or
    /// extends) a back-off like a failed write, so that fills do not evict the cache
    /// away one by one while nothing they free is enough.
    pub(super) fn hopeless(&self, shortfall: Shortfall, now: Instant) {
        let started = self.state().backoff.fail(Trouble::NoSpace, now);
        if let Some(period) = started {
            warn!(
                dir = %self.dir.display(),
                min_free = self.min_free,
                short_bytes = shortfall.bytes,
                short_inodes = shortfall.inodes,
                retry_in = %humantime::format_duration(period),
                "cache disk below cache.min_free and evicting cannot make room (other files fill it); not starting fills for a while"
            );
        }
    }

    /// Notes a failed file operation of a fill: if `error` is disk trouble, new fills
    /// back off (see [`Space::failed`]).
    pub(super) fn note(&self, error: &StoreError) {
        if let StoreError::Io { source, .. } = error
            && let Some(trouble) = Trouble::of(source)
        {
            self.failed(trouble, error, Instant::now());
        }
    }

    /// A write failed for `trouble` at `now`: new fills back off. Logged at warn once per
    /// back-off period.
    fn failed(&self, trouble: Trouble, error: &StoreError, now: Instant) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let started = {
            let mut state = self.state();
            // The disk's state is not what the reading says: read it again next time.
            state.reread = true;
            state.backoff.fail(trouble, now)
        };
        if let Some(period) = started {
            let retry_in = humantime::format_duration(period);
            match trouble {
                Trouble::NoSpace => warn!(
                    dir = %self.dir.display(), %error, %retry_in,
                    "cache disk full; fills dropped, not starting new ones for a while (hits are still served)"
                ),
                Trouble::Io => warn!(
                    dir = %self.dir.display(), %error, %retry_in,
                    "I/O error writing the cache; fills dropped, not starting new ones for a while (hits are still served)"
                ),
            }
        }
    }

    /// A fill committed: any back-off ends.
    pub(super) fn succeeded(&self) {
        let mut state = self.state();
        if state.backoff.period.is_zero() {
            return;
        }
        state.backoff.succeed();
        drop(state);
        info!(dir = %self.dir.display(), "cache disk takes fills again");
    }

    /// The figures, for metrics.
    pub(super) fn stats(&self, now: Instant) -> DiskStats {
        let state = self.state();
        DiskStats {
            free_bytes: state.reading.map_or(0, |r| r.free_bytes),
            free_inodes: state.reading.and_then(|r| r.free_inodes),
            backing_off: state.backoff.holds(now),
            refused_fills: self.refused.load(Ordering::Relaxed),
            write_failures: self.failures.load(Ordering::Relaxed),
        }
    }
}

/// Entries evicted at most for the floor per reservation: a fill never pays for emptying
/// a large cache of small entries; the next fill goes on where it stopped.
const FLOOR_EVICTIONS: usize = 64;

impl Inner {
    /// Keeps the filesystem's free space above `cache.min_free` with room for `bytes`
    /// more (see [`Space::check`]), evicting entries in the index's order, at most
    /// [`FLOOR_EVICTIONS`] of them; refuses when that does not make room, or while new
    /// fills back off.
    pub(super) async fn keep_floor(&self, bytes: u64, new_fill: bool) -> Result<(), StoreError> {
        let mut evicted = 0;
        loop {
            let counts = self.index.counts();
            let evictable = Evictable {
                objects: counts.objects,
                bytes: counts.object_bytes,
            };
            let now = Instant::now();
            let shortfall = match self.space.check(bytes, new_fill, evictable, now) {
                Verdict::Room => return Ok(()),
                Verdict::BackingOff(trouble, retry_in) => {
                    return Err(StoreError::BackingOff { trouble, retry_in });
                }
                Verdict::Hopeless(shortfall) => {
                    self.space.hopeless(shortfall, now);
                    return Err(self.space.disk_full(shortfall));
                }
                Verdict::Short(shortfall) => shortfall,
            };
            if evicted == FLOOR_EVICTIONS {
                return Err(self.space.disk_full(shortfall));
            }
            let Some((key_hash, fill)) = self.index.pop_victim() else {
                return Err(self.space.disk_full(shortfall));
            };
            debug!(key_hash = %format_args!("{key_hash:032x}"), size = fill.size, "evicting to keep cache.min_free");
            let inodes = self.unlink(key_hash, fill).await;
            self.space.freed(fill.size, inodes);
            evicted += 1;
        }
    }
}

/// `n` rounded up to a multiple of `block` (at least one block for a non-zero `n`).
fn round_up(n: u64, block: u64) -> u64 {
    n.div_ceil(block).saturating_mul(block)
}

#[cfg(test)]
mod tests;
