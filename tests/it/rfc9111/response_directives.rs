//! RFC 9111 §5.2.2 and §3.5, RFC 5861: response `Cache-Control` directives.

use std::time::Duration;

use super::common::*;
use crate::support::{Reply, TestOrigin, client, send};

/// RFC 9111 §5.2.2.5: a `no-store` response is never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_no_store_is_not_stored() {
    let origin = TestOrigin::start(|_| Reply::ok("no-store, max-age=100", b"x".to_vec())).await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/ns", &[]).await;
        assert_eq!(seen.cache.detail.as_deref(), Some("no-store"));
    }
    assert_eq!(origin.count("/ns"), 2);
    assert!(proxy.entry_files().is_empty());
}

/// RFC 9111 §5.2.2.3: with `must-understand`, a status whose caching rules this cache
/// implements (200) is stored despite the `no-store` beside it; one it does not (299)
/// is not stored at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn must_understand_stores_understood_statuses_only() {
    const CC: &str = "must-understand, no-store, max-age=100";
    let origin = TestOrigin::start(|head| {
        let status = if head.uri.path() == "/known" {
            200
        } else {
            299
        };
        Reply::status(status, b"mu".to_vec()).header("cache-control", CC)
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/known", &[], 1).await;
    let hit = get_with(&proxy, "/known", &[]).await;
    assert_hit(&hit);
    assert_eq!(header(&hit, "cache-control"), Some(CC));
    let unknown = get_with(&proxy, "/unknown", &[]).await;
    assert_eq!(unknown.status, 299);
    assert!(!unknown.cache.stored, "{:?}", unknown.cache);
    assert_eq!(unknown.cache.detail.as_deref(), Some("not-cacheable"));
    get_with(&proxy, "/unknown", &[]).await;
    assert_eq!(origin.count("/known"), 1);
    assert_eq!(origin.count("/unknown"), 2);
}

/// RFC 9111 §5.2.2.7: a `private` response is not stored by this shared cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_private_is_not_stored() {
    let origin = TestOrigin::start(|_| Reply::ok("private, max-age=100", b"x".to_vec())).await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/p", &[]).await;
        assert_eq!(seen.cache.detail.as_deref(), Some("private"));
    }
    assert_eq!(origin.count("/p"), 2);
    assert!(proxy.entry_files().is_empty());
}

/// RFC 9111 §5.2.2.4: a `no-cache` response with a validator is stored, but every
/// request revalidates it; the origin's 304s are answered from storage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_no_cache_is_stored_and_revalidated_every_time() {
    let origin =
        TestOrigin::start_conditional("\"nc\"", |_| Reply::ok("no-cache", b"nc-body".to_vec()))
            .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/nc", &[], 1).await;
    for n in 2..=4 {
        let seen = get_with(&proxy, "/nc", &[]).await;
        assert_eq!(seen.status, 200);
        assert_eq!(seen.body, b"nc-body");
        assert_forwarded(&seen, "stale");
        assert_eq!(seen.cache.fwd_status, Some(304));
        assert_eq!(origin.count("/nc"), n);
    }
}

/// Stores `/st` from `origin`, then makes the origin unreachable and asks again.
async fn ask_with_origin_down(
    origin: &TestOrigin,
    headers: &[(&str, &str)],
) -> crate::support::Seen {
    let proxy = proxy_always(origin).await;
    fill(&proxy, "/st", &[], 1).await;
    origin.go_down().await;
    get_with(&proxy, "/st", headers).await
}

/// RFC 9111 §5.2.2.2 and §4.2.4: a stale `must-revalidate` entry is never served when the
/// origin is unreachable: 504.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn must_revalidate_with_origin_unreachable_is_504() {
    let origin = stale_origin("max-age=60, must-revalidate", &Counter::default()).await;
    let seen = ask_with_origin_down(&origin, &[]).await;
    assert_eq!(seen.status, 504, "{:?}", seen.cache);
    assert_ne!(seen.body, b"stale-body");
}

/// RFC 9111 §5.2.2.2: `must-revalidate` overrides a request's `max-stale`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn must_revalidate_is_not_served_stale_to_max_stale() {
    let origin = stale_origin("max-age=60, must-revalidate", &Counter::default()).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/st", &[], 1).await;
    let seen = get_with(&proxy, "/st", &[("cache-control", "max-stale")]).await;
    assert!(!seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(origin.count("/st"), 2);
}

