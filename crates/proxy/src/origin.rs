//! The origin client: pooled HTTP/1.1 connections to the origin in the config, over TCP
//! for an `http://` origin and TLS for an `https://` one ([`tls`] says what its
//! certificate is verified against). The origin may be a pool of servers
//! (`origin.servers`): `balance` picks one per request among those [`health`] keeps
//! in rotation, from passive counts of failures and from active probes (`probe`).
//!
//! Set up for a proxy rather than a browser (`docs/design.md`, "Known traps"): it
//! follows no redirects (they are passed to the client), reads no proxy environment
//! variables, and its time limits are a connect timeout, a time to the response head
//! (`first_byte`) and a read timeout *between* body bytes ([`ReadTimeout`]), never a
//! whole-response timeout, which would cut large downloads. A request that failed on
//! one server of a pool before any answer may go to the next (`retry`). It is
//! `secondhit-h1`'s client connection with a pool of its own (`pool`), not reqwest: the
//! proxy already has `http` types in hand, and reqwest's URL parsing, redirect and retry
//! layers are paid by every pass-through request (`benches/RESULTS.md`, "origin client
//! without reqwest").
//!
//! Hop-by-hop headers (RFC 9110 §7.6.1) are removed in both directions here, so the
//! proxy only ever sees end-to-end fields.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONNECTION, HOST, TE, TRAILER, TRANSFER_ENCODING, UPGRADE};
use http::uri::{PathAndQuery, Scheme};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri, Version, response};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::time::Instant;

use crate::body::{BoxError, ClientBody};
use crate::config::{HostHeader, OriginConfig, RetryReason};
use crate::metrics::Metrics;
use health::{Attempt, FailStatuses, Health, Passive, ServerState};
pub use secondhit_h1::{AddFields, FieldLines, FieldWriter};

mod balance;
mod deadline;
mod first_byte;
pub mod health;
mod in_flight;
mod pool;
mod probe;
mod read_timeout;
mod retry;
pub mod tls;
mod upload;

pub use pool::PooledBody;
pub use read_timeout::{ReadTimedOut, ReadTimeout};

/// An origin response's body, boxed. It holds its connection and its timer, and it moves
/// through every layer between the origin client and the client's response: unboxed,
/// each move copied all of it (`benches/RESULTS.md`, "the origin's body boxed").
pub type OriginBody = Box<ReadTimeout>;

