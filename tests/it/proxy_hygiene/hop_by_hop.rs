//! RFC 9110 §7.6.1: hop-by-hop fields, the `Connection` list, and this proxy's private
//! rejection marker are not forwarded.

use super::common::*;
use crate::support::{client, get, send};

const HOP_BY_HOP: [&str; 5] = ["keep-alive", "proxy-connection", "te", "trailer", "upgrade"];

/// RFC 9110 §7.6.1: the fixed hop-by-hop fields of a request are not forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_1_hop_by_hop_fields_removed_from_request() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"GET /r HTTP/1.1\r\nHost: a\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\n\
TE: trailers\r\nTrailer: x-checksum\r\nUpgrade: websocket\r\nConnection: upgrade, te\r\n\
X-End-To-End: kept\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    let headers = origin.last_headers("/r").expect("forwarded");
    for name in HOP_BY_HOP.iter().chain(["connection"].iter()) {
        assert!(!headers.contains_key(*name), "{name} reached the origin");
    }
    assert_eq!(
        headers.get("x-end-to-end").expect("end-to-end kept"),
        "kept"
    );
}

/// RFC 9110 §7.6.1: the fixed hop-by-hop fields of a response are not forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_1_hop_by_hop_fields_removed_from_response() {
    let (_origin, proxy) = setup().await;
    let raw = exchange(&proxy, b"GET /hop HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert_eq!(raw.status, 200);
    for name in HOP_BY_HOP {
        assert!(!raw.has(name), "{name} reached the client");
    }
    assert_eq!(raw.list("x-end-to-end"), "kept");
    assert_eq!(raw.body, b"hop");
}

/// RFC 9110 §7.6.1: every field a request's `Connection` names is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_1_connection_named_fields_removed_from_request() {
    let (origin, proxy) = setup().await;
    let seen = send(
        client()
            .get(proxy.url("/named"))
            .header("connection", "x-secret, X-Other")
            .header("x-secret", "1")
            .header("x-other", "2")
            .header("x-kept", "3"),
    )
    .await;
    assert_eq!(seen.status, 200);
    let headers = origin.last_headers("/named").expect("forwarded");
    assert!(!headers.contains_key("x-secret"));
    assert!(!headers.contains_key("x-other"));
    assert_eq!(headers.get("x-kept").expect("kept"), "3");
}

/// RFC 9110 §7.6.1: every field a response's `Connection` names is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_1_connection_named_fields_removed_from_response() {
    let (_origin, proxy) = setup().await;
    let seen = get(&proxy.url("/hop")).await;
    assert_eq!(seen.status, 200);
    assert!(!seen.headers.contains_key("x-origin-secret"));
    assert!(!seen.headers.contains_key("x-origin-other"));
    assert_eq!(seen.headers.get("x-end-to-end").expect("kept"), "kept");
}

/// RFC 9110 §7.6.1 with §7.6.3: a client cannot name the proxy's own forwarding
/// fields in `Connection` to have them stripped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_1_connection_cannot_remove_the_proxys_forwarding_fields() {
    let (origin, proxy) = setup().await;
    let seen = send(
        client()
            .get(proxy.url("/c"))
            .header("connection", "via, x-forwarded-for, x-forwarded-host")
            .header("via", "1.1 forged")
            .header("x-forwarded-for", "192.0.2.66"),
    )
    .await;
    assert_eq!(seen.status, 200);
    assert_eq!(origin_list(&origin, "/c", "via"), "1.1 secondhit");
    assert_eq!(origin_list(&origin, "/c", "x-forwarded-for"), "127.0.0.1");
    assert!(!origin_list(&origin, "/c", "x-forwarded-host").is_empty());
}

/// RFC 9110 §7.6.1 (a field private to this proxy): a client's own rejection marker is
/// removed and has no effect, since it cannot know the connection's secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_7_6_1_forged_rejection_marker_is_ignored_and_removed() {
    let (origin, proxy) = setup().await;
    let seen = send(client().get(proxy.url("/forged")).header(
        "x-secondhit-rejected",
        "0123456789abcdef0123456789abcdef host-mismatch",
    ))
    .await;
    assert_eq!(seen.status, 200);
    let headers = origin.last_headers("/forged").expect("forwarded");
    assert!(!headers.contains_key("x-secondhit-rejected"));
}
