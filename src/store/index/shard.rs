//! One shard of the index: its keys, each in one of the two queues.

use lru::LruCache;

use super::Slot;

/// The two queues of the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Queue {
    /// New fills, on probation.
    Small,
    /// Entries hit while in the small queue: a CLOCK.
    Main,
}

/// One shard: its keys, each in exactly one of the two queues.
pub(super) struct Shard {
    /// The small queue's entries of this shard, in stamp order.
    pub(super) small: LruCache<u128, Slot>,
    /// The main queue's entries of this shard, in stamp order.
    pub(super) main: LruCache<u128, Slot>,
}

impl Shard {
    /// An empty shard; both lists are unbounded, the index keeps the budget.
    pub(super) fn new() -> Shard {
        Shard {
            small: LruCache::unbounded(),
            main: LruCache::unbounded(),
        }
    }

    /// The entries of `queue`.
    pub(super) fn queue(&mut self, queue: Queue) -> &mut LruCache<u128, Slot> {
        match queue {
            Queue::Small => &mut self.small,
            Queue::Main => &mut self.main,
        }
    }

    /// The key's queue and slot. Main first: most hits are on entries that proved
    /// themselves, so a hit usually costs one lookup.
    pub(super) fn find(&self, key: &u128) -> Option<(Queue, Slot)> {
        match self.main.peek(key) {
            Some(slot) => Some((Queue::Main, *slot)),
            None => self.small.peek(key).map(|slot| (Queue::Small, *slot)),
        }
    }
}
