//! The cache directory on disk: names, paths, header reads, directory fsyncs,
//! removals and the commit rename.
//!
//! ```text
//! <dir>/secondhit.lock                                     held while a store is open (see `lock`)
//! <dir>/objects/a/bc/<32 hex key hash>-<16 hex fill id>    one file per fill
//! <dir>/tmp/<same name>.tmp                                fills in progress
//! <dir>/state/                                             other modules' files; never read here
//! ```
//! `a` and `bc` are the first three hex digits of the key hash: 4,096 directories, as
//! nginx's `levels=1:2`, some 2,500 files each at ten million entries. A cache filling
//! from empty makes each directory once, and a `mkdir` costs about what the fill's own
//! file does, so more directories would make most early fills pay twice, and each
//! holds an inode and a block whether it has one file or thousands (`benches/RESULTS.md`,
//! "4,096 entry directories"). An eviction leaves its directory in place unless the
//! filesystem is short of inodes. Earlier builds used `objects/ab/cd/`, 65,536
//! directories; the start-up scan moves their files ([`legacy_object_path`]). Every
//! fill has its own name, so removing a file can never delete a newer fill of
//! the same key. `tmp/` sits beside `objects/` so the commit is one `rename` on
//! one filesystem, which [`check_same_filesystem`] makes sure of at start-up.
//!
//! Functions used at start-up and by the background scan are synchronous. On the
//! request path, reads try the page cache from the runtime's thread first
//! ([`Wait::CachedOnly`]) and go to a blocking thread only when the disk must be
//! read; a fill's file work runs on blocking threads in a few calls (see
//! `writer`), and removals use `tokio::fs`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tracing::{debug, warn};

use super::entry::{self, DecodedHeader, EntryError, PREAMBLE_LEN, Preamble};
use super::{Store, StoreError};
use crate::{FillId, FillRef, StoreHash};

/// Sub-directory holding committed entries.
pub(crate) const OBJECTS: &str = "objects";
/// Sub-directory holding fills in progress.
pub(crate) const TMP: &str = "tmp";
/// Sub-directory owned by other modules.
pub(crate) const STATE: &str = "state";

/// How an entry file is damaged; counted separately in the store statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Not a valid entry: wrong name, magic, version, structure or length.
    Invalid,
    /// A valid entry of an older format version, which this release does not read
    /// (counted as [`Damage::Invalid`], but expected after an upgrade: see `scan`).
    Outdated,
    /// The header, a metadata slot or the body fails its checksum.
    Checksum,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Damage::Invalid => "not a valid entry (name, magic, version, structure or length)",
            Damage::Outdated => "an entry of an older format version",
            Damage::Checksum => "fails its checksum",
        })
    }
}

/// Why an entry's header could not be read.
#[derive(Debug)]
pub(crate) enum HeaderError {
    /// The file is damaged (and should be removed), for this reason.
    Damaged(Damage, String),
    /// Reading failed; the file may be fine.
    Io(StoreError),
}

/// Bytes of a fill's file name: 32 hex digits, `-`, 16 hex digits.
const NAME_LEN: usize = 49;

/// The file name of one fill, without directory or `.tmp` suffix, as bytes: written
/// digit by digit: a stored miss builds two or three paths, and `format!`'s hex cost more
/// than the rest of its path work (`benches/RESULTS.md`, "fill paths").
fn name_bytes(fill: FillRef) -> [u8; NAME_LEN] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut name = [b'-'; NAME_LEN];
    let key = fill.key.0;
    for (at, digit) in name[..32].iter_mut().enumerate() {
        *digit = HEX[((key >> (4 * (31 - at))) & 0xf) as usize];
    }
    let id = fill.fill.0;
    for (at, digit) in name[33..].iter_mut().enumerate() {
        *digit = HEX[((id >> (4 * (15 - at))) & 0xf) as usize];
    }
    name
}

/// The file name of one fill, without directory or `.tmp` suffix.
#[cfg(test)]
fn file_name(fill: FillRef) -> String {
    String::from_utf8_lossy(&name_bytes(fill)).into_owned()
}

