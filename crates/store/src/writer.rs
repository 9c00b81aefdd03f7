//! A fill in progress: its temp file, its running checksums (the whole body's and
//! the block table's) and its share of the byte budget.
//!
//! The file work runs in as few calls as it can: one creates the temp file (and, the
//! first time, the entry's directory) and writes the header, one writes each
//! [`WRITE_BATCH`] of body (a small body waits in memory), and one writes the rest with
//! the block table, fsyncs and renames. Each call runs on the worker while the disk
//! answers quickly and on the blocking pool otherwise (`inline_io`). Why few: a call on
//! the pool is a hand-off to a blocking thread and back, and with one per write, seek,
//! flush, fsync and rename a small fill spent most of its CPU time on threads waking
//! each other (`benches/RESULTS.md`, "a fill's file work in few calls").
//!
//! A body complete before the fill begins needs only one call ([`store_whole`]): the
//! same bookkeeping before it ([`start`]) and after it ([`place`]), with the create, the
//! writes and the commit in between run as one.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tracing::{debug, warn};
use xxhash_rust::xxh3::{Xxh3Default, xxh3_64};

use super::entry::blocks::BlockHasher;
use super::entry::{self, EntryMeta, Preamble, file_len};
use super::fence::{Began, FillOf, FillTicket};
use super::handover::{Gate, OpenFill, Step};
use super::index::{Fill, Placed};
use super::tail::FillTail;
use super::{FillDrop, Inner, StoreError, disk, map_entry_error};
use crate::{FillRef, StoreHash};

/// Body bytes kept in memory before they are written in one blocking call: large
/// enough that a long body costs few calls, small enough that many fills at once hold
/// little memory.
const WRITE_BATCH: usize = 128 * 1024;

/// Bytes of the budget held by one fill; given back on drop unless committed.
struct Reservation {
    inner: Arc<Inner>,
    bytes: u64,
}

impl Reservation {
    /// Reserves `bytes` for a new fill, evicting as needed, and charges them to the
    /// write budget (after the reservation, so a fill the disk refused charges nothing).
    async fn take(inner: &Arc<Inner>, bytes: u64) -> Result<Reservation, StoreError> {
        inner.reserve(bytes, true).await?;
        let reservation = Reservation {
            inner: Arc::clone(inner),
            bytes,
        };
        inner.charge_writes(bytes)?;
        Ok(reservation)
    }

    /// Grows the reservation to at least `need` bytes (at most `cap`). It grows
    /// geometrically, by up to a sixteenth of the budget at a time, so a long
    /// chunked body reserves a few times rather than on every chunk; if the
    /// larger step does not fit, exactly `need` is tried.
    async fn grow(&mut self, need: u64, cap: u64) -> Result<(), StoreError> {
        let step = self.bytes.min(self.inner.index.max_bytes() / 16);
        let mut target = self.bytes.saturating_add(step).min(cap).max(need);
        if let Err(e) = self.inner.reserve(target - self.bytes, false).await {
            if target == need {
                return Err(e);
            }
            target = need;
            self.inner.reserve(target - self.bytes, false).await?;
        }
        self.bytes = target;
        Ok(())
    }

    /// Turns the reservation into an entry file of `size` bytes; nothing is
    /// left to give back on drop.
    fn commit(&mut self, size: u64) {
        self.inner.index.commit_reservation(self.bytes, size);
        self.bytes = 0;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.inner.index.release_reservation(self.bytes);
        }
    }
}

/// A fill's registration with the removal fences (see `fence`): allocates
/// the fill id, and ends the registration on drop, committed or not.
struct Registration {
    inner: Arc<Inner>,
    key_hash: StoreHash,
}

impl Registration {
    /// Registers `fill` requested at `ticket`; returns the registration and the fill's
    /// reference, or `PurgedInFlight` when a removal after the ticket selects it.
    fn begin(
        inner: &Arc<Inner>,
        fill: FillOf<'_>,
        ticket: FillTicket,
    ) -> Result<(Registration, FillRef), StoreError> {
        let key_hash = fill.hash;
        let began = (inner.fences).begin(fill, ticket, &inner.next_fill_id);
        let Began::Registered(fill_id) = began else {
            return Err(StoreError::PurgedInFlight);
        };
        let registration = Registration {
            inner: Arc::clone(inner),
            key_hash,
        };
        let fill = FillRef {
            key: key_hash,
            fill: fill_id,
        };
        Ok((registration, fill))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.inner.fences.end(self.key_hash);
    }
}

