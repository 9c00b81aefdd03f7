//! The origin's connection pool: HTTP/1.1 connections kept open between requests,
//! `secondhit-h1`'s, driven by the request that holds them ([`exchange`]): no task per
//! connection and no channel between the request and its connection.
//!
//! Why not hyper-util's pooled client, which this replaced: it serves any number of
//! origins, so every request looked its origin up in a keyed map, raced the checkout
//! against a connect future it built (and dropped) each time, and went back to the pool
//! through a guard of its own, all of it paid by every pass-through request
//! (`benches/RESULTS.md`, "origin pool"). Each server of an origin pool (`origin.servers`) has
//! one of these, so it is a list.
//!
//! Why not hyper's `client::conn::http1`, which this replaced: each of its connections
//! runs in a task of its own, so every request paid a channel send, a handshake with
//! that task and two wakes; measured against it and against pingora's client, this one
//! cost the least CPU per pass-through (`benches/RESULTS.md`, "origin clients").
//! What hyper's connection tasks did by being tasks, this pool does by yielding once
//! before a request is written ([`exchange`]): the requests of one scheduler pass go out
//! together, so that their answers come back together.
//!
//! Each worker (`server.workers`) keeps its own idle connections: a request goes out on a
//! connection of its own worker, so its exchange with the origin never wakes another
//! thread. Workers beyond [`LISTS`] share lists. Each list
//! is an allocation of its own with its own limit (the most idle connections kept is per
//! worker), so that nothing a request writes to take and give back its connection (the
//! list's lock, its count, the body's handle on the list) is written by another worker:
//! a shared count moves its cache line between cores on every request.
//!
//! A connection goes back to the pool when its response body has ended; one whose body
//! was dropped halfway or broke is not pooled, and is closed. An upload that the origin
//! answered before its end is not sent further: its connection is closed, and the rest of
//! the client's body is read and dropped. An idle connection is only a socket in its
//! list, so one that the origin closed, or that waited longer than [`IDLE_TIMEOUT`], is
//! dropped when it is taken or by the sweep every [`SWEEP_EVERY`], not at once. A request
//! whose pooled connection the origin closed before any answer goes out again on another
//! one when nothing of it was written, or when it may be repeated ([`exchange`]).
//!
//! Opening a connection (TCP, TLS and all) has `origin.connect_timeout`, and the answer's
//! head `origin.first_byte_timeout` ([`first_byte`](super::first_byte)). A failure says
//! which of the kinds `origin.retry` names it is ([`Failed::reason`]).

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::time::Instant;
use tower_service::Service;

use super::{AddFields, OriginBody, OriginError, ReadTimedOut, RequestBody, deadline};
use crate::config::RetryReason;

mod exchange;

/// How long an unused connection is kept open (what hyper-util's pooled client kept).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How often idle connections are checked for having been closed by the origin or
/// having waited too long, so that neither lingers while no request comes.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Idle lists, one per worker up to this many.
const LISTS: usize = 64;

/// Connections to one origin server, and how to open new ones.
pub(super) struct Pool {
    shared: Arc<Shared>,
    timeouts: Timeouts,
}

/// How long a connection may take to open, and a response head to come.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timeouts {
    /// `origin.connect_timeout`: TCP, TLS and the HTTP/1 handshake together.
    pub(super) connect: Duration,
    /// `origin.first_byte_timeout` ([`first_byte`](super::first_byte)).
    pub(super) first_byte: Duration,
    /// `origin.read_timeout`: between bytes of a response body.
    pub(super) read: Duration,
}

/// Opens connections: TCP with the connect timeout, and TLS for `https://`.
type Connector = HttpsConnector<HttpConnector>;

/// What [`Connector`] opens: a TCP stream, or TLS over one.
type Io = hyper_rustls::MaybeHttpsStream<hyper_util::rt::TokioIo<tokio::net::TcpStream>>;

struct Shared {
    connector: Connector,
    /// Per worker ([`crate::worker::index`] modulo [`LISTS`]): its idle connections.
    lists: Box<[Arc<List>]>,
}

/// One worker's idle connections.
struct List {
    idle: Mutex<Idle>,
    /// The most idle connections this list keeps.
    max_idle: usize,
    /// The response heads its exchanges wait for (`origin.first_byte_timeout`).
    deadlines: Arc<deadline::Board>,
}

