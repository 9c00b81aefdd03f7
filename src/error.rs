//! Errors, and the one place that turns a request's failure into a client response.
//!
//! Two kinds of failure exist. A failure of the *cache* (a disk error, a damaged
//! entry) never fails a request: the proxy logs it and proxies uncached, so it never
//! reaches this module's [`error_response`]. A failure of the *request* (the origin is
//! down or slow, the request names no host, it breaks an RFC 9110/9112 rule that
//! `hygiene` checks) is answered here: 400, 408, 501, 502, 503 or 504 with a short
//! plain-text body and a `Cache-Status` detail naming the cause.

use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::admission::AdmissionError;
use crate::cache_status::{CACHE_STATUS, CacheStatus, Detail};
use crate::config::ConfigError;
use crate::hygiene::Rejection;
use crate::key::KeyError;
use crate::origin::OriginError;
use crate::store::StoreError;

/// The boxed error type of response bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body type of every response the proxy sends.
pub type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// A failure that decides the response to one request.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The request cannot be mapped to a cache key or an origin request.
    #[error("bad request: {0}")]
    BadRequest(#[from] KeyError),
    /// The request breaks a rule a conforming intermediary enforces; it never reaches the origin.
    #[error("rejected request: {0}")]
    Rejected(#[from] Rejection),
    /// The origin failed before a response head arrived.
    #[error(transparent)]
    Origin(#[from] OriginError),
    /// `Cache-Control: only-if-cached` and nothing servable is stored (RFC 9111 §5.2.1.7).
    #[error("only-if-cached, and no stored response may be served")]
    OnlyIfCached,
    /// The stored response may not be served stale (`must-revalidate`,
    /// `proxy-revalidate`, ...) and the origin failed (RFC 9111 §5.2.2.2).
    #[error("stale response must be revalidated, and the origin failed: {0}")]
    MustRevalidate(OriginError),
}

/// What went wrong, for `secondhit_errors_total{kind}`: the request failures
/// [`error_response`] answers, and the cache failures the proxy survives by proxying
/// uncached. (The store's own damage and dropped-fill counters are read from its stats at
/// scrape time.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A request that names no usable cache key or host (400).
    BadRequest,
    /// A request that breaks an RFC 9110/9112 rule (400).
    Rejected,
    /// The origin did not answer in time (504).
    OriginTimeout,
    /// The origin could not be reached (502).
    OriginUnreachable,
    /// The origin's answer could not be used (502).
    OriginError,
    /// `only-if-cached` with nothing servable stored (504).
    OnlyIfCached,
    /// A stale response that must be revalidated, and the origin failed (504).
    MustRevalidate,
    /// Every origin permit stayed taken for `origin.queue_timeout` (503).
    OriginBusy,
    /// The client's request body stalled for `origin.body_read_timeout`, or averaged less
    /// than `origin.body_min_rate` over it (408).
    RequestBodyTimeout,
    /// A store lookup failed; the request was proxied uncached.
    StoreLookup,
    /// A fill of a storable, admitted response could not start (no room, disk error).
    FillNotStarted,
}

impl ErrorKind {
    /// Every kind, in counter order.
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::BadRequest,
        ErrorKind::Rejected,
        ErrorKind::OriginTimeout,
        ErrorKind::OriginUnreachable,
        ErrorKind::OriginError,
        ErrorKind::OnlyIfCached,
        ErrorKind::MustRevalidate,
        ErrorKind::OriginBusy,
        ErrorKind::RequestBodyTimeout,
        ErrorKind::StoreLookup,
        ErrorKind::FillNotStarted,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad-request",
            ErrorKind::Rejected => "rejected",
            ErrorKind::OriginTimeout => "origin-timeout",
            ErrorKind::OriginUnreachable => "origin-unreachable",
            ErrorKind::OriginError => "origin-error",
            ErrorKind::OnlyIfCached => "only-if-cached",
            ErrorKind::MustRevalidate => "must-revalidate",
            ErrorKind::OriginBusy => "origin-busy",
            ErrorKind::RequestBodyTimeout => "request-body-timeout",
            ErrorKind::StoreLookup => "store-lookup",
            ErrorKind::FillNotStarted => "fill-not-started",
        }
    }
}

impl ProxyError {
    /// The kind this failure counts as.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ProxyError::BadRequest(_) | ProxyError::Origin(OriginError::ClientBody(_)) => {
                ErrorKind::BadRequest
            }
            ProxyError::Rejected(_) => ErrorKind::Rejected,
            ProxyError::Origin(OriginError::Timeout(_)) => ErrorKind::OriginTimeout,
            ProxyError::Origin(OriginError::Connect(_)) => ErrorKind::OriginUnreachable,
            ProxyError::Origin(OriginError::Busy(_)) => ErrorKind::OriginBusy,
            ProxyError::Origin(OriginError::RequestBodyTimeout(_)) => ErrorKind::RequestBodyTimeout,
            ProxyError::Origin(OriginError::Protocol(_) | OriginError::Client(_)) => {
                ErrorKind::OriginError
            }
            ProxyError::OnlyIfCached => ErrorKind::OnlyIfCached,
            ProxyError::MustRevalidate(_) => ErrorKind::MustRevalidate,
        }
    }
}

