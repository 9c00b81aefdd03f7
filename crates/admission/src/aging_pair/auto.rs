//! How `rotate = "auto"` sizes a generation: the objects the disk cache holds when full,
//! times a number of new keys per object that the pair steers by the disk writes its
//! admissions cause.
//!
//! A generation of `k` new keys per cached object remembers a first request for one to two
//! generations. A longer memory catches more real second requests, and also writes more
//! objects that are never requested a third time. Which `k` is best depends on how many
//! keys come back, and no fixed one fitted every workload. On the simulator's CDN
//! workloads (20–70% one-hit wonders, caches of 1% and 5% of the unique bytes; `docs/guide/sizing.md`,
//! "Against S3-FIFO") `k = 2` beats S3-FIFO's hit ratios everywhere but writes more than a
//! tenth of admit-all's bytes with 20% one-hit wonders at 5%, where many keys return; a
//! smaller fixed `k` writes less there but falls behind S3-FIFO at 50–70% one-hit wonders,
//! where fewer return and each one counts (`benches/RESULTS.md`, "`rotate = "auto"`
//! steered by its writes").
//!
//! So `k` starts at [`AUTO_KEYS_PER_OBJECT`] and is steered by the writes it causes, a
//! proportional controller on the generation's own counts: each generation counts the new
//! keys it records and the fills its admissions lead to ([`Admission::note_fill`] with
//! [`AdmitReason::SeenBefore`], called by the proxy, and by the simulator, once per fill).
//! When a generation ends, the next one's `k` is the ended one's (its target over the objects
//! the cache holds) times [`AUTO_WRITES_PER_NEW_KEY`] / (its fills per new key), kept between
//! [`AUTO_MIN_KEYS_PER_OBJECT`] and [`AUTO_KEYS_PER_OBJECT`]: a workload that writes less
//! than the target keeps `k = 2`, one that writes more gets a shorter memory.
//! Fills per new key grow a little more slowly than the generation, so one step lands a
//! little short of the target and the next ones close in, without overshooting.
//!
//! Why fills per new key: every key new to the current generation is a request the filter
//! had to record, mostly a miss that an admit-all cache writes, so the ratio follows the
//! share of admit-all's writes that `auto` keeps below a tenth (in the simulator the two
//! agree closely). The pair needs no count of requests or bytes for it: the new keys are
//! already counted on the request path, and a fill is counted once, off the hit path.
//!
//! Steering starts only once this run has written as many objects as the cache holds when
//! full. Before that the cache is still filling and every second request is a miss that is
//! written whatever the generation's size; steering on those writes would shrink the
//! generations of workloads that write far less once warm, and cost them byte hits. A
//! restart that finds a full cache also waits a cache's worth of fills, at `k = 2`.

use std::sync::atomic::Ordering;

use super::Shared;
#[cfg(doc)]
use crate::{Admission, AdmitReason};

/// The most new keys per object in the disk cache that a generation takes under
/// `rotate = "auto"`, and where it starts (the steering of `auto` may lower it). Two,
/// measured: with the store's eviction an admitted object that is never hit again is the
/// first to go, so a longer memory costs little cache and catches more real
/// second requests; on the simulator's CDN workloads (20–70% one-hit wonders, caches of
/// 1–5% of the unique bytes) twice the cache's objects stays close to the best fixed
/// generation, where once falls well short (`benches/RESULTS.md`, "two keys per object").
pub const AUTO_KEYS_PER_OBJECT: u64 = 2;

/// The fewest new keys per cached object `rotate = "auto"` steers a generation down to: a
/// generation of one cache's worth of keys still catches second requests that come within
/// one to two passes of the cache.
pub const AUTO_MIN_KEYS_PER_OBJECT: f64 = 1.0;

/// The disk writes per new key `rotate = "auto"` steers toward (see the module docs). Below
/// the bound of a tenth of admit-all's writes by the margin the warm-up and the
/// controller's noise need: the warm-up's fills are not steered, and a generation's count
/// varies by a few percent. In the one simulated case above the bound at `k = 2`, 0.08
/// keeps the writes below it where slightly higher targets did not (`benches/RESULTS.md`,
/// "`rotate = "auto"` steered by its writes").
pub const AUTO_WRITES_PER_NEW_KEY: f64 = 0.08;

