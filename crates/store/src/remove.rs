//! Invalidation (RFC 9111 §4.4): removing a key's entry for good.

use std::path::Path;

use tracing::debug;

use super::{Store, StoreError, disk};
use crate::{FillId, FillRef, StoreHash};

impl Store {
    /// Removes the entry of `key`: takes it out of the index and unlinks its
    /// file (fsyncing the directory, if configured) before returning, so the
    /// removal survives a restart. Returns whether an entry was removed;
    /// `false` if the key had none, or the indexed file holds another key with
    /// the same hash (which is left alone), or it was found damaged (then it
    /// is discarded, as a lookup would).
    ///
    /// Fills of the key that began before this call never commit afterwards
    /// (see `fence`), so the removal is not undone by older content; fills
    /// that begin after it commit normally. While the start-up scan runs, the
    /// key's files of earlier runs that it has not indexed yet are unlinked
    /// here too, so a crash before the scan gets to them cannot bring them
    /// back; and it waits for the unlink of a file of the key that eviction took out
    /// of the index before this call looked. Errors with `Closed` once the store
    /// closed for a hand-over.
    pub async fn remove(&self, key: &str, key_hash: StoreHash) -> Result<bool, StoreError> {
        let _step = self.inner.gate.step().ok_or(StoreError::Closed)?;
        let removed = self.remove_indexed(key, key_hash).await?;
        // After the removal is registered with the scan (in `remove_indexed`),
        // the scan indexes no file of the key any more, so what is left of
        // earlier runs is exactly what this finds.
        let unscanned = !self.inner.scan.complete() && self.remove_unscanned(key_hash).await?;
        // A file of the key that eviction took out of the index may still be on disk,
        // its unlink under way (`evict`), which a stop now would leave for the next start
        // to index again: the removal answers once it is gone.
        let behind = &self.inner.behind;
        if let Some(mark) = behind.mark_past(key_hash) {
            behind.wait_before(mark).await;
        }
        Ok(removed || unscanned)
    }

    /// Takes the key's entry out of the index and unlinks its file.
    async fn remove_indexed(&self, key: &str, key_hash: StoreHash) -> Result<bool, StoreError> {
        let inner = &self.inner;
        // Fences first: a fill that commits after this point is checked
        // against them, and one that committed before is in the index below.
        inner.fences.remove(key_hash, &inner.next_fill_id);
        inner.scan.register_removal(key_hash);
        let Some(fill) = inner.index.peek(key_hash) else {
            return Ok(false);
        };
        let indexed = FillRef {
            key: key_hash,
            fill: fill.fill_id,
        };
        // Only the key's own entry is removed: the file must be read to tell.
        let read_whole_below = 0;
        if inner
            .open_entry(key, indexed, None, read_whole_below)
            .await?
            .is_none()
        {
            return Ok(false);
        }
        // `None` if evicted or replaced by a newer fill since the peek: then
        // whoever took it out unlinks its file.
        let Some(fill) = inner.index.remove(indexed) else {
            return Ok(false);
        };
        inner.memory.forget(key_hash);
        inner.catalog.forget(indexed);
        let path = inner.object_path(indexed);
        let removed = disk::remove_file(&path).await;
        inner.index.release_object(fill.size);
        removed?;
        inner.changed();
        if let (true, Some(dir)) = (inner.fsync_each(), path.parent()) {
            disk::fsync_dir(dir).await?;
        }
        debug!(path = %path.display(), "cache entry removed");
        Ok(true)
    }

    /// Unlinks the files of `key_hash` that earlier runs left and the start-up
    /// scan has not indexed: the ones it would remove itself when it gets there
    /// (files of this run's fills are left to their fences). As the scan does,
    /// it goes by the hash in the name and does not open the files. It looks in the
    /// `objects/ab/cd/` of earlier builds first, then in `objects/a/bc/`, so a file the
    /// scan moves between the two meanwhile is found in one of them.
    async fn remove_unscanned(&self, key_hash: StoreHash) -> Result<bool, StoreError> {
        let inner = &self.inner;
        let mut removed = false;
        for any in [
            disk::legacy_object_path(
                &inner.objects,
                FillRef {
                    key: key_hash,
                    fill: FillId(0),
                },
            ),
            inner.object_path(FillRef {
                key: key_hash,
                fill: FillId(0),
            }),
        ] {
            if let Some(dir) = any.parent() {
                removed |= self.remove_unscanned_in(dir, key_hash).await?;
            }
        }
        if removed {
            inner.changed();
        }
        Ok(removed)
    }

    /// [`Store::remove_unscanned`] in one directory.
    async fn remove_unscanned_in(
        &self,
        dir: &Path,
        key_hash: StoreHash,
    ) -> Result<bool, StoreError> {
        let inner = &self.inner;
        let mut items = match tokio::fs::read_dir(dir).await {
            Ok(items) => items,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(disk::io_err(dir)(e)),
        };
        // An entry still indexed now holds another key with the same hash
        // (`remove_indexed` took the key's own out): it stays.
        let indexed = inner.index.peek(key_hash).map(|fill| fill.fill_id);
        let mut removed = false;
        while let Some(item) = items.next_entry().await.map_err(disk::io_err(dir))? {
            let name = item.file_name();
            let Some(found) = name.to_str().and_then(disk::parse_file_name) else {
                continue;
            };
            if found.key == key_hash
                && indexed != Some(found.fill)
                && inner.scan.superseded(key_hash, found.fill)
            {
                let path = item.path();
                disk::remove_file(&path).await?;
                debug!(path = %path.display(), "cache file not scanned yet removed");
                removed = true;
            }
        }
        if removed && inner.fsync_each() {
            disk::fsync_dir(dir).await?;
        }
        Ok(removed)
    }
}
