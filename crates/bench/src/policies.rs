//! The admission policies a bench run compares, and the bench-only reference policy.
//!
//! `auto` is the proxy's: the filter pair run as `second-hit` or `always`, whichever its
//! live estimates choose each epoch. Built here it starts as `second-hit` and stays so:
//! the simulator ends its epochs itself (`simulate`), and `bench` runs the proxy's own
//! epoch task.
//!
//! `exact-second-hit` remembers every key it has ever seen in a hash set — the behaviour
//! of nginx's `proxy_cache_min_uses 2`, which never forgets — so its memory grows with
//! the number of distinct URLs, while the aging pair's is fixed. It exists only here, to
//! show what the pair's bounded memory and its forgetting cost or gain.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use secondhit_admission::{
    self, Admission, AdmissionStats, AdmitReason, Decision, FilterHash, ObjectCount, Pending,
    Policy, PolicyKind, RejectReason,
};
use secondhit_proxy::config::{AdmissionConfig, AdmissionPolicy};

/// Admits a key on its second request, remembering every key forever.
#[derive(Debug, Default)]
pub struct ExactSecondHit {
    /// Every key seen. A mutex is fine here: the reference policy is not what is measured
    /// for speed, and its critical section is one hash-set insert.
    seen: Mutex<HashSet<FilterHash>>,
}

impl Admission for ExactSecondHit {
    fn on_request(&self, hash: FilterHash) -> Pending {
        let newly_inserted = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(hash);
        let planned = if newly_inserted {
            Decision::Reject(RejectReason::FirstSight)
        } else {
            Decision::Admit(AdmitReason::SeenBefore)
        };
        Pending::new(hash, planned)
    }
}

impl AdmissionStats for ExactSecondHit {
    /// The hash table's allocation: one 16-byte key plus one control byte per bucket.
    fn memory_bytes(&self) -> u64 {
        let capacity = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .capacity() as u64;
        capacity * (std::mem::size_of::<FilterHash>() as u64 + 1)
    }

    fn kind(&self) -> PolicyKind {
        PolicyKind::Custom("exact-second-hit")
    }
}

/// The names of the policies a bench run compares, in report order.
pub const POLICY_NAMES: [&str; 4] = ["second-hit", "auto", "always", "exact-second-hit"];

/// A fresh instance of the policy `name` (see [`POLICY_NAMES`]); `second-hit` is sized by
/// `config` as the proxy would size it, with `objects` counting the cache's objects for
/// `rotate = "auto"`. `None` for an unknown name.
pub fn build(name: &str, config: &AdmissionConfig, objects: ObjectCount) -> Option<Policy> {
    match name {
        "second-hit" => Some(secondhit_admission::from_config_counting(
            &AdmissionConfig {
                policy: AdmissionPolicy::SecondHit,
                ..config.clone()
            },
            objects,
        )),
        "auto" => Some(secondhit_admission::auto_counting(config, objects).0),
        "always" => Some(Policy::new(Arc::new(secondhit_admission::AlwaysAdmit))),
        "exact-second-hit" => Some(Policy::new(Arc::new(ExactSecondHit::default()))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_policy_admits_the_second_request_and_never_forgets() {
        let policy = ExactSecondHit::default();
        for key in 0..10_000u128 {
            assert_eq!(
                secondhit_admission::decide(&policy, FilterHash(key)),
                Decision::Reject(RejectReason::FirstSight)
            );
        }
        for key in 0..10_000u128 {
            assert!(secondhit_admission::decide(&policy, FilterHash(key)).is_admit());
        }
        assert!(policy.memory_bytes() >= 10_000 * 17);
    }

    #[test]
    fn every_named_policy_builds() {
        let config = AdmissionConfig::default();
        for name in POLICY_NAMES {
            assert_eq!(
                build(name, &config, Arc::new(|| 0)).map(|p| p.stats.kind().as_str()),
                Some(name)
            );
        }
        assert!(build("nope", &config, Arc::new(|| 0)).is_none());
    }
}