/// A failure that stops `secondhit serve` from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The config file is missing or invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The cache directory cannot be opened.
    #[error("cache: {0}")]
    Store(#[from] StoreError),
    /// The admission filter cannot be set up (its seed file, usually).
    #[error("admission: {0}")]
    Admission(#[from] AdmissionError),
    /// The origin client cannot be built.
    #[error("{0}")]
    Origin(#[from] OriginError),
    /// The access log file cannot be opened (or its writer started).
    #[error("{0}")]
    AccessLog(#[from] crate::access_log::AccessLogError),
    /// The listen address cannot be bound.
    #[error("server.listen: cannot listen on {addr}: {source}")]
    Bind {
        /// The address from `server.listen`.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// A TLS certificate or key file cannot be used (names the key and the file).
    #[error("{0}")]
    Certificate(#[from] crate::server::tls::CertificateError),
    /// rustls refused the TLS listener's settings.
    #[error("server.tls: cannot set up TLS: {0}")]
    TlsSetup(#[source] rustls::Error),
    /// The TLS listen address cannot be bound.
    #[error("server.tls.listen: cannot listen on {addr}: {source}")]
    TlsBind {
        /// The address from `server.tls.listen`.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The admin listener's address cannot be bound.
    #[error("server.admin_listen: cannot listen on {addr}: {source}")]
    AdminBind {
        /// The address from `server.admin_listen`.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The sockets passed by systemd (`LISTEN_FDS`) cannot be used.
    #[error("socket activation: {0}")]
    Inherited(String),
    /// Something on this machine that the config relies on is missing or unusable (a
    /// user, the cache directory, memory for the filters): see [`crate::preflight`].
    #[error("{0}")]
    Preflight(#[from] crate::preflight::PreflightError),
}

/// A response body of `bytes`, known in full (answers the proxy makes itself).
pub fn full_body(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Turns a request failure into the response the client receives.
pub fn error_response(error: &ProxyError) -> Response<ProxyBody> {
    let (status, detail) = match error {
        // A request body that broke off is an incomplete request, not an origin failure.
        ProxyError::BadRequest(_) | ProxyError::Origin(OriginError::ClientBody(_)) => {
            (StatusCode::BAD_REQUEST, Detail::BadRequest)
        }
        // 501, not 405: no resource of a reverse proxy supports CONNECT (RFC 9110 §15.6.2).
        ProxyError::Rejected(Rejection::Connect) => (
            StatusCode::NOT_IMPLEMENTED,
            Detail::Rejected(Rejection::Connect),
        ),
        ProxyError::Rejected(reason) => (StatusCode::BAD_REQUEST, Detail::Rejected(*reason)),
        ProxyError::Origin(OriginError::Timeout(_)) => {
            (StatusCode::GATEWAY_TIMEOUT, Detail::OriginTimeout)
        }
        ProxyError::Origin(OriginError::Connect(_)) => {
            (StatusCode::BAD_GATEWAY, Detail::OriginUnreachable)
        }
        ProxyError::Origin(OriginError::Busy(_)) => {
            (StatusCode::SERVICE_UNAVAILABLE, Detail::OriginBusy)
        }
        ProxyError::Origin(OriginError::RequestBodyTimeout(_)) => {
            (StatusCode::REQUEST_TIMEOUT, Detail::RequestBodyTimeout)
        }
        ProxyError::Origin(OriginError::Protocol(_) | OriginError::Client(_)) => {
            (StatusCode::BAD_GATEWAY, Detail::OriginError)
        }
        ProxyError::OnlyIfCached => (StatusCode::GATEWAY_TIMEOUT, Detail::OnlyIfCached),
        ProxyError::MustRevalidate(_) => (StatusCode::GATEWAY_TIMEOUT, Detail::MustRevalidate),
    };
    // The reason phrase, not the error text: internals (addresses, paths) stay in the log.
    let text = format!(
        "{} {}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("error")
    );
    let mut response = Response::new(full_body(Bytes::from(text)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(CACHE_STATUS, CacheStatus::own(detail).to_header_value());
    match error {
        // When to try again: after about as long as this request queued (RFC 9110 §10.2.3).
        ProxyError::Origin(OriginError::Busy(waited)) => {
            let seconds = waited.as_secs() + u64::from(waited.subsec_nanos() > 0);
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        // The body was not read to its end: the connection cannot carry another request.
        ProxyError::Origin(OriginError::RequestBodyTimeout(_) | OriginError::ClientBody(_)) => {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        _ => {}
    }
    response
}
