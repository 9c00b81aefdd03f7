//! The start-up scan: rebuilds the index from `objects/` in the background
//! while the proxy already serves.
//!
//! A thread walks `objects/a/bc/`, reads each entry's header (never its
//! body), and indexes the valid ones as the oldest entries, inside the byte
//! budget (evicting earlier scanned entries when the directory holds more than
//! `cache.max_size`). Files that are not valid entries are removed, logged and
//! counted; of two fills of one key the older is removed. Files of an older
//! format version (after an upgrade) are removed too, counted with the invalid
//! ones and logged once, as a number in the closing line, rather than one
//! warning each. `tmp/` was emptied
//! before the scan started and `state/` is never read.
//!
//! Fills of this run commit while the scan runs, into the same directories, so
//! two rules keep the scan from undoing them:
//! - A fill registers its key and fill id with the [`ScanGate`] before its file
//!   exists. The scan leaves registered files alone (they are this run's), and
//!   removes any other file of a registered key: it is older than a fill of
//!   this run, even if that fill has since been evicted or failed, so an older
//!   object never reappears after a newer one was stored. A removal
//!   (`Store::remove`) registers its key the same way and then unlinks the
//!   key's files the scan has not reached yet itself, so that the removal is
//!   on disk before it returns.
//! - The index itself ranks any fill of this run above any scanned one
//!   (`index::Provenance`), whatever the fill ids say, so a clock that went back
//!   between runs cannot make an old file win.
//!
//! A purge while the scan runs (`Store::purge`) cannot find the entries the scan has not
//! indexed yet, so it registers its selector with the gate too: the scan removes every
//! file it reaches afterwards that the selector selects (a soft purge included: the
//! entry is then fetched again rather than revalidated). The check and the index and
//! catalog inserts happen under the gate's lock, so a file is either indexed and
//! catalogued before the purge registers (and the purge finds it), or checked after.
//!
//! The thread holds only a `Weak` reference to the store, so dropping the store
//! stops the scan (and releases the directory lock) after the current file; so does
//! closing it for a hand-over, which waits for the file in hand (each file is a step of
//! the store's `handover::Gate`).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use foldhash::quality::RandomState;
use tracing::{debug, info, warn};

use super::catalog::{Catalog, PurgeSelector};
use super::disk::{self, HeaderError};
use super::entry::DecodedHeader;
use super::index::{Fill, Index, Placed, Provenance};
use super::{Inner, StoreError};
use crate::{FillId, FillRef, StoreHash};

/// Key hash → the fill ids begun for it while the scan runs.
type Live = HashMap<StoreHash, Vec<FillId>, RandomState>;

/// Coordinates the scan with the fills that begin while it runs.
#[derive(Debug)]
pub(crate) struct ScanGate {
    /// True until the scan has finished. A fast path only: `live` decides.
    /// Release on finish, Acquire on read, pairing with the map's lock.
    scanning: AtomicBool,
    /// Key hash → fill ids begun by this run while the scan runs (none for a
    /// key this run only removed); `None` once it has finished.
    live: Mutex<Option<Live>>,
    /// The purges made while the scan runs; taken after `live`'s lock, never before.
    purges: Mutex<Vec<PurgeSelector>>,
}

/// A file the scan is about to index, as the catalog records it.
pub(crate) struct Scanned<'a> {
    pub key_hash: StoreHash,
    pub fill: Fill,
    pub key: &'a str,
    pub tags: &'a [String],
}

/// What the scan should do with one well-named file.
enum Verdict {
    /// A fill of this run: not the scan's business.
    Ours,
    /// Its key has a fill of this run, which is newer: remove it.
    Superseded,
    /// Index it if it is valid.
    Free,
}

impl ScanGate {
    /// A gate for a scan about to start.
    pub(crate) fn new() -> ScanGate {
        ScanGate {
            scanning: AtomicBool::new(true),
            live: Mutex::new(Some(Live::default())),
            purges: Mutex::new(Vec::new()),
        }
    }

    fn purges(&self) -> MutexGuard<'_, Vec<PurgeSelector>> {
        self.purges.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a purge while the scan runs: the scan removes the files it selects that
    /// it reaches from now on. Returns whether the scan was still running.
    pub(crate) fn register_purge(&self, selector: &PurgeSelector) -> bool {
        if !self.scanning.load(Ordering::Acquire) {
            return false;
        }
        let live = self.live();
        if live.is_some() {
            self.purges().push(selector.clone());
        }
        live.is_some()
    }

