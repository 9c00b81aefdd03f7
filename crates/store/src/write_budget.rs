//! The write budget (`admission.max_write_rate`): a hard cap on the bytes fills may
//! write, so a drive rated for so many writes a day is never asked for more, whatever
//! the admission policy lets through.
//!
//! The budget is counted per minute since the store opened: a fill is charged its
//! reservation as it takes it (the declared length up front, a body without one as it
//! grows), and a charge that would take the minute past `rate × 60 s` is refused, so
//! the fill is skipped before it writes (or dropped as it grows) rather than written.
//! Why fixed minutes: the guarantee an operator reads off a drive's endurance is bytes
//! per period, and a fixed window gives exactly "at most the budget in every minute of
//! the store's clock" with one counter; a token bucket would let a full bucket plus a
//! minute's refill through in one minute. The cost: an object larger than a minute's
//! budget is never stored, and fills come in bursts at each minute's start when the
//! budget is tight.
//!
//! Bytes are charged for the file (header included) when reserved; a fill dropped later
//! keeps its charge, since what it wrote reached the disk.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The length of one budget window.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// The bytes charged in the current window.
#[derive(Debug, Default)]
struct Window {
    /// Windows since the budget started.
    index: u64,
    /// Bytes charged in it.
    charged: u64,
}

/// Bytes per [`WINDOW`] fills may reserve; 0 is no cap.
#[derive(Debug)]
pub(crate) struct WriteBudget {
    /// Bytes per second (`admission.max_write_rate`), 0 for none. Relaxed: a reload
    /// changes it, and a fill that reads the old value a moment longer is harmless.
    rate: AtomicU64,
    started: Instant,
    /// Fill starts are per miss, not per request: one short lock is cheap there.
    window: Mutex<Window>,
    /// Charges refused since start-up: each is a fill skipped or dropped. Relaxed: a
    /// plain counter.
    refused: AtomicU64,
}

impl WriteBudget {
    /// A budget of `rate` bytes per second from now (0: none).
    pub(crate) fn new(rate: u64) -> WriteBudget {
        WriteBudget {
            rate: AtomicU64::new(rate),
            started: Instant::now(),
            window: Mutex::new(Window::default()),
            refused: AtomicU64::new(0),
        }
    }

    /// Sets the rate (a reload); the bytes already charged this window still count.
    pub(crate) fn set_rate(&self, rate: u64) {
        self.rate.store(rate, Ordering::Relaxed);
    }

    /// Bytes per window, if capped.
    pub(crate) fn per_window(&self) -> Option<u64> {
        let rate = self.rate.load(Ordering::Relaxed);
        (rate > 0).then(|| rate.saturating_mul(WINDOW.as_secs()))
    }

    /// Fills skipped or dropped for the budget since start-up.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Charges `bytes` now; false (and nothing charged) when that would pass the budget.
    pub(crate) fn charge(&self, bytes: u64) -> bool {
        self.charge_at(bytes, self.started.elapsed())
    }

    /// [`WriteBudget::charge`] at `elapsed` since the budget started.
    fn charge_at(&self, bytes: u64, elapsed: Duration) -> bool {
        let Some(limit) = self.per_window() else {
            return true;
        };
        let index = elapsed.as_secs() / WINDOW.as_secs();
        let mut window = self
            .window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if window.index != index {
            *window = Window { index, charged: 0 };
        }
        let charged = window.charged.saturating_add(bytes);
        if charged > limit {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        window.charged = charged;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_takes_up_to_its_budget_and_the_next_starts_afresh() {
        let budget = WriteBudget::new(1000);
        let at = Duration::from_secs(5);
        assert!(budget.charge_at(40_000, at));
        assert!(budget.charge_at(20_000, at));
        assert!(
            !budget.charge_at(1, at),
            "60,000 bytes is the minute's whole budget"
        );
        assert!(!budget.charge_at(1, Duration::from_secs(59)));
        assert!(budget.charge_at(60_000, Duration::from_secs(60)));
        assert!(!budget.charge_at(1, Duration::from_secs(119)));
        assert_eq!(budget.refused(), 3);
    }

    #[test]
    fn a_refused_charge_leaves_room_for_a_smaller_one() {
        let budget = WriteBudget::new(10);
        assert!(budget.charge_at(500, Duration::ZERO));
        assert!(!budget.charge_at(101, Duration::ZERO));
        assert!(budget.charge_at(100, Duration::ZERO));
    }

    #[test]
    fn no_rate_is_no_cap_and_a_reload_sets_one() {
        let budget = WriteBudget::new(0);
        assert!(budget.charge_at(u64::MAX, Duration::ZERO));
        assert_eq!(budget.per_window(), None);
        budget.set_rate(1);
        assert_eq!(budget.per_window(), Some(60));
        assert!(!budget.charge_at(61, Duration::ZERO));
    }
}