/// `dir`, then each of `parts` as one more component: what `Path::join` of each would
/// make, in one allocation.
fn path_of(dir: &Path, parts: &[&[u8]]) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let dir = dir.as_os_str().as_bytes();
    let len = parts.iter().map(|part| part.len() + 1).sum::<usize>();
    let mut path = Vec::with_capacity(dir.len() + len);
    path.extend_from_slice(dir);
    for part in parts {
        if !path.is_empty() && !path.ends_with(b"/") {
            path.push(b'/');
        }
        path.extend_from_slice(part);
    }
    PathBuf::from(std::ffi::OsString::from_vec(path))
}

/// Parses a name written by [`name_bytes`]; lower-case hex only, as written.
pub(crate) fn parse_file_name(name: &str) -> Option<FillRef> {
    let (hash, fill) = name.split_once('-')?;
    let is_hex =
        |s: &str, len| s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !is_hex(hash, 32) || !is_hex(fill, 16) {
        return None;
    }
    Some(FillRef {
        key: StoreHash(u128::from_str_radix(hash, 16).ok()?),
        fill: FillId(u64::from_str_radix(fill, 16).ok()?),
    })
}

/// `objects/a/bc/<name>` for one fill.
pub(crate) fn object_path(objects: &Path, fill: FillRef) -> PathBuf {
    let name = name_bytes(fill);
    path_of(objects, &[&name[0..1], &name[1..3], &name])
}

/// `objects/ab/cd/<name>`: where earlier builds kept the fill, and where the
/// start-up scan looks for files to move to [`object_path`].
pub(crate) fn legacy_object_path(objects: &Path, fill: FillRef) -> PathBuf {
    let name = name_bytes(fill);
    path_of(objects, &[&name[0..2], &name[2..4], &name])
}

/// `tmp/<name>.tmp` for one fill.
pub(crate) fn tmp_path(tmp: &Path, fill: FillRef) -> PathBuf {
    let mut name = [0u8; NAME_LEN + 4];
    name[..NAME_LEN].copy_from_slice(&name_bytes(fill));
    name[NAME_LEN..].copy_from_slice(b".tmp");
    path_of(tmp, &[&name])
}

/// Wraps an `io::Error` with the path it concerns.
pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

fn invalid(reason: impl ToString) -> HeaderError {
    HeaderError::Damaged(Damage::Invalid, reason.to_string())
}

/// Classifies a codec error: checksum failures apart from structural ones.
fn decode_err(e: EntryError) -> HeaderError {
    let damage = match e {
        EntryError::Checksum | EntryError::NoValidSlot(_) => Damage::Checksum,
        EntryError::Version(v) if v < entry::VERSION => Damage::Outdated,
        _ => Damage::Invalid,
    };
    HeaderError::Damaged(damage, e.to_string())
}

/// Maps a read error: running out of bytes means the file is truncated.
fn read_err(path: &Path) -> impl FnOnce(io::Error) -> HeaderError + '_ {
    move |e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            invalid("file shorter than its header")
        } else {
            HeaderError::Io(io_err(path)(e))
        }
    }
}

/// Decodes the preamble and says how many header bytes follow it. Bounded by
/// the codec's limits (a few MiB), whatever the file claims.
fn header_rest(buf: &[u8]) -> Result<(Preamble, usize), HeaderError> {
    let preamble = entry::decode_preamble(buf).map_err(decode_err)?;
    Ok((preamble, preamble.header_len() as usize - PREAMBLE_LEN))
}

/// Checks a decoded header against the file's name and length.
fn check(
    h: &DecodedHeader,
    key_hash: StoreHash,
    fill_id: FillId,
    file_len: u64,
) -> Result<(), HeaderError> {
    if Store::key_hash(&h.key) != key_hash {
        return Err(invalid("stored key does not hash to the file name"));
    }
    if h.preamble.fill_id != fill_id {
        return Err(invalid("fill id differs from the file name"));
    }
    let expected = h.preamble.file_len();
    if file_len != expected {
        return Err(invalid(format!(
            "file is {file_len} bytes, header says {expected}"
        )));
    }
    Ok(())
}

