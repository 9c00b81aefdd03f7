//! Proxy hygiene over real sockets (issue 6, item 9): hop-by-hop fields, `Via`,
//! `X-Forwarded-*`, request framing and `Host` rules, and head limits. Each test names
//! the RFC section it checks. Malformed requests are written with a raw `TcpStream`.

mod support;

use std::time::Duration;

use secondhit::config::AdmissionPolicy;
use support::{PATIENCE, Reply, TestOrigin, TestProxy, client, get, send};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// An origin answering `/hop` with hop-by-hop fields, `/via` with a `Via` of its own,
/// and everything else with a small cacheable body.
async fn origin() -> TestOrigin {
    TestOrigin::start(|head| match head.uri.path() {
        "/hop" => Reply::ok("max-age=60", b"hop".to_vec())
            .header("connection", "x-origin-secret, x-origin-other")
            .header("x-origin-secret", "1")
            .header("x-origin-other", "2")
            .header("keep-alive", "timeout=5")
            .header("proxy-connection", "keep-alive")
            .header("te", "trailers")
            .header("trailer", "x-checksum")
            .header("upgrade", "h2c")
            .header("x-end-to-end", "kept"),
        "/via" => Reply::ok("max-age=60", b"via".to_vec()).header("via", "1.1 upstream"),
        _ => Reply::ok("max-age=60", b"ok".to_vec()),
    })
    .await
}

async fn setup() -> (TestOrigin, TestProxy) {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    (origin, proxy)
}

/// One response as read off the wire.
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    /// All values of `name`, folded into one comma-separated list.
    fn list(&self, name: &str) -> String {
        let values: Vec<&str> = (self.headers.iter())
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        values.join(", ")
    }

    fn has(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }
}

/// A raw client connection to the proxy.
struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    async fn open(proxy: &TestProxy) -> Conn {
        let stream = TcpStream::connect(proxy.addr).await.expect("connect");
        Conn {
            reader: BufReader::new(stream),
        }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).await.expect("write");
    }

    /// Reads one response (Content-Length or chunked body), within PATIENCE.
    async fn response(&mut self) -> Raw {
        tokio::time::timeout(PATIENCE, self.read_response())
            .await
            .expect("a response within PATIENCE")
    }

    async fn read_response(&mut self) -> Raw {
        let mut line = String::new();
        self.reader.read_line(&mut line).await.expect("status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).await.expect("field line");
            let field = line.trim_end();
            if field.is_empty() {
                break;
            }
            let (name, value) = field.split_once(':').expect("name: value");
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        let mut raw = Raw {
            status,
            headers,
            body: Vec::new(),
        };
        if raw.list("transfer-encoding").contains("chunked") {
            loop {
                line.clear();
                self.reader.read_line(&mut line).await.expect("chunk size");
                let size = usize::from_str_radix(line.trim(), 16).expect("hex size");
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).await.expect("chunk");
                if size == 0 {
                    break;
                }
                raw.body.extend_from_slice(&chunk[..size]);
            }
        } else {
            let length: usize = raw.list("content-length").parse().unwrap_or(0);
            raw.body.resize(length, 0);
            self.reader.read_exact(&mut raw.body).await.expect("body");
        }
        raw
    }

    /// Whether the proxy closes the connection (end of input or reset) within PATIENCE.
    async fn closed(&mut self) -> bool {
        let mut rest = Vec::new();
        match tokio::time::timeout(PATIENCE, self.reader.read_to_end(&mut rest)).await {
            Ok(Ok(_)) | Ok(Err(_)) => rest.is_empty(),
            Err(_) => false,
        }
    }
}

/// Sends one raw request on a new connection and reads the response.
async fn exchange(proxy: &TestProxy, request: &[u8]) -> Raw {
    let mut conn = Conn::open(proxy).await;
    conn.write(request).await;
    conn.response().await
}

/// The `Cache-Status` detail of a raw response.
fn detail(raw: &Raw) -> String {
    let value = raw.list("cache-status");
    value
        .split(';')
        .find_map(|p| p.trim().strip_prefix("detail="))
        .unwrap_or("")
        .to_owned()
}

/// Asserts a 400 naming `reason` that never reached the origin.
async fn assert_rejected(origin: &TestOrigin, proxy: &TestProxy, request: &[u8], reason: &str) {
    let mut conn = Conn::open(proxy).await;
    conn.write(request).await;
    let raw = conn.response().await;
    assert_eq!(raw.status, 400, "{}", String::from_utf8_lossy(request));
    assert_eq!(detail(&raw), reason);
    assert_eq!(
        origin.count("/t"),
        0,
        "a rejected request never reaches the origin"
    );
}

