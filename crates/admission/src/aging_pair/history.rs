//! The last [`HISTORY`] rotations, for the admin page's timeline.
//!
//! A fixed ring of atomics written once per rotation, by the thread whose compare-and-swap
//! won it (so one writer per generation), and read by `/stats`. Nothing here is on the
//! request path: a check never reads it, and a rotation writes five words.
//!
//! Each entry is a small seqlock: the writer zeroes the entry's tag, writes the fields,
//! then stores the tag (the generation the rotation began, plus one) with `Release`; a reader
//! loads the tag with `Acquire`, the fields, and the tag again after an `Acquire` fence, and
//! keeps the entry only if both tags agree. A reader racing a writer therefore skips the
//! entry rather than mixing two rotations. (Two writers on one entry need rotations 16
//! generations apart to overlap in time; the tag check catches most of that too, and the
//! cost of a miss is one odd line on a status page.)

use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering, fence};

use super::Cause;

/// Rotations remembered.
pub(super) const HISTORY: usize = 16;

/// One remembered rotation, as read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Record {
    /// The generation the rotation began.
    pub generation: u64,
    /// Why.
    pub cause: Cause,
    /// When, in nanoseconds from the pair's epoch.
    pub at: i64,
    /// New keys the ended generation counted.
    pub ended_inserts: u64,
    /// How long the ended generation lasted, in nanoseconds.
    pub ended_nanos: i64,
}

/// One slot of the ring.
#[derive(Default)]
struct Entry {
    /// `generation + 1` of the record held (0: none, or being written).
    tag: AtomicU64,
    cause: AtomicU8,
    at: AtomicI64,
    ended_inserts: AtomicU64,
    ended_nanos: AtomicI64,
}

/// The ring: generation `g` lives at `g % HISTORY`.
#[derive(Default)]
pub(super) struct History {
    entries: [Entry; HISTORY],
}

impl History {
    /// Remembers `record`, forgetting the one `HISTORY` generations older.
    pub(super) fn push(&self, record: Record) {
        let entry = &self.entries[(record.generation % HISTORY as u64) as usize];
        entry.tag.store(0, Ordering::Relaxed);
        // Orders the zeroed tag before the field writes for a reader that sees any of them.
        fence(Ordering::Release);
        entry.cause.store(record.cause as u8, Ordering::Relaxed);
        entry.at.store(record.at, Ordering::Relaxed);
        entry
            .ended_inserts
            .store(record.ended_inserts, Ordering::Relaxed);
        entry
            .ended_nanos
            .store(record.ended_nanos, Ordering::Relaxed);
        entry.tag.store(record.generation + 1, Ordering::Release);
    }

    /// The remembered rotations, newest first.
    pub(super) fn recent(&self) -> Vec<Record> {
        let mut records: Vec<Record> = self
            .entries
            .iter()
            .filter_map(|entry| {
                let tag = entry.tag.load(Ordering::Acquire);
                let cause = Cause::ALL
                    .get(usize::from(entry.cause.load(Ordering::Relaxed)))
                    .copied();
                let at = entry.at.load(Ordering::Relaxed);
                let ended_inserts = entry.ended_inserts.load(Ordering::Relaxed);
                let ended_nanos = entry.ended_nanos.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                if tag == 0 || entry.tag.load(Ordering::Relaxed) != tag {
                    return None;
                }
                Some(Record {
                    generation: tag - 1,
                    cause: cause?,
                    at,
                    ended_inserts,
                    ended_nanos,
                })
            })
            .collect();
        records.sort_unstable_by_key(|record| std::cmp::Reverse(record.generation));
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(generation: u64) -> Record {
        Record {
            generation,
            cause: Cause::ALL[generation as usize % Cause::ALL.len()],
            at: generation as i64 * 1000,
            ended_inserts: generation * 7,
            ended_nanos: 1000,
        }
    }

    #[test]
    fn keeps_the_last_sixteen_newest_first() {
        let history = History::default();
        assert!(history.recent().is_empty());
        for generation in 1..=40 {
            history.push(record(generation));
        }
        let recent = history.recent();
        let expected: Vec<Record> = (25..=40).rev().map(record).collect();
        assert_eq!(recent, expected);
    }

    #[test]
    fn concurrent_readers_never_see_a_mixed_record() {
        let history = History::default();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for generation in 1..=20_000 {
                    history.push(record(generation));
                }
            });
            for _ in 0..2_000 {
                for seen in history.recent() {
                    assert_eq!(seen, record(seen.generation));
                }
            }
        });
    }
}
