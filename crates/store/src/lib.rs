//! The disk store: one file per fill under `objects/`, found through an
//! in-memory index (CLOCK order, see `index`), kept inside a byte budget.
//!
//! - **Fills.** A fill is written to `tmp/` by an [`EntryWriter`] and exists
//!   only after [`EntryWriter::finish`] has renamed it into `objects/` and
//!   indexed it; dropping the writer aborts the fill ([`Store::store_whole`] does all
//!   of that in one file call for a body already complete). Entries are named by an
//!   unkeyed xxh3-128 of the key string ([`Store::key_hash`]), stable across
//!   restarts, and carry the full key so a hash collision is a miss, never a
//!   wrong object. Every fill has its own fill id, so when two fills of one key
//!   race the newer wins wherever it finishes, and removing a loser's (or an
//!   evicted) file can never touch the winner's.
//! - **Budget.** Bytes of entry files in `objects/` plus bytes reserved by
//!   fills in progress stay within `cache.max_size`. A fill reserves its
//!   header and declared length before writing (a chunked body grows its
//!   reservation as it goes), evicting entries not hit since their fill (or
//!   since eviction last passed them) to make room; a fill that cannot reserve fails, and the proxy drops the fill, not
//!   the client. The index is sharded so hits never take a global lock (see
//!   `index`).
//! - **Disk space.** Fills also keep `cache.min_free` free on the filesystem,
//!   evicting before they write and refusing when eviction cannot help; a write
//!   that fails with `ENOSPC`, `EDQUOT` or `EIO` makes new fills back off for a
//!   while (see `space`). Lookups never ask.
//! - **Restart.** [`Store::open`] locks the directory (`lock`), checks that
//!   `tmp/` and `objects/` share a filesystem, empties `tmp/` and returns; a
//!   background thread then rebuilds the index from the entry headers (`scan`)
//!   while the proxy serves (misses until a key is indexed).
//! - **Integrity.** A hit's header is verified before its first byte is sent;
//!   a body below `cache.verify_whole_below` is read and verified whole (a
//!   damaged one is a plain miss); a larger body is verified as it streams and
//!   a mismatch ends the stream with an error, so the client sees a truncated
//!   transfer, never a complete wrong body. A byte range of a large body
//!   ([`StoredEntry::into_range_stream`]) is verified by the 64 KiB blocks it
//!   touches, each with its own checksum in the entry (see [`entry`]): a small
//!   range before anything is sent ([`StoredEntry::verify_range`], a damaged
//!   block makes it a miss), a longer one block by block as it streams (a
//!   damaged block ends the stream before its bytes). Every damaged file found
//!   is removed, logged and counted ([`StoreStats`]).
//! - **Memory tier.** A lookup that read and verified a whole body (up to
//!   `cache.memory_max_object_size`) leaves a copy in memory, within
//!   `cache.memory_size`; later lookups of the same fill read no file (see
//!   `memory` for how the copy follows the disk entry). A body of 64 KiB or
//!   more is copied into a sealed memory file rather than onto the heap
//!   ([`mapped`]), so the socket can send it with `sendfile(2)`; it is hashed as
//!   it is copied, on a blocking thread, and nothing can change it afterwards.
//! - **Reads.** A lookup opens the file, reads its header (and a small body) in one
//!   or two positioned reads that take only what the page cache holds, on the
//!   calling thread; only a read that must wait for the disk moves to a blocking
//!   thread (see `read`). Up to `cache.open_files` files stay open with their
//!   verified headers (see `memory`), so a hit on one reads only its body.
//! - **Hand-over.** [`Store::close_for_handover`] stops every write to the cache
//!   directory (fills in progress get a grace to commit), syncs and releases its lock
//!   while the process serves on, so that another process can open it at once; body
//!   streams of entries already open read on (see `handover`).
//! - **Revalidation.** [`Store::update_meta`] replaces an entry's metadata
//!   in place (after an origin 304) by writing the metadata slot that is not
//!   current, so a crash mid-write leaves the old metadata in force (see
//!   [`entry`]). Updates are serialized, so two racing updates never write
//!   the same sequence into the same slot.
//! - **Invalidation.** [`Store::remove`] takes a key's entry out of the index
//!   and unlinks its file before it returns (RFC 9111 §4.4), and fences out
//!   fills of the key that began before it, so none of them commits older
//!   content afterwards (see `fence`).
//!
//! The file format is in [`entry`]; paths, header reads and fsyncs in `disk`.

