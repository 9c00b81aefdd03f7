//! Serving a stored entry: the body, verified whole up front when it is small,
//! or verified as it streams when it is not; or a byte range of it.

use std::io::{self, SeekFrom};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::future::Either;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use xxhash_rust::xxh3::{Xxh3Default, xxh3_64};

use tracing::debug;

use super::disk::{self, Damage, HeaderError, io_err};
use super::entry::{DecodedHeader, EntryMeta};
use super::{Inner, StoreError};

/// Bodies are read from disk in chunks of this size.
pub(crate) const BODY_CHUNK: u64 = 64 * 1024;

impl Inner {
    /// Opens the file of the indexed fill `fill_id` of `key_hash`, reads and
    /// verifies its header and checks that it holds `key`; the file is left
    /// positioned at the body. `Ok(None)` if the file vanished (then the index
    /// forgets it), is damaged (then it is discarded), or holds another key
    /// with the same hash (then it is left alone).
    pub(super) async fn open_entry(
        &self,
        key: &str,
        key_hash: u128,
        fill_id: u64,
    ) -> Result<Option<(DecodedHeader, tokio::fs::File)>, StoreError> {
        let path = self.object_path(key_hash, fill_id);
        let mut file = match tokio::fs::File::open(&path).await {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Evicted or replaced meanwhile (then the index no longer names
                // it), or removed behind our back (then forget it here).
                debug!(path = %path.display(), "indexed cache file vanished");
                if let Some(fill) = self.index.remove(key_hash, fill_id) {
                    self.index.release_object(fill.size);
                }
                return Ok(None);
            }
            Err(e) => return Err(disk::io_err(&path)(e)),
        };
        let header = match disk::read_header(&mut file, &path, key_hash, fill_id).await {
            Ok(header) => header,
            Err(HeaderError::Damaged(damage, reason)) => {
                self.discard(key_hash, fill_id, damage, &reason).await;
                return Ok(None);
            }
            Err(HeaderError::Io(e)) => return Err(e),
        };
        if header.key != key {
            debug!(
                key,
                stored = header.key,
                "key hash collision: treated as a miss"
            );
            return Ok(None);
        }
        Ok(Some((header, file)))
    }
}

/// Where the body comes from.
enum Source {
    /// Open, positioned at the start of the body; verified as it streams.
    File(tokio::fs::File),
    /// Read and verified whole by the lookup.
    Memory(Bytes),
}

/// A verified entry, ready to stream its body.
pub struct StoredEntry {
    /// The stored metadata.
    pub meta: EntryMeta,
    /// The body length in bytes.
    pub body_len: u64,
    /// Expected xxh3-64 of the body, checked as the body streams.
    body_hash: u64,
    /// File offset of the body (the header's length), where a range read seeks from.
    body_offset: u64,
    source: Source,
    /// With `fill_id`, names the file for discards and metadata updates.
    pub(super) key_hash: u128,
    pub(super) fill_id: u64,
    /// To discard the entry if its body fails the checksum.
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StoredEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredEntry")
            .field("meta", &self.meta)
            .field("body_len", &self.body_len)
            .field("fill_id", &self.fill_id)
            .finish_non_exhaustive()
    }
}

/// The state of a body stream between chunks.
struct BodyState {
    entry: StoredEntry,
    /// Bytes still to yield.
    remaining: u64,
    /// Where to seek the file before the first read; `None` once done, or
    /// when the file is already positioned at the body's start.
    seek_to: Option<u64>,
    /// Running checksum of a whole body streamed from the file; `None` for a
    /// range, which cannot be checked against the whole body's checksum.
    /// Boxed: the hasher carries a large buffer that would bloat the future.
    hasher: Option<Box<Xxh3Default>>,
}

