//! RFC 9111 §4.2.4: a cache may serve a stale response when it is disconnected from the
//! origin. `cache.stale_if_unreachable` is how long past its freshness a stored response
//! may still be served while the origin cannot be reached (off by default); it never
//! overrides a response that forbids stale service, a client that asked for validation, or
//! an origin that answered (even with an error).

use std::time::Duration;

use super::common::*;
use crate::support::{TestOrigin, TestProxy};

/// A proxy with admission `always` and `cache.stale_if_unreachable = allowance`.
async fn proxy_allowing(origin: &TestOrigin, allowance: Duration) -> TestProxy {
    TestProxy::start(origin.addr, move |c| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always;
        c.cache.stale_if_unreachable = allowance;
    })
    .await
}

/// Stores `/st`, takes the origin down, and asks again with `headers`.
async fn ask_after_outage(
    proxy: &TestProxy,
    origin: &TestOrigin,
    headers: &[(&str, &str)],
) -> crate::support::Seen {
    fill(proxy, "/st", &[], 1).await;
    origin.go_down().await;
    get_with(proxy, "/st", headers).await
}

/// RFC 9111 §4.2.4: within the allowance, the stale entry answers while the origin is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_served_while_the_origin_is_unreachable() {
    let origin = stale_origin("max-age=60", &Counter::default()).await;
    let proxy = proxy_allowing(&origin, Duration::from_secs(600)).await;
    let seen = ask_after_outage(&proxy, &origin, &[]).await;
    assert_eq!(seen.status, 200, "{:?}", seen.cache);
    assert_eq!(seen.body, b"stale-body");
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(seen.cache.detail.as_deref(), Some("stale-if-unreachable"));
    assert!(ttl(&seen) < 0);
}

/// Off by default: without `stale-if-error` the outage is a 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_an_outage_is_502() {
    let origin = stale_origin("max-age=60", &Counter::default()).await;
    let proxy = proxy_always(&origin).await;
    let seen = ask_after_outage(&proxy, &origin, &[]).await;
    assert_eq!(seen.status, 502, "{:?}", seen.cache);
    assert_eq!(seen.cache.detail.as_deref(), Some("origin-unreachable"));
}

/// Past the allowance (stale by 10 s > 5 s) the outage is a 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_allowance_an_outage_is_502() {
    let origin = stale_origin("max-age=60", &Counter::default()).await;
    let proxy = proxy_allowing(&origin, Duration::from_secs(5)).await;
    let seen = ask_after_outage(&proxy, &origin, &[]).await;
    assert_eq!(seen.status, 502, "{:?}", seen.cache);
}

/// RFC 9111 §5.2.2.2: `must-revalidate` forbids serving stale even when disconnected: 504.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn must_revalidate_is_never_served_stale() {
    let origin = stale_origin("max-age=60, must-revalidate", &Counter::default()).await;
    let proxy = proxy_allowing(&origin, Duration::from_secs(600)).await;
    let seen = ask_after_outage(&proxy, &origin, &[]).await;
    assert_eq!(seen.status, 504, "{:?}", seen.cache);
    assert_ne!(seen.body, b"stale-body");
}

/// RFC 9111 §5.2.1.4: a client's `no-cache` asks for validation; an outage is then an
/// error, not the stale entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_asking_for_validation_gets_the_error() {
    let origin = stale_origin("max-age=60", &Counter::default()).await;
    let proxy = proxy_allowing(&origin, Duration::from_secs(600)).await;
    let seen = ask_after_outage(&proxy, &origin, &[("cache-control", "no-cache")]).await;
    assert_eq!(seen.status, 502, "{:?}", seen.cache);
    assert_ne!(seen.body, b"stale-body");
}

/// Only a disconnection counts: an origin that answers 503 is not unreachable, and its
/// answer passes through (that is what `stale-if-error` is for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_error_status_passes_through() {
    let error = Counter::default();
    let origin = stale_origin("max-age=60", &error).await;
    let proxy = proxy_allowing(&origin, Duration::from_secs(600)).await;
    fill(&proxy, "/st", &[], 1).await;
    error.set(503);
    let seen = get_with(&proxy, "/st", &[]).await;
    assert_eq!(seen.status, 503, "{:?}", seen.cache);
    assert_eq!(seen.body, b"origin-error");
}