#[derive(Default)]
struct Idle {
    /// Oldest first: taken from the end (the connection used last is the likeliest to
    /// be open still), pruned by the sweep.
    conns: Vec<(exchange::Conn, Instant)>,
    /// Whether the sweep task runs (started with the first connection pooled, from
    /// inside the runtime).
    sweeping: bool,
}

impl Pool {
    /// An empty pool opening connections with `connector`, keeping `max_idle` idle ones
    /// at most per worker.
    pub(super) fn new(
        connector: HttpsConnector<HttpConnector>,
        max_idle: usize,
        timeouts: Timeouts,
    ) -> Pool {
        let list = || {
            Arc::new(List {
                idle: Mutex::default(),
                max_idle,
                deadlines: Arc::default(),
            })
        };
        Pool {
            shared: Arc::new(Shared {
                connector,
                lists: (0..LISTS).map(|_| list()).collect(),
            }),
            timeouts,
        }
    }

    /// Sends `request` (origin-form target, `Host` set) on a pooled connection, or on a
    /// new one to `origin` (scheme and authority), and returns the response head. The
    /// body, boxed with its `origin.read_timeout`, holds the connection until it ends. A
    /// failure to open a connection gives the request back ([`Failed::unsent`]): nothing
    /// of it was sent, so it may go elsewhere. `now`: the clock as the caller read it
    /// when it began the request.
    pub(super) fn send<'a>(
        &'a self,
        origin: &'a Uri,
        request: Box<Request<RequestBody>>,
        added: &'a (dyn AddFields + Sync),
        now: Instant,
    ) -> impl Future<Output = Result<Response<OriginBody>, Failed>> + 'a {
        // Not an async fn of its own: a wrapper's state would hold the exchange's again.
        let list = &self.shared.lists[crate::worker::index() % LISTS];
        exchange::send(self, list, origin, added, request, now)
    }

    /// Opens a connection within `origin.connect_timeout` (the connector's own limit
    /// covers the TCP handshake only, not TLS).
    async fn connect(&self, origin: &Uri) -> Result<exchange::Conn, OriginError> {
        let connect_timeout = self.timeouts.connect;
        match tokio::time::timeout(connect_timeout, self.shared.connect(origin)).await {
            Ok(connected) => connected,
            Err(_) => {
                let waited = ReadTimedOut::silent(connect_timeout, "origin.connect_timeout");
                Err(OriginError::Timeout(waited.into()))
            }
        }
    }
}

/// Why [`Pool::send`] got no response head.
pub(super) struct Failed {
    /// What went wrong.
    pub(super) error: OriginError,
    /// The request, when none of it was sent (boxed: the error path stays small).
    pub(super) unsent: Option<Box<Request<RequestBody>>>,
    /// Which failure of the server's it was; `None` where it was not the server's (the
    /// client's body failed), which no server would do better.
    pub(super) reason: Option<RetryReason>,
}

impl Failed {
    fn unsent(error: OriginError, request: Box<Request<RequestBody>>) -> Failed {
        Failed {
            error,
            unsent: Some(request),
            reason: Some(RetryReason::Unsent),
        }
    }

    /// No response head within `origin.first_byte_timeout`.
    fn timed_out(after: Duration) -> Failed {
        let waited = ReadTimedOut::silent(after, "origin.first_byte_timeout");
        Failed {
            error: OriginError::Timeout(waited.into()),
            unsent: None,
            reason: Some(RetryReason::Timeout),
        }
    }

    /// The server switched protocols (101) for a request that asked for no upgrade: a
    /// head that is not an answer to it, as `origin.retry`'s `invalid_header` names.
    fn switched() -> Failed {
        let switched =
            "the origin switched protocols (101) for a request that asked for no upgrade";
        Failed {
            error: OriginError::Protocol(switched.into()),
            unsent: None,
            reason: Some(RetryReason::InvalidHeader),
        }
    }

    /// The exchange failed with `error` after (some of) the request was written: the
    /// server's failure of kind `reason` (`None`: not the server's), unless the upload
    /// was cut for its pace, which is the client's.
    fn sent<E>(error: E, reason: Option<RetryReason>) -> Failed
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        if let Some(slow) = super::upload::cut_for_pace(&error) {
            return Failed {
                error: OriginError::RequestBodyTimeout(slow),
                unsent: None,
                reason: None,
            };
        }
        Failed {
            error: OriginError::Protocol(error.into()),
            unsent: None,
            reason,
        }
    }
}

