//! The memory tier: verified copies of hot entries, so a hit on a hot object
//! touches no file at all.
//!
//! It holds entries the disk store already has, never others: a lookup that read
//! and verified a whole body from its file offers it here ([`MemoryTier::offer`]),
//! and a lookup consults this tier only after the index named the key's current
//! fill. An entry here is served only while it is that same fill (`fill_id`), so
//! a newer fill, a removal, an eviction or a discard of the disk entry makes the
//! copy unreachable at once; they also drop it ([`MemoryTier::forget`]) to free
//! its memory. A metadata update (after an origin's 304) keeps the fill id, so it
//! drops the copy explicitly; the `epoch` keeps a lookup that read the old
//! metadata just before from offering it afterwards (see [`MemoryTier::offer`]).
//!
//! The budget (`cache.memory_size`) counts body, key and header bytes. Eviction is
//! `quick_cache`'s CLOCK-Pro-like policy: a new entry must prove itself in a small
//! probation queue before it displaces older ones, so one pass over many cold
//! objects does not flush the hot set.
//!
//! Beside the bodies, it keeps entry files open with their verified headers
//! ([`OpenFile`], up to `cache.open_files` of them, by the same policy): a hit on a
//! file it holds reads only the body, with no open, header read, decode or close.
//! They follow the disk entry exactly as the copies do, through the same `forget`
//! and `epoch`, so an evicted, replaced, removed or discarded file is closed when it
//! leaves the disk store (its space is freed then, not when the handle would age out).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use super::entry::{EntryMeta, Preamble};
use super::hot::HotEntry;
use super::thread_copies::{self, Stamps};
use crate::{FillId, FillRef, StoreHash};

/// An entry file, open, with its header verified when it was opened.
#[derive(Debug)]
pub(super) struct OpenFile {
    /// The fill the file holds.
    pub(super) fill_id: FillId,
    /// The full key, compared on every use: the map is keyed by its hash.
    pub(super) key: Box<str>,
    /// The file's metadata as it was read and verified.
    pub(super) meta: Arc<EntryMeta>,
    /// The preamble, as verified: where the body is, how long, and its checksum.
    pub(super) preamble: Preamble,
    /// The open file: positioned reads share it between concurrent hits.
    pub(super) file: Arc<std::fs::File>,
    /// What the proxy derived from the entry (see `StoredEntry::derived`).
    pub(super) derived: super::derived::Derived,
}

/// The weight `quick_cache` evicts by: an entry's bytes.
#[derive(Clone, Copy, Debug)]
struct ByBytes;

impl Weighter<StoreHash, Arc<HotEntry>> for ByBytes {
    fn weight(&self, _key_hash: &StoreHash, entry: &Arc<HotEntry>) -> u64 {
        entry.weight()
    }
}

/// Hot entries by store key hash, within a byte budget.
pub(super) struct MemoryTier {
    /// `None` when `cache.memory_size` is 0: the tier is off.
    entries: Option<Cache<StoreHash, Arc<HotEntry>, ByBytes>>,
    /// `None` when `cache.open_files` is 0: no file is kept open between hits.
    open_files: Option<Cache<StoreHash, Arc<OpenFile>>>,
    /// Bodies longer than this are not offered (`cache.memory_max_object_size`).
    max_object: u64,
    /// `cache.memory_size`, for statistics.
    budget: u64,
    /// Entry files held open at most, for statistics.
    open_limit: u64,
    /// Raised by every metadata update, before it drops the copy; see [`MemoryTier::offer`].
    epoch: AtomicU64,
    /// The keys' stamps, which this tier's copies in each thread are checked against.
    stamps: Stamps,
}

impl std::fmt::Debug for MemoryTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTier")
            .field("enabled", &self.entries.is_some())
            .field("open_files", &self.open_files.is_some())
            .field("max_object", &self.max_object)
            .finish_non_exhaustive()
    }
}

