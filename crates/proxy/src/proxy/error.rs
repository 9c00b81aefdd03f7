//! A request's failures, and the one place that turns a request's failure into a client response.
//!
//! Two kinds of failure exist. A failure of the *cache* (a disk error, a damaged
//! entry) never fails a request: the proxy logs it and proxies uncached, so it never
//! reaches this module's [`error_response`]. A failure of the *request* (the origin is
//! down or slow, the request names no host, it breaks an RFC 9110/9112 rule that
//! `hygiene` checks) is answered here: 400, 408, 501, 502, 503 or 504 with a short
//! plain-text body and a `Cache-Status` detail naming the cause.

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};

use super::Answer;
use crate::body::full_body;
use crate::hygiene::Rejection;
use crate::key::KeyError;
use crate::origin::OriginError;
use crate::outcome::ErrorKind;
use crate::outcome::{Detail, Outcome};

/// A failure that decides the response to one request.
#[derive(Debug, thiserror::Error)]
pub(super) enum ProxyError {
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

impl ProxyError {
    /// The kind this failure counts as.
    pub(super) fn kind(&self) -> ErrorKind {
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

/// Turns a request failure into the response the client receives.
pub(super) fn error_response(error: &ProxyError) -> Answer {
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
    Answer::new(response, Outcome::own(detail))
}