    fn live(&self) -> MutexGuard<'_, Option<Live>> {
        // Every critical section is one map operation (or a map lookup and an
        // index insert, which cannot fail half-way): poison carries no meaning.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `key_hash` as touched by this run, then applies `f` to its fill ids.
    fn claim(&self, key_hash: StoreHash, f: impl FnOnce(&mut Vec<FillId>)) {
        if !self.scanning.load(Ordering::Acquire) {
            return;
        }
        if let Some(live) = self.live().as_mut() {
            f(live.entry(key_hash).or_default());
        }
    }

    /// Records a fill of this run; call before its temp file is created.
    pub(crate) fn register_fill(&self, key_hash: StoreHash, fill_id: FillId) {
        self.claim(key_hash, |ids| ids.push(fill_id));
    }

    /// Records a removal of a key: the scan then removes the key's files it
    /// has not indexed yet, as it does for a key with a fill of this run.
    pub(crate) fn register_removal(&self, key_hash: StoreHash) {
        self.claim(key_hash, |_| {});
    }

    /// True once the scan has finished.
    pub(crate) fn complete(&self) -> bool {
        !self.scanning.load(Ordering::Acquire)
    }

    /// True when the scan, reaching this file, would remove it because a fill
    /// or a removal of its key in this run supersedes it (false once the scan
    /// has finished: by then it has done so).
    pub(crate) fn superseded(&self, key_hash: StoreHash, fill_id: FillId) -> bool {
        matches!(self.verdict(key_hash, fill_id), Verdict::Superseded)
    }

    fn verdict(&self, key_hash: StoreHash, fill_id: FillId) -> Verdict {
        match self.live().as_ref().and_then(|live| live.get(&key_hash)) {
            None => Verdict::Free,
            Some(ids) if ids.contains(&fill_id) => Verdict::Ours,
            Some(_) => Verdict::Superseded,
        }
    }

    /// Indexes and catalogues a scanned fill unless its key got a fill of this run
    /// meanwhile, or a purge during the scan selects it. The checks and the inserts
    /// happen under one lock, so no fill of the key can begin, commit and be evicted,
    /// and no purge can look, in between.
    fn place(&self, index: &Index, catalog: &Catalog, file: &Scanned<'_>) -> Placed {
        let live = self.live();
        if live
            .as_ref()
            .is_some_and(|l| l.contains_key(&file.key_hash))
        {
            return Placed::Lost;
        }
        let boxed: Vec<Box<str>> = file.tags.iter().map(|t| t.as_str().into()).collect();
        if self.purges().iter().any(|p| p.matches(file.key, &boxed)) {
            return Placed::Lost;
        }
        let placed = index.place(file.key_hash, file.fill, Provenance::Scanned);
        if placed != Placed::Lost {
            catalog.insert(file.key_hash, file.fill.fill_id, file.key, file.tags);
        }
        placed
    }

    fn finish(&self) {
        let mut live = self.live();
        *live = None;
        self.purges().clear();
        self.scanning.store(false, Ordering::Release);
    }
}

/// What one scan did, for its closing log line.
#[derive(Debug, Default)]
struct Tally {
    indexed: u64,
    /// Invalid or failing a checksum; removed.
    damaged: u64,
    /// Of an older format version; removed (counted with the invalid files).
    outdated: u64,
    superseded: u64,
    over_budget: u64,
    /// Moved from the `objects/ab/cd/` of an earlier build to its place.
    moved: u64,
}

/// Starts the scan thread for a freshly opened store.
pub(crate) fn spawn(inner: &Arc<Inner>) -> Result<(), StoreError> {
    let weak = Arc::downgrade(inner);
    let objects = inner.objects.clone();
    std::thread::Builder::new()
        .name("secondhit-scan".to_owned())
        .spawn(move || run(&weak, &objects))
        .map(drop)
        .map_err(disk::io_err(&inner.objects))
}

/// Indexes every valid entry ([`walk`]), then opens the store to purges and logs the tally.
fn run(weak: &Weak<Inner>, objects: &Path) {
    let started = Instant::now();
    let mut tally = Tally::default();
    if walk(weak, objects, &mut tally).is_none() {
        debug!("store closed; scan stopped");
        return;
    }
    let Some(inner) = weak.upgrade() else { return };
    let Some(_step) = inner.gate.step() else {
        debug!("store closed for a hand-over; scan stopped");
        return;
    };
    // The previous run's unfinished purges have now reached every file. Dropped before
    // the scan is declared finished, so that whoever sees it finished finds them gone.
    for &id in &inner.replayed {
        if let Err(error) = inner.purge_log.done(id) {
            warn!(%error, "cannot drop a replayed purge from state/pending-purges");
        }
    }
    inner.scan.finish();
    info!(
        indexed = tally.indexed,
        damaged = tally.damaged,
        outdated = tally.outdated,
        superseded = tally.superseded,
        over_budget = tally.over_budget,
        moved = tally.moved,
        objects = inner.index.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "cache scan finished"
    );
}

