//! RFC 9112 §6.3 and §3.2: ambiguous body framing and bad `Host` rules are answered 400
//! before the origin sees them.

use super::common::*;

/// RFC 9112 §6.3 (3): `Content-Length` with `Transfer-Encoding` is answered 400, the
/// connection is closed, and the origin never sees it — in either field order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_6_3_content_length_with_transfer_encoding_rejected_before_origin() {
    let (origin, proxy) = setup().await;
    for request in [
        &b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..],
        b"POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        b"GET /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n",
    ] {
        let mut conn = Conn::open(&proxy).await;
        conn.write(request).await;
        let raw = conn.response().await;
        assert_eq!(raw.status, 400);
        assert_eq!(detail(&raw), "content-length-with-transfer-encoding");
        assert_eq!(raw.list("connection"), "close");
        assert!(conn.closed().await, "the connection is closed after the 400");
    }
    assert_eq!(origin.count("/t"), 0);
}

/// RFC 9112 §6.3 (5): differing `Content-Length` values are answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_6_3_conflicting_content_lengths_rejected() {
    let (origin, proxy) = setup().await;
    assert_rejected(
        &origin,
        &proxy,
        b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "conflicting-content-length",
    )
    .await;
}

/// RFC 9110 §8.6 / RFC 9112 §6.3 (5): a `Content-Length` that is not a number is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_8_6_invalid_content_length_rejected() {
    let (origin, proxy) = setup().await;
    assert_rejected(
        &origin,
        &proxy,
        b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 4, 5\r\n\r\nabcd",
        "invalid-content-length",
    )
    .await;
}

/// RFC 9112 §3.2: more than one `Host` field line is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_two_host_fields_rejected() {
    let (origin, proxy) = setup().await;
    assert_rejected(
        &origin,
        &proxy,
        b"GET /t HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "several-hosts",
    )
    .await;
}

/// RFC 9112 §3.2: an HTTP/1.1 request without `Host` is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_missing_host_rejected() {
    let (origin, proxy) = setup().await;
    assert_rejected(&origin, &proxy, b"GET /t HTTP/1.1\r\n\r\n", "missing-host").await;
}

/// RFC 9112 §3.2: a `Host` that is not `uri-host[:port]` is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_invalid_host_rejected() {
    let (origin, proxy) = setup().await;
    for host in ["user@a", "a:http", ""] {
        let request = format!("GET /t HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert_rejected(&origin, &proxy, request.as_bytes(), "invalid-host").await;
    }
}

/// RFC 9112 §3.2.2: an absolute-form target naming another host than `Host` is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_2_absolute_form_host_mismatch_rejected() {
    let (origin, proxy) = setup().await;
    for request in [
        &b"GET http://b.example/t HTTP/1.1\r\nHost: a.example\r\n\r\n"[..],
        b"GET http://a.example:8080/t HTTP/1.1\r\nHost: a.example\r\n\r\n",
    ] {
        assert_rejected(&origin, &proxy, request, "host-mismatch").await;
    }
}

/// RFC 9112 §3.2.2: an absolute-form target that names the `Host` (any case, default
/// port explicit or not) is forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_2_absolute_form_matching_host_forwarded() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"GET http://A.Example:80/abs?q=1 HTTP/1.1\r\nHost: a.example\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    assert_eq!(raw.body, b"ok");
    assert_eq!(origin.count("/abs?q=1"), 1);
}

/// RFC 9112 §6.3 (3): an origin answer with both `Transfer-Encoding: chunked` and a
/// `Content-Length` is framed by the chunked coding; the length is removed before the
/// answer is relayed, so the client gets the whole chunked body (and the stored copy is
/// that body too), never a body cut to the stated length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_6_3_origin_chunked_wins_over_its_content_length() {
    let (origin, _stop) = crate::support::start_raw_origin(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 3\r\n\
          Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    )
    .await;
    let proxy = crate::support::TestProxy::start(origin, |c| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always
    })
    .await;
    let miss = exchange(&proxy, b"GET /both HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert_eq!(miss.status, 200);
    assert_ne!(miss.list("content-length"), "3", "{:?}", miss.headers);
    assert_eq!(miss.body, b"hello world");
    proxy.wait_committed(1).await;
    let hit = exchange(&proxy, b"GET /both HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert!(
        hit.list("cache-status").contains("hit"),
        "{:?}",
        hit.headers
    );
    assert_eq!(hit.body, b"hello world");
}
