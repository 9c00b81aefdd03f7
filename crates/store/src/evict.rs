//! Eviction to make room for a fill's reservation: the victims one shortfall takes are
//! popped from the index together and their files unlinked in one file call. While the
//! files still being unlinked stay within a sixteenth of the budget ([`Behind`]), their
//! bytes count as free at once and the call runs on the blocking pool, not awaited: the
//! fill begins, and its client gets the response head, without waiting for the unlinks,
//! and the worker does not stall on them. Beyond that share the call is awaited before
//! the bytes count as free, on the worker while `inline_io`'s gate is open, as the
//! fills' own file calls are.
//!
//! Each unlink used to be a hop to the blocking pool and back, awaited before the next
//! victim was chosen, and a stored miss answers its client only once its fill has begun:
//! a fill that needed a dozen victims waited for a dozen hand-offs to a blocking thread
//! and back before its client saw a byte (`benches/RESULTS.md`, "evictions in one file
//! call"); and one call on the worker still held it up, with the worker's other
//! requests (`benches/RESULTS.md`, "where a stored miss's body waited").

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use foldhash::quality::RandomState;
use tokio::sync::Notify;

use super::index::Fill;
use super::{Inner, StoreError, disk};
use crate::StoreHash;

/// The evicted files still being unlinked may stand beyond the budget by up to one part
/// in `BEHIND_SHARE` of it, and at most [`BEHIND_MAX`]; a reservation whose victims would
/// pass that waits for their unlinks.
const BEHIND_SHARE: u64 = 16;

/// See [`BEHIND_SHARE`]: on a large cache, a disk slow to unlink must not leave gigabytes
/// beyond the budget.
const BEHIND_MAX: u64 = 256 * 1024 * 1024;

/// Evicted files whose unlinks run on the blocking pool behind the fills that evicted
/// them: their bytes already count as free, so the cache's files may stand above the
/// budget by these bytes until the unlinks end.
#[derive(Debug, Default)]
pub(super) struct Behind {
    bytes: AtomicU64,
    /// The batches whose unlinks are under way, by number, and the next number: a
    /// batch numbered below a [`Behind::mark`] began before it.
    batches: Mutex<Batches>,
    /// Notified as each batch's unlinks end.
    done: Notify,
}

/// See [`Behind::batches`]: each pending batch with the keys of its victims, and by key
/// the last pending batch unlinking a file of it and how many do.
#[derive(Debug, Default)]
struct Batches {
    next: u64,
    pending: BTreeMap<u64, Vec<StoreHash>>,
    keys: HashMap<StoreHash, KeyBatches, RandomState>,
}

/// See [`Batches::keys`].
#[derive(Debug)]
struct KeyBatches {
    last: u64,
    count: u32,
}

impl Behind {
    /// Takes `bytes` under the cap of a budget of `max_bytes` for a new batch unlinking
    /// the files of `keys`, and returns its number; `None` when they do not fit.
    fn take(&self, bytes: u64, max_bytes: u64, keys: Vec<StoreHash>) -> Option<u64> {
        let cap = (max_bytes / BEHIND_SHARE).min(BEHIND_MAX);
        let add = |behind: u64| behind.checked_add(bytes).filter(|&total| total <= cap);
        (self.bytes)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, add)
            .ok()?;
        Some(self.enter(keys))
    }

    /// Registers a batch unlinking the files of `keys`, whose bytes do not count here
    /// (they are given back once the batch's unlinks end), and returns its number.
    fn enter(&self, keys: Vec<StoreHash>) -> u64 {
        let mut batches = self.lock();
        let number = batches.next;
        batches.next += 1;
        for &key in &keys {
            let by_key = batches.keys.entry(key).or_insert(KeyBatches {
                last: number,
                count: 0,
            });
            by_key.last = number;
            by_key.count += 1;
        }
        batches.pending.insert(number, keys);
        number
    }

    /// Ends batch `number`, of `bytes`.
    fn end(&self, number: u64, bytes: u64) {
        {
            let mut batches = self.lock();
            let batches = &mut *batches;
            for key in batches.pending.remove(&number).unwrap_or_default() {
                if let Entry::Occupied(mut by_key) = batches.keys.entry(key) {
                    by_key.get_mut().count -= 1;
                    if by_key.get().count == 0 {
                        by_key.remove();
                    }
                }
            }
        }
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
        self.done.notify_waiters();
    }

    fn lock(&self) -> MutexGuard<'_, Batches> {
        // The set is whole at every step, so a panic elsewhere never spoils it.
        self.batches.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes of evicted files not yet unlinked.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    /// The point the batches begun so far are before, for [`Behind::wait_before`].
    pub(super) fn mark(&self) -> u64 {
        self.lock().next
    }

    /// Waits until the unlinks of every batch begun before `mark` have ended; batches
    /// begun since are not waited for, so fills that go on evicting cannot hold it up.
    pub(super) async fn wait_before(&self, mark: u64) {
        loop {
            let done = self.done.notified();
            if (self.lock().pending.first_key_value()).is_none_or(|(&first, _)| first >= mark) {
                return;
            }
            done.await;
        }
    }

    /// A mark past every pending batch unlinking a file of `key` (past the last batch
    /// that took one of its files, while any of them is pending), for
    /// [`Behind::wait_before`]; `None` when no pending batch unlinks one.
    pub(super) fn mark_past(&self, key: StoreHash) -> Option<u64> {
        self.lock().keys.get(&key).map(|by_key| by_key.last + 1)
    }
}

