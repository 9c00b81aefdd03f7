//! The scriptable test origin: [`TestOrigin`] answering by [`Reply`] script, the
//! conditional origin, and a raw origin for framings hyper will not produce.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

/// What the test origin answers to one request.
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: ReplyBody,
    /// Wait this long before sending the head.
    pub delay: Duration,
}

/// How the test origin sends a body.
pub(crate) enum ReplyBody {
    /// With Content-Length.
    Full(Vec<u8>),
    /// Chunked, in pieces of `chunk` bytes.
    Chunked { data: Vec<u8>, chunk: usize },
    /// Declares `declared` bytes, sends `sent`, then resets the connection.
    CutAfter { declared: usize, sent: Vec<u8> },
    /// Declares `declared` bytes, sends `sent`, then sends nothing more, ever.
    Stall { declared: usize, sent: Vec<u8> },
    /// No body and no Content-Length (for 304 and 204 replies).
    Empty,
    /// With Content-Length, in pieces of `chunk` bytes with `pause` before each: an
    /// origin slower than the proxy's disk and clients.
    Slow {
        data: Vec<u8>,
        chunk: usize,
        pause: Duration,
    },
    /// With Content-Length, in pieces of `chunk` bytes, counted into `meter` as hyper
    /// takes them to send.
    Metered {
        data: Vec<u8>,
        chunk: usize,
        meter: Arc<Meter>,
    },
}

/// What the origin made of a [`ReplyBody::Metered`] body: the bytes it handed to its
/// connection, and whether the body is done with (sent whole, or its connection closed).
#[derive(Default)]
pub(crate) struct Meter {
    pub sent: AtomicUsize,
    pub ended: AtomicBool,
}

/// Marks its meter ended when the body that holds it is dropped.
struct EndsMeter(Arc<Meter>);

impl Drop for EndsMeter {
    fn drop(&mut self) {
        self.0.ended.store(true, Ordering::SeqCst);
    }
}

impl Reply {
    /// A 200 with `Cache-Control: <cache_control>` and `body`.
    pub(crate) fn ok(cache_control: &str, body: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("cache-control", cache_control.to_owned())],
            body: ReplyBody::Full(body),
            delay: Duration::ZERO,
        }
    }

    /// A 200 with `Cache-Control: <cache_control>` and a chunked body.
    pub(crate) fn chunked(cache_control: &str, data: Vec<u8>, chunk: usize) -> Reply {
        Reply {
            body: ReplyBody::Chunked { data, chunk },
            ..Reply::ok(cache_control, Vec::new())
        }
    }

    /// A 200 with `Cache-Control: <cache_control>` and a `ReplyBody::Slow` body: `data` in
    /// pieces of `chunk` bytes, each after `pause`.
    pub(crate) fn slow(cache_control: &str, data: Vec<u8>, chunk: usize, pause: Duration) -> Reply {
        Reply {
            body: ReplyBody::Slow { data, chunk, pause },
            ..Reply::ok(cache_control, Vec::new())
        }
    }

    /// A 200 with `Cache-Control: <cache_control>` and a `ReplyBody::Metered` body: `data`
    /// in pieces of `chunk` bytes, counted into `meter`.
    pub(crate) fn metered(
        cache_control: &str,
        data: Vec<u8>,
        chunk: usize,
        meter: Arc<Meter>,
    ) -> Reply {
        Reply {
            body: ReplyBody::Metered { data, chunk, meter },
            ..Reply::ok(cache_control, Vec::new())
        }
    }

    /// Sends the head only after `delay`.
    pub(crate) fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// Adds a header.
    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.push((name, value.to_owned()));
        self
    }

    /// A reply with any status, no headers, and `body` (with Content-Length).
    pub(crate) fn status(status: u16, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: ReplyBody::Full(body),
            delay: Duration::ZERO,
        }
    }

    /// A reply with any status and no body at all (no Content-Length either): 204, 304.
    pub(crate) fn bodiless(status: u16) -> Reply {
        Reply {
            body: ReplyBody::Empty,
            ..Reply::status(status, Vec::new())
        }
    }

    /// Adds several headers.
    pub(crate) fn headers(mut self, headers: &[(&'static str, &str)]) -> Reply {
        for (name, value) in headers {
            self.headers.push((name, (*value).to_owned()));
        }
        self
    }

    /// The 304 an origin sends instead of this reply: same status line fields but
    /// no body (RFC 9110 §15.4.5: the header fields a 200 would have carried).
    pub(crate) fn into_not_modified(self) -> Reply {
        Reply {
            status: 304,
            body: ReplyBody::Empty,
            ..self
        }
    }
}

/// The body of the request a script answers, in its head's extensions (empty for none).
#[derive(Clone)]
pub(crate) struct ReceivedBody(pub Bytes);

/// The body of the request `head` heads, as the origin received it.
pub(crate) fn received_body(head: &http::request::Parts) -> Bytes {
    head.extensions
        .get::<ReceivedBody>()
        .map(|body| body.0.clone())
        .unwrap_or_default()
}

/// Whether the request's `If-None-Match` names `etag`, with the weak comparison of
/// RFC 9110 §13.1.2 (`W/"a"` matches `"a"`), lists and `*` included.
pub(crate) fn if_none_match_matches(head: &http::request::Parts, etag: &str) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    head.headers
        .get_all("if-none-match")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|candidate| candidate.trim() == "*" || opaque(candidate) == opaque(etag))
}