impl StoredEntry {
    /// Wraps an entry whose header is verified; `file` is positioned at the
    /// body. A body shorter than `verify_whole_below` is read and checked now,
    /// so for small objects a damaged body is a miss rather than a cut transfer.
    pub(super) async fn open(
        header: DecodedHeader,
        mut file: tokio::fs::File,
        key_hash: u128,
        fill_id: u64,
        inner: Arc<Inner>,
    ) -> Result<StoredEntry, HeaderError> {
        let DecodedHeader { preamble, meta, .. } = header;
        let source = if preamble.body_len < inner.opts.verify_whole_below {
            // Below `verify_whole_below`, which config keeps to a sane size.
            let mut body = vec![0u8; preamble.body_len as usize];
            file.read_exact(&mut body).await.map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    HeaderError::Damaged(Damage::Invalid, "body shorter than declared".into())
                } else {
                    let path = inner.object_path(key_hash, fill_id);
                    HeaderError::Io(io_err(&path)(e))
                }
            })?;
            if xxh3_64(&body) != preamble.body_hash {
                let reason = "body checksum mismatch".to_owned();
                return Err(HeaderError::Damaged(Damage::Checksum, reason));
            }
            Source::Memory(Bytes::from(body))
        } else {
            Source::File(file)
        };
        Ok(StoredEntry {
            meta,
            body_len: preamble.body_len,
            body_hash: preamble.body_hash,
            body_offset: preamble.header_len(),
            source,
            key_hash,
            fill_id,
            inner,
        })
    }

    /// The body, exactly `body_len` bytes: in one piece when it was verified
    /// whole, otherwise read from the file in chunks of 64 KiB. A streamed
    /// body's checksum is verified before the last chunk is yielded: on a
    /// mismatch the stream ends with an `InvalidData` error instead, and the
    /// entry is discarded and counted, so a corrupt body never reaches a
    /// client complete. A file cut short ends it with `UnexpectedEof`, likewise.
    pub fn into_body_stream(
        self,
    ) -> impl futures_util::Stream<Item = io::Result<Bytes>> + Send + 'static {
        let state = BodyState {
            remaining: self.body_len,
            seek_to: None,
            entry: self,
            hasher: Some(Box::new(Xxh3Default::new())),
        };
        body_stream(state)
    }

    /// The body bytes `first..=last` (`first <= last < body_len`, else the
    /// stream is one `InvalidInput` error): a slice of a body held in memory,
    /// or read from the file in chunks of 64 KiB from `first` on.
    ///
    /// What is verified: `lookup` checked the header, key and metadata, and a
    /// body below `verify_whole_below` (held in memory) was checked whole. A
    /// range of a larger body cannot be checked against the whole body's
    /// checksum and is served unverified, unless it is the whole body, which
    /// is verified as [`StoredEntry::into_body_stream`] does. A file cut
    /// short ends the stream with `UnexpectedEof` and discards the entry.
    pub fn into_range_stream(
        mut self,
        first: u64,
        last: u64,
    ) -> impl futures_util::Stream<Item = io::Result<Bytes>> + Send + 'static {
        if let Some(error) = self.outside_body(first, last) {
            return Either::Left(futures_util::stream::once(async { Err(error) }));
        }
        let seek_to = match &mut self.source {
            Source::Memory(body) => {
                // In range: `last < body_len`, the length of the body in memory.
                *body = body.slice(first as usize..=last as usize);
                None
            }
            Source::File(_) => Some(self.body_offset + first),
        };
        let whole = first == 0 && last + 1 == self.body_len;
        let state = BodyState {
            remaining: last - first + 1,
            seek_to,
            entry: self,
            hasher: whole.then(|| Box::new(Xxh3Default::new())),
        };
        Either::Right(body_stream(state))
    }

    /// The body bytes of each of `ranges` in turn (each `first..=last` within the body,
    /// else the stream is one `InvalidInput` error), every chunk tagged with the index of
    /// its range; every range yields at least one chunk. Verified as
    /// [`StoredEntry::into_range_stream`] is: a body held in memory was checked whole, a
    /// range read from the file is not.
    pub fn into_ranges_stream(
        mut self,
        ranges: Vec<(u64, u64)>,
    ) -> impl futures_util::Stream<Item = io::Result<(usize, Bytes)>> + Send + 'static {
        if let Some(error) =
            (ranges.iter()).find_map(|&(first, last)| self.outside_body(first, last))
        {
            return Either::Left(futures_util::stream::once(async { Err(error) }));
        }
        // A body in memory is sliced for each range; a file is sought to each in turn.
        let whole = match &mut self.source {
            Source::Memory(body) => Some(std::mem::take(body)),
            Source::File(_) => None,
        };
        let parts = PartsState {
            state: BodyState {
                remaining: 0,
                seek_to: None,
                entry: self,
                hasher: None,
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
                        None => parts.state.seek_to = Some(parts.state.entry.body_offset + first),
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
        Source::File(file) => file,
    };
    if let Some(offset) = st.seek_to.take() {
        file.seek(SeekFrom::Start(offset)).await?;
    }
    let want = st.remaining.min(BODY_CHUNK);
    let mut buf = BytesMut::zeroed(want as usize);
    if let Err(e) = file.read_exact(&mut buf).await {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            let reason = "file ended inside the body";
            discard(&st.entry, Damage::Invalid, reason).await;
        }
        return Err(e);
    }
    st.remaining -= want;
    let Some(hasher) = &mut st.hasher else {
        return Ok(buf.freeze());
    };
    hasher.update(&buf);
    if st.remaining == 0 && hasher.digest() != st.entry.body_hash {
        discard(&st.entry, Damage::Checksum, "body checksum mismatch").await;
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "cached body fails its checksum",
        ));
    }
    Ok(buf.freeze())
}

async fn discard(entry: &StoredEntry, damage: Damage, reason: &str) {
    let inner = &entry.inner;
    inner
        .discard(entry.key_hash, entry.fill_id, damage, reason)
        .await;
}
