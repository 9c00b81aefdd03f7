//! RFC 9111 §3 and §4.2.2, RFC 9110 §15.1 and §15.2: which status codes are stored, and when.

use super::common::*;
use crate::support::{Reply, TestOrigin, http_date_from_now};

/// A reply with `status`, `Date: now`, `Last-Modified` ten days ago and no explicit freshness.
fn heuristic_only(status: u16) -> Reply {
    Reply::status(status, format!("status {status}").into_bytes()).headers(&[
        ("date", &http_date_from_now(0)),
        ("last-modified", &http_date_from_now(-10 * 86_400)),
    ])
}

/// Asserts two GETs of `path` both reach the origin and nothing is stored.
async fn assert_never_stored(status: u16, path: &str) {
    let origin = TestOrigin::start(move |_| heuristic_only(status)).await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, path, &[]).await;
        assert_eq!(seen.status, status);
        assert!(
            !seen.cache.stored && !seen.cache.hit,
            "{status}: {:?}",
            seen.cache
        );
    }
    assert_eq!(origin.count(path), 2, "{status}");
    assert!(proxy.entry_files().is_empty(), "{status}");
}

/// RFC 9111 §4.2.2 (this cache: no heuristic freshness for errors, against cache-poisoned
/// denial of service): a 404 with only `Last-Modified` is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_without_explicit_freshness_is_not_stored() {
    assert_never_stored(404, "/missing").await;
}

/// RFC 9111 §4.2.2 (this cache): the other heuristically cacheable error statuses (405,
/// 410, 414, 501) are not stored without explicit freshness either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_statuses_without_explicit_freshness_are_not_stored() {
    for status in [405, 410, 414, 501] {
        assert_never_stored(status, "/err").await;
    }
}

/// RFC 9111 §3: a 500 is not cacheable by default: without freshness it is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_error_without_freshness_is_not_stored() {
    assert_never_stored(500, "/boom").await;
}

/// RFC 9111 §3: a 302 is not heuristically cacheable: without explicit freshness it is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_302_without_explicit_freshness_is_not_stored() {
    assert_never_stored(302, "/found").await;
}

/// RFC 9111 §3 and §4.2.1: a 404 with explicit freshness (`max-age=60`) is stored and hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_with_max_age_is_stored() {
    let origin = TestOrigin::start(|_| Reply {
        status: 404,
        ..Reply::ok("max-age=60", b"gone for now".to_vec())
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/nf", &[], 1).await;
    let hit = get_with(&proxy, "/nf", &[]).await;
    assert_eq!(hit.status, 404);
    assert_hit(&hit);
    assert_eq!(hit.body, b"gone for now");
    assert_eq!(origin.count("/nf"), 1);
}

/// Stores a `status` reply that has only heuristic freshness and expects a hit with it.
async fn heuristically_stored(status: u16) {
    let origin = TestOrigin::start(move |_| {
        heuristic_only(status).header("location", "http://cache.example/elsewhere")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/moved", &[], 1).await;
    let hit = get_with(&proxy, "/moved", &[]).await;
    assert_eq!(hit.status, status);
    assert_hit(&hit);
    assert_eq!(
        header(&hit, "location"),
        Some("http://cache.example/elsewhere")
    );
    assert_eq!(origin.count("/moved"), 1);
}

/// RFC 9110 §15.1 and RFC 9111 §4.2.2: a 301 is heuristically cacheable (`Last-Modified` only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_permanently_is_stored_heuristically() {
    heuristically_stored(301).await;
}

/// RFC 9110 §15.1 and RFC 9111 §4.2.2: a 308 is heuristically cacheable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_redirect_is_stored_heuristically() {
    heuristically_stored(308).await;
}

/// RFC 9111 §3: a 204 with `max-age` is stored and served (without a body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_content_with_max_age_is_stored() {
    let origin =
        TestOrigin::start(|_| Reply::bodiless(204).header("cache-control", "max-age=60")).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/empty", &[], 1).await;
    let hit = get_with(&proxy, "/empty", &[]).await;
    assert_eq!(hit.status, 204);
    assert_hit(&hit);
    assert!(hit.body.is_empty());
    assert_eq!(origin.count("/empty"), 1);
}

/// RFC 9111 §3.3: a 206 is never stored as if it were the whole object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_content_is_never_stored() {
    let origin = TestOrigin::start(|_| Reply {
        status: 206,
        ..Reply::ok("max-age=60", b"0123456789".to_vec()).header("content-range", "bytes 0-9/100")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/part", &[]).await;
        assert_eq!(seen.status, 206);
        assert!(!seen.cache.stored && !seen.cache.hit, "{:?}", seen.cache);
    }
    assert_eq!(origin.count("/part"), 2);
    assert!(proxy.entry_files().is_empty());
}

/// RFC 9110 §15.2 and RFC 9111 §3: an origin's interim response (103 Early Hints) is never
/// stored and its fields never reach the final response, whether it is forwarded from
/// the origin or served from storage. (It is not forwarded either: see the
/// Standards table in `docs/guide/standards.md` for why.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_responses_are_neither_stored_nor_merged() {
    let (origin, _stop) = crate::support::start_raw_origin(
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
          HTTP/1.1 200 OK\r\nCache-Control: max-age=100\r\nContent-Length: 5\r\n\r\nfinal",
    )
    .await;
    let proxy = crate::support::TestProxy::start(origin, |c| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always
    })
    .await;
    let miss = fill(&proxy, "/hints", &[], 1).await;
    let hit = get_with(&proxy, "/hints", &[]).await;
    assert_hit(&hit);
    for seen in [&miss, &hit] {
        assert_eq!(seen.status, 200);
        assert_eq!(seen.body, b"final");
        assert_eq!(header(seen, "link"), None, "{:?}", seen.headers);
    }
}

/// RFC 9111 §3 and §4.2.2: a response the origin marked `public` gets a heuristic
/// lifetime whatever its status, a 599 unknown to this cache and a 404 included: the
/// origin asked for it to be cached, so it is not cached by accident.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_response_of_any_status_is_stored_with_a_heuristic_lifetime() {
    for status in [599, 404] {
        let origin =
            TestOrigin::start(move |_| heuristic_only(status).header("cache-control", "public"))
                .await;
        let proxy = proxy_always(&origin).await;
        let first = get_with(&proxy, "/public", &[]).await;
        assert_eq!(first.status, status);
        assert!(first.cache.stored, "{status}: {:?}", first.cache);
        // The entry exists once its fill committed, which may be after the body arrived.
        proxy.wait_committed(1).await;
        let second = get_with(&proxy, "/public", &[]).await;
        assert!(second.cache.hit, "{status}: {:?}", second.cache);
        assert_eq!(origin.count("/public"), 1, "{status}");
    }
}
