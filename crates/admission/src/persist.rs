//! Snapshots of the filter pair in `<cache.dir>/state/`, so a restart does not forget.
//!
//! Without them every restart would empty both filters, and for a whole generation every
//! request would look like a first sight: nothing new would be cached. So the pair is
//! written to `state/filters.snapshot` every `admission.snapshot_every` and on graceful
//! shutdown, and read back at start-up.
//!
//! A snapshot is written atomically (temp file in the same directory, fsync, rename, fsync of
//! the directory): a crash leaves the old snapshot or the new one, never half of one.
//!
//! Room for the next snapshot is taken ahead ([`Snapshots::reserve`]): its temp file is
//! made and allocated to the snapshot's size at start-up and after every save, so a disk
//! that fills up meanwhile (down to `cache.min_free`, or past it) cannot fail the save at
//! shutdown with `ENOSPC` and leave the next start with empty filters. It is
//! ignored with a warning — the proxy then starts with empty filters — when its checksum
//! fails, when it was written with other parameters (bits, probes, generation size) or
//! another seed, or when it cannot be read.
//!
//! The generations' start times are stored as wall-clock times, so time spent before a
//! restart, and the downtime itself, count toward `max_age` (see
//! [`super::AgingPair`]'s `restore_at`: an old snapshot rotates or is forgotten on load).
//!
//! # Format (little-endian)
//! ```text
//! magic "SHBLOOM1" | version u32 | probes u32 | bits u64 | generation_size u64
//! | seed fingerprint u64 | generation u64
//! | current:  start (unix ms) u64 | inserts u64 | bits/64 words u64
//! | previous present u64 (0 or 1) [| start u64 | inserts u64 | words]
//! | xxh3-64 of everything before it
//! ```
//! The seed itself is not stored — a configured seed is a secret — only a keyed fingerprint
//! of it that tells whether the bits were hashed with the same one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use xxhash_rust::xxh3::{Xxh3Default, xxh3_64, xxh3_64_with_seed};

use super::aging_pair::{AgingPair, FilterImage, PairImage};

/// The snapshot's file name inside the state directory.
pub const SNAPSHOT_FILE: &str = "filters.snapshot";

/// First bytes of every snapshot.
const MAGIC: &[u8; 8] = b"SHBLOOM1";

/// Format version; bump it when the layout or the probe scheme changes.
// 2: two words per key (the cache-sectorized layout); a version-1 snapshot holds bits of
// the earlier layout, which would answer wrongly here, so it is ignored with a warning.
const VERSION: u32 = 2;

/// Saves and restores one pair's snapshots.
pub struct Snapshots {
    /// The pair.
    pair: Arc<AgingPair>,
    /// `<state>/filters.snapshot`.
    path: PathBuf,
    /// Fingerprint of the filter seed.
    seed_fingerprint: u64,
    /// `admission.snapshot_every`.
    every: Duration,
    /// This pair's temp file, of its own name, so that the pairs a reload swaps in and
    /// out never share one.
    tmp: PathBuf,
    /// Serialises saves of this pair, and holds the temp file with room already
    /// allocated for the next one ([`Snapshots::reserve`]), if there is one.
    saving: Mutex<Option<File>>,
}

/// Numbers the temp files of the pairs of this process.
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

/// Why a snapshot was not restored.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("not a filter snapshot, or a different format version")]
    Format,
    #[error("checksum mismatch (a torn or corrupted file)")]
    Checksum,
    #[error("written with {0}; the filters start empty")]
    Different(&'static str),
}

impl Snapshots {
    /// Snapshots of `pair` in `state_dir`, hashed with `seed`, saved every `every`.
    pub fn new(pair: Arc<AgingPair>, state_dir: &Path, seed: u64, every: Duration) -> Snapshots {
        let n = NEXT_TMP.fetch_add(1, Ordering::Relaxed);
        let tmp = format!(".{SNAPSHOT_FILE}.{}.{n}.tmp", std::process::id());
        Snapshots {
            pair,
            path: state_dir.join(SNAPSHOT_FILE),
            tmp: state_dir.join(tmp),
            seed_fingerprint: fingerprint(seed),
            every,
            saving: Mutex::new(None),
        }
    }

    /// Takes room on the disk for the next save: makes the temp file and allocates it to
    /// the size a snapshot of this pair has. Returns that size. Call it at start-up (the
    /// server logs the outcome); every save takes room for the next one itself.
    pub fn reserve(&self) -> io::Result<u64> {
        let mut saving = self.saving.lock().unwrap_or_else(PoisonError::into_inner);
        *saving = None;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        remove_stale_temp_files(dir);
        let file = self.reserve_locked()?;
        let len = file.metadata()?.len();
        *saving = Some(file);
        Ok(len)
    }

