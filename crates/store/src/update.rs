//! Replacing an entry's metadata in place, after an origin revalidated it.
//!
//! The new metadata goes into the slot that is not current, with the current
//! sequence + 1 (see [`super::entry`]): a reader that meets the slot
//! half-written finds its checksum failing and uses the old slot, and so does
//! a restart after a crash mid-write. The body, the preamble and the file's
//! length are never touched, so the byte budget is unaffected.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

use tracing::debug;

use super::disk::{self, Damage, HeaderError};
use super::entry::{self, EntryMeta};
use super::{Inner, Store, StoreError, StoredEntry, map_entry_error};
use crate::FillRef;

/// What an update writes.
pub(super) enum Payload {
    /// The metadata a revalidation refreshed, `encoded`: written as it is, unless a soft
    /// purge marked the entry after the revalidation's request left (then `meta` is written
    /// with that mark).
    Revalidated {
        /// The new metadata.
        meta: Box<EntryMeta>,
        /// `meta`, encoded.
        encoded: Vec<u8>,
    },
    /// The current metadata, marked soft-purged at this time (left as it is when it is
    /// marked already: the entry went stale at the first purge).
    Purged(SystemTime),
}

/// What the blocking part of an update did.
pub(super) enum Outcome {
    /// The new metadata is written (and fsynced, if configured).
    Written,
    /// The entry is no longer stored; nothing was written.
    Gone,
    /// The file's header is damaged; nothing was written.
    Damaged(Damage, String),
}

impl Store {
    /// Replaces the metadata of `entry` (from [`Store::lookup`]) without
    /// touching its body, e.g. after an origin answered a revalidation with
    /// 304. Later lookups, also after a restart, return `meta`.
    ///
    /// A soft purge that marked the entry after `meta.request_time` (when the
    /// revalidation's request left) stays in force: the mark is written with `meta`.
    ///
    /// Returns `Ok(true)` once written, and `Ok(false)`, writing nothing, if
    /// the entry is no longer stored: evicted, replaced by a newer fill or
    /// removed since the lookup, or found damaged (then it is discarded, as a
    /// lookup would), or the store closed for a hand-over. The response being served
    /// is unaffected either way; a `false` tells the caller the refreshed metadata was
    /// not cached.
    ///
    /// Errors with `Credentials` if `meta.request_headers` hold credentials,
    /// and with `MetaTooLarge` if `meta` does not fit the entry's metadata
    /// slot (its capacity was fixed by the fill, with room for metadata about
    /// twice the original size); the file is then left untouched.
    pub async fn update_meta(
        &self,
        entry: &StoredEntry,
        meta: &EntryMeta,
    ) -> Result<bool, StoreError> {
        let Some(step) = self.inner.gate.step() else {
            return Ok(false);
        };
        let encoded = entry::encode_meta(meta).map_err(map_entry_error)?;
        let payload = Payload::Revalidated {
            meta: Box::new(meta.clone()),
            encoded,
        };
        let fill = entry.fill;
        let inner = Arc::clone(&self.inner);
        let path = inner.object_path(fill);
        // All the file work in one blocking task: a handful of small
        // positioned reads and writes and an fsync.
        let task = {
            let path = path.clone();
            // The step lasts as long as the write, even if this future is dropped.
            tokio::task::spawn_blocking(move || {
                let _step = step;
                write_meta(&inner, &path, fill, payload)
            })
        };
        let outcome = task
            .await
            .map_err(|e| disk::io_err(&path)(io::Error::other(e)))??;
        match outcome {
            Outcome::Written => Ok(true),
            Outcome::Gone => {
                debug!(path = %path.display(), "metadata update of an entry no longer stored");
                Ok(false)
            }
            Outcome::Damaged(damage, reason) => {
                let inner = &self.inner;
                inner.discard(fill, damage, &reason).await;
                Ok(false)
            }
        }
    }
}

/// Writes `payload` into the entry file's non-current slot; blocking.
pub(super) fn write_meta(
    inner: &Inner,
    path: &Path,
    fill_ref: FillRef,
    payload: Payload,
) -> Result<Outcome, StoreError> {
    let _serialized = inner
        .meta_update
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let open = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path);
    let file = match open {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Outcome::Gone),
        Err(e) => return Err(disk::io_err(path)(e)),
    };
    // Checked after opening: from here on an eviction or replacement can only
    // unlink the file, and writing to an unlinked file harms nothing.
    if inner
        .index
        .peek(fill_ref.key)
        .is_none_or(|fill| fill.fill_id != fill_ref.fill)
    {
        return Ok(Outcome::Gone);
    }
    // Read again under the lock: the slot that is current now, not at lookup.
    let header = match disk::read_header_sync(&file, path, fill_ref) {
        Ok(header) => header,
        Err(HeaderError::Damaged(damage, reason)) => return Ok(Outcome::Damaged(damage, reason)),
        Err(HeaderError::Io(e)) => return Err(e),
    };
    let Some(sequence) = header.sequence.checked_add(1) else {
        let reason = "metadata sequence at its maximum".to_owned();
        return Ok(Outcome::Damaged(Damage::Invalid, reason));
    };
    let preamble = header.preamble;
    let slot_now = header.slot;
    let Some(payload) = encoded(payload, header.meta)? else {
        return Ok(Outcome::Written);
    };
    let slot =
        entry::encode_slot(&payload, sequence, preamble.slot_capacity).map_err(map_entry_error)?;
    let offset = preamble.slot_offset(slot_now.other());
    file.write_all_at(&slot, offset)
        .map_err(disk::io_err(path))?;
    // Right after the write, on this thread: the new slot is what a fresh read of
    // the file finds from now on, even if the fsync below fails or the caller stopped
    // waiting for this task, so the held file and the copy with the old metadata
    // must go whatever follows.
    inner.memory.forget_updated(fill_ref.key);
    inner.changed();
    if inner.fsync_each() {
        // The file's length and name are unchanged: its data is all to sync.
        file.sync_data().map_err(disk::io_err(path))?;
    }
    Ok(Outcome::Written)
}

/// The bytes `payload` writes over `current`, the metadata in force; `None` when there is
/// nothing to write (a soft purge of an entry marked already).
fn encoded(payload: Payload, current: EntryMeta) -> Result<Option<Vec<u8>>, StoreError> {
    match payload {
        // The purge came after the origin was asked: its 304 does not answer for it.
        Payload::Revalidated { meta, .. }
            if current.purged.is_some_and(|at| at >= meta.request_time) =>
        {
            let meta = EntryMeta {
                purged: current.purged,
                ..*meta
            };
            entry::encode_meta(&meta).map(Some).map_err(map_entry_error)
        }
        Payload::Revalidated { encoded, .. } => Ok(Some(encoded)),
        Payload::Purged(_) if current.purged.is_some() => Ok(None),
        Payload::Purged(at) => {
            let meta = EntryMeta {
                purged: Some(at),
                ..current
            };
            entry::encode_meta(&meta).map(Some).map_err(map_entry_error)
        }
    }
}
