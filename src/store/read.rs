//! Serving a stored entry: the body, verified whole up front when it is small,
//! or verified as it streams when it is not.

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use xxhash_rust::xxh3::{Xxh3Default, xxh3_64};

use super::Inner;
use super::disk::{Damage, HeaderError, io_err};
use super::entry::{DecodedHeader, EntryMeta};

/// Bodies are read from disk in chunks of this size.
pub(crate) const BODY_CHUNK: u64 = 64 * 1024;

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
    source: Source,
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
            .field("fill_id", &self.fill_id)
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
    let file = match &mut st.entry.source {
        Source::Memory(body) => {
            st.remaining = 0;
            return Ok(std::mem::take(body));
        }
        Source::File(file) => file,
    };
    let want = st.remaining.min(BODY_CHUNK);
    let mut buf = BytesMut::zeroed(want as usize);
    if let Err(e) = file.read_exact(&mut buf).await {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            let reason = "file ended inside the body";
            discard(&st.entry, Damage::Invalid, reason).await;
        }
        return Err(e);
    }
    st.hasher.update(&buf);
    st.remaining -= want;
    if st.remaining == 0 && st.hasher.digest() != st.entry.body_hash {
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