mod catalog;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod derived;
mod disk;
mod dropped;
pub mod entry;
mod error;
mod evict;
mod fence;
mod handover;
mod hot;
mod ids;
mod inline_io;
/// The index and its eviction alone: the simulator replays workloads through it, so that
/// its evictions are the store's.
pub mod index;
/// The index's eviction, for the miniature caches of `secondhit-tuning`, which model it:
/// its constants, and its ghost, which they keep as it is.
pub use index::ghost::Ghost;
pub use index::{GHOST_TENTHS, MAX_HITS, SMALL_SHARE};
mod leaf_dirs;
mod lock;
pub mod mapped;
mod memory;
mod object_size;
mod purge;
mod read;
mod remove;
pub(crate) mod purge_log;
mod scan;
pub mod settings;
mod space;
mod tail;
mod thread_copies;
pub mod throttle;
mod update;
mod write_budget;
mod writer;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::{debug, info, warn};

pub use catalog::{PurgeKind, PurgeSelector, UnknownPurgeKind};
pub use disk::Damage;
pub use dropped::{DroppedFills, FillDrop};
pub use entry::EntryMeta;
pub use error::StoreError;
pub use fence::FillTicket;
pub use ids::{FillId, FillRef, StoreHash};
pub use inline_io::FillCalls;
pub use purge::PurgeMode;
pub use read::StoredEntry;
pub use space::{DiskStats, Trouble};
pub use tail::FillTail;
pub use writer::{EntryWriter, WholeFill};

use crate::settings::Fsync;
use error::map_entry_error;
use index::{Fill, Index};

/// How the store is set up.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The cache directory (holds `secondhit.lock`, `objects/`, `tmp/`, `state/`).
    pub dir: PathBuf,
    /// When committed changes reach the disk: each as it is made, in a periodic
    /// `syncfs` ([`Store::sync`]), or when the kernel chooses.
    pub fsync: Fsync,
    /// Budget in bytes for entry files plus reservations of fills in progress.
    pub max_size: u64,
    /// How long [`Store::open`] waits for another process to release the directory.
    pub lock_timeout: Duration,
    /// Bodies shorter than this many bytes are read and verified whole before a
    /// hit is served; longer ones are verified as they stream.
    pub verify_whole_below: u64,
    /// Budget in bytes of the memory tier, which serves hot entries without
    /// touching their files; 0 turns it off.
    pub memory_size: u64,
    /// Largest body, in bytes, the memory tier holds.
    pub memory_max_object_size: u64,
    /// Entry files kept open, with their verified headers, so that a hit on one
    /// reads only its body; 0 opens the file on every hit.
    pub open_files: usize,
    /// Free bytes to keep on the cache's filesystem (`cache.min_free`): fills evict
    /// entries to stay above it, and are refused when eviction cannot (see `space`).
    pub min_free: u64,
    /// Memory the tag index may use (`tags.max_memory`, see `catalog`).
    pub tag_memory: u64,
    /// Bytes a second fills may write (`admission.max_write_rate`), counted a minute
    /// at a time (see `write_budget`); 0 for no cap.
    pub max_write_rate: u64,
}

