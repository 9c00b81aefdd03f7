//! Errors, and the one place that turns a request's failure into a client response.
//!
//! Two kinds of failure exist. A failure of the *cache* (a disk error, a damaged
//! entry) never fails a request: the proxy logs it and proxies uncached, so it never
//! reaches this module's [`error_response`]. A failure of the *request* (the origin is
//! down or slow, the request names no host, it breaks an RFC 9110/9112 rule that
//! `hygiene` checks) is answered here: 400, 502 or 504 with a short plain-text body and
//! a `Cache-Status` detail naming the cause.

use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
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
        ProxyError::BadRequest(_) => (StatusCode::BAD_REQUEST, Detail::BadRequest),
        ProxyError::Rejected(reason) => (StatusCode::BAD_REQUEST, Detail::Rejected(*reason)),
        ProxyError::Origin(OriginError::Timeout(_)) => {
            (StatusCode::GATEWAY_TIMEOUT, Detail::OriginTimeout)
        }
        ProxyError::Origin(OriginError::Connect(_)) => {
            (StatusCode::BAD_GATEWAY, Detail::OriginUnreachable)
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
    response
}