/// The keys per object after a generation of `sized` keys per object (its target over the
/// objects the cache holds) recorded `inserts` new keys and led to `fills` fills; `warm`
/// once this run has written a cache's worth. From the generation's actual size rather than
/// from the last steered value: while the floor or `expected_urls` clamps the target,
/// steering the value it clamps would drift to a bound without changing the generation.
pub fn steer(sized: f64, inserts: u64, fills: u64, warm: bool) -> f64 {
    let most = AUTO_KEYS_PER_OBJECT as f64;
    if !warm {
        // A cache still filling: where `auto` starts.
        return most;
    }
    let fills_per_key = fills as f64 / inserts as f64;
    let steered = if inserts == 0 {
        // A generation that recorded nothing (ended by age or by an operator at once)
        // teaches nothing: as it was.
        sized
    } else if fills == 0 {
        // No fill at all: as long as allowed (the division below would be infinite).
        most
    } else {
        sized * AUTO_WRITES_PER_NEW_KEY / fills_per_key
    };
    steered.clamp(AUTO_MIN_KEYS_PER_OBJECT, most)
}

impl Shared {
    /// Counts a fill toward the live generation.
    pub(super) fn count_fill(&self) {
        let state = self.state();
        self.slot(state.number)
            .fills
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The next generation's keys per object, steered by generation `ended`, which is ending
    /// now, in a cache that holds `objects` when full. Called once per generation, by the
    /// thread that claims the next one's slot.
    pub(super) fn steer_after(&self, ended: u64, objects: u64) -> f64 {
        let slot = self.slot(ended);
        let fills = slot.fills.load(Ordering::Relaxed);
        let written = self
            .fills_ended
            .fetch_add(fills, Ordering::Relaxed)
            .saturating_add(fills);
        let sized = slot.target.load(Ordering::Relaxed) as f64 / objects.max(1) as f64;
        let inserts = slot.inserts.load(Ordering::Relaxed);
        steer(sized, inserts, fills, written >= objects)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use xxhash_rust::xxh3::xxh3_128;

    use super::*;
    use crate::{
        Admission, AdmitReason, AgingPair, Decision, FilterHash, FilterParams, RejectReason,
        Rotation, Shadow,
    };

    const SEEN: Decision = Decision::Admit(AdmitReason::SeenBefore);
    const MAX: f64 = AUTO_KEYS_PER_OBJECT as f64;

    #[test]
    fn steering_scales_by_the_target_over_the_fills_per_key_within_its_bounds() {
        let target = AUTO_WRITES_PER_NEW_KEY;
        // 1.6 times the target's fills per key divides the keys per object by 1.6; three
        // quarters of it multiplies them by 4/3; half of it would double them, but no
        // further than the most. (Tolerances: the fills are whole.)
        let shortened = steer(2.0, 10_000, (1.6 * target * 10_000.0) as u64, true);
        assert!((shortened - 1.25).abs() < 1e-2, "{shortened}");
        let grown = steer(1.2, 10_000, (0.75 * target * 10_000.0) as u64, true);
        assert!((grown - 1.6).abs() < 1e-2, "{grown}");
        assert_eq!(
            steer(1.5, 10_000, (0.5 * target * 10_000.0) as u64, true),
            MAX
        );
        // Far above the target: no shorter than the fewest.
        assert_eq!(steer(MAX, 100, 100, true), AUTO_MIN_KEYS_PER_OBJECT);
        // No fill at all: as long as allowed.
        assert_eq!(steer(1.2, 10_000, 0, true), MAX);
        // A cache still filling: where `auto` starts, whatever was written.
        assert_eq!(steer(1.2, 10_000, 5_000, false), MAX);
        // A generation without new keys teaches nothing.
        assert_eq!(steer(1.2, 0, 5, true), 1.2);
    }

    fn key(i: u64) -> FilterHash {
        FilterHash(xxh3_128(&i.to_le_bytes()))
    }

    /// Counts `fills` fills of `decision` toward `policy`'s live generation, then records
    /// fresh keys until the pair rotates; returns the new generation's target.
    fn generation(
        policy: &dyn Admission,
        pair: &AgingPair,
        next: &mut u64,
        fills: u64,
        decision: Decision,
        t0: Instant,
    ) -> u64 {
        for _ in 0..fills {
            policy.note_fill(decision);
        }
        let before = pair.generation();
        while pair.generation() == before {
            assert!(*next < 1_000_000, "no rotation");
            policy.on_request_at(key(*next), t0);
            *next += 1;
        }
        pair.stats_at(t0).generation_target
    }

    /// A pair under `rotate = "auto"` over a cache that holds `objects` when full (at least
    /// the floor's worth, [`super::super::AUTO_FLOOR`], so the fewest keys per object show).
    fn auto_pair(objects: u64, t0: Instant) -> Arc<AgingPair> {
        capped_auto_pair(objects, 100_000, t0)
    }

    /// [`auto_pair`] with `expected_urls`, the largest generation, at `largest`.
    fn capped_auto_pair(objects: u64, largest: u64, t0: Instant) -> Arc<AgingPair> {
        let params = FilterParams::for_expected_keys(largest, 0.01);
        let count = Arc::new(move || objects);
        let hour = Duration::from_secs(3600);
        let rotation = Rotation::Auto {
            objects: count,
            min_generation_age: hour / 4,
        };
        Arc::new(AgingPair::new(params, hour, rotation, t0))
    }

    /// On `pair`, over a cache of `objects` whose generations take `target` keys: a warm-up
    /// generation (fewer fills than the cache holds, however many per key: not steered by),
    /// then a warm one writing 25% more per new key than the target, after which the next
    /// generation must be shorter in proportion. Returns its target.
    fn warm_up_then_write_too_much(
        pair: &AgingPair,
        objects: u64,
        target: u64,
        next: &mut u64,
        t0: Instant,
    ) -> u64 {
        let warm_up = objects * 9 / 10;
        assert_eq!(generation(pair, pair, next, warm_up, SEEN, t0), target);
        let above = (1.25 * AUTO_WRITES_PER_NEW_KEY * target as f64) as u64;
        let shorter = generation(pair, pair, next, above, SEEN, t0);
        let expected = target as f64 / 1.25;
        assert!(
            (shorter as f64 - expected).abs() <= 2.0,
            "{shorter} against {expected}"
        );
        shorter
    }

    #[test]
    fn auto_generations_shrink_when_they_write_above_the_target_and_grow_back() {
        let t0 = Instant::now();
        let objects = 2_000;
        let pair = auto_pair(objects, t0);
        let full = objects * AUTO_KEYS_PER_OBJECT;
        assert_eq!(pair.stats_at(t0).generation_target, full);
        let mut next = 0;
        let shorter = warm_up_then_write_too_much(&pair, objects, full, &mut next, t0);
        // ... one writing less lengthens it again, but never beyond the most.
        let below = (0.25 * AUTO_WRITES_PER_NEW_KEY * shorter as f64) as u64;
        assert_eq!(generation(&*pair, &pair, &mut next, below, SEEN, t0), full);
        // Only the filter's own admissions count: fills a rule, admit-all or a refetch of a
        // stored entry began say nothing about the generation's size.
        for other in [
            Decision::Admit(AdmitReason::Rule),
            Decision::Admit(AdmitReason::Always),
            Decision::Admit(AdmitReason::AlreadyStored),
            Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight)),
        ] {
            assert_eq!(generation(&*pair, &pair, &mut next, full, other, t0), full);
        }
        // Far too many writes: one cache's worth of keys, no fewer.
        assert_eq!(
            generation(&*pair, &pair, &mut next, full, SEEN, t0),
            objects
        );
    }

