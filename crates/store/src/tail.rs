//! Reading a fill's body back from its file while the fill is still writing it: for a
//! client that fell too far behind the origin to be fed from memory (see `tee`), which
//! then reads what the fill has written, at its own pace, instead of holding the fill
//! (and the requests waiting for it) back to that pace.
//!
//! The file is read through a duplicate of the fill's own descriptor, so the rename at
//! commit, an eviction or the removal of a dropped fill's temp file never takes the
//! bytes away from a reader that is still on them.

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::disk::{self, Wait};

/// A fill's file, open for positioned reads of the body the fill wrote to it; which
/// bytes are written is for the fill's writer to say (`EntryWriter::written`).
#[derive(Clone)]
pub struct FillTail {
    file: Arc<std::fs::File>,
    /// File offset of the body's first byte (the header's length).
    body_offset: u64,
}

impl FillTail {
    /// The reader of `file`, whose body starts at `body_offset`.
    pub(super) fn new(file: std::fs::File, body_offset: u64) -> FillTail {
        FillTail {
            file: Arc::new(file),
            body_offset,
        }
    }

    /// Reads `len` body bytes from body offset `at`, all of which the fill has written:
    /// from the page cache on this thread when it holds them, else on a blocking thread.
    pub async fn read(&self, at: u64, len: usize) -> io::Result<Bytes> {
        let offset = self.body_offset.saturating_add(at);
        let mut buf = BytesMut::zeroed(len);
        match disk::read_exact_at(&self.file, &mut buf, offset, Wait::CachedOnly) {
            Ok(()) => return Ok(buf.freeze()),
            Err(error) if error.kind() != io::ErrorKind::WouldBlock => return Err(error),
            Err(_) => {}
        }
        let file = Arc::clone(&self.file);
        let read = tokio::task::spawn_blocking(move || {
            disk::read_exact_at(&file, &mut buf, offset, Wait::Disk).map(|()| buf.freeze())
        });
        read.await.map_err(io::Error::other)?
    }
}
