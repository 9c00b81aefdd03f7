//! One shard's ghost: the keys its small queue evicted unhit, in eviction order (S3-FIFO's
//! ghost queue). The byte limit, counted at the evicted entries' sizes, is on all shards'
//! ghosts together: a shard's own share would be smaller than a large object, which it
//! could then never remember. A shard that takes a key past the limit forgets its own
//! oldest keys; with keys spread evenly over the shards, that is nearly the oldest of all. A fill of a key still remembered here goes to the main queue: the key came
//! back within about one pass of the cache, which the small queue's probation would
//! otherwise make it prove again. Keys are kept as the high 64 bits of their hash (the
//! low bits chose the shard), which halves the memory; two keys sharing them are as
//! likely as any 64-bit collision, and would only skip one probation.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use foldhash::quality::RandomState;

use crate::StoreHash;

/// The evicted keys of one shard, oldest first.
#[derive(Default)]
pub struct Ghost {
    /// Keys in eviction order, each with the turn `members` must still hold for it to
    /// count: a key taken out of `members` (a refill) leaves its turn here to be skipped.
    order: VecDeque<(u64, u64)>,
    /// The remembered keys: their turn and size.
    members: HashMap<u64, (u64, u64), RandomState>,
    /// Sum of the members' sizes (their part of the shared total).
    bytes: u64,
    /// The last turn handed out.
    turns: u64,
}

impl Ghost {
    /// Remembers `key`, evicted with `size` bytes, and forgets this shard's oldest keys
    /// while all shards' members (`total`) add up to more than `capacity` bytes.
    pub fn remember(&mut self, key: StoreHash, size: u64, total: &AtomicU64, capacity: u64) {
        let key = fingerprint(key);
        self.turns += 1;
        if let Some((_, old_size)) = self.members.insert(key, (self.turns, size)) {
            self.shrink(old_size, total);
        }
        self.order.push_back((key, self.turns));
        self.bytes += size;
        total.fetch_add(size, Relaxed);
        while total.load(Relaxed) > capacity {
            let Some((old, turn)) = self.order.pop_front() else {
                break;
            };
            if let Some(&(member_turn, old_size)) = self.members.get(&old)
                && member_turn == turn
            {
                self.members.remove(&old);
                self.shrink(old_size, total);
            }
        }
        // Skipped turns of refilled keys pile up only while nothing is forgotten.
        if self.order.len() > 2 * self.members.len() + 64 {
            let members = &self.members;
            self.order
                .retain(|(key, turn)| members.get(key).is_some_and(|(t, _)| t == turn));
        }
    }

    /// Counts `size` bytes of members out, here and in `total`.
    fn shrink(&mut self, size: u64, total: &AtomicU64) {
        self.bytes -= size;
        total.fetch_sub(size, Relaxed);
    }

    /// Forgets every key, taking their bytes out of `total`.
    pub fn clear(&mut self, total: &AtomicU64) {
        total.fetch_sub(self.bytes, Relaxed);
        *self = Ghost::default();
    }

    /// Forgets `key`, taking its bytes out of `total`; true if it was remembered.
    pub fn take(&mut self, key: StoreHash, total: &AtomicU64) -> bool {
        if self.members.is_empty() {
            return false;
        }
        match self.members.remove(&fingerprint(key)) {
            Some((_, size)) => {
                self.shrink(size, total);
                true
            }
            None => false,
        }
    }

    /// Keys remembered.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// What the ghost keeps of a key hash.
fn fingerprint(key: StoreHash) -> u64 {
    (key.0 >> 64) as u64
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use super::Ghost;
    use crate::StoreHash;

    /// A key hash whose fingerprint is `n`.
    fn key(n: u64) -> StoreHash {
        StoreHash(u128::from(n) << 64)
    }

    #[test]
    fn the_oldest_keys_are_forgotten_past_the_byte_capacity() {
        let (mut ghost, total) = (Ghost::default(), AtomicU64::new(0));
        ghost.remember(key(1), 40, &total, 100);
        ghost.remember(key(2), 40, &total, 100);
        ghost.remember(key(3), 40, &total, 100);
        assert_eq!(ghost.len(), 2);
        assert!(!ghost.take(key(1), &total), "the oldest key was forgotten");
        assert!(ghost.take(key(2), &total));
        assert!(!ghost.take(key(2), &total), "a key is taken once");
        assert!(ghost.take(key(3), &total));
    }

    #[test]
    fn a_key_taken_and_remembered_again_keeps_its_new_turn() {
        let (mut ghost, total) = (Ghost::default(), AtomicU64::new(0));
        ghost.remember(key(1), 10, &total, 30);
        assert!(ghost.take(key(1), &total));
        ghost.remember(key(2), 10, &total, 30);
        ghost.remember(key(1), 10, &total, 30);
        // Key 1's first turn is skipped when it comes: key 2 is the oldest member.
        ghost.remember(key(3), 10, &total, 30);
        ghost.remember(key(4), 10, &total, 30);
        assert!(!ghost.take(key(2), &total));
        assert!(ghost.take(key(1), &total));
        assert!(ghost.take(key(3), &total));
        assert!(ghost.take(key(4), &total));
    }

    #[test]
    fn the_limit_is_on_all_shards_together_and_clearing_gives_back_their_bytes() {
        let total = AtomicU64::new(0);
        let (mut one, mut two) = (Ghost::default(), Ghost::default());
        // Each key is larger than half the limit: a per-shard half would hold none.
        one.remember(key(1), 60, &total, 100);
        assert_eq!(one.len(), 1);
        two.remember(key(2), 30, &total, 100);
        assert_eq!(total.load(Relaxed), 90);
        // Over the limit: the shard that took the key forgets its own oldest.
        two.remember(key(3), 30, &total, 100);
        assert_eq!((one.len(), two.len(), total.load(Relaxed)), (1, 1, 90));
        one.clear(&total);
        assert_eq!((one.len(), total.load(Relaxed)), (0, 30));
        assert!(two.take(key(3), &total));
        assert_eq!(total.load(Relaxed), 0);
    }
}