/// One batch of [`Behind`], ended when dropped: once its unlinks ended, or if they never
/// ran.
struct BehindBatch {
    inner: Arc<Inner>,
    number: u64,
    bytes: u64,
}

impl Drop for BehindBatch {
    fn drop(&mut self) {
        self.inner.behind.end(self.number, self.bytes);
    }
}

/// The most victims unlinked on the worker in one call: a larger batch (a large fill in a
/// cache of small entries) goes to the blocking pool whole, so that it never stalls the
/// worker's other connections.
const INLINE_VICTIMS: usize = 16;

/// Victims taken out of the index whose bytes are not yet given back: given back when
/// dropped, once their files are unlinked, or if the reservation waiting for them is
/// dropped first (its client left), so that the budget never keeps bytes of files gone.
struct Evicted<'a> {
    inner: &'a Inner,
    victims: Vec<(StoreHash, Fill)>,
    /// Directories removed with each victim's file, once known.
    dirs: Vec<u64>,
}

impl Drop for Evicted<'_> {
    fn drop(&mut self) {
        for (at, (key_hash, fill)) in self.victims.iter().enumerate() {
            self.inner
                .forget_leaf_dir(*key_hash, self.dirs.get(at).copied().unwrap_or(0));
            self.inner.index.release_object(fill.size);
        }
    }
}

impl Inner {
    /// Reserves `bytes` of the budget, evicting entries in the index's order until they
    /// fit: the files of each batch unlinked behind the fill ([`Inner::unlink_behind`]),
    /// or before their bytes count as free when too many are already behind.
    pub(super) async fn reserve_budget(self: &Arc<Self>, bytes: u64) -> Result<(), StoreError> {
        while !self.index.try_reserve(bytes) {
            let (victims, refused) = self.victims_for(bytes);
            if victims.is_empty() && refused.is_none() {
                // Room came free between the two looks (another worker's fill ended):
                // look again, after letting the rest of this worker run.
                tokio::task::yield_now().await;
                continue;
            }
            if !victims.is_empty()
                && let Err(victims) = self.unlink_behind(victims)
            {
                self.unlink_victims(victims).await;
            }
            if let Some(refused) = refused {
                return Err(refused);
            }
        }
        Ok(())
    }

    /// Victims enough to free the budget's shortfall for `bytes` as it stands now, and
    /// the refusal if the index ran out of them first (or evicting cannot help).
    fn victims_for(&self, bytes: u64) -> (Vec<(StoreHash, Fill)>, Option<StoreError>) {
        let shortfall = self.index.shortfall(bytes);
        let (mut victims, mut freed) = (Vec::new(), 0);
        while freed < shortfall {
            let Some((key_hash, fill)) = self.victim_for(bytes) else {
                let refused = StoreError::NoSpace {
                    needed: bytes,
                    max_size: self.index.max_bytes(),
                };
                return (victims, Some(refused));
            };
            freed += fill.size;
            victims.push((key_hash, fill));
        }
        (victims, None)
    }

