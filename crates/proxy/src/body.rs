//! The body type of every response the proxy sends, and its error type: the one thing
//! the server, the proxy, the origin client and the access log all pass along.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// The boxed error type of response bodies.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body type of every response the proxy sends.
pub(crate) type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// A response body of `bytes`, known in full (answers the proxy makes itself).
pub(crate) fn full_body(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}
