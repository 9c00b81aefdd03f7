//! `state/pending-purges`: the purges whose files are still being unlinked.
//!
//! A purge takes its entries out of the index at once (each a miss from then on), but
//! unlinking a hundred thousand files takes the disk many seconds. So that the purge can
//! answer before that, it is first written here and synced; the files are then unlinked in
//! the background, and the line is dropped once they all are. Should the process stop
//! before, the next start hands the purges still written here to the start-up scan, which
//! removes the files they select as it reaches them: a purged entry never comes back.
//! That replay may also remove entries stored after the purge that it selects, which a
//! cache can afford; serving a purged one it cannot.
//!
//! One line per purge: its kind (`tag`, `prefix`, `site`, `url`), a tab, and its value
//! as a JSON string. The file is rewritten whole (temp file, rename) when a line goes.
//! It is read as bytes, line by line: a line cut short by a stop mid-append may end inside
//! a character, and only that line is lost, never the file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::StoreError;
use super::catalog::{PurgeKind, PurgeSelector};
use super::disk;

/// The file's name in `state/`.
pub(super) const FILE: &str = "pending-purges";

/// The purges written and not yet done, by id, and where they are written.
#[derive(Debug)]
pub(super) struct PurgeLog {
    path: PathBuf,
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    next_id: u64,
    purges: Vec<(u64, PurgeSelector)>,
}

impl PurgeLog {
    /// Opens the log in `state_dir` (made if missing) and returns the purges a previous run
    /// left undone, each pending under an id until [`PurgeLog::done`] drops it. A line that
    /// does not parse is skipped with a warning: the worst it costs is an entry purged
    /// then not purged again, where a start refused would cost the whole cache.
    pub(super) fn open(
        state_dir: &Path,
    ) -> Result<(PurgeLog, Vec<(u64, PurgeSelector)>), StoreError> {
        std::fs::create_dir_all(state_dir).map_err(disk::io_err(state_dir))?;
        let path = state_dir.join(FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(disk::io_err(&path)(error)),
        };
        let mut pending = Pending::default();
        for decoded in decode(&bytes) {
            match decoded {
                Ok(selector) => {
                    pending.purges.push((pending.next_id, selector));
                    pending.next_id += 1;
                }
                Err(line) => {
                    let line = String::from_utf8_lossy(line);
                    tracing::warn!(path = %path.display(), %line, "unreadable pending purge; skipped")
                }
            }
        }
        let left = pending.purges.clone();
        let log = PurgeLog {
            path,
            pending: Mutex::new(pending),
        };
        // A line cut short by a stop has no newline: the next purge appended would run on
        // from it and be lost with it. The file is written again without it first.
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            log.rewrite(&log.pending())?;
        }
        Ok((log, left))
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        // Each critical section leaves `Pending` whole: poison carries no meaning.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `selector` to the file and syncs it; blocking. Returns its id for
    /// [`PurgeLog::done`].
    pub(super) fn record(&self, selector: &PurgeSelector) -> Result<u64, StoreError> {
        let mut pending = self.pending();
        let id = pending.next_id;
        pending.next_id += 1;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(disk::io_err(&self.path))?;
        file.write_all(line(selector).as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(disk::io_err(&self.path))?;
        pending.purges.push((id, selector.clone()));
        Ok(id)
    }

    /// Drops the purge `id`, its files all unlinked, from the file; blocking.
    pub(super) fn done(&self, id: u64) -> Result<(), StoreError> {
        let mut pending = self.pending();
        pending.purges.retain(|(pending_id, _)| *pending_id != id);
        self.rewrite(&pending)
    }

    /// Writes the file anew with `pending`'s purges (temp file, sync, rename).
    fn rewrite(&self, pending: &Pending) -> Result<(), StoreError> {
        let text = encode(pending.purges.iter().map(|(_, s)| s));
        let temp = self.path.with_extension("tmp");
        let written = File::create(&temp)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())
                    .and_then(|()| file.sync_all())
            })
            .and_then(|()| std::fs::rename(&temp, &self.path));
        written.map_err(disk::io_err(&self.path))
    }
}

