//! One shard of the index: its keys, each in one of the two queues.

use crate::StoreHash;
use lru::LruCache;

use super::Slot;
use super::ghost::Ghost;

/// The two queues of the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Queue {
    /// New fills, on probation.
    Small,
    /// Entries hit while in the small queue: a CLOCK.
    Main,
}

/// One shard: its keys, each in exactly one of the two queues, and the keys its small
/// queue evicted.
pub(super) struct Shard {
    /// The small queue's entries of this shard, in stamp order.
    pub(super) small: LruCache<StoreHash, Slot>,
    /// The main queue's entries of this shard, in stamp order.
    pub(super) main: LruCache<StoreHash, Slot>,
    /// Keys the small queue evicted unhit, not indexed any more.
    pub(super) ghost: Ghost,
}

impl Shard {
    /// An empty shard; both lists are unbounded, the index keeps the budget.
    pub(super) fn new() -> Shard {
        Shard {
            small: LruCache::unbounded(),
            main: LruCache::unbounded(),
            ghost: Ghost::default(),
        }
    }

    /// The entries of `queue`.
    pub(super) fn queue(&mut self, queue: Queue) -> &mut LruCache<StoreHash, Slot> {
        match queue {
            Queue::Small => &mut self.small,
            Queue::Main => &mut self.main,
        }
    }

    /// The queues in the order a lookup tries them: the one with more of this shard's
    /// entries first, so most hits cost one hash lookup. A cache that never fills (no
    /// eviction has moved anything yet) has everything in the small queue; a full one
    /// has most entries in the main queue.
    fn lookup_order(&self) -> [Queue; 2] {
        if self.small.len() > self.main.len() {
            [Queue::Small, Queue::Main]
        } else {
            [Queue::Main, Queue::Small]
        }
    }

    /// The key's queue and slot.
    pub(super) fn find(&self, key: &StoreHash) -> Option<(Queue, Slot)> {
        self.lookup_order().into_iter().find_map(|queue| {
            let entries = match queue {
                Queue::Small => &self.small,
                Queue::Main => &self.main,
            };
            entries.peek(key).map(|slot| (queue, *slot))
        })
    }

    /// The key's slot, to count a hit.
    pub(super) fn slot_mut(&mut self, key: &StoreHash) -> Option<&mut Slot> {
        let (first, second) = match self.lookup_order() {
            [Queue::Small, _] => (&mut self.small, &mut self.main),
            [Queue::Main, _] => (&mut self.main, &mut self.small),
        };
        match first.peek_mut(key) {
            Some(slot) => Some(slot),
            None => second.peek_mut(key),
        }
    }
}