/// A fill in progress. Only [`EntryWriter::finish`] makes it an entry;
/// dropping the writer removes the temp file and gives back its reservation.
pub struct EntryWriter {
    inner: Arc<Inner>,
    key: String,
    key_hash: StoreHash,
    /// The entry's cache tags, recorded in the catalog when it commits.
    tags: Vec<String>,
    /// Body fields are filled in by `finish`.
    preamble: Preamble,
    pub(super) tmp_path: PathBuf,
    /// The temp file; `None` while a blocking call has it, and for good if that call's
    /// future was dropped (the fill then fails).
    file: Option<std::fs::File>,
    /// Body bytes not written yet (fewer than [`WRITE_BATCH`] between writes).
    unwritten: Vec<u8>,
    /// How many of them lie beyond the room allocated when the file was made (a body of
    /// undeclared length): counted in the store's free-space estimate until written.
    held: u64,
    /// Running xxh3-64 of the body. Boxed: it carries a large buffer.
    hasher: Box<Xxh3Default>,
    /// The block table of the body so far, written after it by `finish`.
    block_hasher: BlockHasher,
    /// The body may not exceed this: the fill's `max_len`, or the declared length.
    limit: u64,
    declared_len: Option<u64>,
    /// Covers at least the header and the body written so far.
    reservation: Reservation,
    /// Set once the temp file is renamed, so Drop leaves it alone.
    renamed: bool,
    /// Held until the writer is gone, so a removal of the key meanwhile fences it.
    _registration: Registration,
    /// Counted open until the writer is gone, so a hand-over gives it its grace.
    _open: OpenFill,
}

impl std::fmt::Debug for EntryWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryWriter")
            .field("key", &self.key)
            .field("fill_id", &self.preamble.fill_id)
            .field("body_len", &self.preamble.body_len)
            .field("reserved", &self.reservation.bytes)
            .finish_non_exhaustive()
    }
}

/// What every fill holds from its start to its end, however it writes its file: made
/// by [`start`], before the first file call.
struct Started {
    /// Counted open until the fill ends, so a hand-over gives it its grace.
    open: OpenFill,
    /// Held through the first file call (a whole fill's only one, and its indexing).
    step: Step,
    /// Held until the fill ends, so a removal of the key meanwhile fences it.
    registration: Registration,
    fill: FillRef,
    /// Body fields zero until the body is known.
    preamble: Preamble,
    /// Preamble, key and metadata, as the temp file begins.
    header: Vec<u8>,
    /// Covers the header and the declared length.
    reservation: Reservation,
    tmp_path: PathBuf,
    /// The entry's path when its `objects/a/bc/` must be made in the first file call.
    parent: Option<PathBuf>,
}

/// The bookkeeping of a fill before its first file call: the size check, the fence
/// registration, the header and the reservation (which, refused for disk trouble, is
/// counted: [`refused`]).
async fn start(
    inner: &Arc<Inner>,
    fill: FillOf<'_>,
    meta: &EntryMeta,
    declared_len: Option<u64>,
    max_len: u64,
    ticket: FillTicket,
) -> Result<Started, StoreError> {
    if declared_len.is_some_and(|d| d > max_len) {
        return Err(StoreError::TooLarge { limit: max_len });
    }
    let open = Gate::open_fill(inner).ok_or(StoreError::Closed)?;
    let step = inner.gate.fill_step().ok_or(StoreError::Closed)?;
    let (key, key_hash) = (fill.key, fill.hash);
    let (registration, fill) = Registration::begin(inner, fill, ticket)?;
    let (preamble, header) = entry::encode_header(key, meta, fill.fill).map_err(map_entry_error)?;
    let initial = file_len(preamble.header_len(), declared_len.unwrap_or(0));
    // The reservation counts the directories' inodes too (`space::INODES_PER_FILL`), so
    // it comes first: on a disk short of inodes it evicts to make room for them.
    let reservation = (Reservation::take(inner, initial).await).map_err(|e| refused(inner, e))?;
    // Before the file exists, so the scan can tell this run's files from old ones.
    inner.scan.register_fill(key_hash, fill.fill);
    // The entry's `objects/a/bc/`, made in the same file call as the temp file the first
    // time this run fills into it: a cache filling from empty would otherwise pay a
    // second call (on the blocking pool, a second hand-off) per fill until most of its
    // 4096 directories exist.
    let parent = (!inner.leaf_dirs.known(key_hash)).then(|| inner.object_path(fill));
    Ok(Started {
        open,
        step,
        registration,
        fill,
        preamble,
        header,
        reservation,
        tmp_path: disk::tmp_path(&inner.tmp, fill),
        parent,
    })
}

