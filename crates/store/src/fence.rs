//! Removal fences: a fill of content requested before its key was removed (or purged)
//! must not commit after the removal, or the removal would be undone by content at
//! least as old as what it removed.
//!
//! Two cases, one clock. Fill ids and [`FillTicket`]s come from one counter that only
//! grows, and a removal reads it as its fence:
//! - **A fill in progress** (`begin_fill` called): [`Store::remove`](super::Store::remove)
//!   records, as the key's fence, the next fill id it would hand out, so a fill of the key
//!   with an id below the fence began before the removal, and its
//!   [`EntryWriter::finish`](super::EntryWriter::finish) drops it (as if a newer fill had
//!   won). A fill that begins after the removal has an id at or above the fence.
//! - **A request on its way** (sent to the origin, its fill not begun): the proxy takes a
//!   [`FillTicket`] before it sends the request, and hands it to `begin_fill`. Removals and
//!   purges are remembered for a while ([`RECENT`] of them), so a fill whose ticket is older
//!   than one that selects it is refused at its start ([`Began::Fenced`]): the origin
//!   may have answered before the purge, and the purge was answered "done".
//!   A ticket older than everything remembered is refused too: what was forgotten might
//!   have selected it.
//!
//! Memory stays bounded: a fence matters only while a fill of its key that began before
//! it is still in progress, so a key is remembered only while it has fills in progress,
//! and forgotten with the last of them; the recent removals are a ring of [`RECENT`].
//!
//! Purges by tag, prefix, site or URL fence the same way every fill in progress whose key
//! and tags they select ([`Fences::fence_selected`]): each pending key keeps its key
//! string and the union of its fills' tags for that.
//!
//! One mutex guards both. It is taken when a fill begins, commits and ends, and by every
//! removal, each time for one map operation (plus a walk of the recent removals newer
//! than the fill's ticket when it begins, and the index insert when it commits); hits
//! never take it, and fills are far rarer than hits.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use foldhash::quality::RandomState;

use super::catalog::PurgeSelector;
use super::index::{Fill, Index, Placed, Provenance};
use crate::{FillId, StoreHash};

/// Removals and purges remembered for requests on their way to the origin: far more than
/// can happen within one origin round trip, at a few dozen bytes each.
const RECENT: usize = 4096;

/// A place in the store's order of fills and removals, taken before a request goes to
/// the origin: a removal after it fences the fill of the answer ([`Store::fill_ticket`](super::Store::fill_ticket)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FillTicket(u64);

/// Whether a fill may begin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Began {
    /// Registered, with this fill id.
    Registered(FillId),
    /// A removal or purge after the fill's ticket selects it: not registered.
    Fenced,
}

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

/// What a remembered removal selected.
#[derive(Debug)]
enum Removed {
    /// One key.
    Key(StoreHash),
    /// What a purge selects.
    Selected(PurgeSelector),
}

/// A remembered removal: tickets below `below` were taken before it.
#[derive(Debug)]
struct Recent {
    below: u64,
    removed: Removed,
}

/// The pending keys and the recent removals, under one lock.
#[derive(Debug, Default)]
struct State {
    keys: HashMap<StoreHash, Pending, RandomState>,
    recent: VecDeque<Recent>,
    /// Tickets below this are older than every remembered removal.
    forgotten_below: u64,
}

impl State {
    fn remember(&mut self, below: u64, removed: Removed) {
        if self.recent.len() == RECENT
            && let Some(oldest) = self.recent.pop_front()
        {
            self.forgotten_below = oldest.below;
        }
        self.recent.push_back(Recent { below, removed });
    }

    /// Whether a removal after `ticket` selects `fill`.
    fn fenced(&self, ticket: FillTicket, fill: FillOf<'_>) -> bool {
        let FillOf {
            hash: key_hash,
            key,
            tags,
        } = fill;
        if ticket.0 < self.forgotten_below {
            return true;
        }
        self.recent
            .iter()
            .rev()
            .take_while(|recent| recent.below > ticket.0)
            .any(|recent| match &recent.removed {
                Removed::Key(hash) => *hash == key_hash,
                Removed::Selected(selector) => selector.matches(key, tags),
            })
    }
}

/// What a fill is of, as a removal selects it: the key's store hash, the key and its tags.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FillOf<'a> {
    /// The key's store hash.
    pub(crate) hash: StoreHash,
    /// The cache key.
    pub(crate) key: &'a str,
    /// The response's cache tags.
    pub(crate) tags: &'a [String],
}