/// Walks `objects/a/bc/` (and the `objects/ab/cd/` of earlier builds, removing those
/// directories once empty) and scans every file. `None` when the store was dropped or
/// closed for a hand-over meanwhile.
fn walk(weak: &Weak<Inner>, objects: &Path, tally: &mut Tally) -> Option<()> {
    // Each directory to list, its depth, and whether it is of the earlier layout.
    let mut dirs: Vec<(PathBuf, u8, bool)> = vec![(objects.to_owned(), 0, false)];
    // `objects/ab/` and `objects/ab/cd/` of earlier builds, parents before children.
    let mut legacy_dirs: Vec<PathBuf> = Vec::new();
    while let Some((dir, depth, in_legacy)) = dirs.pop() {
        let items = match std::fs::read_dir(&dir) {
            Ok(items) => items,
            Err(error) => {
                warn!(dir = %dir.display(), %error, "cannot list cache directory; skipped");
                continue;
            }
        };
        for item in items {
            let inner = weak.upgrade()?;
            let _step = inner.gate.step()?;
            let item = match item {
                Ok(item) => item,
                Err(error) => {
                    warn!(dir = %dir.display(), %error, "cannot list cache directory entry");
                    continue;
                }
            };
            let path = item.path();
            let is_dir = item.file_type().is_ok_and(|t| t.is_dir());
            match (is_dir, depth) {
                (true, 0 | 1) => {
                    let legacy = in_legacy || (depth == 0 && item.file_name().len() == 2);
                    if legacy {
                        legacy_dirs.push(path.clone());
                    }
                    dirs.push((path, depth + 1, legacy));
                }
                (true, _) => {
                    warn!(path = %path.display(), "unexpected directory in objects/, left alone")
                }
                (false, 2) => scan_file(&inner, &path, item.file_name(), tally),
                (false, _) => remove_invalid(&inner, &path, "file outside objects/a/bc/", tally),
            }
        }
    }
    // Children first, once every file was moved out; `rmdir` keeps any still holding a
    // file that could not be moved.
    let inner = weak.upgrade()?;
    let _step = inner.gate.step()?;
    for dir in legacy_dirs.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
    Some(())
}

fn remove_invalid(inner: &Inner, path: &Path, reason: &str, tally: &mut Tally) {
    warn!(path = %path.display(), reason, "removing invalid cache file");
    inner.count_damage(disk::Damage::Invalid);
    tally.damaged += 1;
    disk::remove_quietly_sync(path);
}

/// Verifies one file's header and indexes it, or removes it.
fn scan_file(inner: &Inner, path: &Path, name: OsString, tally: &mut Tally) {
    let Some(found) = name.to_str().and_then(disk::parse_file_name) else {
        remove_invalid(inner, path, "not an entry file name", tally);
        return;
    };
    let FillRef {
        key: key_hash,
        fill: fill_id,
    } = found;
    // The name must also sit in its own `a/bc/` directory, or in the `ab/cd/` of earlier
    // builds, from where it moves to its place.
    let place = inner.object_path(found);
    if place != path {
        if disk::legacy_object_path(&inner.objects, found) != path {
            remove_invalid(inner, path, "not an entry file name in its place", tally);
            return;
        }
        if !move_legacy(inner, path, &place, tally) {
            return;
        }
    }
    let path = place.as_path();
    // Moved here from `objects/ab/cd/` and indexed already, then listed again (or a fill
    // of this run, which is not the scan's business either).
    if inner
        .index
        .peek(key_hash)
        .is_some_and(|f| f.fill_id == fill_id)
    {
        return;
    }
    match inner.scan.verdict(key_hash, fill_id) {
        Verdict::Ours => return,
        Verdict::Superseded => {
            debug!(path = %path.display(), "removing cache file superseded by a newer fill");
            tally.superseded += 1;
            disk::remove_quietly_sync(path);
            return;
        }
        Verdict::Free => {}
    }
    let file = EntryFile { path, fill: found };
    let Some(header) = checked_header(inner, &file, tally) else {
        return;
    };
    index_file(inner, &file, &header, tally);
}

/// Moves an entry file of an earlier build from `objects/ab/cd/` to `place` in
/// `objects/a/bc/` ([`walk`] removes the emptied directories at its end). False when it
/// could not be moved: it stays where it is, unindexed, for the next start-up's scan.
fn move_legacy(inner: &Inner, from: &Path, place: &Path, tally: &mut Tally) -> bool {
    if let Err(error) = disk::make_parent(place, inner.fsync_each())
        .and_then(|()| disk::rename_into(from, place, inner.fsync_each()))
    {
        warn!(%error, from = %from.display(), "cannot move cache file of an earlier build to its place; left alone");
        return false;
    }
    tally.moved += 1;
    true
}

