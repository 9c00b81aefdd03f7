//! RFC 9111 §4.3: validating stale entries with the origin, and answering clients'
//! own conditional requests from storage.

use super::common::*;
use crate::support::{Reply, TestOrigin, TestProxy, http_date_from_now, send_until_hit};

const LAST_MODIFIED: &str = "Mon, 01 Jan 2024 00:00:00 GMT";

/// An origin whose `/r` is `max-age=0` with `ETag: "v1"`, answering 304 to a matching
/// `If-None-Match`.
async fn stale_etag_origin() -> TestOrigin {
    TestOrigin::start_conditional("\"v1\"", |_| Reply::ok("max-age=0", b"body-v1".to_vec())).await
}

/// RFC 9111 §4.3.1: a stale entry with an `ETag` is revalidated with `If-None-Match`;
/// a 304 is answered with the stored body (`fwd=stale; fwd-status=304`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_entry_is_revalidated_with_if_none_match() {
    let origin = stale_etag_origin().await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/r", &[], 1).await;
    let second = get_with(&proxy, "/r", &[]).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.body, b"body-v1");
    assert_forwarded(&second, "stale");
    assert_eq!(second.cache.fwd_status, Some(304));
    let sent = origin
        .last_headers("/r")
        .expect("revalidation reached the origin");
    assert_eq!(
        sent.get("if-none-match").map(|v| v.as_bytes()),
        Some(&b"\"v1\""[..])
    );
    assert_eq!(origin.count("/r"), 2);
}

/// RFC 9111 §4.3.1: with only `Last-Modified`, revalidation sends `If-Modified-Since`
/// with that date.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_entry_with_last_modified_is_revalidated_with_if_modified_since() {
    let origin = TestOrigin::start(|head| {
        let reply =
            Reply::ok("max-age=0", b"lm-body".to_vec()).header("last-modified", LAST_MODIFIED);
        if request_header(head, "if-modified-since") == Some(LAST_MODIFIED) {
            reply.into_not_modified()
        } else {
            reply
        }
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/lm", &[], 1).await;
    let second = get_with(&proxy, "/lm", &[]).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.body, b"lm-body");
    assert_forwarded(&second, "stale");
    assert_eq!(second.cache.fwd_status, Some(304));
    let sent = origin.last_headers("/lm").expect("revalidated");
    assert_eq!(
        sent.get("if-modified-since").and_then(|v| v.to_str().ok()),
        Some(LAST_MODIFIED)
    );
}

/// RFC 9111 §4.3.4 and §3.2: a 304 updates the stored header fields (a new `max-age`
/// makes the entry fresh, a new `X-Rev` is served) without rewriting the body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_modified_updates_stored_headers_without_rewriting_the_body() {
    let origin = TestOrigin::start_conditional("\"u1\"", |head| {
        if head.headers.contains_key("if-none-match") {
            Reply::ok("max-age=100", b"never-sent".to_vec()).header("x-rev", "2")
        } else {
            Reply::ok("max-age=0", b"original".to_vec()).header("x-rev", "1")
        }
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/u", &[], 1).await;
    let revalidated = get_with(&proxy, "/u", &[]).await;
    assert_forwarded(&revalidated, "stale");
    assert_eq!(revalidated.cache.fwd_status, Some(304));
    assert_eq!(revalidated.body, b"original");
    let hit = send_until_hit(|| crate::support::client().get(proxy.url("/u"))).await;
    assert_eq!(hit.body, b"original");
    assert_eq!(
        header(&hit, "x-rev"),
        Some("2"),
        "the 304's header replaced the stored one"
    );
    assert_eq!(
        proxy.entry_files().len(),
        1,
        "one entry, the body was not rewritten"
    );
    assert_eq!(
        origin.count("/u"),
        2,
        "fresh after the 304: no further origin request"
    );
}

/// RFC 9111 §4.3.3: a full 200 in answer to a revalidation replaces the stored entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_answer_to_revalidation_replaces_the_entry() {
    let origin = TestOrigin::start(|head| {
        if head.headers.contains_key("if-none-match") {
            Reply::ok("max-age=100", b"version-2".to_vec()).header("etag", "\"v2\"")
        } else {
            Reply::ok("max-age=0", b"version-1".to_vec()).header("etag", "\"v1\"")
        }
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/rep", &[], 1).await;
    let second = get_with(&proxy, "/rep", &[]).await;
    assert_forwarded(&second, "stale");
    assert_eq!(second.cache.fwd_status, Some(200));
    assert!(second.cache.stored, "{:?}", second.cache);
    assert_eq!(second.body, b"version-2");
    proxy.wait_committed(2).await;
    let hit = get_with(&proxy, "/rep", &[]).await;
    assert_hit(&hit);
    assert_eq!(hit.body, b"version-2");
}

/// An origin whose entries are fresh for 100 s, with `ETag: "a"` and a Last-Modified.
async fn fresh_validated_origin() -> TestOrigin {
    TestOrigin::start_conditional("\"a\"", |_| {
        Reply::ok("max-age=100", b"fresh-body".to_vec()).header("last-modified", LAST_MODIFIED)
    })
    .await
}

/// Stores `/c`, then sends it with `conditional` headers.
async fn conditional_on_fresh(conditional: &[(&str, &str)]) -> (TestOrigin, crate::support::Seen) {
    let origin = fresh_validated_origin().await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/c", &[], 1).await;
    let seen = get_with(&proxy, "/c", conditional).await;
    assert_eq!(origin.count("/c"), 1, "answered from storage");
    (origin, seen)
}

/// Asserts a 304 from storage with the fields RFC 9110 §15.4.5 requires.
fn assert_not_modified_from_cache(seen: &crate::support::Seen) {
    assert_eq!(seen.status, 304, "{:?}", seen.cache);
    assert!(seen.body.is_empty());
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(header(seen, "etag"), Some("\"a\""));
    assert!(header(seen, "cache-control").is_some());
    assert!(header(seen, "date").is_some());
}

/// RFC 9111 §4.3.2: a client's `If-None-Match` matching a fresh entry gets 304 from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_if_none_match_on_fresh_entry_is_answered_304() {
    let (_origin, seen) = conditional_on_fresh(&[("if-none-match", "\"a\"")]).await;
    assert_not_modified_from_cache(&seen);
}

/// RFC 9111 §4.3.2 and RFC 9110 §13.1.2: `If-None-Match` uses the weak comparison
/// (`W/"a"` matches `"a"`), and may list several tags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_if_none_match_uses_weak_comparison_and_lists() {
    let (_origin, seen) = conditional_on_fresh(&[("if-none-match", "\"zz\", W/\"a\"")]).await;
    assert_not_modified_from_cache(&seen);
}