/// Failure to get a response head from the origin; `error::error_response` maps it to 502/504.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// The origin could not be reached (refused, reset before a response, DNS).
    #[error("origin unreachable: {0}")]
    Connect(#[source] BoxError),
    /// Every `origin.max_in_flight` permit stayed taken for `origin.queue_timeout` (the
    /// time waited): the request was never sent.
    #[error("all origin.max_in_flight permits stayed taken for {0:?} (origin.queue_timeout)")]
    Busy(Duration),
    /// The client's request body failed before the request could be sent (its connection
    /// broke, or its framing was invalid): nothing complete to forward.
    #[error("the request body failed before it was read: {0}")]
    ClientBody(#[source] BoxError),
    /// The client's request body stalled for `origin.body_read_timeout`, or fell below
    /// `origin.body_min_rate` over it, before the origin's response head came.
    #[error("the request body was too slow: {0}")]
    RequestBodyTimeout(ReadTimedOut),
    /// The origin did not answer within the connect or first-byte timeout.
    #[error("origin timed out: {0}")]
    Timeout(#[source] BoxError),
    /// Any other failure talking to the origin (e.g. a malformed response).
    #[error("origin request failed: {0}")]
    Protocol(#[source] BoxError),
    /// The origin client could not be built from the config.
    #[error("cannot build the origin client: {0}")]
    Client(String),
}

impl OriginError {
    /// Whether the failure counts against the server (`origin.max_fails`): it could not
    /// be reached or broke the exchange, as opposed to the client's body or this proxy's
    /// own queue failing.
    fn is_the_servers(&self) -> bool {
        matches!(
            self,
            OriginError::Connect(_) | OriginError::Timeout(_) | OriginError::Protocol(_)
        )
    }

    /// A failure to open a connection: a timeout, a failed TLS handshake (named), or
    /// an unreachable origin.
    fn connect(error: BoxError) -> OriginError {
        // The connector reports its connect timeout as an error caused by a `TimedOut`
        // I/O error.
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&*error);
        while let Some(e) = cause {
            // A failed TLS handshake (an unverifiable certificate, usually) comes as
            // rustls's error inside I/O errors: named here, or the log would only say
            // what the TCP connection did.
            if let Some(tls) = e.downcast_ref::<rustls::Error>() {
                let named = format!("TLS handshake with the origin failed: {tls}");
                return OriginError::Connect(named.into());
            }
            cause = match e.downcast_ref::<std::io::Error>() {
                Some(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                    return OriginError::Timeout(error);
                }
                // `io::Error::source` skips the error it wraps; look inside instead.
                Some(io) => io.get_ref().map(|inner| inner as _),
                None => e.source(),
            };
        }
        OriginError::Connect(error)
    }
}

/// A request body for the origin: the client's own, or none.
pub type RequestBody = UnsyncBoxBody<Bytes, BoxError>;

/// The client's request body, passed on as it streams.
pub(crate) fn client_body(body: ClientBody) -> RequestBody {
    if http_body::Body::is_end_stream(&body) {
        // Boxes nothing.
        return empty_body();
    }
    body.map_err(BoxError::from).boxed_unsync()
}

/// No request body.
pub fn empty_body() -> RequestBody {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// How the origin delimits a response body (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// `Content-Length`: a short body is detected as an error.
    Length(u64),
    /// Chunked: the end is explicit.
    Delimited,
    /// Ends when the connection closes, so a cut connection looks complete.
    UntilClose,
}

impl BodyFraming {
    /// The framing of a body as the origin connection read it.
    fn of(delimit: secondhit_h1::Delimit) -> BodyFraming {
        match delimit {
            secondhit_h1::Delimit::Length(length) => BodyFraming::Length(length),
            secondhit_h1::Delimit::Chunked => BodyFraming::Delimited,
            secondhit_h1::Delimit::UntilClose => BodyFraming::UntilClose,
        }
    }
}

/// Removes hop-by-hop fields (RFC 9110 §7.6.1): the fixed list and every field named in `Connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the (few) names present, noting which of the fixed list are there:
    // most messages carry none of them, or only `Connection`, and each removal is a
    // hashed lookup. A match on the text (by length first) costs less than comparing
    // each name with the seven.
    let mut present = 0u8;
    for name in headers.keys() {
        if let Some(at) = hop_by_hop_index(name) {
            present |= 1 << at;
        }
    }
    if present == 0 {
        return;
    }
    // Most `Connection` lines name only options that are no field here (`keep-alive`,
    // `close`): looking the names up as text allocates nothing, where parsing each into
    // a `HeaderName` to remove it allocated one per name not standard, and the list.
    if connection_options(headers).any(|name| headers.contains_key(name)) {
        let named: Vec<HeaderName> = connection_options(headers)
            .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok())
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for (at, name) in HOP_BY_HOP.iter().enumerate() {
        if present & 1 << at != 0 {
            headers.remove(name);
        }
    }
}

/// Where `name` is in [`HOP_BY_HOP`], if it is there.
fn hop_by_hop_index(name: &HeaderName) -> Option<usize> {
    match name.as_str() {
        "connection" => Some(0),
        "keep-alive" => Some(1),
        "proxy-connection" => Some(2),
        "te" => Some(3),
        "trailer" => Some(4),
        "transfer-encoding" => Some(5),
        "upgrade" => Some(6),
        _ => None,
    }
}

/// The options listed in `headers`' `Connection` lines, trimmed.
fn connection_options(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    (headers.get_all(CONNECTION).iter())
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
}

/// The hop-by-hop fields of RFC 9110 §7.6.1 (and the obsolete `Keep-Alive` and
/// `Proxy-Connection`), as names ready to look up: every request runs through them, and
/// a name given as text would be parsed again each time.
static HOP_BY_HOP: [HeaderName; 7] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    TE,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
];

/// Which origin server answered a request, and how: the access log's `$upstream_*`.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// The server's `host:port`, as its URL names it.
    pub addr: Arc<str>,
    /// The servers asked before it, in order, each of which failed before answering
    /// (`origin.retry`); empty for most requests.
    pub earlier: Vec<Arc<str>>,
    /// The status it answered.
    pub status: http::StatusCode,
    /// From sending the request to its response head.
    pub header_time: Duration,
}

/// A response head from the origin, its framing, and its still-streaming body.
pub struct OriginResponse {
    /// Who answered, for the access log.
    pub upstream: Upstream,
    /// Status and end-to-end headers (hop-by-hop fields already removed).
    pub head: response::Parts,
    /// How the origin delimited the body, read before `Transfer-Encoding` was removed.
    pub framing: BodyFraming,
    /// The body, streamed frame by frame.
    pub body: OriginBody,
}

