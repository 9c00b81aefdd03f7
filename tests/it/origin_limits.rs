//! Origin protection: `origin.max_in_flight` excess waits at most
//! `origin.queue_timeout`, then gets 503 with `Retry-After`; request bodies are read ahead
//! (`origin.body_buffer_size`) before a slot is taken, so a slow upload holds none, and
//! stall for at most `origin.body_read_timeout`, or keep under `origin.body_min_rate` for
//! at most that long (408). Real sockets: an echoing origin and the real proxy on
//! 127.0.0.1:0.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::proxy_hygiene::common::{Conn, detail};
use crate::support::{PATIENCE, TestProxy, client, send};
use secondhit_proxy::config::Config;

/// An origin that echoes each request's body (after `/slow/...` waits two seconds) and
/// counts the requests it is working on.
struct EchoOrigin {
    addr: SocketAddr,
    /// Requests being answered now, and the most at once.
    busy: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    /// Requests received in all.
    total: Arc<AtomicUsize>,
}

impl EchoOrigin {
    async fn start() -> EchoOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (busy, most, total): (Arc<AtomicUsize>, Arc<AtomicUsize>, Arc<AtomicUsize>) =
            (Arc::default(), Arc::default(), Arc::default());
        let counters = (Arc::clone(&busy), Arc::clone(&most), Arc::clone(&total));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (busy, most, total) = counters.clone();
                let service = service_fn(move |request: Request<Incoming>| {
                    let (busy, most, total) = (busy.clone(), most.clone(), total.clone());
                    async move {
                        total.fetch_add(1, Ordering::SeqCst);
                        let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        let slow = request.uri().path().starts_with("/slow");
                        let body = request.into_body().collect().await;
                        if slow {
                            tokio::time::sleep(Duration::from_secs(2)).await;
                        }
                        busy.fetch_sub(1, Ordering::SeqCst);
                        let echo = body.map(|b| b.to_bytes()).unwrap_or_default();
                        let response = Response::builder()
                            .header("cache-control", "no-store")
                            .body(Full::new(echo))
                            .expect("echo response");
                        Ok::<_, Infallible>(response)
                    }
                });
                tokio::spawn(async move {
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        EchoOrigin {
            addr,
            busy,
            most,
            total,
        }
    }
}

/// One origin slot, a short queue.
fn one_slot(config: &mut Config) {
    config.origin.max_in_flight = 1;
    config.origin.queue_timeout = Duration::from_millis(200);
}

/// Waits until the origin is working on `n` requests.
async fn until_busy(origin: &EchoOrigin, n: usize) {
    crate::support::wait_until(
        || "the origin never got busy".into(),
        || origin.busy.load(Ordering::SeqCst) >= n,
    )
    .await;
}

// On the paused clock: the queue timeout and the origin's two seconds are tokio timers.
#[tokio::test(start_paused = true)]
async fn excess_waits_at_most_queue_timeout_then_gets_503_with_retry_after() {
    let origin = EchoOrigin::start().await;
    let proxy = TestProxy::start(origin.addr, one_slot).await;
    let slow = tokio::spawn(send(client().get(proxy.url("/slow/a"))));
    until_busy(&origin, 1).await;
    let excess = send(client().get(proxy.url("/other"))).await;
    assert_eq!(excess.status, 503);
    assert_eq!(excess.cache.detail.as_deref(), Some("origin-busy"));
    assert_eq!(excess.headers["retry-after"], "1");
    assert_eq!(
        origin.total.load(Ordering::SeqCst),
        1,
        "the excess never reached the origin"
    );
    let slow = slow.await.expect("slow request");
    assert_eq!(slow.status, 200, "the request holding the slot is answered");
}

// Wall clock: with two hundred clients at once a paused clock, which jumps ahead whenever
// the runtime waits on their sockets, reaches the clients' own timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_misses_on_a_slow_origin_fail_fast_and_never_exceed_max_in_flight() {
    let origin = EchoOrigin::start().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.origin.max_in_flight = 4;
        c.origin.queue_timeout = Duration::from_millis(300);
    })
    .await;
    let requests: Vec<_> = (0..200)
        .map(|i| tokio::spawn(send(client().get(proxy.url(&format!("/slow/{i}"))))))
        .collect();
    let (mut ok, mut busy) = (0, 0);
    for request in requests {
        let seen = request.await.expect("request task");
        match seen.status {
            200 => ok += 1,
            503 => {
                assert!(seen.headers.contains_key("retry-after"));
                busy += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(ok + busy, 200);
    assert!(ok >= 4, "the slots were used: {ok} answered");
    assert!(
        busy > 0,
        "excess was refused rather than queued: {ok} answered"
    );
    assert!(
        origin.most.load(Ordering::SeqCst) <= 4,
        "never more than max_in_flight at the origin"
    );
}

/// Sends a POST head declaring `length` body bytes, and the first `sent` of them.
async fn start_upload(proxy: &TestProxy, path: &str, length: usize, sent: &[u8]) -> Conn {
    let mut conn = Conn::open(proxy).await;
    let head = format!("POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: {length}\r\n\r\n");
    conn.write(head.as_bytes()).await;
    conn.write(sent).await;
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upload_holds_no_origin_slot() {
    let origin = EchoOrigin::start().await;
    let proxy = TestProxy::start(origin.addr, one_slot).await;
    let mut upload = start_upload(&proxy, "/up", 10, b"01").await;
    // While the upload trickles, the one slot is free for others.
    for _ in 0..3 {
        let other = send(client().post(proxy.url("/other")).body("x")).await;
        assert_eq!(other.status, 200, "{:?}", other.cache);
        assert_eq!(other.body, b"x");
    }
    upload.write(b"23456789").await;
    let answer = upload.response().await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.body, b"0123456789",
        "the whole body reached the origin"
    );
}

// On the paused clock: `origin.body_read_timeout` is a tokio timer.
#[tokio::test(start_paused = true)]
async fn a_stalled_upload_gets_408_and_never_reaches_the_origin() {
    let origin = EchoOrigin::start().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.origin.body_read_timeout = Duration::from_millis(300);
    })
    .await;
    let mut upload = start_upload(&proxy, "/stalled", 10, b"01").await;
    let answer = upload.response().await;
    assert_eq!(answer.status, 408);
    assert_eq!(detail(&answer), "request-body-timeout");
    assert_eq!(origin.total.load(Ordering::SeqCst), 0);
    assert!(
        upload.closed().await,
        "the connection is closed after a 408"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_larger_than_the_buffer_streams_on_whole() {
    let origin = EchoOrigin::start().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.origin.body_buffer_size = 1024;
    })
    .await;
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let seen = send(client().put(proxy.url("/big")).body(body.clone())).await;
    assert_eq!(seen.status, 200);
    assert!(seen.body == body, "the origin got every byte, in order");
    // A chunked upload of unknown length too, over a raw connection.
    let chunked = b"POST /chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
                    5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    let text = send_raw(&proxy, chunked).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("hello world"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_that_breaks_off_is_a_bad_request_not_an_origin_error() {
    let origin = EchoOrigin::start().await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    // A chunked body whose second chunk size is no number: it breaks off there.
    let broken = b"POST /cut HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
                   2\r\n01\r\nzz\r\n";
    let text = send_raw(&proxy, broken).await;
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("detail=bad-request"), "{text}");
    assert_eq!(
        origin.total.load(Ordering::SeqCst),
        0,
        "nothing reached the origin"
    );
    let metrics = crate::support::scrape(&proxy).await;
    let errors = |kind: &str| {
        crate::support::sample(
            &metrics,
            &format!("secondhit_errors_total{{kind=\"{kind}\"}}"),
        )
    };
    assert_eq!(errors("bad-request"), 1.0);
    assert_eq!(errors("origin-error"), 0.0);
}

/// A POST declaring 200000 body bytes that sends 70000 at once (more than the default
/// `origin.body_buffer_size`, so it streams on to the origin and holds a slot), then one
/// byte every 200ms until the proxy closes the connection. Returns the response head.
async fn trickling_upload(proxy: SocketAddr) -> String {
    let stream = TcpStream::connect(proxy).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let head = "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 200000\r\n\r\n";
    write.write_all(head.as_bytes()).await.expect("upload head");
    write.write_all(&[b'u'; 70_000]).await.expect("burst");
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if write.write_all(b"t").await.is_err() {
                break;
            }
        }
    });
    let mut answer = Vec::new();
    let read_head = async {
        let mut buf = [0u8; 1024];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    };
    let answered = tokio::time::timeout(PATIENCE, read_head).await;
    trickle.abort();
    assert!(answered.is_ok(), "the trickling upload got no answer");
    String::from_utf8_lossy(&answer).into_owned()
}

