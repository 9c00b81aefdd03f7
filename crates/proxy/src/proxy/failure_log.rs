//! The diagnostic log's line about a request the proxy answered with an error of its own
//! (`request failed`). A failure can come with every request (an origin that is down or
//! saturated answers thousands of them with 502/503/504), so the warning is throttled per
//! [`ErrorKind`] as the other per-request lines are (`logging::throttle`): one line per
//! kind per [`throttle::EVERY`], saying how many of that kind were held back since the
//! last, while every failure still goes to debug and to the `errors` counter.

use std::fmt::Display;

use crate::logging::throttle::{self, Throttle};
use crate::outcome::ErrorKind;
use crate::proxy::error::ProxyError;

/// One throttle per error kind, indexed like [`ErrorKind::ALL`].
pub(super) type FailureThrottles = [Throttle; ErrorKind::ALL.len()];

/// The process's `request failed` throttles.
pub(super) static FAILURE_LOG: FailureThrottles = [const { Throttle::new() }; ErrorKind::ALL.len()];

/// Logs a failed request: at debug always, and at warn when `throttles` let the line of
/// its kind through at `now_ms` (the throttles' clock, [`throttle::clock_ms`], passed in so
/// that a test can inject it).
pub(super) fn log_failure(
    throttles: &FailureThrottles,
    now_ms: u64,
    method: &dyn Display,
    uri: &dyn Display,
    error: &ProxyError,
) {
    let kind = error.kind();
    tracing::debug!(%method, %uri, %error, kind = kind.as_str(), "request failed");
    if let Some(held_back) = throttles[kind as usize].admit_at(now_ms) {
        tracing::warn!(
            %method,
            %uri,
            %error,
            kind = kind.as_str(),
            held_back,
            "request failed"
        );
    }
}

/// [`log_failure`] on the process's throttles and clock.
pub(super) fn log(method: &dyn Display, uri: &dyn Display, error: &ProxyError) {
    log_failure(&FAILURE_LOG, throttle::clock_ms(), method, uri, error);
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::origin::OriginError;

    /// The warn lines written, as text.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn taken(&self) -> Vec<String> {
            let mut bytes = self.0.lock().expect("not poisoned");
            let text = String::from_utf8(std::mem::take(&mut *bytes)).expect("UTF-8");
            text.lines().map(str::to_owned).collect()
        }
    }

    #[test]
    fn a_flood_of_one_kind_is_one_warning_per_interval_with_the_count_held_back() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let throttles: FailureThrottles = [const { Throttle::new() }; ErrorKind::ALL.len()];
        let busy = ProxyError::Origin(OriginError::Busy(Duration::from_secs(1)));
        let only = ProxyError::OnlyIfCached;
        let every = u64::try_from(throttle::EVERY.as_millis()).expect("fits");
        let start = 1_000;
        tracing::subscriber::with_default(subscriber, || {
            for n in 0..1_872 {
                log_failure(&throttles, start + n % every, &"GET", &"/busy", &busy);
            }
            let first = lines.taken();
            assert_eq!(
                first.len(),
                1,
                "one line for the flood: {:?}",
                first.first()
            );
            assert!(first[0].contains("WARN"), "{first:?}");
            assert!(first[0].contains("kind=\"origin-busy\""), "{first:?}");
            assert!(first[0].contains("held_back=0"), "{first:?}");

            // Another kind has its own throttle: its first failure is logged.
            log_failure(&throttles, start + 1, &"GET", &"/only", &only);
            let other = lines.taken();
            assert_eq!(other.len(), 1, "{other:?}");
            assert!(other[0].contains("kind=\"only-if-cached\""), "{other:?}");

            // The next interval's first failure of the kind says how many were held back.
            for n in 0..3 {
                log_failure(&throttles, start + every + n, &"GET", &"/busy", &busy);
            }
            let next = lines.taken();
            assert_eq!(next.len(), 1, "{next:?}");
            assert!(next[0].contains("held_back=1871"), "{next:?}");
        });
    }
}
