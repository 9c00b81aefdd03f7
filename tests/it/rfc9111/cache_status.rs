//! RFC 9211: the `Cache-Status` entry this cache adds to every response.

use super::common::*;
use crate::support::{Reply, Seen, TestOrigin, TestProxy, refusing_address};

/// GETs are fresh for 100 s; `/missing` is a 404 with `max-age=0`; other methods get 201.
/// Every answer carries an upstream cache's own `Cache-Status`.
async fn origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let reply = if head.method != http::Method::GET {
            Reply::status(201, b"created".to_vec())
        } else if head.uri.path() == "/missing" {
            Reply {
                status: 404,
                ..Reply::ok("max-age=0", b"nope".to_vec())
            }
        } else {
            Reply::ok("max-age=100", b"ok".to_vec())
        };
        reply.header("cache-status", "upstream; hit, other-cache; fwd=uri-miss")
    })
    .await
}

/// Asserts exactly one `secondhit` entry and none of the origin's.
fn assert_ours_only(seen: &Seen) {
    assert_eq!(
        seen.cache.entries,
        1,
        "{:?}",
        seen.headers.get_all("cache-status")
    );
    for value in seen.headers.get_all("cache-status") {
        let text = value.to_str().expect("visible ASCII");
        assert!(
            !text.contains("upstream") && !text.contains("other-cache"),
            "{text}"
        );
    }
}

/// RFC 9211 §2: every response carries exactly one entry for this cache, and the origin's
/// entries are replaced by it (misses, stores, hits, pass-throughs, errors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_has_exactly_one_entry_of_ours() {
    let origin = origin().await;
    let proxy = proxy_always(&origin).await;
    assert_ours_only(&fill(&proxy, "/one", &[], 1).await);
    assert_ours_only(&get_with(&proxy, "/one", &[]).await);
    assert_ours_only(&request(&proxy, "POST", "/one", &[]).await);
    assert_ours_only(&get_with(&proxy, "/missing", &[]).await);
    let (_held, refusing) = refusing_address();
    let down = TestProxy::start(refusing, |_| {}).await;
    let error = get_with(&down, "/x", &[]).await;
    assert_eq!(error.status, 502);
    assert_eq!(error.cache.entries, 1);
}

/// RFC 9211 §2.3: a forwarded response carries `fwd-status` with the origin's status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_responses_carry_fwd_status() {
    let origin = origin().await;
    let proxy = proxy_always(&origin).await;
    let miss = get_with(&proxy, "/one", &[]).await;
    assert_eq!(miss.cache.fwd.as_deref(), Some("uri-miss"));
    assert_eq!(miss.cache.fwd_status, Some(200));
    let post = request(&proxy, "POST", "/form", &[]).await;
    assert_eq!(post.cache.fwd.as_deref(), Some("method"));
    assert_eq!(post.cache.fwd_status, Some(201));
    let missing = get_with(&proxy, "/missing", &[]).await;
    assert_eq!(missing.cache.fwd_status, Some(404));
}

/// RFC 9211 §2.4: a hit carries `ttl`, the remaining freshness, and no `fwd`/`fwd-status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_carry_ttl() {
    let origin = origin().await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/one", &[], 1).await;
    let hit = get_with(&proxy, "/one", &[]).await;
    assert_hit(&hit);
    assert!(hit.cache.fwd_status.is_none(), "{:?}", hit.cache);
    let ttl = ttl(&hit);
    assert!((90..=100).contains(&ttl), "{ttl}");
}

/// RFC 9211 §2.5: `stored` appears only on the response whose body was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_appears_only_when_written() {
    let origin = origin().await;
    let proxy = proxy_always(&origin).await;
    let first = fill(&proxy, "/one", &[], 1).await;
    assert!(first.cache.stored);
    let hit = get_with(&proxy, "/one", &[]).await;
    assert!(!hit.cache.stored, "{:?}", hit.cache);
    let post = request(&proxy, "POST", "/form", &[]).await;
    assert!(!post.cache.stored, "{:?}", post.cache);
}

/// RFC 9211 §2.8 (`detail`): an origin that stops answering (listener gone, kept-alive
/// connections closed) gives a 502 with one entry of ours naming why; this also checks
/// the harness's `go_down`, which the stale-if-error and must-revalidate scenarios use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_gone_down_is_a_502_with_one_entry() {
    let origin = origin().await;
    let proxy = proxy_always(&origin).await;
    assert_eq!(get_with(&proxy, "/before", &[]).await.status, 200);
    origin.go_down().await;
    let seen = get_with(&proxy, "/after", &[]).await;
    assert_eq!(seen.status, 502, "{:?}", seen.cache);
    assert_eq!(seen.cache.entries, 1);
    assert_eq!(seen.cache.detail.as_deref(), Some("origin-unreachable"));
    assert_eq!(origin.count("/after"), 0);
}
