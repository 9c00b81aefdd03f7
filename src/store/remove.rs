//! Invalidation (RFC 9111 §4.4): removing a key's entry for good.

use tracing::debug;

use super::{Store, StoreError, disk};

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
    /// that begin after it commit normally. While the start-up scan runs, a
    /// file of the key it has not reached yet is removed when it gets there,
    /// not by this call: a crash before then brings that file back.
    pub async fn remove(&self, key: &str, key_hash: u128) -> Result<bool, StoreError> {
        let inner = &self.inner;
        // Fences first: a fill that commits after this point is checked
        // against them, and one that committed before is in the index below.
        inner.fences.remove(key_hash, &inner.next_fill_id);
        inner.scan.register_removal(key_hash);
        let Some(fill) = inner.index.peek(key_hash) else {
            return Ok(false);
        };
        if inner
            .open_entry(key, key_hash, fill.fill_id)
            .await?
            .is_none()
        {
            return Ok(false);
        }
        // `None` if evicted or replaced by a newer fill since the peek: then
        // whoever took it out unlinks its file.
        let Some(fill) = inner.index.remove(key_hash, fill.fill_id) else {
            return Ok(false);
        };
        let path = inner.object_path(key_hash, fill.fill_id);
        let removed = disk::remove_file(&path).await;
        inner.index.release_object(fill.size);
        removed?;
        if let (true, Some(dir)) = (inner.opts.fsync, path.parent()) {
            disk::fsync_dir(dir).await?;
        }
        debug!(path = %path.display(), "cache entry removed");
        Ok(true)
    }
}
