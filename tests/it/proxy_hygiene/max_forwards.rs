//! RFC 9110 §7.6.2 `Max-Forwards`: a `TRACE` or `OPTIONS` that reaches its last hop here is
//! answered here; one with hops left goes on with one hop fewer; other methods ignore it.

use super::common::*;

/// RFC 9110 §7.6.2: `OPTIONS` with `Max-Forwards: 0` is answered by the proxy as the final
/// recipient and never reaches the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_2_options_at_zero_answered_here() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"OPTIONS /o HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    assert_eq!(detail(&raw), "max-forwards");
    assert_eq!(raw.list("via"), "1.1 secondhit");
    assert!(raw.body.is_empty());
    assert_eq!(origin.total(), 0);
}

/// RFC 9110 §7.6.2 and §9.3.8: `TRACE` with `Max-Forwards: 0` is answered with the request
/// as received, as `message/http`, without the fields that carry credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_9_3_8_trace_at_zero_echoes_the_request_without_credentials() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"TRACE /t?q=1 HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\nX-Probe: seen\r\n\
          Authorization: Basic c2VjcmV0\r\nCookie: session=secret\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    assert_eq!(raw.list("content-type"), "message/http");
    let echo = String::from_utf8(raw.body.clone()).expect("utf-8 echo");
    assert!(echo.starts_with("TRACE /t?q=1 HTTP/1.1\r\n"), "{echo}");
    assert!(echo.contains("x-probe: seen\r\n"), "{echo}");
    assert!(echo.contains("max-forwards: 0\r\n"), "{echo}");
    assert!(echo.ends_with("\r\n\r\n"), "{echo}");
    assert!(
        !echo.contains("secret") && !echo.contains("c2VjcmV0"),
        "{echo}"
    );
    assert_eq!(origin.total(), 0);
}

/// RFC 9110 §7.6.2: with hops left, the request is forwarded with the value less one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_2_forwarded_with_one_hop_fewer() {
    let (origin, proxy) = setup().await;
    for method in ["OPTIONS", "TRACE"] {
        let path = format!("/{}", method.to_lowercase());
        let request = format!("{method} {path} HTTP/1.1\r\nHost: a\r\nMax-Forwards: 5\r\n\r\n");
        let raw = exchange(&proxy, request.as_bytes()).await;
        assert_eq!(raw.status, 200, "{method}");
        assert_eq!(origin.count(&path), 1, "{method}");
        let forwarded = origin.last_headers(&path).expect("origin saw it");
        assert_eq!(forwarded["max-forwards"], "4", "{method}");
    }
}

/// RFC 9110 §7.6.2: only `TRACE` and `OPTIONS` count hops; a `GET` goes on unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_2_other_methods_ignore_max_forwards() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"GET /g HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    assert_eq!(origin.count("/g"), 1);
    assert_eq!(
        origin.last_headers("/g").expect("origin saw it")["max-forwards"],
        "0"
    );
}

/// RFC 9110 §7.6.2 (`Max-Forwards = 1*DIGIT`): a malformed value on `TRACE` is answered 400
/// naming it, without reaching the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_2_malformed_max_forwards_rejected() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"TRACE /bad HTTP/1.1\r\nHost: a\r\nMax-Forwards: two\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 400);
    assert_eq!(detail(&raw), "invalid-max-forwards");
    assert_eq!(origin.total(), 0);
}
