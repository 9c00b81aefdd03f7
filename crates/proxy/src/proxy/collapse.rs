//! Request collapsing: concurrent misses for one key make one origin fetch.
//!
//! The first cacheable miss of a key becomes its *leader*: it holds the key's slot in a
//! [`Collapser`] while it fetches and fills. Misses of the same key that arrive meanwhile
//! are *followers*: they wait for the slot to be freed, then look the key up again and are
//! answered from the stored entry (`Cache-Status: secondhit; fwd=uri-miss; collapsed`).
//! The same slot is the one background refresh per key that `stale-while-revalidate`
//! allows ([`Collapser::try_lead`]): a refresh in flight is a fill followers can wait for.
//!
//! When the slot is freed, and what followers then do:
//! - The leader's response is storable and admitted: the slot is held by the fill's writer
//!   task (or, for a body that came whole with its head, the task of its one file call)
//!   until the entry is committed (or the fill dropped), so followers find the entry,
//!   whether or not the leader's client stayed.
//!   Followers wait for the *whole* download, not its first bytes: for an object of
//!   several MiB from a slow origin that is the origin's transfer time, bounded by
//!   `cache.collapse_timeout` (a follower past it fetches for itself, uncached:
//!   `detail=collapse-timeout`, so that a slow object does not become a herd of fills).
//!   It is not the leader's client's time: the fill reads the origin at its own pace and
//!   a client that lags is left to read on from the fill's file (`tee`), for a body of
//!   declared length.
//! - The answer is not storable for reasons of the response's own (`no-store`, `private`,
//!   `Set-Cookie`, too large, ...): the slot is freed at the response head and its
//!   followers are told so; each goes to the origin at once and never waits again, side
//!   by side rather than queued behind a second leader that would be refused too. The
//!   key is remembered as refused for a few seconds (at most `MAX_REFUSED` keys): its
//!   misses then neither lead nor wait, so a hot uncacheable URL is not serialised behind
//!   one request per burst (Varnish's "hit-for-miss").
//! - The fill is dropped on the way: every follower is woken at once. For a body without
//!   a length that grew past `cache.max_object_size` each fetches for itself and the key
//!   is refused, as above. For any other drop (the origin cut the body, the disk failed)
//!   they look again and follow one new leader; if its fill is dropped too, they all
//!   fetch for themselves, side by side, instead of one leader at a time until
//!   `cache.collapse_timeout`.
//! - Anything else (an origin error before the body, a fill that cannot start, the
//!   leader's own credentials): the slot is freed as soon as the leader knows, and a
//!   follower that finds no entry joins the key again — it may lead the next fetch, or
//!   wait for it — within the same `cache.collapse_timeout`, counted from its first wait,
//!   so that a failed fill does not turn its followers into a herd of fills.
//!
//! Who leads: only a GET that admission admits and that would fetch the whole object
//! (no `Range`, or one the proxy can cut from the whole). Under `second-hit`, the first
//! request for a key is refused by admission (`first-sight`): its response will not be
//! stored, so it neither leads nor holds anyone; it follows, though, when a leader is
//! already filling the key. So a burst of first requests for a new key makes at most two
//! origin fetches: the first sight, and the fill of the first request that found the key
//! recorded.
//!
//! The slots are maps in [`SHARDS`] shards by key, each behind its own mutex, held only to
//! insert, look up or remove one key: never across an await. Misses of different keys
//! rarely meet on one lock, so workers on different cores do not take turns at it. A
//! refused key is also remembered by each thread that saw it refused, until its refusal
//! ends: a hot uncacheable URL's misses take no shared lock at all. A hit never touches
//! any of it.

use std::cell::Cell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use foldhash::quality::RandomState;
use tokio::sync::watch;

use crate::policy::{NotStored, UnindexedTags};
use crate::store::{FillDrop, StoreHash};

/// How long a key whose answer was not storable is passed without collapsing: long
/// enough to cover a burst of requests, short enough that a URL that becomes cacheable
/// is collapsed again soon.
const REFUSED_FOR: Duration = Duration::from_secs(10);

