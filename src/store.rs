//! The disk store: one file per fill under `objects/`, found through an
//! in-memory index from key hash to the newest committed fill.
//!
//! A fill is written to `tmp/` by an [`EntryWriter`] and exists only after
//! [`EntryWriter::finish`] has renamed it into `objects/` and indexed it;
//! dropping the writer aborts the fill. Entries are named by an unkeyed
//! xxh3-128 of the key string ([`Store::key_hash`]), stable across restarts, and
//! carry the full key so a hash collision is a miss, never a wrong object.
//! Every fill has a unique, increasing fill id, so when two fills of one key
//! race, the newer one wins wherever it finishes, and removing a loser's file
//! can never touch the winner's. The file format is in [`entry`]; paths,
//! scans and fsyncs are in `disk`.
//!
//! The index is, for now, a `Mutex<HashMap<u128, IndexedFill>>`; the LRU index
//! with a byte budget replaces it in a later task. The lock is held only for
//! map operations, never across I/O.

mod disk;
pub mod entry;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{debug, info, warn};
use xxhash_rust::xxh3::{Xxh3Default, xxh3_128};

pub use entry::EntryMeta;
use entry::{EntryError, Preamble};

/// Bodies are read from disk in chunks of this size.
const BODY_CHUNK: u64 = 64 * 1024;

/// How the store is set up.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The cache directory (holds `objects/`, `tmp/`, `state/`).
    pub dir: PathBuf,
    /// Fsync each committed file and its directory before it counts.
    pub fsync: bool,
    /// Largest body, in bytes, a fill may store.
    pub max_object_size: u64,
}

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
    /// A file is not a valid entry.
    #[error("corrupt cache file {}: {reason}", path.display())]
    Corrupt {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Refused to store request credentials.
    #[error("refused to store request credentials")]
    Credentials,
}

/// The on-disk cache. Cheap to share: the proxy holds it in an `Arc`.
#[derive(Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

/// State shared by the store, its writers and its body streams.
#[derive(Debug)]
struct Inner {
    opts: StoreOptions,
    /// `<dir>/objects`.
    objects: PathBuf,
    /// `<dir>/tmp`.
    tmp: PathBuf,
    /// Key hash → newest committed fill. Held only for map operations.
    index: Mutex<HashMap<u128, IndexedFill>>,
    /// The next fill id. Relaxed: only uniqueness matters, which the atomic
    /// read-modify-write gives by itself.
    next_fill_id: AtomicU64,
    /// Fills committed since open. Incremented with Release after the index
    /// insert and read with Acquire, so a reader that sees the count also sees
    /// the entry in the index.
    committed: AtomicU64,
}

/// What the index knows about a committed fill.
#[derive(Clone, Copy, Debug)]
struct IndexedFill {
    /// Names the file, with the key hash.
    fill_id: u64,
}

