//! Serving a stored entry: the body, verified whole up front when it is small,
//! or verified block by block as it streams when it is not; or a byte range of it,
//! verified by the blocks it touches (see `blocks`). Either way no byte leaves the
//! store before the block that holds it passed its checksum.
//!
//! Reads are positioned reads on a plain file, tried first on the runtime's own
//! thread for what the page cache holds (`Wait::CachedOnly`), and moved to a
//! blocking thread only when the disk must be read. A hit on a cached file thus
//! costs an open, a stat and one or two reads on the calling thread (one read of the
//! body when the file is held open, see `memory`), with no hop to the blocking pool
//! and back (which cost a cache hit two context switches per I/O step). Opening the
//! file and verifying its header (and a small body) is in `open`; this module turns
//! what it opened into a [`StoredEntry`] and its streams.

use std::any::Any;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::Either;

use super::Inner;
use super::derived::Derived;
use super::disk::{self, Damage, Wait};
use super::entry::EntryMeta;
use super::hot::HotEntry;
use crate::{FillRef, StoreHash};

/// Bodies read from disk stream in chunks of at most one block of the block table.
#[cfg(test)]
pub(crate) const BODY_CHUNK: u64 = super::entry::blocks::BLOCK_LEN;

mod blocks;
mod open;

use blocks::Sums;
use open::OpenEntry;

/// Where the body comes from.
enum Source {
    /// An open entry file, read with positioned reads; verified as it streams.
    File(Arc<std::fs::File>),
    /// Read and verified whole by the lookup (or held by the memory tier).
    Memory(Bytes),
    /// The file, and the whole blocks under one range, read and verified before the
    /// response's head (see [`StoredEntry::verify_range`]).
    Verified {
        file: Arc<std::fs::File>,
        /// Body offset of `blocks`' first byte.
        start: u64,
        blocks: Bytes,
    },
}

impl Source {
    /// The source for reading anything but the range verified ahead: the file.
    fn without_prefetch(self) -> Source {
        match self {
            Source::Verified { file, .. } => Source::File(file),
            other => other,
        }
    }
}

/// A verified entry, ready to stream its body.
pub struct StoredEntry {
    /// The stored metadata (shared with the memory tier's copy, so a hit from memory
    /// clones no header map).
    pub meta: Arc<EntryMeta>,
    /// The body length in bytes.
    pub body_len: u64,
    /// Expected xxh3-64 of the whole body, kept for the memory tier's copy.
    body_hash: u64,
    /// File offset of the body (the header's length), where reads start.
    body_offset: u64,
    source: Source,
    /// The fill read: names the file for discards and metadata updates.
    pub(super) fill: FillRef,
    /// To discard the entry if its body fails the checksum. `None` for a copy from the
    /// memory tier, whose body was verified before it got there and is never read from a
    /// file: without it, every such hit would write the store's one reference count,
    /// which all workers share.
    inner: Option<Arc<Inner>>,
    /// What the layers above derived from this fill once ([`StoredEntry::derived`]),
    /// shared with the memory tier's copy so that hits from memory reuse it.
    derived: Derived,
}

impl std::fmt::Debug for StoredEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredEntry")
            .field("meta", &self.meta)
            .field("body_len", &self.body_len)
            .field("fill", &self.fill)
            .finish_non_exhaustive()
    }
}

/// The state of a body stream between chunks.
struct BodyState {
    entry: StoredEntry,
    /// Bytes still to yield.
    remaining: u64,
    /// File offset of the next read.
    position: u64,
    /// The block table entries read so far: every block read from the file is checked
    /// against its entry before any of its bytes is yielded (a body in memory was
    /// verified before it got there).
    sums: Option<Sums>,
}

impl StoredEntry {
    /// The store hash of the entry's key: its name in the store.
    pub fn key_hash(&self) -> StoreHash {
        self.fill.key
    }

    /// Wraps an entry opened by [`Inner::open_entry`].
    pub(super) fn open(opened: OpenEntry, fill: FillRef, inner: Arc<Inner>) -> StoredEntry {
        let OpenEntry {
            preamble,
            meta,
            file,
            derived,
            body,
            ..
        } = opened;
        let source = match body {
            Some(body) => Source::Memory(body),
            None => Source::File(file),
        };
        StoredEntry {
            meta,
            body_len: preamble.body_len,
            body_hash: preamble.body_hash,
            body_offset: preamble.header_len(),
            source,
            fill,
            inner: Some(inner),
            derived,
        }
    }

    /// An entry served from the memory tier's copy `hot` of fill `hot.fill_id`.
    pub(super) fn from_memory(hot: &HotEntry, key_hash: StoreHash) -> StoredEntry {
        StoredEntry {
            meta: Arc::clone(&hot.meta),
            body_len: hot.body.len() as u64,
            body_hash: hot.body_hash,
            body_offset: hot.body_offset,
            source: Source::Memory(hot.body.clone()),
            fill: FillRef {
                key: key_hash,
                fill: hot.fill_id,
            },
            inner: None,
            derived: Arc::clone(&hot.derived),
        }
    }

