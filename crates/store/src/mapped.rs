//! Hot bodies held as sealed memory files, which the socket layer can send with
//! `sendfile(2)` instead of copying them.
//!
//! A large hot body kept in the memory tier as a heap copy costs a copy into the
//! socket on every hit: for a 100 KiB object that copy was about a third of a hit's
//! CPU time. Held instead as a memory file (`sealed_copy`), its bytes are that
//! file's pages; the body still travels through hyper as ordinary `Bytes` (a read-only
//! mapping of the file), and the connection's stream (`server::zero_copy`) asks
//! [`with_file_span`] whether a slice it is told to write is one of these; if so it sends
//! it from the file, which the kernel does without a copy. Nothing depends on that
//! recognition: a writer that does not ask writes the mapped bytes like any others.
//!
//! Why a copy and not a mapping of the entry file itself: an entry file can be changed
//! or truncated behind the store's back (a disk fault, an operator, another process),
//! and a mapping would then serve bytes that never passed a checksum, or fault with
//! SIGBUS past a cut. The copy is made once, hashed as it is written, and sealed
//! (`F_SEAL_WRITE`, `F_SEAL_SHRINK`, `F_SEAL_GROW`) before it is mapped, so the kernel
//! refuses every later change: the bytes a hit sends are the bytes that were verified.
//!
//! Every mapping is registered by its address range while a `Bytes` of it lives, and
//! unregistered before it is unmapped. A lookup reads the registry as it was when the
//! lookup began (older versions live on while a lookup uses them), and looks up only a
//! slice whose `Bytes` it holds: that mapping was registered before the `Bytes` existed,
//! so the lookup finds it, never a dropped mapping that had the same address.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use arc_swap::ArcSwap;

use bytes::Bytes;
use memmap2::{Mmap, MmapOptions};
use xxhash_rust::xxh3::{Xxh3Default, xxh3_64};

use super::disk::{self, Wait};

/// Bodies at least this long are held as sealed memory files rather than heap copies:
/// below it a copy into the socket costs less than the mapping's page-table work
/// and the second system call (head, then body) that sending from a file takes.
pub const MAPPED_BODY_MIN: u64 = 64 * 1024;

/// Where a mapped range's bytes are in its file.
#[derive(Clone)]
struct Span {
    /// One past the range's last address.
    end: usize,
    /// The sealed memory file, open for as long as the mapping lives.
    file: Arc<File>,
    /// File offset of the range's first byte.
    offset: u64,
}

/// Mapped ranges by start address. Read on every large hit by every worker, written only
/// when a body is mapped or dropped: so replaced whole on each change (arc-swap), and a
/// read writes nothing another worker reads, as a lock's reader count would.
static SPANS: LazyLock<ArcSwap<BTreeMap<usize, Span>>> = LazyLock::new(ArcSwap::default);

/// How many ranges `SPANS` holds, so that a writer skips the registry while it holds none.
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// The owner of one mapped body: unregisters it before unmapping it.
struct MappedBody {
    /// Exactly the body: the whole sealed memory file.
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
        if change_spans(|spans| spans.remove(&start).is_some()) {
            MAPPED.fetch_sub(1, Ordering::Relaxed);
        }
        // `map` is unmapped after this, once the registry no longer names its range.
    }
}

/// Replaces the registry with a copy that `change` changed; returns what `change` last
/// returned (it runs again on a copy of the newer registry when another change raced it).
fn change_spans(change: impl Fn(&mut BTreeMap<usize, Span>) -> bool) -> bool {
    let mut changed = false;
    SPANS.rcu(|spans| {
        let mut spans = BTreeMap::clone(spans);
        changed = change(&mut spans);
        spans
    });
    changed
}

/// Bytes copied per read while making a sealed copy.
const COPY_CHUNK: usize = 256 * 1024;

/// What [`sealed_copy`] made of a body.
pub(super) enum Copied {
    /// The verified body, mapped from its sealed memory file and registered for
    /// [`with_file_span`].
    Body(Bytes),
    /// The body read from the entry file does not match `body_hash`.
    Mismatch,
}

