//! Test harness: a scriptable origin and the real proxy, both on 127.0.0.1:0, with a
//! temp cache directory, plus a plain HTTP client and a `Cache-Status` parser.

pub(crate) mod browser;
mod origin;
pub(crate) mod procfs;
mod proxy;
pub(crate) mod serve;
pub(crate) mod shell;
pub(crate) mod tls;

// Flat `support::X` paths for every area.
pub(crate) use self::{origin::*, proxy::*};

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::HeaderMap;

/// An address on 127.0.0.1 where connections are refused for as long as the returned
/// socket lives: the socket holds the port, bound but not listening. A listener bound and
/// dropped leaves a port that a test running beside it may be given next, and a proxy
/// pointed at it then reached that test's server.
pub(crate) fn refusing_address() -> (socket2::Socket, std::net::SocketAddr) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .expect("a TCP socket");
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    socket.bind(&loopback.into()).expect("bind to 127.0.0.1:0");
    let address = socket.local_addr().expect("bound address");
    let address = address.as_socket().expect("an IP address");
    (socket, address)
}

/// How long a test waits for something that should happen promptly before failing.
/// Generous, because only a failing test waits it out: on a loaded 2-core machine
/// (full-suite runs of 140–446 s instead of 45) responses of the debug build took over
/// the 10 s this was, and tests failed on the client's timeout alone.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// How often [`eventually`] looks again.
const POLL_EVERY: Duration = Duration::from_millis(5);

/// Waits until `check` yields `Some`, looking again every [`POLL_EVERY`], and panics
/// with `what()` once [`PATIENCE`] has passed. The one place the tests poll on the wall
/// clock: the conditions they wait for (store counters, files, an origin's state) come
/// with no notification to wait on.
pub(crate) async fn eventually<T>(
    what: impl FnOnce() -> String,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("{}", what());
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// [`eventually`] for a yes-or-no condition that needs an `await`.
pub(crate) async fn wait_until_async(
    what: impl FnOnce() -> String,
    mut done: impl AsyncFnMut() -> bool,
) {
    eventually(what, async || done().await.then_some(())).await
}

/// [`eventually`] for a condition that needs no `await`.
pub(crate) async fn wait_until(what: impl FnOnce() -> String, mut done: impl FnMut() -> bool) {
    eventually(what, async || done().then_some(())).await
}

/// An HTTP-date (RFC 9110 §5.6.7, IMF-fixdate) for `time`.
pub(crate) fn http_date(time: std::time::SystemTime) -> String {
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

/// `http_date` of now (on the proxy's clock, `secondhit_proxy::clock`) shifted by `offset_secs`
/// (negative: in the past).
pub(crate) fn http_date_from_now(offset_secs: i64) -> String {
    let now = secondhit_proxy::clock::now();
    let shift = Duration::from_secs(offset_secs.unsigned_abs());
    http_date(if offset_secs < 0 {
        now - shift
    } else {
        now + shift
    })
}

/// A deterministic body of `len` bytes that differs by `seed`.
pub(crate) fn body_bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Every regular file below `dir`, recursively.
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
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
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(PATIENCE)
        .build()
        .expect("test client")
}

/// Like [`client`], speaking cleartext HTTP/2 with prior knowledge (h2c).
pub(crate) fn h2c_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .timeout(PATIENCE)
        .build()
        .expect("h2c client")
}

/// A response as the test sees it.
pub(crate) struct Seen {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub cache: ParsedCacheStatus,
}

/// Sends `request` and reads the whole response.
pub(crate) async fn send(request: reqwest::RequestBuilder) -> Seen {
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
pub(crate) async fn get(url: &str) -> Seen {
    send(client().get(url)).await
}

/// Sends `request()` until the answer is a hit (the fill behind it committed), within PATIENCE.
pub(crate) async fn send_until_hit(request: impl Fn() -> reqwest::RequestBuilder) -> Seen {
    let last = std::cell::RefCell::new(None);
    eventually(
        || format!("never became a hit: {:?}", last.borrow()),
        async || {
            let seen = send(request()).await;
            if seen.cache.hit {
                return Some(seen);
            }
            *last.borrow_mut() = Some(seen.cache);
            None
        },
    )
    .await
}

/// The parameters of this cache's `Cache-Status` entry (RFC 9211), parsed rather than compared whole.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ParsedCacheStatus {
    pub present: bool,
    pub hit: bool,
    pub fwd: Option<String>,
    pub stored: bool,
    /// RFC 9211 `collapsed`: answered from another request's fetch of the same key.
    pub collapsed: bool,
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
    pub(crate) fn from_headers(headers: &HeaderMap) -> ParsedCacheStatus {
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
                "collapsed" => parsed.collapsed = true,
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

/// The samples of a Prometheus/OpenMetrics text exposition, keyed by `name{labels}` exactly
/// as printed (`secondhit_requests_total{result="hit"}`); comments and `# EOF` are skipped.
pub(crate) fn parse_metrics(text: &str) -> std::collections::HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (name, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a sample line: {line:?}"));
            let value = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|_| panic!("not a number in {line:?}")),
            };
            (name.to_owned(), value)
        })
        .collect()
}

/// The sample `name` (as printed, labels included) of a parsed exposition; it must be there.
pub(crate) fn sample(metrics: &std::collections::HashMap<String, f64>, name: &str) -> f64 {
    *metrics
        .get(name)
        .unwrap_or_else(|| panic!("no sample {name}; have {:?}", metrics.keys()))
}

/// Scrapes `GET /metrics` from the admin listener of `proxy` and parses it.
pub(crate) async fn scrape(proxy: &TestProxy) -> std::collections::HashMap<String, f64> {
    let seen = get(&proxy.admin_url("/metrics")).await;
    assert_eq!(seen.status, 200, "{}", String::from_utf8_lossy(&seen.body));
    let content_type = seen.headers.get("content-type").expect("content type");
    assert!(
        content_type
            .to_str()
            .expect("ascii")
            .starts_with("application/openmetrics-text"),
        "{content_type:?}"
    );
    parse_metrics(std::str::from_utf8(&seen.body).expect("utf-8 metrics"))
}

/// `GET /stats` from the admin listener of `proxy`, parsed.
pub(crate) async fn stats(proxy: &TestProxy) -> serde_json::Value {
    let seen = get(&proxy.admin_url("/stats")).await;
    assert_eq!(seen.status, 200, "{}", String::from_utf8_lossy(&seen.body));
    serde_json::from_slice(&seen.body).expect("stats is JSON")
}

/// The first ```` ```toml ```` block of the guide page `docs/guide/<page>`, as written:
/// the tests load the guide's examples.
pub(crate) fn guide_toml_block(page: &str) -> String {
    guide_toml_block_with(page, "")
}

/// The first ```toml block of `docs/guide/<page>` that contains `needle`.
pub(crate) fn guide_toml_block_with(page: &str, needle: &str) -> String {
    let path = format!("{}/docs/guide/{page}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    text.split("```toml\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("a toml block with {needle:?} in {path}"))
        .to_owned()
}