    /// The temp file, made and allocated to a snapshot's size (the caller holds `saving`).
    fn reserve_locked(&self) -> io::Result<File> {
        let mut size = Counted(0);
        self.encode(
            &self.pair.image_at(Instant::now()),
            SystemTime::now(),
            &mut size,
        )?;
        // The checksum after the encoded bytes.
        let len = size.0 + 8;
        if let Some(dir) = self.tmp.parent() {
            fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&self.tmp)?;
        let allocated = rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, len);
        if let Err(error) = allocated {
            let _ = fs::remove_file(&self.tmp);
            return Err(error.into());
        }
        Ok(file)
    }

    /// The snapshot file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How often the snapshot is to be saved (`admission.snapshot_every`); the server's
    /// periodic task ([`super::LiveAdmission::run_periodic`]) reads it.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// Loads the snapshot into the pair, if there is a usable one; logs the outcome (info
    /// when restored or absent, warn when ignored). Returns whether it was restored.
    pub fn restore(&self) -> bool {
        self.restore_at(Instant::now(), SystemTime::now())
    }

    /// [`Snapshots::restore`] with explicit clock readings (for tests).
    pub fn restore_at(&self, now: Instant, wall: SystemTime) -> bool {
        let path = self.path.display();
        let image = match fs::read(&self.path) {
            Ok(bytes) => self.decode(&bytes, wall),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::info!(%path, "no filter snapshot; the filters start empty");
                return false;
            }
            Err(e) => Err(Unusable::Io(e)),
        };
        match image {
            Ok(image) => {
                let (generation, inserts) = (image.generation, image.current.inserts);
                let restored = self.pair.restore_at(image, now);
                if restored {
                    tracing::info!(%path, generation, inserts, "filter snapshot restored");
                }
                restored
            }
            Err(error) => {
                tracing::warn!(%path, %error, "filter snapshot ignored; the filters start empty");
                false
            }
        }
    }

    /// Writes a snapshot now (blocking: call it off the async runtime's worker threads),
    /// into the room [`Snapshots::reserve`] took when there is some; then takes room for
    /// the next one (a failure to is logged, not returned: this save went through).
    pub fn save(&self) -> io::Result<()> {
        let mut saving = self.saving.lock().unwrap_or_else(PoisonError::into_inner);
        let image = self.pair.image_at(Instant::now());
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let reserved = saving.take();
        write_atomically_at(dir, &self.tmp, &self.path, reserved, |file| {
            {
                let mut out = Checksummed::new(BufWriter::with_capacity(1 << 20, &mut *file));
                self.encode(&image, SystemTime::now(), &mut out)?;
                let sum = out.hasher.digest();
                let mut inner = out.inner;
                inner.write_all(&sum.to_le_bytes())?;
                inner.flush()?;
            }
            // Room taken ahead may be larger than this snapshot: cut it to what was written.
            let written = std::io::Seek::stream_position(file)?;
            file.set_len(written)
        })?;
        match self.reserve_locked() {
            Ok(file) => *saving = Some(file),
            Err(error) => tracing::warn!(
                path = %self.tmp.display(),
                %error,
                "cannot take room for the next filter snapshot; it may fail on a full disk"
            ),
        }
        Ok(())
    }

    /// Writes everything but the checksum.
    fn encode(&self, image: &PairImage, wall: SystemTime, out: &mut impl Write) -> io::Result<()> {
        let params = self.pair.params();
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&params.probes.to_le_bytes())?;
        for value in [
            params.bits,
            params.generation_size,
            self.seed_fingerprint,
            image.generation,
        ] {
            out.write_all(&value.to_le_bytes())?;
        }
        encode_filter(&image.current, wall, out)?;
        match &image.previous {
            Some(previous) => {
                out.write_all(&1u64.to_le_bytes())?;
                encode_filter(previous, wall, out)
            }
            None => out.write_all(&0u64.to_le_bytes()),
        }
    }

    /// Parses and checks a snapshot against this pair's params and seed; ages its
    /// generations to the wall-clock time `wall`.
    fn decode(&self, bytes: &[u8], wall: SystemTime) -> Result<PairImage, Unusable> {
        let body_len = bytes.len().checked_sub(8).ok_or(Unusable::Format)?;
        let (body, sum) = bytes.split_at(body_len);
        let mut r = Reader(body);
        if r.take(8)? != MAGIC || r.u32()? != VERSION {
            return Err(Unusable::Format);
        }
        if u64::from_le_bytes(sum.try_into().map_err(|_| Unusable::Format)?) != xxh3_64(body) {
            return Err(Unusable::Checksum);
        }
        let params = self.pair.params();
        let (probes, bits, generation_size) = (r.u32()?, r.u64()?, r.u64()?);
        if (probes, bits, generation_size) != (params.probes, params.bits, params.generation_size) {
            return Err(Unusable::Different(
                "other filter parameters (admission.expected_urls, memory or false_positive_rate changed)",
            ));
        }
        if r.u64()? != self.seed_fingerprint {
            return Err(Unusable::Different("another filter seed"));
        }
        let generation = r.u64()?;
        let words = usize::try_from(bits / 64).map_err(|_| Unusable::Format)?;
        let current = decode_filter(&mut r, words, wall)?;
        let previous = match r.u64()? {
            0 => None,
            1 => Some(decode_filter(&mut r, words, wall)?),
            _ => return Err(Unusable::Format),
        };
        if !r.0.is_empty() {
            return Err(Unusable::Format);
        }
        Ok(PairImage {
            generation,
            current,
            previous,
        })
    }
}