/// Copies the `len` body bytes at `offset` of the entry file `file` into a new memory
/// file, hashing them on the way, and, when their xxh3-64 is `body_hash`, seals that
/// file against every change and maps it read-only (module docs). A file shorter than
/// `offset + len` is an `UnexpectedEof` error. Reads as `wait` allows: with
/// [`Wait::CachedOnly`] (on a worker), a part the page cache does not hold fails the
/// copy with `WouldBlock`, to be made again on a blocking thread. The rest is memory
/// work, which a worker may do.
pub(super) fn sealed_copy(
    file: &File,
    offset: u64,
    len: u64,
    body_hash: u64,
    wait: Wait,
) -> io::Result<Copied> {
    use rustix::fs::{MemfdFlags, SealFlags};
    use std::os::unix::fs::FileExt;

    let len_usize = usize::try_from(len).map_err(io::Error::other)?;
    if len_usize == 0 {
        return Ok(match xxh3_64(&[]) == body_hash {
            true => Copied::Body(Bytes::new()),
            false => Copied::Mismatch,
        });
    }
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    let copy = File::from(rustix::fs::memfd_create("secondhit-body", flags)?);
    copy.set_len(len)?;
    let mut hasher = Xxh3Default::new();
    let mut buf = vec![0u8; COPY_CHUNK.min(len_usize)];
    let mut done = 0usize;
    while done < len_usize {
        let chunk = &mut buf[..COPY_CHUNK.min(len_usize - done)];
        disk::read_exact_at(file, chunk, offset + done as u64, wait)?;
        hasher.update(chunk);
        copy.write_all_at(chunk, done as u64)?;
        done += chunk.len();
    }
    if hasher.digest() != body_hash {
        return Ok(Copied::Mismatch);
    }
    let seals = SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
    rustix::fs::fcntl_add_seals(&copy, seals)?;
    // SAFETY: the file is sealed against writes, shrinking and growing, so the mapped
    // bytes can neither change nor vanish (no SIGBUS) while the mapping lives.
    let map = unsafe { MmapOptions::new().len(len_usize).map(&copy)? };
    let body = MappedBody { map };
    let begin = body.as_ref().as_ptr() as usize;
    let span = Span {
        end: begin + len_usize,
        file: Arc::new(copy),
        offset: 0,
    };
    if change_spans(|spans| spans.insert(begin, span.clone()).is_none()) {
        MAPPED.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Copied::Body(Bytes::from_owner(body)))
}

