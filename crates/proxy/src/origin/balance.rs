//! Which server of an origin pool a request goes to (`origin.balance`).
//!
//! Round robin walks a fixed cycle in which each server appears as often as its weight,
//! spread out the way nginx's smooth weighted round robin spreads it (weights 5, 1, 1
//! give `a a b a c a a`, not `a a a a a b c`); the cycle is built once, so a pick is one
//! atomic increment. Servers out of rotation are skipped, so their share goes to the next
//! ones in the cycle.
//!
//! Consistent hashing is rendezvous (highest random weight) hashing: each server scores
//! the key with a hash of the key and the server's URL, weighted as in Schindelhauer and
//! Schomaker's weighted HRW (`-weight / ln(u)`), and the highest score wins. A key keeps
//! its server while that server is up; when it is out, the key's next-highest server
//! takes it, and only the keys of the server that left move. A handful of servers make
//! this a few hashes per request, with no ring to build or keep.

use std::sync::atomic::{AtomicUsize, Ordering};

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::config::Balance;

/// The pool's servers as the balancer sees them: indexes into the pool.
pub(super) struct Balancer {
    kind: Balance,
    /// Round robin's cycle of server indexes.
    cycle: Box<[u8]>,
    next: AtomicUsize,
    /// Each server's hash seed (from its URL) and weight, for rendezvous hashing.
    seeds: Box<[(u64, f64)]>,
}

impl Balancer {
    /// A balancer over servers with `urls` and `weights` (as many of each, at most 64).
    pub(super) fn new(kind: Balance, urls: &[String], weights: &[u32]) -> Balancer {
        Balancer {
            kind,
            cycle: smooth_cycle(weights),
            next: AtomicUsize::new(0),
            seeds: (urls.iter().zip(weights))
                .map(|(url, &weight)| (xxh3_64_with_seed(url.as_bytes(), 0), f64::from(weight)))
                .collect(),
        }
    }

    /// Whether picks depend on the key: only then does a request need one.
    pub(super) fn hashes(&self) -> bool {
        self.kind == Balance::ConsistentHash
    }

    /// A request's turn in the round-robin cycle: taken once per request, so that a
    /// retry goes on to the next server in the cycle rather than taking another turn.
    pub(super) fn turn(&self) -> usize {
        match self.kind {
            // One server has one turn: no count, which every worker would write.
            Balance::RoundRobin if self.seeds.len() > 1 => {
                self.next.fetch_add(1, Ordering::Relaxed)
            }
            Balance::RoundRobin | Balance::ConsistentHash => 0,
        }
    }

    /// The server for a request whose key is `key` and turn `start` ([`Balancer::turn`]),
    /// among those `usable` says may take it; `None` when none may.
    pub(super) fn pick(
        &self,
        key: &[u8],
        start: usize,
        usable: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        match self.kind {
            Balance::RoundRobin => (0..self.cycle.len())
                .map(|step| usize::from(self.cycle[(start + step) % self.cycle.len()]))
                .find(|&server| usable(server)),
            Balance::ConsistentHash => (0..self.seeds.len())
                .filter(|&server| usable(server))
                .map(|server| (server, self.score(key, server)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(server, _)| server),
        }
    }

    /// The weighted rendezvous score of `server` for `key`.
    fn score(&self, key: &[u8], server: usize) -> f64 {
        let (seed, weight) = self.seeds[server];
        let hash = xxh3_64_with_seed(key, seed);
        // The top 53 bits as a uniform number in (0, 1): never 0, whose logarithm is -inf.
        let unit = ((hash >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        -weight / unit.ln()
    }
}

/// nginx's smooth weighted round robin, run for one whole cycle (the weights' sum): each
/// step adds every server's weight to its current value, picks the largest, and takes
/// the total from it.
fn smooth_cycle(weights: &[u32]) -> Box<[u8]> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut current = vec![0i64; weights.len()];
    let mut cycle = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        for (value, &weight) in current.iter_mut().zip(weights) {
            *value += i64::from(weight);
        }
        let best = (0..current.len()).max_by_key(|&i| (current[i], std::cmp::Reverse(i)));
        if let Some(best) = best {
            current[best] -= total;
            cycle.push(u8::try_from(best).unwrap_or(u8::MAX));
        }
    }
    cycle.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("http://10.0.0.{i}:80")).collect()
    }

    #[test]
    fn the_round_robin_cycle_spreads_weights_smoothly() {
        assert_eq!(&*smooth_cycle(&[5, 1, 1]), &[0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(&*smooth_cycle(&[1, 1, 1]), &[0, 1, 2]);
        let balancer = Balancer::new(Balance::RoundRobin, &urls(3), &[1, 1, 1]);
        let pick = |usable: &dyn Fn(usize) -> bool| balancer.pick(b"k", balancer.turn(), usable);
        let picks: Vec<_> = (0..6).filter_map(|_| pick(&|_| true)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        // A server out of rotation is skipped; with none usable there is no pick.
        let picks: Vec<_> = (0..4).filter_map(|_| pick(&|s| s != 1)).collect();
        assert_eq!(picks, [0, 2, 2, 0]);
        assert_eq!(pick(&|_| false), None);
        // A retry keeps its request's turn: it goes to the next server in the cycle.
        let turn = balancer.turn();
        assert_eq!(balancer.pick(b"k", turn, |_| true), Some(2));
        assert_eq!(balancer.pick(b"k", turn, |s| s != 2), Some(0));
    }

    #[test]
    fn a_hashed_key_keeps_its_server_and_only_a_missing_servers_keys_move() {
        let balancer = Balancer::new(Balance::ConsistentHash, &urls(4), &[1, 1, 1, 1]);
        let keys: Vec<String> = (0..2000).map(|i| format!("http://site/{i}")).collect();
        let first: Vec<usize> = (keys.iter())
            .filter_map(|key| balancer.pick(key.as_bytes(), 0, |_| true))
            .collect();
        let again: Vec<usize> = (keys.iter())
            .filter_map(|key| balancer.pick(key.as_bytes(), 0, |_| true))
            .collect();
        assert_eq!(first, again);
        for server in 0..4 {
            let share = first.iter().filter(|&&s| s == server).count();
            assert!(
                (400..600).contains(&share),
                "server {server}: {share} of 2000"
            );
        }
        for (key, &was) in keys.iter().zip(&first) {
            let now = balancer.pick(key.as_bytes(), 0, |s| s != 2);
            match was {
                2 => assert_ne!(now, Some(2)),
                _ => assert_eq!(now, Some(was), "{key} moved though its server stayed"),
            }
        }
    }

    #[test]
    fn hashing_follows_the_weights() {
        let balancer = Balancer::new(Balance::ConsistentHash, &urls(2), &[3, 1]);
        let heavy = (0..4000)
            .filter(|i| balancer.pick(format!("/{i}").as_bytes(), 0, |_| true) == Some(0))
            .count();
        assert!(
            (2800..3200).contains(&heavy),
            "{heavy} of 4000 for weight 3 of 4"
        );
    }
}