/// Most keys remembered as refused at once: past it, a refused key is not remembered
/// (its next burst queues behind one leader, as if it were new). Bounds the maps' memory
/// however many distinct uncacheable URLs are asked for. Each shard holds its share.
const MAX_REFUSED: usize = 4096;

/// Shards of the slots; a power of two, so a key's shard is its hash's low bits.
const SHARDS: usize = 64;

/// Refused keys each thread remembers; a power of two.
const MEMO_SLOTS: usize = 16;

/// The keys (store hashes) with a fill or refresh in flight, and how to wait for each.
pub(super) struct Collapser {
    /// Tells this collapser's keys from another's in a thread's memo (tests run several
    /// proxies on one thread).
    id: u64,
    shards: Box<[Shard]>,
}

/// One shard's slots, on a cache line of its own so that locking one does not slow
/// another core's use of its neighbour.
#[repr(align(64))]
#[derive(Default)]
struct Shard(Mutex<Slots>);

/// The map behind one shard's mutex.
#[derive(Default)]
struct Slots {
    map: HashMap<StoreHash, Slot, RandomState>,
    /// `Slot::Refused` entries in `map`, expired ones included.
    refused: usize,
    /// When expired `Refused` entries may next be swept out (at most once per
    /// `REFUSED_FOR`, so a full table costs one pass over the map per period).
    next_sweep: Option<Instant>,
}

/// One key's state.
enum Slot {
    /// A leader is fetching it; followers wait on this.
    Filling(watch::Receiver<Ending>),
    /// Its last leader's answer was not storable (`no-store`, `private`, ...): until this
    /// instant, misses of it neither lead nor wait (like Varnish's hit-for-miss), so a hot
    /// uncacheable URL is not serialised behind one request per burst.
    Refused(Instant),
}

/// A miss's part in its key's slot.
pub(super) enum Role {
    /// This request leads: the fill it starts (if any) frees the slot when it ends.
    Leader(Leader),
    /// Another request leads: wait for it, then look again.
    Follower(Follower),
    /// No slot taken or joined: fetch as a plain miss.
    Alone,
}

/// What a miss that goes to the origin owes its key's slot.
pub(super) enum Fetching {
    /// It leads: the fill it starts holds the slot until the entry is committed or the
    /// fill dropped; without a fill the slot is freed when the answer's head is judged.
    Leading(Leader),
    /// Nobody waits for it.
    Alone,
    /// It waited `cache.collapse_timeout` for a leader: its answer is not stored.
    WaitedTooLong,
}

/// The holder of a key's slot; dropping it frees the slot and wakes every follower.
pub(super) struct Leader {
    collapser: Arc<Collapser>,
    hash: StoreHash,
    /// Set by [`Leader::not_storable`]: the slot is left as `Refused`, not freed.
    refused: bool,
    /// The slot was already freed (or refused): by then it may be another leader's.
    vacated: bool,
    /// Its drop wakes the followers (their `changed()` then fails); it is sent on only
    /// to tell them the answer was refused or the fill dropped.
    done: watch::Sender<Ending>,
}

/// Why a leader woke its followers other than by freeing the slot.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// Its answer is not storable for reasons of the response's own: [`Waited::Refused`].
    Refused,
    /// Its fill was dropped on the way: [`Waited::Dropped`].
    Dropped,
}

/// A request waiting for the leader of its key.
pub(super) struct Follower(watch::Receiver<Ending>);

/// How a follower's wait ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Waited {
    /// The leader is done: look the key up again.
    Released,
    /// The leader's answer was not storable for reasons of its own (or its body grew
    /// too large): fetch alone.
    Refused,
    /// The leader's fill was dropped on the way: look again and follow a new leader
    /// once; fetch alone if that fill is dropped too.
    Dropped,
    /// `cache.collapse_timeout` passed first.
    TimedOut,
}