/// A fill refused before it began for `error`: counted when it is disk trouble, and a
/// failed file operation backs off.
fn refused(inner: &Inner, error: StoreError) -> StoreError {
    if error.trouble().is_some() {
        inner.space.note(&error);
        inner.space.count_refused();
    }
    error
}

/// Makes the entry's directory when `parent` names it, then creates the temp file
/// `tmp` with `header`, room allocated for `len` bytes: the first work of every fill's
/// first file call. Blocking.
fn create(
    parent: Option<&Path>,
    tmp: &Path,
    len: u64,
    header: &[u8],
    on: FileOptions,
) -> Result<std::fs::File, StoreError> {
    if let Some(dest) = parent {
        disk::make_parent(dest, on.fsync)?;
    }
    disk::create_tmp(tmp, len, header, on.block)
}

/// How a fill's file calls write: with fsyncs or not, and the filesystem's block size.
#[derive(Clone, Copy)]
struct FileOptions {
    fsync: bool,
    block: Option<u64>,
}

impl FileOptions {
    fn of(inner: &Inner) -> FileOptions {
        FileOptions {
            fsync: inner.fsync_each(),
            block: inner.space.block_size(),
        }
    }
}

/// After a first file call that made the entry's directory (`made`), the store knows it.
fn learn_parent(inner: &Inner, key_hash: StoreHash, made: bool) {
    if made {
        inner.leaf_dirs.learn(key_hash);
    }
}

/// See [`super::Store::begin_fill`].
pub(super) async fn begin(
    inner: &Arc<Inner>,
    fill: FillOf<'_>,
    meta: &EntryMeta,
    declared_len: Option<u64>,
    max_len: u64,
    ticket: FillTicket,
) -> Result<EntryWriter, StoreError> {
    let (key, key_hash) = (fill.key, fill.hash);
    let started = start(inner, fill, meta, declared_len, max_len, ticket).await?;
    let Started {
        open,
        step,
        registration,
        preamble,
        header,
        reservation,
        tmp_path,
        parent,
        ..
    } = started;
    let made_parent = parent.is_some();
    let (path, on) = (tmp_path.clone(), FileOptions::of(inner));
    let len = reservation.bytes;
    let created = inner.fill_io(&tmp_path, move || {
        // The step lasts as long as the file call, even if this future is dropped.
        let _held = step;
        create(parent.as_deref(), &path, len, &header, on)
    });
    let file = created.await.map_err(|e| refused(inner, e))?;
    learn_parent(inner, key_hash, made_parent);
    // From here on the writer's Drop removes the temp file on any error.
    Ok(EntryWriter {
        inner: Arc::clone(inner),
        key: key.to_owned(),
        key_hash,
        tags: meta.tags.clone(),
        preamble,
        tmp_path,
        file: Some(file),
        unwritten: Vec::new(),
        held: 0,
        hasher: Box::new(Xxh3Default::new()),
        block_hasher: BlockHasher::new(),
        limit: declared_len.map_or(max_len, |d| d.min(max_len)),
        declared_len,
        reservation,
        renamed: false,
        _registration: registration,
        _open: open,
    })
}

/// How a fill of a whole body ([`super::Store::store_whole`]) ended, once it began.
#[derive(Debug)]
pub enum WholeFill {
    /// Its entry is in place: committed, or it lost to a newer fill or a removal of the
    /// key, as [`EntryWriter::finish`] says.
    Committed,
    /// Its file could not be written or renamed: counted as dropped, as a failed
    /// [`EntryWriter::finish`] is.
    Dropped(StoreError),
}

