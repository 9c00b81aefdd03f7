//! Bodies mapped from their entry files, which the socket layer can send with
//! `sendfile(2)` instead of copying them.
//!
//! A large hot body kept in the memory tier as a heap copy costs a copy into the
//! socket on every hit: for a 100 KiB object that copy was about a third of a hit's
//! CPU time. Mapped instead ([`map_body`]), its bytes are the page cache's own; the
//! body still travels through hyper as ordinary `Bytes`, and the connection's stream
//! (`server::zero_copy`) asks [`file_span`] whether a slice it is told to write is one
//! of these; if so it sends it from the file, which the kernel does without a copy.
//! Nothing depends on that recognition: a writer that does not ask writes the mapped
//! bytes like any others.
//!
//! Every mapping is registered by its address range while a `Bytes` of it lives, and
//! unregistered before it is unmapped, so an address is never found after its mapping
//! is gone (a slice being written keeps its mapping alive: the writer holds a `Bytes`).
//!
//! Safety of the mapping: an entry file's body is written once, before the file is
//! renamed into place, and never written or truncated afterwards (a metadata update
//! rewrites a header slot, never the body; a removal unlinks the file, which leaves
//! a mapping valid). So the mapped body bytes never change under the slices made of them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use memmap2::{Mmap, MmapOptions};

/// Bodies at least this long are mapped rather than copied into the memory tier:
/// below it a copy into the socket costs less than the mapping's page-table work
/// and the second system call (head, then body) that sending from a file takes.
pub const MAPPED_BODY_MIN: u64 = 64 * 1024;

/// Where a mapped range's bytes are in its file.
struct Span {
    /// One past the range's last address.
    end: usize,
    /// The entry file, open for as long as the mapping lives.
    file: Arc<File>,
    /// File offset of the range's first byte.
    offset: u64,
}

/// Mapped ranges by start address. A lock, not a lock-free map: it is read only for
/// writes of at least [`MAPPED_BODY_MIN`] bytes (and only while something is mapped),
/// and written only when a body is mapped or dropped, far less often than it is read.
static SPANS: RwLock<BTreeMap<usize, Span>> = RwLock::new(BTreeMap::new());

/// How many ranges `SPANS` holds, so that a writer skips the lock while it holds none.
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// The owner of one mapped body: unregisters it before unmapping it.
struct MappedBody {
    /// Exactly the body (memmap2 maps from the page boundary below the offset and
    /// hides the difference).
    map: Mmap,
}

impl AsRef<[u8]> for MappedBody {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for MappedBody {
    fn drop(&mut self) {
        let start = self.as_ref().as_ptr() as usize;
        let mut spans = SPANS
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if spans.remove(&start).is_some() {
            MAPPED.fetch_sub(1, Ordering::Relaxed);
        }
        // `map` is unmapped after this, once no lookup can find its range.
    }
}

/// Maps the `len` body bytes at `offset` of `file` (an entry file, whose body never
/// changes once committed) and registers them for [`file_span`].
pub(super) fn map_body(file: Arc<File>, offset: u64, len: u64) -> io::Result<Bytes> {
    let len_usize = usize::try_from(len).map_err(io::Error::other)?;
    if len_usize == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the range is an entry file's committed body, which is never written or
    // truncated again (module docs).
    let map = unsafe {
        MmapOptions::new()
            .offset(offset)
            .len(len_usize)
            .map(&*file)?
    };
    let body = MappedBody { map };
    let begin = body.as_ref().as_ptr() as usize;
    let span = Span {
        end: begin + len_usize,
        file,
        offset,
    };
    {
        let mut spans = SPANS
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if spans.insert(begin, span).is_none() {
            MAPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(Bytes::from_owner(body))
}

/// The file and offset holding exactly `data`, when `data` lies within a body mapped
/// by [`map_body`] that is still alive (the caller holds a `Bytes` of it).
pub fn file_span(data: &[u8]) -> Option<(Arc<File>, u64)> {
    if MAPPED.load(Ordering::Relaxed) == 0 || data.is_empty() {
        return None;
    }
    let address = data.as_ptr() as usize;
    let spans = SPANS
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (&begin, span) = spans.range(..=address).next_back()?;
    if address + data.len() > span.end {
        return None;
    }
    Some((
        Arc::clone(&span.file),
        span.offset + (address - begin) as u64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, Arc<File>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("entry");
        let mut file = File::create(&path).expect("create");
        file.write_all(bytes).expect("write");
        (dir, Arc::new(File::open(&path).expect("open")))
    }

    #[test]
    fn a_mapped_body_holds_the_file_bytes_and_is_found_while_it_lives() {
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (_dir, file) = file_of(&content);
        // An offset inside a page: the mapping starts at the page boundary below.
        let (offset, len) = (5_000u64, 150_000u64);
        let body = map_body(Arc::clone(&file), offset, len).expect("map");
        assert_eq!(&body[..], &content[5_000..155_000]);

        let slice = body.slice(1_000..71_000);
        let (found, at) = file_span(&slice).expect("a slice of a mapped body is found");
        assert!(Arc::ptr_eq(&found, &file));
        assert_eq!(at, offset + 1_000);
        // Bytes outside every mapping are not.
        assert!(file_span(&content[..70_000]).is_none());

        drop(found);
        drop((body, slice));
        // Compared by file, not by address: another test may map at the freed address.
        let spans = SPANS.read().expect("spans");
        assert!(
            spans.values().all(|span| !Arc::ptr_eq(&span.file, &file)),
            "a dropped mapping is unregistered"
        );
    }

    #[test]
    fn an_empty_body_maps_to_nothing() {
        let (_dir, file) = file_of(b"header only");
        let body = map_body(file, 11, 0).expect("map");
        assert!(body.is_empty());
    }
}