/// Expected mean weight of an entry, to size the map's initial table: 16 KiB,
/// a typical web object with its headers.
const EXPECTED_ENTRY_BYTES: u64 = 16 * 1024;

impl MemoryTier {
    /// A tier of `budget` bytes holding bodies of at most `max_object` bytes (none
    /// when `budget` is 0), and up to `open_files` open entry files.
    pub(super) fn new(budget: u64, max_object: u64, open_files: usize) -> MemoryTier {
        let entries = (budget > 0).then(|| {
            let items = usize::try_from(budget / EXPECTED_ENTRY_BYTES).unwrap_or(usize::MAX);
            Cache::with_weighter(items.max(16), budget, ByBytes)
        });
        MemoryTier {
            entries,
            open_files: (open_files > 0).then(|| Cache::new(open_files)),
            max_object,
            budget,
            open_limit: open_files as u64,
            epoch: AtomicU64::new(0),
            stamps: Stamps::new(),
        }
    }

    /// Bodies shorter than this are worth reading whole for this tier (0 when off).
    pub(super) fn read_whole_below(&self) -> u64 {
        match self.entries {
            Some(_) => self.max_object.saturating_add(1),
            None => 0,
        }
    }

    /// Whether this tier takes a copy of a body of `body_len` bytes read by a hit that
    /// opened its file (`opened_here`) or read it through one held open. A body long
    /// enough to be mapped is copied only through a held file, the record of a first hit,
    /// unless this tier holds no files: the copy costs a page allocation and a copy of
    /// every byte beside the send, for nothing when the object is not hit again from the
    /// disk (`benches/RESULTS.md`, "large bodies copied on their second hit from the disk").
    pub(super) fn takes_copy(&self, body_len: u64, opened_here: bool) -> bool {
        body_len < self.read_whole_below()
            && (body_len < super::mapped::MAPPED_BODY_MIN
                || !opened_here
                || self.open_files.is_none())
    }

    /// The copy of fill `fill_id` of `key`, if this tier holds it: this thread's own
    /// copy of it when it has one ([`thread_copies`]). The index named `fill_id` at
    /// `index_version` (from `Index::touch`).
    pub(super) fn get(
        &self,
        key: &str,
        fill_ref: FillRef,
        index_version: Option<u64>,
    ) -> Option<Arc<HotEntry>> {
        let entries = self.entries.as_ref()?;
        let stamp = self.stamps.read(fill_ref.key);
        if let Some(copy) = thread_copies::get(&self.stamps, key, fill_ref, stamp, index_version) {
            return Some(copy);
        }
        let entry = entries.get(&fill_ref.key)?;
        if entry.fill_id != fill_ref.fill || &*entry.key != key {
            return None;
        }
        thread_copies::offer(&self.stamps, fill_ref.key, stamp, index_version, &entry);
        Some(entry)
    }

    /// This thread's copy of `key`, when `unchanged` confirms that the index still has
    /// the copy's fill with nothing to count ([`thread_copies::get_unchanged`]); then the
    /// lookup needs neither the index nor the tier.
    pub(super) fn get_unchanged(
        &self,
        key: &str,
        key_hash: StoreHash,
        unchanged: impl FnOnce(u64) -> bool,
    ) -> Option<Arc<HotEntry>> {
        self.entries.as_ref()?;
        thread_copies::get_unchanged(&self.stamps, key, key_hash, unchanged)
    }

    /// The open file of fill `fill_id` of `key`, if this tier holds it.
    pub(super) fn get_open(
        &self,
        key: &str,
        key_hash: StoreHash,
        fill_id: FillId,
    ) -> Option<Arc<OpenFile>> {
        let open = self.open_files.as_ref()?.get(&key_hash)?;
        (open.fill_id == fill_id && &*open.key == key).then_some(open)
    }

    /// The epoch to pass to [`MemoryTier::offer`], read before the entry's file is.
    pub(super) fn epoch(&self) -> u64 {
        // SeqCst, with `offer` and `forget_updated`: see `offer`.
        self.epoch.load(Ordering::SeqCst)
    }

