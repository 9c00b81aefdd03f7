//! Shadow mode (`admission.policy = "shadow"`): store like `always`, and count what
//! second-hit would have done.
//!
//! [`Shadow`] runs the aging pair exactly as `second-hit` would (same sizing, rotation and
//! snapshots: it is the same [`AgingPair`]) on every request, but admits every storable
//! response. Its decision says what the pair thought: `Admit(SeenBefore)` when the pair had
//! seen the key, `Admit(Shadowed(FirstSight))` when second-hit would have kept the response
//! off the disk. The proxy counts the second kind as writes second-hit would have avoided.
//!
//! # Hits second-hit would have lost
//!
//! An entry stored at a shadowed first sight is one second-hit would not have stored. Its
//! first hit would then have been a miss — which second-hit, having seen the key, would have
//! stored — so exactly that first hit is lost, and from then on the entry is one second-hit
//! would have too. The policy keeps the store hashes of such entries in a set (the
//! *ledger*): a fill under a shadowed first sight adds its entry, any other fill of the
//! entry removes it (second-hit would have stored that fill as well), and the entry's first
//! use from storage removes it, counting a lost hit when that use was a hit.
//!
//! Entries the store evicts or invalidates before their first hit would stay in the set
//! forever, so the set is swept: when it has grown to twice its size after the last sweep
//! (and at least [`SWEEP_FLOOR`] entries), every hash the store no longer holds
//! ([`StoredCheck`]) is dropped. After a sweep the set holds only entries in the store, so
//! it never holds much more than twice the store's object count, and the sweeps cost
//! amortised O(1) per insert.
//!
//! The set sits behind a mutex, taken once per fill and once per hit — in shadow mode only:
//! the other policies keep no ledger and their [`Admission::note_served`] is a no-op.
//! Shadow mode is for measuring, before switching to second-hit, what it would change.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    Admission, AdmissionStats, AdmitReason, AgingPair, Decision, FilterHash, PairStats, Pending,
    PolicyKind,
};
use crate::settings::AdmissionPolicy;

/// Whether the store still holds an entry, by its store hash (`Store::contains`).
pub type StoredCheck = Arc<dyn Fn(u128) -> bool + Send + Sync>;

/// The ledger is not swept below this many entries.
const SWEEP_FLOOR: usize = 4096;

/// `policy = "shadow"`: see the module docs.
pub struct Shadow {
    /// The pair second-hit would consult; it records every key as it would.
    pair: Arc<AgingPair>,
    /// Store hashes of entries stored at a shadowed first sight and not used since.
    ledger: Mutex<Ledger>,
    /// Asks the store whether an entry is still there (for the sweeps).
    stored: StoredCheck,
}

/// The set of entries second-hit would not have, and when to sweep it next.
struct Ledger {
    entries: HashSet<u128>,
    /// Sweep once the set reaches this size.
    sweep_at: usize,
}

impl Shadow {
    /// A shadow policy around `pair`, asking `stored` whether entries are still stored.
    pub fn new(pair: Arc<AgingPair>, stored: StoredCheck) -> Shadow {
        Shadow {
            pair,
            ledger: Mutex::new(Ledger {
                entries: HashSet::new(),
                sweep_at: SWEEP_FLOOR,
            }),
            stored,
        }
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

impl Admission for Shadow {
    /// The pair's check and record; a rejection becomes an admission that says so. The
    /// response changes nothing of it (the default `on_response`).
    fn on_request(&self, hash: FilterHash) -> Pending {
        Pending::new(hash, shadowed(self.pair.check_and_record(hash)))
    }

    fn on_request_at(&self, hash: FilterHash, now: std::time::Instant) -> Pending {
        Pending::new(hash, shadowed(self.pair.check_and_record_at(hash, now)))
    }

    fn prefetch(&self, hash: FilterHash) {
        self.pair.prefetch(hash);
    }

    fn note_fill(&self, entry: u128, decision: Decision) {
        // The pair counts the fills second-hit would have made too (`rotate = "auto"`).
        self.pair.note_fill(entry, decision);
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

    fn note_served(&self, entry: u128) -> bool {
        self.ledger().entries.remove(&entry)
    }
}

impl AdmissionStats for Shadow {
    /// The pair's memory; the ledger is not counted (it is bounded by the store's objects).
    fn memory_bytes(&self) -> u64 {
        self.pair.memory_bytes()
    }

    fn kind(&self) -> PolicyKind {
        AdmissionPolicy::Shadow.into()
    }

    fn filter_stats(&self) -> Option<PairStats> {
        self.pair.filter_stats()
    }

    fn rotate(&self) -> Option<u64> {
        Some(self.pair.force_rotation())
    }
}

/// What a shadow policy answers for the pair's `decision`: always an admission.
fn shadowed(decision: Decision) -> Decision {
    match decision {
        Decision::Reject(reason) => Decision::Admit(AdmitReason::Shadowed(reason)),
        admit => admit,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::{FilterParams, RejectReason, Rotation, decide};

    fn shadow(stored: StoredCheck) -> Shadow {
        let params = FilterParams::for_expected_keys(1_000, 0.01);
        let pair = AgingPair::new(
            params,
            Duration::from_secs(60),
            Rotation::Fill,
            Instant::now(),
        );
        Shadow::new(Arc::new(pair), stored)
    }

    const SHADOWED: Decision = Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight));

    #[test]
    fn admits_everything_and_says_what_second_hit_would_have_done() {
        let policy = shadow(Arc::new(|_| true));
        assert_eq!(decide(&policy, FilterHash(7)), SHADOWED);
        assert_eq!(
            decide(&policy, FilterHash(7)),
            Decision::Admit(AdmitReason::SeenBefore)
        );
        assert_eq!(policy.kind(), AdmissionPolicy::Shadow.into());
        assert!(policy.filter_stats().is_some());
        assert_eq!(policy.rotate(), Some(1));
    }

    #[test]
    fn only_the_first_use_of_a_shadowed_entry_is_a_lost_hit() {
        let policy = shadow(Arc::new(|_| true));
        policy.note_fill(1, SHADOWED);
        policy.note_fill(2, Decision::Admit(AdmitReason::SeenBefore));
        assert!(policy.note_served(1));
        assert!(!policy.note_served(1), "from then on second-hit has it too");
        assert!(!policy.note_served(2));
        // A later fill of the entry under a seen key takes it off the ledger.
        policy.note_fill(3, SHADOWED);
        policy.note_fill(3, Decision::Admit(AdmitReason::AlreadyStored));
        assert!(!policy.note_served(3));
    }

    #[test]
    fn sweeps_drop_entries_the_store_no_longer_holds() {
        let keep = Arc::new(AtomicBool::new(true));
        let flag = keep.clone();
        let policy = shadow(Arc::new(move |entry| {
            entry < 10 || flag.load(Ordering::Relaxed)
        }));
        for entry in 0..(SWEEP_FLOOR as u128 - 1) {
            policy.note_fill(entry, SHADOWED);
        }
        // Everything evicted but the first ten: the next insert sweeps.
        keep.store(false, Ordering::Relaxed);
        policy.note_fill(u128::MAX, SHADOWED);
        assert_eq!(policy.pending(), 10);
        assert!(policy.note_served(3));
    }
}
