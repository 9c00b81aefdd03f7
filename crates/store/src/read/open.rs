//! Opening an entry file for a lookup: its header read and verified (or taken from
//! the file the memory tier holds open), and a small body read (or a large hot one
//! mapped) and verified whole, with page-cache-only reads on the calling thread first
//! and a blocking thread only when the disk must be read.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use tracing::debug;
use xxhash_rust::xxh3::xxh3_64;

use super::super::derived::Derived;
use super::super::disk::{self, Damage, FIRST_READ, HeaderError, Wait, io_err};
use super::super::entry::{EntryMeta, Preamble};
use super::super::mapped;
use super::super::memory::OpenFile;
use super::super::{Inner, StoreError};
use super::StoredEntry;
use crate::{FillId, FillRef};

/// An entry file, opened, with its header verified.
pub(crate) struct OpenEntry {
    /// The verified preamble: where the body is, how long, and its checksum.
    pub(super) preamble: Preamble,
    /// The verified metadata.
    pub(super) meta: Arc<EntryMeta>,
    /// The open file.
    pub(super) file: Arc<std::fs::File>,
    /// The slot for what the layers above derive from this fill (see
    /// `StoredEntry::derived`), shared with the held file's, so that hits through it
    /// reuse what the first one derived.
    pub(super) derived: Derived,
    /// The whole body, read (or mapped) and verified, when it was shorter than asked for.
    pub(super) body: Option<Bytes>,
    /// Whether the file was opened for this lookup (not held open by the memory tier).
    fresh: bool,
}

impl OpenEntry {
    /// The open file and its verified header, for the memory tier to hold, if this
    /// lookup opened it (`None` if the tier held it already).
    fn to_hold(&self, key: &str, fill_id: FillId) -> Option<OpenFile> {
        self.fresh.then(|| OpenFile {
            fill_id,
            key: key.into(),
            meta: Arc::clone(&self.meta),
            preamble: self.preamble,
            file: Arc::clone(&self.file),
            derived: Arc::clone(&self.derived),
        })
    }
}

/// What opening an entry file found.
enum Opened {
    /// Boxed: the open entry (header and metadata) is large, the others small.
    Entry(Box<OpenEntry>),
    /// No such file (evicted, replaced or removed meanwhile).
    Vanished,
    /// The file holds another key with the same hash.
    Collision(String),
    /// The file is damaged, for this reason.
    Damaged(Damage, String),
}

impl Inner {
    /// Opens the file of the indexed fill `fill_id` of `key_hash`, reads and
    /// verifies its header and checks that it holds `key` (or takes all that from
    /// `held`, the file the memory tier holds open for it); a body shorter than
    /// `read_whole_below` bytes is read and verified too. `Ok(None)` if the file
    /// vanished (then the index forgets it), is damaged (then it is discarded),
    /// or holds another key with the same hash (then it is left alone).
    ///
    /// Tried on this thread with page-cache reads only, then on a blocking thread
    /// if the disk must be read. Opening the file may still wait for the disk when
    /// its directory entry is not cached; such a lookup is rare next to the reads.
    pub(crate) async fn open_entry(
        self: &Arc<Self>,
        key: &str,
        fill_ref: FillRef,
        held: Option<Arc<OpenFile>>,
        read_whole_below: u64,
    ) -> Result<Option<OpenEntry>, StoreError> {
        let tried = self.open_sync(
            key,
            fill_ref,
            held.as_deref(),
            read_whole_below,
            Wait::CachedOnly,
        );
        let opened = match tried {
            Err(e) if e.would_block() => {
                let (inner, key) = (Arc::clone(self), key.to_owned());
                let path = self.object_path(fill_ref);
                crate::blocking(&path, move || {
                    inner.open_sync(
                        &key,
                        fill_ref,
                        held.as_deref(),
                        read_whole_below,
                        Wait::Disk,
                    )
                })
                .await
            }
            other => other,
        };
        match opened? {
            Opened::Entry(entry) => Ok(Some(*entry)),
            Opened::Vanished => {
                // Evicted or replaced meanwhile (then the index no longer names
                // it), or removed behind our back (then forget it here).
                debug!(key, "indexed cache file vanished");
                if let Some(fill) = self.index.remove(fill_ref) {
                    self.memory.forget(fill_ref.key);
                    self.index.release_object(fill.size);
                }
                Ok(None)
            }
            Opened::Collision(stored) => {
                debug!(key, stored, "key hash collision: treated as a miss");
                Ok(None)
            }
            Opened::Damaged(damage, reason) => {
                self.discard(fill_ref, damage, &reason).await;
                Ok(None)
            }
        }
    }