/// Key hash → fills in progress and fence, for keys with fills in progress; and the
/// recent removals.
#[derive(Debug, Default)]
pub(crate) struct Fences {
    state: Mutex<State>,
}

impl Fences {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section is a map or ring operation (or a map lookup and an
        // index insert, which cannot fail half-way): poison carries no meaning.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A ticket for a request about to be sent: the next id of `next_fill_id`, taken
    /// for it alone, so a removal after this reads a larger one. Relaxed: one counter,
    /// whose read-modify-write sees every earlier removal's read.
    pub(crate) fn ticket(next_fill_id: &AtomicU64) -> FillTicket {
        FillTicket(next_fill_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Registers a fill of `key_hash` requested at `ticket` and allocates its fill id
    /// from `next_fill_id`, unless a removal after the ticket selects it. Both happen
    /// under the lock, so a concurrent removal either sees this fill registered or took
    /// its fence before the id was allocated, and then the id is at or above the fence.
    /// Relaxed: the mutex orders the allocation against removals; the atomic only has to
    /// hand out unique ids (the scan raises it without the lock).
    pub(crate) fn begin(
        &self,
        fill: FillOf<'_>,
        ticket: FillTicket,
        next_fill_id: &AtomicU64,
    ) -> Began {
        let mut state = self.state();
        if state.fenced(ticket, fill) {
            return Began::Fenced;
        }
        let pending = state.keys.entry(fill.hash).or_default();
        pending.fills += 1;
        if pending.key.is_empty() {
            pending.key = fill.key.into();
        }
        for tag in fill.tags {
            if !pending.tags.iter().any(|t| **t == **tag) {
                pending.tags.push(tag.as_str().into());
            }
        }
        Began::Registered(FillId(next_fill_id.fetch_add(1, Ordering::Relaxed)))
    }

    /// Forgets a fill that committed or was dropped; with the key's last fill
    /// in progress, the key and its fence are forgotten too.
    pub(crate) fn end(&self, key_hash: StoreHash) {
        let mut state = self.state();
        if let Some(pending) = state.keys.get_mut(&key_hash) {
            pending.fills -= 1;
            if pending.fills == 0 {
                state.keys.remove(&key_hash);
            }
        }
    }

    /// Records a removal of `key_hash`: every fill of it in progress now has an
    /// id below the next one `next_fill_id` hands out, and so has every ticket taken.
    pub(crate) fn remove(&self, key_hash: StoreHash, next_fill_id: &AtomicU64) {
        let mut state = self.state();
        let below = next_fill_id.load(Ordering::Relaxed);
        if let Some(pending) = state.keys.get_mut(&key_hash) {
            pending.removed_below = below;
        }
        state.remember(below, Removed::Key(key_hash));
    }

    /// Records a purge: every fill in progress whose key and tags `selector` selects
    /// now has an id below the next one `next_fill_id` hands out, as after a removal of
    /// its key, and so has every ticket taken. Returns how many keys it fenced.
    pub(crate) fn fence_selected(
        &self,
        selector: &PurgeSelector,
        next_fill_id: &AtomicU64,
    ) -> usize {
        let mut state = self.state();
        let below = next_fill_id.load(Ordering::Relaxed);
        let mut fenced = 0;
        for pending in state.keys.values_mut() {
            if selector.matches(&pending.key, &pending.tags) {
                pending.removed_below = below;
                fenced += 1;
            }
        }
        state.remember(below, Removed::Selected(selector.clone()));
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
        key_hash: StoreHash,
        fill: Fill,
        placed: impl FnOnce(),
    ) -> Placed {
        let state = self.state();
        if state
            .keys
            .get(&key_hash)
            .is_some_and(|p| fill.fill_id.0 < p.removed_below)
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

    /// What a fill of `hash`'s key `key` with `tags` is of.
    fn of<'a>(hash: u128, key: &'a str, tags: &'a [String]) -> FillOf<'a> {
        FillOf {
            hash: StoreHash(hash),
            key,
            tags,
        }
    }

    fn registered(began: Began) -> FillId {
        match began {
            Began::Registered(fill_id) => fill_id,
            Began::Fenced => panic!("fenced"),
        }
    }

    #[test]
    fn fills_begun_before_a_removal_lose_and_the_map_empties() {
        let fences = Fences::default();
        let index = Index::new(u64::MAX);
        let next = AtomicU64::new(10);
        let fill = |fill_id| Fill { fill_id, size: 1 };
        // A removal without fills in progress fences no fill in progress.
        fences.remove(StoreHash(1), &next);
        assert!(fences.state().keys.is_empty());
        let now = Fences::ticket(&next);
        let before = registered(fences.begin(of(1, "k1", &[]), now, &next));
        fences.remove(StoreHash(1), &next);
        let after = registered(fences.begin(of(1, "k1", &[]), Fences::ticket(&next), &next));
        assert_eq!(
            fences.place(&index, StoreHash(1), fill(before), || {}),
            Placed::Lost
        );
        assert_eq!(
            fences.place(&index, StoreHash(1), fill(after), || {}),
            Placed::New
        );
        // Other keys are not fenced.
        let other = registered(fences.begin(of(2, "k2", &[]), now, &next));
        assert_eq!(
            fences.place(&index, StoreHash(2), fill(other), || {}),
            Placed::New
        );
        for key in [1, 1, 2] {
            fences.end(StoreHash(key));
        }
        assert!(fences.state().keys.is_empty());
    }

    #[test]
    fn purges_fence_the_fills_they_select_and_no_others() {
        let fences = Fences::default();
        let index = Index::new(u64::MAX);
        let next = AtomicU64::new(10);
        let fill = |fill_id| Fill { fill_id, size: 1 };
        let tagged = ["a".to_owned()];
        let near = ["ab".to_owned()];
        let now = Fences::ticket(&next);
        let a = registered(fences.begin(of(1, "http://h/1", &tagged), now, &next));
        let ab = registered(fences.begin(of(2, "http://h/2", &near), now, &next));
        let tag = PurgeSelector::Tag("a".to_owned());
        assert_eq!(fences.fence_selected(&tag, &next), 1);
        assert_eq!(
            fences.place(&index, StoreHash(1), fill(a), || {}),
            Placed::Lost
        );
        let mut recorded = false;
        assert_eq!(
            fences.place(&index, StoreHash(2), fill(ab), || recorded = true),
            Placed::New
        );
        assert!(recorded, "an indexed fill is recorded under the lock");
    }

    #[test]
    fn a_fill_requested_before_a_purge_that_selects_it_cannot_begin_after_it() {
        let fences = Fences::default();
        let next = AtomicU64::new(10);
        let tagged = ["a".to_owned()];
        let sent = Fences::ticket(&next);
        fences.fence_selected(&PurgeSelector::Tag("a".to_owned()), &next);
        fences.remove(StoreHash(7), &next);
        let begin = |key_hash: StoreHash, key, tags: &[String], ticket| {
            fences.begin(of(key_hash.0, key, tags), ticket, &next)
        };
        assert_eq!(
            begin(StoreHash(1), "http://h/1", &tagged, sent),
            Began::Fenced
        );
        assert_eq!(begin(StoreHash(7), "http://h/7", &[], sent), Began::Fenced);
        let prefix = PurgeSelector::Prefix("http://h/p/".to_owned());
        fences.fence_selected(&prefix, &next);
        assert_eq!(
            begin(StoreHash(3), "http://h/p/3", &[], sent),
            Began::Fenced
        );
        // Not selected, or requested after the purge: it begins.
        assert!(matches!(
            begin(StoreHash(2), "http://h/2", &[], sent),
            Began::Registered(_)
        ));
        let later = Fences::ticket(&next);
        assert!(matches!(
            begin(StoreHash(1), "http://h/1", &tagged, later),
            Began::Registered(_)
        ));
        assert!(fences.state().keys.len() == 2);
    }

    #[test]
    fn a_ticket_older_than_every_remembered_purge_is_fenced() {
        let fences = Fences::default();
        let next = AtomicU64::new(1);
        let old = Fences::ticket(&next);
        for key_hash in 0..RECENT as u128 {
            fences.remove(StoreHash(1000 + key_hash), &next);
        }
        let begin = |ticket| fences.begin(of(5, "http://h/5", &[]), ticket, &next);
        // Every remembered removal selects other keys: the old ticket still begins.
        assert!(matches!(begin(old), Began::Registered(_)));
        fences.remove(StoreHash(99_999), &next);
        // One removal was forgotten: what it selected is no longer known.
        assert_eq!(begin(old), Began::Fenced);
        assert!(matches!(begin(Fences::ticket(&next)), Began::Registered(_)));
    }
}
