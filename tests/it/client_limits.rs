//! Client limits: `server.idle_timeout` closes idle HTTP/1.1 and h2c
//! connections (h2c with GOAWAY) but not one with a request open; reaching
//! `server.max_connections` closes connections with no request open, so a new client is
//! served; slow-header clients do not keep a well-behaved one from its hits, and a head
//! left unfinished, first or later on a kept-alive connection, ends the connection at
//! `server.header_read_timeout`. Real sockets on 127.0.0.1; h2c connections are written
//! byte by byte.
//!
//! Most run on tokio's paused clock (`start_paused`, one thread): the proxy's timeouts are
//! tokio timers, which the runtime advances when every task waits, so a test waits for
//! no timeout on the wall clock. The two that fill the clients' socket buffers stay on
//! the wall clock: a stalled write is real back-pressure, not a timer.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::serve::ServeProcess;
use crate::support::{PATIENCE, Reply, TestOrigin, TestProxy, client, h2c_client, send};
use secondhit_proxy::config::{AdmissionPolicy, Config};

/// The HTTP/2 connection preface and an empty SETTINGS frame: all an idle h2c client sends.
const H2C_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// HTTP/2 frame types (RFC 9113 §6): SETTINGS, PING, GOAWAY.
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
/// The ACK flag of SETTINGS and PING.
const ACK: u8 = 0x1;

/// How many connections a test may open: `wanted`, or fewer when the open-file limit
/// (each connection is two descriptors in this process: client and proxy side) is low.
fn connections(wanted: usize) -> usize {
    let limit = crate::support::procfs::value("self", "limits", "Max open files")
        .and_then(|soft| soft.parse::<usize>().ok())
        .unwrap_or(1024);
    // Other tests of the binary run at the same time: use at most a quarter.
    let fits = limit / 4 / 2;
    if fits < wanted {
        eprintln!("open-file limit {limit}: {fits} connections instead of {wanted}");
    }
    wanted.min(fits)
}

/// An origin whose `/slow` answers after 1.5 s and everything else at once.
async fn origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let reply = Reply::ok("max-age=600", b"hello".to_vec());
        if head.uri.path() == "/slow" {
            reply.delayed(Duration::from_millis(1500))
        } else {
            reply
        }
    })
    .await
}

/// `idle_timeout` short; `header_read_timeout` longer than the tests wait, so only the
/// idle timer can close an idle connection within them.
fn short_idle(config: &mut Config) {
    config.server.idle_timeout = Duration::from_millis(500);
    config.server.header_read_timeout = Duration::from_secs(60);
}

/// Reads `stream` until what it has sent ends with `end`, within `PATIENCE`.
async fn read_past(stream: &mut TcpStream, end: &[u8]) {
    let mut seen = Vec::new();
    let read = async {
        while !seen.ends_with(end) {
            let mut chunk = [0u8; 512];
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the answer's end within the patience");
}

/// Reads `stream` to its end within `PATIENCE`; `None` if it stayed open.
async fn read_to_close(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    match tokio::time::timeout(PATIENCE, stream.read_to_end(&mut seen)).await {
        Ok(_) => Some(seen),
        Err(_) => None,
    }
}

/// Reads one HTTP/2 frame: its type, flags and payload; `None` at the end of the stream.
async fn read_frame(stream: &mut TcpStream) -> Option<(u8, u8, Vec<u8>)> {
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).await.ok()?;
    let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.ok()?;
    Some((head[3], head[4], payload))
}

/// Plays an idle h2c client that has sent its preface: opens no stream, but acknowledges
/// the server's SETTINGS and PINGs as a live client does (a graceful HTTP/2 shutdown
/// waits for a PING's answer before it closes). Returns the frame types the server sent,
/// once it closed the connection; `None` if it stayed open for `PATIENCE`.
async fn idle_h2c(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut types = Vec::new();
    let frames = async {
        while let Some((kind, flags, payload)) = read_frame(stream).await {
            types.push(kind);
            let answer = match kind {
                SETTINGS if flags & ACK == 0 => frame(SETTINGS, ACK, 0, &[]),
                PING if flags & ACK == 0 => frame(PING, ACK, 0, &payload),
                _ => continue,
            };
            if stream.write_all(&answer).await.is_err() {
                return;
            }
        }
    };
    tokio::time::timeout(PATIENCE, frames).await.ok()?;
    Some(types)
}

#[tokio::test(start_paused = true)]
async fn idle_http1_connections_are_closed_after_idle_timeout() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, short_idle).await;
    let mut streams = Vec::new();
    for _ in 0..connections(2000) {
        let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
        stream
            .write_all(b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .expect("request");
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.expect("response");
        assert_eq!(&head, b"HTTP/1.1 200");
        streams.push(stream);
    }
    for stream in &mut streams {
        assert!(
            read_to_close(stream).await.is_some(),
            "a kept-alive HTTP/1.1 connection was closed once idle"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn idle_h2c_connections_get_goaway_after_idle_timeout() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, short_idle).await;
    let mut streams = Vec::new();
    for _ in 0..connections(2000) {
        let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
        stream.write_all(H2C_PREFACE).await.expect("preface");
        streams.push(stream);
    }
    // Every client at once: each answers the PING of the server's graceful shutdown.
    let clients: Vec<_> = streams
        .into_iter()
        .map(|mut stream| tokio::spawn(async move { idle_h2c(&mut stream).await }))
        .collect();
    for client in clients {
        let types = client
            .await
            .expect("client task")
            .expect("an idle h2c connection is closed");
        assert!(
            types.contains(&GOAWAY),
            "closed with GOAWAY: frames {types:?}"
        );
    }
}

/// A client that never answers a PING cannot keep its connection open after GOAWAY: the
/// graceful close's deadline drops it.
#[tokio::test(start_paused = true)]
async fn an_idle_h2c_client_that_never_answers_pings_is_dropped() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.idle_timeout = Duration::from_millis(500);
        c.server.header_read_timeout = Duration::from_secs(1);
    })
    .await;
    let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
    stream.write_all(H2C_PREFACE).await.expect("preface");
    assert!(
        read_to_close(&mut stream).await.is_some(),
        "the connection is closed without the client's help"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_open_longer_than_idle_timeout_is_not_cut() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, short_idle).await;
    let h1 = send(client().get(proxy.url("/slow"))).await;
    assert_eq!((h1.status, h1.body.as_slice()), (200, &b"hello"[..]));
    let seen = send(h2c_client().get(proxy.url("/slow?h2"))).await;
    assert_eq!((seen.status, seen.body.as_slice()), (200, &b"hello"[..]));
}

