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
//! An entry stored at a shadowed first sight is one second-hit would not have stored, so
//! its first hit is one second-hit would have lost. Counting those needs the store's
//! names for entries, which this crate never sees: the proxy keeps that ledger, keyed by
//! store hash and fed with the decisions this policy makes (`secondhit_proxy`'s
//! `lost_hits`). This policy only decides, and counts its fills for `rotate = "auto"`.
//! Shadow mode is for measuring, before switching to second-hit, what it would change.

use std::sync::Arc;

use super::{
    Admission, AdmissionStats, AdmitReason, AgingPair, Decision, FilterHash, PairStats, Pending,
    PolicyKind,
};
use crate::settings::AdmissionPolicy;

/// `policy = "shadow"`: see the module docs.
pub struct Shadow {
    /// The pair second-hit would consult; it records every key as it would.
    pair: Arc<AgingPair>,
}

impl Shadow {
    /// A shadow policy around `pair`.
    pub fn new(pair: Arc<AgingPair>) -> Shadow {
        Shadow { pair }
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

    /// The pair counts the fills second-hit would have made too (`rotate = "auto"`).
    fn note_fill(&self, decision: Decision) {
        self.pair.note_fill(decision);
    }
}

impl AdmissionStats for Shadow {
    /// The pair's memory (the proxy's ledger of lost hits is its own).
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
    use std::time::{Duration, Instant};

    use super::*;
    use crate::{FilterParams, RejectReason, Rotation, decide};

    fn shadow() -> Shadow {
        let params = FilterParams::for_expected_keys(1_000, 0.01);
        let pair = AgingPair::new(
            params,
            Duration::from_secs(60),
            Rotation::Fill,
            Instant::now(),
        );
        Shadow::new(Arc::new(pair))
    }

    const SHADOWED: Decision = Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight));

    #[test]
    fn admits_everything_and_says_what_second_hit_would_have_done() {
        let policy = shadow();
        assert_eq!(decide(&policy, FilterHash(7)), SHADOWED);
        assert_eq!(
            decide(&policy, FilterHash(7)),
            Decision::Admit(AdmitReason::SeenBefore)
        );
        assert_eq!(policy.kind(), AdmissionPolicy::Shadow.into());
        assert!(policy.filter_stats().is_some());
        assert_eq!(policy.rotate(), Some(1));
    }
}