/// RFC 9111 §5.2.2.8: `proxy-revalidate` binds this shared cache like `must-revalidate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_revalidate_with_origin_unreachable_is_504() {
    let origin = stale_origin("max-age=60, proxy-revalidate", &Counter::default()).await;
    let seen = ask_with_origin_down(&origin, &[("cache-control", "max-stale")]).await;
    assert_eq!(seen.status, 504, "{:?}", seen.cache);
    assert_ne!(seen.body, b"stale-body");
}

/// RFC 5861 §4 (RFC 9111 §4.2.4): `stale-if-error` serves the stale entry when the origin
/// answers 500, 502, 503 or 504.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_if_error_serves_stale_on_server_errors() {
    let errors = Counter::default();
    let origin = stale_origin("max-age=60, stale-if-error=600", &errors).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/st", &[], 1).await;
    for status in [500, 502, 503, 504] {
        errors.set(status);
        let seen = get_with(&proxy, "/st", &[]).await;
        assert_eq!(seen.status, 200, "origin {status}: {:?}", seen.cache);
        assert_eq!(seen.body, b"stale-body");
        assert!(seen.cache.hit, "{:?}", seen.cache);
        assert_eq!(seen.cache.detail.as_deref(), Some("stale-if-error"));
        assert!(ttl(&seen) < 0);
    }
    assert_eq!(
        origin.count("/st"),
        5,
        "each request tried the origin first"
    );
}

/// RFC 5861 §4: `stale-if-error` serves the stale entry when the origin is unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_if_error_serves_stale_when_origin_unreachable() {
    let origin = stale_origin("max-age=60, stale-if-error=600", &Counter::default()).await;
    let seen = ask_with_origin_down(&origin, &[]).await;
    assert_eq!(seen.status, 200, "{:?}", seen.cache);
    assert_eq!(seen.body, b"stale-body");
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(seen.cache.detail.as_deref(), Some("stale-if-error"));
}

/// RFC 5861 §4: past its `stale-if-error` window (stale by 10 s > 5 s) the error passes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_if_error_window_exceeded_passes_the_error() {
    let errors = Counter::default();
    let origin = stale_origin("max-age=60, stale-if-error=5", &errors).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/st", &[], 1).await;
    errors.set(500);
    let seen = get_with(&proxy, "/st", &[]).await;
    assert_eq!(seen.status, 500);
    assert_eq!(seen.body, b"origin-error");
    assert_eq!(seen.cache.fwd_status, Some(500));
}

/// RFC 5861 §3: `stale-while-revalidate` serves the stale entry at once and refreshes it in
/// the background, once per key however many requests arrive meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_while_revalidate_serves_stale_and_refreshes_once() {
    let served = Counter::default();
    let first = served.clone();
    let origin = TestOrigin::start(move |_| {
        if first.bump() == 0 {
            Reply::ok("max-age=60, stale-while-revalidate=600", b"old".to_vec())
                .header("age", "70")
                .header("etag", "\"old\"")
        } else {
            // Slow enough that all concurrent requests arrive while it is in flight.
            Reply::ok("max-age=100", b"new".to_vec())
                .header("etag", "\"new\"")
                .header("x-rev", "2")
                .delayed(Duration::from_millis(300))
        }
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/swr", &[], 1).await;
    let url = proxy.url("/swr");
    let answers = futures_util::future::join_all((0..5).map(|_| send(client().get(&url)))).await;
    for seen in &answers {
        assert_eq!(seen.body, b"old", "{:?}", seen.cache);
        assert!(seen.cache.hit, "{:?}", seen.cache);
        assert_eq!(seen.cache.detail.as_deref(), Some("stale-while-revalidate"));
        assert!(ttl(seen) < 0);
    }
    // The one background refresh, and no more.
    let last = std::cell::RefCell::new(None);
    let seen = crate::support::eventually(
        || format!("never refreshed: {:?}", last.borrow()),
        async || {
            let seen = get_with(&proxy, "/swr", &[]).await;
            if seen.cache.hit && seen.cache.detail.is_none() && seen.body == b"new" {
                return Some(seen);
            }
            *last.borrow_mut() = Some(seen.cache);
            None
        },
    )
    .await;
    assert_eq!(header(&seen, "x-rev"), Some("2"));
    assert_eq!(origin.count("/swr"), 2, "exactly one background refresh");
    // It goes out on the client's behalf: with the forwarding fields of its request.
    let refresh = origin
        .last_headers("/swr")
        .expect("the origin saw the refresh");
    let forwarded_for = refresh.get("x-forwarded-for").and_then(|v| v.to_str().ok());
    assert_eq!(forwarded_for, Some("127.0.0.1"));
}

/// RFC 5861 §3: beyond the `stale-while-revalidate` window the request waits for the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_while_revalidate_window_exceeded_fetches_synchronously() {
    let origin = stale_origin("max-age=60, stale-while-revalidate=5", &Counter::default()).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/st", &[], 1).await;
    let seen = get_with(&proxy, "/st", &[]).await;
    assert_forwarded(&seen, "stale");
    assert_eq!(origin.count("/st"), 2);
}