type Script = Arc<dyn Fn(&http::request::Parts) -> Reply + Send + Sync>;

/// The script and where the origin records what it received.
type Recording = (
    Script,
    Arc<Mutex<HashMap<String, usize>>>,
    Arc<Mutex<Vec<(String, HeaderMap)>>>,
);

/// Serves one accepted connection (plain or decrypted) until it ends or the origin goes
/// down.
async fn serve_connection<IO>(
    stream: IO,
    (script, counts, received): Recording,
    mut connection_down: watch::Receiver<bool>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request: Request<Incoming>| {
        let (script, counts, received) = (script.clone(), counts.clone(), received.clone());
        async move {
            let (mut head, body) = request.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            head.extensions.insert(ReceivedBody(body));
            let target = head
                .uri
                .path_and_query()
                .map_or("/".to_owned(), |pq| pq.to_string());
            *counts
                .lock()
                .expect("counts")
                .entry(target.clone())
                .or_insert(0) += 1;
            received
                .lock()
                .expect("received")
                .push((target, head.headers.clone()));
            let mut reply = script(&head);
            tokio::time::sleep(reply.delay).await;
            if !reply
                .headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("date"))
            {
                // What hyper would add, on the proxy's clock: on a paused runtime a
                // response's age then comes from the proxy's timing alone.
                reply
                    .headers
                    .push(("date", super::http_date(secondhit_proxy::clock::now())));
            }
            Ok::<_, Infallible>(build_reply(reply))
        }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    // Dropping the connection closes its socket (kept-alive ones included).
    tokio::select! {
        _ = connection => {}
        _ = connection_down.wait_for(|down| *down) => {}
    }
}

/// A hyper origin on 127.0.0.1:0 that answers by script and counts requests per path and query.
pub(crate) struct TestOrigin {
    pub addr: SocketAddr,
    counts: Arc<Mutex<HashMap<String, usize>>>,
    /// Request headers as the origin received them, in arrival order.
    received: Arc<Mutex<Vec<(String, HeaderMap)>>>,
    _stop: oneshot::Sender<()>,
    /// Set by `go_down`: the listener is dropped and every open connection closed.
    down: watch::Sender<bool>,
    /// The task that accepts connections; it drops the listener when it ends.
    accepting: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The origin's port once it went down: held bound and not listening, so that
    /// connections to it are refused and no test running beside this one is handed it.
    parked: Mutex<Option<socket2::Socket>>,
}

impl TestOrigin {
    /// Starts an origin answering every request with `script`.
    pub(crate) async fn start(
        script: impl Fn(&http::request::Parts) -> Reply + Send + Sync + 'static,
    ) -> TestOrigin {
        TestOrigin::start_with(None, Arc::new(script)).await
    }

    /// Like [`TestOrigin::start`], an `https://` origin: every connection is a TLS
    /// handshake with `tls` first.
    pub(crate) async fn start_tls(
        tls: tokio_rustls::TlsAcceptor,
        script: impl Fn(&http::request::Parts) -> Reply + Send + Sync + 'static,
    ) -> TestOrigin {
        TestOrigin::start_with(Some(tls), Arc::new(script)).await
    }

