//! The cache directory on disk: names, paths, header reads, the start-up scan,
//! directory fsyncs and removals.
//!
//! ```text
//! <dir>/objects/ab/cd/<32 hex key hash>-<16 hex fill id>   one file per fill
//! <dir>/tmp/<same name>.tmp                                fills in progress
//! <dir>/state/                                             other modules' files; never read here
//! ```
//! `ab` and `cd` are the first four hex digits of the key hash, so no directory
//! grows past a few hundred files even with tens of millions of entries. Every
//! fill has its own name, so removing a file can never delete a newer fill of
//! the same key. `tmp/` sits beside `objects/` so the commit is one `rename` on
//! one filesystem.
//!
//! The functions used by `Store::open` are synchronous (it runs before serving);
//! those on the request path use `tokio::fs`, so no runtime thread blocks on I/O.

use std::collections::HashMap;
use std::io::{self, Read, SeekFrom};
use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tracing::{debug, warn};

use super::entry::{self, DecodedHeader, PREAMBLE_LEN};
use super::{Store, StoreError};

/// Sub-directory holding committed entries.
pub(crate) const OBJECTS: &str = "objects";
/// Sub-directory holding fills in progress.
pub(crate) const TMP: &str = "tmp";
/// Sub-directory owned by other modules.
pub(crate) const STATE: &str = "state";

/// A committed entry found by the start-up scan.
#[derive(Debug)]
pub(crate) struct Found {
    /// Hash of the stored key.
    pub key_hash: u128,
    /// The newest valid fill of that key.
    pub fill_id: u64,
}

/// The file name of one fill, without directory or `.tmp` suffix.
fn file_name(key_hash: u128, fill_id: u64) -> String {
    format!("{key_hash:032x}-{fill_id:016x}")
}

/// Parses a name written by [`file_name`]; lower-case hex only, as written.
fn parse_file_name(name: &str) -> Option<(u128, u64)> {
    let (hash, fill) = name.split_once('-')?;
    let is_hex =
        |s: &str, len| s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !is_hex(hash, 32) || !is_hex(fill, 16) {
        return None;
    }
    Some((
        u128::from_str_radix(hash, 16).ok()?,
        u64::from_str_radix(fill, 16).ok()?,
    ))
}

/// `objects/ab/cd/<name>` for one fill.
pub(crate) fn object_path(objects: &Path, key_hash: u128, fill_id: u64) -> PathBuf {
    let name = file_name(key_hash, fill_id);
    objects.join(&name[0..2]).join(&name[2..4]).join(name)
}

/// `tmp/<name>.tmp` for one fill.
pub(crate) fn tmp_path(tmp: &Path, key_hash: u128, fill_id: u64) -> PathBuf {
    tmp.join(format!("{}.tmp", file_name(key_hash, fill_id)))
}

/// Wraps an `io::Error` with the path it concerns.
pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

fn corrupt(path: &Path, reason: impl ToString) -> StoreError {
    StoreError::Corrupt {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// Maps a read error: running out of bytes means the file is truncated.
fn read_err(path: &Path, e: io::Error) -> StoreError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        corrupt(path, "file shorter than its header")
    } else {
        io_err(path)(e)
    }
}

/// Checks a decoded header against the file's name and length.
fn check(
    path: &Path,
    h: &DecodedHeader,
    key_hash: u128,
    fill_id: u64,
    file_len: u64,
) -> Result<(), StoreError> {
    if Store::key_hash(&h.key) != key_hash {
        return Err(corrupt(path, "stored key does not hash to the file name"));
    }
    if h.preamble.fill_id != fill_id {
        return Err(corrupt(path, "fill id differs from the file name"));
    }
    let expected = h.preamble.header_len().saturating_add(h.preamble.body_len);
    if file_len != expected {
        return Err(corrupt(
            path,
            format!("file is {file_len} bytes, header says {expected}"),
        ));
    }
    Ok(())
}

