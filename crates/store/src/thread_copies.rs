//! Each thread's own copies of the few small entries it hits most, so that a key every
//! worker hits does not move cache lines between cores on every hit.
//!
//! A hit from the memory tier clones the entry's reference counts (the entry, its body,
//! each stored header value it copies into the response) and drops them again. When
//! every worker hits the same key, each of those writes takes the line from the core
//! that wrote it last, and a hot object costs more CPU per hit with more workers
//! (`benches/RESULTS.md`, "vs_nginx.sh on 16 CPUs"). A thread that
//! served a key from the memory tier several times in a row keeps an unshared copy
//! ([`HotEntry::unshared`]) in one of [`SLOTS`] slots and serves from it; only bodies
//! up to [`COPY_MAX`] bytes, so a thread holds at most about `SLOTS * COPY_MAX` bytes.
//!
//! A copy is the memory tier's entry of the same fill, so it is served only under the
//! rules a tier entry is: the caller passes the fill the index names, and the copy must
//! be of it. A change that keeps the fill (a metadata update) or drops the tier's entry
//! raises the key's *stamp* after dropping it ([`Stamps::bump`]); a copy carries the
//! stamp read before the tier's entry was, and serves only while it is unchanged. So a
//! copy made from an entry the tier was about to drop carries the stamp from before the
//! drop's raise and is never served after the drop.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::hot::HotEntry;
use crate::{FillRef, StoreHash};

/// Copies one thread keeps (direct-mapped by key hash).
pub(super) const SLOTS: usize = 32;
/// Bodies longer than this are not copied: with a body that large, the counts a hit
/// writes cost little beside sending it, and larger bodies are held as sealed memory
/// files, which a copy would not be.
pub(super) const COPY_MAX: usize = 16 * 1024;
/// Lookups of one key in a row on one slot that earn it a copy: a copy costs
/// allocations, worth it only for a key hit often.
const REPEATS: u8 = 8;
/// Stamps, each shared by the keys whose hashes fall on it.
const STAMPS: usize = 1024;

/// Identifies a memory tier, so that a thread never serves a copy from another store's
/// tier (a reload may open a new one).
static NEXT_TIER: AtomicU64 = AtomicU64::new(1);

/// The stamps of one memory tier's keys.
pub(super) struct Stamps {
    tier: u64,
    stamps: Box<[AtomicU64]>,
}