/// How long a read on the request path may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Only for what the page cache holds: a read that would have to go to the disk
    /// fails at once with `WouldBlock` (Linux `preadv2` with `RWF_NOWAIT`; elsewhere
    /// every such read fails so). Safe on the runtime's own threads.
    CachedOnly,
    /// As long as the disk takes: only on a blocking thread.
    Disk,
}

/// Bytes of an entry file read in the first read of a lookup, when the file is
/// longer: enough for the header of any ordinary response (key, two metadata slots),
/// so the header costs one read.
pub(crate) const FIRST_READ: usize = 16 * 1024;

/// Fills `buf` from `file` at `offset` with positioned reads (the file position is
/// neither used nor moved, so one open file serves concurrent readers). A file that
/// ends first is `UnexpectedEof`; under [`Wait::CachedOnly`], data that is not in the
/// page cache is `WouldBlock`.
pub(crate) fn read_exact_at(
    file: &std::fs::File,
    mut buf: &mut [u8],
    mut offset: u64,
    wait: Wait,
) -> io::Result<()> {
    while !buf.is_empty() {
        let n = match read_at(file, buf, offset, wait) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// `O_NOATIME` for `OpenOptionsExt::custom_flags`: the entry files' reads leave their
/// access time alone. Under `relatime`, the default, the first read after a write would
/// update it, and on a journaled filesystem that update can wait for a commit's I/O: a
/// hit read from the page cache on the worker, with `RWF_NOWAIT`, waited so.
#[cfg(target_os = "linux")]
const NO_ATIME: i32 = rustix::fs::OFlags::NOATIME.bits() as i32;

/// Opens the entry file at `path` for reading, without access-time updates ([`NO_ATIME`])
/// where the file is the process's own, as the kernel requires; others are opened
/// without it.
pub(crate) fn open_entry(path: &Path) -> io::Result<std::fs::File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = std::fs::OpenOptions::new();
        match options.read(true).custom_flags(NO_ATIME).open(path) {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PERM.raw_os_error()) => {}
            opened => return opened,
        }
    }
    std::fs::File::open(path)
}

/// Creates the file at `path`, readable too (a client that fell behind its fill reads the
/// body back from it), with [`NO_ATIME`] where the kernel allows it. The kernel checks that
/// flag once the file exists, so a refusal (a filesystem that gives new files another
/// owner) removes it before the plain create.
fn create_new(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let create = |flags: i32| {
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create_new(true);
        options.custom_flags(flags).open(path)
    };
    #[cfg(target_os = "linux")]
    match create(NO_ATIME) {
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PERM.raw_os_error()) => {
            remove_quietly_sync(path);
        }
        created => return created,
    }
    create(0)
}

/// One positioned read (see [`read_exact_at`]).
#[cfg(target_os = "linux")]
fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64, wait: Wait) -> io::Result<usize> {
    use rustix::io::{Errno, ReadWriteFlags, preadv2};
    let flags = match wait {
        Wait::CachedOnly => ReadWriteFlags::NOWAIT,
        Wait::Disk => ReadWriteFlags::empty(),
    };
    match preadv2(file, &mut [io::IoSliceMut::new(buf)], offset, flags) {
        Ok(n) => Ok(n),
        // A filesystem (or kernel) without RWF_NOWAIT: the read must wait, so it
        // belongs on a blocking thread like any other that would.
        Err(Errno::AGAIN | Errno::OPNOTSUPP) if wait == Wait::CachedOnly => {
            Err(io::ErrorKind::WouldBlock.into())
        }
        Err(errno) => Err(errno.into()),
    }
}

/// One positioned read (see [`read_exact_at`]); without `RWF_NOWAIT`, nothing is
/// known to be cached, so a [`Wait::CachedOnly`] read never starts.
#[cfg(all(unix, not(target_os = "linux")))]
fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64, wait: Wait) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    match wait {
        Wait::CachedOnly => Err(io::ErrorKind::WouldBlock.into()),
        Wait::Disk => file.read_at(buf, offset),
    }
}

