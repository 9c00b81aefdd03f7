//! One exchange on a pooled connection: the request's own task writes the request and
//! reads the response head, and whoever reads the body reads the rest from the socket.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper_rustls::MaybeHttpsStream;
use hyper_util::rt::TokioIo;
use secondhit_h1::{Connection, ResponseBody};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::either::Either;

use super::super::first_byte;
use super::super::{AddFields, OriginBody, OriginError, ReadTimeout, RequestBody};
use super::{Failed, Io, List, Pool, PooledBody};
use crate::body::BoxError;
use crate::config::RetryReason;

/// The stream the connector opened, out of hyper's wrappers: TCP, or TLS over it.
type Stream = Either<TcpStream, Box<tokio_rustls::client::TlsStream<TokioIo<TokioIo<TcpStream>>>>>;

/// One connection to the origin.
pub(super) type Conn = Connection<Stream>;

/// [`Pool::send`] on `secondhit-h1` connections, from `list`: `request` and then the
/// `added` lines to `origin`. `began`: when the caller began the request.
pub(super) async fn send(
    pool: &Pool,
    list: &Arc<List>,
    origin: &Uri,
    added: &(dyn AddFields + Sync),
    mut request: Box<Request<RequestBody>>,
    began: Instant,
) -> Result<Response<OriginBody>, Failed> {
    let progress = first_byte::watch(&mut request);
    let rest = Unsent::wrap(&mut request);
    // The failure of a written request being sent again: if no new connection opens,
    // the server is gone, and that failure (not the connect's) is what `origin.retry`
    // weighs, as it would have without the second try.
    let mut resending: Option<secondhit_h1::Error> = None;
    // The clock as last read: the caller's reading serves the first try on a pooled
    // connection, where nothing but this scheduler pass came between.
    let mut now = Some(began);
    loop {
        let (conn, reused) = match list.take(now.unwrap_or_else(Instant::now)) {
            Some(conn) => (conn, true),
            None => match pool.connect(origin).await {
                Ok(conn) => (conn, false),
                Err(_) if let Some(first) = resending => return Err(sent_failed(first)),
                Err(error) => return Err(Failed::unsent(error, request)),
            },
        };
        let idempotent = request.method().is_idempotent();
        let first_byte = pool.timeouts.first_byte;
        // Sent once the other tasks of this scheduler pass have run, as a connection task
        // of its own would send it: the requests of one pass then reach the origin
        // together and their answers come back together, so this worker and the origin
        // each wake fewer times (`benches/RESULTS.md`, "the origin's requests sent at the
        // end of the scheduler pass").
        crate::worker::end_of_pass().await;
        let sending = std::pin::pin!(conn.send(*request, added));
        // Timed from the caller's start only on a pooled connection: a new one's connect
        // is not the server's time to answer.
        let from = now.take().filter(|_| reused).unwrap_or_else(Instant::now);
        let deadlines = &list.deadlines;
        let within = first_byte::within(sending, progress.as_deref(), from, first_byte, deadlines);
        let Some(sent) = within.await else {
            return Err(Failed::timed_out(first_byte));
        };
        match sent {
            Ok(response) => {
                if let Some(rest) = rest.as_ref().and_then(Unsent::take) {
                    tokio::spawn(discard(rest));
                }
                let list = Arc::downgrade(list);
                // Boxed here, with its read timer: the response then moves up through the
                // origin's layers as a pointer, not as the connection it holds.
                let read = pool.timeouts.read;
                return Ok(response.map(|body| {
                    let body = PooledBody::new(body, list);
                    Box::new(ReadTimeout::new(body, read, "origin.read_timeout"))
                }));
            }
            // The first failure of a request written to this server is the one
            // `origin.retry` weighs, however many connections to it fail after it.
            Err(failed) => match again(failed, reused, idempotent) {
                Ok((unsent, failure)) => {
                    (request, resending) = (Box::new(unsent), resending.or(failure));
                }
                Err(_) if let Some(first) = resending => return Err(sent_failed(first)),
                Err(failed) => return Err(failed),
            },
        }
    }
}