impl Inner {
    fn index(&self) -> MutexGuard<'_, HashMap<u128, IndexedFill>> {
        // Every critical section is a single map operation, so a panic while
        // holding the lock cannot leave the map half-updated.
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops the index entry only if it still names `fill_id` (a newer fill
    /// may have replaced it meanwhile).
    fn unindex(&self, key_hash: u128, fill_id: u64) {
        let mut index = self.index();
        if index.get(&key_hash).is_some_and(|f| f.fill_id == fill_id) {
            index.remove(&key_hash);
        }
    }

    /// Forgets and deletes a fill whose file failed verification.
    async fn discard_corrupt(&self, key_hash: u128, fill_id: u64, path: &Path, reason: &str) {
        warn!(path = %path.display(), reason, "removing corrupt cache file");
        self.unindex(key_hash, fill_id);
        disk::remove_quietly(path).await;
    }
}

fn map_entry_error(e: EntryError) -> StoreError {
    match e {
        EntryError::Credentials => StoreError::Credentials,
        EntryError::TooLarge { limit, .. } => StoreError::TooLarge {
            limit: limit as u64,
        },
        // Encoding fails only for the reasons above, or for a header too long
        // for its length field, which is also a size limit.
        _ => StoreError::TooLarge {
            limit: u64::from(u32::MAX),
        },
    }
}

impl Store {
    /// Creates `objects/`, `tmp/`, `state/` if missing; removes everything in
    /// `tmp/`; scans `objects/` (reading only each file's preamble, key and
    /// metadata slots) to build the in-memory index: keeps the newest fill per
    /// key hash, removes older fills and files that are not valid entries
    /// (each logged at warn with the path and the reason). Synchronous; call it
    /// before the runtime serves.
    pub fn open(opts: StoreOptions) -> Result<Store, StoreError> {
        let objects = opts.dir.join(disk::OBJECTS);
        let tmp = opts.dir.join(disk::TMP);
        for dir in [&objects, &tmp, &opts.dir.join(disk::STATE)] {
            disk::create_dir(dir)?;
        }
        let leftovers = disk::clear_dir(&tmp)?;
        let (found, max_fill_id) = disk::scan_objects(&objects)?;
        let now_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        // Ids increase across restarts even if the clock went backwards.
        let first_fill_id = now_us.max(max_fill_id.saturating_add(1));
        let index: HashMap<_, _> = found
            .into_iter()
            .map(|f| (f.key_hash, IndexedFill { fill_id: f.fill_id }))
            .collect();
        info!(dir = %opts.dir.display(), entries = index.len(), leftovers, "cache store opened");
        Ok(Store {
            inner: Arc::new(Inner {
                objects,
                tmp,
                index: Mutex::new(index),
                next_fill_id: AtomicU64::new(first_fill_id),
                committed: AtomicU64::new(0),
                opts,
            }),
        })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.inner.opts.dir
    }

    /// `<dir>/state/`, owned by other modules (filter seed, snapshots).
    pub fn state_dir(&self) -> PathBuf {
        self.inner.opts.dir.join(disk::STATE)
    }

    /// Stable, unkeyed xxh3-128 of the key string: names the entry forever.
    pub fn key_hash(key: &str) -> u128 {
        xxh3_128(key.as_bytes())
    }

    /// True if the index holds an entry for this key hash.
    pub fn contains(&self, key_hash: u128) -> bool {
        self.inner.index().contains_key(&key_hash)
    }

    /// Number of entries in the index (objects in the cache).
    pub fn object_count(&self) -> u64 {
        self.inner.index().len() as u64
    }

    /// Count of fills committed (renamed and indexed) since open; a fill that
    /// lost to a newer fill of the same key is not counted.
    pub fn committed_fills(&self) -> u64 {
        self.inner.committed.load(Ordering::Acquire)
    }