impl Default for Collapser {
    fn default() -> Collapser {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Collapser {
            id: NEXT_ID.fetch_add(1, Relaxed),
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

impl Collapser {
    /// The role of a miss of `hash`: leader if the slot is free and `may_lead`, follower
    /// if it is taken, alone otherwise.
    pub(super) fn join(self: &Arc<Self>, hash: StoreHash, may_lead: bool) -> Role {
        if memo::refused(self.id, hash) {
            return Role::Alone;
        }
        let mut slots = self.lock(hash);
        let Slots { map, refused, .. } = &mut *slots;
        // Made only for a leader: most misses of a refused key, or of one being filled,
        // need no channel of their own.
        let done = match map.entry(hash) {
            Entry::Occupied(taken) => match taken.get() {
                Slot::Filling(waiting) => return Role::Follower(Follower(waiting.clone())),
                Slot::Refused(until) if Instant::now() < *until => {
                    memo::remember(self.id, hash, *until);
                    return Role::Alone;
                }
                Slot::Refused(_) => {
                    // Expired: the key is free again.
                    *refused -= 1;
                    if !may_lead {
                        taken.remove();
                        return Role::Alone;
                    }
                    let (done, waiting) = watch::channel(Ending::Dropped);
                    *taken.into_mut() = Slot::Filling(waiting);
                    done
                }
            },
            Entry::Vacant(free) if may_lead => {
                let (done, waiting) = watch::channel(Ending::Dropped);
                free.insert(Slot::Filling(waiting));
                done
            }
            Entry::Vacant(_) => return Role::Alone,
        };
        Role::Leader(Leader {
            collapser: Arc::clone(self),
            hash,
            refused: false,
            vacated: false,
            done,
        })
    }

    /// The slot of `hash` if it is free (a background refresh takes it so), `None` if
    /// a fill or refresh of the key is in flight, or its last answer was refused (a
    /// refresh would most likely be refused too).
    pub(super) fn try_lead(self: &Arc<Self>, hash: StoreHash) -> Option<Leader> {
        match self.join(hash, true) {
            Role::Leader(leader) => Some(leader),
            Role::Follower(_) | Role::Alone => None,
        }
    }

    /// The slots of `hash`'s shard.
    fn lock(&self, hash: StoreHash) -> MutexGuard<'_, Slots> {
        let shard = &self.shards[hash.0 as usize & (SHARDS - 1)];
        // A poisoned lock only means another thread panicked while holding it; the map
        // itself is always consistent (one insert or remove per critical section).
        shard.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slots {
    /// Most refused keys one shard remembers.
    const MAX_REFUSED: usize = MAX_REFUSED / SHARDS;

    /// Leaves `hash` refused for `REFUSED_FOR`, if there is room, and returns until when;
    /// frees it otherwise.
    fn refuse(&mut self, hash: StoreHash, now: Instant) -> Option<Instant> {
        if self.refused >= Self::MAX_REFUSED && self.next_sweep.is_none_or(|next| now >= next) {
            self.map
                .retain(|_, slot| !matches!(slot, Slot::Refused(until) if *until <= now));
            self.refused = self
                .map
                .values()
                .filter(|slot| matches!(slot, Slot::Refused(_)))
                .count();
            self.next_sweep = Some(now + REFUSED_FOR);
        }
        if self.refused < Self::MAX_REFUSED {
            let until = now + REFUSED_FOR;
            self.map.insert(hash, Slot::Refused(until));
            self.refused += 1;
            Some(until)
        } else {
            self.map.remove(&hash);
            None
        }
    }
}

/// Each thread's memory of refused keys: a refusal lasts until its instant, whatever
/// happens meanwhile (nothing takes a `Refused` slot out of its map before it expires),
/// so a thread that saw one may answer from it without the shard's lock.
mod memo {
    use super::*;

    /// A key's refusal: its collapser, its hash, and until when.
    type Memo = Option<(u64, StoreHash, Instant)>;

    thread_local! {
        // A cell per slot: a look or a note copies one memo, not all of them.
        static REFUSED: [Cell<Memo>; MEMO_SLOTS] = const { [const { Cell::new(None) }; MEMO_SLOTS] };
    }

    /// The slot a key's memo takes: bits of its hash the shard is not chosen by.
    fn slot(hash: StoreHash) -> usize {
        (hash.0 >> 64) as usize & (MEMO_SLOTS - 1)
    }

    /// Whether this thread knows `hash` of collapser `id` refused now.
    pub(super) fn refused(id: u64, hash: StoreHash) -> bool {
        let memo = REFUSED.with(|memos| memos[slot(hash)].get());
        matches!(memo, Some((of, key, until)) if of == id && key == hash && Instant::now() < until)
    }

    /// Notes that `hash` of collapser `id` is refused until `until`.
    pub(super) fn remember(id: u64, hash: StoreHash, until: Instant) {
        REFUSED.with(|memos| memos[slot(hash)].set(Some((id, hash, until))));
    }
}

impl Leader {
    /// The leader's answer is not storable, for a reason that belongs to the response
    /// rather than to this request: frees the slot now, and lets misses of the key go to
    /// the origin without waiting for `REFUSED_FOR`. Other reasons just free the slot.
    pub(super) fn not_storable(mut self, reason: NotStored) {
        self.refused = match reason {
            NotStored::NoStore
            | NotStored::Private
            | NotStored::SetCookie
            | NotStored::VaryStar
            | NotStored::Partial
            | NotStored::NotCacheable
            | NotStored::NoLifetime
            | NotStored::NoLength
            | NotStored::TooLarge
            | NotStored::Tags(
                UnindexedTags::TooMany | UnindexedTags::TooLong | UnindexedTags::Unreadable,
            ) => true,
            // The request's own method, range or credentials, or its wait: another
            // request of the key may well be stored.
            NotStored::Method
            | NotStored::Range
            | NotStored::Authorization
            | NotStored::CollapseTimeout => false,
            // The tag index may have room again after the next purge or eviction.
            NotStored::Tags(UnindexedTags::MemoryFull) => false,
        };
        if self.refused {
            // Vacated before the followers hear of it: one that looks again at once must
            // not find this slot and wait on an ending it was already told.
            self.vacate();
            // No follower may be left to tell: nothing to do then.
            let _ = self.done.send(Ending::Refused);
        }
    }

    /// Takes the slot out of the map (or leaves it refused), once.
    fn vacate(&mut self) {
        if std::mem::replace(&mut self.vacated, true) {
            return;
        }
        let mut slots = self.collapser.lock(self.hash);
        if self.refused {
            if let Some(until) = slots.refuse(self.hash, Instant::now()) {
                memo::remember(self.collapser.id, self.hash, until);
            }
        } else {
            slots.map.remove(&self.hash);
        }
    }
}

impl Leader {
    /// The leader's fill ended: committed (`None`), and its followers find the entry when
    /// they look again, or dropped for `reason`. A body that grew past
    /// `cache.max_object_size` will be too large for any leader: every follower fetches
    /// for itself at once ([`Waited::Refused`]) and the key is refused for `REFUSED_FOR`,
    /// like an answer refused at its head. Any other drop ([`Waited::Dropped`]) may have
    /// been a passing fault: the followers try one new leader, and fetch for themselves
    /// if that fill is dropped too, rather than going to the origin one leader at a time
    /// until `cache.collapse_timeout`.
    pub(super) fn fill_ended(mut self, dropped: Option<FillDrop>) {
        let Some(reason) = dropped else {
            return;
        };
        self.refused = reason == FillDrop::TooLarge;
        let ending = match self.refused {
            true => Ending::Refused,
            false => Ending::Dropped,
        };
        // Vacated first, as in `not_storable`.
        self.vacate();
        // No follower may be left to tell: nothing to do then.
        let _ = self.done.send(ending);
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        // Out of the map (or refused) first, then (as the fields drop) the followers are
        // woken: a follower that looks again finds the entry, or a free slot.
        self.vacate();
    }
}

impl Follower {
    /// Waits until the leader frees the slot, until `deadline` at the latest.
    pub(super) async fn wait_until(mut self, deadline: tokio::time::Instant) -> Waited {
        // A value is sent only for a refusal; otherwise `changed` fails once the leader's
        // sender is dropped.
        match tokio::time::timeout_at(deadline, self.0.changed()).await {
            Ok(Ok(())) => match *self.0.borrow_and_update() {
                Ending::Refused => Waited::Refused,
                Ending::Dropped => Waited::Dropped,
            },
            Ok(Err(_)) => Waited::Released,
            Err(_) => Waited::TimedOut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deadline no test reaches.
    fn far_off() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(3600)
    }

    #[tokio::test]
    async fn a_dropped_fill_wakes_every_follower_at_once() {
        for (dropped, refused, waited) in [
            (FillDrop::TooLarge, true, Waited::Refused),
            (FillDrop::OriginError, false, Waited::Dropped),
        ] {
            let collapser = Arc::new(Collapser::default());
            let Role::Leader(leader) = collapser.join(StoreHash(1), true) else {
                panic!("the first miss leads");
            };
            let followers: Vec<_> = (0..3)
                .map(|_| match collapser.join(StoreHash(1), true) {
                    Role::Follower(follower) => tokio::spawn(follower.wait_until(far_off())),
                    _ => panic!("later misses follow"),
                })
                .collect();
            leader.fill_ended(Some(dropped));
            for follower in followers {
                assert_eq!(
                    follower.await.expect("follower task"),
                    waited,
                    "{dropped:?}"
                );
            }
            let next = collapser.join(StoreHash(1), true);
            assert_eq!(
                matches!(next, Role::Alone),
                refused,
                "{dropped:?}: the key is refused only for a body grown too large"
            );
        }
    }

    #[tokio::test]
    async fn a_committed_fill_releases_its_followers_to_look_again() {
        let collapser = Arc::new(Collapser::default());
        let Role::Leader(leader) = collapser.join(StoreHash(1), true) else {
            panic!("the first miss leads");
        };
        let Role::Follower(follower) = collapser.join(StoreHash(1), true) else {
            panic!("the second miss follows");
        };
        let waiting = tokio::spawn(follower.wait_until(far_off()));
        leader.fill_ended(None);
        assert_eq!(waiting.await.expect("follower task"), Waited::Released);
    }

    #[tokio::test]
    async fn followers_wait_for_the_leader_of_their_key_only() {
        let collapser = Arc::new(Collapser::default());
        let Role::Leader(leader) = collapser.join(StoreHash(1), true) else {
            panic!("the first miss leads");
        };
        let Role::Follower(follower) = collapser.join(StoreHash(1), true) else {
            panic!("the second miss of the key follows");
        };
        assert!(
            matches!(collapser.join(StoreHash(2), true), Role::Leader(_)),
            "another key is not held up"
        );
        let waiting = tokio::spawn(follower.wait_until(far_off()));
        drop(leader);
        assert_eq!(waiting.await.expect("follower task"), Waited::Released);
        assert!(
            collapser.try_lead(StoreHash(1)).is_some(),
            "the slot is free once the leader is gone"
        );
    }

    #[tokio::test]
    async fn a_miss_that_may_not_lead_takes_no_slot() {
        let collapser = Arc::new(Collapser::default());
        assert!(matches!(collapser.join(StoreHash(7), false), Role::Alone));
        let _leader = collapser.try_lead(StoreHash(7)).expect("still free");
        assert!(matches!(
            collapser.join(StoreHash(7), false),
            Role::Follower(_)
        ));
        assert!(
            collapser.try_lead(StoreHash(7)).is_none(),
            "one refresh per key"
        );
    }

    #[tokio::test]
    async fn a_key_whose_answer_was_not_storable_is_passed_without_waiting() {
        let collapser = Arc::new(Collapser::default());
        let Role::Leader(leader) = collapser.join(StoreHash(9), true) else {
            panic!("leads");
        };
        let Role::Follower(follower) = collapser.join(StoreHash(9), true) else {
            panic!("follows");
        };
        leader.not_storable(NotStored::NoStore);
        assert_eq!(
            follower.wait_until(far_off()).await,
            Waited::Refused,
            "its followers are told at once"
        );
        assert!(
            matches!(collapser.join(StoreHash(9), true), Role::Alone),
            "the next miss neither leads nor waits"
        );
        let Role::Leader(leader) = collapser.join(StoreHash(10), true) else {
            panic!("leads");
        };
        leader.not_storable(NotStored::Authorization);
        assert!(
            matches!(collapser.join(StoreHash(10), true), Role::Leader(_)),
            "a refusal for the request's own credentials is not remembered"
        );
    }

    #[test]
    fn refused_keys_are_bounded_and_expire() {
        let mut slots = Slots::default();
        let now = Instant::now();
        for hash in 0..Slots::MAX_REFUSED as u128 {
            assert!(slots.refuse(StoreHash(hash), now).is_some());
        }
        assert_eq!(slots.refuse(StoreHash(u128::MAX), now), None);
        assert_eq!(slots.refused, Slots::MAX_REFUSED);
        assert!(
            !slots.map.contains_key(&StoreHash(u128::MAX)),
            "no room: not remembered"
        );
        // Once they expired, a sweep makes room.
        slots.next_sweep = None;
        slots.refuse(StoreHash(u128::MAX), now + REFUSED_FOR);
        assert_eq!(slots.refused, 1);
        assert_eq!(slots.map.len(), 1);
    }

    #[test]
    fn a_thread_that_saw_a_key_refused_passes_it_without_the_lock() {
        let collapser = Arc::new(Collapser::default());
        let (to_main, from_worker) = std::sync::mpsc::channel();
        let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn({
            let collapser = collapser.clone();
            move || {
                let Role::Leader(leader) = collapser.join(StoreHash(5), true) else {
                    panic!("leads");
                };
                leader.not_storable(NotStored::NoStore);
                to_main.send(false).expect("main waits");
                from_main.recv().expect("main says when");
                let alone = matches!(collapser.join(StoreHash(5), true), Role::Alone);
                to_main.send(alone).expect("main waits");
            }
        });
        assert_eq!(from_worker.recv(), Ok(false), "refused");
        let held = collapser.lock(StoreHash(5));
        to_worker.send(()).expect("the worker waits");
        // Taking the lock would block until it is dropped below, past this wait.
        let answered = from_worker.recv_timeout(Duration::from_secs(10));
        drop(held);
        worker.join().expect("the worker thread");
        assert_eq!(answered, Ok(true), "passed while the shard's lock was held");
        assert!(
            matches!(collapser.join(StoreHash(5), true), Role::Alone),
            "a thread without the memo finds the refusal in the map"
        );
    }

    #[test]
    fn a_thread_forgets_a_refusal_once_it_expired() {
        let collapser = Arc::new(Collapser::default());
        let past = Instant::now() - REFUSED_FOR;
        assert!(
            collapser
                .lock(StoreHash(6))
                .refuse(StoreHash(6), past - REFUSED_FOR)
                .is_some()
        );
        memo::remember(collapser.id, StoreHash(6), past);
        assert!(
            matches!(collapser.join(StoreHash(6), true), Role::Leader(_)),
            "an expired refusal neither passes nor holds the next miss"
        );
    }

    #[tokio::test]
    async fn a_follower_gives_up_after_the_timeout() {
        let collapser = Arc::new(Collapser::default());
        let _leader = collapser.try_lead(StoreHash(3)).expect("free");
        let Role::Follower(follower) = collapser.join(StoreHash(3), true) else {
            panic!("follows");
        };
        assert_eq!(
            // The leader never finishes, so only the deadline can end the wait.
            follower
                .wait_until(tokio::time::Instant::now() + Duration::from_millis(10))
                .await,
            Waited::TimedOut
        );
    }
}
