//! The origin's connection pool: HTTP/1.1 connections (hyper's `client::conn::http1`),
//! each run by a task of its own and kept open between requests.
//!
//! Why not hyper-util's pooled client, which this replaced: it serves any number of
//! origins, so every request looked its origin up in a keyed map, raced the checkout
//! against a connect future it built (and dropped) each time, and went back to the pool
//! through a guard of its own, all of it paid by every pass-through request
//! (`benches/RESULTS.md`, "origin pool"). Each server of an origin pool (`origin.servers`) has
//! one of these, so it is a list.
//!
//! The connections stay in tasks of their own rather than being driven by the request
//! that holds them: measured both ways, driving them inline cost less in user space but
//! more in the kernel, because each request then wrote to the origin on its own instead
//! of in a burst with the other requests of the same scheduler pass, and the origin
//! process was woken more often.
//!
//! Each worker (`server.workers`) keeps its own idle connections, whose tasks run on its
//! runtime: a request goes out on a connection of its own worker, so its exchange with
//! the origin never wakes another thread. Workers beyond [`LISTS`] share lists. Each list
//! is an allocation of its own with its own limit (the most idle connections kept is per
//! worker), so that nothing a request writes to take and give back its connection (the
//! list's lock, its count, the body's handle on the list) is written by another worker:
//! a shared count moves its cache line between cores on every request.
//!
//! A connection goes back to the pool when its response body has ended; one whose body
//! was dropped halfway or broke is not pooled, and hyper closes it. A pooled connection
//! is taken only once it takes another request: one still sending an upload that the
//! origin answered early is passed over, so no request waits behind it. A connection that the origin closed, or that waited longer than
//! [`IDLE_TIMEOUT`], is dropped when it is taken or by the sweep every [`SWEEP_EVERY`]. A
//! request that found its pooled connection closed before the request was written goes
//! out on another one: nothing was sent.
//!
//! Opening a connection (TCP, TLS and all) has `origin.connect_timeout`, and the answer's
//! head `origin.first_byte_timeout` ([`first_byte`]). A failure says which of the kinds
//! `origin.retry` names it is ([`Failed::reason`]).

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::time::Instant;
use tower_service::Service;

use super::first_byte;
use super::{OriginError, ReadTimedOut, RequestBody};
use crate::config::RetryReason;

/// How long an unused connection is kept open (what hyper-util's pooled client kept).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How often idle connections are checked for having been closed by the origin or
/// having waited too long, so that neither lingers while no request comes.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Idle lists, one per worker up to this many.
const LISTS: usize = 64;

/// Where requests go on one connection; its connection task does the I/O.
type Sender = http1::SendRequest<RequestBody>;

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
    /// `origin.first_byte_timeout` ([`first_byte`]).
    pub(super) first_byte: Duration,
}

struct Shared {
    /// Opens connections: TCP with the connect timeout, and TLS for `https://`.
    connector: HttpsConnector<HttpConnector>,
    /// Per worker ([`crate::worker::index`] modulo [`LISTS`]): its idle connections.
    lists: Box<[Arc<List>]>,
}

/// One worker's idle connections.
struct List {
    idle: Mutex<Idle>,
    /// The most idle connections this list keeps.
    max_idle: usize,
}

#[derive(Default)]
struct Idle {
    /// Oldest first: taken from the end (the connection used last is the likeliest to
    /// be open still), pruned by the sweep.
    senders: Vec<(Sender, Instant)>,
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
    /// body holds the connection until it ends. A failure to open a connection gives the
    /// request back ([`Failed::unsent`]): nothing of it was sent, so it may go elsewhere.
    pub(super) async fn send(
        &self,
        origin: &Uri,
        mut request: Request<RequestBody>,
    ) -> Result<Response<PooledBody>, Failed> {
        let list = &self.shared.lists[crate::worker::index() % LISTS];
        let progress = first_byte::watch(&mut request);
        loop {
            let (mut sender, reused) = match list.take() {
                Some(sender) => (sender, true),
                None => match self.connect(origin).await {
                    Ok(sender) => (sender, false),
                    Err(error) => return Err(Failed::unsent(error, request)),
                },
            };
            // A new connection takes requests once its task has run.
            if sender.ready().await.is_err() {
                if reused {
                    continue;
                }
                let closed = "the new origin connection closed before the request was sent";
                return Err(Failed::unsent(OriginError::Connect(closed.into()), request));
            }
            let sending = sender.try_send_request(request);
            let first_byte = self.timeouts.first_byte;
            let Some(sent) = first_byte::within(sending, progress.as_deref(), first_byte).await
            else {
                return Err(Failed::timed_out(first_byte));
            };
            match sent {
                // The proxy forwards no upgrade: a switch nobody asked for breaks the
                // exchange, and relayed it would end the client's connection.
                Ok(response) if response.status() == StatusCode::SWITCHING_PROTOCOLS => {
                    return Err(Failed::switched());
                }
                Ok(response) => {
                    let list = Arc::downgrade(list);
                    return Ok(response.map(|body| PooledBody {
                        body,
                        sender: Some(sender),
                        list,
                    }));
                }
                Err(mut failed) => match failed.take_message() {
                    // The origin closed the idle connection before the request was
                    // written: nothing was sent, so it goes out on another one.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(Failed::sent(failed.into_error())),
                },
            }
        }
    }