    /// Opens the indexed entry: reads and verifies preamble, key and metadata
    /// (checksums) and checks the stored key equals `key` (else `Ok(None)`).
    /// A file that vanished is `Ok(None)`. A file that fails verification is
    /// removed from the index and the disk, logged at warn, and `Ok(None)`.
    pub async fn lookup(
        &self,
        key: &str,
        key_hash: u128,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let Some(fill) = self.inner.index().get(&key_hash).copied() else {
            return Ok(None);
        };
        let path = disk::object_path(&self.inner.objects, key_hash, fill.fill_id);
        let mut file = match tokio::fs::File::open(&path).await {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Replaced by a newer fill meanwhile, or removed behind our back.
                debug!(path = %path.display(), "indexed cache file vanished");
                self.inner.unindex(key_hash, fill.fill_id);
                return Ok(None);
            }
            Err(e) => return Err(disk::io_err(&path)(e)),
        };
        let header = match disk::read_header(&mut file, &path, key_hash, fill.fill_id).await {
            Ok(header) => header,
            Err(StoreError::Corrupt { reason, .. }) => {
                (self.inner)
                    .discard_corrupt(key_hash, fill.fill_id, &path, &reason)
                    .await;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if header.key != key {
            debug!(
                key,
                stored = header.key,
                "key hash collision: treated as a miss"
            );
            return Ok(None);
        }
        Ok(Some(StoredEntry {
            meta: header.meta,
            body_len: header.preamble.body_len,
            body_hash: header.preamble.body_hash,
            file,
            path,
            key_hash,
            fill_id: fill.fill_id,
            inner: Arc::clone(&self.inner),
        }))
    }

    /// Starts a fill: creates the temp file and writes preamble (body fields
    /// zero for now), key and metadata. `declared_len` is the response's
    /// `Content-Length` when it had one. Errors with `TooLarge` if
    /// `declared_len` exceeds `max_object_size`, and with `Credentials` if the
    /// metadata's request headers hold credentials.
    pub async fn begin_fill(
        &self,
        key: &str,
        key_hash: u128,
        meta: &EntryMeta,
        declared_len: Option<u64>,
    ) -> Result<EntryWriter, StoreError> {
        let max = self.inner.opts.max_object_size;
        if declared_len.is_some_and(|d| d > max) {
            return Err(StoreError::TooLarge { limit: max });
        }
        let fill_id = self.inner.next_fill_id.fetch_add(1, Ordering::Relaxed);
        let (preamble, header) =
            entry::encode_header(key, meta, fill_id).map_err(map_entry_error)?;
        let tmp_path = disk::tmp_path(&self.inner.tmp, key_hash, fill_id);
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp_path)
            .await
            .map_err(disk::io_err(&tmp_path))?;
        // From here on the writer's Drop removes the temp file on any error.
        let mut writer = EntryWriter {
            inner: Arc::clone(&self.inner),
            key: key.to_owned(),
            key_hash,
            preamble,
            tmp_path,
            file,
            hasher: Box::new(Xxh3Default::new()),
            limit: declared_len.map_or(max, |d| d.min(max)),
            declared_len,
            renamed: false,
        };
        writer.write_raw(&header).await?;
        Ok(writer)
    }
}

/// A verified entry, ready to stream its body.
pub struct StoredEntry {
    /// The stored metadata.
    pub meta: EntryMeta,
    /// The body length in bytes.
    pub body_len: u64,
    /// Expected xxh3-64 of the body, checked as the body streams.
    body_hash: u64,
    /// Open, positioned at the start of the body.
    file: tokio::fs::File,
    path: PathBuf,
    key_hash: u128,
    fill_id: u64,
    /// To discard the entry if its body fails the checksum.
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StoredEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredEntry")
            .field("meta", &self.meta)
            .field("body_len", &self.body_len)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The state of a body stream between chunks.
struct BodyState {
    entry: StoredEntry,
    remaining: u64,
    /// Boxed: the hasher carries a large buffer that would bloat the future.
    hasher: Box<Xxh3Default>,
}

impl StoredEntry {
    /// The body, read from the file in chunks of 64 KiB, exactly `body_len`
    /// bytes (an early EOF is an `io::Error` of kind `UnexpectedEof`). The body
    /// checksum is verified before the last chunk is yielded: on a mismatch the
    /// stream ends with an `InvalidData` error instead, and the entry is
    /// discarded, so a corrupt body never reaches a client complete.
    pub fn into_body_stream(
        self,
    ) -> impl futures_util::Stream<Item = io::Result<Bytes>> + Send + 'static {
        let state = BodyState {
            remaining: self.body_len,
            entry: self,
            hasher: Box::new(Xxh3Default::new()),
        };
        futures_util::stream::unfold(Some(state), |state| async move {
            let mut st = state.filter(|st| st.remaining > 0)?;
            match next_chunk(&mut st).await {
                Ok(chunk) => Some((Ok(chunk), Some(st))),
                // An error ends the stream.
                Err(e) => Some((Err(e), None)),
            }
        })
    }
}

async fn next_chunk(st: &mut BodyState) -> io::Result<Bytes> {
    let want = st.remaining.min(BODY_CHUNK);
    let mut buf = BytesMut::zeroed(want as usize);
    st.entry.file.read_exact(&mut buf).await?;
    st.hasher.update(&buf);
    st.remaining -= want;
    if st.remaining == 0 && st.hasher.digest() != st.entry.body_hash {
        let e = &st.entry;
        e.inner
            .discard_corrupt(e.key_hash, e.fill_id, &e.path, "body checksum mismatch")
            .await;
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "cached body fails its checksum",
        ));
    }
    Ok(buf.freeze())
}