/// Reads and verifies the header of an open entry file, leaving the file
/// positioned at the start of the body.
pub(crate) async fn read_header(
    file: &mut tokio::fs::File,
    path: &Path,
    key_hash: u128,
    fill_id: u64,
) -> Result<DecodedHeader, StoreError> {
    let file_len = file.metadata().await.map_err(io_err(path))?.len();
    let mut buf = vec![0u8; PREAMBLE_LEN];
    file.read_exact(&mut buf)
        .await
        .map_err(|e| read_err(path, e))?;
    let preamble = entry::decode_preamble(&buf).map_err(|e| corrupt(path, e))?;
    // Bounded by the codec's limits (a few MiB), whatever the file claims.
    buf.resize(preamble.header_len() as usize, 0);
    file.read_exact(&mut buf[PREAMBLE_LEN..])
        .await
        .map_err(|e| read_err(path, e))?;
    let header = entry::decode_header(&buf).map_err(|e| corrupt(path, e))?;
    check(path, &header, key_hash, fill_id, file_len)?;
    Ok(header)
}

/// The blocking twin of [`read_header`], for the start-up scan.
fn read_header_sync(path: &Path, key_hash: u128, fill_id: u64) -> Result<(), StoreError> {
    let mut file = std::fs::File::open(path).map_err(io_err(path))?;
    let file_len = file.metadata().map_err(io_err(path))?.len();
    let mut buf = vec![0u8; PREAMBLE_LEN];
    file.read_exact(&mut buf).map_err(|e| read_err(path, e))?;
    let preamble = entry::decode_preamble(&buf).map_err(|e| corrupt(path, e))?;
    buf.resize(preamble.header_len() as usize, 0);
    file.read_exact(&mut buf[PREAMBLE_LEN..])
        .map_err(|e| read_err(path, e))?;
    let header = entry::decode_header(&buf).map_err(|e| corrupt(path, e))?;
    check(path, &header, key_hash, fill_id, file_len)
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

/// Walks `objects/ab/cd/`, verifies every entry's header and keeps the newest
/// valid fill per key hash. Older fills and invalid files are removed, each
/// logged at warn. Directories that do not belong are logged and left alone.
/// Returns the entries and the highest fill id seen in any well-named file.
pub(crate) fn scan_objects(objects: &Path) -> Result<(Vec<Found>, u64), StoreError> {
    let mut newest: HashMap<u128, u64> = HashMap::new();
    let mut max_fill_id = 0;
    for (path, name) in list_files(objects)? {
        let prefix_ok = |h: u128| {
            let hex = format!("{h:032x}");
            path.parent().and_then(Path::file_name) == Some(hex[2..4].as_ref())
                && path
                    .parent()
                    .and_then(Path::parent)
                    .and_then(Path::file_name)
                    == Some(hex[0..2].as_ref())
        };
        let Some((key_hash, fill_id)) = parse_file_name(&name).filter(|(h, _)| prefix_ok(*h))
        else {
            remove_invalid_sync(&path, "not an entry file name in its place");
            continue;
        };
        max_fill_id = max_fill_id.max(fill_id);
        match read_header_sync(&path, key_hash, fill_id) {
            Ok(()) => {}
            Err(StoreError::Corrupt { reason, .. }) => {
                remove_invalid_sync(&path, &reason);
                continue;
            }
            Err(e) => return Err(e),
        }
        let older = match newest.get(&key_hash) {
            Some(&kept) if kept > fill_id => fill_id,
            Some(&kept) => {
                newest.insert(key_hash, fill_id);
                kept
            }
            None => {
                newest.insert(key_hash, fill_id);
                continue;
            }
        };
        remove_invalid_sync(
            &object_path(objects, key_hash, older),
            "superseded by a newer fill of the same key",
        );
    }
    let found = newest
        .into_iter()
        .map(|(key_hash, fill_id)| Found { key_hash, fill_id })
        .collect();
    Ok((found, max_fill_id))
}

/// Every regular file two directory levels below `objects`, with its name.
fn list_files(objects: &Path) -> Result<Vec<(PathBuf, String)>, StoreError> {
    let mut files = Vec::new();
    let mut dirs = vec![(objects.to_owned(), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        for item in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
            let item = item.map_err(io_err(&dir))?;
            let path = item.path();
            let is_dir = item.file_type().map_err(io_err(&path))?.is_dir();
            match (is_dir, depth) {
                (true, 0 | 1) => dirs.push((path, depth + 1)),
                (false, 2) => match item.file_name().into_string() {
                    Ok(name) => files.push((path, name)),
                    Err(_) => remove_invalid_sync(&path, "file name is not UTF-8"),
                },
                (false, _) => remove_invalid_sync(&path, "file outside objects/ab/cd/"),
                (true, _) => {
                    warn!(path = %path.display(), "unexpected directory in objects/, left alone")
                }
            }
        }
    }
    Ok(files)
}

fn remove_invalid_sync(path: &Path, reason: &str) {
    warn!(path = %path.display(), reason, "removing cache file");
    if let Err(e) = std::fs::remove_file(path) {
        warn!(path = %path.display(), error = %e, "could not remove cache file");
    }
}

/// Removes a file, treating "already gone" as success; other errors are logged
/// (a file left behind is removed by the next start-up scan).
pub(crate) async fn remove_quietly(path: &Path) {
    match tokio::fs::remove_file(path).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => warn!(path = %path.display(), error = %e, "could not remove cache file"),
    }
}

