//! The admin listener: metrics, health, statistics, purge and rotation, for operators.
//!
//! It listens on `server.admin_listen` (default `127.0.0.1:9090`; `"off"`: none), never on
//! the public port (config validation refuses that), and speaks plain HTTP/1.1 through
//! hyper. [`crate::server::Server::run`] runs it beside the proxy and stops both with one
//! shutdown signal.
//!
//! | request | answer |
//! |---|---|
//! | `GET /` | the live admin page: one self-contained HTML document that polls `/stats` (see below) |
//! | `GET /metrics` | every metric, OpenMetrics text (see [`crate::metrics`]) |
//! | `GET /livez` | `200` while the process answers: nothing else is checked (see `health`) |
//! | `GET /readyz`, `GET /healthz` | `200` while the node should take traffic, with JSON naming what is degraded (origins down, disk under `cache.min_free`, ...); `503` when the store cannot be used or the process is shutting down (see `health`) |
//! | `GET /stats` | JSON: requests, hit ratio, filter sizes and fill, store, errors (see `stats`) |
//! | `POST /purge?url=<absolute URL>` | removes what is stored for that URL, all its variants; 404 if nothing was |
//! | `POST /purge?tag=T`, `?prefix=<URL>`, `?site=HOST` | removes every entry carrying the tag (exact match; several: repeat `tag=`), under the prefix, or of the host |
//! | `&soft=1` on any purge | marks the entries stale instead: revalidated before they are served fresh again |
//! | `POST /rotate` | ends the filters' generation now; 409 for `policy = "always"` |
//!
//! Without `server.admin_token`, every request must name this listener: a `Host` that is
//! an IP literal, `localhost` or a name of `server.admin_hosts` (else 421). A request
//! other than GET or HEAD must
//! not come from another origin's web page (`Origin`, `Sec-Fetch-Site`; else 403): see
//! `guard`, which keeps a browser from using a listener that has no token.
//!
//! With `server.admin_token` set, every request but `GET /` must carry `Authorization: Bearer
//! <token>`; others get 401 with `WWW-Authenticate: Bearer` (the token is compared in
//! constant time, so its bytes cannot be guessed one at a time from response times). A known
//! path with another method gets 405 with `Allow`; an unknown path 404.
//!
//! # The page
//!
//! `GET /` serves `admin/page.html`, compiled in: fill bars of the two generations, the
//! pair's false-positive rate against its modelled range, the recent rotations, admission
//! decisions, hit ratios and disk bytes as short time series, each admission candidate's
//! estimated miss ratios against cache size (`admission.estimate`), the configured sizes
//! beside what they imply, and a "what if" sizing panel computed in the browser. It is served
//! without the token because it holds no data: a static shell, the same for everyone. The
//! data comes from `/stats`, which stays protected: the page takes the token from its URL
//! fragment (`/#token=...`, never sent to a server) or asks for it, keeps it in the tab's
//! session storage and sends it as a bearer token.
//!
//! Its `Content-Security-Policy` allows nothing but the page's own inline script and style
//! and requests to this listener: no other script, style, font, image, frame, form target
//! or base URL. Inline code is allowed with `'unsafe-inline'` rather than a hash of the
//! script: the page is a constant with nothing interpolated into it, and its script puts
//! every value from `/stats` into the document as text (`textContent`), never as markup, so
//! there is no injection point for `'unsafe-inline'` to widen — while a hash would have to
//! be recomputed by hand (or by a SHA-256 dependency) at every edit of the page.
//!
//! Every purge answers JSON, `{"purged": <entries>, "soft": <bool>, ...}` with the selector
//! (see `proxy::purge`, which the proxy's `PURGE` method shares).
//!
//! # Which URL a purge names
//!
//! `url` is the absolute URL a client requests, host included, as the cache keys it
//! (`crate::key`): `http://example.com/img/a.png?v=2`. The `Host` the client sends is the
//! host in the key, so a proxy reached as `cdn.example.com` purges
//! `http://cdn.example.com/...`; the port is part of it unless it is 80. What clients
//! fetched over the TLS listener is keyed `https://` (port 443 left out), and purged by
//! naming the `https://` URL. The parameter is
//! form-decoded (percent escapes, and `+` for a space: send a literal `+` as `%2B`), and the
//! URL is then normalised like every request's key (case of the host, dot segments,
//! percent escapes of unreserved characters). A varying response is removed by removing the
//! marker that names its variants, which makes every variant unreachable at once (they are
//! never served again and leave the disk by eviction) — the same removal a `POST` or
//! `DELETE` to the URL makes. The memory tier forgets the entry with the disk.

