//! One shard's ghost: the keys its small queue evicted unhit, in eviction order, up to a
//! byte share of the budget counted at the evicted entries' sizes (S3-FIFO's ghost
//! queue). A fill of a key still remembered here goes to the main queue: the key came
//! back within about one pass of the cache, which the small queue's probation would
//! otherwise make it prove again. Keys are kept as the high 64 bits of their hash (the
//! low bits chose the shard), which halves the memory; two keys sharing them are as
//! likely as any 64-bit collision, and would only skip one probation.

use std::collections::{HashMap, VecDeque};

/// The evicted keys of one shard, oldest first.
#[derive(Default)]
pub(super) struct Ghost {
    /// Keys in eviction order, each with the turn `members` must still hold for it to
    /// count: a key taken out of `members` (a refill) leaves its turn here to be skipped.
    order: VecDeque<(u64, u64)>,
    /// The remembered keys: their turn and size.
    members: HashMap<u64, (u64, u64)>,
    /// Sum of the members' sizes.
    bytes: u64,
    /// The last turn handed out.
    turns: u64,
}

impl Ghost {
    /// Remembers `key`, evicted with `size` bytes, and forgets the oldest keys until the
    /// members add up to at most `capacity` bytes.
    pub(super) fn remember(&mut self, key: u128, size: u64, capacity: u64) {
        let key = fingerprint(key);
        self.turns += 1;
        if let Some((_, old_size)) = self.members.insert(key, (self.turns, size)) {
            self.bytes -= old_size;
        }
        self.order.push_back((key, self.turns));
        self.bytes += size;
        while self.bytes > capacity {
            let Some((old, turn)) = self.order.pop_front() else {
                break;
            };
            if let Some(&(member_turn, old_size)) = self.members.get(&old)
                && member_turn == turn
            {
                self.members.remove(&old);
                self.bytes -= old_size;
            }
        }
        // Skipped turns of refilled keys pile up only while nothing is forgotten.
        if self.order.len() > 2 * self.members.len() + 64 {
            let members = &self.members;
            self.order
                .retain(|(key, turn)| members.get(key).is_some_and(|(t, _)| t == turn));
        }
    }

    /// Forgets `key`; true if it was remembered.
    pub(super) fn take(&mut self, key: u128) -> bool {
        if self.members.is_empty() {
            return false;
        }
        match self.members.remove(&fingerprint(key)) {
            Some((_, size)) => {
                self.bytes -= size;
                true
            }
            None => false,
        }
    }

    /// Keys remembered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.members.len()
    }
}

/// What the ghost keeps of a key hash.
fn fingerprint(key: u128) -> u64 {
    (key >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::Ghost;

    /// A key hash whose fingerprint is `n`.
    fn key(n: u64) -> u128 {
        u128::from(n) << 64
    }

    #[test]
    fn the_oldest_keys_are_forgotten_past_the_byte_capacity() {
        let mut ghost = Ghost::default();
        ghost.remember(key(1), 40, 100);
        ghost.remember(key(2), 40, 100);
        ghost.remember(key(3), 40, 100);
        assert_eq!(ghost.len(), 2);
        assert!(!ghost.take(key(1)), "the oldest key was forgotten");
        assert!(ghost.take(key(2)));
        assert!(!ghost.take(key(2)), "a key is taken once");
        assert!(ghost.take(key(3)));
    }

    #[test]
    fn a_key_taken_and_remembered_again_keeps_its_new_turn() {
        let mut ghost = Ghost::default();
        ghost.remember(key(1), 10, 30);
        assert!(ghost.take(key(1)));
        ghost.remember(key(2), 10, 30);
        ghost.remember(key(1), 10, 30);
        // Key 1's first turn is skipped when it comes: key 2 is the oldest member.
        ghost.remember(key(3), 10, 30);
        ghost.remember(key(4), 10, 30);
        assert!(!ghost.take(key(2)));
        assert!(ghost.take(key(1)));
        assert!(ghost.take(key(3)));
        assert!(ghost.take(key(4)));
    }
}