    /// Gives the bytes of `victims`, already out of the index, back at once, and
    /// unlinks their files in one call on the blocking pool, not awaited: a fill that
    /// evicts is not held up by the unlinks, nor is the worker. `Err` gives the victims
    /// back when their bytes would take [`Behind`] past its cap, or a hand-over is
    /// closing the store, for the caller to unlink before their bytes count as free.
    fn unlink_behind(
        self: &Arc<Self>,
        victims: Vec<(StoreHash, Fill)>,
    ) -> Result<(), Vec<(StoreHash, Fill)>> {
        let bytes = victims.iter().map(|(_, fill)| fill.size).sum();
        let keys = victims.iter().map(|&(key, _)| key).collect();
        let Some(number) = self.behind.take(bytes, self.index.max_bytes(), keys) else {
            return Err(victims);
        };
        let batch = BehindBatch {
            inner: Arc::clone(self),
            number,
            bytes,
        };
        // Held by the unlinks, so that a hand-over waits for them before the next owner
        // opens the directory.
        let Some(step) = self.gate.fill_step() else {
            return Err(victims);
        };
        let paths: Vec<(StoreHash, PathBuf)> = (victims.iter())
            .map(|&(key, fill)| (key, self.forget_fill(key, fill)))
            .collect();
        for (_, fill) in &victims {
            self.index.release_object(fill.size);
        }
        let dirs = self.space.inodes_scarce();
        // Not awaited, and a panicked job removed what it removed: the next start-up
        // scan finds the rest, as after a crash.
        drop(tokio::task::spawn_blocking(move || {
            let _step = step;
            for (key_hash, path) in &paths {
                let removed = disk::remove_entry_quietly_sync(path, dirs);
                batch.inner.forget_leaf_dir(*key_hash, removed);
            }
            drop(batch);
        }));
        Ok(())
    }

    /// Unlinks the files of `victims`, already out of the index, in one file call, and
    /// then gives their bytes back.
    async fn unlink_victims(self: &Arc<Self>, victims: Vec<(StoreHash, Fill)>) {
        let paths: Vec<PathBuf> = (victims.iter())
            .map(|&(key, fill)| self.forget_fill(key, fill))
            .collect();
        let inline = victims.len() <= INLINE_VICTIMS;
        // Registered with [`Behind`] (its bytes counted by `Evicted` instead), so that a
        // removal of one of the victims' keys waits for their unlinks too.
        let _batch = BehindBatch {
            number: (self.behind).enter(victims.iter().map(|&(key, _)| key).collect()),
            inner: Arc::clone(self),
            bytes: 0,
        };
        let mut evicted = Evicted {
            inner: self,
            victims,
            dirs: Vec::new(),
        };
        let dirs = self.space.inodes_scarce();
        let remove = move || -> Vec<u64> {
            let remove_one = |path: &PathBuf| disk::remove_entry_quietly_sync(path, dirs);
            paths.iter().map(remove_one).collect()
        };
        let began = Instant::now();
        evicted.dirs = match inline && self.inline_io.open_at(began) {
            true => self.inline_io.timed(began, remove),
            // A panicked job removed what it removed; the next start-up scan finds the rest.
            false => tokio::task::spawn_blocking(remove)
                .await
                .unwrap_or_default(),
        };
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::Behind;
    use crate::StoreHash;

    #[test]
    fn a_wait_for_the_batches_before_a_mark_is_not_held_by_later_ones() {
        let behind = Behind::default();
        let first = behind.take(10, 1_600, Vec::new()).unwrap();
        let mark = behind.mark();
        let later = behind.take(10, 1_600, Vec::new()).unwrap();
        assert!(behind.wait_before(mark).now_or_never().is_none());
        behind.end(first, 10);
        assert!(behind.wait_before(mark).now_or_never().is_some());
        assert_eq!(behind.bytes(), 10);
        behind.end(later, 10);
        assert_eq!(behind.bytes(), 0);
    }

    #[test]
    fn batches_behind_stay_within_a_sixteenth_of_the_budget() {
        let behind = Behind::default();
        assert!(behind.take(100, 1_600, Vec::new()).is_some());
        assert!(
            behind.take(1, 1_600, Vec::new()).is_none(),
            "100 of 1,600 taken already"
        );
        assert_eq!(behind.bytes(), 100);
    }

    #[test]
    fn the_mark_for_a_key_is_past_every_batch_unlinking_a_file_of_it() {
        let behind = Behind::default();
        let first = behind
            .take(10, 1_600, vec![StoreHash(7), StoreHash(8)])
            .unwrap();
        let second = behind.enter(vec![StoreHash(8)]);
        behind.take(10, 1_600, vec![StoreHash(9)]).unwrap();
        assert_eq!(behind.mark_past(StoreHash(7)), Some(first + 1));
        assert_eq!(behind.mark_past(StoreHash(8)), Some(second + 1));
        assert_eq!(behind.mark_past(StoreHash(6)), None);
        behind.end(second, 0);
        let mark = behind.mark_past(StoreHash(8));
        assert!(
            mark.is_some_and(|mark| mark > first),
            "first unlinks one still"
        );
        behind.end(first, 10);
        assert_eq!(behind.mark_past(StoreHash(8)), None);
        assert_eq!(behind.mark_past(StoreHash(7)), None);
    }
}
