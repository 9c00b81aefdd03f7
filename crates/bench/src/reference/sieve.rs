//! SIEVE (Zhang, Yang, Yue, Vigfusson, Rashmi, "SIEVE is Simpler than LRU: an Efficient
//! Turn-Key Eviction Algorithm for Web Caches", NSDI 2024), byte-sized as libCacheSim's
//! `Sieve` is.
//!
//! One FIFO queue, newest at the head, and a hand. A hit sets the object's visited bit and
//! moves nothing. To make room the hand walks from where it last stopped (the tail, the
//! first time) towards the head: a visited object has its bit cleared and stays where it
//! is, the first unvisited one is evicted and the hand stays at its newer neighbour; past
//! the head the hand starts again at the tail. A miss inserts at the head, evicting until
//! the object's bytes fit.

use std::collections::HashMap;

use super::ReferenceCache;

/// A slot of the queue: links by slot index, `None` at either end.
#[derive(Clone, Copy, Debug)]
struct Node {
    key: u64,
    size: u64,
    visited: bool,
    /// The next older object (towards the tail).
    older: Option<usize>,
    /// The next newer object (towards the head).
    newer: Option<usize>,
}

/// SIEVE inside a byte budget (see the module docs).
pub(crate) struct Sieve {
    nodes: Vec<Node>,
    free: Vec<usize>,
    slots: HashMap<u64, usize>,
    head: Option<usize>,
    tail: Option<usize>,
    hand: Option<usize>,
    capacity: u64,
    used: u64,
}

impl Sieve {
    /// An empty cache of `capacity` bytes.
    pub(crate) fn new(capacity: u64) -> Sieve {
        Sieve {
            nodes: Vec::new(),
            free: Vec::new(),
            slots: HashMap::new(),
            head: None,
            tail: None,
            hand: None,
            capacity,
            used: 0,
        }
    }

    /// The cached keys from the head (newest) to the tail, for tests.
    #[cfg(test)]
    pub(super) fn keys_newest_first(&self) -> Vec<u64> {
        let mut keys = Vec::new();
        let mut at = self.head;
        while let Some(slot) = at {
            keys.push(self.nodes[slot].key);
            at = self.nodes[slot].older;
        }
        keys
    }

    /// The key the hand points at, for tests.
    #[cfg(test)]
    pub(super) fn hand_key(&self) -> Option<u64> {
        self.hand.map(|slot| self.nodes[slot].key)
    }

    /// Evicts one object as the hand finds it; false if the queue is empty.
    fn evict(&mut self) -> bool {
        let mut at = self.hand.or(self.tail);
        while let Some(slot) = at {
            let node = &mut self.nodes[slot];
            if node.visited {
                node.visited = false;
                at = node.newer.or(self.tail);
            } else {
                self.hand = node.newer;
                self.unlink(slot);
                return true;
            }
        }
        false
    }

    /// Takes `slot` out of the queue and the index and frees its bytes.
    fn unlink(&mut self, slot: usize) {
        let Node {
            key,
            size,
            older,
            newer,
            ..
        } = self.nodes[slot];
        match older {
            Some(older) => self.nodes[older].newer = newer,
            None => self.tail = newer,
        }
        match newer {
            Some(newer) => self.nodes[newer].older = older,
            None => self.head = older,
        }
        self.slots.remove(&key);
        self.free.push(slot);
        self.used -= size;
    }

    /// Puts `key` at the head, unvisited.
    fn push_head(&mut self, key: u64, size: u64) {
        let node = Node {
            key,
            size,
            visited: false,
            older: self.head,
            newer: None,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        match self.head {
            Some(head) => self.nodes[head].newer = Some(slot),
            None => self.tail = Some(slot),
        }
        self.head = Some(slot);
        self.slots.insert(key, slot);
        self.used += size;
    }
}

impl ReferenceCache for Sieve {
    fn lookup(&mut self, key: u64) -> Option<u64> {
        let slot = *self.slots.get(&key)?;
        let node = &mut self.nodes[slot];
        node.visited = true;
        Some(node.size)
    }

    fn insert(&mut self, key: u64, size: u64) -> bool {
        if size > self.capacity {
            return false;
        }
        while self.used + size > self.capacity && self.evict() {}
        self.push_head(key, size);
        true
    }

    fn used_bytes(&self) -> u64 {
        self.used
    }

    fn name(&self) -> &'static str {
        "sieve"
    }
}
