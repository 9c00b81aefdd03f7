//! RFC 9111 §4.4: unsafe methods invalidate stored responses.

use secondhit_proxy::config::AdmissionPolicy;

use super::common::*;
use crate::support::{Reply, TestOrigin, TestProxy};

/// The Host every request in these scenarios names, so that `Location` values can be absolute.
const HOST: &str = "cache.example";

/// GETs are fresh for 100 s with a body naming the path; other methods get `status`
/// with the given `Location`/`Content-Location` (when not empty).
async fn origin(status: u16, location: &'static str, content_location: &'static str) -> TestOrigin {
    TestOrigin::start(move |head| {
        if head.method == http::Method::GET {
            return Reply::ok("max-age=100", head.uri.path().as_bytes().to_vec());
        }
        let mut reply = Reply::status(status, b"done".to_vec());
        if !location.is_empty() {
            reply = reply.header("location", location);
        }
        if !content_location.is_empty() {
            reply = reply.header("content-location", content_location);
        }
        reply
    })
    .await
}

async fn send(proxy: &TestProxy, method: &str, path: &str) -> crate::support::Seen {
    request(proxy, method, path, &[("host", HOST)]).await
}

/// Stores GET `path` as fill number `n`, checking it is then a hit.
async fn store(proxy: &TestProxy, path: &str, n: u64) {
    fill(proxy, path, &[("host", HOST)], n).await;
    assert_hit(&send(proxy, "GET", path).await);
}

/// Asserts GET `path` is a miss again: `fwd=uri-miss`.
async fn assert_invalidated(proxy: &TestProxy, path: &str) {
    let seen = send(proxy, "GET", path).await;
    assert_forwarded(&seen, "uri-miss");
    assert_eq!(seen.body, path.as_bytes());
}

/// `method` with a 2xx answer invalidates the stored GET of the same URI.
async fn invalidates(method: &str) {
    let origin = origin(200, "", "").await;
    let proxy = proxy_always(&origin).await;
    store(&proxy, "/doc", 1).await;
    let unsafe_answer = send(&proxy, method, "/doc").await;
    assert_eq!(unsafe_answer.status, 200);
    assert_invalidated(&proxy, "/doc").await;
}

/// RFC 9111 §4.4: a 2xx answer to POST invalidates the target URI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_invalidates_the_target_uri() {
    invalidates("POST").await;
}

/// RFC 9111 §4.4: a 2xx answer to PUT invalidates the target URI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_invalidates_the_target_uri() {
    invalidates("PUT").await;
}

/// RFC 9111 §4.4: a 2xx answer to DELETE invalidates the target URI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_invalidates_the_target_uri() {
    invalidates("DELETE").await;
}

/// RFC 9111 §4.4: a 2xx answer to PATCH invalidates the target URI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_invalidates_the_target_uri() {
    invalidates("PATCH").await;
}

/// RFC 9111 §4.4: a 2xx answer to a method the cache does not know is treated as unsafe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_method_invalidates_the_target_uri() {
    invalidates("PURGEX").await;
}

/// RFC 9111 §4.4: a 3xx answer invalidates too, and so does its same-origin relative `Location`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_invalidates_target_and_relative_location() {
    let origin = origin(303, "/created", "").await;
    let proxy = proxy_always(&origin).await;
    store(&proxy, "/form", 1).await;
    store(&proxy, "/created", 2).await;
    assert_eq!(send(&proxy, "POST", "/form").await.status, 303);
    assert_invalidated(&proxy, "/form").await;
    assert_invalidated(&proxy, "/created").await;
}

/// RFC 9111 §4.4: an absolute `Content-Location` with the same host is invalidated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_host_absolute_content_location_is_invalidated() {
    let origin = origin(200, "", "http://cache.example/listing").await;
    let proxy = proxy_always(&origin).await;
    store(&proxy, "/listing", 1).await;
    send(&proxy, "PUT", "/item").await;
    assert_invalidated(&proxy, "/listing").await;
}

/// RFC 9111 §4.4: a `Location` on another host is not invalidated (no cross-origin purges).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_host_location_is_not_invalidated() {
    let origin = origin(201, "http://elsewhere.example/kept", "").await;
    let proxy = proxy_always(&origin).await;
    store(&proxy, "/kept", 1).await;
    send(&proxy, "POST", "/form").await;
    let kept = send(&proxy, "GET", "/kept").await;
    assert_hit(&kept);
}

/// RFC 9111 §4.4: error answers (4xx, 5xx) to unsafe methods do not invalidate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_answers_do_not_invalidate() {
    for status in [404, 500] {
        let origin = origin(status, "", "").await;
        let proxy = proxy_always(&origin).await;
        store(&proxy, "/doc", 1).await;
        assert_eq!(send(&proxy, "POST", "/doc").await.status, status);
        assert_hit(&send(&proxy, "GET", "/doc").await);
    }
}

/// RFC 9111 §4.4: an invalidation survives a restart on the same cache directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidation_survives_a_restart() {
    let origin = origin(204, "", "").await;
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("cache");
    let always =
        |c: &mut secondhit_proxy::config::Config| c.admission.policy = AdmissionPolicy::Always;
    let proxy = TestProxy::start_in(origin.addr, &dir, always).await;
    store(&proxy, "/doc", 1).await;
    send(&proxy, "DELETE", "/doc").await;
    proxy.stop().await;
    let proxy = TestProxy::start_in(origin.addr, &dir, always).await;
    proxy.wait_scanned().await;
    assert_invalidated(&proxy, "/doc").await;
}

/// RFC 9111 §4.4 and §4.1: invalidating a URI drops all its stored variants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidation_drops_every_variant() {
    let origin = TestOrigin::start(|head| {
        let lang = request_header(head, "accept-language")
            .unwrap_or("")
            .to_owned();
        if head.method == http::Method::GET {
            Reply::ok("max-age=100", lang.into_bytes()).header("vary", "accept-language")
        } else {
            Reply::status(200, b"done".to_vec())
        }
    })
    .await;
    let proxy = proxy_always(&origin).await;
    // The first variant commits the URL's variant marker too.
    for (n, lang) in [(2, "en"), (3, "fr")] {
        fill(
            &proxy,
            "/doc",
            &[("host", HOST), ("accept-language", lang)],
            n,
        )
        .await;
    }
    request(&proxy, "POST", "/doc", &[("host", HOST)]).await;
    let en = get_with(&proxy, "/doc", &[("host", HOST), ("accept-language", "en")]).await;
    assert_forwarded(&en, "uri-miss");
    assert_eq!(en.body, b"en");
    // The refetch of `en` starts a new variant set, in which `fr` is not stored yet.
    let fr = get_with(&proxy, "/doc", &[("host", HOST), ("accept-language", "fr")]).await;
    assert_forwarded(&fr, "vary-miss");
    assert_eq!(fr.body, b"fr");
}
