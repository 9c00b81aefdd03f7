//! One client connection carrying requests of every kind: those without a body, which the
//! proxy reads itself, and the first with a body (or anything else unusual), from which
//! hyper serves the connection to its end. Order, bytes and framing hold across the switch.

use std::time::Duration;

use super::common::*;
use crate::support::{Reply, TestOrigin, TestProxy, received_body};

/// An origin answering each request with its method, path and body.
async fn echo_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let body = received_body(head);
        let answer = format!(
            "{} {} {}",
            head.method,
            head.uri.path(),
            body.escape_ascii()
        );
        Reply::ok("max-age=60", answer.into_bytes())
    })
    .await
}

async fn setup_echo() -> (TestOrigin, TestProxy) {
    let origin = echo_origin().await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    (origin, proxy)
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_across_the_switch_to_hyper_are_answered_in_order() {
    let (origin, proxy) = setup_echo().await;
    let mut conn = Conn::open(&proxy).await;
    conn.write(get("/one").as_bytes()).await;
    assert_eq!(conn.response().await.body, b"GET /one ");
    // In one write: two without a body, one with, and two after it.
    let post = "POST /two HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
    let batch = [get("/a"), get("/b"), post.to_owned(), get("/c"), get("/d")].concat();
    conn.write(batch.as_bytes()).await;
    let expected: [&[u8]; 5] = [
        b"GET /a ",
        b"GET /b ",
        b"POST /two hello",
        b"GET /c ",
        b"GET /d ",
    ];
    for body in expected {
        let response = conn.response().await;
        assert_eq!(response.status, 200);
        assert_eq!(
            response.body,
            body,
            "{}",
            String::from_utf8_lossy(&response.body)
        );
    }
    assert_eq!(origin.count("/two"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_arriving_in_pieces_is_answered_once_whole() {
    let (_origin, proxy) = setup_echo().await;
    let mut conn = Conn::open(&proxy).await;
    let request = get("/slow");
    for piece in request.as_bytes().chunks(7) {
        conn.write(piece).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let response = conn.response().await;
    assert_eq!(response.body, b"GET /slow ");
    assert!(response.has("date"), "a Date is written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_asking_to_close_is_told_so_and_closed() {
    let (_origin, proxy) = setup_echo().await;
    let mut conn = Conn::open(&proxy).await;
    conn.write(b"GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await;
    let response = conn.response().await;
    assert_eq!(response.body, b"GET /last ");
    assert_eq!(response.list("connection"), "close");
    assert!(conn.closed().await, "the proxy closes after the answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_request_gets_the_length_and_no_body_and_the_connection_goes_on() {
    let (_origin, proxy) = setup_echo().await;
    let mut conn = Conn::open(&proxy).await;
    // HEAD then GET in one write: were the HEAD's body sent, the GET's status line would
    // not come next.
    let both = format!("HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n{}", get("/g"));
    conn.write(both.as_bytes()).await;
    let head = conn.head_response().await;
    assert_eq!(head.status, 200);
    assert_eq!(
        head.list("content-length"),
        "8",
        "the length of \"HEAD /h \""
    );
    let next = conn.response().await;
    assert_eq!(next.body, b"GET /g ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_1_0_and_http_2_clients_are_served_by_hyper_from_their_first_request() {
    let (_origin, proxy) = setup_echo().await;
    let raw = exchange(&proxy, b"GET /old HTTP/1.0\r\nHost: a\r\n\r\n").await;
    assert_eq!(raw.body, b"GET /old ");
    let h2 = crate::support::h2c_client();
    let response = h2.get(proxy.url("/new")).send().await.expect("h2c answer");
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.bytes().await.expect("body").as_ref(), b"GET /new ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_more_pipelined_requests_than_one_head_holds_are_all_answered_in_order() {
    let origin = echo_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        // The smallest head limit: the proxy reads ahead at most this much while it
        // answers, and must still find every request after it in the socket.
        c.server.max_header_bytes = 8 * 1024;
    })
    .await;
    let mut conn = Conn::open(&proxy).await;
    let paths: Vec<String> = (0..1000).map(|i| format!("/p{i}")).collect();
    let batch: String = paths.iter().map(|path| get(path)).collect();
    assert!(batch.len() > 3 * 8 * 1024, "{} bytes", batch.len());
    conn.write(batch.as_bytes()).await;
    for path in &paths {
        let response = conn.response().await;
        assert_eq!(response.body, format!("GET {path} ").as_bytes());
    }
}