    #[test]
    fn a_generation_cut_short_by_expected_urls_is_steered_from_the_size_it_had() {
        let t0 = Instant::now();
        let objects = 2_000;
        // `expected_urls` caps two keys per object at one and a half.
        let largest = objects * 3 / 2;
        let pair = capped_auto_pair(objects, largest, t0);
        assert_eq!(pair.stats_at(t0).generation_target, largest);
        // Shortened from the 1.5 keys per object it had, not from the 2 the cap cut (which
        // would still be capped, and change nothing).
        let mut next = 0;
        warm_up_then_write_too_much(&pair, objects, largest, &mut next, t0);
    }

    #[test]
    fn a_shadow_policy_counts_the_fills_second_hit_would_have_made() {
        let t0 = Instant::now();
        let objects = 2_000;
        let pair = auto_pair(objects, t0);
        let shadow = Shadow::new(pair.clone());
        let full = objects * AUTO_KEYS_PER_OBJECT;
        let mut next = 0;
        // Shadowed fills (second-hit would have rejected the key) do not count...
        let shadowed = Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight));
        assert_eq!(
            generation(&shadow, &pair, &mut next, full, shadowed, t0),
            full
        );
        // ... fills of seen keys do: a warm-up (not steered by), then a heavy generation.
        assert_eq!(
            generation(&shadow, &pair, &mut next, objects / 2, SEEN, t0),
            full
        );
        assert_eq!(
            generation(&shadow, &pair, &mut next, full, SEEN, t0),
            objects
        );
    }
}