/// RFC 9111 §4.3.2: a non-matching `If-None-Match` gets the full 200 from storage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_if_none_match_not_matching_gets_the_body() {
    let (_origin, seen) = conditional_on_fresh(&[("if-none-match", "\"other\"")]).await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body, b"fresh-body");
    assert_hit(&seen);
}

/// RFC 9111 §4.3.2: `If-Modified-Since` at or after `Last-Modified` gets 304 from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_if_modified_since_not_older_is_answered_304() {
    let (_origin, seen) = conditional_on_fresh(&[("if-modified-since", LAST_MODIFIED)]).await;
    assert_not_modified_from_cache(&seen);
}

/// RFC 9111 §4.3.2 and RFC 9110 §13.1.1: a fresh entry with an `ETag` and no
/// `Last-Modified` answers a matching `If-None-Match` with 304.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_if_none_match_without_last_modified_is_answered_304() {
    let origin =
        TestOrigin::start_conditional("\"e\"", |_| Reply::ok("max-age=100", b"e".to_vec())).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/e", &[], 1).await;
    let seen = get_with(&proxy, "/e", &[("if-none-match", "\"e\"")]).await;
    assert_eq!(seen.status, 304, "{:?}", seen.cache);
    assert!(seen.cache.hit && seen.body.is_empty(), "{:?}", seen.cache);
    assert_eq!(header(&seen, "etag"), Some("\"e\""));
    assert_eq!(origin.count("/e"), 1);
}

/// RFC 9111 §4.3.2: without `Last-Modified` (and without an `ETag`), a client's
/// `If-Modified-Since` is evaluated against the stored `Date`: not before it, 304; before
/// it, the full 200 — both from storage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_if_modified_since_without_last_modified_uses_the_date() {
    let date = http_date_from_now(-10);
    let origin = TestOrigin::start(move |_| {
        Reply::ok("max-age=100", b"dated".to_vec()).header("date", &date)
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/d", &[], 1).await;
    let now = http_date_from_now(0);
    let seen = get_with(&proxy, "/d", &[("if-modified-since", &now)]).await;
    assert_eq!(seen.status, 304, "{:?}", seen.cache);
    assert!(seen.cache.hit && seen.body.is_empty(), "{:?}", seen.cache);
    let earlier = http_date_from_now(-3600);
    let seen = get_with(&proxy, "/d", &[("if-modified-since", &earlier)]).await;
    assert_eq!(seen.status, 200);
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(seen.body, b"dated");
    assert_eq!(origin.count("/d"), 1);
}

/// RFC 9111 §4.3.2: `If-Modified-Since` before `Last-Modified` gets the full 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_if_modified_since_older_gets_the_body() {
    let (_origin, seen) =
        conditional_on_fresh(&[("if-modified-since", "Sun, 01 Jan 2023 00:00:00 GMT")]).await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body, b"fresh-body");
    assert_hit(&seen);
}