    async fn start_with(tls: Option<tokio_rustls::TlsAcceptor>, script: Script) -> TestOrigin {
        secondhit_proxy::clock::follow_tokio_time();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind test origin");
        let addr = listener.local_addr().expect("origin address");
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = oneshot::channel::<()>();
        let (down, down_seen) = watch::channel(false);
        let (c, r) = (counts.clone(), received.clone());
        let accepting = tokio::spawn(async move {
            let mut listener_down = down_seen.clone();
            loop {
                let (stream, _) = tokio::select! {
                    accepted = listener.accept() => match accepted { Ok(a) => a, Err(_) => continue },
                    _ = &mut stopped => return,
                    // Returning drops the listener: new connections are refused.
                    _ = listener_down.wait_for(|down| *down) => return,
                };
                let recording = (script.clone(), c.clone(), r.clone());
                let connection_down = down_seen.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve_connection(stream, recording, connection_down).await,
                        // A client that fails the handshake (one that refuses the
                        // certificate) just goes away.
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                serve_connection(stream, recording, connection_down).await;
                            }
                        }
                    }
                });
            }
        });
        TestOrigin {
            addr,
            counts,
            received,
            _stop: stop,
            down,
            accepting: Mutex::new(Some(accepting)),
            parked: Mutex::new(None),
        }
    }

    /// Starts an origin that answers `fresh(head)` with `ETag: <etag>` added, or the
    /// matching 304 (the same header fields, no body) when the request's
    /// `If-None-Match` matches `etag` (weak comparison).
    pub(crate) async fn start_conditional(
        etag: &'static str,
        fresh: impl Fn(&http::request::Parts) -> Reply + Send + Sync + 'static,
    ) -> TestOrigin {
        TestOrigin::start(move |head| {
            let reply = fresh(head).header("etag", etag);
            if if_none_match_matches(head, etag) {
                reply.into_not_modified()
            } else {
                reply
            }
        })
        .await
    }

    /// Makes the origin unreachable: drops its listener and closes every open
    /// connection, binds its port again without listening (connections are refused, and
    /// the port is not free for another test to be handed), then waits a moment so that
    /// clients' pools notice.
    pub(crate) async fn go_down(&self) {
        self.down.send_replace(true);
        let accepting = self.accepting.lock().expect("accepting").take();
        if let Some(accepting) = accepting {
            accepting.await.expect("the origin's accept loop ends");
        }
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("a TCP socket");
        // The closed connections' TIME_WAIT would otherwise keep the port from binding.
        socket.set_reuse_address(true).expect("SO_REUSEADDR");
        if let Err(error) = socket.bind(&self.addr.into()) {
            panic!(
                "the downed origin's port {} was taken meanwhile: {error}",
                self.addr
            );
        }
        *self.parked.lock().expect("parked") = Some(socket);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    /// Requests the origin received in all, for every path.
    pub(crate) fn total(&self) -> usize {
        self.counts.lock().expect("counts").values().sum()
    }

    /// Requests the origin received for `path_and_query`.
    pub(crate) fn count(&self, path_and_query: &str) -> usize {
        self.counts
            .lock()
            .expect("counts")
            .get(path_and_query)
            .copied()
            .unwrap_or(0)
    }

    /// Every request received, in arrival order: its path and query, and its `Host`.
    // Only the replay test (a bench module) reads them.
    #[cfg(feature = "bench")]
    pub(crate) fn targets_and_hosts(&self) -> Vec<(String, Option<String>)> {
        self.received
            .lock()
            .expect("received")
            .iter()
            .map(|(target, headers)| {
                let host = headers
                    .get("host")
                    .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned());
                (target.clone(), host)
            })
            .collect()
    }

    /// The headers of the last request for `path_and_query`.
    pub(crate) fn last_headers(&self, path_and_query: &str) -> Option<HeaderMap> {
        self.received
            .lock()
            .expect("received")
            .iter()
            .rev()
            .find(|(target, _)| target == path_and_query)
            .map(|(_, headers)| headers.clone())
    }
}