    /// Opens a connection within `origin.connect_timeout` (the connector's own limit
    /// covers the TCP handshake only, not TLS).
    async fn connect(&self, origin: &Uri) -> Result<Sender, OriginError> {
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
    fn unsent(error: OriginError, request: Request<RequestBody>) -> Failed {
        Failed {
            error,
            unsent: Some(Box::new(request)),
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

    /// The exchange failed after (some of) the request was written.
    fn sent(error: hyper::Error) -> Failed {
        if let Some(slow) = super::upload::cut_for_pace(&error) {
            return Failed {
                error: OriginError::RequestBodyTimeout(slow),
                unsent: None,
                reason: None,
            };
        }
        let reason = if error.is_user() {
            // The client's body failed as it streamed: no server would do better.
            None
        } else if error.is_parse() {
            Some(RetryReason::InvalidHeader)
        } else {
            // Reset, closed (a reused connection the server closed under the request),
            // or cut before a complete head.
            Some(RetryReason::Error)
        };
        Failed {
            error: OriginError::Protocol(error.into()),
            unsent: None,
            reason,
        }
    }
}

impl List {
    fn lock(&self) -> MutexGuard<'_, Idle> {
        // A poisoned lock only means another thread panicked while holding it; the list
        // itself is always whole (only whole entries are pushed and removed).
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently used idle connection that takes a request now, if any. One
    /// that is still finishing its exchange (the rest of an upload that the origin
    /// answered early) stays for later, so that no request waits behind it; one that
    /// closed or waited too long is dropped (its task then closes it).
    fn take(&self) -> Option<Sender> {
        let mut idle = self.lock();
        let mut at = idle.senders.len();
        while at > 0 {
            at -= 1;
            let (sender, since) = &idle.senders[at];
            if sender.is_closed() || since.elapsed() >= IDLE_TIMEOUT {
                idle.senders.remove(at);
            } else if sender.is_ready() {
                return Some(idle.senders.remove(at).0);
            }
        }
        None
    }

    /// Keeps `sender` for a later request, unless its connection closed or the list is
    /// full.
    fn put(self: &Arc<Self>, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let now = Instant::now();
        let mut idle = self.lock();
        if idle.senders.len() >= self.max_idle {
            return;
        }
        idle.senders.push((sender, now));
        if !idle.sweeping
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            idle.sweeping = true;
            runtime.spawn(sweep(Arc::downgrade(self)));
        }
    }
}

impl Shared {
    /// Opens a new connection to `origin` and starts its task.
    async fn connect(&self, origin: &Uri) -> Result<Sender, OriginError> {
        let mut connector = self.connector.clone();
        let io = connector
            .call(origin.clone())
            .await
            .map_err(OriginError::connect)?;
        let (sender, connection) = http1::handshake(io)
            .await
            .map_err(|error| OriginError::Connect(error.into()))?;
        tokio::spawn(async move {
            // A failure also reaches the request or body that was using the connection.
            if let Err(error) = connection.await {
                tracing::debug!(%error, "origin connection ended");
            }
        });
        Ok(sender)
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
            .senders
            .extract_if(.., |(sender, since)| {
                sender.is_closed() || now.duration_since(*since) >= IDLE_TIMEOUT
            })
            .collect();
        // Dropped outside the lock; each connection's task then closes its socket.
        drop(closing);
    }
}

/// A response body from the origin, holding its connection's sender: the connection
/// goes back to the pool when the body has ended, and is closed if the body is dropped
/// before its end or fails.
pub struct PooledBody {
    body: Incoming,
    /// `None` once it went back to the pool, or the body broke.
    sender: Option<Sender>,
    /// The idle list the connection goes back to: its worker's. Weak: a body outliving
    /// the proxy (a download in flight at shutdown) does not keep the pool alive.
    list: Weak<List>,
}

impl PooledBody {
    /// Pools the connection again.
    fn release(&mut self) {
        if let Some(sender) = self.sender.take()
            && let Some(list) = self.list.upgrade()
        {
            list.put(sender);
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        match &frame {
            Poll::Ready(None) => self.release(),
            // A broken body leaves its connection mid-message: never reused.
            Poll::Ready(Some(Err(_))) => self.sender = None,
            Poll::Ready(Some(Ok(_))) | Poll::Pending => {}
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
    use hyper_util::rt::TokioIo;
    use tokio::net::{TcpListener, TcpStream};

    /// A sender on a new connection to `listener`'s address, its task running.
    async fn sender(addr: std::net::SocketAddr) -> Sender {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        sender
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
        });
        for _ in 0..3 {
            let mut sender = sender(addr).await;
            sender.ready().await.unwrap();
            list.put(sender);
        }
        assert_eq!(list.lock().senders.len(), 2, "the third is not kept");
        assert!(list.take().is_some());
        assert!(list.take().is_some());
        assert!(list.take().is_none());
    }
}