/// See [`super::Store::store_whole`].
pub(super) async fn store_whole(
    inner: &Arc<Inner>,
    fill: FillOf<'_>,
    meta: &EntryMeta,
    body: Bytes,
    max_len: u64,
    ticket: FillTicket,
) -> Result<WholeFill, StoreError> {
    let len = body.len() as u64;
    let (key, key_hash, tags) = (fill.key, fill.hash, fill.tags);
    let started = start(inner, fill, meta, Some(len), max_len, ticket).await?;
    let Started {
        open: _open,
        step,
        registration: _registration,
        fill,
        mut preamble,
        header,
        mut reservation,
        tmp_path,
        parent,
    } = started;
    let table = seal(&mut preamble, &body);
    let out = Commit::of(inner, fill, &tmp_path, &preamble, key);
    let (size, dest) = (out.size, out.dest.clone());
    let made_parent = parent.is_some();
    let on = FileOptions::of(inner);
    let held = Arc::clone(&step);
    // The whole fill in one file call; its outer error is the create's (a fill refused,
    // as `begin` counts it), its inner one the rest's (a fill dropped).
    let written = inner.fill_io(&tmp_path, move || {
        let _held = held;
        let file = create(parent.as_deref(), &out.tmp, size, &header, on)?;
        let committed = out.write_out(&file, &body, &table);
        if committed.is_err() {
            // Not an entry: nothing of it may stay behind.
            disk::remove_quietly_sync(&out.tmp);
        }
        Ok(committed)
    });
    let written = written.await.map_err(|e| refused(inner, e))?;
    learn_parent(inner, key_hash, made_parent);
    if written.is_ok() {
        let (body_len, dest) = (len, &dest);
        let renamed = Renamed {
            fill,
            size,
            body_len,
            key,
            tags,
            dest,
        };
        place(inner, &mut reservation, renamed).await;
    }
    // Held to here: the rename, and the unlink of the file that loses.
    drop(step);
    count_end(inner, &written);
    Ok(match written {
        Ok(()) => WholeFill::Committed,
        Err(error) => WholeFill::Dropped(error),
    })
}

/// Sets the body fields of `preamble` for the whole `body`, and returns its block table.
fn seal(preamble: &mut Preamble, body: &[u8]) -> Vec<u8> {
    preamble.body_len = body.len() as u64;
    preamble.body_hash = xxh3_64(body);
    let mut blocks = BlockHasher::new();
    blocks.update(body);
    blocks.finish()
}

/// The last file work of a fill, whose body is known: where its temp file goes and the
/// preamble that makes it whole.
struct Commit {
    tmp: PathBuf,
    dest: PathBuf,
    /// The preamble with the body's length and checksum, written over the first one.
    front: [u8; entry::PREAMBLE_LEN],
    /// The file's length once whole.
    size: u64,
    fsync: bool,
}

impl Commit {
    /// The commit of `fill`, written to `tmp` and described by `preamble` (body fields
    /// set), of `key`.
    fn of(inner: &Inner, fill: FillRef, tmp: &Path, preamble: &Preamble, key: &str) -> Commit {
        Commit {
            tmp: tmp.to_owned(),
            dest: inner.object_path(fill),
            front: entry::encode_preamble(preamble, key.as_bytes()),
            size: preamble.file_len(),
            fsync: inner.fsync_each(),
        }
    }

    /// Appends the body's `rest` and the block `table` to `file`, then commits it
    /// ([`disk::commit`]: length check, preamble, fsyncs as configured, rename).
    /// Blocking.
    fn write_out(&self, file: &std::fs::File, rest: &[u8], table: &[u8]) -> Result<(), StoreError> {
        let mut out = file;
        (out.write_all(rest).and_then(|()| out.write_all(table)))
            .map_err(disk::io_err(&self.tmp))?;
        disk::commit(
            file,
            &self.tmp,
            &self.dest,
            &self.front,
            self.size,
            self.fsync,
        )
    }
}

/// A fill's file, renamed into `objects/`, to be indexed by [`place`].
struct Renamed<'a> {
    fill: FillRef,
    /// The file's length.
    size: u64,
    body_len: u64,
    key: &'a str,
    tags: &'a [String],
    /// Where it lies now.
    dest: &'a Path,
}

