//! Why a store operation failed, and how codec errors map onto that.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::disk::Damage;
use super::entry::EntryError;
use super::lock;
use super::space::Trouble;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The object (or its key or metadata) exceeds a size limit.
    #[error("object exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The body length differs from the declared `Content-Length`.
    #[error("body is {received} bytes, but {declared} were declared")]
    LengthMismatch {
        /// The declared length.
        declared: u64,
        /// The bytes actually written.
        received: u64,
    },
    /// A file is damaged: a fill's file whose length is not what was written to it (a
    /// failed write left bytes behind) is [`Damage::Invalid`], and is never committed.
    #[error("corrupt cache file {}: {damage}", path.display())]
    Corrupt {
        /// The file concerned.
        path: PathBuf,
        /// How it is damaged.
        damage: Damage,
    },
    /// Replacement metadata does not fit the entry's metadata slot, whose
    /// capacity was fixed when the entry was filled; the entry is unchanged.
    #[error("metadata slot of {len} bytes exceeds the entry's slot capacity of {capacity} bytes")]
    MetaTooLarge {
        /// Bytes the new metadata needs, slot header included.
        len: u64,
        /// The entry's slot capacity in bytes.
        capacity: u64,
    },
    /// Refused to store request credentials.
    #[error("refused to store request credentials")]
    Credentials,
    /// A removal or purge after the fill's request was sent selects it: the answer may
    /// predate the purge, so it is not stored.
    #[error("purged while the request was on its way to the origin")]
    PurgedInFlight,
    /// The store closed for a hand-over of the cache directory to another process
    /// (`Store::close_for_handover`): it starts and commits no fill, and removes nothing.
    #[error("the cache directory was handed over to another process")]
    Closed,
    /// The write budget (`admission.max_write_rate`) has no room left this minute for
    /// the fill's bytes.
    #[error("the write budget of {per_minute} bytes a minute (admission.max_write_rate) is spent")]
    WriteBudget {
        /// Bytes a minute the budget allows.
        per_minute: u64,
    },
    /// The budget has no room for a fill, even after evicting every entry
    /// (the rest is reserved by other fills in progress, or it is too small).
    #[error("no room for {needed} more bytes within cache.max_size ({max_size} bytes)")]
    NoSpace {
        /// The bytes the fill asked for.
        needed: u64,
        /// `cache.max_size`.
        max_size: u64,
    },
    /// The cache's filesystem is below `cache.min_free` (plus what the fill needs), and
    /// evicting entries did not make room: other files fill it, or this fill's share
    /// of eviction work ran out (the next fill goes on).
    #[error(
        "cache disk is {short_bytes} bytes and {short_inodes} inodes short of keeping cache.min_free ({min_free} bytes) free"
    )]
    DiskFull {
        /// Bytes missing above the floor.
        short_bytes: u64,
        /// Inodes missing above the floor.
        short_inodes: u64,
        /// `cache.min_free`.
        min_free: u64,
    },
    /// New fills are backing off after a write failed for `trouble`.
    #[error("not starting fills for {} after a failed cache write ({trouble:?})", humantime::format_duration(*retry_in))]
    BackingOff {
        /// What the failed write reported.
        trouble: Trouble,
        /// How long until a fill may try again.
        retry_in: Duration,
    },
    /// Another process holds the cache directory.
    #[error(
        "cache directory {} is in use by another secondhit process ({}, holding {}); gave up after {} (cache.lock_timeout)",
        dir.display(),
        lock::describe_holder(holder),
        lock_file.display(),
        humantime::format_duration(*waited)
    )]
    Locked {
        /// The cache directory.
        dir: PathBuf,
        /// The lock file, `<dir>/secondhit.lock`.
        lock_file: PathBuf,
        /// The holder's PID, as written in the lock file.
        holder: Option<u32>,
        /// How long this process waited.
        waited: Duration,
    },
    /// `tmp/` and `objects/` are on different filesystems, so committing a fill
    /// by renaming it would not be atomic.
    #[error(
        "{} and {} are on different filesystems; a fill is committed by renaming it from one to the other, which must be atomic: keep both on one filesystem",
        tmp.display(),
        objects.display()
    )]
    CrossDevice {
        /// `<dir>/tmp`.
        tmp: PathBuf,
        /// `<dir>/objects`.
        objects: PathBuf,
    },
}

impl StoreError {
    /// The disk trouble this error reports (see [`Trouble::of`]): for a refused
    /// fill, the trouble it was refused for.
    pub fn trouble(&self) -> Option<Trouble> {
        match self {
            StoreError::Io { source, .. } => Trouble::of(source),
            StoreError::DiskFull { .. } => Some(Trouble::NoSpace),
            StoreError::BackingOff { trouble, .. } => Some(*trouble),
            _ => None,
        }
    }

    /// True for a page-cache-only read (`disk::Wait::CachedOnly`) that would have had
    /// to wait for the disk: the caller retries it on a blocking thread.
    pub(crate) fn would_block(&self) -> bool {
        matches!(self, StoreError::Io { source, .. } if source.kind() == io::ErrorKind::WouldBlock)
    }
}

/// Maps a codec error met while encoding onto the store's error.
pub(crate) fn map_entry_error(e: EntryError) -> StoreError {
    match e {
        EntryError::Credentials => StoreError::Credentials,
        EntryError::TooLarge { limit, .. } => StoreError::TooLarge {
            limit: limit as u64,
        },
        EntryError::SlotFull { len, capacity } => StoreError::MetaTooLarge {
            len: len as u64,
            capacity: capacity as u64,
        },
        // Encoding fails only for the reasons above, or for a header too long
        // for its length field, which is also a size limit.
        _ => StoreError::TooLarge {
            limit: u64::from(u32::MAX),
        },
    }
}
