//! How an origin's failures reach the client, as
//! `docs/guide/origin-failures.md` lists them: refused, silent before its head, a switch of
//! protocols nobody asked for, reset or silent mid-body with `Content-Length` and chunked framing. Each is answered or aborted within
//! the configured timeouts, and nothing half-received is stored. A raw TCP origin on
//! 127.0.0.1:0 plays each failure byte for byte.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{PATIENCE, TestProxy, client, get, read_request_head};
use secondhit_proxy::config::{AdmissionPolicy, Config};

/// What the raw origin does after it read a request head.
#[derive(Clone, Copy)]
enum Then {
    /// Writes the bytes, then closes the connection (after a moment, so that the proxy
    /// surely relayed the head and the first bytes: a failure in the same read as the
    /// head ends the client's connection before any response).
    Close,
    /// Writes the bytes, then keeps the connection open and silent.
    Hang,
}

/// An origin that answers every request with `bytes`, then does `then`.
async fn raw_origin(bytes: &'static [u8], then: Then) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                if !read_request_head(&mut stream).await {
                    return;
                }
                let _ = stream.write_all(bytes).await;
                match then {
                    Then::Close => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        drop(stream);
                    }
                    Then::Hang => {
                        // Silent until the proxy gives up and closes its side.
                        let _ = stream.read(&mut [0u8; 64]).await;
                    }
                }
            });
        }
    });
    addr
}

/// Short origin timeouts, and every storable response admitted.
fn short_timeouts(config: &mut Config) {
    config.origin.connect_timeout = Duration::from_millis(500);
    config.origin.read_timeout = Duration::from_millis(500);
    config.admission.policy = AdmissionPolicy::Always;
}

/// An origin that accepts the connection and never answers: 504 `origin-timeout` after
/// `connect_timeout + read_timeout`.
// On the paused clock: the proxy's head timeout is a tokio timer, which the runtime
// advances when nothing else can run.
#[tokio::test(start_paused = true)]
async fn silent_origin_is_a_504() {
    let origin = raw_origin(b"", Then::Hang).await;
    let proxy = TestProxy::start(origin, short_timeouts).await;
    let seen = get(&proxy.url("/silent")).await;
    assert_eq!(seen.status, 504);
    assert_eq!(seen.cache.detail.as_deref(), Some("origin-timeout"));
}

/// An origin that closes the connection before any response: 502 `origin-error`.
// On the paused clock: the origin's moment before it closes is a tokio timer.
#[tokio::test(start_paused = true)]
async fn origin_closing_before_its_head_is_a_502() {
    let origin = raw_origin(b"", Then::Close).await;
    let proxy = TestProxy::start(origin, short_timeouts).await;
    let seen = get(&proxy.url("/closed")).await;
    assert_eq!(seen.status, 502);
    assert_eq!(seen.cache.detail.as_deref(), Some("origin-error"));
}

/// Reads the response to `path`: its status and whether its body arrived whole.
async fn body_outcome(proxy: &TestProxy, path: &str) -> (u16, Result<Vec<u8>, String>) {
    let response = client()
        .get(proxy.url(path))
        .send()
        .await
        .expect("the response head arrives");
    let status = response.status().as_u16();
    let body = tokio::time::timeout(PATIENCE, response.bytes())
        .await
        .expect("the body ends or aborts within the timeouts");
    (status, body.map(|b| b.to_vec()).map_err(|e| e.to_string()))
}

const CHUNKED_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n";

/// A chunked body cut before its last chunk: the client's body aborts (never a short body
/// that looks whole), and nothing is stored.
// On the paused clock: the origin's moment before it closes is a tokio timer.
#[tokio::test(start_paused = true)]
async fn chunked_body_reset_mid_body_aborts_the_client() {
    let origin = raw_origin(CHUNKED_HEAD, Then::Close).await;
    let proxy = TestProxy::start(origin, short_timeouts).await;
    let (status, body) = body_outcome(&proxy, "/chunked-cut").await;
    assert_eq!(status, 200);
    assert!(body.is_err(), "an aborted body, not {body:?}");
    assert!(proxy.entry_files().is_empty());
}

/// A chunked body that goes silent: aborted after `read_timeout`, nothing stored.
// On the paused clock: the proxy's read timeout is a tokio timer.
#[tokio::test(start_paused = true)]
async fn chunked_body_silent_mid_body_aborts_after_read_timeout() {
    let origin = raw_origin(CHUNKED_HEAD, Then::Hang).await;
    let proxy = TestProxy::start(origin, short_timeouts).await;
    let (status, body) = body_outcome(&proxy, "/chunked-stall").await;
    assert_eq!(status, 200);
    assert!(body.is_err(), "an aborted body, not {body:?}");
    assert!(proxy.entry_files().is_empty());
}

const LENGTH_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 100\r\n\r\nonly ten b";

/// A `Content-Length` body cut short: the client's body aborts, nothing stored.
// On the paused clock: the origin's moment before it closes is a tokio timer.
#[tokio::test(start_paused = true)]
async fn length_body_reset_mid_body_aborts_the_client() {
    let origin = raw_origin(LENGTH_HEAD, Then::Close).await;
    let proxy = TestProxy::start(origin, short_timeouts).await;
    let (status, body) = body_outcome(&proxy, "/length-cut").await;
    assert_eq!(status, 200);
    assert!(body.is_err(), "an aborted body, not {body:?}");
    assert!(proxy.entry_files().is_empty());
}

/// A `Content-Length` body that goes silent: aborted after `read_timeout`, nothing stored.
// On the paused clock: the proxy's read timeout is a tokio timer.
#[tokio::test(start_paused = true)]
async fn length_body_silent_mid_body_aborts_after_read_timeout() {
    let origin = raw_origin(LENGTH_HEAD, Then::Hang).await;
    let proxy = TestProxy::start(origin, short_timeouts).await;
    let (status, body) = body_outcome(&proxy, "/length-stall").await;
    assert_eq!(status, 200);
    assert!(body.is_err(), "an aborted body, not {body:?}");
    assert!(proxy.entry_files().is_empty());
}

/// An origin that switches protocols (101) for a request that asked for no upgrade (the
/// proxy never forwards one): a broken exchange, 502 `origin-error`, never a 101 relayed
/// to a client that did not ask, which ends its connection and tells an intermediary in
/// front that the connection changed protocol.
#[tokio::test(start_paused = true)]
async fn an_unasked_switch_of_protocols_is_a_502() {
    let origin = raw_origin(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nraw bytes",
        Then::Hang,
    )
    .await;
    let proxy = TestProxy::start(origin, short_timeouts).await;
    let seen = get(&proxy.url("/switch")).await;
    assert_eq!(seen.status, 502);
    assert_eq!(seen.cache.detail.as_deref(), Some("origin-error"));
}