/// Reads and verifies the header of the entry file `file` at `path`, `file_len`
/// bytes long, with positioned reads: first `first_read` bytes (at most the file),
/// then the rest of the header if it is longer. Returns the header and every byte
/// read, which start with the header and may hold some or all of the body.
pub(crate) fn read_header_at(
    file: &std::fs::File,
    path: &Path,
    fill_ref: FillRef,
    file_len: u64,
    first_read: usize,
    wait: Wait,
) -> Result<(DecodedHeader, Vec<u8>), HeaderError> {
    let first = usize::try_from(file_len).map_or(first_read, |len| len.min(first_read));
    let mut buf = vec![0u8; first.max(PREAMBLE_LEN)];
    read_exact_at(file, &mut buf, 0, wait).map_err(read_err(path))?;
    let (_, rest) = header_rest(&buf)?;
    let header_len = PREAMBLE_LEN + rest;
    if buf.len() < header_len {
        let start = buf.len();
        buf.resize(header_len, 0);
        read_exact_at(file, &mut buf[start..], start as u64, wait).map_err(read_err(path))?;
    }
    let header = entry::decode_header(&buf[..header_len]).map_err(decode_err)?;
    check(&header, fill_ref.key, fill_ref.fill, file_len)?;
    Ok((header, buf))
}

/// Reads and verifies the header of `file`, the entry file at `path` (whose length
/// then is [`Preamble::file_len`]); blocking, for the start-up scan and metadata
/// updates.
pub(crate) fn read_header_sync(
    file: &std::fs::File,
    path: &Path,
    fill: FillRef,
) -> Result<DecodedHeader, HeaderError> {
    let file_len = file
        .metadata()
        .map_err(|e| HeaderError::Io(io_err(path)(e)))?
        .len();
    read_header_at(file, path, fill, file_len, PREAMBLE_LEN, Wait::Disk).map(|(header, _)| header)
}

/// Fails unless `tmp` and `objects` are on one filesystem: a fill is committed
/// by renaming it from one to the other, which is atomic only within one.
pub(crate) fn check_same_filesystem(tmp: &Path, objects: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).map_err(io_err(p));
        if dev(tmp)? != dev(objects)? {
            return Err(StoreError::CrossDevice {
                tmp: tmp.to_owned(),
                objects: objects.to_owned(),
            });
        }
    }
    #[cfg(not(unix))]
    let _ = (tmp, objects);
    Ok(())
}

/// Creates a directory (and its parents) if missing.
pub(crate) fn create_dir(path: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(path).map_err(io_err(path))
}

/// Removes everything inside `dir`, leaving `dir` itself. Returns the count.
pub(crate) fn clear_dir(dir: &Path) -> Result<usize, StoreError> {
    let mut removed = 0;
    for item in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let path = item.map_err(io_err(dir))?.path();
        // symlink_metadata: a symlink to a directory is removed, not followed.
        let is_dir = std::fs::symlink_metadata(&path)
            .map_err(io_err(&path))?
            .is_dir();
        let result = if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        result.map_err(io_err(&path))?;
        debug!(path = %path.display(), "removed leftover temp file");
        removed += 1;
    }
    Ok(removed)
}

/// Removes a file, treating "already gone" as success.
pub(crate) async fn remove_file(path: &Path) -> Result<(), StoreError> {
    match tokio::fs::remove_file(path).await {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err(path)(e)),
        _ => Ok(()),
    }
}

/// Removes the entry file at `path` (`objects/a/bc/<name>`) as
/// [`remove_quietly_sync`] does and, with `dirs`, then its directories `objects/a/bc/`
/// and `objects/a/` if that left them empty, so that evictions give back the inodes
/// directories hold, not only the files' (on a filesystem short of inodes, which
/// `Space::inodes_scarce` tells). Returns how many directories it removed. A fill
/// committing into a directory removed here makes it again ([`commit`]).
pub(crate) async fn remove_entry_quietly(path: &Path, dirs: bool) -> u64 {
    let owned = path.to_owned();
    let removed =
        tokio::task::spawn_blocking(move || remove_entry_quietly_sync(&owned, dirs)).await;
    removed.unwrap_or(0)
}