/// The store's counters, for metrics. Each is read on its own, so a snapshot
/// taken while fills run may be off by one operation between fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Entries currently indexed.
    pub objects: u64,
    /// Bytes of entry files in `objects/` (headers included), including files
    /// evicted but not yet unlinked.
    pub bytes: u64,
    /// Bytes reserved by fills in progress.
    pub reserved_bytes: u64,
    /// The budget, `cache.max_size`.
    pub max_bytes: u64,
    /// Entries evicted to make room, since open.
    pub evictions: u64,
    /// Keys of evicted entries the index remembers (S3-FIFO's ghost; [`Store::keep_ghost`]).
    pub ghost_keys: u64,
    /// Files removed because they were not valid entries (wrong name, format
    /// or length), found by the scan, a lookup or a body stream.
    pub removed_invalid: u64,
    /// Entries removed because a header, metadata or body checksum failed.
    pub checksum_failures: u64,
    /// True once the start-up scan has indexed everything it found.
    pub scan_complete: bool,
    /// Fills committed (renamed and indexed) since open; a fill that lost to a
    /// newer fill of the same key is not counted. Read with Acquire, so a reader
    /// that sees a fill counted also finds it in the index.
    pub committed_fills: u64,
    /// Body bytes of those fills: what admission let reach the disk.
    pub committed_bytes: u64,
    /// Bytes the memory tier holds (bodies, keys, headers and bookkeeping).
    pub memory_bytes: u64,
    /// Entries the memory tier holds.
    pub memory_objects: u64,
    /// Entry files held open with their verified headers (`cache.open_files`).
    pub open_files: u64,
    /// The memory tier's budget, `cache.memory_size`.
    pub memory_max_bytes: u64,
    /// The most entry files held open (`cache.open_files`, as the open-file limit allows).
    pub open_files_max: u64,
    /// What the tag index is charged, against `tags.max_memory` (an estimate).
    pub tag_bytes: u64,
    /// Fills that began but were dropped before they committed, by reason.
    pub dropped_fills: DroppedFills,
    /// Syncs of the cache's filesystem made for `cache.fsync = "<interval>"`.
    pub syncs: u64,
    /// Fills skipped, or dropped as they grew, for `admission.max_write_rate`.
    pub write_budget_refused: u64,
    /// Free space on the cache's filesystem, and fills refused or failed for lack of it.
    pub disk: DiskStats,
    /// File calls of fills, on the worker and on the blocking pool (see `inline_io`).
    pub fill_calls: FillCalls,
}

/// The on-disk cache. Cheap to share: the proxy holds it in an `Arc`.
#[derive(Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

/// State shared by the store, its writers, its body streams and the scan.
#[derive(Debug)]
struct Inner {
    opts: StoreOptions,
    /// `<dir>/objects`.
    objects: PathBuf,
    /// `<dir>/tmp`.
    tmp: PathBuf,
    /// The `objects/a/bc/` directories known to exist.
    leaf_dirs: leaf_dirs::LeafDirs,
    /// Key hash → newest committed fill, in CLOCK order, with the byte budget.
    index: Index,
    /// Each indexed entry's key and tags, and the reverse maps purges search.
    catalog: catalog::Catalog,
    /// Verified copies of hot entries (see `memory`).
    memory: memory::MemoryTier,
    /// Keeps the background scan and fills of this run from stepping on each other.
    scan: scan::ScanGate,
    /// Purges whose files are still being unlinked, kept on disk until they are.
    purge_log: purge_log::PurgeLog,
    /// The ids of the purges a previous run left undone, replayed by this run's scan.
    replayed: Vec<u64>,
    /// The next fill id, allocated under the `fences` lock (see
    /// `Fences::begin` for the ordering).
    next_fill_id: AtomicU64,
    /// Removals that fills in progress must respect.
    fences: fence::Fences,
    /// Serializes metadata updates, so two never read the same current slot and
    /// write the same sequence into the other. One lock for the whole store:
    /// updates are rare (one per revalidation) and short. A std mutex, taken
    /// inside the blocking task, so it is held exactly while the file is
    /// written, even if the caller's future is dropped meanwhile.
    meta_update: Mutex<()>,
    /// Whether files changed since the last [`Store::sync`] (with `Fsync::Every`).
    unsynced: AtomicBool,
    /// Syncs [`Store::sync`] made.
    syncs: AtomicU64,
    /// Fills committed since open. Incremented with Release after the index
    /// insert and read with Acquire, so a reader that sees the count also sees
    /// the entry in the index.
    committed: AtomicU64,
    /// Body bytes of the fills counted in `committed`. Relaxed: written before the
    /// Release increment of `committed`, which orders it for readers.
    committed_body_bytes: AtomicU64,
    /// See [`StoreStats::removed_invalid`]. Relaxed: a plain counter.
    removed_invalid: AtomicU64,
    /// See [`StoreStats::checksum_failures`]. Relaxed: a plain counter.
    checksum_failures: AtomicU64,
    /// See [`StoreStats::dropped_fills`].
    dropped: dropped::FillDrops,
    /// The `cache.min_free` floor and the back-off after failed writes.
    space: space::Space,
    /// `admission.max_write_rate`: what fills may write a minute.
    write_budget: write_budget::WriteBudget,
    /// Whether fills run their file work on the worker (see `inline_io`).
    inline_io: inline_io::InlineGate,
    /// Evicted files still being unlinked (see `evict`).
    behind: evict::Behind,
    /// The steps that write the cache directory, and its lock: held until the store
    /// closes for a hand-over ([`Store::close_for_handover`]) or the last `Arc` drops.
    gate: handover::Gate,
}

