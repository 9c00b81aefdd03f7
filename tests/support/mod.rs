//! Test harness: a scriptable origin and the real proxy, both on 127.0.0.1:0, with a
//! temp cache directory, plus a plain HTTP client and a `Cache-Status` parser.
#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod serve;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use secondhit::config::Config;
use secondhit::server::Server;
use secondhit::store::Store;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

/// How long a test waits for something that should happen promptly before failing.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// What the test origin answers to one request.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: ReplyBody,
    /// Wait this long before sending the head.
    pub delay: Duration,
}

/// How the test origin sends a body.
pub enum ReplyBody {
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
}

impl Reply {
    /// A 200 with `Cache-Control: <cache_control>` and `body`.
    pub fn ok(cache_control: &str, body: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("cache-control", cache_control.to_owned())],
            body: ReplyBody::Full(body),
            delay: Duration::ZERO,
        }
    }

    /// A 200 with `Cache-Control: <cache_control>` and a chunked body.
    pub fn chunked(cache_control: &str, data: Vec<u8>, chunk: usize) -> Reply {
        Reply {
            body: ReplyBody::Chunked { data, chunk },
            ..Reply::ok(cache_control, Vec::new())
        }
    }

    /// Sends the head only after `delay`.
    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.push((name, value.to_owned()));
        self
    }

    /// A reply with any status, no headers, and `body` (with Content-Length).
    pub fn status(status: u16, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: ReplyBody::Full(body),
            delay: Duration::ZERO,
        }
    }

    /// A reply with any status and no body at all (no Content-Length either): 204, 304.
    pub fn bodiless(status: u16) -> Reply {
        Reply {
            body: ReplyBody::Empty,
            ..Reply::status(status, Vec::new())
        }
    }

    /// Adds several headers.
    pub fn headers(mut self, headers: &[(&'static str, &str)]) -> Reply {
        for (name, value) in headers {
            self.headers.push((name, (*value).to_owned()));
        }
        self
    }

    /// This reply's first value of header `name`, if it has one.
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The 304 an origin sends instead of this reply: same status line fields but
    /// no body (RFC 9110 §15.4.5: the header fields a 200 would have carried).
    pub fn into_not_modified(self) -> Reply {
        Reply {
            status: 304,
            body: ReplyBody::Empty,
            ..self
        }
    }
}

/// Whether the request's `If-None-Match` names `etag`, with the weak comparison of
/// RFC 9110 §13.1.2 (`W/"a"` matches `"a"`), lists and `*` included.
pub fn if_none_match_matches(head: &http::request::Parts, etag: &str) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    head.headers
        .get_all("if-none-match")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|candidate| candidate.trim() == "*" || opaque(candidate) == opaque(etag))
}