/// The blocking work of [`remove_entry_quietly`], also for the scan thread.
pub(crate) fn remove_entry_quietly_sync(path: &Path, dirs: bool) -> u64 {
    remove_quietly_sync(path);
    let mut removed = 0;
    if !dirs {
        return removed;
    }
    // `rmdir` removes only an empty directory: a directory still in use stays.
    for dir in path.ancestors().skip(1).take(2) {
        if std::fs::remove_dir(dir).is_err() {
            break;
        }
        removed += 1;
    }
    removed
}

/// [`remove_file`], blocking, with errors logged rather than returned (a file left
/// behind is removed by the next start-up scan).
pub(crate) fn remove_quietly_sync(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => warn!(path = %path.display(), error = %e, "could not remove cache file"),
    }
}

/// Creates the temp file of a fill at `path`, asks the filesystem for `len` bytes of
/// room up front (Linux `fallocate` with `FALLOC_FL_KEEP_SIZE`: the file's length stays
/// what is written), so that a disk without room fails the fill here, before the
/// response head says `stored`, rather than mid-body, and writes `header`. A
/// filesystem that cannot preallocate just gets the file. With the filesystem's
/// allocation unit `block` known, a file no longer than the blocks its header takes
/// skips `fallocate`: the header's write itself reserves those blocks (a
/// delayed-allocation filesystem at `write`, others by allocating) and fails without
/// room, and the call would cost a small fill a tenth of its CPU (`benches/RESULTS.md`,
/// "fallocate for small fills"). Blocking; on error no file is left behind.
pub(crate) fn create_tmp(
    path: &Path,
    len: u64,
    header: &[u8],
    block: Option<u64>,
) -> Result<std::fs::File, StoreError> {
    let reserved = reserved_by_write(len, header.len() as u64, block);
    let created = create_new(path).and_then(|mut file| {
        if !reserved {
            preallocate(&file, len)?;
        }
        file.write_all(header)?;
        Ok(file)
    });
    created.map_err(|error| {
        remove_quietly_sync(path);
        io_err(path)(error)
    })
}

/// Whether a file of `len` bytes fits in the `block`s that writing its first `written`
/// bytes takes (unknown `block`: no).
fn reserved_by_write(len: u64, written: u64, block: Option<u64>) -> bool {
    block.is_some_and(|b| b > 0 && len.div_ceil(b) <= written.div_ceil(b))
}

/// Allocates `len` bytes for `file` without changing its length; a filesystem (or
/// kernel) that does not support it is not an error.
#[cfg(target_os = "linux")]
fn preallocate(file: &std::fs::File, len: u64) -> io::Result<()> {
    use rustix::fs::{FallocateFlags, fallocate};
    use rustix::io::Errno;
    match fallocate(file, FallocateFlags::KEEP_SIZE, 0, len) {
        Err(Errno::OPNOTSUPP | Errno::NOSYS) | Ok(()) => Ok(()),
        Err(errno) => Err(errno.into()),
    }
}

/// Without `fallocate`, a disk without room shows when the body is written.
#[cfg(not(target_os = "linux"))]
fn preallocate(_file: &std::fs::File, _len: u64) -> io::Result<()> {
    Ok(())
}

/// Commits a fill whose body is written: checks the temp file's length,
/// rewrites its preamble with `front`, fsyncs it (with `fsync`), renames it to
/// `dest` (whose `objects/a/bc/` the fill created as it began, [`make_parent`])
/// and fsyncs that directory (with `fsync`). Blocking; on error the file is not in
/// `objects/`.
pub(crate) fn commit(
    file: &std::fs::File,
    tmp: &Path,
    dest: &Path,
    front: &[u8],
    expected_len: u64,
    fsync: bool,
) -> Result<(), StoreError> {
    use std::os::unix::fs::FileExt;
    // A failed write may have left partial bytes behind; never commit those.
    let actual = file.metadata().map_err(io_err(tmp))?.len();
    if actual != expected_len {
        // The lengths are for the operator who looks into it; the error says what it is.
        debug!(path = %tmp.display(), actual, expected_len, "fill file of the wrong length");
        return Err(StoreError::Corrupt {
            path: tmp.to_owned(),
            damage: Damage::Invalid,
        });
    }
    file.write_all_at(front, 0).map_err(io_err(tmp))?;
    if fsync {
        file.sync_all().map_err(io_err(tmp))?;
    }
    rename_into(tmp, dest, fsync)?;
    if let (true, Some(dir)) = (fsync, dest.parent())
        && let Err(e) = fsync_dir_sync(dir)
    {
        // Not durable, so not committed: take it back out.
        remove_quietly_sync(dest);
        return Err(e);
    }
    Ok(())
}

