//! Requests that name nothing on the origin, answered by the proxy itself: the
//! asterisk-form target (`*`, RFC 9112 §3.2.4) and `CONNECT` (RFC 9110 §9.3.6).
//!
//! - `OPTIONS *` asks about the server in general (RFC 9110 §9.3.7). The proxy is that
//!   server for its clients, so it answers: 200 with `Allow` listing the methods it
//!   handles (GET and HEAD from the cache, the others passed to the origin; not
//!   `CONNECT`), `Content-Length: 0`, `Cache-Status` `detail=server-options`.
//! - Any other method with `*` breaks RFC 9112 §3.2.4, which reserves the form for
//!   `OPTIONS`: 400 `detail=asterisk-form`.
//! - `CONNECT` asks for a tunnel, which a reverse proxy never opens: 501 Not Implemented
//!   (`detail=connect`). 501 rather than 405, because 405 says the method is known but
//!   not allowed on *this* resource and must list what is (RFC 9110 §15.5.6), while no
//!   resource here supports it: "the server does not support the functionality
//!   required" (§15.6.2) is the honest answer. nginx, also no forward proxy, refuses it
//!   the same way for any target.
//!
//! None of these reaches the origin: rewriting `*` or an authority-form target into a
//! path would forward a request the client never made.

use http::header::{ALLOW, CONTENT_LENGTH};
use http::{HeaderValue, Method, Response, StatusCode, request};

use super::Answer;
use crate::body::full_body;
use crate::hygiene::Rejection;
use crate::outcome::{Detail, Outcome};
use crate::proxy::error::ProxyError;

/// The methods `OPTIONS *` reports: what the proxy answers or passes on.
const ALLOWED: &str = "GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE, TRACE";

/// True for a request the proxy answers here ([`answer`]): `CONNECT`, or a `*` target.
/// Two comparisons, no allocation: every request asks.
pub(crate) fn is_own(head: &request::Parts) -> bool {
    head.method == Method::CONNECT || is_asterisk(head)
}

/// The asterisk form: `*` as the whole target (HTTP/1) or `:path` (HTTP/2).
fn is_asterisk(head: &request::Parts) -> bool {
    head.uri.scheme().is_none() && head.uri.path() == "*"
}

/// The answer to a request [`is_own`] accepted; see the module docs.
pub(super) fn answer(head: &request::Parts) -> Result<Answer, ProxyError> {
    if head.method == Method::CONNECT {
        return Err(ProxyError::Rejected(Rejection::Connect));
    }
    if head.method != Method::OPTIONS {
        return Err(ProxyError::Rejected(Rejection::AsteriskForm));
    }
    let mut response = Response::new(full_body(bytes::Bytes::new()));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(ALLOW, HeaderValue::from_static(ALLOWED));
    headers.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    Ok(Answer::new(response, Outcome::own(Detail::ServerOptions)))
}
