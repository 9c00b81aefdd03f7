//! The origin connection pool: a connection serves request after request; one the origin
//! closed is not used again; one whose body was abandoned halfway is closed, never
//! reused mid-message; a bodiless answer frees its connection; no request waits behind
//! an upload that the origin answered before its end. A raw keep-alive origin on
//! 127.0.0.1:0 counts the connections each request came on.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{TestProxy, client, get};

/// What the origin does after each answer.
#[derive(Clone, Copy, PartialEq)]
enum After {
    /// Keeps the connection open for the next request.
    KeepOpen,
    /// Closes it, without saying so in the answer (as an origin's idle timeout does).
    Close,
}

/// Each request the origin read: the connection it came on (numbered from 0 in accept
/// order) and its request line.
type Log = Arc<Mutex<Vec<(usize, String)>>>;

/// An uncacheable answer with a 5-byte body.
const SMALL: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nCache-Control: no-store\r\n\r\nhello";

/// The head of an uncacheable answer whose 1 MB body never comes in full.
const ENDLESS_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\nCache-Control: no-store\r\n\r\n";

/// A keep-alive origin: `/endless` gets [`ENDLESS_HEAD`] and 64 KiB, then nothing;
/// anything else gets [`SMALL`] (its head only for `HEAD`), then `after`. Returns its
/// address, the request log, and how many of its connections the proxy closed.
async fn keep_alive_origin(after: After) -> (SocketAddr, Log, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let log: Log = Arc::default();
    let closed_by_proxy = Arc::new(Mutex::new(0));
    let (log_, closed_) = (Arc::clone(&log), Arc::clone(&closed_by_proxy));
    tokio::spawn(async move {
        let mut connection = 0;
        while let Ok((stream, _)) = listener.accept().await {
            let (log, closed) = (Arc::clone(&log_), Arc::clone(&closed_));
            tokio::spawn(serve(stream, connection, after, log, closed));
            connection += 1;
        }
    });
    (addr, log, closed_by_proxy)
}

async fn serve(
    mut stream: TcpStream,
    connection: usize,
    after: After,
    log: Log,
    closed: Arc<Mutex<usize>>,
) {
    while let Some(line) = read_head(&mut stream).await {
        log.lock().expect("log").push((connection, line.clone()));
        if line.starts_with("POST /upload ") {
            // Answers at once, then reads the upload as it comes, to its end.
            let _ = stream.write_all(SMALL).await;
            while matches!(stream.read(&mut [0u8; 4096]).await, Ok(1..)) {}
            return;
        }
        if line.starts_with("GET /endless ") {
            let _ = stream.write_all(ENDLESS_HEAD).await;
            let _ = stream.write_all(&vec![b'x'; 64 * 1024]).await;
            // Nothing more: the next read sees the proxy close the connection.
            if matches!(stream.read(&mut [0u8; 64]).await, Ok(0) | Err(_)) {
                *closed.lock().expect("count") += 1;
            }
            return;
        }
        let answer = if line.starts_with("HEAD ") {
            &SMALL[..SMALL.len() - 5]
        } else {
            SMALL
        };
        if stream.write_all(answer).await.is_err() || after == After::Close {
            return;
        }
    }
}

/// Reads one request head; its request line, or `None` once the proxy closed.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: the head must end exactly where it ends, the next request follows.
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&head);
    text.lines().next().map(str::to_owned)
}

fn connections(log: &Log) -> Vec<usize> {
    log.lock().expect("log").iter().map(|(c, _)| *c).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_serves_request_after_request() {
    let (origin, log, _) = keep_alive_origin(After::KeepOpen).await;
    let proxy = TestProxy::start(origin, |_| {}).await;
    for i in 0..5 {
        let seen = get(&proxy.url(&format!("/pass/{i}"))).await;
        assert_eq!((seen.status, seen.body.as_slice()), (200, &b"hello"[..]));
    }
    assert_eq!(connections(&log), [0, 0, 0, 0, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bodiless_answer_frees_its_connection() {
    let (origin, log, _) = keep_alive_origin(After::KeepOpen).await;
    let proxy = TestProxy::start(origin, |_| {}).await;
    for _ in 0..3 {
        let response = client()
            .head(proxy.url("/head"))
            .send()
            .await
            .expect("HEAD response");
        assert_eq!(response.status(), 200);
    }
    let seen = get(&proxy.url("/after-head")).await;
    assert_eq!(seen.body, b"hello");
    assert_eq!(connections(&log), [0, 0, 0, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_origin_closed_is_not_used_again() {
    let (origin, log, _) = keep_alive_origin(After::Close).await;
    let proxy = TestProxy::start(origin, |_| {}).await;
    for i in 0..3 {
        let seen = get(&proxy.url(&format!("/pass/{i}"))).await;
        assert_eq!((seen.status, seen.body.as_slice()), (200, &b"hello"[..]));
    }
    assert_eq!(connections(&log), [0, 1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_abandoned_halfway_closes_its_connection() {
    let (origin, log, closed_by_proxy) = keep_alive_origin(After::KeepOpen).await;
    let proxy = TestProxy::start(origin, |_| {}).await;
    let mut response = client()
        .get(proxy.url("/endless"))
        .send()
        .await
        .expect("response head");
    assert_eq!(response.status(), 200);
    response.chunk().await.expect("first bytes");
    drop(response);
    // The next request cannot go out on the connection still owing 900 KB: it gets a new
    // one, and the proxy closes the old.
    let seen = get(&proxy.url("/next")).await;
    assert_eq!(seen.body, b"hello");
    assert_eq!(connections(&log), [0, 1]);
    crate::support::wait_until(
        || "the proxy kept the abandoned connection open".into(),
        || *closed_by_proxy.lock().expect("count") > 0,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_waits_behind_an_upload_the_origin_answered_early() {
    let (origin, log, _) = keep_alive_origin(After::KeepOpen).await;
    // A request that waited behind the upload would fail after these (a 504), not hang.
    let proxy = TestProxy::start(origin, |config| {
        config.origin.connect_timeout = Duration::from_secs(1);
        config.origin.read_timeout = Duration::from_secs(2);
    })
    .await;
    // An upload larger than `origin.body_buffer_size` (so it streams to the origin),
    // whose last chunk is held back until the end of the test.
    let mut uploader = TcpStream::connect(proxy.addr)
        .await
        .expect("connect to the proxy");
    let chunk = vec![b'u'; 100 * 1024];
    let head = b"POST /upload HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n";
    uploader.write_all(head).await.expect("upload head");
    uploader
        .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
        .await
        .expect("chunk size");
    uploader.write_all(&chunk).await.expect("chunk");
    uploader.write_all(b"\r\n").await.expect("chunk end");
    // The answer arrives while the upload is still open.
    let mut answer = Vec::new();
    while !answer.ends_with(b"hello") {
        let mut buf = [0u8; 1024];
        let n = uploader.read(&mut buf).await.expect("the upload's answer");
        assert_ne!(n, 0, "the proxy closed the upload's connection");
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let seen = get(&proxy.url("/next")).await;
    assert_eq!((seen.status, seen.body.as_slice()), (200, &b"hello"[..]));
    assert_eq!(connections(&log), [0, 1]);
    uploader.write_all(b"0\r\n\r\n").await.expect("last chunk");
}