/// Indexes a fill renamed into `objects/` as the key's newest entry (not yet hit): its
/// reservation becomes the entry's size, and it takes the key's place unless a newer
/// fill or a removal since it began did (see `fence`); the file that loses is unlinked.
/// Counts the fill as committed when it won.
async fn place(inner: &Arc<Inner>, reservation: &mut Reservation, renamed: Renamed<'_>) {
    let Renamed {
        fill: FillRef {
            key: key_hash,
            fill: fill_id,
        },
        size,
        ..
    } = renamed;
    inner.changed();
    reservation.commit(size);
    let fill = Fill { fill_id, size };
    let record = || (inner.catalog).insert(key_hash, fill_id, renamed.key, renamed.tags);
    let won = match inner.fences.place(&inner.index, key_hash, fill, record) {
        Placed::New => true,
        Placed::Replaced(old) => {
            inner.unlink(key_hash, old).await;
            true
        }
        Placed::Lost => {
            inner.unlink(key_hash, fill).await;
            false
        }
    };
    if won {
        // Bytes before the count: a reader that sees the count (Acquire) sees the bytes too.
        (inner.committed_body_bytes).fetch_add(renamed.body_len, Ordering::Relaxed);
        inner.committed.fetch_add(1, Ordering::Release);
    }
    debug!(path = %renamed.dest.display(), won, "fill finished");
}

/// Counts how a fill that began ended: a commit ends any back-off; a failure backs off
/// for disk trouble and counts the fill as dropped ([`FillDrop::of`] the error).
fn count_end(inner: &Inner, ended: &Result<(), StoreError>) {
    match ended {
        Ok(()) => inner.space.succeeded(),
        Err(error) => {
            inner.space.note(error);
            inner.dropped.count(FillDrop::of(error));
        }
    }
}

impl EntryWriter {
    /// The store hash of the key this fill is for (the entry's name once committed).
    pub fn key_hash(&self) -> StoreHash {
        self.key_hash
    }

    /// Body bytes on the file so far (the rest of those given to [`EntryWriter::write`]
    /// wait in memory for the next batch): what a [`FillTail`] may read.
    pub fn written(&self) -> u64 {
        self.preamble.body_len - self.unwritten.len() as u64
    }

    /// A reader of the body this fill writes, through a duplicate of its file's
    /// descriptor; `None` when the file is not at hand (a write of it in flight) or
    /// cannot be duplicated (no descriptor left).
    pub fn tail(&self) -> Option<FillTail> {
        let file = self.file.as_ref()?.try_clone().ok()?;
        Some(FillTail::new(file, self.preamble.header_len()))
    }

