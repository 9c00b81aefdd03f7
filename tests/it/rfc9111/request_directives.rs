//! RFC 9111 §5.2.1 and §5.4: request `Cache-Control` directives and `Pragma`.

use super::common::*;
use crate::support::{Reply, TestOrigin, TestProxy};

/// An origin with `ETag: "e1"` and `Cache-Control: <cc>` (plus `Age: <age>` when
/// non-zero), answering 304 to a matching `If-None-Match`.
async fn origin_with(cc: &'static str, age: u32) -> TestOrigin {
    TestOrigin::start_conditional("\"e1\"", move |_| {
        let reply = Reply::ok(cc, b"stored-body".to_vec());
        if age > 0 {
            reply.header("age", &age.to_string())
        } else {
            reply
        }
    })
    .await
}

/// An `always` proxy with `/d` stored from `origin`.
async fn stored(origin: &TestOrigin) -> TestProxy {
    let proxy = proxy_always(origin).await;
    fill(&proxy, "/d", &[], 1).await;
    proxy
}

/// RFC 9111 §5.2.1.4: request `no-cache` goes to the origin (`fwd=request`),
/// revalidating the stored entry with its `ETag`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_no_cache_revalidates_with_the_origin() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "no-cache")]).await;
    assert_forwarded(&seen, "request");
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body, b"stored-body");
    assert_eq!(origin.count("/d"), 2);
    let sent = origin.last_headers("/d").expect("forwarded");
    assert_eq!(
        sent.get("if-none-match").map(|v| v.as_bytes()),
        Some(&b"\"e1\""[..])
    );
}

/// RFC 9111 §5.2.1.1: request `max-age=N` refuses an entry older than N s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_max_age_below_the_age_forwards() {
    let origin = origin_with("max-age=100", 40).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "max-age=10")]).await;
    assert_forwarded(&seen, "request");
    assert_eq!(origin.count("/d"), 2);
    assert_eq!(seen.body, b"stored-body");
}

/// RFC 9111 §5.2.1.1: request `max-age=N` accepts an entry younger than N s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_max_age_above_the_age_hits() {
    let origin = origin_with("max-age=100", 40).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "max-age=80")]).await;
    assert_hit(&seen);
    assert_eq!(origin.count("/d"), 1);
}

/// RFC 9111 §5.2.1.1: request `max-age=0` always goes to the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_max_age_zero_forwards() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "max-age=0")]).await;
    assert_forwarded(&seen, "request");
    assert_eq!(origin.count("/d"), 2);
}

/// RFC 9111 §5.2.1.3: request `min-fresh=N` refuses an entry with less than N s left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_min_fresh_unmet_forwards() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "min-fresh=200")]).await;
    assert_forwarded(&seen, "request");
    assert_eq!(origin.count("/d"), 2);
}

/// RFC 9111 §5.2.1.3: request `min-fresh=N` accepts an entry with more than N s left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_min_fresh_met_hits() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "min-fresh=10")]).await;
    assert_hit(&seen);
    assert_eq!(origin.count("/d"), 1);
}

/// RFC 9111 §5.2.1.2: request `max-stale` (no value) accepts a stale entry
/// (`hit; detail=max-stale`, negative `ttl`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_max_stale_serves_a_stale_entry() {
    let origin = origin_with("max-age=60", 70).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "max-stale")]).await;
    assert_hit(&seen);
    assert_eq!(seen.body, b"stored-body");
    assert_eq!(seen.cache.detail.as_deref(), Some("max-stale"));
    let ttl = ttl(&seen);
    assert!((-20..0).contains(&ttl), "stale by about 10 s: {ttl}");
    assert_eq!(origin.count("/d"), 1);
}

/// RFC 9111 §5.2.1.2: `max-stale=N` accepts an entry stale by at most N s only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_max_stale_with_a_bound() {
    let origin = origin_with("max-age=60", 70).await;
    let proxy = stored(&origin).await;
    let within = get_with(&proxy, "/d", &[("cache-control", "max-stale=100")]).await;
    assert_hit(&within);
    assert_eq!(within.cache.detail.as_deref(), Some("max-stale"));
    assert_eq!(origin.count("/d"), 1);
    let beyond = get_with(&proxy, "/d", &[("cache-control", "max-stale=5")]).await;
    assert!(!beyond.cache.hit, "stale by 10 s > 5 s: {:?}", beyond.cache);
    assert_eq!(origin.count("/d"), 2);
}

/// RFC 9111 §5.2.1.7: `only-if-cached` with a fresh entry is a hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_if_cached_with_a_fresh_entry_hits() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "only-if-cached")]).await;
    assert_hit(&seen);
    assert_eq!(seen.body, b"stored-body");
    assert_eq!(origin.count("/d"), 1);
}

/// RFC 9111 §5.2.1.7: `only-if-cached` with nothing stored is a 504 and never reaches the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_if_cached_without_an_entry_is_504() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = proxy_always(&origin).await;
    let seen = get_with(&proxy, "/none", &[("cache-control", "only-if-cached")]).await;
    assert_eq!(seen.status, 504);
    assert_eq!(seen.cache.detail.as_deref(), Some("only-if-cached"));
    assert_eq!(seen.cache.entries, 1);
    assert_eq!(origin.total(), 0);
}

/// RFC 9111 §5.2.1.7: `only-if-cached` with only a stale entry is a 504 too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_if_cached_with_a_stale_entry_is_504() {
    let origin = origin_with("max-age=60", 70).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "only-if-cached")]).await;
    assert_eq!(seen.status, 504);
    assert_eq!(seen.cache.detail.as_deref(), Some("only-if-cached"));
    assert_eq!(origin.count("/d"), 1);
}

/// RFC 9111 §5.4: `Pragma: no-cache` without `Cache-Control` acts as request `no-cache`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pragma_no_cache_without_cache_control_forwards() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("pragma", "no-cache")]).await;
    assert_forwarded(&seen, "request");
    assert_eq!(origin.count("/d"), 2);
}

/// RFC 9111 §5.4: `Pragma` is ignored when the request has `Cache-Control`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pragma_is_ignored_with_cache_control() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = stored(&origin).await;
    let seen = get_with(
        &proxy,
        "/d",
        &[("pragma", "no-cache"), ("cache-control", "max-stale")],
    )
    .await;
    assert_hit(&seen);
    assert_eq!(origin.count("/d"), 1);
}

/// RFC 9111 §5.2.1.5: request `no-store`: the response is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_no_store_keeps_the_response_off_disk() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = proxy_always(&origin).await;
    let seen = get_with(&proxy, "/ns", &[("cache-control", "no-store")]).await;
    assert_eq!(seen.status, 200);
    assert!(!seen.cache.stored, "{:?}", seen.cache);
    assert_eq!(seen.cache.detail.as_deref(), Some("no-store"));
    let after = get_with(&proxy, "/ns", &[]).await;
    assert_forwarded(&after, "uri-miss");
    assert_eq!(origin.count("/ns"), 2);
}

/// RFC 9111 §5.2.1.5 (this cache's choice): a request with `no-store` is not served
/// the stored entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_no_store_is_not_served_from_storage() {
    let origin = origin_with("max-age=100", 0).await;
    let proxy = stored(&origin).await;
    let seen = get_with(&proxy, "/d", &[("cache-control", "no-store")]).await;
    assert!(!seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(seen.cache.fwd.as_deref(), Some("request"));
    assert_eq!(origin.count("/d"), 2);
}