/// The request of a failed exchange, to send on another connection: when the origin
/// closed a pooled connection under it before any answer, and none of it was written or
/// it may be repeated (an idempotent method, RFC 9112 §9.3.1, whose body was not taken).
/// Beside it, the failure when some of it had been written.
fn again(
    failed: secondhit_h1::SendError<RequestBody>,
    reused: bool,
    idempotent: bool,
) -> Result<(Request<RequestBody>, Option<secondhit_h1::Error>), Failed> {
    let (error, unsent) = failed.into_parts();
    let nothing_back = match error {
        secondhit_h1::Error::NothingReceived { written, .. } => Some(written),
        _ => None,
    };
    match (unsent, nothing_back) {
        (Some(unsent), Some(false)) if reused => Ok((unsent, None)),
        (Some(unsent), Some(true)) if reused && idempotent => Ok((unsent, Some(error))),
        (Some(unsent), Some(false)) => {
            let closed = "the new origin connection closed before the request was sent";
            Err(Failed::unsent(
                OriginError::Connect(closed.into()),
                Box::new(unsent),
            ))
        }
        _ => Err(sent_failed(error)),
    }
}

/// Where a request body left before its end is kept.
type Rest = Arc<Mutex<Option<RequestBody>>>;

/// A request body that, dropped before its end (the origin answered before the upload
/// ended, and `secondhit-h1` stops sending it), leaves the rest of itself behind.
struct Unsent {
    /// `None` only once dropped.
    body: Option<RequestBody>,
    rest: Rest,
}

impl Unsent {
    /// Wraps the body of `request` when it has one; where its rest will be.
    fn wrap(request: &mut Request<RequestBody>) -> Option<Rest> {
        if request.body().is_end_stream() {
            return None;
        }
        let rest = Rest::default();
        let body = std::mem::replace(request.body_mut(), super::super::empty_body());
        let unsent = Unsent {
            body: Some(body),
            rest: Arc::clone(&rest),
        };
        *request.body_mut() = unsent.boxed_unsync();
        Some(rest)
    }

    /// The rest of the body, when it was left before its end.
    fn take(rest: &Rest) -> Option<RequestBody> {
        rest.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl Body for Unsent {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(SizeHint::default, Body::size_hint)
    }
}

impl Drop for Unsent {
    fn drop(&mut self) {
        if let Some(body) = self.body.take().filter(|body| !body.is_end_stream()) {
            *self.rest.lock().unwrap_or_else(PoisonError::into_inner) = Some(body);
        }
    }
}

/// Reads the rest of an upload the origin answered early to its end (or its first
/// error), and drops it: the client may finish sending it and keep its connection, as
/// nginx discards a request body it no longer needs, rather than have its connection
/// closed under the upload. Its pace limits (`origin.body_read_timeout`,
/// `origin.body_min_rate`) still bound how long that takes.
async fn discard(mut rest: RequestBody) {
    while let Some(Ok(_)) = rest.frame().await {}
}

/// The exchange failed after (some of) the request was written.
fn sent_failed(error: secondhit_h1::Error) -> Failed {
    use secondhit_h1::Error;
    let reason = match &error {
        // The proxy forwards no upgrade: a switch nobody asked for breaks the exchange.
        Error::SwitchingProtocols => return Failed::switched(),
        // The client's body failed as it streamed: no server would do better.
        Error::RequestBody(_) | Error::RequestBodyLength => None,
        Error::BadHead(_) | Error::HeadTooLarge(_) | Error::Framing(_) => {
            Some(RetryReason::InvalidHeader)
        }
        // Reset, closed, or cut before a complete head.
        _ => Some(RetryReason::Error),
    };
    Failed::sent(error, reason)
}

/// A connection over `io`, out of hyper's wrappers.
pub(super) async fn open(io: Io) -> Result<Conn, OriginError> {
    let stream = match io {
        MaybeHttpsStream::Http(tcp) => Either::Left(tcp.into_inner()),
        MaybeHttpsStream::Https(tls) => Either::Right(Box::new(tls.into_inner())),
    };
    Ok(Connection::new(stream))
}

/// A response body's own type: it reads from its connection.
pub(super) type Incoming = ResponseBody<Stream>;

/// The body's error.
pub(super) type BodyError = secondhit_h1::Error;
