//! Log lines about events that can come once per request (a dropped fill, an object too
//! large for the cache) are throttled: at most one line per [`EVERY`] for each kind of
//! event, saying how many were held back since the last one. The counters that metrics
//! export stay exact; the log only has to say that, and why, it happens.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// At most one line per this long for each [`Throttle`].
pub const EVERY: Duration = Duration::from_secs(10);

/// One kind of event's line: lets one through per [`EVERY`] and counts the rest.
pub struct Throttle {
    /// Milliseconds since [`epoch`] from which the next line may be written.
    next: AtomicU64,
    /// Events held back since the last line.
    held: AtomicU64,
}

impl Throttle {
    /// A throttle that lets its first event through (usable in a `static`).
    pub const fn new() -> Throttle {
        Throttle {
            next: AtomicU64::new(0),
            held: AtomicU64::new(0),
        }
    }

    /// `Some(held)` when this event should be logged, with the number of events held back
    /// since the last line; `None` when it is held back (and counted).
    pub fn admit(&self) -> Option<u64> {
        self.admit_at(clock_ms())
    }

    /// [`Throttle::admit`] at `now_ms` on the throttles' clock ([`clock_ms`]): for a
    /// caller that takes the time as an argument, so that a test can inject it.
    pub fn admit_at(&self, now_ms: u64) -> Option<u64> {
        let next = self.next.load(Ordering::Relaxed);
        let every = u64::try_from(EVERY.as_millis()).unwrap_or(u64::MAX);
        // One thread wins the window; the others count themselves as held back.
        if now_ms >= next
            && self
                .next
                .compare_exchange(
                    next,
                    now_ms.saturating_add(every),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            return Some(self.held.swap(0, Ordering::Relaxed));
        }
        self.held.fetch_add(1, Ordering::Relaxed);
        None
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new()
    }
}

/// Lets an event through once per key: a key is remembered in one of [`ONCE_SLOTS`] slots
/// picked by its hash, so memory stays fixed; a key whose slot another key took since is
/// let through again. For events an operator must see per object (a response too large
/// to store), where one line per [`EVERY`] would hide all but a few of the objects.
pub struct OncePerKey {
    slots: Box<[AtomicU64]>,
}

/// Keys an [`OncePerKey`] remembers at most (8 bytes each).
pub const ONCE_SLOTS: usize = 4096;

impl OncePerKey {
    /// Nothing remembered yet.
    pub fn new() -> OncePerKey {
        OncePerKey {
            slots: (0..ONCE_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Whether the event for the key of 64-bit hash `hash` should be logged: true the first
    /// time, false while the key stays remembered.
    pub fn first(&self, hash: u64) -> bool {
        // 0 marks an empty slot, so a key hashing to 0 is kept as 1.
        let hash = hash.max(1);
        let slot = &self.slots[(hash % ONCE_SLOTS as u64) as usize];
        slot.swap(hash, Ordering::Relaxed) != hash
    }
}

impl Default for OncePerKey {
    fn default() -> Self {
        OncePerKey::new()
    }
}

/// The throttles' clock: milliseconds since the process's first look at it (monotonic).
pub fn clock_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The process's reference instant for every throttle.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_window_with_the_count_held_back() {
        let throttle = Throttle::new();
        let every = u64::try_from(EVERY.as_millis()).expect("fits");
        assert_eq!(throttle.admit_at(5), Some(0), "the first event is logged");
        assert_eq!(throttle.admit_at(6), None);
        assert_eq!(throttle.admit_at(5 + every - 1), None);
        assert_eq!(
            throttle.admit_at(5 + every),
            Some(2),
            "the next window's line says how many were held back"
        );
        assert_eq!(throttle.admit_at(5 + every), None);
    }

    #[test]
    fn a_key_is_let_through_once_until_another_key_takes_its_slot() {
        let once = OncePerKey::new();
        assert!(once.first(7));
        assert!(!once.first(7), "the same key again");
        assert!(once.first(8), "another key has its own slot");
        assert!(!once.first(7));
        let rival = 7 + ONCE_SLOTS as u64;
        assert!(once.first(rival), "a key sharing the slot");
        assert!(once.first(7), "forgotten once its slot was taken");
        assert!(
            once.first(0) && !once.first(0),
            "a zero hash is remembered too"
        );
    }
}