/// Commits a fill whose body is written: checks the temp file's length,
/// rewrites its preamble with `front`, fsyncs it (with `fsync`), renames it to
/// `dest` (creating `objects/ab/cd/`) and fsyncs that directory (with `fsync`).
/// On error the file is not in `objects/`.
pub(crate) async fn commit(
    file: &mut tokio::fs::File,
    tmp: &Path,
    dest: &Path,
    front: &[u8],
    expected_len: u64,
    fsync: bool,
) -> Result<(), StoreError> {
    // Flush first: tokio completes writes in the background and reports their
    // errors only on the next operation.
    file.flush().await.map_err(io_err(tmp))?;
    // A failed write may have left partial bytes behind; never commit those.
    let actual = file.metadata().await.map_err(io_err(tmp))?.len();
    if actual != expected_len {
        return Err(corrupt(
            tmp,
            format!("temp file is {actual} bytes, expected {expected_len}"),
        ));
    }
    file.seek(SeekFrom::Start(0)).await.map_err(io_err(tmp))?;
    file.write_all(front).await.map_err(io_err(tmp))?;
    file.flush().await.map_err(io_err(tmp))?;
    if fsync {
        file.sync_all().await.map_err(io_err(tmp))?;
    }
    ensure_parent(dest, fsync).await?;
    tokio::fs::rename(tmp, dest).await.map_err(io_err(dest))?;
    if let (true, Some(dir)) = (fsync, dest.parent()) {
        if let Err(e) = fsync_dir(dir).await {
            // Not durable, so not committed: take it back out.
            remove_quietly(dest).await;
            return Err(e);
        }
    }
    Ok(())
}

/// Creates `objects/ab/cd/` for `path` if missing. With `fsync`, a newly made
/// directory is made durable by syncing its parents, which hold its name.
async fn ensure_parent(path: &Path, fsync: bool) -> Result<(), StoreError> {
    let Some(leaf) = path.parent() else {
        return Ok(());
    };
    // One stat on the common path; creation happens at most 65536 times.
    if tokio::fs::try_exists(leaf).await.map_err(io_err(leaf))? {
        return Ok(());
    }
    tokio::fs::create_dir_all(leaf)
        .await
        .map_err(io_err(leaf))?;
    if fsync {
        for dir in leaf.ancestors().skip(1).take(2) {
            fsync_dir(dir).await?;
        }
    }
    Ok(())
}

/// Fsyncs a directory, making the names in it (a rename, a new file) durable.
async fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    let handle = tokio::fs::File::open(dir).await.map_err(io_err(dir))?;
    handle.sync_all().await.map_err(io_err(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_strangers() {
        let (h, f) = (0x0123_4567_89ab_cdef_0011_2233_4455_6677u128, 42u64);
        let name = file_name(h, f);
        assert_eq!(name, "0123456789abcdef0011223344556677-000000000000002a");
        assert_eq!(parse_file_name(&name), Some((h, f)));
        let p = object_path(Path::new("/c/objects"), h, f);
        assert_eq!(p, Path::new("/c/objects/01/23").join(&name));
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
}
