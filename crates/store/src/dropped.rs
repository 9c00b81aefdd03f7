//! Fills that began but never became entries, counted by why.
//!
//! `Cache-Status: stored` is sent when a fill begins, before its body arrived; a fill
//! can still end without an entry. Each such ending is counted here by its
//! [`FillDrop`] reason, so the gap between `stored` answers and committed fills is
//! explained rather than only logged. The ending is counted where it happens: by
//! [`EntryWriter::abandon`](super::EntryWriter::abandon) with the reason its owner
//! gives, or by a failed [`EntryWriter::finish`](super::EntryWriter::finish). Not
//! counted: a fill that committed but lost to a newer fill of its key (it did its job),
//! and a writer dropped any other way (the runtime shutting down mid-fill).

use std::sync::atomic::{AtomicU64, Ordering};

use super::StoreError;
use super::space::Trouble;

/// Why a fill that began was dropped without becoming an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillDrop {
    /// The response to the client was dropped before the origin's body ended, taking
    /// the fill with it: the client went away while `cache.max_orphan_fills` fills
    /// already ran on without theirs (or it is zero). Expected.
    ClientGone,
    /// The origin's body failed (reset, between-bytes timeout) or ended short of its
    /// declared length.
    OriginError,
    /// The disk writer fell more than the tee's buffer behind the client; the client is
    /// never slowed down for the disk.
    DiskBehind,
    /// A body without a declared length grew past `cache.max_object_size`. Expected: the
    /// size is only known as the body arrives.
    TooLarge,
    /// `cache.max_size` had no room for the growing body beside other fills' reservations.
    NoSpace,
    /// Writing or committing the entry file failed.
    StoreError,
    /// The cache's filesystem ran out of space or inodes mid-fill (`ENOSPC`, `EDQUOT`),
    /// or a growing body would have taken it below `cache.min_free`.
    DiskFull,
    /// A body without a declared length outgrew what is left of the minute's write
    /// budget (`admission.max_write_rate`). Expected while the budget is spent.
    WriteBudget,
    /// The store closed for a hand-over of the cache directory (a binary upgrade) before
    /// the fill could commit. Expected during an upgrade.
    Handover,
}

impl FillDrop {
    /// Every reason, in declaration order (a counter set indexes by `reason as usize`).
    pub const ALL: [FillDrop; 9] = [
        FillDrop::ClientGone,
        FillDrop::OriginError,
        FillDrop::DiskBehind,
        FillDrop::TooLarge,
        FillDrop::NoSpace,
        FillDrop::StoreError,
        FillDrop::DiskFull,
        FillDrop::WriteBudget,
        FillDrop::Handover,
    ];

    /// A short token for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            FillDrop::ClientGone => "client-gone",
            FillDrop::OriginError => "origin-error",
            FillDrop::DiskBehind => "disk-behind",
            FillDrop::TooLarge => "too-large",
            FillDrop::NoSpace => "no-space",
            FillDrop::StoreError => "store-error",
            FillDrop::DiskFull => "disk-full",
            FillDrop::WriteBudget => "write-budget",
            FillDrop::Handover => "handover",
        }
    }

    /// Whether this ending is a normal part of serving (logged at debug) rather than
    /// something an operator should see (logged at warn).
    pub fn is_expected(self) -> bool {
        matches!(
            self,
            FillDrop::ClientGone | FillDrop::TooLarge | FillDrop::WriteBudget | FillDrop::Handover
        )
    }

    /// The reason a store error ends a fill with.
    pub fn of(error: &StoreError) -> FillDrop {
        match error {
            StoreError::TooLarge { .. } => FillDrop::TooLarge,
            StoreError::NoSpace { .. } => FillDrop::NoSpace,
            StoreError::WriteBudget { .. } => FillDrop::WriteBudget,
            StoreError::Closed => FillDrop::Handover,
            // The body the origin sent is not the one it declared.
            StoreError::LengthMismatch { .. } => FillDrop::OriginError,
            error if error.trouble() == Some(Trouble::NoSpace) => FillDrop::DiskFull,
            _ => FillDrop::StoreError,
        }
    }
}

/// The live counters, one per [`FillDrop`]; Relaxed: plain counters.
#[derive(Debug, Default)]
pub(super) struct FillDrops([AtomicU64; FillDrop::ALL.len()]);

impl FillDrops {
    /// Counts one fill dropped for `reason`.
    pub(super) fn count(&self, reason: FillDrop) {
        self.0[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub(super) fn snapshot(&self) -> DroppedFills {
        DroppedFills(self.0.each_ref().map(|c| c.load(Ordering::Relaxed)))
    }
}

/// Fills dropped since the store opened, by reason (see [`StoreStats`](super::StoreStats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DroppedFills([u64; FillDrop::ALL.len()]);

impl DroppedFills {
    /// Fills dropped for `reason`.
    pub fn get(&self, reason: FillDrop) -> u64 {
        self.0[reason as usize]
    }

    /// Fills dropped for any reason.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Each reason with its count, in [`FillDrop::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (FillDrop, u64)> + '_ {
        FillDrop::ALL
            .into_iter()
            .map(|reason| (reason, self.get(reason)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Marks the slot of `reason` in `seen`: one arm and one slot per reason, no
    /// wildcard. A new reason does not compile until it gets an arm here; a new slot
    /// index does not compile (`unconditional_panic`) until `seen` grows; and then
    /// `all_lists_every_reason_in_counter_order` fails until `FillDrop::ALL` holds it.
    fn mark(reason: FillDrop, seen: &mut [bool; 9]) {
        match reason {
            FillDrop::ClientGone => seen[0] = true,
            FillDrop::OriginError => seen[1] = true,
            FillDrop::DiskBehind => seen[2] = true,
            FillDrop::TooLarge => seen[3] = true,
            FillDrop::NoSpace => seen[4] = true,
            FillDrop::StoreError => seen[5] = true,
            FillDrop::DiskFull => seen[6] = true,
            FillDrop::WriteBudget => seen[7] = true,
            FillDrop::Handover => seen[8] = true,
        }
    }

    #[test]
    fn all_lists_every_reason_in_counter_order() {
        let mut seen = [false; 9];
        for (place, reason) in FillDrop::ALL.into_iter().enumerate() {
            mark(reason, &mut seen);
            // The counters index by discriminant: ALL must follow the declaration.
            assert_eq!(reason as usize, place, "{reason:?}");
        }
        assert!(
            seen.iter().all(|&s| s),
            "a reason is missing from ALL: {seen:?}"
        );
        let tokens: HashSet<&str> = FillDrop::ALL.into_iter().map(FillDrop::as_str).collect();
        assert_eq!(
            tokens.len(),
            FillDrop::ALL.len(),
            "two reasons share a token"
        );
    }

    #[test]
    fn counts_each_reason_on_its_own() {
        let drops = FillDrops::default();
        drops.count(FillDrop::OriginError);
        drops.count(FillDrop::OriginError);
        drops.count(FillDrop::ClientGone);
        let seen = drops.snapshot();
        assert_eq!(seen.get(FillDrop::OriginError), 2);
        assert_eq!(seen.get(FillDrop::ClientGone), 1);
        assert_eq!(seen.get(FillDrop::DiskBehind), 0);
        assert_eq!(seen.total(), 3);
        assert_eq!(seen.iter().map(|(_, n)| n).sum::<u64>(), 3);
    }
}
