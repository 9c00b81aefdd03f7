//! RFC 9110 §7.6.3 `Via` and RFC 7239 `X-Forwarded-*`: what the proxy adds on the way in
//! and out.

use secondhit_proxy::config::AdmissionPolicy;

use super::common::*;
use crate::support::{self, TestProxy, client, get, send};

/// RFC 9110 §7.6.3: the request to the origin carries `Via` with the received protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_3_via_added_to_request() {
    let (origin, proxy) = setup().await;
    get(&proxy.url("/v")).await;
    assert_eq!(origin_list(&origin, "/v", "via"), "1.1 secondhit");
}

/// RFC 9110 §7.6.3: an HTTP/1.0 request is forwarded with `Via: 1.0 secondhit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_3_via_names_http_1_0_when_received_as_1_0() {
    let (origin, proxy) = setup().await;
    let raw = exchange(&proxy, b"GET /old HTTP/1.0\r\nHost: a\r\n\r\n").await;
    assert_eq!(raw.status, 200);
    assert_eq!(origin_list(&origin, "/old", "via"), "1.0 secondhit");
}

/// RFC 9110 §7.6.3: `Via` is appended to the client's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_3_via_appended_to_existing_request_via() {
    let (origin, proxy) = setup().await;
    send(
        client()
            .get(proxy.url("/v2"))
            .header("via", "1.0 fred, 1.1 p.example"),
    )
    .await;
    assert_eq!(
        origin_list(&origin, "/v2", "via"),
        "1.0 fred, 1.1 p.example, 1.1 secondhit"
    );
}

/// RFC 9110 §7.6.3: the response to the client carries `Via`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_3_via_added_to_response() {
    let (_origin, proxy) = setup().await;
    let seen = get(&proxy.url("/plain")).await;
    assert_eq!(seen.headers.get("via").expect("via"), "1.1 secondhit");
}

/// RFC 9110 §7.6.3: the origin's `Via` is kept and ours appended after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_3_via_appended_to_origin_response_via() {
    let (_origin, proxy) = setup().await;
    let seen = get(&proxy.url("/via")).await;
    assert_eq!(
        seen.headers.get("via").expect("via"),
        "1.1 upstream, 1.1 secondhit"
    );
}

/// RFC 9110 §7.6.3: a response served from the cache carries `Via` too (and only once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_3_via_on_a_cache_hit() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    get(&proxy.url("/via")).await;
    let hit = support::send_until_hit(|| client().get(proxy.url("/via"))).await;
    let via: Vec<_> = hit.headers.get_all("via").iter().collect();
    assert_eq!(via.len(), 1);
    assert_eq!(via[0], "1.1 upstream, 1.1 secondhit");
}

/// RFC 7239 §1 (the de-facto `X-Forwarded-For`): the client's address is appended to an
/// existing chain, in one field line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc7239_x_forwarded_for_appended_to_existing_chain() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"GET /xff HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-For: 192.0.2.2, 192.0.2.3\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    let headers = origin.last_headers("/xff").expect("forwarded");
    let lines: Vec<_> = headers.get_all("x-forwarded-for").iter().collect();
    assert_eq!(lines, ["192.0.2.1, 192.0.2.2, 192.0.2.3, 127.0.0.1"]);
}

/// RFC 7239 §1: without a chain, `X-Forwarded-For` is the client's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc7239_x_forwarded_for_set_when_absent() {
    let (origin, proxy) = setup().await;
    get(&proxy.url("/xff1")).await;
    assert_eq!(
        origin_list(&origin, "/xff1", "x-forwarded-for"),
        "127.0.0.1"
    );
}

/// RFC 7239 §5.3–5.4 (as `X-Forwarded-Proto`/`-Host`): set from what the proxy saw,
/// replacing whatever the client claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc7239_x_forwarded_proto_and_host_set_over_client_values() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"GET /xf HTTP/1.1\r\nHost: shop.example\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    assert_eq!(origin_list(&origin, "/xf", "x-forwarded-proto"), "http");
    assert_eq!(
        origin_list(&origin, "/xf", "x-forwarded-host"),
        "shop.example"
    );
}

/// RFC 7239 §4, §5.3–5.4: a client's `Forwarded` reaches the origin with the earlier hops'
/// `for` and `by` kept, the `host` and `proto` it claimed dropped, and this hop's element
/// (the client's address, the `Host` it asked for, quoted for its port, and the scheme it
/// used) appended, in one field line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc7239_forwarded_keeps_the_chain_and_replaces_the_clients_host_and_proto() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"GET /fwd HTTP/1.1\r\nHost: shop.example:8080\r\nForwarded: host=evil.example;proto=https\r\nForwarded: for=192.0.2.60;by=203.0.113.43;proto=https\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    let headers = origin.last_headers("/fwd").expect("forwarded");
    let lines: Vec<_> = headers.get_all("forwarded").iter().collect();
    assert_eq!(
        lines,
        ["for=192.0.2.60;by=203.0.113.43, for=127.0.0.1;host=\"shop.example:8080\";proto=http"]
    );
}

/// RFC 7239 §4: a `Forwarded` that does not parse is not passed on: the origin gets this
/// hop's element alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc7239_an_unparseable_forwarded_is_replaced() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"GET /fwd-bad HTTP/1.1\r\nHost: shop.example\r\nForwarded: for=192.0.2.60; host=evil.example\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    assert_eq!(
        origin_list(&origin, "/fwd-bad", "forwarded"),
        "for=127.0.0.1;host=shop.example;proto=http"
    );
}