fn origin_list(origin: &TestOrigin, path: &str, name: &str) -> String {
    let headers = origin
        .last_headers(path)
        .expect("the origin got the request");
    let values: Vec<&str> = (headers.get_all(name).iter())
        .filter_map(|v| v.to_str().ok())
        .collect();
    values.join(", ")
}

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

/// RFC 9112 §6.3 (3): `Content-Length` with `Transfer-Encoding` is answered 400, the
/// connection is closed, and the origin never sees it — in either field order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_6_3_content_length_with_transfer_encoding_rejected_before_origin() {
    let (origin, proxy) = setup().await;
    for request in [
        &b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..],
        b"POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        b"GET /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n",
    ] {
        let mut conn = Conn::open(&proxy).await;
        conn.write(request).await;
        let raw = conn.response().await;
        assert_eq!(raw.status, 400);
        assert_eq!(detail(&raw), "content-length-with-transfer-encoding");
        assert_eq!(raw.list("connection"), "close");
        assert!(conn.closed().await, "the connection is closed after the 400");
    }
    assert_eq!(origin.count("/t"), 0);
}

/// RFC 9112 §6.3 (5): differing `Content-Length` values are answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_6_3_conflicting_content_lengths_rejected() {
    let (origin, proxy) = setup().await;
    assert_rejected(
        &origin,
        &proxy,
        b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "conflicting-content-length",
    )
    .await;
}

/// RFC 9110 §8.6 / RFC 9112 §6.3 (5): a `Content-Length` that is not a number is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9110_8_6_invalid_content_length_rejected() {
    let (origin, proxy) = setup().await;
    assert_rejected(
        &origin,
        &proxy,
        b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 4, 5\r\n\r\nabcd",
        "invalid-content-length",
    )
    .await;
}

/// RFC 9112 §3.2: more than one `Host` field line is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_two_host_fields_rejected() {
    let (origin, proxy) = setup().await;
    assert_rejected(
        &origin,
        &proxy,
        b"GET /t HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "several-hosts",
    )
    .await;
}

/// RFC 9112 §3.2: an HTTP/1.1 request without `Host` is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_missing_host_rejected() {
    let (origin, proxy) = setup().await;
    assert_rejected(&origin, &proxy, b"GET /t HTTP/1.1\r\n\r\n", "missing-host").await;
}

/// RFC 9112 §3.2: a `Host` that is not `uri-host[:port]` is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_invalid_host_rejected() {
    let (origin, proxy) = setup().await;
    for host in ["user@a", "a:http", ""] {
        let request = format!("GET /t HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert_rejected(&origin, &proxy, request.as_bytes(), "invalid-host").await;
    }
}

/// RFC 9112 §3.2.2: an absolute-form target naming another host than `Host` is answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_2_absolute_form_host_mismatch_rejected() {
    let (origin, proxy) = setup().await;
    for request in [
        &b"GET http://b.example/t HTTP/1.1\r\nHost: a.example\r\n\r\n"[..],
        b"GET http://a.example:8080/t HTTP/1.1\r\nHost: a.example\r\n\r\n",
    ] {
        assert_rejected(&origin, &proxy, request, "host-mismatch").await;
    }
}

/// RFC 9112 §3.2.2: an absolute-form target that names the `Host` (any case, default
/// port explicit or not) is forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_2_2_absolute_form_matching_host_forwarded() {
    let (origin, proxy) = setup().await;
    let raw = exchange(
        &proxy,
        b"GET http://A.Example:80/abs?q=1 HTTP/1.1\r\nHost: a.example\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 200);
    assert_eq!(raw.body, b"ok");
    assert_eq!(origin.count("/abs?q=1"), 1);
}

/// RFC 6585 §5: a head larger than `server.max_header_bytes` is answered 431.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc6585_5_oversized_header_gets_431() {
    let (origin, proxy) = setup().await;
    let request = format!(
        "GET /t HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n",
        "b".repeat(70 * 1024)
    );
    let raw = exchange(&proxy, request.as_bytes()).await;
    assert_eq!(raw.status, 431);
    assert_eq!(origin.count("/t"), 0);
}