/// What a fill of `key` (whose hash is `key_hash`) with `meta` is, as removals select it.
fn fill_of<'a>(key: &'a str, key_hash: StoreHash, meta: &'a EntryMeta) -> fence::FillOf<'a> {
    fence::FillOf {
        hash: key_hash,
        key,
        tags: &meta.tags,
    }
}

/// A panic's message, when it has one.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    if let Some(text) = panic.downcast_ref::<&str>() {
        return text;
    }
    panic
        .downcast_ref::<String>()
        .map_or("no message", String::as_str)
}

/// Runs `job` on the blocking pool; a job that panicked is an I/O error on `path`.
async fn blocking<T: Send + 'static>(
    path: &std::path::Path,
    job: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let joined = tokio::task::spawn_blocking(job).await;
    joined.map_err(|e| disk::io_err(path)(std::io::Error::other(e)))?
}

impl Inner {
    /// Runs one file call of a fill: on this worker, timed, while `inline_io`'s gate is
    /// open; on the blocking pool otherwise.
    async fn fill_io<T: Send + 'static>(
        &self,
        path: &std::path::Path,
        job: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let began = std::time::Instant::now();
        if self.inline_io.open_at(began) {
            // A job that panics here fails as it would on the pool: the fill is dropped,
            // and the client's task that runs it goes on.
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.inline_io.run(began, job)
            }));
            return ran.unwrap_or_else(|panic| {
                let what = panic_message(panic.as_ref());
                let source = std::io::Error::other(format!("the file call panicked: {what}"));
                Err(disk::io_err(path)(source))
            });
        }
        self.inline_io.count_pooled();
        blocking(path, job).await
    }

    /// Whether each file and directory change is fsynced as it is made.
    fn fsync_each(&self) -> bool {
        self.opts.fsync.each_change()
    }

    /// Notes a change to the files for the next [`Store::sync`], when syncs are batched.
    fn changed(&self) {
        if matches!(self.opts.fsync, Fsync::Every(_)) {
            self.unsynced.store(true, Ordering::Release);
        }
    }

    fn object_path(&self, fill: FillRef) -> PathBuf {
        disk::object_path(&self.objects, fill)
    }

    fn count_damage(&self, damage: Damage) {
        let counter = match damage {
            Damage::Invalid | Damage::Outdated => &self.removed_invalid,
            Damage::Checksum => &self.checksum_failures,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The next eviction victim when `bytes` do not fit, or `None` when
    /// evicting cannot help: the index is empty, or other fills' reservations
    /// leave no room even in an empty cache (checked first, so a hopeless fill
    /// does not empty the cache before it fails).
    fn victim_for(&self, bytes: u64) -> Option<(StoreHash, Fill)> {
        if !self.index.could_fit(bytes) {
            return None;
        }
        let (key_hash, fill) = self.index.pop_victim()?;
        debug!(key_hash = %format_args!("{key_hash:032x}"), size = fill.size, "evicting");
        Some((key_hash, fill))
    }

    /// Charges `bytes` a fill is about to write to the write budget.
    fn charge_writes(&self, bytes: u64) -> Result<(), StoreError> {
        match self.write_budget.charge(bytes) {
            true => Ok(()),
            false => Err(StoreError::WriteBudget {
                per_minute: self.write_budget.per_window().unwrap_or(0),
            }),
        }
    }

    /// Reserves `bytes` of the budget, evicting entries in the index's order
    /// (their files unlinked behind the fill, or before their bytes count as free: `evict`)
    /// until they fit; then keeps the
    /// filesystem's free space above `cache.min_free` the same way (`space`). For a
    /// `new_fill`, its inodes count too, and a back-off after failed writes refuses it.
    async fn reserve(self: &Arc<Self>, bytes: u64, new_fill: bool) -> Result<(), StoreError> {
        self.reserve_budget(bytes).await?;
        let floor = self.keep_floor(bytes, new_fill).await;
        if floor.is_err() {
            self.index.release_reservation(bytes);
        }
        floor
    }

    /// The blocking twin of [`Inner::reserve`], for the scan thread.
    fn reserve_sync(&self, bytes: u64) -> bool {
        while !self.index.try_reserve(bytes) {
            let Some((key_hash, fill)) = self.victim_for(bytes) else {
                return false;
            };
            self.unlink_sync(key_hash, fill);
        }
        true
    }

    /// Forgets a fill about to be unlinked, in the memory tier and the tag catalog, and
    /// returns its file's path.
    fn forget_fill(&self, key_hash: StoreHash, fill: Fill) -> PathBuf {
        self.memory.forget(key_hash);
        let fill_ref = FillRef {
            key: key_hash,
            fill: fill.fill_id,
        };
        self.catalog.forget(fill_ref);
        self.object_path(fill_ref)
    }

    /// Unlinks an entry file already taken out of the index (or never put in)
    /// and gives its bytes back to the budget.
    /// Returns the inodes that freed: the file's, and its directories' when it was the
    /// last entry in them.
    async fn unlink(&self, key_hash: StoreHash, fill: Fill) -> u64 {
        let path = self.forget_fill(key_hash, fill);
        let dirs = disk::remove_entry_quietly(&path, self.space.inodes_scarce()).await;
        self.forget_leaf_dir(key_hash, dirs);
        self.index.release_object(fill.size);
        1 + dirs
    }

    /// The blocking twin of [`Inner::unlink`], for the scan thread.
    fn unlink_sync(&self, key_hash: StoreHash, fill: Fill) {
        let path = self.forget_fill(key_hash, fill);
        let dirs = disk::remove_entry_quietly_sync(&path, self.space.inodes_scarce());
        self.forget_leaf_dir(key_hash, dirs);
        self.index.release_object(fill.size);
    }

    /// After `dirs` directories of `key_hash`'s entry were removed: a fill of the key
    /// must make its directory again.
    fn forget_leaf_dir(&self, key_hash: StoreHash, dirs: u64) {
        if dirs > 0 {
            self.leaf_dirs.forget(key_hash);
        }
    }

    /// Forgets, deletes and counts an entry whose file failed verification.
    /// Only the caller that takes the fill out of the index does so: if the
    /// index no longer names it, it was evicted, replaced or discarded already,
    /// and whoever took it out unlinks it (so two readers of one damaged file
    /// count it once).
    /// Once the store closed for a hand-over, the file is left alone: the next owner
    /// verifies it as it serves it.
    async fn discard(&self, fill_ref: FillRef, damage: Damage, reason: &str) {
        let path = self.object_path(fill_ref);
        let Some(_step) = self.gate.step() else {
            debug!(path = %path.display(), reason, "damaged cache file left to the directory's next owner");
            return;
        };
        let Some(fill) = self.index.remove(fill_ref) else {
            debug!(path = %path.display(), reason, "damaged cache file already out of the index");
            return;
        };
        warn!(path = %path.display(), reason, "removing damaged cache entry");
        self.memory.forget(fill_ref.key);
        self.count_damage(damage);
        self.unlink(fill_ref.key, fill).await;
    }
}

impl Store {
    /// Opens the cache directory: creates it and `objects/`, `tmp/`, `state/`
    /// if missing; locks it (waiting up to `lock_timeout` for another process;
    /// blocks the calling thread meanwhile); checks that `tmp/` and `objects/`
    /// are on one filesystem; removes everything in `tmp/`. Then it starts the
    /// background scan that indexes `objects/` and returns at once: until the
    /// scan reaches a key, a lookup of it is a miss.
    pub fn open(opts: StoreOptions) -> Result<Store, StoreError> {
        disk::create_dir(&opts.dir)?;
        let lock = lock::DirLock::acquire(&opts.dir, opts.lock_timeout)?;
        let objects = opts.dir.join(disk::OBJECTS);
        let tmp = opts.dir.join(disk::TMP);
        for dir in [&objects, &tmp, &opts.dir.join(disk::STATE)] {
            disk::create_dir(dir)?;
        }
        disk::check_same_filesystem(&tmp, &objects)?;
        let leftovers = disk::clear_dir(&tmp)?;
        let (purge_log, undone) = purge_log::PurgeLog::open(&opts.dir.join(disk::STATE))?;
        let now_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        info!(
            dir = %opts.dir.display(),
            max_size = opts.max_size,
            leftovers,
            "cache store opened; indexing objects/ in the background"
        );
        let inner = Arc::new(Inner {
            objects,
            tmp,
            leaf_dirs: leaf_dirs::LeafDirs::new(),
            index: Index::new(opts.max_size),
            catalog: catalog::Catalog::new(opts.tag_memory),
            memory: memory::MemoryTier::new(
                opts.memory_size,
                opts.memory_max_object_size,
                opts.open_files,
            ),
            scan: scan::ScanGate::new(),
            purge_log,
            replayed: undone.iter().map(|(id, _)| *id).collect(),
            // The scan raises this past every fill id it finds.
            next_fill_id: AtomicU64::new(now_us),
            fences: fence::Fences::default(),
            meta_update: Mutex::new(()),
            unsynced: AtomicBool::new(false),
            syncs: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            committed_body_bytes: AtomicU64::new(0),
            removed_invalid: AtomicU64::new(0),
            checksum_failures: AtomicU64::new(0),
            dropped: dropped::FillDrops::default(),
            space: space::Space::new(opts.dir.clone(), opts.min_free),
            write_budget: write_budget::WriteBudget::new(opts.max_write_rate),
            inline_io: inline_io::InlineGate::new(!opts.fsync.each_change()),
            behind: evict::Behind::default(),
            gate: handover::Gate::new(lock),
            opts,
        });
        if !undone.is_empty() {
            info!(
                purges = undone.len(),
                "purges the last run left unfinished: the scan removes what they select"
            );
        }
        for (_, selector) in &undone {
            inner.scan.register_purge(selector);
        }
        scan::spawn(&inner)?;
        Ok(Store { inner })
    }

    /// `<dir>/state/`, owned by other modules (filter seed, snapshots).
    pub fn state_dir(&self) -> PathBuf {
        self.inner.opts.dir.join(disk::STATE)
    }

    /// `<dir>/objects/`, where the entries lie.
    pub fn objects_dir(&self) -> PathBuf {
        self.inner.opts.dir.join(disk::OBJECTS)
    }

    /// Stable, unkeyed xxh3-128 of the key string: names the entry forever.
    pub fn key_hash(key: &str) -> StoreHash {
        StoreHash::of(key)
    }

    /// True if the index holds an entry for this key hash (recency unchanged).
    pub fn contains(&self, key_hash: StoreHash) -> bool {
        self.inner.index.contains(key_hash)
    }

    /// Objects the cache holds when full, estimated at the current mean entry size (0 while
    /// empty): what `rotate = "auto"` sizes the filter's generations to.
    pub fn objects_when_full(&self) -> u64 {
        self.inner.index.objects_when_full()
    }

    /// Whether the index remembers the keys its small queue evicts unhit, so a refill
    /// of one skips the probation it failed (S3-FIFO's ghost). Worth its memory only
    /// under a policy that stores first sights; under second-hit the admission filter
    /// already keeps one-hit wonders out (`benches/RESULTS.md`, "a ghost in the
    /// store's index"). Off when the store opens; turning it off forgets every key.
    pub fn keep_ghost(&self, on: bool) {
        self.inner.index.keep_ghost(on);
    }

    /// Sets the write budget to `rate` bytes a second, 0 for none (a reload of
    /// `admission.max_write_rate`); what this minute already wrote still counts.
    pub fn set_write_rate(&self, rate: u64) {
        self.inner.write_budget.set_rate(rate);
    }

    /// How often [`Store::sync`] should run: `cache.fsync`'s interval; `None` when each
    /// change is fsynced as it is made, or none is.
    pub fn sync_interval(&self) -> Option<Duration> {
        match self.inner.opts.fsync {
            Fsync::Every(every) => Some(every),
            Fsync::EachFill | Fsync::Off => None,
        }
    }

    /// Makes the changes since the last sync durable with one `syncfs(2)` of the cache's
    /// filesystem, when there were any: one system call for however many fills, where
    /// `cache.fsync = true` pays two fsyncs per fill. Returns whether it synced (never,
    /// once the store closed for a hand-over, which synced last).
    pub async fn sync(&self) -> Result<bool, StoreError> {
        let Some(_step) = self.inner.gate.step() else {
            return Ok(false);
        };
        self.sync_unguarded().await
    }

    /// [`Store::sync`], for the caller that holds a step or the whole gate.
    async fn sync_unguarded(&self) -> Result<bool, StoreError> {
        if !self.inner.unsynced.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        let dir = self.inner.objects.clone();
        // The fills' file calls would wait for the sync: on the pool, not the worker.
        let _fills_to_the_pool = self.inner.inline_io.syncing();
        let synced = blocking(&self.inner.objects, move || {
            let objects = std::fs::File::open(&dir).map_err(disk::io_err(&dir))?;
            rustix::fs::syncfs(&objects).map_err(|e| disk::io_err(&dir)(e.into()))
        })
        .await;
        if synced.is_err() {
            // Not durable yet: the next sync tries again.
            self.inner.unsynced.store(true, Ordering::Release);
        }
        synced?;
        self.inner.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Runs [`Store::sync`] every `cache.fsync` interval, for as long as it is polled
    /// (a server aborts it at shutdown and syncs once more); returns at once when that
    /// setting asks for no periodic sync.
    pub async fn sync_periodically(self: Arc<Self>) {
        let Some(every) = self.sync_interval() else {
            return;
        };
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Err(error) = self.sync().await {
                warn!(%error, "cannot sync the cache's filesystem; trying again at the next interval");
            }
        }
    }

    /// Whether an entry carrying `tags` fits the tag index's budget (`tags.max_memory`)
    /// now: one that does not is not stored, since its tags could not all be indexed.
    pub fn tags_fit(&self, tags: &[String]) -> bool {
        self.inner.catalog.fits(tags)
    }

    /// The counters, for metrics.
    pub fn stats(&self) -> StoreStats {
        let inner = &self.inner;
        let counts = inner.index.counts();
        let (memory_bytes, memory_objects) = inner.memory.usage();
        let (memory_max_bytes, open_files_max) = inner.memory.limits();
        StoreStats {
            objects: counts.objects,
            bytes: counts.object_bytes + inner.behind.bytes(),
            reserved_bytes: counts.reserved_bytes,
            max_bytes: inner.index.max_bytes(),
            evictions: counts.evictions,
            ghost_keys: counts.ghost_keys,
            removed_invalid: inner.removed_invalid.load(Ordering::Relaxed),
            checksum_failures: inner.checksum_failures.load(Ordering::Relaxed),
            scan_complete: inner.scan.complete(),
            committed_fills: inner.committed.load(Ordering::Acquire),
            committed_bytes: inner.committed_body_bytes.load(Ordering::Relaxed),
            memory_bytes,
            memory_objects,
            open_files: inner.memory.open_files(),
            memory_max_bytes,
            open_files_max,
            tag_bytes: inner.catalog.tag_bytes(),
            dropped_fills: inner.dropped.snapshot(),
            syncs: inner.syncs.load(Ordering::Relaxed),
            write_budget_refused: inner.write_budget.refused(),
            disk: inner.space.stats(Instant::now()),
            fill_calls: inner.inline_io.calls(),
        }
    }

    /// Opens the indexed entry and counts a hit for the index: reads and
    /// verifies preamble, key and metadata (checksums) and checks the stored
    /// key equals `key` (else `Ok(None)`). A body shorter than
    /// `verify_whole_below` is read and verified too, and so is one the memory
    /// tier may hold, which then offers it the copy. A file that vanished is
    /// `Ok(None)`; a damaged one is removed from the index and the disk,
    /// logged at warn, counted, and `Ok(None)`. An entry the memory tier holds
    /// is served from it without touching the file. Once the store closed for a
    /// hand-over, every lookup is `Ok(None)`: the directory's next owner may have
    /// replaced or purged what this index still names.
    pub async fn lookup(
        &self,
        key: &str,
        key_hash: StoreHash,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let inner = &self.inner;
        if inner.gate.closing() {
            return Ok(None);
        }
        let unchanged = |version| inner.index.unchanged_since(key_hash, version);
        if let Some(hot) = inner.memory.get_unchanged(key, key_hash, unchanged) {
            return Ok(Some(StoredEntry::from_memory(&hot, key_hash)));
        }
        let Some((fill, index_version)) = inner.index.touch(key_hash) else {
            return Ok(None);
        };
        let fill_ref = FillRef {
            key: key_hash,
            fill: fill.fill_id,
        };
        if let Some(hot) = inner.memory.get(key, fill_ref, index_version) {
            return Ok(Some(StoredEntry::from_memory(&hot, key_hash)));
        }
        let epoch = inner.memory.epoch();
        let whole_below = (inner.opts.verify_whole_below).max(inner.memory.read_whole_below());
        let held = inner.memory.get_open(key, key_hash, fill_ref.fill);
        // Boxed: the file path's future is large, and a hit from memory never needs it;
        // inline, every request's future would carry (and move) its size.
        let opening = Box::pin(inner.open_entry(key, fill_ref, held, whole_below));
        let Some(opened) = opening.await? else {
            return Ok(None);
        };
        Ok(Some(inner.keep_copies(key, fill_ref, epoch, opened)))
    }

    /// Starts a fill: reserves room in the budget for the header and
    /// `declared_len` (evicting as needed), creates the temp file and writes
    /// preamble (body fields zero for now), key and metadata. `declared_len` is
    /// the response's `Content-Length` when it had one; `max_len` is the largest
    /// body this fill may store (the proxy passes `cache.max_object_size` as it
    /// reads it for the request, so the limit follows the live settings rather
    /// than the store's). Errors with `TooLarge` if `declared_len` exceeds
    /// `max_len`, with `Credentials` if the metadata's request headers hold
    /// credentials, with `NoSpace` if the budget has no room, with
    /// `PurgedInFlight` if a removal or purge since `ticket` selects it (see `fence`),
    /// and with `Closed` once the store closed for a hand-over.
    pub async fn begin_fill(
        &self,
        key: &str,
        key_hash: StoreHash,
        meta: &EntryMeta,
        declared_len: Option<u64>,
        max_len: u64,
        ticket: FillTicket,
    ) -> Result<EntryWriter, StoreError> {
        let fill = fill_of(key, key_hash, meta);
        writer::begin(&self.inner, fill, meta, declared_len, max_len, ticket).await
    }

    /// Stores `body`, complete, as [`Store::begin_fill`] followed by
    /// [`EntryWriter::finish`] would, with the same guarantees, but makes the entry's
    /// directory (the first time), creates, writes, fsyncs (as configured) and renames
    /// its file in one file call: each call is a hand-off to the blocking pool whenever
    /// fills use it (see `inline_io`). For a body that arrived whole with its head.
    /// Errors as [`Store::begin_fill`] does for a fill not begun (counted as refused as
    /// it counts them); a fill that began and then failed is [`WholeFill::Dropped`],
    /// counted as a failed [`EntryWriter::finish`] is.
    pub async fn store_whole(
        &self,
        key: &str,
        key_hash: StoreHash,
        meta: &EntryMeta,
        body: bytes::Bytes,
        max_len: u64,
        ticket: FillTicket,
    ) -> Result<WholeFill, StoreError> {
        let fill = fill_of(key, key_hash, meta);
        writer::store_whole(&self.inner, fill, meta, body, max_len, ticket).await
    }

    /// Waits until the files of the entries evicted so far are unlinked: a fill's
    /// victims may still be on disk, unlinked on the blocking pool, once the fill began
    /// (see [`StoreStats::bytes`]).
    pub async fn unlinks_done(&self) {
        let behind = &self.inner.behind;
        behind.wait_before(behind.mark()).await;
    }

    /// A ticket for a request about to go to the origin, for the fill of its answer: a
    /// removal or purge after this fences that fill ([`Store::begin_fill`]).
    pub fn fill_ticket(&self) -> FillTicket {
        fence::Fences::ticket(&self.inner.next_fill_id)
    }
}

#[cfg(test)]
mod tests;