/// The `Host` line of the request to one server, then the caller's `added` lines: the
/// request's own field map then needs no entry (and, for most requests, no allocation).
struct HostFirst<'a> {
    host: &'a HeaderValue,
    added: &'a (dyn AddFields + Sync),
}

impl AddFields for HostFirst<'_> {
    fn size(&self) -> usize {
        "Host: \r\n".len() + self.host.len() + self.added.size()
    }

    fn write(&self, out: &mut FieldWriter<'_>) {
        out.field(&HOST, self.host);
        self.added.write(out);
    }
}

/// One server of the pool: its connections, where they go, and its health.
struct Server {
    /// Connections to it, kept open between requests.
    pool: pool::Pool,
    /// Its URL's scheme and authority: where connections go (its host is the TLS server
    /// name). hyper-rustls's connector takes `http://` and `https://` alike.
    address: Uri,
    /// The `Host` sent when `host_header = "origin"`: its URL's authority.
    origin_host: HeaderValue,
    /// Its URL's authority as the access log names the server (`$upstream_addr`).
    addr: Arc<str>,
    /// Up or down, and its figures; shared with the other snapshots naming its URL.
    state: Arc<ServerState>,
}

impl Server {
    fn new(
        url: &Uri,
        connector: &Connector,
        max_idle: usize,
        timeouts: pool::Timeouts,
        health: &Health,
    ) -> Result<Server, OriginError> {
        let authority = (url.authority().cloned())
            .ok_or_else(|| OriginError::Client(format!("origin server {url} names no host")))?;
        let origin_host = HeaderValue::from_str(authority.as_str())
            .map_err(|e| OriginError::Client(format!("origin server {url} host as Host: {e}")))?;
        let scheme = url.scheme().cloned().unwrap_or(Scheme::HTTP);
        // Its name: as configured, without the "/" a URI prints after its authority.
        let name = format!("{scheme}://{authority}");
        let addr: Arc<str> = Arc::from(authority.as_str());
        let address = Uri::builder()
            .scheme(scheme)
            .authority(authority)
            .path_and_query("/")
            .build()
            .map_err(|e| OriginError::Client(format!("origin server {url}: {e}")))?;
        Ok(Server {
            pool: pool::Pool::new(connector.clone(), max_idle, timeouts),
            state: health.server(&name),
            addr,
            address,
            origin_host,
        })
    }
}

/// The connector every server's connections are opened with: TCP, and TLS for `https://`.
type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// The pooled client for the configured origin: one server, or a pool of them
/// (`origin.servers`) spread over by `origin.balance`, each taken out of rotation while
/// it fails ([`health`]).
pub struct Origin {
    /// The pool's servers, in `origin.servers` order.
    servers: Box<[Arc<Server>]>,
    /// Picks the server for each request.
    balancer: balance::Balancer,
    /// When failures take a server out of rotation; `None` for a pool of one server,
    /// which (as in nginx) is never taken out by failures: it is all there is.
    passive: Option<Passive>,
    host_header: HostHeader,
    /// Which failed requests go to another server (`origin.retry`).
    retry: retry::Policy,
    /// Bounds requests waiting for a response head (`origin.max_in_flight`); the permit is
    /// released when the head arrives, so slow response bodies do not hold it, and taken
    /// only after the request body was read ahead ([`upload`]), so slow uploads do not
    /// either.
    in_flight: Arc<in_flight::InFlight>,
    /// `origin.queue_timeout`: the longest wait for a permit before a 503.
    queue_timeout: Duration,
    /// How much of a request body is read before a permit is taken, and the pace it must
    /// keep (`origin.body_buffer_size`, `origin.body_read_timeout`, `origin.body_min_rate`).
    upload: upload::Limits,
    /// Where the time to each response head is recorded.
    metrics: Arc<Metrics>,
}