/// RFC 6585 §5: more than `server.max_headers` fields are answered 431; as many pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc6585_5_too_many_headers_gets_431() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| c.server.max_headers = 10).await;
    let head = |fields: usize| {
        let mut request = "GET /t HTTP/1.1\r\nHost: a\r\n".to_owned();
        for i in 1..fields {
            request.push_str(&format!("X-F{i}: 1\r\n"));
        }
        request.push_str("\r\n");
        request
    };
    assert_eq!(exchange(&proxy, head(10).as_bytes()).await.status, 200);
    assert_eq!(exchange(&proxy, head(11).as_bytes()).await.status, 431);
    assert_eq!(origin.count("/t"), 1);
}

/// RFC 9112 §3 and RFC 6585 §5: a request line longer than the head limit gets 431
/// (hyper answers 414 only for a target over 65534 bytes, which no head within
/// `server.max_header_bytes` can hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_3_long_request_line_gets_431() {
    let (origin, proxy) = setup().await;
    let request = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "p".repeat(70 * 1024));
    assert_eq!(exchange(&proxy, request.as_bytes()).await.status, 431);
    // A long line within the limit is fine.
    let path = format!("/{}", "p".repeat(8 * 1024));
    let request = format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(exchange(&proxy, request.as_bytes()).await.status, 200);
    assert_eq!(origin.count(&path), 1);
}

/// RFC 9112 §9.5: a client that does not finish its head within
/// `server.header_read_timeout` is disconnected, without a request reaching the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_9_5_header_read_timeout_closes_the_connection() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.header_read_timeout = Duration::from_millis(300)
    })
    .await;
    let mut conn = Conn::open(&proxy).await;
    let started = std::time::Instant::now();
    conn.write(b"GET /t HTTP/1.1\r\nHost: a\r\nX-Slow: ").await;
    assert!(conn.closed().await, "closed after header_read_timeout");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(origin.count("/t"), 0);
}

/// RFC 9112 §9.3.2: requests pipelined before a rejected one are answered normally;
/// the rejected one gets 400 and nothing after it is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_9_3_2_pipelined_requests_before_a_rejected_one_are_answered() {
    let (origin, proxy) = setup().await;
    let mut conn = Conn::open(&proxy).await;
    conn.write(
        b"GET /p1 HTTP/1.1\r\nHost: a\r\n\r\n\
POST /p2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc\
POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
GET /p3 HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .await;
    assert_eq!(conn.response().await.status, 200);
    assert_eq!(conn.response().await.status, 200);
    let rejected = conn.response().await;
    assert_eq!(rejected.status, 400);
    assert_eq!(detail(&rejected), "content-length-with-transfer-encoding");
    assert!(conn.closed().await);
    assert_eq!(
        (
            origin.count("/p1"),
            origin.count("/p2"),
            origin.count("/t"),
            origin.count("/p3")
        ),
        (1, 1, 0, 0)
    );
}

/// RFC 9112 §7.1 and §9.3.2: a chunked body whose data looks like a bad head is only
/// data: it is forwarded intact and the next pipelined request is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9112_7_1_chunked_body_is_followed_to_the_next_request() {
    let (origin, proxy) = setup().await;
    let inner = "GET /t HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let request = format!(
        "POST /body HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n{:x};ext\r\n{inner}\r\n0\r\nX-Trailer: 1\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n",
        inner.len()
    );
    let mut conn = Conn::open(&proxy).await;
    conn.write(request.as_bytes()).await;
    assert_eq!(conn.response().await.status, 200);
    assert_eq!(conn.response().await.status, 200);
    assert_eq!(
        (
            origin.count("/body"),
            origin.count("/next"),
            origin.count("/t")
        ),
        (1, 1, 0)
    );
}

/// RFC 9110 §7.6.3 and RFC 9113 §8.3.1: an HTTP/2 (h2c prior knowledge) request is
/// forwarded with `Via: 2 secondhit`, `X-Forwarded-For` and `X-Forwarded-Host` from
/// `:authority`, and its response carries `Via`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9113_8_3_1_http2_requests_get_forwarding_fields() {
    let (origin, proxy) = setup().await;
    let h2 = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .timeout(PATIENCE)
        .build()
        .expect("h2c client");
    let seen = send(
        h2.get(proxy.url("/h2"))
            .header("x-forwarded-for", "192.0.2.9"),
    )
    .await;
    assert_eq!(seen.status, 200);
    assert_eq!(
        seen.headers.get("via").expect("response via"),
        "1.1 secondhit"
    );
    assert_eq!(origin_list(&origin, "/h2", "via"), "2 secondhit");
    assert_eq!(
        origin_list(&origin, "/h2", "x-forwarded-for"),
        "192.0.2.9, 127.0.0.1"
    );
    assert_eq!(
        origin_list(&origin, "/h2", "x-forwarded-host"),
        proxy.addr.to_string()
    );
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
