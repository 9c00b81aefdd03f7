//! RFC 6585 §5 and RFC 9112 §9: head limits (431), the header read timeout, and
//! pipelining around a rejected request.

use std::time::Duration;

use super::common::*;
use crate::support::TestProxy;

/// RFC 6585 §5: a head larger than `server.max_header_bytes` is answered 431.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc6585_5_oversized_header_gets_431() {
    let (origin, proxy) = setup().await;
    let request = format!(
        "GET /t HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n",
        "b".repeat(70 * 1024)
    );
    let raw = exchange(&proxy, request.as_bytes()).await;
    assert_eq!(raw.status, 431);
    assert_eq!(origin.count("/t"), 0);
}

/// RFC 6585 §5: more than `server.max_headers` fields are answered 431; as many pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc6585_5_too_many_headers_gets_431() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| c.server.max_headers = 10).await;
    let head = |fields: usize| {
        let mut request = "GET /t HTTP/1.1\r\nHost: a\r\n".to_owned();
        for i in 1..fields {
            request.push_str(&format!("X-F{i}: 1\r\n"));
        }
        request.push_str("\r\n");
        request
    };
    assert_eq!(exchange(&proxy, head(10).as_bytes()).await.status, 200);
    assert_eq!(exchange(&proxy, head(11).as_bytes()).await.status, 431);
    assert_eq!(origin.count("/t"), 1);
}

/// RFC 9112 §3 and RFC 6585 §5: a request line longer than the head limit gets 431
/// (hyper answers 414 only for a target over 65534 bytes, which no head within
/// `server.max_header_bytes` can hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_long_request_line_gets_431() {
    let (origin, proxy) = setup().await;
    let request = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "p".repeat(70 * 1024));
    assert_eq!(exchange(&proxy, request.as_bytes()).await.status, 431);
    // A long line within the limit is fine.
    let path = format!("/{}", "p".repeat(8 * 1024));
    let request = format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(exchange(&proxy, request.as_bytes()).await.status, 200);
    assert_eq!(origin.count(&path), 1);
}

/// RFC 9112 §9.5: a client that does not finish its head within
/// `server.header_read_timeout` is disconnected, without a request reaching the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_9_5_header_read_timeout_closes_the_connection() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.header_read_timeout = Duration::from_millis(300)
    })
    .await;
    let mut conn = Conn::open(&proxy).await;
    let started = std::time::Instant::now();
    conn.write(b"GET /t HTTP/1.1\r\nHost: a\r\nX-Slow: ").await;
    assert!(conn.closed().await, "closed after header_read_timeout");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(origin.count("/t"), 0);
}

/// RFC 9112 §9.3.2: requests pipelined before a rejected one are answered normally;
/// the rejected one gets 400 and nothing after it is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_9_3_2_pipelined_requests_before_a_rejected_one_are_answered() {
    let (origin, proxy) = setup().await;
    let mut conn = Conn::open(&proxy).await;
    conn.write(
        b"GET /p1 HTTP/1.1\r\nHost: a\r\n\r\n\
POST /p2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc\
POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
GET /p3 HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .await;
    assert_eq!(conn.response().await.status, 200);
    assert_eq!(conn.response().await.status, 200);
    let rejected = conn.response().await;
    assert_eq!(rejected.status, 400);
    assert_eq!(detail(&rejected), "content-length-with-transfer-encoding");
    assert!(conn.closed().await);
    assert_eq!(
        (
            origin.count("/p1"),
            origin.count("/p2"),
            origin.count("/t"),
            origin.count("/p3")
        ),
        (1, 1, 0, 0)
    );
}

/// RFC 9112 §7.1 and §9.3.2: a chunked body whose data looks like a bad head is only
/// data: it is forwarded intact and the next pipelined request is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_7_1_chunked_body_is_followed_to_the_next_request() {
    let (origin, proxy) = setup().await;
    let inner = "GET /t HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let request = format!(
        "POST /body HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n{:x};ext\r\n{inner}\r\n0\r\nX-Trailer: 1\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n",
        inner.len()
    );
    let mut conn = Conn::open(&proxy).await;
    conn.write(request.as_bytes()).await;
    assert_eq!(conn.response().await.status, 200);
    assert_eq!(conn.response().await.status, 200);
    assert_eq!(
        (
            origin.count("/body"),
            origin.count("/next"),
            origin.count("/t")
        ),
        (1, 1, 0)
    );
}
