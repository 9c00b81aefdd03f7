//! Bad input costs one cheap answer and never a panic or a wrong answer:
//! asterisk-form targets and `CONNECT` answered by the proxy (RFC 9112 §3.2.4, RFC 9110
//! §9.3.6/§9.3.7), floods of ranges and huge offsets, long URLs, invalid percent-escapes,
//! absolute-form targets, and `If-Range` per RFC 9110 §13.1.5.

use super::common::*;
use crate::support::{PATIENCE, Reply, TestOrigin, TestProxy, body_bytes, http_date_from_now};

/// RFC 9110 §9.3.7: `OPTIONS *` is about the server in general; the proxy answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_9_3_7_options_asterisk_is_answered_with_allow() {
    let (origin, proxy) = setup().await;
    let raw = exchange(&proxy, b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert_eq!(raw.status, 200);
    assert_eq!(detail(&raw), "server-options");
    let allow = raw.list("allow");
    for method in ["GET", "HEAD", "OPTIONS", "POST"] {
        assert!(allow.contains(method), "Allow: {allow}");
    }
    assert!(!allow.contains("CONNECT"), "Allow: {allow}");
    assert!(raw.body.is_empty());
    assert_eq!(origin.total(), 0);
}

/// RFC 9112 §3.2.4: the asterisk form is for `OPTIONS` only; anything else is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_4_asterisk_with_another_method_is_400() {
    let (origin, proxy) = setup().await;
    // Not HEAD: its answer has a Content-Length and no body, which `Conn` would wait for.
    for method in ["GET", "POST", "DELETE"] {
        let request = format!("{method} * HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
        let mut conn = Conn::open(&proxy).await;
        conn.write(request.as_bytes()).await;
        let raw = conn.response().await;
        assert_eq!(raw.status, 400, "{method}");
        assert_eq!(detail(&raw), "asterisk-form", "{method}");
    }
    assert_eq!(origin.total(), 0);
}

/// RFC 9110 §9.3.6: a reverse proxy opens no tunnel; `CONNECT` gets 501 and the origin
/// never hears of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_9_3_6_connect_is_501_and_never_forwarded() {
    let (origin, proxy) = setup().await;
    let raw = exchange(&proxy, b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n").await;
    assert_eq!(raw.status, 501);
    assert_eq!(detail(&raw), "connect");
    assert_eq!(origin.total(), 0);
}

/// Absolute-form targets (RFC 9112 §3.2.2) are served like origin-form ones, and cached
/// under the same key; one naming another host than `Host` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_targets_share_the_origin_form_key() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"abs".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always;
    })
    .await;
    let first = exchange(&proxy, b"GET http://a/abs HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body, b"abs");
    proxy.wait_committed(1).await;
    let second = exchange(&proxy, b"GET /abs HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert!(
        second.list("cache-status").contains("hit"),
        "{}",
        second.list("cache-status")
    );
    assert_eq!(
        origin.count("/abs"),
        1,
        "the origin gets the origin form, once"
    );
    let other = exchange(&proxy, b"GET http://b/abs HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert_eq!(other.status, 400);
    assert_eq!(detail(&other), "host-mismatch");
}

/// Long URLs (8 KiB) and invalid percent-escapes are proxied and cached like any other
/// URL: no panic, no 5xx, and each keeps its own entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_urls_and_invalid_escapes_are_served_and_cached() {
    let origin = TestOrigin::start(|head| {
        let path = head.uri.path().to_owned();
        Reply::ok("max-age=60", path.into_bytes())
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always;
    })
    .await;
    let long = format!("/{}", "a".repeat(8 * 1024));
    // Each target, and the form the origin is asked for: as keyed, a valid escape's hex
    // digits upper-cased, a malformed escape kept as it is.
    let targets = [
        (long.as_str(), long.as_str()),
        ("/bad%zz", "/bad%zz"),
        ("/%", "/%"),
        ("/%G0%", "/%G0%"),
        ("/%e2%82", "/%E2%82"),
        ("/ok%2", "/ok%2"),
    ];
    for (n, (target, forwarded)) in targets.iter().enumerate() {
        let request = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
        let raw = exchange(&proxy, request.as_bytes()).await;
        assert_eq!(raw.status, 200, "{target:.40}");
        assert_eq!(raw.body, forwarded.as_bytes(), "{target:.40}");
        proxy.wait_committed(n as u64 + 1).await;
        let again = exchange(&proxy, request.as_bytes()).await;
        assert_eq!(again.body, forwarded.as_bytes(), "{target:.40}");
        assert!(
            again.list("cache-status").contains("hit"),
            "{target:.40}: {}",
            again.list("cache-status")
        );
    }
}

