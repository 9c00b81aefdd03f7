//! Candidate `pingora`: pingora-core's HTTP/1 client session (`HttpSession`), a plain
//! struct whose async methods the request's task awaits: no task, no channel. It runs on
//! a TCP stream this client connects and wraps in pingora's `Stream` (as pingora's own
//! connector does, less its digests and tracing), with a new session per request on a
//! pooled stream, as pingora's connection pool uses it.
//!
//! What pingora's API costs here, as it would in the product: the session keeps the
//! response head (its keep-alive decision reads it), so the head handed on is a copy;
//! `read_body_bytes` copies each chunk out of the session's buffer; and its body, an
//! async method borrowing the session, becomes a poll-based body through a stream that
//! is allocated once per response.

use std::net::SocketAddr;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::{self, LocalBoxStream};
use http::{Request, Response};
use http_body::Frame;
use http_body_util::StreamBody;
use pingora_core::protocols::Stream;
use pingora_core::protocols::http::v1::client::HttpSession;
use pingora_core::protocols::l4::stream::Stream as TcpStream;
use pingora_http::RequestHeader;

use crate::idle::Idle;
use crate::origin::{self, BoxError};

/// The response body: the session's body reads, one frame each.
pub(crate) type PingoraBody = StreamBody<LocalBoxStream<'static, Result<Frame<Bytes>, BoxError>>>;

/// The client: idle streams, and where to open new ones.
pub(crate) struct Pingora {
    origin: SocketAddr,
    idle: Idle<Stream>,
}

impl Pingora {
    /// A client of `origin` with no connection yet.
    pub(crate) fn new(origin: SocketAddr) -> Self {
        Pingora {
            origin,
            idle: Idle::new(),
        }
    }
}

impl origin::Client for Pingora {
    type Body = PingoraBody;

    async fn send(&self, request: Request<()>) -> Result<Response<PingoraBody>, BoxError> {
        let stream = match self.idle.take() {
            Some(stream) => stream,
            None => Box::new(TcpStream::from(origin::connect(self.origin).await?)),
        };
        let mut session = HttpSession::new(stream);
        let (head, ()) = request.into_parts();
        session
            .write_request_header(Box::new(RequestHeader::from(head)))
            .await?;
        // Interim answers (100, 103) come before the final one.
        loop {
            session.read_response().await?;
            if !session.get_status().is_some_and(|s| s.is_informational()) {
                break;
            }
        }
        let head = session
            .resp_header()
            .ok_or("pingora read no response head")?
            .as_owned_parts();
        let body = if session.is_body_done() {
            // No body (HEAD, 204, 304, or an empty one): the stream is free now.
            release(session, &self.idle).await;
            stream::empty().boxed_local()
        } else {
            body(session, self.idle.clone())
        };
        Ok(Response::from_parts(head, StreamBody::new(body)))
    }
}

/// The body of the response `session` has read the head of, chunk by chunk. The stream
/// is pooled again as soon as the last chunk has been read, before it is handed on: the
/// server stops polling a body once its length is reached.
fn body(
    session: HttpSession,
    idle: Idle<Stream>,
) -> LocalBoxStream<'static, Result<Frame<Bytes>, BoxError>> {
    stream::unfold(Some((session, idle)), |state| async move {
        let (mut session, idle) = state?;
        match session.read_body_bytes().await {
            Ok(Some(data)) if session.is_body_done() => {
                release(session, &idle).await;
                Some((Ok(Frame::data(data)), None))
            }
            Ok(Some(data)) => Some((Ok(Frame::data(data)), Some((session, idle)))),
            Ok(None) => {
                release(session, &idle).await;
                None
            }
            // The session is dropped with its stream: never reused halfway.
            Err(error) => Some((Err(error.into()), None)),
        }
    })
    .boxed_local()
}

/// Pools the stream of `session`, whose response has been read whole, if pingora says it
/// can be reused (keep-alive, nothing left over); closes it otherwise.
async fn release(mut session: HttpSession, idle: &Idle<Stream>) {
    session.respect_keepalive();
    if let Some(stream) = session.reuse().await {
        idle.put(stream);
    }
}
