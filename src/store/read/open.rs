//! Opening an entry file for a lookup: its header read and verified, and a small
//! body read (or a large hot one mapped) and verified whole, with page-cache-only reads
//! on the calling thread first and a blocking thread only when the disk must be read.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use tracing::debug;
use xxhash_rust::xxh3::xxh3_64;

use super::super::disk::{self, Damage, FIRST_READ, HeaderError, Wait, io_err};
use super::super::entry::DecodedHeader;
use super::super::mapped;
use super::super::{Inner, StoreError};

/// An entry file, opened, with its header verified.
pub(in crate::store) struct OpenEntry {
    pub(super) header: DecodedHeader,
    pub(super) file: Arc<std::fs::File>,
    /// The whole body, read (or mapped) and verified, when it was shorter than asked for.
    pub(super) body: Option<Bytes>,
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
    /// verifies its header and checks that it holds `key`; a body shorter than
    /// `read_whole_below` bytes is read and verified too. `Ok(None)` if the file
    /// vanished (then the index forgets it), is damaged (then it is discarded),
    /// or holds another key with the same hash (then it is left alone).
    ///
    /// Tried on this thread with page-cache reads only, then on a blocking thread
    /// if the disk must be read. Opening the file may still wait for the disk when
    /// its directory entry is not cached; such a lookup is rare next to the reads.
    pub(in crate::store) async fn open_entry(
        self: &Arc<Self>,
        key: &str,
        key_hash: u128,
        fill_id: u64,
        read_whole_below: u64,
    ) -> Result<Option<OpenEntry>, StoreError> {
        let ids = (key_hash, fill_id);
        let opened = match self.open_sync(key, ids, read_whole_below, Wait::CachedOnly) {
            Err(e) if e.would_block() => {
                let (inner, key) = (Arc::clone(self), key.to_owned());
                let path = self.object_path(key_hash, fill_id);
                crate::store::blocking(&path, move || {
                    inner.open_sync(&key, ids, read_whole_below, Wait::Disk)
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
                if let Some(fill) = self.index.remove(key_hash, fill_id) {
                    self.index.release_object(fill.size);
                }
                Ok(None)
            }
            Opened::Collision(stored) => {
                debug!(key, stored, "key hash collision: treated as a miss");
                Ok(None)
            }
            Opened::Damaged(damage, reason) => {
                self.discard(key_hash, fill_id, damage, &reason).await;
                Ok(None)
            }
        }
    }

    /// The file work of [`Inner::open_entry`], reading as `wait` allows.
    fn open_sync(
        &self,
        key: &str,
        (key_hash, fill_id): (u128, u64),
        read_whole_below: u64,
        wait: Wait,
    ) -> Result<Opened, StoreError> {
        let path = self.object_path(key_hash, fill_id);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Opened::Vanished),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let file_len = file.metadata().map_err(io_err(&path))?.len();
        // A file no longer than one first read is read whole: header and body at once.
        let ids = (key_hash, fill_id);
        let (header, bytes) =
            match disk::read_header_at(&file, &path, ids, file_len, FIRST_READ, wait) {
                Ok(read) => read,
                Err(HeaderError::Damaged(damage, reason)) => {
                    return Ok(Opened::Damaged(damage, reason));
                }
                Err(HeaderError::Io(e)) => return Err(e),
            };
        if header.key != key {
            return Ok(Opened::Collision(header.key));
        }
        let preamble = header.preamble;
        let file = Arc::new(file);
        if preamble.body_len >= read_whole_below {
            return Ok(Opened::Entry(Box::new(OpenEntry {
                header,
                file,
                body: None,
            })));
        }
        if preamble.body_len >= mapped::MAPPED_BODY_MIN
            && preamble.body_len < self.memory.read_whole_below()
        {
            // A large body for the memory tier is mapped, not copied (see `mapped`).
            // Hashing the mapping may fault pages in from the disk, which only a
            // blocking thread may wait for.
            if wait == Wait::CachedOnly {
                return Err(io_err(&path)(io::ErrorKind::WouldBlock.into()));
            }
            let (offset, len) = (preamble.header_len(), preamble.body_len);
            if offset + len > file_len {
                // Reading a mapping past the end of its file is a SIGBUS, not an error.
                let reason = "body shorter than declared".to_owned();
                return Ok(Opened::Damaged(Damage::Invalid, reason));
            }
            let body = mapped::map_body(Arc::clone(&file), offset, len).map_err(io_err(&path))?;
            if xxh3_64(&body) != preamble.body_hash {
                let reason = "body checksum mismatch".to_owned();
                return Ok(Opened::Damaged(Damage::Checksum, reason));
            }
            return Ok(Opened::Entry(Box::new(OpenEntry {
                header,
                file,
                body: Some(body),
            })));
        }
        // Below `read_whole_below`, which config keeps to a sane size.
        let header_len = preamble.header_len() as usize;
        let body_len = preamble.body_len as usize;
        let mut body = Vec::with_capacity(body_len);
        // The first read may have taken the block table after the body too.
        let in_first = header_len.min(bytes.len())..(header_len + body_len).min(bytes.len());
        body.extend_from_slice(&bytes[in_first]);
        let have = body.len();
        body.resize(body_len, 0);
        let offset = (header_len + have) as u64;
        match disk::read_exact_at(&file, &mut body[have..], offset, wait) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                let reason = "body shorter than declared".to_owned();
                return Ok(Opened::Damaged(Damage::Invalid, reason));
            }
            Err(e) => return Err(io_err(&path)(e)),
        }
        if xxh3_64(&body) != preamble.body_hash {
            let reason = "body checksum mismatch".to_owned();
            return Ok(Opened::Damaged(Damage::Checksum, reason));
        }
        Ok(Opened::Entry(Box::new(OpenEntry {
            header,
            file,
            body: Some(Bytes::from(body)),
        })))
    }
}