    /// A copy for the memory tier, when the whole body was read and verified.
    pub(super) fn hot_copy(&self, key: &str) -> Option<HotEntry> {
        let Source::Memory(body) = &self.source else {
            return None;
        };
        Some(HotEntry {
            fill_id: self.fill.fill,
            key: key.into(),
            meta: Arc::clone(&self.meta),
            body: body.clone(),
            body_hash: self.body_hash,
            body_offset: self.body_offset,
            derived: Arc::clone(&self.derived),
        })
    }

    /// The value of type `T` that `derive` computes from this entry, computed once for
    /// the entry and every later hit on its memory-tier copy: how the proxy judges a
    /// stored response's freshness (parsing its dates and directives) once per fill
    /// rather than once per hit. `derive` must depend only on the entry and on inputs
    /// the value itself records (the caller checks those on use). The slot holds one
    /// type; asked for another, this computes it without keeping it.
    pub fn derived<T: Any + Send + Sync>(&self, derive: impl FnOnce(&Self) -> T) -> Arc<T> {
        if let Some(kept) = self.derived.get() {
            return match Arc::clone(kept).downcast::<T>() {
                Ok(value) => value,
                Err(_) => Arc::new(derive(self)),
            };
        }
        let value = Arc::new(derive(self));
        // Two first hits may race to set it: both computed the same value from the same entry.
        let _ = self
            .derived
            .set(Arc::clone(&value) as Arc<dyn Any + Send + Sync>);
        value
    }

    /// The whole body, when the lookup read and verified it whole or the memory tier
    /// held it: it can go out in one piece, with no stream (and no checksum state) around it.
    pub fn body_in_memory(&self) -> Option<&Bytes> {
        match &self.source {
            Source::Memory(body) => Some(body),
            Source::File(_) | Source::Verified { .. } => None,
        }
    }

    /// The body, exactly `body_len` bytes: in one piece when it was verified
    /// whole, otherwise read from the file block by block (64 KiB). Each block is
    /// checked against its entry in the block table before any of its bytes is
    /// yielded: a damaged block ends the stream with an `InvalidData` error instead,
    /// and the entry is discarded and counted, so a client receives only verified
    /// bytes, cut at the first bad block. A file cut short ends it with
    /// `UnexpectedEof`, likewise.
    pub fn into_body_stream(
        self,
    ) -> impl futures_util::Stream<Item = io::Result<Bytes>> + Send + 'static {
        let state = BodyState {
            remaining: self.body_len,
            position: self.body_offset,
            entry: self.without_prefetch(),
            sums: None,
        };
        body_stream(state)
    }

    /// The body bytes `first..=last` (`first <= last < body_len`, else the
    /// stream is one `InvalidInput` error): a slice of a body held in memory,
    /// or read from the file in chunks of 64 KiB from `first` on.
    ///
    /// What is verified: `lookup` checked the header, key and metadata, and a
    /// body below `verify_whole_below` (held in memory) was checked whole. A
    /// range of a larger body is read from the file in whole 64 KiB blocks, each
    /// checked against its entry in the block table before any of its bytes is
    /// yielded: a damaged block ends the stream with `InvalidData` before its
    /// bytes, and discards and counts the entry, so a client never gets a complete
    /// range with a wrong byte. A range [`StoredEntry::verify_range`] read ahead is
    /// served from what it read. A file cut short ends the stream with
    /// `UnexpectedEof` and discards the entry.
    pub fn into_range_stream(
        mut self,
        first: u64,
        last: u64,
    ) -> impl futures_util::Stream<Item = io::Result<Bytes>> + Send + 'static {
        if let Some(error) = self.outside_body(first, last) {
            return Either::Left(futures_util::stream::once(async { Err(error) }));
        }
        self.source = match std::mem::replace(&mut self.source, Source::Memory(Bytes::new())) {
            // In range: `last < body_len`, the length of the body in memory.
            Source::Memory(body) => Source::Memory(body.slice(first as usize..=last as usize)),
            Source::Verified {
                file,
                start,
                blocks,
            } => match first.checked_sub(start) {
                Some(skip) if last - start < blocks.len() as u64 => {
                    Source::Memory(blocks.slice(skip as usize..=(last - start) as usize))
                }
                // Not the range read ahead: read it from the file.
                _ => Source::File(file),
            },
            file => file,
        };
        let state = BodyState {
            remaining: last - first + 1,
            position: self.body_offset + first,
            entry: self,
            sums: None,
        };
        Either::Right(body_stream(state))
    }

    /// The body bytes of each of `ranges` in turn (each `first..=last` within the body,
    /// else the stream is one `InvalidInput` error), every chunk tagged with the index of
    /// its range; every range yields at least one chunk. Verified as
    /// [`StoredEntry::into_range_stream`] is: a body held in memory was checked whole, a
    /// range read from the file is checked block by block.
    pub fn into_ranges_stream(
        self,
        ranges: Vec<(u64, u64)>,
    ) -> impl futures_util::Stream<Item = io::Result<(usize, Bytes)>> + Send + 'static {
        if let Some(error) =
            (ranges.iter()).find_map(|&(first, last)| self.outside_body(first, last))
        {
            return Either::Left(futures_util::stream::once(async { Err(error) }));
        }
        // A body in memory is sliced for each range; a file is sought to each in turn.
        let mut entry = self.without_prefetch();
        let whole = match &mut entry.source {
            Source::Memory(body) => Some(std::mem::take(body)),
            _ => None,
        };
        let parts = PartsState {
            state: BodyState {
                remaining: 0,
                position: 0,
                entry,
                sums: None,
            },
            ranges,
            next: 0,
            whole,
        };
        Either::Right(futures_util::stream::unfold(
            Some(parts),
            |parts| async move {
                let mut parts = parts?;
                if parts.state.remaining == 0 {
                    let &(first, last) = parts.ranges.get(parts.next)?;
                    parts.next += 1;
                    parts.state.remaining = last - first + 1;
                    match &parts.whole {
                        // In range: checked above against `body_len`, the length in memory.
                        Some(whole) => {
                            parts.state.entry.source =
                                Source::Memory(whole.slice(first as usize..=last as usize));
                        }
                        None => parts.state.position = parts.state.entry.body_offset + first,
                    }
                }
                let index = parts.next - 1;
                match next_chunk(&mut parts.state).await {
                    Ok(chunk) => Some((Ok((index, chunk)), Some(parts))),
                    // An error ends the stream.
                    Err(e) => Some((Err(e), None)),
                }
            },
        ))
    }

    /// This entry, with a range read ahead forgotten (its file kept).
    fn without_prefetch(mut self) -> StoredEntry {
        let source = std::mem::replace(&mut self.source, Source::Memory(Bytes::new()));
        self.source = source.without_prefetch();
        self
    }

    /// The `InvalidInput` error for a range `first..=last` that is not within the body.
    fn outside_body(&self, first: u64, last: u64) -> Option<io::Error> {
        (first > last || last >= self.body_len).then(|| {
            let msg = format!(
                "range {first}-{last} outside a body of {} bytes",
                self.body_len
            );
            io::Error::new(io::ErrorKind::InvalidInput, msg)
        })
    }
}

