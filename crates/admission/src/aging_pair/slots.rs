//! The small records the pair coordinates through: the packed state word, per-generation
//! slots and per-filter states. See the module docs of the pair for how they are used.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Which filter plays which role in which generation; packed into one `AtomicU64` as
/// `number << 4 | current << 2 | previous` (previous `3`: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct State {
    /// Generation number.
    pub number: u64,
    /// Index of the current filter (0..3).
    pub current: usize,
    /// Index of the previous filter, if any.
    pub previous: Option<usize>,
}

/// The packed value of "no previous filter".
const NO_PREVIOUS: u64 = 3;

impl State {
    pub(super) fn pack(self) -> u64 {
        let previous = self.previous.map_or(NO_PREVIOUS, |p| p as u64);
        (self.number << 4) | ((self.current as u64) << 2) | previous
    }

    pub(super) fn unpack(word: u64) -> State {
        let previous = word & 3;
        State {
            number: word >> 4,
            current: ((word >> 2) & 3) as usize,
            previous: (previous != NO_PREVIOUS).then_some(previous as usize),
        }
    }
}

/// Where a filter is in its life. Moves `InUse → Retired → Clearing → Clean → InUse`; the
/// step into `Clearing` is a compare-and-swap, so one thread clears a retired filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum FilterState {
    /// Current or previous in the live generation (or about to be).
    InUse = 0,
    /// Dropped by a rotation; its bits are stale.
    Retired = 1,
    /// Being cleared by the thread that claimed it.
    Clearing = 2,
    /// All zero, ready to become current.
    Clean = 3,
}

impl From<u8> for FilterState {
    fn from(value: u8) -> FilterState {
        match value {
            0 => FilterState::InUse,
            1 => FilterState::Retired,
            2 => FilterState::Clearing,
            _ => FilterState::Clean,
        }
    }
}

/// One generation's start, target, count of new keys and count of fills. Four slots take turns
/// (`number % 4`), so a check that loaded a generation a rotation or two ago still finds
/// that generation's slot.
#[derive(Default)]
pub(super) struct Slot {
    /// `number + 1` of the generation that claimed the slot last (0: none yet).
    claimed: AtomicU64,
    /// `number + 1` once `start` and `target` are written for it (release).
    ready: AtomicU64,
    /// When the generation began, in nanoseconds from the pair's epoch.
    pub start: AtomicI64,
    /// New keys the generation takes before a fill rotation.
    pub target: AtomicU64,
    /// The age, in nanoseconds, before which reaching `target` does not end the generation
    /// (`rotate = "auto"`'s hold against bursts; 0: none). Written with `start` and `target`.
    pub hold: AtomicI64,
    /// New keys counted so far.
    pub inserts: AtomicU64,
    /// Disk writes the generation's admissions led to so far (see `auto`).
    pub fills: AtomicU64,
}

impl Slot {
    /// `(start, target)` if the slot has been written for generation `number`.
    pub(super) fn ready_for(&self, number: u64) -> Option<(i64, u64)> {
        (self.ready.load(Ordering::Acquire) == number + 1).then(|| {
            (
                self.start.load(Ordering::Relaxed),
                self.target.load(Ordering::Relaxed),
            )
        })
    }

    /// Writes the slot for `number` whatever it held (construction and restore, before any
    /// check runs).
    pub(super) fn fill(&self, number: u64, start: i64, target: u64, inserts: u64) {
        self.claimed.store(number + 1, Ordering::Relaxed);
        // No hold: a generation installed directly has no predecessor of this run whose
        // length would measure a burst.
        self.write(number, start, target, 0, inserts);
    }

    /// Forgets which generation the slot was for (restore, before any check runs).
    pub(super) fn reset(&self) {
        self.claimed.store(0, Ordering::Relaxed);
        self.ready.store(0, Ordering::Release);
    }

    /// Claims the slot for generation `number` and writes it (start `start`, target and hold
    /// from `target`, no inserts). True if the slot is now for `number` — written here, or being
    /// written by another thread rotating to the same generation; false if a newer generation
    /// holds it (the caller's view of the pair is at least four rotations old).
    pub(super) fn claim_and_fill(
        &self,
        number: u64,
        start: i64,
        target: impl FnOnce() -> (u64, i64),
    ) -> bool {
        let mine = number + 1;
        let mut seen = self.claimed.load(Ordering::Acquire);
        loop {
            if seen == mine {
                return true;
            }
            if seen > mine {
                return false;
            }
            match self.claimed.compare_exchange_weak(
                seen,
                mine,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => seen = actual,
            }
        }
        let (target, hold) = target();
        self.write(number, start, target, hold, 0);
        true
    }

    fn write(&self, number: u64, start: i64, target: u64, hold: i64, inserts: u64) {
        self.start.store(start, Ordering::Relaxed);
        self.target.store(target, Ordering::Relaxed);
        self.hold.store(hold, Ordering::Relaxed);
        self.inserts.store(inserts, Ordering::Relaxed);
        self.fills.store(0, Ordering::Relaxed);
        self.ready.store(number + 1, Ordering::Release);
    }
}