impl Shared {
    /// Opens a new connection to `origin`: TCP, TLS for `https://`, and the client's own
    /// setting up.
    async fn connect(&self, origin: &Uri) -> Result<exchange::Conn, OriginError> {
        let mut connector = self.connector.clone();
        let io = connector
            .call(origin.clone())
            .await
            .map_err(OriginError::connect)?;
        exchange::open(io).await
    }
}

impl List {
    fn lock(&self) -> MutexGuard<'_, Idle> {
        // A poisoned lock only means another thread panicked while holding it; the list
        // itself is always whole (only whole entries are pushed and removed).
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently used idle connection that takes a request `now`, if any; those
    /// taken before it that the origin closed, or that waited too long, are dropped
    /// (closed).
    fn take(&self, now: Instant) -> Option<exchange::Conn> {
        let mut idle = self.lock();
        while let Some((mut conn, since)) = idle.conns.pop() {
            if now.saturating_duration_since(since) < IDLE_TIMEOUT && conn.is_open() {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` for a later request, unless the list is full. A connection is given
    /// back only when it can take another request; a close since is seen when it is
    /// taken.
    fn put(self: &Arc<Self>, conn: exchange::Conn) {
        let now = Instant::now();
        let mut idle = self.lock();
        if idle.conns.len() >= self.max_idle {
            return;
        }
        idle.conns.push((conn, now));
        if !idle.sweeping
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            idle.sweeping = true;
            runtime.spawn(sweep(Arc::downgrade(self)));
        }
    }
}

/// Every [`SWEEP_EVERY`], closes the idle connections of `list` that the origin closed or that
/// waited longer than [`IDLE_TIMEOUT`]; ends with the pool.
async fn sweep(list: Weak<List>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(list) = list.upgrade() else {
            return;
        };
        let now = Instant::now();
        let closing: Vec<_> = list
            .lock()
            .conns
            .extract_if(.., |(conn, since)| {
                now.duration_since(*since) >= IDLE_TIMEOUT || !conn.is_open()
            })
            .collect();
        // Dropped, and so closed, outside the lock.
        drop(closing);
    }
}

/// A response body from the origin, holding its connection: the connection goes back to
/// the pool when the body has ended, and is closed if the body is dropped before its end
/// or fails.
pub struct PooledBody {
    body: exchange::Incoming,
    /// The idle list the connection goes back to: its worker's. Weak: a body outliving
    /// the proxy (a download in flight at shutdown) does not keep the pool alive.
    list: Weak<List>,
}

impl PooledBody {
    fn new(body: exchange::Incoming, list: Weak<List>) -> PooledBody {
        PooledBody { body, list }
    }

    /// How the response delimited the body.
    pub(super) fn delimit(&self) -> secondhit_h1::Delimit {
        self.body.delimit()
    }

    /// Pools the connection again, when the body has ended and left it able to take
    /// another request.
    fn release(&mut self) {
        if let Some(conn) = self.body.take_connection()
            && let Some(list) = self.list.upgrade()
        {
            list.put(conn);
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = exchange::BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, exchange::BodyError>>> {
        let this = &mut *self;
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        // Free at the body's last frame already, for the next request, even if the
        // body's reader never asks again.
        if frame.is_ready() && this.body.is_end_stream() {
            this.release();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for PooledBody {
    /// A body read to its last byte by a reader that then stopped (hyper's server does,
    /// once the length is reached), or one that had none (`HEAD`, 204, 304), still frees
    /// its connection; one dropped halfway closes it.
    fn drop(&mut self) {
        if self.body.is_end_stream() {
            self.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    /// A connection to `addr`, ready for a request.
    async fn connection(addr: std::net::SocketAddr) -> exchange::Conn {
        let stream = TcpStream::connect(addr).await.unwrap();
        secondhit_h1::Connection::new(tokio_util::either::Either::Left(stream))
    }

    #[tokio::test]
    async fn a_list_keeps_at_most_its_limit_of_idle_connections() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepts and holds every connection open.
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let list = Arc::new(List {
            idle: Mutex::default(),
            max_idle: 2,
            deadlines: Arc::default(),
        });
        for _ in 0..3 {
            list.put(connection(addr).await);
        }
        assert_eq!(list.lock().conns.len(), 2, "the third is not kept");
        assert!(list.take(Instant::now()).is_some());
        assert!(list.take(Instant::now()).is_some());
        assert!(list.take(Instant::now()).is_none());
    }
}
