//! A GET or HEAD with a body: its answer depends on what the body asked (search APIs
//! read GET bodies), so it is passed through unstored and never answered from storage;
//! a `Content-Length: 0` is no body and stays cacheable.

use super::common::*;
use crate::support::{Reply, TestOrigin, TestProxy, client, h2c_client, received_body, send};
use secondhit_proxy::config::AdmissionPolicy;

/// An origin that answers each request with its body (`none` for no body), cacheable.
async fn echo_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let body = received_body(head);
        let answer = if body.is_empty() {
            b"none".to_vec()
        } else {
            body.to_vec()
        };
        Reply::ok("max-age=60", answer)
    })
    .await
}

/// A raw HTTP/1.1 GET of `path` with the `Host` the test clients send (the key's host),
/// and `rest` after it: more fields, the blank line and a body.
async fn raw_get(proxy: &TestProxy, path: &str, rest: &str) -> Raw {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n{rest}", proxy.addr);
    exchange(proxy, request.as_bytes()).await
}

async fn proxy_always(origin: &TestOrigin) -> TestProxy {
    TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await
}

/// A GET with a body (HTTP/1 `Content-Length`, or an HTTP/2 DATA frame) gets the
/// origin's answer to that body, marked `detail=request-body`, and leaves nothing stored:
/// a plain GET of the URL afterwards is not served what the body asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_with_a_body_is_passed_through_and_never_stored() {
    let origin = echo_origin().await;
    let proxy = proxy_always(&origin).await;
    let raw = raw_get(&proxy, "/search", "Content-Length: 8\r\n\r\nq=secret").await;
    assert_eq!(raw.body, b"q=secret");
    let h2 = send(h2c_client().get(proxy.url("/search")).body("q=h2")).await;
    assert_eq!(h2.body, b"q=h2");
    // Time for a fill of either to commit, had one begun: the plain GET's own fill
    // commits after its body, so it cannot tell.
    let probe = send(client().get(proxy.url("/probe"))).await;
    assert!(probe.cache.stored, "{:?}", probe.cache);
    proxy.wait_committed(1).await;
    let plain = send(client().get(proxy.url("/search"))).await;
    assert_eq!(plain.body, b"none", "{:?}", plain.cache);
    assert!(plain.cache.stored, "{:?}", plain.cache);
    assert_eq!(origin.count("/search"), 3);
    assert_eq!(detail(&raw), "request-body");
    assert_eq!(h2.cache.detail.as_deref(), Some("request-body"));
}

/// A GET with a body is never answered from the entry of the bodiless GET; one with
/// `Content-Length: 0` has no body and is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_with_a_body_is_not_answered_from_storage_but_an_empty_one_is() {
    let origin = echo_origin().await;
    let proxy = proxy_always(&origin).await;
    let plain = send(client().get(proxy.url("/doc"))).await;
    assert!(plain.cache.stored, "{:?}", plain.cache);
    proxy.wait_committed(1).await;
    let raw = raw_get(&proxy, "/doc", "Content-Length: 3\r\n\r\nq=1").await;
    assert_eq!(raw.body, b"q=1");
    assert_eq!(detail(&raw), "request-body");
    let h2 = send(h2c_client().get(proxy.url("/doc")).body("q=2")).await;
    assert_eq!(h2.body, b"q=2");
    let empty = raw_get(&proxy, "/doc", "Content-Length: 0\r\n\r\n").await;
    assert!(
        empty.list("cache-status").contains("hit"),
        "{:?}",
        empty.headers
    );
    assert_eq!(empty.body, b"none");
    assert_eq!(origin.count("/doc"), 3);
}