impl Stamps {
    /// Stamps for a new memory tier.
    pub(super) fn new() -> Stamps {
        Stamps {
            tier: NEXT_TIER.fetch_add(1, Ordering::Relaxed),
            stamps: (0..STAMPS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn of(&self, key_hash: StoreHash) -> &AtomicU64 {
        // The high half: the low bits pick the index's and the tier's shards.
        &self.stamps[(key_hash.0 >> 64) as usize % STAMPS]
    }

    /// The stamp of `key_hash`, read before the tier's entry is.
    pub(super) fn read(&self, key_hash: StoreHash) -> u64 {
        // SeqCst with `bump`: see the module's comment.
        self.of(key_hash).load(Ordering::SeqCst)
    }

    /// Makes every copy of `key_hash` unservable; call after the tier's entry is dropped.
    pub(super) fn bump(&self, key_hash: StoreHash) {
        self.of(key_hash).fetch_add(1, Ordering::SeqCst);
    }
}

/// A thread's copy of one entry.
struct ThreadCopy {
    /// The tier it was copied from.
    tier: u64,
    key_hash: StoreHash,
    /// The key's stamp before the tier's entry was read.
    stamp: u64,
    /// Once the index counts the entry's hits as full: the index shard's version from
    /// the last lookup that confirmed the copy's fill (see [`get_unchanged`]).
    index_version: Option<u64>,
    entry: Arc<HotEntry>,
}

impl ThreadCopy {
    fn is_of(&self, stamps: &Stamps, key: &str, key_hash: StoreHash, stamp: u64) -> bool {
        self.tier == stamps.tier
            && self.key_hash == key_hash
            && self.stamp == stamp
            && *self.entry.key == *key
    }
}

/// One slot: a copy, and the key that lately looked it up without one.
#[derive(Default)]
struct Slot {
    copy: Option<ThreadCopy>,
    /// The key (tier, hash) that missed on this slot last, and how often in a row.
    candidate: (u64, StoreHash),
    seen: u8,
}

thread_local! {
    /// This thread's slots; empty until its first copy.
    static COPIES: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
}

fn slot_of(key_hash: StoreHash) -> usize {
    (key_hash.0 >> 96) as usize % SLOTS
}

/// This thread's copy of fill `fill_id` of `key`, if it has one whose stamp is still
/// `stamp` (read with [`Stamps::read`]); the lookup that called it found `fill_id` in
/// the index at `index_version` (see [`get_unchanged`]).
pub(super) fn get(
    stamps: &Stamps,
    key: &str,
    fill_ref: FillRef,
    stamp: u64,
    index_version: Option<u64>,
) -> Option<Arc<HotEntry>> {
    COPIES.with_borrow_mut(|slots| {
        let copy = slots.get_mut(slot_of(fill_ref.key))?.copy.as_mut()?;
        if !copy.is_of(stamps, key, fill_ref.key, stamp) || copy.entry.fill_id != fill_ref.fill {
            return None;
        }
        copy.index_version = index_version;
        Some(Arc::clone(&copy.entry))
    })
}

/// This thread's copy of `key`, if its stamp is unchanged and `unchanged` says
/// that the index has changed nothing in the key's shard since a lookup found the
/// copy's fill there with a full count: that fill is still the key's, and the hit has
/// nothing to count, so the caller need not look in the index at all.
pub(super) fn get_unchanged(
    stamps: &Stamps,
    key: &str,
    key_hash: StoreHash,
    unchanged: impl FnOnce(u64) -> bool,
) -> Option<Arc<HotEntry>> {
    COPIES.with_borrow(|slots| {
        let copy = slots.get(slot_of(key_hash))?.copy.as_ref()?;
        // This thread's own memory first: most lookups end there, reading no stamp.
        if copy.key_hash != key_hash || copy.tier != stamps.tier {
            return None;
        }
        let version = copy.index_version?;
        let stamp = stamps.read(key_hash);
        (copy.is_of(stamps, key, key_hash, stamp) && unchanged(version))
            .then(|| Arc::clone(&copy.entry))
    })
}

/// Tells this thread that `entry`, the tier's entry of `key_hash` read after its stamp
/// was `stamp`, answered a lookup that found no copy (and its fill in the index at
/// `index_version`); it copies the entry once the key has come often enough in a row,
/// or at once when the slot held a stale copy of it.
pub(super) fn offer(
    stamps: &Stamps,
    key_hash: StoreHash,
    stamp: u64,
    index_version: Option<u64>,
    entry: &HotEntry,
) {
    if entry.body.len() > COPY_MAX {
        return;
    }
    COPIES.with_borrow_mut(|slots| {
        if slots.is_empty() {
            slots.resize_with(SLOTS, Slot::default);
        }
        let slot = &mut slots[slot_of(key_hash)];
        let key = (stamps.tier, key_hash);
        let stale_copy = slot
            .copy
            .as_ref()
            .is_some_and(|copy| (copy.tier, copy.key_hash) == key);
        if !stale_copy {
            if slot.candidate == key {
                slot.seen = slot.seen.saturating_add(1);
            } else {
                slot.candidate = key;
                slot.seen = 1;
            }
            if slot.seen < REPEATS {
                return;
            }
        }
        slot.seen = 0;
        slot.copy = Some(ThreadCopy {
            tier: stamps.tier,
            key_hash,
            stamp,
            index_version,
            entry: Arc::new(entry.unshared()),
        });
    });
}