    /// Wraps what a lookup opened, offering the memory tier the open file (if it was
    /// opened for this lookup) and a copy of the body (if read whole and small enough),
    /// both read after the tier's `epoch` was `epoch`.
    pub(crate) fn keep_copies(
        self: &Arc<Self>,
        key: &str,
        fill_ref: FillRef,
        epoch: u64,
        opened: OpenEntry,
    ) -> StoredEntry {
        let mut offered = false;
        if let Some(hold) = opened.to_hold(key, fill_ref.fill) {
            self.memory.offer_open(epoch, fill_ref.key, hold);
            offered = true;
        }
        let held = (!opened.fresh).then(|| Arc::clone(&opened.file));
        let entry = StoredEntry::open(opened, fill_ref, Arc::clone(self));
        let mut copied = false;
        if self.memory.takes_copy(entry.body_len, held.is_none())
            && let Some(hot) = entry.hot_copy(key)
        {
            self.memory.offer(epoch, fill_ref.key, hot);
            (offered, copied) = (true, true);
        }
        // Only after an offer: a hit that offered nothing (the common case on a held
        // file) pays for no check.
        if offered {
            // A fill that left the index while its file was read (evicted, replaced,
            // removed) was forgotten before these offers, which would then keep its copy
            // or its unlinked file (and the file's disk space) until the tier evicts
            // them. Every removal from the index comes before its forget, so this check
            // sees it.
            let left_index =
                self.index.peek(fill_ref.key).map(|f| f.fill_id) != Some(fill_ref.fill);
            // A copy made through a held file whose metadata was rewritten meanwhile:
            // the update may have raised the epoch before `epoch` was read and dropped
            // the held file (with its old metadata) only after this lookup took it, so
            // the epoch check let the copy in. The update drops the held file before the
            // copy (`MemoryTier::forget`), so either it drops this copy or this check
            // sees the file gone.
            let held_dropped =
                copied && held.is_some_and(|file| !self.memory.holds_file(fill_ref.key, &file));
            if left_index || held_dropped {
                self.memory.forget(fill_ref.key);
            }
        }
        entry
    }

    /// The file work of [`Inner::open_entry`], reading as `wait` allows.
    fn open_sync(
        &self,
        key: &str,
        fill_ref: FillRef,
        held: Option<&OpenFile>,
        read_whole_below: u64,
        wait: Wait,
    ) -> Result<Opened, StoreError> {
        match held {
            Some(held) => self.reopen_sync(fill_ref, held, read_whole_below, wait),
            None => self.first_open_sync(key, fill_ref, read_whole_below, wait),
        }
    }

    /// [`Inner::open_sync`] of a file the memory tier holds open: its header was
    /// verified when it was opened, and a file keeps its fill's header for good
    /// (a metadata update, the one rewrite, drops the held file: see `memory`), so
    /// only the body is read. A file cut short behind the store's back ends that
    /// read early, and is discarded as damaged; one unlinked behind its back is
    /// served on, as a memory copy of it would be, until its entry leaves the store.
    /// (Not noticed by an `fstat` per hit: a system call every file hit would pay for;
    /// `benches/RESULTS.md`, "no `fstat` per held-file hit".)
    fn reopen_sync(
        &self,
        fill_ref: FillRef,
        held: &OpenFile,
        read_whole_below: u64,
        wait: Wait,
    ) -> Result<Opened, StoreError> {
        // Only errors name the file: a hit builds no path.
        let path = || self.object_path(fill_ref);
        let opened = OpenEntry {
            preamble: held.preamble,
            meta: Arc::clone(&held.meta),
            file: Arc::clone(&held.file),
            derived: Arc::clone(&held.derived),
            body: None,
            fresh: false,
        };
        self.read_body_sync(path, opened, &[], read_whole_below, wait)
    }