/// RFC 9110 §13.1.2 on a miss: the proxy holds the client's `If-None-Match` back so the
/// origin sends a storable 200; when that 200 matches it, the client still gets its 304,
/// and the object is stored all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_if_none_match_on_a_stored_miss_is_answered_304() {
    let origin = fresh_validated_origin().await;
    let proxy = proxy_always(&origin).await;
    let seen = get_with(&proxy, "/m", &[("if-none-match", "\"a\"")]).await;
    assert_eq!(seen.status, 304, "{:?}", seen.cache);
    assert!(seen.body.is_empty());
    assert_eq!(header(&seen, "etag"), Some("\"a\""));
    assert_forwarded(&seen, "uri-miss");
    assert!(seen.cache.stored, "{:?}", seen.cache);
    let sent = origin.last_headers("/m").expect("fetched");
    assert!(
        !sent.contains_key("if-none-match"),
        "the origin was asked for the whole object: {sent:?}"
    );
    proxy.wait_committed(1).await;
    let whole = get_with(&proxy, "/m", &[]).await;
    assert_hit(&whole);
    assert_eq!(whole.body, b"fresh-body");
    assert_eq!(origin.count("/m"), 1);
}

/// An origin whose `/s` is fresh for 100 s with `ETag: "s1"`, and whose 304 to a
/// revalidation carries the fields `not_modified`: what an origin that refreshes a
/// session, or changes its mind about sharing, sends.
async fn revalidated_with(not_modified: &'static [(&'static str, &'static str)]) -> TestOrigin {
    TestOrigin::start_conditional("\"s1\"", move |head| {
        if head.headers.contains_key("if-none-match") {
            Reply::status(200, Vec::new()).headers(not_modified)
        } else {
            Reply::ok("max-age=100", b"shared".to_vec())
        }
    })
    .await
}

const HOST: &[(&str, &str)] = &[("host", "cache.test")];

/// A shared cache never hands one client's session to another: a 304's `Set-Cookie`
/// reaches the client whose request revalidated the entry, and nobody after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_cookie_of_a_304_goes_only_to_the_client_that_revalidated() {
    let origin = revalidated_with(&[
        ("cache-control", "max-age=100"),
        ("set-cookie", "session=sid=A1-refreshed"),
    ])
    .await;
    let dir = tempfile::tempdir().expect("cache dir");
    let always = |c: &mut secondhit_proxy::config::Config| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always
    };
    let proxy = TestProxy::start_in(origin.addr, dir.path(), always).await;
    fill(&proxy, "/s", HOST, 1).await;
    // One Host for both runs: the restarted proxy listens on another port.
    let first = [HOST[0], ("cookie", "sid=A1"), ("cache-control", "no-cache")];
    let revalidating = get_with(&proxy, "/s", &first).await;
    assert_eq!(revalidating.cache.fwd_status, Some(304));
    assert_eq!(revalidating.body, b"shared");
    assert_eq!(
        header(&revalidating, "set-cookie"),
        Some("session=sid=A1-refreshed"),
        "the client that revalidated gets its own cookie"
    );
    let anonymous = get_with(&proxy, "/s", HOST).await;
    assert_hit(&anonymous);
    assert_eq!(anonymous.body, b"shared");
    assert_eq!(
        header(&anonymous, "set-cookie"),
        None,
        "another client's Set-Cookie was stored and served"
    );
    proxy.stop().await;
    let restarted = TestProxy::start_in(origin.addr, dir.path(), always).await;
    restarted.wait_scanned().await;
    let after_restart = get_with(&restarted, "/s", HOST).await;
    assert_hit(&after_restart);
    assert_eq!(
        header(&after_restart, "set-cookie"),
        None,
        "nor after a restart"
    );
}

/// A 304 that makes the response private (or unstorable in any other way) answers the
/// request that revalidated and removes the entry: later clients never get a hit
/// carrying `private`, they go to the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_that_makes_the_response_private_removes_the_entry() {
    let origin = revalidated_with(&[("cache-control", "private, max-age=100")]).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/s", &[], 1).await;
    let revalidating = get_with(&proxy, "/s", &[("cache-control", "no-cache")]).await;
    assert_eq!(revalidating.cache.fwd_status, Some(304));
    assert_eq!(revalidating.body, b"shared");
    assert_eq!(
        header(&revalidating, "cache-control"),
        Some("private, max-age=100")
    );
    assert!(!revalidating.cache.stored, "{:?}", revalidating.cache);
    assert_eq!(revalidating.cache.detail.as_deref(), Some("private"));
    let later = get_with(&proxy, "/s", &[]).await;
    assert!(
        !later.cache.hit,
        "a private response was served from storage: {:?}",
        later.cache
    );
    assert_eq!(header(&later, "cache-control"), Some("max-age=100"));
    assert_eq!(origin.count("/s"), 3, "the later client went to the origin");
}