/// An entry file the scan found, named for its key and fill.
struct EntryFile<'a> {
    path: &'a Path,
    fill: FillRef,
}

/// The header of `file` when it checks out; else `None`, after removing the file when it
/// is damaged or of an older format.
fn checked_header(inner: &Inner, file: &EntryFile<'_>, tally: &mut Tally) -> Option<DecodedHeader> {
    let EntryFile { path, fill } = *file;
    let header = disk::open_entry(path)
        .map_err(|e| HeaderError::Io(disk::io_err(path)(e)))
        .and_then(|file| disk::read_header_sync(&file, path, fill));
    match header {
        Ok(header) => Some(header),
        Err(HeaderError::Damaged(disk::Damage::Outdated, reason)) => {
            // Every file of the previous release, after an upgrade: one line in the summary,
            // not a warning each.
            debug!(path = %path.display(), reason, "removing cache file of an older format");
            inner.count_damage(disk::Damage::Outdated);
            tally.outdated += 1;
            disk::remove_quietly_sync(path);
            None
        }
        Err(HeaderError::Damaged(damage, reason)) => {
            warn!(path = %path.display(), reason, "removing damaged cache file");
            inner.count_damage(damage);
            tally.damaged += 1;
            disk::remove_quietly_sync(path);
            None
        }
        Err(HeaderError::Io(StoreError::Io { source, .. }))
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            None // Removed since listed: a fill of this run replaced it.
        }
        Err(HeaderError::Io(error)) => {
            warn!(%error, "cannot read cache file; left alone");
            None
        }
    }
}

/// Indexes `file` within `cache.max_size` (else removes it), keeping the newer fill when
/// the key already has one.
fn index_file(inner: &Inner, file: &EntryFile<'_>, header: &DecodedHeader, tally: &mut Tally) {
    let EntryFile {
        path,
        fill: FillRef {
            key: key_hash,
            fill: fill_id,
        },
    } = *file;
    // `read_header_sync` checked that this is the file's length.
    let size = header.preamble.file_len();
    // Fill ids of this run stay above every valid id on disk, keeping names unique.
    (inner.next_fill_id).fetch_max(fill_id.0.saturating_add(1), Ordering::Relaxed);
    if !inner.reserve_sync(size) {
        debug!(path = %path.display(), size, "removing cache file: beyond cache.max_size");
        tally.over_budget += 1;
        disk::remove_quietly_sync(path);
        return;
    }
    inner.index.commit_reservation(size, size);
    let fill = Fill { fill_id, size };
    let scanned = Scanned {
        key_hash,
        fill,
        key: &header.key,
        tags: &header.meta.tags,
    };
    match inner.scan.place(&inner.index, &inner.catalog, &scanned) {
        Placed::New => tally.indexed += 1,
        Placed::Replaced(old) => {
            tally.superseded += 1;
            inner.unlink_sync(key_hash, old);
        }
        Placed::Lost => {
            tally.superseded += 1;
            inner.unlink_sync(key_hash, fill);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_keeps_the_scan_off_this_runs_fills() {
        let gate = ScanGate::new();
        let index = Index::new(u64::MAX);
        let fill = |fill_id| Fill { fill_id, size: 1 };
        gate.register_fill(StoreHash(1), FillId(50));
        assert!(matches!(
            gate.verdict(StoreHash(1), FillId(50)),
            Verdict::Ours
        ));
        // Any other file of a key this run has filled is older: removed, never indexed.
        assert!(matches!(
            gate.verdict(StoreHash(1), FillId(49)),
            Verdict::Superseded
        ));
        assert!(matches!(
            gate.verdict(StoreHash(1), FillId(51)),
            Verdict::Superseded
        ));
        let catalog = Catalog::new(u64::MAX);
        let scanned = |key_hash, fill_id| Scanned {
            key_hash,
            fill: fill(fill_id),
            key: "http://a/",
            tags: &[],
        };
        assert_eq!(
            gate.place(&index, &catalog, &scanned(StoreHash(1), FillId(49))),
            Placed::Lost
        );
        assert!(matches!(
            gate.verdict(StoreHash(2), FillId(7)),
            Verdict::Free
        ));
        assert_eq!(
            gate.place(&index, &catalog, &scanned(StoreHash(2), FillId(7))),
            Placed::New
        );
        // A purge during the scan keeps the files it selects out.
        assert!(gate.register_purge(&PurgeSelector::Site("a".to_owned())));
        assert_eq!(
            gate.place(&index, &catalog, &scanned(StoreHash(3), FillId(8))),
            Placed::Lost
        );
        assert!(!gate.complete());
        gate.finish();
        assert!(gate.complete());
        // After the scan nothing is recorded.
        gate.register_fill(StoreHash(3), FillId(1));
        assert!(gate.live().is_none());
    }
}