mod guard;
mod health;
mod stats;

/// The admin page (see the module docs), compiled in.
const PAGE: &str = include_str!("admin/page.html");

/// The page's `Content-Security-Policy` (see the module docs for why `'unsafe-inline'`).
const PAGE_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
    style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    ALLOW, AUTHORIZATION, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY,
    WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS,
};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use subtle::ConstantTimeEq;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admission::LiveAdmission;
use crate::live::Live;
use crate::metrics::export::{self, Exporter};
use crate::metrics::{ServerSource, TuningSource};
use crate::proxy::{Proxy, PurgeRequest};
use crate::store::Store;

/// Admin connections open at once. The admin API is for a scraper and a few operators,
/// and must not compete with clients for resources. A connection arriving with this many
/// open closes the oldest one that is not answering a request (see [`serve`]).
const MAX_CONNECTIONS: usize = 64;

/// Time an admin client has to send a request head, and a kept-alive admin connection
/// to send its next one; separate from `server.header_read_timeout`, which is sized for
/// the public's slow links, while admin clients are local tools that send a head at once.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything the admin endpoints read or act on.
pub(crate) struct Admin {
    proxy: Arc<Proxy>,
    store: Arc<Store>,
    /// The admission in use, loaded per request (a reload may replace it): `/stats` reads
    /// what its policy reports, `/rotate` rotates its filters.
    admission: Arc<LiveAdmission>,
    exporter: Exporter,
    /// `server.admin_token` (`[server]` changes need a restart, so it is read once).
    token: Option<String>,
    /// `server.admin_hosts`, read once like the token.
    hosts: Vec<String>,
    /// The live view: `/stats` shows `[admission]` as it is now.
    live: Live,
    /// The shutdown signal [`serve`] stops on, once it serves: `/readyz` fails from the
    /// moment it fires.
    stopping: Option<watch::Receiver<()>>,
}

/// How the admin listener's connections are bounded beyond its own fixed limits
/// (`MAX_CONNECTIONS`, `HEADER_READ_TIMEOUT`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Time open connections get to finish at shutdown (`server.shutdown_timeout`).
    pub grace: Duration,
}

impl Admin {
    /// The admin API of `proxy`, its `store` and its `admission`, set up as `settings` say.
    pub(crate) fn new(
        proxy: &Arc<Proxy>,
        store: &Arc<Store>,
        admission: &Arc<LiveAdmission>,
        live: &Live,
    ) -> Admin {
        Admin {
            proxy: proxy.clone(),
            store: store.clone(),
            admission: admission.clone(),
            exporter: Exporter::new(
                proxy.metrics(),
                store.clone(),
                admission.clone(),
                server_source(live),
                tuning_source(live),
            ),
            token: live.load().settings.server.admin_token.clone(),
            hosts: live.load().settings.server.admin_hosts.clone(),
            live: live.clone(),
            stopping: None,
        }
    }
}

/// Reads the origin servers' figures from the sites in use at each scrape.
fn server_source(live: &Live) -> ServerSource {
    let live = live.clone();
    Arc::new(move || live.load().sites.health().samples())
}