    /// [`Inner::open_sync`] of a file not held open: opened, its header read and
    /// verified, and what the first read took of the body kept.
    fn first_open_sync(
        &self,
        key: &str,
        fill_ref: FillRef,
        read_whole_below: u64,
        wait: Wait,
    ) -> Result<Opened, StoreError> {
        let path = self.object_path(fill_ref);
        let file = match disk::open_entry(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Opened::Vanished),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let file_len = file.metadata().map_err(io_err(&path))?.len();
        // A file no longer than one first read is read whole: header and body at once.
        let (header, bytes) =
            match disk::read_header_at(&file, &path, fill_ref, file_len, FIRST_READ, wait) {
                Ok(read) => read,
                Err(HeaderError::Damaged(damage, reason)) => {
                    return Ok(Opened::Damaged(damage, reason));
                }
                Err(HeaderError::Io(e)) => return Err(e),
            };
        if header.key != key {
            return Ok(Opened::Collision(header.key));
        }
        let opened = OpenEntry {
            preamble: header.preamble,
            meta: Arc::new(header.meta),
            file: Arc::new(file),
            derived: Derived::default(),
            body: None,
            fresh: true,
        };
        self.read_body_sync(|| path.clone(), opened, &bytes, read_whole_below, wait)
    }

    /// Reads and verifies the whole body of `opened` if it is shorter than
    /// `read_whole_below` (into a sealed memory file, if it is large and bound for the
    /// memory tier: see `MemoryTier::takes_copy`); `first_read` is what was read
    /// from the file's start already.
    fn read_body_sync(
        &self,
        path: impl Fn() -> std::path::PathBuf,
        mut opened: OpenEntry,
        first_read: &[u8],
        read_whole_below: u64,
        wait: Wait,
    ) -> Result<Opened, StoreError> {
        let (preamble, file) = (opened.preamble, &opened.file);
        if preamble.body_len >= read_whole_below {
            return Ok(Opened::Entry(Box::new(opened)));
        }
        if preamble.body_len >= mapped::MAPPED_BODY_MIN
            && self.memory.takes_copy(preamble.body_len, opened.fresh)
        {
            // A large body for the memory tier is copied into a sealed memory file
            // (see `mapped`): here from the page cache, or else on a blocking thread.
            let (offset, len) = (preamble.header_len(), preamble.body_len);
            let body = match mapped::sealed_copy(file, offset, len, preamble.body_hash, wait) {
                Ok(mapped::Copied::Body(body)) => body,
                Ok(mapped::Copied::Mismatch) => {
                    let reason = "body checksum mismatch".to_owned();
                    return Ok(Opened::Damaged(Damage::Checksum, reason));
                }
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    let reason = "body shorter than declared".to_owned();
                    return Ok(Opened::Damaged(Damage::Invalid, reason));
                }
                Err(e) => return Err(io_err(&path())(e)),
            };
            opened.body = Some(body);
            return Ok(Opened::Entry(Box::new(opened)));
        }
        // Below `read_whole_below`, which config keeps to a sane size.
        let header_len = preamble.header_len() as usize;
        let body_len = preamble.body_len as usize;
        let mut body = Vec::with_capacity(body_len);
        // The first read may have taken the block table after the body too.
        let in_first =
            header_len.min(first_read.len())..(header_len + body_len).min(first_read.len());
        body.extend_from_slice(&first_read[in_first]);
        let have = body.len();
        body.resize(body_len, 0);
        let offset = (header_len + have) as u64;
        match disk::read_exact_at(file, &mut body[have..], offset, wait) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                let reason = "body shorter than declared".to_owned();
                return Ok(Opened::Damaged(Damage::Invalid, reason));
            }
            Err(e) => return Err(io_err(&path())(e)),
        }
        if xxh3_64(&body) != preamble.body_hash {
            let reason = "body checksum mismatch".to_owned();
            return Ok(Opened::Damaged(Damage::Checksum, reason));
        }
        opened.body = Some(Bytes::from(body));
        Ok(Opened::Entry(Box::new(opened)))
    }
}
