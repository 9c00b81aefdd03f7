//! Purges by tag, prefix, site or URL: removing every entry a [`PurgeSelector`] selects,
//! or marking each one stale (a soft purge).
//!
//! A purge goes in three steps, each safe against what runs beside it:
//! 1. Fills in progress that it selects are fenced out (`fence`): one that began before
//!    the purge never commits afterwards, so a request collapsing on that fill is not
//!    answered from content the purge was meant to remove, and a fill that commits
//!    before this step is in the catalog for step 3.
//! 2. While the start-up scan runs, the selector is registered with it (`scan`): the
//!    files it has not reached yet are removed when it does.
//! 3. The catalog's reverse map is walked in batches (`catalog::BATCH` members under
//!    one lock); each member still selected is taken out of the index (hits miss it from
//!    then on), and once every batch is out their files are unlinked on a blocking
//!    thread, a batch per trip, before the purge returns; or, soft, each one's metadata is
//!    rewritten with the purge's time (`update`), which makes it stale.
//!
//! An entry whose metadata slot has no room for the mark is removed instead.

use std::sync::Arc;
use std::time::SystemTime;

use tracing::{debug, warn};

use super::catalog::{BATCH, PurgeSelector};
use super::disk::{self, Damage};
use super::index::Fill;
use super::update::{self, Outcome, Payload};
use super::{Inner, Store, StoreError};
use crate::{FillRef, StoreHash};

/// What a purge does with the entries it selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PurgeMode {
    /// Removes them, as a `DELETE` of each URL would.
    Remove,
    /// Marks them stale as of this time (a soft purge): each is revalidated with the
    /// origin before it is served fresh again, and may be served stale meanwhile where
    /// its `stale-while-revalidate` or `stale-if-error` allows.
    MarkStale(SystemTime),
}

/// What became of one entry a soft purge selected.
enum Marked {
    /// Marked (or marked already).
    Stale,
    /// Gone meanwhile: evicted, replaced or removed.
    Gone,
    /// Its slot has no room for the mark, or its header failed; remove it.
    Remove(Option<(Damage, String)>),
}

impl Store {
    /// Purges every entry `selector` selects (see the module docs) and returns how many.
    /// For [`PurgeSelector::Url`] removal, the URL's own entry is removed as
    /// [`Store::remove`] removes it (its unscanned files included). Errors with
    /// `Closed` once the store closed for a hand-over.
    pub async fn purge(
        &self,
        selector: &PurgeSelector,
        mode: PurgeMode,
    ) -> Result<u64, StoreError> {
        let inner = &self.inner;
        let step = inner.gate.step().ok_or(StoreError::Closed)?;
        inner.fences.fence_selected(selector, &inner.next_fill_id);
        if inner.scan.register_purge(selector) {
            debug!(
                ?selector,
                "purge during the start-up scan: registered with it"
            );
        }
        let mut purged = 0;
        if let PurgeSelector::Url(url) = selector {
            let key_hash = Store::key_hash(url);
            purged += match mode {
                PurgeMode::Remove => u64::from(self.remove(url, key_hash).await?),
                PurgeMode::MarkStale(at) => self.purge_batch(selector, &[key_hash], at).await?,
            };
        }
        let mut after = None;
        // Removed entries leave the index batch by batch (each a miss from then on); their
        // files are unlinked once all have left, so what is purged stops being served
        // long before the last file is gone.
        let mut unreachable = Vec::new();
        loop {
            let batch = inner.catalog.members(selector, after);
            let Some(&last) = batch.last() else {
                break;
            };
            after = Some(last);
            match mode {
                PurgeMode::Remove => unreachable.extend(self.take_out(selector, &batch)),
                PurgeMode::MarkStale(at) => {
                    purged += self.purge_batch(selector, &batch, at).await?
                }
            }
        }
        purged += unreachable.len() as u64;
        if !unreachable.is_empty() {
            self.unlink_after_answer(selector, unreachable).await?;
        }
        // An entry the purge selects that eviction took out of the index first may still
        // have its file on disk, unlinked behind a fill (`evict`), which a stop now would
        // leave for the next start to index again: the purge answers once it is gone.
        let behind = &inner.behind;
        behind.wait_before(behind.mark()).await;
        drop(step);
        debug!(?selector, ?mode, purged, "purged");
        Ok(purged)
    }

    /// Unlinks the files of `taken` (out of the index already) in the background, once
    /// the purge is written to `state/pending-purges`, so that the purge answers without
    /// waiting for the disk and a stop (or a hand-over) before the last file is gone
    /// replays it.
    async fn unlink_after_answer(
        &self,
        selector: &PurgeSelector,
        taken: Vec<(StoreHash, Fill)>,
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        let (owned, recorded) = (Arc::clone(inner), selector.clone());
        let id = super::blocking(&inner.objects, move || owned.purge_log.record(&recorded)).await?;
        let owned = Arc::clone(inner);
        tokio::spawn(async move {
            for chunk in taken.chunks(BATCH) {
                let Some(step) = owned.gate.step() else {
                    debug!("purge left to the cache directory's next owner, which replays it");
                    return;
                };
                let (inner, chunk) = (Arc::clone(&owned), chunk.to_vec());
                let unlinked = super::blocking(&owned.objects, move || {
                    let _step = step;
                    unlink_all(&inner, &chunk)
                });
                if let Err(error) = unlinked.await {
                    // The purge stays written: the next start's scan finishes it.
                    warn!(%error, "cannot unlink the files of a purge; the next start will");
                    return;
                }
                owned.changed();
            }
            let (log, step) = (Arc::clone(&owned), owned.gate.step());
            let Some(step) = step else { return };
            let done = super::blocking(&owned.objects, move || {
                let _step = step;
                log.purge_log.done(id)
            });
            if let Err(error) = done.await {
                warn!(%error, "cannot drop a finished purge from state/pending-purges");
            }
        });
        Ok(())
    }