/// A keyed fingerprint of the seed: equal seeds give equal fingerprints; it does not reveal
/// the seed.
fn fingerprint(seed: u64) -> u64 {
    xxh3_64_with_seed(b"secondhit filter seed fingerprint", seed)
}

/// One filter: its generation's start (wall clock), its count, its words.
fn encode_filter(filter: &FilterImage, wall: SystemTime, out: &mut impl Write) -> io::Result<()> {
    let start = wall.checked_sub(filter.age).unwrap_or(UNIX_EPOCH);
    out.write_all(&unix_millis(start).to_le_bytes())?;
    out.write_all(&filter.inserts.to_le_bytes())?;
    for word in &filter.words {
        out.write_all(&word.to_le_bytes())?;
    }
    Ok(())
}

/// The inverse of [`encode_filter`]; the age is the time from the stored start to `wall`
/// (zero if the clock went backwards).
fn decode_filter(
    r: &mut Reader<'_>,
    words: usize,
    wall: SystemTime,
) -> Result<FilterImage, Unusable> {
    let start = UNIX_EPOCH
        .checked_add(Duration::from_millis(r.u64()?))
        .ok_or(Unusable::Format)?;
    let inserts = r.u64()?;
    let bytes = r.take(words.checked_mul(8).ok_or(Unusable::Format)?)?;
    let words = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    Ok(FilterImage {
        words,
        inserts,
        age: wall.duration_since(start).unwrap_or(Duration::ZERO),
    })
}

/// Milliseconds since the Unix epoch (0 before it).
fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A cursor over a snapshot's bytes; running out is a format error.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Unusable> {
        if self.0.len() < n {
            return Err(Unusable::Format);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, Unusable> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes(
            bytes.try_into().map_err(|_| Unusable::Format)?,
        ))
    }

    fn u64(&mut self) -> Result<u64, Unusable> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(
            bytes.try_into().map_err(|_| Unusable::Format)?,
        ))
    }
}

/// A writer that hashes what passes through it.
struct Checksummed<W> {
    inner: W,
    hasher: Xxh3Default,
}

impl<W: Write> Checksummed<W> {
    fn new(inner: W) -> Self {
        Checksummed {
            inner,
            hasher: Xxh3Default::new(),
        }
    }
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `path` atomically: `write` fills a temp file in `dir` (the same directory, so the
/// rename stays on one filesystem), which is fsynced and renamed over `path`; then `dir` is
/// fsynced so the rename itself survives a crash. A reader never sees a half-written file.
pub(super) fn write_atomically(
    dir: &Path,
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // The process id keeps two processes from sharing a temp file; a leftover from a crash is
    // simply truncated and reused.
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    write_atomically_at(dir, &tmp, path, None, write)
}

/// [`write_atomically`] through the temp file `tmp`, already open as `reserved` when the
/// caller took room for it (written from its start), else made anew.
fn write_atomically_at(
    dir: &Path,
    tmp: &Path,
    path: &Path,
    reserved: Option<File>,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let tmp = tmp.to_owned();
    let result = (|| {
        let mut file = match reserved {
            Some(file) => file,
            None => OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?,
        };
        write(&mut file)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        // Best effort: the write already failed, and a stray temp file is harmless.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes the temp files of snapshots other processes left in `dir` (a crash between
/// taking room and renaming leaves one as large as a snapshot).
fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{SNAPSHOT_FILE}.");
    let ours = format!("{prefix}{}.", std::process::id());
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".tmp") && !name.starts_with(&ours) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Counts the bytes written to it, keeping none.
struct Counted(u64);

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Makes a rename in `dir` durable (fsync of the directory, a Unix notion).
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Directories cannot be opened for fsync off Unix; the rename is as durable as the platform makes it.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests;