/// Hundreds of ranges and offsets past any object are answered cheaply: the whole object
/// (a range set the cache will not serve part by part) or 416, never an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_floods_and_huge_offsets_get_whole_or_416() {
    let body = body_bytes(10_000, 3);
    let served = body.clone();
    let origin = TestOrigin::start(move |_| Reply::ok("max-age=60", served.clone())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always;
    })
    .await;
    let fill = exchange(&proxy, b"GET /r HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert_eq!(fill.body, body);
    proxy.wait_committed(1).await;
    let flood: Vec<String> = (0..400).map(|i| format!("{}-{}", i * 3, i * 3)).collect();
    let cases = [
        (format!("bytes={}", flood.join(",")), 200),
        ("bytes=18446744073709551615-".to_owned(), 416),
        ("bytes=99999999999999999999999-".to_owned(), 200),
        // A last byte past the end, or a suffix longer than the object: all of it, as a 206.
        ("bytes=0-18446744073709551615".to_owned(), 206),
        ("bytes=-18446744073709551615".to_owned(), 206),
    ];
    for (range, status) in cases {
        let request = format!("GET /r HTTP/1.1\r\nHost: a\r\nRange: {range}\r\n\r\n");
        let raw = exchange(&proxy, request.as_bytes()).await;
        assert_eq!(raw.status, status, "Range: {range:.60}");
        if status != 416 {
            assert_eq!(raw.body, body, "Range: {range:.60}");
        }
    }
    assert_eq!(origin.count("/r"), 1, "all from the stored entry");
}

/// RFC 9110 §13.1.5: `If-Range` with a date serves the range only on an exact match with a
/// strong `Last-Modified`; a later date, or a value that is no validator, gets the whole
/// object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_13_1_5_if_range_date_needs_an_exact_match() {
    let modified = http_date_from_now(-3600);
    let body = body_bytes(1000, 9);
    let (served, last_modified) = (body.clone(), modified.clone());
    let origin = TestOrigin::start(move |_| {
        Reply::ok("max-age=600", served.clone()).header("last-modified", &last_modified)
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always;
    })
    .await;
    exchange(&proxy, b"GET /d HTTP/1.1\r\nHost: a\r\n\r\n").await;
    proxy.wait_committed(1).await;
    let ask = |if_range: String| {
        let proxy = &proxy;
        async move {
            let request = format!(
                "GET /d HTTP/1.1\r\nHost: a\r\nRange: bytes=0-9\r\nIf-Range: {if_range}\r\n\r\n"
            );
            tokio::time::timeout(PATIENCE, exchange(proxy, request.as_bytes()))
                .await
                .expect("answered")
        }
    };
    let exact = ask(modified.clone()).await;
    assert_eq!(exact.status, 206);
    assert_eq!(exact.body, &body[..10]);
    for other in [
        http_date_from_now(0),
        http_date_from_now(-7200),
        "not a date".to_owned(),
        "W/\"x\"".to_owned(),
    ] {
        let whole = ask(other.clone()).await;
        assert_eq!(whole.status, 200, "If-Range: {other}");
        assert_eq!(whole.body, body, "If-Range: {other}");
    }
}
