//! Helpers shared by the proxy hygiene scenarios: the origin, and a raw client
//! connection for requests no HTTP client would send.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::support::{PATIENCE, Reply, TestOrigin, TestProxy};

/// An origin answering `/hop` with hop-by-hop fields, `/via` with a `Via` of its own,
/// and everything else with a small cacheable body.
pub(crate) async fn origin() -> TestOrigin {
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

pub(crate) async fn setup() -> (TestOrigin, TestProxy) {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    (origin, proxy)
}

/// One response as read off the wire.
pub(crate) struct Raw {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Raw {
    /// All values of `name`, folded into one comma-separated list.
    pub(crate) fn list(&self, name: &str) -> String {
        let values: Vec<&str> = (self.headers.iter())
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        values.join(", ")
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }
}

/// A raw client connection to the proxy.
pub(crate) struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub(crate) async fn open(proxy: &TestProxy) -> Conn {
        let stream = TcpStream::connect(proxy.addr).await.expect("connect");
        Conn {
            reader: BufReader::new(stream),
        }
    }

    pub(crate) async fn write(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).await.expect("write");
    }

    /// Reads one response (Content-Length or chunked body), within PATIENCE.
    pub(crate) async fn response(&mut self) -> Raw {
        tokio::time::timeout(PATIENCE, self.read_response())
            .await
            .expect("a response within PATIENCE")
    }

    /// Reads the head of one response to a HEAD request (no body follows), within
    /// PATIENCE.
    pub(crate) async fn head_response(&mut self) -> Raw {
        let read = async {
            let mut line = String::new();
            let (status, headers) = self.read_head(&mut line).await;
            Raw {
                status,
                headers,
                body: Vec::new(),
            }
        };
        tokio::time::timeout(PATIENCE, read)
            .await
            .expect("a response within PATIENCE")
    }

    async fn read_head(&mut self, line: &mut String) -> (u16, Vec<(String, String)>) {
        self.reader.read_line(line).await.expect("status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(line).await.expect("field line");
            let field = line.trim_end();
            if field.is_empty() {
                break;
            }
            let (name, value) = field.split_once(':').expect("name: value");
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        (status, headers)
    }

    async fn read_response(&mut self) -> Raw {
        let mut line = String::new();
        let (status, headers) = self.read_head(&mut line).await;
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

    /// Goes away as a client that gave up does: ends its side of the connection (the
    /// proxy reads end of input with its request still open), and reads on.
    pub(crate) async fn leave(&mut self) {
        self.reader.get_mut().shutdown().await.expect("shutdown");
    }

    /// Whether the proxy closes the connection (end of input or reset) within PATIENCE.
    pub(crate) async fn closed(&mut self) -> bool {
        let mut rest = Vec::new();
        match tokio::time::timeout(PATIENCE, self.reader.read_to_end(&mut rest)).await {
            Ok(Ok(_)) | Ok(Err(_)) => rest.is_empty(),
            Err(_) => false,
        }
    }
}

/// Sends one raw request on a new connection and reads the response.
pub(crate) async fn exchange(proxy: &TestProxy, request: &[u8]) -> Raw {
    let mut conn = Conn::open(proxy).await;
    conn.write(request).await;
    conn.response().await
}

/// The `Cache-Status` detail of a raw response.
pub(crate) fn detail(raw: &Raw) -> String {
    let value = raw.list("cache-status");
    value
        .split(';')
        .find_map(|p| p.trim().strip_prefix("detail="))
        .unwrap_or("")
        .to_owned()
}

/// Asserts a 400 naming `reason` that never reached the origin.
pub(crate) async fn assert_rejected(
    origin: &TestOrigin,
    proxy: &TestProxy,
    request: &[u8],
    reason: &str,
) {
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

pub(crate) fn origin_list(origin: &TestOrigin, path: &str, name: &str) -> String {
    let headers = origin
        .last_headers(path)
        .expect("the origin got the request");
    let values: Vec<&str> = (headers.get_all(name).iter())
        .filter_map(|v| v.to_str().ok())
        .collect();
    values.join(", ")
}