/// Reads the miss-ratio estimates in use at each scrape.
fn tuning_source(live: &Live) -> TuningSource {
    let live = live.clone();
    Arc::new(move || live.load().tuning.clone())
}

/// Serves `admin` on `listener` until `stop` changes (or its sender is dropped), then gives
/// open connections `limits.grace` to finish.
///
/// At `MAX_CONNECTIONS`, a new connection is taken and the oldest one not answering a
/// request (an unfinished head, or a kept-alive connection between requests) is closed:
/// refusing the newcomer, or letting it wait in the backlog, would let a flood of slow or
/// idle connections lock out the health check and the operator until their heads time
/// out, whereas the newest arrival is the last one closed. Only when every connection is
/// answering a request is the newcomer refused.
pub(crate) async fn serve(
    listener: TcpListener,
    admin: Admin,
    mut stop: watch::Receiver<()>,
    limits: Limits,
) {
    let admin = Arc::new(Admin {
        stopping: Some(stop.clone()),
        ..admin
    });
    let graceful = GracefulShutdown::new();
    // Oldest first; finished ones are removed at the next accept.
    let mut open: VecDeque<AdminConnection> = VecDeque::new();
    let builder = connection_builder();
    let served = Served {
        admin: &admin,
        builder: &builder,
        graceful: &graceful,
    };
    match listener.local_addr() {
        Ok(addr) => tracing::info!(%addr, "admin listener ready"),
        Err(error) => tracing::warn!(%error, "admin listener ready, address unknown"),
    }
    if let Some(warning) = admin.live.load().settings.open_admin_warning() {
        tracing::warn!("{warning}");
    }
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => break,
        };
        if !make_room(&mut open, peer) {
            continue;
        }
        open.push_back(served.spawn(stream, peer));
    }
    drop(listener);
    if tokio::time::timeout(limits.grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("admin connections still open at shutdown_timeout; closing them");
    }
}

/// hyper's HTTP/1 builder for admin connections, with [`HEADER_READ_TIMEOUT`].
fn connection_builder() -> http1::Builder {
    let mut builder = http1::Builder::new();
    // hyper's head timer also runs while a kept-alive connection waits for its next
    // head, so it bounds idle connections too.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
}

/// Forgets the finished connections in `open` and, at `MAX_CONNECTIONS`, closes the
/// oldest one not answering a request to make room for `peer`; `false` when every one is
/// answering a request, so `peer` is refused.
fn make_room(open: &mut VecDeque<AdminConnection>, peer: SocketAddr) -> bool {
    open.retain(|connection| !connection.task.is_finished());
    if open.len() >= MAX_CONNECTIONS {
        let idle = open
            .iter()
            .position(|connection| connection.answering.load(Ordering::Relaxed) == 0);
        match idle.and_then(|index| open.remove(index)) {
            Some(oldest) => {
                tracing::debug!(%peer, "admin connections at their limit; closing the oldest idle one");
                oldest.task.abort();
            }
            None => {
                tracing::debug!(%peer, "every admin connection is answering a request; refusing");
                return false;
            }
        }
    }
    true
}

/// What [`serve`] serves each admin connection with.
struct Served<'a> {
    admin: &'a Arc<Admin>,
    builder: &'a http1::Builder,
    /// Counts the connection for the drain at shutdown.
    graceful: &'a GracefulShutdown,
}

impl Served<'_> {
    /// Serves the connection `stream` from `peer` in a task of its own.
    fn spawn(&self, stream: TcpStream, peer: SocketAddr) -> AdminConnection {
        let answering = Arc::new(AtomicU32::new(0));
        let admin = self.admin.clone();
        let counted = answering.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            let admin = admin.clone();
            let busy = Answering::new(&counted);
            async move {
                let response = admin.answer(request).await;
                drop(busy);
                Ok::<_, Infallible>(response)
            }
        });
        let connection = self
            .graceful
            .watch(self.builder.serve_connection(TokioIo::new(stream), service));
        let task = tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "admin connection ended with an error");
            }
        });
        AdminConnection { task, answering }
    }
}