fn build_reply(reply: Reply) -> Response<BoxBody<Bytes, std::io::Error>> {
    let mut builder = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        builder = builder.header(*name, value);
    }
    let body = match reply.body {
        ReplyBody::Full(data) => {
            builder = builder.header("content-length", data.len());
            http_body_util::Full::new(Bytes::from(data))
                .map_err(|never| match never {})
                .boxed()
        }
        ReplyBody::Chunked { data, chunk } => {
            let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = data
                .chunks(chunk.max(1))
                .map(|piece| Ok(Frame::data(Bytes::copy_from_slice(piece))))
                .collect();
            StreamBody::new(futures_util::stream::iter(frames)).boxed()
        }
        ReplyBody::CutAfter { declared, sent } => {
            builder = builder.header("content-length", declared);
            reset_after(sent)
        }
        ReplyBody::Stall { declared, sent } => {
            builder = builder.header("content-length", declared);
            let part = futures_util::stream::iter([Ok(Frame::data(Bytes::from(sent)))]);
            let never = futures_util::stream::pending();
            StreamBody::new(futures_util::StreamExt::chain(part, never)).boxed()
        }
        ReplyBody::Slow { data, chunk, pause } => {
            builder = builder.header("content-length", data.len());
            paced_body(&data, chunk, pause)
        }
        ReplyBody::Metered { data, chunk, meter } => {
            builder = builder.header("content-length", data.len());
            metered_body(&data, chunk, meter)
        }
        ReplyBody::Empty => http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed(),
    };
    builder.body(body).expect("scripted reply")
}

/// A body of `sent` that then fails with a connection reset.
fn reset_after(sent: Vec<u8>) -> BoxBody<Bytes, std::io::Error> {
    let head_and_part = futures_util::stream::iter([Ok(Frame::data(Bytes::from(sent)))]);
    // Fail only after the head and the first bytes are surely on the wire.
    let reset = futures_util::stream::once(async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "scripted reset",
        ))
    });
    StreamBody::new(futures_util::StreamExt::chain(head_and_part, reset)).boxed()
}

/// A body of `data` in pieces of `chunk` bytes, with `pause` before each.
fn paced_body(data: &[u8], chunk: usize, pause: Duration) -> BoxBody<Bytes, std::io::Error> {
    let pieces: Vec<Bytes> = data
        .chunks(chunk.max(1))
        .map(Bytes::copy_from_slice)
        .collect();
    let paced = futures_util::StreamExt::then(
        futures_util::stream::iter(pieces),
        move |piece| async move {
            tokio::time::sleep(pause).await;
            Ok(Frame::data(piece))
        },
    );
    StreamBody::new(paced).boxed()
}

/// A body of `data` in pieces of `chunk` bytes, each counted into `meter` as it is taken,
/// and `meter` marked ended when the body is dropped.
fn metered_body(data: &[u8], chunk: usize, meter: Arc<Meter>) -> BoxBody<Bytes, std::io::Error> {
    let pieces: Vec<Bytes> = data
        .chunks(chunk.max(1))
        .map(Bytes::copy_from_slice)
        .collect();
    let ends = EndsMeter(meter);
    let counted = futures_util::StreamExt::map(futures_util::stream::iter(pieces), move |piece| {
        ends.0.sent.fetch_add(piece.len(), Ordering::SeqCst);
        Ok(Frame::data(piece))
    });
    StreamBody::new(counted).boxed()
}

/// An origin that answers every connection with fixed raw bytes and then closes it:
/// for framings hyper will not produce (HTTP/1.0, bodies delimited by close).
pub(crate) async fn start_raw_origin(response: &'static [u8]) -> (SocketAddr, oneshot::Sender<()>) {
    use tokio::io::AsyncWriteExt;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind raw origin");
    let addr = listener.local_addr().expect("raw origin address");
    let (stop, mut stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = tokio::select! {
                accepted = listener.accept() => match accepted { Ok(a) => a, Err(_) => continue },
                _ = &mut stopped => return,
            };
            tokio::spawn(async move {
                if !read_request_head(&mut stream).await {
                    return;
                }
                let _ = stream.write_all(response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (addr, stop)
}

/// Reads from `stream` until a request head ended (`\r\n\r\n`); false if the client
/// closed or failed first. For raw origins that answer whatever was asked.
pub(crate) async fn read_request_head(stream: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}
