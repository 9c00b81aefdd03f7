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

/// A client's request body as the server took it in: hyper's, or none at all (the lean
/// HTTP/1 path, `server::lean`, serves only requests whose head frames no body).
#[derive(Debug)]
pub(crate) struct ClientBody(Option<hyper::body::Incoming>);

impl ClientBody {
    /// No body: the head framed none.
    pub(crate) fn none() -> ClientBody {
        ClientBody(None)
    }
}

impl From<hyper::body::Incoming> for ClientBody {
    fn from(body: hyper::body::Incoming) -> ClientBody {
        ClientBody(Some(body))
    }
}

impl http_body::Body for ClientBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, hyper::Error>>> {
        match &mut self.get_mut().0 {
            Some(body) => std::pin::Pin::new(body).poll_frame(cx),
            None => std::task::Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match &self.0 {
            Some(body) => body.size_hint(),
            None => http_body::SizeHint::with_exact(0),
        }
    }
}