impl Origin {
    /// Builds the client from the validated config; it records each request's time to its
    /// response head in `metrics`, and each server's health in `health` (under its URL).
    /// With `origin.health_check`, probes start on the current runtime and end with the
    /// client.
    pub fn new(
        config: &OriginConfig,
        metrics: Arc<Metrics>,
        health: &Health,
    ) -> Result<Origin, OriginError> {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.connect_timeout));
        connector.set_nodelay(true);
        // hyper-rustls insists on `https://` URIs unless told otherwise.
        connector.enforce_http(false);
        if config.danger_accept_invalid_certs {
            tracing::warn!(
                origin = %config.url,
                "origin.danger_accept_invalid_certs = true: the origin's certificate is NOT verified"
            );
        }
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls::client_config(config)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let pool = config.pool();
        let timeouts = pool::Timeouts {
            connect: config.connect_timeout,
            first_byte: config.first_byte_timeout,
            read: config.read_timeout,
        };
        // As many idle connections per server as requests may wait for a head at once.
        let max_idle = config.max_in_flight;
        let servers = (pool.iter())
            .map(|server| Server::new(&server.url, &connector, max_idle, timeouts, health))
            .map(|server| server.map(Arc::new))
            .collect::<Result<Box<[_]>, _>>()?;
        let urls: Vec<String> = servers.iter().map(|s| s.state.url().to_owned()).collect();
        let weights: Vec<u32> = pool.iter().map(|server| server.weight).collect();
        let passive = (servers.len() > 1).then_some(Passive {
            max_fails: config.max_fails,
            fail_timeout: config.fail_timeout,
            fail_statuses: FailStatuses::new(&config.fail_statuses),
            until_probe: config.health_check.is_some(),
        });
        for server in &servers {
            server.state.adopt(passive, config.health_check.is_some());
        }
        if let Some(check) = &config.health_check {
            probe::start(&servers, check);
        }
        Ok(Origin {
            balancer: balance::Balancer::new(config.balance, &urls, &weights),
            passive,
            servers,
            host_header: config.host_header,
            retry: retry::Policy::new(&config.retry),
            in_flight: Arc::new(in_flight::InFlight::new(config.max_in_flight)),
            queue_timeout: config.queue_timeout,
            upload: upload::Limits {
                buffer: config.body_buffer_size,
                read_timeout: config.body_read_timeout,
                min_rate: config.body_min_rate,
            },
            metrics,
        })
    }

    /// Each server's URL and whether it is in rotation now, in `origin.servers` order.
    pub fn servers_up(&self) -> Vec<(String, bool)> {
        (self.servers.iter())
            .map(|server| (server.state.url().to_owned(), server.state.is_up()))
            .collect()
    }

    /// Sends a request and returns the response head with its streaming body.
    ///
    /// `headers` are the request's own fields (hop-by-hop fields are removed here), then
    /// the `Host` line chosen per server, then `added`, the fields written after them, as
    /// they are (the request path's: the client's end-to-end fields and this proxy's
    /// forwarding fields); `client_host` is what the client named as host, sent on when
    /// `host_header = "client"`.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: PathAndQuery,
        mut headers: HeaderMap,
        added: &(dyn AddFields + Sync),
        client_host: HeaderValue,
        body: RequestBody,
    ) -> Result<OriginResponse, OriginError> {
        strip_hop_by_hop(&mut headers);
        // Hashed by the URL the cache key names (host and normalised target): a key
        // always goes to the same server.
        let key = match self.balancer.hashes() {
            true => [client_host.as_bytes(), path_and_query.as_str().as_bytes()].concat(),
            false => Vec::new(),
        };
        // Origin-form: the connection already goes to the origin. The client's target was
        // parsed on arrival and is not parsed again.
        let uri = Uri::from(path_and_query);
        // Before a permit: a client that trickles its body holds no origin capacity.
        let keep = self.retry.may_resend(&method, self.servers.len());
        let ahead = upload::read_ahead(body, self.upload, keep).await?;
        // Boxed: it moves through four layers to the connection, each move a pointer's.
        let mut request = Box::new(Request::new(ahead.body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        let replay = ahead.copy.map(|body| retry::Replay::of(&request, body));
        // A bounded wait: excess requests fail fast with a 503 instead of queueing without
        // bound behind a slow origin. Only a request that must wait pays for a timer.
        let permit = (self.in_flight.acquire(self.queue_timeout))
            .await
            .map_err(|in_flight::Busy| OriginError::Busy(self.queue_timeout))?;
        let answered = (self.to_a_server(request, added, replay, client_host, &key)).await;
        drop(permit);
        let (response, upstream) = answered?;
        // The connection read the framing and the hop-by-hop fields, and passed on only
        // the end-to-end ones.
        let (mut head, body) = response.into_parts();
        let framing = BodyFraming::of(body.get_ref().delimit());
        // The protocol version is per connection: the client's connection has its own
        // (an HTTP/1.0 origin must not turn the client's HTTP/1.1 response into 1.0).
        head.version = Version::default();
        Ok(OriginResponse {
            upstream: Upstream {
                status: head.status,
                ..upstream
            },
            head,
            body,
            framing,
        })
    }

    /// Sends `request` to a server in rotation that the balancer picks for `key`, and to
    /// the next one while a connection cannot be opened (nothing was sent: nginx's
    /// `proxy_next_upstream error`) or while `origin.retry` sends a failed request on
    /// (from `replay`, its copy), each server at most once, each time with the `added`
    /// lines. Fails at once, unsent, when no server is in rotation. Returns the response
    /// head and who answered it (its status is filled in by the caller).
    async fn to_a_server(
        &self,
        mut request: Box<Request<RequestBody>>,
        added: &(dyn AddFields + Sync),
        replay: Option<retry::Replay>,
        client_host: HeaderValue,
        key: &[u8],
    ) -> Result<(http::Response<OriginBody>, Upstream), OriginError> {
        let (mut tried, mut sent) = (0u64, 0u32);
        let (mut earlier, mut retrying) = (Vec::new(), None);
        let mut last_error = None;
        let turn = self.balancer.turn();
        loop {
            let usable = |i: usize| tried & (1 << i) == 0 && self.servers[i].state.is_up();
            let Some(index) = self.balancer.pick(key, turn, usable) else {
                let down = "every origin server is out of rotation (failing or probed down)";
                return Err(last_error.unwrap_or_else(|| OriginError::Connect(down.into())));
            };
            if let Some(reason) = retrying.take() {
                self.metrics.count_origin_retry(reason);
            }
            tried |= 1 << index;
            let server = &self.servers[index];
            let host = match self.host_header {
                HostHeader::Client => &client_host,
                HostHeader::Origin => &server.origin_host,
            };
            let added = HostFirst { host, added };
            // Timed from here: the wait for a permit is this proxy's queue, not the origin's.
            let began = Instant::now();
            let result = (server.pool.send(&server.address, request, &added, began)).await;
            let failed = match self.record(server, began, result) {
                Ok((response, header_time)) => {
                    let upstream = Upstream {
                        addr: server.addr.clone(),
                        earlier,
                        status: response.status(),
                        header_time,
                    };
                    return Ok((response, upstream));
                }
                Err(failed) => failed,
            };
            let reason = failed.reason;
            request = match (failed.unsent, reason, &replay) {
                (Some(unsent), _, _) => unsent,
                (None, Some(reason), Some(replay)) if self.retry.allows(reason, sent + 1) => {
                    sent += 1;
                    Box::new(replay.request())
                }
                _ => return Err(failed.error),
            };
            retrying = reason;
            earlier.push(server.addr.clone());
            last_error = Some(failed.error);
        }
    }

    /// Records how a request sent to `server` at `sent` went, in the server's health and
    /// the origin's latency: the response head and the time to it, or the failure. Not
    /// part of an async fn of its own around the send: that would be one more future
    /// between the request and the connection, its state moved and matched at each poll.
    fn record(
        &self,
        server: &Server,
        sent: Instant,
        result: Result<http::Response<OriginBody>, pool::Failed>,
    ) -> Result<(http::Response<OriginBody>, Duration), pool::Failed> {
        // One reading of the clock for the latency and the server's health.
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(sent);
        self.metrics.observe_origin(elapsed);
        let attempt = match &result {
            Ok(response) => Attempt::Answered(response.status().as_u16()),
            // A server that answered other requests meanwhile is not stopped: the URL is slow.
            Err(failed)
                if failed.reason == Some(RetryReason::Timeout)
                    && server.state.answered_since(sent) =>
            {
                Attempt::Slow
            }
            Err(failed) if failed.error.is_the_servers() => Attempt::Broke,
            Err(_) => Attempt::Abandoned,
        };
        server.state.record(elapsed, now, attempt, self.passive);
        result.map(|response| (response, elapsed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hop_by_hop_field_and_only_those_are_stripped() {
        for (at, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop_index(name), Some(at), "{name}");
        }
        let mut headers = HeaderMap::new();
        for name in &HOP_BY_HOP {
            headers.append(name, HeaderValue::from_static("x"));
        }
        headers.insert(
            CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        headers.insert("x-private", HeaderValue::from_static("1"));
        headers.insert("x-kept", HeaderValue::from_static("1"));
        headers.insert(http::header::ETAG, HeaderValue::from_static("\"a\""));
        strip_hop_by_hop(&mut headers);
        let left: Vec<_> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["x-kept", "etag"]);
    }

    #[test]
    fn hop_by_hop_fields_and_connection_named_fields_are_removed() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "close, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("cache-control", "max-age=1"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(|name| name.as_str()).collect();
        assert_eq!(left, ["cache-control"]);
    }

    #[test]
    fn connection_options_are_matched_to_fields_without_regard_to_case() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "Keep-Alive"),
            ("connection", " X-Trace ,close,"),
            ("x-trace", "1"),
            ("x-kept", "1"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(|name| name.as_str()).collect();
        assert_eq!(left, ["x-kept"]);
    }
}