    /// Appends body bytes and updates the running body checksum, first growing
    /// the fill's reservation if the body outgrew it. Errors with `TooLarge`
    /// once the body would exceed the fill's `max_len` or the declared length,
    /// with `NoSpace` when the budget has no room, and with `WriteBudget` when a body
    /// without a declared length outgrows the write budget, and with `Closed` once the
    /// store closed for a hand-over; the fill should then be dropped.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), StoreError> {
        let step = self.inner.gate.fill_step().ok_or(StoreError::Closed)?;
        let new_len = self.preamble.body_len.saturating_add(chunk.len() as u64);
        if new_len > self.limit {
            return Err(StoreError::TooLarge { limit: self.limit });
        }
        // A declared length was charged to the write budget when the fill began.
        if self.declared_len.is_none() {
            self.inner.charge_writes(chunk.len() as u64)?;
        }
        let header_len = self.preamble.header_len();
        let need = file_len(header_len, new_len);
        if need > self.reservation.bytes {
            let cap = file_len(header_len, self.limit);
            self.reservation.grow(need, cap).await?;
        }
        self.hasher.update(chunk);
        self.block_hasher.update(chunk);
        self.unwritten.extend_from_slice(chunk);
        if self.declared_len.is_none() {
            self.inner.space.hold_unwritten(chunk.len() as u64);
            self.held += chunk.len() as u64;
        }
        self.preamble.body_len = new_len;
        if self.unwritten.len() >= WRITE_BATCH {
            let batch = std::mem::take(&mut self.unwritten);
            let tmp = self.tmp_path.clone();
            let mut batch = self
                .on_file(&step, move |mut file| {
                    let written = file.write_all(&batch).map_err(disk::io_err(&tmp));
                    written.map(|()| batch)
                })
                .await
                .inspect_err(|error| self.inner.space.note(error))?;
            // The buffer is used again for the next batch.
            batch.clear();
            self.unwritten = batch;
            self.release_held();
        }
        Ok(())
    }

    /// The held bytes are on the disk now (or never will be).
    fn release_held(&mut self) {
        self.inner
            .space
            .release_unwritten(std::mem::take(&mut self.held));
    }

    /// Runs `job` with the temp file on the blocking pool, and gets the file back. The
    /// job holds `step` until it ends, even if this future is dropped first.
    async fn on_file<T: Send + 'static>(
        &mut self,
        step: &Step,
        job: impl FnOnce(&std::fs::File) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let held = Arc::clone(step);
        let lost = || {
            let error = io::Error::other("a write of this fill was cancelled");
            disk::io_err(&self.tmp_path)(error)
        };
        let file = self.file.take().ok_or_else(lost)?;
        let (file, done) = self
            .inner
            .fill_io(&self.tmp_path, move || {
                let _held = held;
                let done = job(&file);
                Ok((file, done))
            })
            .await?;
        self.file = Some(file);
        done
    }

    /// Commits the fill: checks the body length against the declared length,
    /// appends the block table, writes body length and checksum into the preamble, fsyncs the file (if
    /// configured), renames it into `objects/a/bc/`, fsyncs that directory (if
    /// configured) and indexes it as the newest entry (not yet hit). If the
    /// index already holds a newer fill of this key, this one loses and its
    /// file is removed, so an older fill finishing late never replaces a newer
    /// one (it still returns `Ok`: the key has an entry, the newer one). It
    /// loses likewise if [`Store::remove`](super::Store::remove) removed the key
    /// after this fill began (see `fence`), so a removal is never undone by an
    /// older fill; it then returns `Ok` too. Only after this returns `Ok` can
    /// the entry exist; a failure counts the fill as dropped
    /// ([`FillDrop::of`] the error).
    pub async fn finish(mut self) -> Result<(), StoreError> {
        let committed = self.commit().await;
        count_end(&self.inner, &committed);
        committed
    }

    /// Ends the fill without an entry, counting it as dropped for `reason`
    /// ([`StoreStats::dropped_fills`](super::StoreStats::dropped_fills)).
    pub fn abandon(self, reason: FillDrop) {
        self.inner.dropped.count(reason);
        // Drop removes the temp file and gives the reservation back.
    }

    /// The work of [`EntryWriter::finish`].
    async fn commit(&mut self) -> Result<(), StoreError> {
        // Held to the end: the rename, and the unlink of the file that loses.
        let step = self.inner.gate.fill_step().ok_or(StoreError::Closed)?;
        let received = self.preamble.body_len;
        if let Some(declared) = self.declared_len.filter(|&d| d != received) {
            return Err(StoreError::LengthMismatch { declared, received });
        }
        self.preamble.body_hash = self.hasher.digest();
        let table = std::mem::replace(&mut self.block_hasher, BlockHasher::new()).finish();
        let fill = FillRef {
            key: self.key_hash,
            fill: self.preamble.fill_id,
        };
        let out = Commit::of(&self.inner, fill, &self.tmp_path, &self.preamble, &self.key);
        let (size, dest) = (out.size, out.dest.clone());
        // The rest of the body, the table and the commit: one blocking call.
        let rest = std::mem::take(&mut self.unwritten);
        let renamed = self
            .on_file(&step, move |file| out.write_out(file, &rest, &table))
            .await;
        self.release_held();
        renamed?;
        self.renamed = true;
        let renamed = Renamed {
            fill,
            size,
            body_len: received,
            key: &self.key,
            tags: &self.tags,
            dest: &dest,
        };
        place(&self.inner, &mut self.reservation, renamed).await;
        Ok(())
    }
}

impl Drop for EntryWriter {
    fn drop(&mut self) {
        self.release_held();
        if self.renamed {
            return;
        }
        // Once the store closed for a hand-over, the temp file was removed with the
        // rest of `tmp/`, and the name may be the next owner's.
        let Some(_step) = self.inner.gate.fill_step() else {
            return;
        };
        // Synchronous on purpose: one unlink, and Drop cannot await.
        if let Err(e) = std::fs::remove_file(&self.tmp_path)
            && e.kind() != io::ErrorKind::NotFound
        {
            warn!(path = %self.tmp_path.display(), error = %e, "could not remove temp file");
        }
    }
}