/// Renames `from` to `dest` in `objects/a/bc/`. An eviction removes `objects/a/bc/` once
/// it is empty, and something else may have: the file is not lost for it, the directory
/// is made again (with `fsync`, durably). A few tries, since another eviction may empty
/// and remove it again in between. Blocking.
pub(crate) fn rename_into(from: &Path, dest: &Path, fsync: bool) -> Result<(), StoreError> {
    let mut tries = 0;
    loop {
        match std::fs::rename(from, dest) {
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    && tries < 3
                    && dest.parent().is_some_and(|d| !d.exists()) =>
            {
                tries += 1;
                make_parent(dest, fsync)?;
            }
            renamed => return renamed.map_err(io_err(dest)),
        }
    }
}

/// Creates `objects/a/bc/` for `path` if missing. With `fsync`, a newly made
/// directory is made durable by syncing its parents, which hold its name. A fill does
/// this as it begins, in the call that creates its temp file, so a disk out of inodes
/// refuses it before its response head says `stored`; nothing removes these
/// directories afterwards but an eviction that empties one. Blocking.
pub(crate) fn make_parent(path: &Path, fsync: bool) -> Result<(), StoreError> {
    let Some(leaf) = path.parent() else {
        return Ok(());
    };
    // One stat on the common path; creation happens at most 4096 times.
    if std::fs::exists(leaf).map_err(io_err(leaf))? {
        return Ok(());
    }
    std::fs::create_dir_all(leaf).map_err(io_err(leaf))?;
    if fsync {
        for dir in leaf.ancestors().skip(1).take(2) {
            fsync_dir_sync(dir)?;
        }
    }
    Ok(())
}

/// Fsyncs a directory, making the names in it (a rename, a new file) durable.
pub(crate) async fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    let owned = dir.to_owned();
    // One trip to the blocking pool for the open and the sync.
    super::blocking(dir, move || fsync_dir_sync(&owned)).await
}