/// A fill in progress. Only [`EntryWriter::finish`] makes it an entry;
/// dropping the writer removes the temp file.
pub struct EntryWriter {
    inner: Arc<Inner>,
    key: String,
    key_hash: u128,
    /// Body fields are filled in by `finish`.
    preamble: Preamble,
    tmp_path: PathBuf,
    file: tokio::fs::File,
    /// Running xxh3-64 of the body. Boxed: it carries a large buffer.
    hasher: Box<Xxh3Default>,
    /// The body may not exceed this: `max_object_size`, or the declared length.
    limit: u64,
    declared_len: Option<u64>,
    /// Set once the temp file is renamed, so Drop leaves it alone.
    renamed: bool,
}

impl std::fmt::Debug for EntryWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryWriter")
            .field("key", &self.key)
            .field("fill_id", &self.preamble.fill_id)
            .field("body_len", &self.preamble.body_len)
            .finish_non_exhaustive()
    }
}

impl EntryWriter {
    /// Appends body bytes and updates the running body checksum. Errors with
    /// `TooLarge` once the body would exceed `max_object_size` or the declared
    /// length; the fill should then be dropped.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), StoreError> {
        let new_len = self.preamble.body_len.saturating_add(chunk.len() as u64);
        if new_len > self.limit {
            return Err(StoreError::TooLarge { limit: self.limit });
        }
        self.write_raw(chunk).await?;
        self.hasher.update(chunk);
        self.preamble.body_len = new_len;
        Ok(())
    }

    async fn write_raw(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.file
            .write_all(bytes)
            .await
            .map_err(disk::io_err(&self.tmp_path))
    }

    /// Commits the fill: checks the body length against the declared length,
    /// writes body length and checksum into the preamble, fsyncs the file (if
    /// configured), renames it into `objects/ab/cd/`, fsyncs that directory (if
    /// configured) and indexes it. If the index already holds a fill of this
    /// key, the higher fill id wins and the loser's file is removed, so an
    /// older fill finishing late never replaces a newer one (it still returns
    /// `Ok`: the key has an entry, the newer one). Only after this returns `Ok`
    /// does the entry exist.
    pub async fn finish(mut self) -> Result<(), StoreError> {
        let received = self.preamble.body_len;
        if let Some(declared) = self.declared_len.filter(|&d| d != received) {
            return Err(StoreError::LengthMismatch { declared, received });
        }
        self.preamble.body_hash = self.hasher.digest();
        let front = entry::encode_preamble(&self.preamble, self.key.as_bytes());
        let (key_hash, fill_id) = (self.key_hash, self.preamble.fill_id);
        let dest = disk::object_path(&self.inner.objects, key_hash, fill_id);
        let expected_len = self.preamble.header_len() + received;
        let fsync = self.inner.opts.fsync;
        disk::commit(
            &mut self.file,
            &self.tmp_path,
            &dest,
            &front,
            expected_len,
            fsync,
        )
        .await?;
        self.renamed = true;
        self.index(dest).await;
        Ok(())
    }

    /// Indexes the renamed file unless a newer fill of the key is indexed; the
    /// losing fill's file is removed after the lock is released.
    async fn index(&self, dest: PathBuf) {
        let (key_hash, fill_id) = (self.key_hash, self.preamble.fill_id);
        let loser = match self.inner.index().entry(key_hash) {
            Entry::Vacant(slot) => {
                slot.insert(IndexedFill { fill_id });
                None
            }
            Entry::Occupied(mut slot) if slot.get().fill_id < fill_id => {
                Some(slot.insert(IndexedFill { fill_id }).fill_id)
            }
            Entry::Occupied(_) => Some(fill_id),
        };
        let won = loser != Some(fill_id);
        if won {
            self.inner.committed.fetch_add(1, Ordering::Release);
        }
        if let Some(old) = loser {
            disk::remove_quietly(&disk::object_path(&self.inner.objects, key_hash, old)).await;
        }
        debug!(path = %dest.display(), won, "fill finished");
    }
}

impl Drop for EntryWriter {
    fn drop(&mut self) {
        if self.renamed {
            return;
        }
        // Synchronous on purpose: one unlink, and Drop cannot await.
        if let Err(e) = std::fs::remove_file(&self.tmp_path) {
            if e.kind() != io::ErrorKind::NotFound {
                warn!(path = %self.tmp_path.display(), error = %e, "could not remove temp file");
            }
        }
    }
}

#[cfg(test)]
mod tests;
