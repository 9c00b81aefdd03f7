//! `admission.policy = "auto"`: the filter pair of `second-hit`, run as `second-hit` or as
//! `always`, whichever the live estimates (`tuning`) say misses least.
//!
//! [`Auto`] records every key in the pair in both modes, so a switch back to
//! `second-hit` finds the filters warm; only what a first sight is answered changes. The
//! mode is one atomic word, which the server's epoch task sets ([`Auto::set_mode`]) and
//! every request reads. Its decisions say what made them — a first sight stored because
//! `always` runs (`auto-always`), a key seen before (`auto-seen-before`, in either mode),
//! a first sight not stored (`auto-first-sight`) — so `Cache-Status` and the metrics tell
//! them from a fixed policy's, and a site's rule `admission = "second-hit"` can still
//! obey the filters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::{
    Admission, AdmissionStats, AdmitReason, AgingPair, Decision, FilterHash, PairStats, Pending,
    PolicyKind, RejectReason,
};
use crate::settings::AdmissionPolicy;

/// What `auto` runs now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoMode {
    /// Store on the second request, as `second-hit`.
    SecondHit,
    /// Store every storable response, as `always`.
    Always,
}

impl AutoMode {
    /// The policy's name: "second-hit" or "always".
    pub fn as_str(self) -> &'static str {
        match self {
            AutoMode::SecondHit => "second-hit",
            AutoMode::Always => "always",
        }
    }
}

/// `policy = "auto"`: see the module docs.
pub struct Auto {
    /// The pair `second-hit` would consult; it records every key in either mode.
    pair: Arc<AgingPair>,
    /// Whether it runs `always` now.
    always: AtomicBool,
}

impl Auto {
    /// An `auto` policy around `pair`, starting as `second-hit` (the estimates have no
    /// traffic yet).
    pub fn new(pair: Arc<AgingPair>) -> Auto {
        Auto {
            pair,
            always: AtomicBool::new(false),
        }
    }

    /// Runs `mode` from the next request on.
    pub fn set_mode(&self, mode: AutoMode) {
        self.always.store(mode == AutoMode::Always, Relaxed);
    }

    /// The mode it runs now.
    pub fn mode(&self) -> AutoMode {
        match self.always.load(Relaxed) {
            true => AutoMode::Always,
            false => AutoMode::SecondHit,
        }
    }

    /// The pair's `decision` under the mode now.
    fn under_mode(&self, decision: Decision) -> Decision {
        // A seen key is admitted in either mode, and says so: a site's rule
        // `admission = "second-hit"` obeys the filters whatever mode runs.
        match (decision, self.mode()) {
            (Decision::Admit(_), _) => Decision::Admit(AdmitReason::AutoSeenBefore),
            (Decision::Reject(_), AutoMode::Always) => Decision::Admit(AdmitReason::AutoAlways),
            (Decision::Reject(_), AutoMode::SecondHit) => {
                Decision::Reject(RejectReason::AutoFirstSight)
            }
        }
    }
}

impl Admission for Auto {
    fn on_request(&self, hash: FilterHash) -> Pending {
        Pending::new(hash, self.under_mode(self.pair.check_and_record(hash)))
    }

    fn on_request_at(&self, hash: FilterHash, now: std::time::Instant) -> Pending {
        Pending::new(
            hash,
            self.under_mode(self.pair.check_and_record_at(hash, now)),
        )
    }

    fn prefetch(&self, hash: FilterHash) {
        self.pair.prefetch(hash);
    }

    /// The pair counts the fills of keys it had seen (`rotate = "auto"`), in either mode;
    /// a fill under `always` may be a first sight, which the pair does not count.
    fn note_fill(&self, decision: Decision) {
        if decision == Decision::Admit(AdmitReason::AutoSeenBefore) {
            self.pair
                .note_fill(Decision::Admit(AdmitReason::SeenBefore));
        }
    }
}

impl AdmissionStats for Auto {
    fn memory_bytes(&self) -> u64 {
        self.pair.memory_bytes()
    }

    fn kind(&self) -> PolicyKind {
        AdmissionPolicy::Auto.into()
    }

    fn filter_stats(&self) -> Option<PairStats> {
        self.pair.filter_stats()
    }

    fn rotate(&self) -> Option<u64> {
        Some(self.pair.force_rotation())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::{FilterParams, Rotation, decide};

    #[test]
    fn records_in_both_modes_and_names_the_mode_in_its_decisions() {
        let params = FilterParams::for_expected_keys(1_000, 0.01);
        let pair = AgingPair::new(
            params,
            Duration::from_secs(60),
            Rotation::Fill,
            Instant::now(),
        );
        let auto = Auto::new(Arc::new(pair));
        assert_eq!(
            decide(&auto, FilterHash(1)),
            Decision::Reject(RejectReason::AutoFirstSight)
        );
        auto.set_mode(AutoMode::Always);
        assert_eq!(auto.mode(), AutoMode::Always);
        assert_eq!(
            decide(&auto, FilterHash(2)),
            Decision::Admit(AdmitReason::AutoAlways)
        );
        // Key 1 was seen: under `always` too it says so.
        assert_eq!(
            decide(&auto, FilterHash(1)),
            Decision::Admit(AdmitReason::AutoSeenBefore)
        );
        // Key 2 was recorded while `always` ran: back under second-hit it is known.
        auto.set_mode(AutoMode::SecondHit);
        assert_eq!(
            decide(&auto, FilterHash(2)),
            Decision::Admit(AdmitReason::AutoSeenBefore)
        );
        assert_eq!(
            decide(&auto, FilterHash(3)),
            Decision::Reject(RejectReason::AutoFirstSight)
        );
        assert_eq!(auto.kind(), PolicyKind::Configured(AdmissionPolicy::Auto));
        assert!(auto.filter_stats().is_some());
    }
}
