//! Every request's count and bytes, sampled or not, in per-thread stripes.
//!
//! Why count them at all: a miniature's miss ratio over its own sampled requests swings
//! with the few hottest keys, which a sample holds or lacks whole (one key may carry
//! several percent of the requests). SHARDS' adjustment (Waldspurger et al., FAST 2015)
//! divides the sampled misses, scaled by `1 / R`, by the requests actually seen instead:
//! a hot key missing from the sample then counts as the hits it would mostly have been.
//!
//! Why stripes: one counter every worker adds to would move its cache line between cores
//! on every request. A thread adds to its own stripe (threads are spread over the stripes
//! in turn), and a reader sums them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Stripes per estimator; a power of two above the usual worker count.
const STRIPES: usize = 32;

/// One thread's counts, on a cache line of its own.
#[derive(Default)]
#[repr(align(64))]
struct Stripe {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// Requests and body bytes seen: see the module docs.
pub(super) struct Totals {
    stripes: Box<[Stripe]>,
}

thread_local! {
    /// This thread's stripe.
    static STRIPE: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Relaxed) % STRIPES
    };
}

impl Totals {
    pub(super) fn new() -> Totals {
        Totals {
            stripes: (0..STRIPES).map(|_| Stripe::default()).collect(),
        }
    }

    /// Counts a request of `bytes`.
    #[inline]
    pub(super) fn add(&self, bytes: u64) {
        let stripe = &self.stripes[STRIPE.with(|s| *s)];
        stripe.requests.fetch_add(1, Relaxed);
        stripe.bytes.fetch_add(bytes, Relaxed);
    }

    /// Requests and bytes counted since the last [`Totals::take`].
    pub(super) fn read(&self) -> (f64, f64) {
        self.sum(|a| a.load(Relaxed))
    }

    /// The same, starting the count again.
    pub(super) fn take(&self) -> (f64, f64) {
        self.sum(|a| a.swap(0, Relaxed))
    }

    fn sum(&self, read: impl Fn(&AtomicU64) -> u64) -> (f64, f64) {
        self.stripes.iter().fold((0.0, 0.0), |(r, b), s| {
            (r + read(&s.requests) as f64, b + read(&s.bytes) as f64)
        })
    }
}