// On the paused clock: the trickle's pace, `origin.body_min_rate` and the timeouts are tokio timers.
#[tokio::test(start_paused = true)]
async fn uploads_trickling_past_the_buffer_are_cut_and_give_their_slots_back() {
    let origin = EchoOrigin::start().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.origin.max_in_flight = 4;
        c.origin.queue_timeout = Duration::from_millis(100);
        // A response head may take this long, so slots held until then stay held past
        // PATIENCE: only the pace frees them.
        c.origin.read_timeout = Duration::from_secs(60);
        // One byte per 200ms is never a stall of a second, but far under 1000 bytes/s.
        c.origin.body_read_timeout = Duration::from_secs(1);
        c.origin.body_min_rate = 1000;
    })
    .await;
    let uploads: Vec<_> = (0..4)
        .map(|_| tokio::spawn(trickling_upload(proxy.addr)))
        .collect();
    // Every slot is taken by an upload streaming to the origin.
    until_busy(&origin, 4).await;
    let mut attempt = 0;
    crate::support::wait_until_async(
        || format!("GET misses still found every slot taken after {PATIENCE:?}"),
        async || {
            let seen = send(client().get(proxy.url(&format!("/after/{attempt}")))).await;
            attempt += 1;
            if seen.status == 200 {
                return true;
            }
            assert_eq!(
                (seen.status, seen.cache.detail.as_deref()),
                (503, Some("origin-busy"))
            );
            false
        },
    )
    .await;
    for upload in uploads {
        let head = upload.await.expect("upload task");
        assert!(head.starts_with("HTTP/1.1 408"), "{head}");
        assert!(head.contains("detail=request-body-timeout"), "{head}");
    }
}

/// Writes `request` to the proxy over a new connection and reads the whole answer until
/// the proxy closes (the request asks it to, or breaks off). The sending side stays open:
/// hyper takes a half-closed connection as a client that left, and answers nothing.
async fn send_raw(proxy: &TestProxy, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
    stream.write_all(request).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(
        PATIENCE,
        tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut answer),
    )
    .await
    .expect("answered")
    .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}