/// The state of a multi-range stream between chunks.
struct PartsState {
    /// The body stream of the range being read.
    state: BodyState,
    /// All ranges, in order.
    ranges: Vec<(u64, u64)>,
    /// The index of the next range to start.
    next: usize,
    /// The whole body, when it is held in memory.
    whole: Option<Bytes>,
}

/// Streams the chunks of `state` until it has yielded everything or failed.
fn body_stream(
    state: BodyState,
) -> impl futures_util::Stream<Item = io::Result<Bytes>> + Send + 'static {
    futures_util::stream::unfold(Some(state), |state| async move {
        let mut st = state.filter(|st| st.remaining > 0)?;
        match next_chunk(&mut st).await {
            Ok(chunk) => Some((Ok(chunk), Some(st))),
            // An error ends the stream.
            Err(e) => Some((Err(e), None)),
        }
    })
}

async fn next_chunk(st: &mut BodyState) -> io::Result<Bytes> {
    let file = match &mut st.entry.source {
        Source::Memory(body) => {
            st.remaining = 0;
            return Ok(std::mem::take(body));
        }
        Source::File(file) | Source::Verified { file, .. } => Arc::clone(file),
    };
    let (sums, position, remaining) = (&mut st.sums, &mut st.position, &mut st.remaining);
    blocks::next_chunk(&st.entry, &file, sums, position, remaining).await
}

/// Reads `len` bytes of `entry`'s file at `position`: from the page cache on this thread
/// when it holds them, else on a blocking thread. A file that ends first discards the
/// entry (it is shorter than its header says) and is `UnexpectedEof`.
async fn read_file(
    entry: &StoredEntry,
    file: &Arc<std::fs::File>,
    len: u64,
    position: u64,
) -> io::Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(io::Error::other)?;
    let mut buf = vec![0u8; len];
    let read = match disk::read_exact_at(file, &mut buf, position, Wait::CachedOnly) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            let file = Arc::clone(file);
            tokio::task::spawn_blocking(move || {
                disk::read_exact_at(&file, &mut buf, position, Wait::Disk).map(|()| buf)
            })
            .await
            .map_err(io::Error::other)?
        }
        other => other.map(|()| buf),
    };
    if let Err(e) = &read
        && e.kind() == io::ErrorKind::UnexpectedEof
    {
        discard(entry, Damage::Invalid, "file ended inside the body").await;
    }
    read
}

async fn discard(entry: &StoredEntry, damage: Damage, reason: &str) {
    // Only an entry read from its file reaches this, and it always has the store.
    if let Some(inner) = &entry.inner {
        inner.discard(entry.fill, damage, reason).await;
    }
}