/// An HTTP-date (RFC 9110 §5.6.7, IMF-fixdate) for `time`.
pub fn http_date(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time after 1970")
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `http_date` of now shifted by `offset_secs` (negative: in the past).
pub fn http_date_from_now(offset_secs: i64) -> String {
    let now = std::time::SystemTime::now();
    let shift = Duration::from_secs(offset_secs.unsigned_abs());
    http_date(if offset_secs < 0 {
        now - shift
    } else {
        now + shift
    })
}

/// A deterministic body of `len` bytes that differs by `seed`.
pub fn body_bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

type Script = Arc<dyn Fn(&http::request::Parts) -> Reply + Send + Sync>;

/// A hyper origin on 127.0.0.1:0 that answers by script and counts requests per path and query.
pub struct TestOrigin {
    pub addr: SocketAddr,
    counts: Arc<Mutex<HashMap<String, usize>>>,
    /// Request headers as the origin received them, in arrival order.
    received: Arc<Mutex<Vec<(String, HeaderMap)>>>,
    _stop: oneshot::Sender<()>,
    /// Set by `go_down`: the listener is dropped and every open connection closed.
    down: watch::Sender<bool>,
}

impl TestOrigin {
    /// Starts an origin answering every request with `script`.
    pub async fn start(
        script: impl Fn(&http::request::Parts) -> Reply + Send + Sync + 'static,
    ) -> TestOrigin {
        let script: Script = Arc::new(script);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind test origin");
        let addr = listener.local_addr().expect("origin address");
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = oneshot::channel::<()>();
        let (down, down_seen) = watch::channel(false);
        let (c, r) = (counts.clone(), received.clone());
        tokio::spawn(async move {
            let mut listener_down = down_seen.clone();
            loop {
                let (stream, _) = tokio::select! {
                    accepted = listener.accept() => match accepted { Ok(a) => a, Err(_) => continue },
                    _ = &mut stopped => return,
                    // Returning drops the listener: new connections are refused.
                    _ = listener_down.wait_for(|down| *down) => return,
                };
                let (script, counts, received) = (script.clone(), c.clone(), r.clone());
                let mut connection_down = down_seen.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (script, counts, received) =
                            (script.clone(), counts.clone(), received.clone());
                        async move {
                            let (head, body) = request.into_parts();
                            let _ = body.collect().await;
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
                            let reply = script(&head);
                            tokio::time::sleep(reply.delay).await;
                            Ok::<_, Infallible>(build_reply(reply))
                        }
                    });
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    // Dropping the connection closes its socket (kept-alive ones included).
                    tokio::select! {
                        _ = connection => {}
                        _ = connection_down.wait_for(|down| *down) => {}
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
        }
    }

    /// Starts an origin that answers `fresh(head)` with `ETag: <etag>` added, or the
    /// matching 304 (the same header fields, no body) when the request's
    /// `If-None-Match` matches `etag` (weak comparison).
    pub async fn start_conditional(
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

    /// Makes the origin unreachable: drops its listener (connections are refused) and
    /// closes every open connection, then waits a moment so that clients' pools notice.
    pub async fn go_down(&self) {
        self.down.send_replace(true);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    /// Requests the origin received in all, for every path.
    pub fn total(&self) -> usize {
        self.counts.lock().expect("counts").values().sum()
    }

    /// Requests the origin received for `path_and_query`.
    pub fn count(&self, path_and_query: &str) -> usize {
        self.counts
            .lock()
            .expect("counts")
            .get(path_and_query)
            .copied()
            .unwrap_or(0)
    }

    /// The headers of the last request for `path_and_query`.
    pub fn last_headers(&self, path_and_query: &str) -> Option<HeaderMap> {
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
        ReplyBody::Stall { declared, sent } => {
            builder = builder.header("content-length", declared);
            let part = futures_util::stream::iter([Ok(Frame::data(Bytes::from(sent)))]);
            let never = futures_util::stream::pending();
            StreamBody::new(futures_util::StreamExt::chain(part, never)).boxed()
        }
        ReplyBody::Empty => http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed(),
    };
    builder.body(body).expect("scripted reply")
}

/// The proxy under test, serving on 127.0.0.1:0 with its own temp cache directory.
pub struct TestProxy {
    pub addr: SocketAddr,
    pub store: Arc<Store>,
    pub cache_dir: PathBuf,
    /// The temp directory holding `cache_dir`, unless the test brought its own.
    _temp: Option<tempfile::TempDir>,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

/// Sends the proxy's logs to the test output when `RUST_LOG` is set (e.g. `RUST_LOG=secondhit=debug`).
pub fn init_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_test_writer()
                .init();
        }
    });
}

/// A config for tests: listen on port 0, the given origin, a temp cache dir, a fixed filter seed.
pub fn test_config(origin: SocketAddr, cache_dir: &Path) -> Config {
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse().expect("listen address");
    config.origin.url = format!("http://{origin}").parse().expect("origin url");
    config.origin.connect_timeout = Duration::from_secs(2);
    config.origin.read_timeout = Duration::from_secs(5);
    config.cache.dir = cache_dir.to_path_buf();
    config.cache.fsync = false;
    config.admission.seed = Some("secondhit tests".to_owned());
    config
}

impl TestProxy {
    /// Starts the proxy in front of `origin`, after `tweak` adjusts the test config.
    pub async fn start(origin: SocketAddr, tweak: impl FnOnce(&mut Config)) -> TestProxy {
        let temp = tempfile::tempdir().expect("temp cache dir");
        let mut proxy = TestProxy::start_in(origin, &temp.path().join("cache"), tweak).await;
        proxy._temp = Some(temp);
        proxy
    }

    /// Starts the proxy on a cache directory the test owns (to restart on it).
    pub async fn start_in(
        origin: SocketAddr,
        cache_dir: &Path,
        tweak: impl FnOnce(&mut Config),
    ) -> TestProxy {
        init_logs();
        let mut config = test_config(origin, cache_dir);
        tweak(&mut config);
        let server = Server::bind(&config).await.expect("proxy starts");
        let addr = server.local_addr().expect("proxy address");
        let store = server.store();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        TestProxy {
            addr,
            store,
            cache_dir: cache_dir.to_path_buf(),
            _temp: None,
            stop,
            server,
        }
    }

    /// Shuts the proxy down and waits until it has let go of its store (and so of
    /// the cache directory's lock).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.server.await.expect("server task");
        let store = Arc::downgrade(&self.store);
        drop(self.store);
        // Fill writer tasks may hold the store a moment longer.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while store.strong_count() > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the store stays open"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until the store's start-up scan has indexed everything it found.
    pub async fn wait_scanned(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !self.store.stats().scan_complete {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the scan never finished"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `http://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Waits until `n` fills have been committed since start.
    pub async fn wait_committed(&self, n: u64) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.store.committed_fills() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {n} committed fills"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Entry files under objects/.
    pub fn entry_files(&self) -> Vec<PathBuf> {
        files_under(&self.cache_dir.join("objects"))
    }

    /// Files under tmp/ (fills in progress or leaked).
    pub fn temp_files(&self) -> Vec<PathBuf> {
        files_under(&self.cache_dir.join("tmp"))
    }
}

/// Every regular file below `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// A client that talks straight to the proxy (no proxy variables, no redirects).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(PATIENCE)
        .build()
        .expect("test client")
}

/// A response as the test sees it.
pub struct Seen {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub cache: ParsedCacheStatus,
}

/// Sends `request` and reads the whole response.
pub async fn send(request: reqwest::RequestBuilder) -> Seen {
    let response = request.send().await.expect("response head");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.expect("whole body").to_vec();
    let cache = ParsedCacheStatus::from_headers(&headers);
    Seen {
        status,
        headers,
        body,
        cache,
    }
}

/// GET `url`.
pub async fn get(url: &str) -> Seen {
    send(client().get(url)).await
}

/// Sends `request()` until the answer is a hit (the fill behind it committed), within PATIENCE.
pub async fn send_until_hit(request: impl Fn() -> reqwest::RequestBuilder) -> Seen {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let seen = send(request()).await;
        if seen.cache.hit {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never became a hit: {:?}",
            seen.cache
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The parameters of this cache's `Cache-Status` entry (RFC 9211), parsed rather than compared whole.
#[derive(Debug, Default, PartialEq)]
pub struct ParsedCacheStatus {
    pub present: bool,
    pub hit: bool,
    pub fwd: Option<String>,
    pub stored: bool,
    pub detail: Option<String>,
    /// The `fwd-status` parameter: the status the origin answered a forwarded request with.
    pub fwd_status: Option<u16>,
    /// The `ttl` parameter: remaining freshness in seconds (negative when served stale).
    pub ttl: Option<i64>,
    /// How many `secondhit` entries the `Cache-Status` field lines hold in all.
    pub entries: usize,
}

impl ParsedCacheStatus {
    /// Parses the `secondhit` entry of the `Cache-Status` header.
    pub fn from_headers(headers: &HeaderMap) -> ParsedCacheStatus {
        let mut parsed = ParsedCacheStatus {
            entries: headers
                .get_all("cache-status")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .filter(|e| e.split(';').next().map(str::trim) == Some("secondhit"))
                .count(),
            ..ParsedCacheStatus::default()
        };
        let Some(value) = headers.get("cache-status").and_then(|v| v.to_str().ok()) else {
            return parsed;
        };
        let Some(entry) = value
            .split(',')
            .map(str::trim)
            .find(|e| e.split(';').next().map(str::trim) == Some("secondhit"))
        else {
            return parsed;
        };
        parsed.present = true;
        for param in entry.split(';').skip(1).map(str::trim) {
            let (name, value) = param
                .split_once('=')
                .map_or((param, None), |(n, v)| (n, Some(v.trim_matches('"'))));
            match name {
                "hit" => parsed.hit = true,
                "stored" => parsed.stored = true,
                "fwd" => parsed.fwd = value.map(str::to_owned),
                "detail" => parsed.detail = value.map(str::to_owned),
                "fwd-status" => parsed.fwd_status = value.and_then(|v| v.parse().ok()),
                "ttl" => parsed.ttl = value.and_then(|v| v.parse().ok()),
                _ => {}
            }
        }
        parsed
    }
}

/// An origin that answers every connection with fixed raw bytes and then closes it:
/// for framings hyper will not produce (HTTP/1.0, bodies delimited by close).
pub async fn start_raw_origin(response: &'static [u8]) -> (SocketAddr, oneshot::Sender<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (addr, stop)
}