/// The blocking work of [`fsync_dir`].
fn fsync_dir_sync(dir: &Path) -> Result<(), StoreError> {
    let handle = std::fs::File::open(dir).map_err(io_err(dir))?;
    handle.sync_all().map_err(io_err(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_file_of_the_wrong_length_is_not_committed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (tmp, dest) = (dir.path().join("fill.tmp"), dir.path().join("fill"));
        std::fs::write(&tmp, b"twelve bytes").expect("write");
        let file = std::fs::File::options()
            .write(true)
            .open(&tmp)
            .expect("open");
        let committed = commit(&file, &tmp, &dest, b"front", 13, false);
        assert!(
            matches!(
                &committed,
                Err(StoreError::Corrupt { path, damage: Damage::Invalid }) if *path == tmp
            ),
            "{committed:?}"
        );
        assert!(!dest.exists());
        assert_eq!(std::fs::read(&tmp).expect("read"), b"twelve bytes");
        commit(&file, &tmp, &dest, b"front", 12, false).expect("the right length commits");
        assert_eq!(std::fs::read(&dest).expect("read"), b"fronte bytes");
    }

    #[test]
    fn only_a_file_within_its_header_blocks_skips_preallocation() {
        let kib = 1024;
        assert!(reserved_by_write(3600, 2500, Some(4 * kib)));
        assert!(reserved_by_write(4 * kib, 1, Some(4 * kib)));
        assert!(!reserved_by_write(4 * kib + 1, 2500, Some(4 * kib)));
        assert!(
            !reserved_by_write(3600, 2500, Some(kib)),
            "4 blocks against 3"
        );
        assert!(!reserved_by_write(3600, 2500, None));
        assert!(!reserved_by_write(3600, 2500, Some(0)));
    }

    /// Whether descriptor `file` was opened with `O_NOATIME`, from the octal `flags:` of
    /// its `/proc/self/fdinfo` entry.
    #[cfg(target_os = "linux")]
    fn opened_without_atime(file: &std::fs::File) -> bool {
        use std::os::fd::AsRawFd;
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", file.as_raw_fd()));
        let info = info.expect("fdinfo");
        let flags = info.lines().find_map(|line| line.strip_prefix("flags:"));
        let flags = u32::from_str_radix(flags.expect("a flags line").trim(), 8).unwrap();
        flags & rustix::fs::OFlags::NOATIME.bits() != 0
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn entry_files_are_read_and_created_without_access_time_updates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry.tmp");
        let created = create_tmp(&path, 100, b"header", None).unwrap();
        assert!(opened_without_atime(&created), "created");
        assert!(opened_without_atime(&open_entry(&path).unwrap()), "opened");
        // The kernel's rule: the flag only on the process's own files (another's is
        // opened without it, by `open_entry`'s fallback).
        let plain = std::fs::File::open(&path).unwrap();
        assert!(
            !opened_without_atime(&plain),
            "a plain open has no such flag"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_longer_than_its_header_blocks_gets_its_room_up_front() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (len, header) = (1 << 20, vec![7u8; 2500]);
        let path = dir.path().join("big.tmp");
        let file = create_tmp(&path, len, &header, Some(4096)).unwrap();
        let meta = file.metadata().unwrap();
        assert_eq!(meta.len(), 2500, "the length stays what was written");
        let allocated = meta.blocks() * 512;
        if allocated < len {
            // Only where the filesystem cannot preallocate (create_tmp ignores that).
            let probe = std::fs::File::create(dir.path().join("probe")).unwrap();
            let flags = rustix::fs::FallocateFlags::KEEP_SIZE;
            let supported = rustix::fs::fallocate(&probe, flags, 0, len).is_ok();
            assert!(!supported, "{allocated} bytes allocated for {len}");
            eprintln!("skipped: the temp dir's filesystem cannot preallocate");
        }
    }

    #[test]
    fn names_round_trip_and_reject_strangers() {
        let fill = FillRef {
            key: StoreHash(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
            fill: FillId(42),
        };
        let name = file_name(fill);
        assert_eq!(name, "0123456789abcdef0011223344556677-000000000000002a");
        assert_eq!(parse_file_name(&name), Some(fill));
        let p = object_path(Path::new("/c/objects"), fill);
        assert_eq!(p, Path::new("/c/objects/0/12").join(&name));
        let legacy = legacy_object_path(Path::new("/c/objects"), fill);
        assert_eq!(legacy, Path::new("/c/objects/01/23").join(&name));
        for bad in [
            "",
            "x",
            "0123-1",
            &name.to_uppercase(),
            &format!("{name}.tmp"),
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn paths_are_what_joining_the_formatted_name_makes(
            key: u128,
            id: u64,
            dir in "(/?[a-z.]{0,3}){0,3}/?",
        ) {
            let fill = FillRef { key: StoreHash(key), fill: FillId(id) };
            let name = format!("{key:032x}-{id:016x}");
            proptest::prop_assert_eq!(file_name(fill), name.clone());
            let dir = Path::new(&dir);
            let object = object_path(dir, fill);
            let joined = dir.join(&name[0..1]).join(&name[1..3]).join(&name);
            proptest::prop_assert_eq!(object.as_os_str(), joined.as_os_str());
            let legacy = legacy_object_path(dir, fill);
            let joined = dir.join(&name[0..2]).join(&name[2..4]).join(&name);
            proptest::prop_assert_eq!(legacy.as_os_str(), joined.as_os_str());
            let tmp = tmp_path(dir, fill);
            let joined = dir.join(format!("{name}.tmp"));
            proptest::prop_assert_eq!(tmp.as_os_str(), joined.as_os_str());
        }
    }
}