#[tokio::test(start_paused = true)]
async fn with_max_connections_full_of_idle_h2c_a_new_client_is_served() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.max_connections = 50;
        // Longer than the test waits: only reaching the limit can free a slot in time.
        c.server.idle_timeout = Duration::from_secs(60);
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..50 {
        let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
        stream.write_all(H2C_PREFACE).await.expect("preface");
        // The server's first frame: the connection was accepted and holds a slot.
        let mut first = [0u8; 9];
        stream.peek(&mut first).await.expect("server settings");
        idle.push(tokio::spawn(async move { idle_h2c(&mut stream).await }));
    }
    let seen = send(client().get(proxy.url("/new"))).await;
    assert_eq!(seen.status, 200, "the new client is served");
    for client in idle {
        let types = client
            .await
            .expect("client task")
            .expect("an idle connection made room");
        assert!(
            types.contains(&GOAWAY),
            "closed with GOAWAY: frames {types:?}"
        );
    }
}

/// h2c clients that sent their preface and then never read nor answered anything cannot
/// keep a new client waiting at `server.max_connections`: the graceful close a reap
/// starts has a deadline, after which their connections are dropped.
#[tokio::test(start_paused = true)]
async fn with_max_connections_full_of_silent_h2c_a_new_client_is_served() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.max_connections = 4;
        // Longer than the test waits: neither the idle timer nor hyper's keep-alive
        // (an unanswered ping is given `header_read_timeout`) can free a slot in time.
        c.server.idle_timeout = Duration::from_secs(60);
        c.server.header_read_timeout = Duration::from_secs(60);
    })
    .await;
    let mut silent = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
        stream.write_all(H2C_PREFACE).await.expect("preface");
        // The server's first frame, peeked and left unread: the connection holds a slot.
        let mut first = [0u8; 9];
        stream.peek(&mut first).await.expect("server settings");
        silent.push(stream);
    }
    let seen = tokio::time::timeout(PATIENCE, send(client().get(proxy.url("/new"))))
        .await
        .expect("the new client is answered while silent clients hold every slot");
    assert_eq!(seen.status, 200, "the new client is served");
    for stream in &mut silent {
        assert!(
            read_to_close(stream).await.is_some(),
            "a silent h2c connection was dropped to make room"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn slow_header_clients_do_not_keep_a_good_client_from_its_hits() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let url = proxy.url("/hot");
    assert_eq!(send(client().get(&url)).await.status, 200);
    proxy.wait_committed(1).await;
    // Each slow client sends its head one byte a second for five seconds.
    let slow: Vec<_> = (0..connections(500))
        .map(|_| {
            let addr = proxy.addr;
            tokio::spawn(async move {
                let Ok(mut stream) = TcpStream::connect(addr).await else {
                    return;
                };
                for byte in b"GET /".iter() {
                    if stream.write_all(&[*byte]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let good = client();
    for _ in 0..20 {
        // The bound is the header timeout: generous, and no latency figure.
        let seen = tokio::time::timeout(PATIENCE, send(good.get(&url)))
            .await
            .expect("served while slow clients dribble");
        assert_eq!(seen.status, 200);
        assert!(seen.cache.hit, "{:?}", seen.cache);
    }
    for task in slow {
        task.abort();
    }
}

/// Reaching `server.max_connections` is logged, with the limit, at most once a minute: two
/// clients that each find the limit reached make one log line, and both are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaching_max_connections_is_logged_once_and_makes_room() {
    let origin = origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\nmax_connections = 2\n\
         idle_timeout = \"60s\"\n[origin]\nurl = \"http://{}\"\n[cache]\ndir = \"{}\"\n\
         fsync = false\n[admission]\npolicy = \"always\"\nseed = \"client limits\"\n\
         [log]\nformat = \"json\"\naccess_log = \"off\"\n",
        origin.addr,
        dir.path().join("cache").display(),
    );
    let path = dir.path().join("secondhit.toml");
    std::fs::write(&path, config).expect("write config");
    let mut serve = ServeProcess::start(&path).await;
    for round in 0..2 {
        // Two kept-alive connections take both slots, each with a response read to its
        // last byte. Each response is stored: teed into a fill, whose pump may tell the
        // body it ended only after the client has read it all. Its request must count as
        // done all the same, or the held connection is not reaped.
        let mut held = Vec::new();
        for i in 0..2 {
            let mut stream = TcpStream::connect(&serve.addr).await.expect("connect");
            let request = format!("GET /held/{round}/{i} HTTP/1.1\r\nHost: a\r\n\r\n");
            stream.write_all(request.as_bytes()).await.expect("request");
            read_past(&mut stream, b"\r\n\r\nhello").await;
            held.push(stream);
        }
        // `Connection: close`, and read to the end: the connection is gone from the
        // server's count before the next round. (A pooled client's connection closes
        // when the client is dropped, asynchronously: still counted, it would be the one
        // whose arrival reaps, and the round's own new client would find room.)
        let mut fresh = TcpStream::connect(&serve.addr).await.expect("connect");
        fresh
            .write_all(b"GET /room HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .await
            .expect("request");
        let answer = read_to_close(&mut fresh)
            .await
            .expect("answered and closed");
        assert!(
            answer.starts_with(b"HTTP/1.1 200"),
            "round {round}: the new client is served: {:?}",
            String::from_utf8_lossy(&answer)
        );
        for stream in &mut held {
            assert!(read_to_close(stream).await.is_some(), "round {round}");
        }
    }
    let line = serve.wait_for_log("server.max_connections reached").await;
    assert!(line.contains("\"max_connections\":2"), "{line}");
    let lines = serve.log_lines_containing("server.max_connections reached");
    assert_eq!(lines, 1, "logged once, not once per client");
    serve.kill().await;
}

/// An HTTP/2 frame: 9-byte head (RFC 9113 §4.1) and payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Reads the server's frames until it closes, acknowledging nothing; returns each frame's
/// type and payload.
async fn frames_until_close(stream: &mut TcpStream) -> Vec<(u8, Vec<u8>)> {
    let mut seen = Vec::new();
    let read = async {
        while let Some((kind, _, payload)) = read_frame(stream).await {
            seen.push((kind, payload));
        }
    };
    let _ = tokio::time::timeout(PATIENCE, read).await;
    seen
}

/// The server's SETTINGS announce `server.max_concurrent_streams`, and a client that opens
/// and at once resets streams in a loop (rapid reset, CVE-2023-44487) gets GOAWAY with
/// ENHANCE_YOUR_CALM instead of costing the origin a request per stream.
#[tokio::test(start_paused = true)]
async fn http2_stream_limits_are_announced_and_rapid_reset_ends_in_goaway() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| c.server.max_concurrent_streams = 7).await;
    let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
    stream.write_all(H2C_PREFACE).await.expect("preface");
    // GET http://a/x: :method GET, :scheme http, :path / (static table), :authority "a".
    let block = [0x82, 0x86, 0x84, 0x41, 0x01, b'a'];
    const HEADERS: u8 = 0x1;
    const RST_STREAM: u8 = 0x3;
    const END_STREAM_AND_HEADERS: u8 = 0x1 | 0x4;
    const CANCEL: u32 = 0x8;
    let mut flood = Vec::new();
    for n in 0..500u32 {
        let id = 2 * n + 1;
        flood.extend(frame(HEADERS, END_STREAM_AND_HEADERS, id, &block));
        flood.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
    }
    // The server may close before it read everything: a failed write is expected.
    let _ = stream.write_all(&flood).await;
    let frames = frames_until_close(&mut stream).await;
    let settings = frames
        .iter()
        .find(|(kind, _)| *kind == SETTINGS)
        .map(|(_, payload)| payload.clone())
        .expect("server SETTINGS");
    let max_streams = settings
        .chunks(6)
        .find(|param| param[..2] == [0, 3])
        .map(|param| u32::from_be_bytes([param[2], param[3], param[4], param[5]]));
    assert_eq!(max_streams, Some(7), "SETTINGS_MAX_CONCURRENT_STREAMS");
    const ENHANCE_YOUR_CALM: u32 = 0xb;
    let goaway = frames
        .iter()
        .find(|(kind, _)| *kind == GOAWAY)
        .map(|(_, payload)| u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]));
    assert_eq!(
        goaway,
        Some(ENHANCE_YOUR_CALM),
        "frames: {:?}",
        frames.iter().map(|f| f.0).collect::<Vec<_>>()
    );
    assert!(
        origin.total() < 500,
        "{} of 500 reset streams reached the origin",
        origin.total()
    );
}

#[tokio::test(start_paused = true)]
async fn client_that_never_finishes_its_head_is_disconnected() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.header_read_timeout = Duration::from_millis(300)
    })
    .await;
    let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
    stream
        .write_all(b"GET /x HTTP/1.1\r\nHost: a\r\n")
        .await
        .expect("partial head");
    assert!(
        read_to_close(&mut stream).await.is_some(),
        "the proxy must close the connection after header_read_timeout"
    );
    assert_eq!(origin.count("/x"), 0);
}