/// The file's text for `selectors`, one line each.
pub(crate) fn encode<'a>(selectors: impl IntoIterator<Item = &'a PurgeSelector>) -> String {
    selectors.into_iter().map(line).collect()
}

/// The purges of the file's bytes, in order; `Err` holds a line that is not one. Empty
/// lines are no purges; a line's `\r\n` ending reads as `\n`.
pub(crate) fn decode(bytes: &[u8]) -> impl Iterator<Item = Result<PurgeSelector, &[u8]>> {
    (bytes.split(|&b| b == b'\n'))
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.is_empty())
        .map(|line| (std::str::from_utf8(line).ok().and_then(parse)).ok_or(line))
}

/// The line of `selector`, newline included.
fn line(selector: &PurgeSelector) -> String {
    // A JSON string: a tab or newline in the value cannot break the line.
    let value = serde_json::Value::from(selector.value());
    format!("{}\t{value}\n", selector.kind().as_str())
}

/// The selector of one line, `None` if it is not one.
fn parse(line: &str) -> Option<PurgeSelector> {
    let (kind, value) = line.split_once('\t')?;
    let kind: PurgeKind = kind.parse().ok()?;
    Some(PurgeSelector::new(kind, serde_json::from_str(value).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purges_left_undone_come_back_and_done_ones_do_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("state");
        let (log, left) = PurgeLog::open(&state).expect("open");
        assert!(left.is_empty());
        let tag = PurgeSelector::Tag("a\tb \"c\"\n".to_owned());
        let site = PurgeSelector::Site("example.com".to_owned());
        let first = log.record(&tag).expect("record");
        let second = log.record(&site).expect("record");
        log.done(first).expect("done");
        drop(log);
        // A restart: the undone purge is handed back, the done one is not.
        let (log, left) = PurgeLog::open(&state).expect("reopen");
        assert_eq!(left.iter().map(|(_, s)| s).collect::<Vec<_>>(), [&site]);
        let _ = second;
        log.done(left[0].0).expect("done");
        let (_, left) = PurgeLog::open(&state).expect("reopen");
        assert!(left.is_empty());
        // An unreadable line is skipped, the rest kept.
        std::fs::write(
            state.join(FILE),
            "tag\t\"x\"\nnonsense\nprefix\t\"http://h/p/\"\n",
        )
        .expect("write");
        let (_, left) = PurgeLog::open(&state).expect("reopen");
        let kinds: Vec<PurgeSelector> = left.into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            kinds,
            [
                PurgeSelector::Tag("x".to_owned()),
                PurgeSelector::Prefix("http://h/p/".to_owned())
            ]
        );
    }

    #[test]
    fn the_file_keeps_its_format_for_every_kind() {
        // The lines a log holds, as every release so far has written them: each kind's
        // name, a tab, the value as a JSON string.
        let written = "tag\t\"t 1\"\nprefix\t\"http://h/p/\"\nsite\t\"example.com:8080\"\nurl\t\"http://h/x?a=\\\"b\\\"\"\n";
        let read: Vec<PurgeSelector> = decode(written.as_bytes())
            .collect::<Result<_, _>>()
            .expect("every line reads");
        assert_eq!(
            read,
            [
                PurgeSelector::Tag("t 1".to_owned()),
                PurgeSelector::Prefix("http://h/p/".to_owned()),
                PurgeSelector::Site("example.com:8080".to_owned()),
                PurgeSelector::Url("http://h/x?a=\"b\"".to_owned()),
            ]
        );
        assert_eq!(encode(&read), written);
        assert_eq!(
            read.iter().map(PurgeSelector::kind).collect::<Vec<_>>(),
            PurgeKind::ALL
        );
    }

    #[test]
    fn a_kind_reads_back_from_its_name_and_no_other() {
        for kind in PurgeKind::ALL {
            assert_eq!(kind.as_str().parse(), Ok(kind));
            let selector = PurgeSelector::new(kind, "v".to_owned());
            assert_eq!((selector.kind(), selector.value()), (kind, "v"));
        }
        for name in ["", "Tag", "tags", "urls", " url"] {
            assert!(name.parse::<PurgeKind>().is_err(), "{name:?}");
        }
    }
}
