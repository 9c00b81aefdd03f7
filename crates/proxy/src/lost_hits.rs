//! The hits second-hit would have lost, in shadow mode (`admission.policy = "shadow"`).
//!
//! An entry stored at a shadowed first sight (`Admit(Shadowed(_))`) is one second-hit would
//! not have stored. Its first hit would then have been a miss — which second-hit, having
//! seen the key, would have stored — so exactly that first hit is lost, and from then on
//! the entry is one second-hit would have too. [`LostHits`] keeps the store hashes of such
//! entries in a set (the *ledger*): a fill under a shadowed first sight adds its entry, any
//! other fill of the entry removes it (second-hit would have stored that fill as well), and
//! the entry's first use from storage removes it, counting a lost hit when that use was a
//! hit.
//!
//! The ledger is here, not in the admission policy, because it names store entries: the
//! admission crate sees only filter hashes (see "Two hashes" in `docs/design.md`). The
//! policy's decisions say what second-hit would have done; this module remembers which
//! entries they were about.
//!
//! Entries the store evicts or invalidates before their first hit would stay in the set
//! forever, so the set is swept: when it has grown to twice its size after the last sweep
//! (and at least [`SWEEP_FLOOR`] entries), every hash the store no longer holds
//! ([`Stored`]) is dropped. After a sweep the set holds only entries in the store, so
//! it never holds much more than twice the store's object count, and the sweeps cost
//! amortised O(1) per insert.
//!
//! The set sits behind a mutex, taken once per fill and once per hit — in shadow mode only:
//! under the other policies the live snapshot holds no ledger.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use foldhash::quality::RandomState;

use crate::admission::settings::AdmissionPolicy;
use crate::admission::{AdmitReason, Decision};
use crate::store::{Store, StoreHash};

/// The ledger is not swept below this many entries.
const SWEEP_FLOOR: usize = 4096;

/// Whether the store still holds an entry, by its store hash (`Store::contains`).
type Stored = Box<dyn Fn(StoreHash) -> bool + Send + Sync>;

/// The entries second-hit would not have stored, until their first use: see the module
/// docs.
pub(crate) struct LostHits {
    /// Store hashes of entries stored at a shadowed first sight and not used since.
    ledger: Mutex<Ledger>,
    /// Asks the store whether an entry is still there (for the sweeps).
    stored: Stored,
}

/// The set of entries second-hit would not have, and when to sweep it next.
struct Ledger {
    entries: HashSet<StoreHash, RandomState>,
    /// Sweep once the set reaches this size.
    sweep_at: usize,
}

impl LostHits {
    /// A ledger for `policy` over `store`: one under `shadow` only, the one policy whose
    /// decisions say what second-hit would have done.
    pub(crate) fn for_policy(policy: AdmissionPolicy, store: &Arc<Store>) -> Option<Arc<LostHits>> {
        if policy != AdmissionPolicy::Shadow {
            return None;
        }
        // Weak: the ledger lives as long as the proxy, which must not keep the store (and
        // its directory lock) alive by itself.
        let store: Weak<Store> = Arc::downgrade(store);
        let stored = move |entry| store.upgrade().is_some_and(|s| s.contains(entry));
        Some(Arc::new(LostHits::new(Box::new(stored))))
    }

    /// An empty ledger, asking `stored` whether entries are still stored.
    fn new(stored: Stored) -> LostHits {
        LostHits {
            ledger: Mutex::new(Ledger {
                entries: HashSet::default(),
                sweep_at: SWEEP_FLOOR,
            }),
            stored,
        }
    }

    /// A fill of the entry `entry` began under `decision`.
    pub(crate) fn note_fill(&self, entry: StoreHash, decision: Decision) {
        let mut ledger = self.ledger();
        if !matches!(decision, Decision::Admit(AdmitReason::Shadowed(_))) {
            ledger.entries.remove(&entry);
            return;
        }
        ledger.entries.insert(entry);
        if ledger.entries.len() >= ledger.sweep_at {
            let stored = &self.stored;
            ledger.entries.retain(|&entry| stored(entry));
            ledger.sweep_at = (2 * ledger.entries.len()).max(SWEEP_FLOOR);
        }
    }

    /// The entry `entry` answered a request. True when second-hit would not have had the
    /// entry — a hit lost — after which the entry counts as one it has.
    pub(crate) fn note_served(&self, entry: StoreHash) -> bool {
        self.ledger().entries.remove(&entry)
    }

    /// Entries stored at a shadowed first sight and not used since (for tests).
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.ledger().entries.len()
    }

    /// The ledger; a poisoned lock only means a thread panicked between two set operations,
    /// each of which leaves the set consistent.
    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::admission::RejectReason;

    const SHADOWED: Decision = Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight));

    #[test]
    fn only_the_first_use_of_a_shadowed_entry_is_a_lost_hit() {
        let lost = LostHits::new(Box::new(|_| true));
        lost.note_fill(StoreHash(1), SHADOWED);
        lost.note_fill(StoreHash(2), Decision::Admit(AdmitReason::SeenBefore));
        assert!(lost.note_served(StoreHash(1)));
        assert!(
            !lost.note_served(StoreHash(1)),
            "from then on second-hit has it too"
        );
        assert!(!lost.note_served(StoreHash(2)));
        // A later fill of the entry under a seen key takes it off the ledger.
        lost.note_fill(StoreHash(3), SHADOWED);
        lost.note_fill(StoreHash(3), Decision::Admit(AdmitReason::AlreadyStored));
        assert!(!lost.note_served(StoreHash(3)));
    }

    #[test]
    fn sweeps_drop_entries_the_store_no_longer_holds() {
        let keep = Arc::new(AtomicBool::new(true));
        let flag = keep.clone();
        let lost = LostHits::new(Box::new(move |entry: StoreHash| {
            entry.0 < 10 || flag.load(Ordering::Relaxed)
        }));
        for entry in 0..(SWEEP_FLOOR as u128 - 1) {
            lost.note_fill(StoreHash(entry), SHADOWED);
        }
        // Everything evicted but the first ten: the next insert sweeps.
        keep.store(false, Ordering::Relaxed);
        lost.note_fill(StoreHash(u128::MAX), SHADOWED);
        assert_eq!(lost.pending(), 10);
        assert!(lost.note_served(StoreHash(3)));
    }
}
