//! The settings the estimator compares: what a miniature cache admits, and its small
//! queue's share.

use std::fmt;

use secondhit_store::SMALL_SHARE;

/// One setting of admission and eviction that the estimator models at every size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Candidate {
    /// `second-hit` as `[admission]` configures it, its generations `window` times as long
    /// under `rotate = "auto"` (1: as configured).
    SecondHit {
        /// The multiple of the configured window.
        window: u8,
    },
    /// `second-hit`, and besides a first sight stored with a chance of one in `one_in`:
    /// between `second-hit` and `always`.
    FirstSight {
        /// One first sight in this many is stored.
        one_in: u8,
    },
    /// `always`, its small queue `1 / small_divisor` of the indexed bytes (the store's is
    /// [`SMALL_SHARE`]; a larger share gives an object more time for its second request,
    /// which short reuse distances reward).
    Always {
        /// The small queue's share, as a divisor.
        small_divisor: u8,
    },
}

impl Candidate {
    /// `second-hit` as configured.
    pub const SECOND_HIT: Candidate = Candidate::SecondHit { window: 1 };
    /// `always` over the store's eviction.
    pub const ALWAYS: Candidate = Candidate::Always {
        small_divisor: SMALL_SHARE as u8,
    };

    /// The candidates an estimator models unless told otherwise: the two policies the
    /// proxy runs, a longer window, a quarter of first sights, and `always` with half the
    /// cache on probation.
    pub(crate) const DEFAULT: [Candidate; 5] = [
        Candidate::SECOND_HIT,
        Candidate::SecondHit { window: 2 },
        Candidate::FirstSight { one_in: 4 },
        Candidate::ALWAYS,
        Candidate::Always { small_divisor: 2 },
    ];

    /// Whether it keeps the filters (every candidate but `always`).
    pub(super) fn keeps_filters(self) -> bool {
        !matches!(self, Candidate::Always { .. })
    }

    /// Whether it stores first sights, so that the store keeps its ghost
    /// (`AdmissionPolicy::stores_first_sights`).
    pub(super) fn stores_first_sights(self) -> bool {
        !matches!(self, Candidate::SecondHit { .. })
    }

    /// Its generations' multiple of the configured window.
    pub(super) fn window(self) -> u64 {
        match self {
            Candidate::SecondHit { window } => u64::from(window.max(1)),
            _ => 1,
        }
    }

    /// Its small queue's share, as a divisor.
    pub(super) fn small_divisor(self) -> u64 {
        match self {
            Candidate::Always { small_divisor } => u64::from(small_divisor.max(1)),
            _ => SMALL_SHARE,
        }
    }
}

impl fmt::Display for Candidate {
    /// "second-hit", "second-hit window x2", "first-sight 1/4", "always",
    /// "always small-queue 1/2".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Candidate::SecondHit { window: 0 | 1 } => f.write_str("second-hit"),
            Candidate::SecondHit { window } => write!(f, "second-hit window x{window}"),
            Candidate::FirstSight { one_in } => write!(f, "first-sight 1/{one_in}"),
            Candidate::Always { small_divisor } if u64::from(small_divisor) == SMALL_SHARE => {
                f.write_str("always")
            }
            Candidate::Always { small_divisor } => {
                write!(f, "always small-queue 1/{small_divisor}")
            }
        }
    }
}

impl serde::Serialize for Candidate {
    /// As its name.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
