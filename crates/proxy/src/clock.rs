//! The wall clock the cache reads for freshness and ages: the system's, unless the
//! process asked it to follow tokio's clock ([`follow_tokio_time`]).
//!
//! The integration tests ask for that, so that on a paused runtime `tokio::time::advance`
//! ages stored responses as it moves the proxy's timers, and a test waits out no
//! `max-age` on the wall clock. The proxy itself never asks: it reads the system clock
//! once per read, as it would without this module, behind one atomic load.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

/// The system time and the instant at which [`now`] began following tokio's clock.
static TOKIO_ANCHOR: OnceLock<(SystemTime, Instant)> = OnceLock::new();

/// The current wall time: `SystemTime::now()`, or after [`follow_tokio_time`] the wall time
/// of that call moved on by as much as tokio's clock has moved since (on a paused runtime,
/// by its virtual time).
pub fn now() -> SystemTime {
    match TOKIO_ANCHOR.get() {
        None => SystemTime::now(),
        Some(&(wall, at)) => {
            let tokio_now = tokio::time::Instant::now().into_std();
            // A runtime's paused clock starts at the instant the runtime was built, which
            // may precede the anchor.
            let moved = match tokio_now.checked_duration_since(at) {
                Some(ahead) => wall.checked_add(ahead),
                None => wall.checked_sub(at.duration_since(tokio_now)),
            };
            moved.unwrap_or(wall)
        }
    }
}

/// Makes [`now`] follow tokio's clock from here on, for the whole process: for tests, whose
/// runtimes may be paused. Later calls change nothing.
pub fn follow_tokio_time() {
    TOKIO_ANCHOR.get_or_init(|| (SystemTime::now(), Instant::now()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The one test in the library that switches the clock: the others pass their times.
    #[tokio::test(start_paused = true)]
    async fn following_tokio_time_moves_with_a_paused_clock() {
        follow_tokio_time();
        let before = now();
        tokio::time::advance(Duration::from_secs(3600)).await;
        let after = now();
        let moved = after
            .duration_since(before)
            .expect("the clock went forward");
        assert!(moved >= Duration::from_secs(3600), "{moved:?}");
        assert!(moved < Duration::from_secs(3660), "{moved:?}");
    }
}