/// A proxy whose heads are due 300 ms after they begin (and idle connections kept far
/// longer), and a connection to it that has sent one whole head, for `path`.
async fn after_one_head(origin: &TestOrigin, path: &str) -> (TestProxy, TcpStream) {
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.header_read_timeout = Duration::from_millis(300);
        c.server.idle_timeout = Duration::from_secs(600);
    })
    .await;
    let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
    let head = format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("first head");
    (proxy, stream)
}

/// A later head is timed from its first byte: after one answered request, a head that
/// stops halfway ends the connection at `header_read_timeout`, long before the idle
/// timeout would.
#[tokio::test(start_paused = true)]
async fn a_later_head_that_stops_halfway_is_disconnected() {
    let origin = origin().await;
    let (_proxy, mut stream) = after_one_head(&origin, "/first").await;
    // The whole first answer: its head, then the 5 bytes its Content-Length names.
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    let complete = |answer: &[u8]| {
        let text = String::from_utf8_lossy(answer);
        text.find("\r\n\r\n")
            .is_some_and(|end| answer.len() >= end + 4 + 5)
    };
    while !complete(&answer) {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut chunk))
            .await
            .expect("the first answer comes")
            .expect("read");
        assert!(
            n > 0,
            "the connection closed before the first answer was whole"
        );
        answer.extend_from_slice(&chunk[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    stream
        .write_all(b"GET /second HTTP/1.1\r\nHost: a\r\n")
        .await
        .expect("partial second head");
    let rest = read_to_close(&mut stream)
        .await
        .expect("the proxy must close the connection header_read_timeout after a head began");
    assert!(
        rest.is_empty(),
        "nothing answers a head that never ended: {rest:?}"
    );
    assert_eq!(origin.count("/second"), 0);
}

/// A head begun while the request before it is still being answered is timed from its
/// first bytes too: the connection ends `header_read_timeout` after them, before the slow
/// answer would have come.
#[tokio::test(start_paused = true)]
async fn a_head_begun_during_a_slow_answer_is_timed_from_its_first_bytes() {
    let origin = origin().await;
    let (_proxy, mut stream) = after_one_head(&origin, "/slow").await;
    // The origin answers /slow 1.5 s later; the next head begins meanwhile and stops.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let begun = tokio::time::Instant::now();
    stream
        .write_all(b"GET /second HTTP/1.1\r\nHost: a\r\n")
        .await
        .expect("partial second head");
    let rest = read_to_close(&mut stream)
        .await
        .expect("the proxy must close the connection");
    assert!(
        begun.elapsed() < Duration::from_millis(1000),
        "closed {:?} after the second head began, not at its timeout",
        begun.elapsed()
    );
    assert!(rest.is_empty(), "the slow answer never came: {rest:?}");
    assert_eq!(origin.count("/second"), 0);
}

/// A proxy storing everything, its body streamed from disk (no memory tier), with
/// `send_timeout` and timeouts the tests outlast otherwise; and an origin whose `/big` is
/// 8 MB, far more than socket buffers hold.
async fn stalling_setup(max_connections: usize, send_timeout: Duration) -> (TestOrigin, TestProxy) {
    let big = crate::support::body_bytes(8_000_000, 5);
    let origin = TestOrigin::start(move |head| match head.uri.path() {
        "/big" => Reply::ok("max-age=600", big.clone()),
        _ => Reply::ok("max-age=600", b"hello".to_vec()),
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.memory_size = 0;
        c.server.max_connections = max_connections;
        c.server.send_timeout = send_timeout;
        c.server.idle_timeout = Duration::from_secs(600);
        c.server.header_read_timeout = Duration::from_secs(600);
    })
    .await;
    let stored = send(client().get(proxy.url("/big"))).await;
    assert!(stored.cache.stored, "{:?}", stored.cache);
    proxy.wait_committed(1).await;
    (origin, proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_stop_reading_do_not_lock_others_out() {
    let (_origin, proxy) = stalling_setup(3, Duration::from_secs(1)).await;
    // Three clients with tiny receive buffers ask for the big object and never read.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        let mut stream = socket.connect(proxy.addr).await.expect("connect");
        let request = b"GET /big HTTP/1.1\r\nHost: stall.test\r\n\r\n";
        stream.write_all(request).await.expect("request");
        stalled.push(stream);
    }
    let seen = tokio::time::timeout(PATIENCE, send(client().get(proxy.url("/small"))))
        .await
        .expect("a new client is answered while stalled readers hold every slot");
    assert_eq!(seen.status, 200);
    for stream in &mut stalled {
        dropped_unread(stream, "a stalled reader is dropped").await;
    }
}

/// Asserts (with `what`) that the proxy drops `stream` within `PATIENCE`, found without
/// reading from it (reading would let its response go on): once the proxy's socket is
/// gone, a byte written to it is answered with a reset, and a later write fails.
async fn dropped_unread(stream: &mut TcpStream, what: &str) {
    crate::support::wait_until_async(
        || what.to_owned(),
        async || stream.write_all(b"x").await.is_err(),
    )
    .await;
}

/// The head of `/big` on an h2c connection of its own that answers pings (hyper's client
/// does) but grants no flow-control window, so no byte of the body gets through; the
/// client is returned with it, as dropping it would close the connection.
async fn stingy_big(proxy: &TestProxy) -> (reqwest::Client, reqwest::Response) {
    let stingy = reqwest::Client::builder()
        .http2_prior_knowledge()
        .http2_initial_stream_window_size(0)
        .build()
        .expect("h2c client");
    let response = tokio::time::timeout(PATIENCE, stingy.get(proxy.url("/big")).send())
        .await
        .expect("the head comes: it needs no window")
        .expect("a response head");
    assert_eq!(response.status(), 200);
    (stingy, response)
}

#[tokio::test(start_paused = true)]
async fn an_http2_client_that_grants_no_window_is_dropped_after_send_timeout() {
    let (_origin, proxy) = stalling_setup(100, Duration::from_secs(1)).await;
    let (_stingy, response) = stingy_big(&proxy).await;
    let body = tokio::time::timeout(PATIENCE, response.bytes())
        .await
        .expect("the connection is dropped within PATIENCE, not held for ever");
    assert!(body.is_err(), "the body cannot have arrived with no window");
}

/// Readers that stopped a moment before a new client came hold every slot: they had not
/// been quiet for a tick yet when the client arrived, so the first reap spared them.
/// While the client waits, stalled connections are checked again at every tick of the
/// connections' timer (a quarter of `send_timeout` here), so it is served after about
/// one tick (bounded here by a third of `send_timeout`), long before `send_timeout` would
/// drop them. On tokio's paused clock the bound is the proxy's own timer, not the test
/// machine's speed.
#[tokio::test(start_paused = true)]
async fn a_client_arriving_just_after_readers_stalled_waits_about_a_tick() {
    let send_timeout = Duration::from_secs(60);
    let (_origin, proxy) = stalling_setup(3, send_timeout).await;
    let mut stalled = Vec::new();
    for _ in 0..3 {
        stalled.push(stingy_big(&proxy).await);
    }
    let seen = tokio::time::timeout(send_timeout / 3, send(client().get(proxy.url("/small"))))
        .await
        .expect("the new client is served after about a tick, not after send_timeout");
    assert_eq!(seen.status, 200);
}