    /// Offers a copy read from the file after [`MemoryTier::epoch`] returned
    /// `epoch`. Kept unless the body is over the size limit or a metadata update
    /// ran since `epoch` (then the copy may hold the old metadata).
    ///
    /// Why this suffices: an update writes the file, raises the epoch, then drops
    /// the key's copy. If this offer's insert comes before that drop, the drop
    /// removes it; if after, the update had raised the epoch before the drop, so
    /// the check after the insert sees it and removes the copy itself. All three
    /// epoch accesses are SeqCst so neither side can miss the other.
    pub(super) fn offer(&self, epoch: u64, key_hash: StoreHash, entry: HotEntry) {
        let Some(entries) = &self.entries else {
            return;
        };
        if entry.body.len() as u64 > self.max_object {
            return;
        }
        self.insert_unless_updated(entries, epoch, key_hash, entry);
    }

    /// Offers a file opened, and its header verified, after [`MemoryTier::epoch`]
    /// returned `epoch`; kept unless a metadata update ran since (see
    /// [`MemoryTier::offer`]).
    pub(super) fn offer_open(&self, epoch: u64, key_hash: StoreHash, open: OpenFile) {
        let Some(open_files) = &self.open_files else {
            return;
        };
        self.insert_unless_updated(open_files, epoch, key_hash, open);
    }

    /// Inserts `value` into `map` unless a metadata update ran since `epoch` (before
    /// or during the insert); the argument is in [`MemoryTier::offer`].
    fn insert_unless_updated<V, W>(
        &self,
        map: &Cache<StoreHash, Arc<V>, W>,
        epoch: u64,
        key_hash: StoreHash,
        value: V,
    ) where
        W: Weighter<StoreHash, Arc<V>> + Clone,
    {
        if self.epoch() != epoch {
            return;
        }
        map.insert(key_hash, Arc::new(value));
        if self.epoch() != epoch {
            map.remove(&key_hash);
        }
    }

    /// Drops the open file and the copy of `key_hash`, if any: its disk entry is
    /// gone, replaced or rewritten.
    ///
    /// The file before the copy: a lookup that read through the held file offers its
    /// copy, then checks that the file is still held ([`MemoryTier::holds_file`]). If
    /// that check comes before this drops the file, the offer came before too, and
    /// the copy is dropped here after it; if after, the lookup drops its copy itself.
    pub(super) fn forget(&self, key_hash: StoreHash) {
        if let Some(open_files) = &self.open_files {
            open_files.remove(&key_hash);
        }
        if let Some(entries) = &self.entries {
            entries.remove(&key_hash);
        }
        // After the removal: see `thread_copies`.
        self.stamps.bump(key_hash);
    }

    /// Whether the file this tier holds open for `key_hash` is `file`.
    pub(super) fn holds_file(&self, key_hash: StoreHash, file: &Arc<std::fs::File>) -> bool {
        let held = self.open_files.as_ref().and_then(|o| o.peek(&key_hash));
        held.is_some_and(|held| Arc::ptr_eq(&held.file, file))
    }

    /// Drops the copy and the open file of `key_hash` after its metadata was
    /// rewritten in place.
    pub(super) fn forget_updated(&self, key_hash: StoreHash) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.forget(key_hash);
    }

    /// Entry files held open, for statistics.
    pub(super) fn open_files(&self) -> u64 {
        self.open_files.as_ref().map_or(0, |o| o.len() as u64)
    }

    /// The byte budget and the most files held open, for statistics.
    pub(super) fn limits(&self) -> (u64, u64) {
        (self.budget, self.open_limit)
    }

    /// Bytes held and entries, for statistics.
    pub(super) fn usage(&self) -> (u64, u64) {
        self.entries
            .as_ref()
            .map_or((0, 0), |e| (e.weight(), e.len() as u64))
    }
}
