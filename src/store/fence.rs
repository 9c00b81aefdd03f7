//! Removal fences: a fill that began before its key was removed must not
//! commit after the removal, or the removal would be undone by content at
//! least as old as what it removed.
//!
//! The rule: [`Store::remove`](super::Store::remove) records, as the key's
//! fence, the next fill id it would hand out; fill ids only grow, so a fill of
//! the key with an id below the fence began before the removal, and its
//! [`EntryWriter::finish`](super::EntryWriter::finish) drops it (as if a newer
//! fill had won). A fill that begins after the removal has an id at or above
//! the fence and commits normally. "Began" means `begin_fill` was called: a
//! response requested before the removal but whose fill begins after it is not
//! caught (the store does not know when the request was sent).
//!
//! Memory stays bounded by the fills in progress: a fence matters only while a
//! fill of its key that began before it is still in progress, so a key is
//! remembered only while it has fills in progress, and forgotten with the last
//! of them; a removal of a key without fills in progress records nothing.
//!
//! Purges by tag, prefix, site or URL fence the same way every fill in progress whose key
//! and tags they select ([`Fences::fence_selected`]): each pending key keeps its key
//! string and the union of its fills' tags for that.
//!
//! One mutex guards the map. It is taken when a fill begins, commits and ends,
//! and by every removal, each time for one map operation (plus the index insert
//! when a fill commits); hits never take it, and fills are far rarer than hits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::catalog::PurgeSelector;
use super::index::{Fill, Index, Placed, Provenance};

/// What is known about one key with fills in progress.
#[derive(Debug, Default)]
struct Pending {
    /// Fills of the key in progress (begun, neither committed nor dropped).
    fills: usize,
    /// Fills with a smaller id began before the key's latest removal; 0 if none.
    removed_below: u64,
    /// The key, for purges that select by it.
    key: Box<str>,
    /// The tags of its fills in progress, for purges by tag.
    tags: Vec<Box<str>>,
}

/// Key hash → fills in progress and fence, for keys with fills in progress.
#[derive(Debug, Default)]
pub(crate) struct Fences {
    keys: Mutex<HashMap<u128, Pending>>,
}

impl Fences {
    fn keys(&self) -> MutexGuard<'_, HashMap<u128, Pending>> {
        // Every critical section is a map operation (or a map lookup and an
        // index insert, which cannot fail half-way): poison carries no meaning.
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a fill of `key_hash` and allocates its fill id from
    /// `next_fill_id`. Both happen under the lock, so a concurrent removal
    /// either sees this fill registered or took its fence before the id was
    /// allocated, and then the id is at or above the fence. Relaxed: the
    /// mutex orders the allocation against removals; the atomic only has to
    /// hand out unique ids (the scan raises it without the lock).
    pub(crate) fn begin(
        &self,
        (key_hash, key, tags): (u128, &str, &[String]),
        next_fill_id: &AtomicU64,
    ) -> u64 {
        let mut keys = self.keys();
        let pending = keys.entry(key_hash).or_default();
        pending.fills += 1;
        if pending.key.is_empty() {
            pending.key = key.into();
        }
        for tag in tags {
            if !pending.tags.iter().any(|t| **t == **tag) {
                pending.tags.push(tag.as_str().into());
            }
        }
        next_fill_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Forgets a fill that committed or was dropped; with the key's last fill
    /// in progress, the key and its fence are forgotten too.
    pub(crate) fn end(&self, key_hash: u128) {
        let mut keys = self.keys();
        if let Some(pending) = keys.get_mut(&key_hash) {
            pending.fills -= 1;
            if pending.fills == 0 {
                keys.remove(&key_hash);
            }
        }
    }

    /// Records a removal of `key_hash`: every fill of it in progress now has an
    /// id below the next one `next_fill_id` hands out.
    pub(crate) fn remove(&self, key_hash: u128, next_fill_id: &AtomicU64) {
        let mut keys = self.keys();
        if let Some(pending) = keys.get_mut(&key_hash) {
            pending.removed_below = next_fill_id.load(Ordering::Relaxed);
        }
    }

    /// Records a purge: every fill in progress whose key and tags `selector` selects
    /// now has an id below the next one `next_fill_id` hands out, as after a removal of
    /// its key. Returns how many keys it fenced.
    pub(crate) fn fence_selected(
        &self,
        selector: &PurgeSelector,
        next_fill_id: &AtomicU64,
    ) -> usize {
        let mut keys = self.keys();
        let below = next_fill_id.load(Ordering::Relaxed);
        let mut fenced = 0;
        for pending in keys.values_mut() {
            if selector.matches(&pending.key, &pending.tags) {
                pending.removed_below = below;
                fenced += 1;
            }
        }
        fenced
    }

    /// Indexes a committed fill of this run unless a removal of its key came
    /// after it began; then it is `Placed::Lost` and the caller unlinks it.
    /// Under the lock, so a removal comes either before (and fences this fill
    /// out) or after (and finds it in the index); `placed` runs under it too when
    /// the fill is indexed (it records the fill in the catalog, where a purge that
    /// comes after looks).
    pub(crate) fn place(
        &self,
        index: &Index,
        (key_hash, fill): (u128, Fill),
        placed: impl FnOnce(),
    ) -> Placed {
        let keys = self.keys();
        if keys
            .get(&key_hash)
            .is_some_and(|p| fill.fill_id < p.removed_below)
        {
            return Placed::Lost;
        }
        let outcome = index.place(key_hash, fill, Provenance::Live);
        if outcome != Placed::Lost {
            placed();
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_begun_before_a_removal_lose_and_the_map_empties() {
        let fences = Fences::default();
        let index = Index::new(u64::MAX);
        let next = AtomicU64::new(10);
        let fill = |fill_id| Fill { fill_id, size: 1 };
        // A removal without fills in progress records nothing.
        fences.remove(1, &next);
        assert!(fences.keys().is_empty());
        let before = fences.begin((1, "k1", &[]), &next);
        fences.remove(1, &next);
        let after = fences.begin((1, "k1", &[]), &next);
        assert_eq!(fences.place(&index, (1, fill(before)), || {}), Placed::Lost);
        assert_eq!(fences.place(&index, (1, fill(after)), || {}), Placed::New);
        // Other keys are not fenced.
        let other = fences.begin((2, "k2", &[]), &next);
        assert_eq!(fences.place(&index, (2, fill(other)), || {}), Placed::New);
        for key in [1, 1, 2] {
            fences.end(key);
        }
        assert!(fences.keys().is_empty());
    }

    #[test]
    fn purges_fence_the_fills_they_select_and_no_others() {
        let fences = Fences::default();
        let index = Index::new(u64::MAX);
        let next = AtomicU64::new(10);
        let fill = |fill_id| Fill { fill_id, size: 1 };
        let tagged = ["a".to_owned()];
        let near = ["ab".to_owned()];
        let a = fences.begin((1, "http://h/1", &tagged), &next);
        let ab = fences.begin((2, "http://h/2", &near), &next);
        let tag = PurgeSelector::Tag("a".to_owned());
        assert_eq!(fences.fence_selected(&tag, &next), 1);
        assert_eq!(fences.place(&index, (1, fill(a)), || {}), Placed::Lost);
        let mut recorded = false;
        assert_eq!(
            fences.place(&index, (2, fill(ab)), || recorded = true),
            Placed::New
        );
        assert!(recorded, "an indexed fill is recorded under the lock");
    }
}