    /// Takes the entries of `batch` that `selector` still selects out of the index (and
    /// the memory tier and the catalog); the caller unlinks their files.
    fn take_out(&self, selector: &PurgeSelector, batch: &[StoreHash]) -> Vec<(StoreHash, Fill)> {
        let inner = &self.inner;
        let mut taken = Vec::with_capacity(batch.len());
        for &key_hash in batch {
            let Some(fill_id) = inner.catalog.selected(key_hash, selector) else {
                continue;
            };
            inner.scan.register_removal(key_hash);
            // `None`: evicted or replaced since; whoever took it out unlinks it.
            if let Some(fill) = inner.index.remove(FillRef {
                key: key_hash,
                fill: fill_id,
            }) {
                inner.memory.forget(key_hash);
                inner.catalog.forget(FillRef {
                    key: key_hash,
                    fill: fill_id,
                });
                taken.push((key_hash, fill));
            }
        }
        taken
    }

    /// Marks the entries of `batch` that `selector` still selects stale as of `at`, in
    /// one trip to the blocking pool; removes those that cannot take the mark.
    async fn purge_batch(
        &self,
        selector: &PurgeSelector,
        batch: &[StoreHash],
        at: SystemTime,
    ) -> Result<u64, StoreError> {
        let inner = &self.inner;
        let selected: Vec<FillRef> = batch
            .iter()
            .filter_map(|&key| {
                Some(FillRef {
                    key,
                    fill: inner.catalog.selected(key, selector)?,
                })
            })
            .collect();
        if selected.is_empty() {
            return Ok(0);
        }
        let owned = Arc::clone(inner);
        let marked = super::blocking(&inner.objects, move || {
            Ok(selected
                .into_iter()
                .map(|fill| (fill, mark_stale(&owned, fill, at)))
                .collect::<Vec<_>>())
        })
        .await?;
        let mut count = 0;
        for (fill_ref, outcome) in marked {
            match outcome {
                Marked::Stale => count += 1,
                Marked::Gone => {}
                Marked::Remove(Some((damage, reason))) => {
                    inner.discard(fill_ref, damage, &reason).await;
                }
                Marked::Remove(None) => {
                    if let Some(fill) = inner.index.remove(fill_ref) {
                        inner.unlink(fill_ref.key, fill).await;
                        count += 1;
                    }
                }
            }
        }
        Ok(count)
    }
}

/// Marks one entry stale as of `at`; blocking.
fn mark_stale(inner: &Inner, fill_ref: FillRef, at: SystemTime) -> Marked {
    let path = inner.object_path(fill_ref);
    match update::write_meta(inner, &path, fill_ref, Payload::Purged(at)) {
        Ok(Outcome::Written) => Marked::Stale,
        Ok(Outcome::Gone) => Marked::Gone,
        Ok(Outcome::Damaged(damage, reason)) => Marked::Remove(Some((damage, reason))),
        Err(StoreError::MetaTooLarge { .. }) => {
            debug!(path = %path.display(), "no room for the soft-purge mark; removing the entry");
            Marked::Remove(None)
        }
        Err(error) => {
            warn!(path = %path.display(), %error, "cannot mark a purged entry stale; removing it");
            Marked::Remove(None)
        }
    }
}

/// Unlinks the files of entries already out of the index and gives their bytes back;
/// blocking. With `cache.fsync = true`, each directory is synced once.
fn unlink_all(inner: &Inner, taken: &[(StoreHash, Fill)]) -> Result<(), StoreError> {
    let mut dirs = Vec::new();
    let remove_dirs = inner.space.inodes_scarce();
    for &(key_hash, fill) in taken {
        let path = inner.object_path(FillRef {
            key: key_hash,
            fill: fill.fill_id,
        });
        let removed_dirs = disk::remove_entry_quietly_sync(&path, remove_dirs);
        inner.forget_leaf_dir(key_hash, removed_dirs);
        inner.index.release_object(fill.size);
        if inner.fsync_each()
            && removed_dirs == 0
            && let Some(dir) = path.parent()
            && !dirs.iter().any(|d: &std::path::PathBuf| d == dir)
        {
            dirs.push(dir.to_owned());
        }
    }
    for dir in dirs {
        let handle = std::fs::File::open(&dir).map_err(disk::io_err(&dir))?;
        handle.sync_all().map_err(disk::io_err(&dir))?;
    }
    Ok(())
}