/// RFC 5861 §3: the `stale-while-revalidate` window starts when the entry goes stale, on
/// the clock: two seconds past `max-age` a stale copy is served at once, six seconds past
/// it (beyond the five-second window) the request waits for the origin.
// On the paused clock: the entries age with `tokio::time::advance`.
#[tokio::test(start_paused = true)]
async fn stale_while_revalidate_window_is_counted_from_staleness() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=1, stale-while-revalidate=5", b"swr".to_vec()).header("etag", "\"w\"")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/within", &[], 1).await;
    fill(&proxy, "/beyond", &[], 2).await;
    assert_hit(&get_with(&proxy, "/beyond", &[]).await);
    tokio::time::advance(Duration::from_secs(3)).await;
    let within = get_with(&proxy, "/within", &[]).await;
    assert!(within.cache.hit, "{:?}", within.cache);
    assert_eq!(
        within.cache.detail.as_deref(),
        Some("stale-while-revalidate")
    );
    assert_eq!(within.body, b"swr");
    tokio::time::advance(Duration::from_secs(4)).await;
    let beyond = get_with(&proxy, "/beyond", &[]).await;
    assert_forwarded(&beyond, "stale");
    assert_eq!(origin.count("/beyond"), 2);
}

/// Sends `/auth` twice with `Authorization` to an origin answering `cc`.
async fn twice_with_authorization(cc: &'static str) -> (TestOrigin, crate::support::TestProxy) {
    let origin = TestOrigin::start(move |_| Reply::ok(cc, b"for-credentials".to_vec())).await;
    let proxy = proxy_always(&origin).await;
    let auth = [("authorization", "Bearer t1")];
    let first = get_with(&proxy, "/auth", &auth).await;
    assert!(first.cache.stored, "{cc}: {:?}", first.cache);
    proxy.wait_committed(1).await;
    let second = get_with(&proxy, "/auth", &auth).await;
    assert_hit(&second);
    assert_eq!(second.body, b"for-credentials");
    assert_eq!(origin.count("/auth"), 1);
    (origin, proxy)
}

/// RFC 9111 §3.5: `public` lets a response to a request with `Authorization` be stored and reused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_with_public_is_stored() {
    twice_with_authorization("public, max-age=100").await;
}

/// RFC 9111 §3.5: `s-maxage` lets a response to a request with `Authorization` be stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_with_s_maxage_is_stored() {
    twice_with_authorization("s-maxage=100").await;
}

/// RFC 9111 §3.5: `must-revalidate` lets a response to a request with `Authorization` be stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_with_must_revalidate_is_stored() {
    twice_with_authorization("max-age=100, must-revalidate").await;
}

/// RFC 9111 §3.5: without those directives, a response to `Authorization` is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_without_permission_is_not_stored() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=100", b"secret".to_vec())).await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/auth", &[("authorization", "Bearer t1")]).await;
        assert!(!seen.cache.stored && !seen.cache.hit, "{:?}", seen.cache);
        assert_eq!(seen.cache.detail.as_deref(), Some("authorization"));
    }
    assert_eq!(origin.count("/auth"), 2);
    assert!(proxy.entry_files().is_empty());
}

/// RFC 9111 §3.5: a stored non-public entry is not served to a request with `Authorization`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_entry_is_not_served_to_authorization() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=100", b"anon".to_vec())).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/a", &[], 1).await;
    let seen = get_with(&proxy, "/a", &[("authorization", "Bearer t1")]).await;
    assert!(!seen.cache.hit, "{:?}", seen.cache);
    assert_forwarded(&seen, "request");
    assert_eq!(seen.cache.detail.as_deref(), Some("authorization"));
    assert_eq!(origin.count("/a"), 2);
}