/// Runs `send` with the file and offset holding exactly `data`, when `data` lies within
/// a body mapped by `sealed_copy` that is still alive (the caller holds a `Bytes` of
/// it); `None` otherwise. The file is lent, not shared: no count of it is written.
pub fn with_file_span<R>(data: &[u8], send: impl FnOnce(&File, u64) -> R) -> Option<R> {
    if MAPPED.load(Ordering::Relaxed) == 0 || data.is_empty() {
        return None;
    }
    let address = data.as_ptr() as usize;
    let spans = SPANS.load();
    let (&begin, span) = spans.range(..=address).next_back()?;
    if address + data.len() > span.end {
        return None;
    }
    Some(send(&span.file, span.offset + (address - begin) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("entry");
        let mut file = File::create(&path).expect("create");
        file.write_all(bytes).expect("write");
        (dir, File::open(&path).expect("open"))
    }

    /// The file and offset of `data`, as a sender is lent them.
    fn file_span(data: &[u8]) -> Option<(File, u64)> {
        with_file_span(data, |file, at| {
            (file.try_clone().expect("a second handle"), at)
        })
    }

    /// A weak handle on the file registered for the mapping that starts at `address`.
    fn registered_file(address: usize) -> Option<std::sync::Weak<File>> {
        SPANS
            .load()
            .get(&address)
            .map(|span| Arc::downgrade(&span.file))
    }

    fn copied(copied: io::Result<Copied>) -> Bytes {
        match copied.expect("copied") {
            Copied::Body(body) => body,
            Copied::Mismatch => panic!("the body matches its hash"),
        }
    }

    #[test]
    fn a_sealed_copy_holds_the_file_bytes_and_is_found_while_it_lives() {
        let content: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let (_dir, file) = file_of(&content);
        // More than one copy chunk, from an offset inside a page.
        let (offset, len) = (5_000u64, 550_000u64);
        let expected = &content[5_000..555_000];
        let body = copied(sealed_copy(
            &file,
            offset,
            len,
            xxh3_64(expected),
            Wait::Disk,
        ));
        assert_eq!(&body[..], expected);

        let slice = body.slice(1_000..71_000);
        let (found, at) = file_span(&slice).expect("a slice of a sealed copy is found");
        assert_eq!(at, 1_000);
        let mut sent = vec![0u8; 70_000];
        std::os::unix::fs::FileExt::read_exact_at(&found, &mut sent, at).expect("read");
        assert_eq!(&sent[..], &expected[1_000..71_000]);
        // Bytes outside every mapping are not.
        assert!(file_span(&content[..70_000]).is_none());

        // Compared by file, not by address: another test may map at the freed address.
        let weak = registered_file(body.as_ptr() as usize).expect("registered");
        drop(found);
        drop((body, slice));
        // A lookup on another thread may hold the registry's previous version a moment.
        let closed = (0..100_000).any(|_| {
            std::thread::yield_now();
            weak.upgrade().is_none()
        });
        assert!(closed, "a dropped copy is unregistered and closed");
    }

    #[test]
    fn a_sealed_copy_cannot_be_changed_through_its_file() {
        let content = vec![7u8; 100_000];
        let (_dir, file) = file_of(&content);
        let body = copied(sealed_copy(
            &file,
            0,
            100_000,
            xxh3_64(&content),
            Wait::Disk,
        ));
        let (copy, _) = file_span(&body).expect("registered");
        let write = std::os::unix::fs::FileExt::write_at(&copy, b"x", 10);
        assert!(write.is_err(), "a write to the sealed copy is refused");
        assert!(copy.set_len(10).is_err(), "the sealed copy cannot shrink");
        assert_eq!(&body[..], &content[..]);
    }

    #[test]
    fn a_body_that_fails_its_hash_or_is_cut_short_is_not_copied() {
        let content = vec![3u8; 80_000];
        let (_dir, file) = file_of(&content);
        let wrong = xxh3_64(&content) ^ 1;
        assert!(matches!(
            sealed_copy(&file, 0, 80_000, wrong, Wait::Disk),
            Ok(Copied::Mismatch)
        ));
        let short = sealed_copy(&file, 1_000, 80_000, xxh3_64(&content), Wait::Disk);
        assert_eq!(
            short.err().map(|e| e.kind()),
            Some(io::ErrorKind::UnexpectedEof)
        );
    }

    #[test]
    fn an_empty_body_copies_to_nothing() {
        let (_dir, file) = file_of(b"header only");
        let body = copied(sealed_copy(&file, 11, 0, xxh3_64(&[]), Wait::Disk));
        assert!(body.is_empty());
    }

    #[test]
    fn a_sealed_copy_from_the_page_cache_is_made_on_the_worker_or_refused_as_would_block() {
        let content: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
        // Just written: its pages are in the page cache.
        let (_dir, file) = file_of(&content);
        let (hash, wrong) = (xxh3_64(&content), xxh3_64(&content) ^ 1);
        let mut probe = [0u8; 16];
        // A filesystem without page-cache-only reads refuses every such read, and the
        // copy with it; one with them makes the copy without waiting.
        match disk::read_exact_at(&file, &mut probe, 0, Wait::CachedOnly) {
            Ok(()) => {
                let body = copied(sealed_copy(&file, 0, 300_000, hash, Wait::CachedOnly));
                assert_eq!(&body[..], &content[..]);
                let damaged = sealed_copy(&file, 0, 300_000, wrong, Wait::CachedOnly);
                assert!(matches!(damaged, Ok(Copied::Mismatch)));
            }
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                let refused = sealed_copy(&file, 0, 300_000, hash, Wait::CachedOnly);
                assert_eq!(
                    refused.err().map(|e| e.kind()),
                    Some(io::ErrorKind::WouldBlock)
                );
            }
        }
    }
}