/// An open admin connection, as [`serve`] keeps it to close it at the limit.
struct AdminConnection {
    /// Its task: aborting it closes the connection.
    task: JoinHandle<()>,
    /// Requests it is answering now.
    answering: Arc<AtomicU32>,
}

/// A request being answered: counted in its connection's `answering` until dropped.
struct Answering(Arc<AtomicU32>);

impl Answering {
    fn new(count: &Arc<AtomicU32>) -> Answering {
        count.fetch_add(1, Ordering::Relaxed);
        Answering(count.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An admin response body: always known in full.
type AdminBody = Full<Bytes>;

impl Admin {
    /// Answers one admin request.
    async fn answer(&self, request: Request<Incoming>) -> Response<AdminBody> {
        let method = request.method();
        // With a token, the token is the check a rebound page cannot pass.
        let hosts = self.token.is_none().then_some(self.hosts.as_slice());
        let checked = guard::check(method, request.uri(), request.headers(), hosts);
        if let Err(refusal) = checked {
            tracing::debug!(?refusal, %method, "admin request refused");
            return refused(refusal);
        }
        let readable = method == Method::GET || method == Method::HEAD;
        if request.uri().path() == "/" {
            return if readable {
                page()
            } else {
                not_allowed("GET, HEAD")
            };
        }
        if !self.authorized(request.headers().get(AUTHORIZATION)) {
            let mut response = text(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
        match (request.uri().path(), readable, method == Method::POST) {
            ("/metrics", true, _) => self.metrics(),
            ("/livez", true, _) => {
                let (status, value) = health::live();
                json_response(status, value)
            }
            ("/readyz" | "/healthz", true, _) => self.ready().await,
            ("/stats", true, _) => self.stats(),
            ("/purge", _, true) => self.purge(request.uri()).await,
            ("/rotate", _, true) => self.rotate(),
            ("/metrics" | "/livez" | "/readyz" | "/healthz" | "/stats", false, _) => {
                not_allowed("GET, HEAD")
            }
            ("/purge" | "/rotate", _, false) => not_allowed("POST"),
            _ => text(StatusCode::NOT_FOUND, "no such admin endpoint\n"),
        }
    }

    /// True if no token is configured, or `header` is `Bearer <token>`.
    fn authorized(&self, header: Option<&HeaderValue>) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let Some(given) = header.and_then(|h| h.as_bytes().strip_prefix(b"Bearer ")) else {
            return false;
        };
        // Constant time for equal lengths; a length mismatch answers at once, which tells
        // only the token's length.
        bool::from(given.trim_ascii().ct_eq(token.as_bytes()))
    }

    fn metrics(&self) -> Response<AdminBody> {
        match self.exporter.render() {
            Ok(body) => with_type(StatusCode::OK, export::CONTENT_TYPE, body.into()),
            Err(error) => {
                tracing::warn!(%error, "cannot encode the metrics");
                text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot encode the metrics\n",
                )
            }
        }
    }

    async fn ready(&self) -> Response<AdminBody> {
        let draining =
            (self.stopping.as_ref()).is_some_and(|stop| stop.has_changed().unwrap_or(true));
        let (status, value) = health::ready(&self.store, &self.live.load_full(), draining).await;
        json_response(status, value)
    }

    fn stats(&self) -> Response<AdminBody> {
        let live = self.live.load();
        let policy = live.admission.stats.clone();
        let report = live.tuning.report(tokio::time::Instant::now().into_std());
        let (counts, filters) = (self.proxy.metrics().snapshot(), policy.filter_stats());
        let (store, servers) = (self.store.stats(), live.sites.health().samples());
        let document = stats::Stats::new(stats::Sources {
            config: &live.settings.admission,
            policy: policy.kind(),
            counts: &counts,
            filters: filters.as_ref(),
            store: &store,
            servers: &servers,
            sites: live.sites.all(),
            report: &report,
        });
        // Through a `Value`, whose objects keep their keys sorted, as the document always
        // had them.
        match serde_json::to_value(&document) {
            Ok(value) => json_response(StatusCode::OK, value),
            Err(error) => {
                tracing::warn!(%error, "cannot encode the stats");
                text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot encode the stats\n",
                )
            }
        }
    }

    async fn purge(&self, uri: &Uri) -> Response<AdminBody> {
        let request = match PurgeRequest::from_query(uri.query()) {
            Ok(request) => request,
            Err(error) => {
                let body = serde_json::json!({ "error": error.to_string() }).to_string() + "\n";
                return with_type(StatusCode::BAD_REQUEST, "application/json", body.into());
            }
        };
        let report = self.proxy.purge(&request).await;
        with_type(report.status, "application/json", report.body.into())
    }

    fn rotate(&self) -> Response<AdminBody> {
        let policy = self.admission.load().stats.clone();
        match policy.rotate() {
            Some(generation) => {
                tracing::info!(generation, "admission filters rotated on request");
                text(
                    StatusCode::OK,
                    &format!("rotated: generation {generation}\n"),
                )
            }
            None => text(
                StatusCode::CONFLICT,
                &format!(
                    "admission.policy = {:?} keeps no filters: nothing to rotate\n",
                    policy.kind().as_str()
                ),
            ),
        }
    }
}

/// A JSON document on one line, ended by a newline.
fn json_response(status: StatusCode, value: serde_json::Value) -> Response<AdminBody> {
    let mut body = value.to_string();
    body.push('\n');
    with_type(status, "application/json", body.into())
}

/// A `text/plain` response.
fn text(status: StatusCode, body: &str) -> Response<AdminBody> {
    with_type(
        status,
        "text/plain; charset=utf-8",
        Bytes::copy_from_slice(body.as_bytes()),
    )
}

/// The admin page, with headers that keep it fresh and confined (see the module docs).
fn page() -> Response<AdminBody> {
    let mut response = with_type(
        StatusCode::OK,
        "text/html; charset=utf-8",
        Bytes::from_static(PAGE.as_bytes()),
    );
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(PAGE_POLICY),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// The answer to a request [`guard::check`] refused.
fn refused(refusal: guard::Refusal) -> Response<AdminBody> {
    match refusal {
        guard::Refusal::ForeignHost => text(
            StatusCode::MISDIRECTED_REQUEST,
            "this admin listener answers to IP addresses, localhost and server.admin_hosts only\n",
        ),
        guard::Refusal::CrossSite => text(
            StatusCode::FORBIDDEN,
            "the admin listener takes no state-changing request from another origin\n",
        ),
    }
}

/// 405 with the methods the path takes.
fn not_allowed(allow: &'static str) -> Response<AdminBody> {
    let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

/// A response of `status` with `body` of `content_type`.
fn with_type(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<AdminBody> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_confined_and_builds_no_markup_from_data() {
        let response = page();
        let header = |name| response.headers().get(name).and_then(|v| v.to_str().ok());
        assert_eq!(header(CONTENT_TYPE), Some("text/html; charset=utf-8"));
        assert_eq!(header(CACHE_CONTROL), Some("no-store"));
        let policy = header(CONTENT_SECURITY_POLICY).unwrap_or_default();
        assert!(policy.starts_with("default-src 'none';"), "{policy}");
        assert!(policy.contains("connect-src 'self'"), "{policy}");
        // Self-contained: nothing loaded from elsewhere (the SVG namespace is a name, not a
        // request), and no HTML parsed from data.
        let page = PAGE.replace("\"http://www.w3.org/2000/svg\"", "");
        for forbidden in [
            "http://",
            "https://",
            "src=",
            "@import",
            "url(",
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!page.contains(forbidden), "the page contains {forbidden:?}");
        }
    }
}
