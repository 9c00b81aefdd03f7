//! One client connection's life beside hyper: closed when idle for `server.idle_timeout`,
//! when `server.max_connections` is reached and it has no request open, and at shutdown.
//!
//! hyper has no idle timeout of its own: a kept-alive HTTP/1 connection waiting for its
//! next request (the head guard's `header_read_timeout` runs only once a head has begun),
//! and an HTTP/2 connection with no open stream, would be kept for ever: clients that
//! only connected, or only sent the preface, could hold every connection slot.
//! [`drive`] therefore watches each connection's [`Activity`]: a request counts from its
//! head until its response head is ready, which costs two uncontended atomic updates per
//! request and no clock read. A timer ticks [`IDLE_TICKS`] times per `idle_timeout`; after
//! that many ticks in a row with no request open and none started, the connection is shut
//! down gracefully — HTTP/1 closes it (or after the response in flight), HTTP/2 sends
//! GOAWAY and closes once its streams are done. So an idle connection is closed between
//! `idle_timeout` and `idle_timeout` plus one tick after its last request.
//!
//! A response body still streaming when the timer fires is not cut: the graceful shutdown
//! lets it finish, and only the connection's reuse is lost.
//!
//! An HTTP/2 graceful shutdown closes the connection once the client answered the PING
//! sent with the GOAWAY. A client that never answers is left to hyper's keep-alive: its
//! pings (every `idle_timeout`) go unanswered too, and hyper drops the connection
//! `header_read_timeout` after one (`Server::run` sets both).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::head_guard::{self, HeadGuard};
use crate::hygiene::ConnectionToken;
use crate::key::ClientScheme;
use crate::proxy::Proxy;

/// What every client connection is served with, shared by the plain and the TLS listener.
pub(super) struct Serving {
    pub(super) proxy: Arc<Proxy>,
    /// hyper-util's builder, set up once from `[server]` in `Server::run`.
    pub(super) builder: auto::Builder<TokioExecutor>,
    /// The head guard's limits.
    pub(super) limits: head_guard::Limits,
    /// `server.header_read_timeout`: each head's deadline (see `head_guard`), and the TLS
    /// handshake's.
    pub(super) header_read_timeout: Duration,
    /// `server.idle_timeout`.
    pub(super) idle_timeout: Duration,
}

impl Serving {
    /// Serves the connection `io` from `peer`, accepted on the listener of `scheme` (for a
    /// TLS connection, `io` is the decrypted stream), until it ends: through the head
    /// guard to hyper, each request to the proxy, and [`drive`] closing it when idle,
    /// reaped or stopped.
    pub(super) async fn serve<IO>(
        &self,
        io: IO,
        peer: SocketAddr,
        scheme: ClientScheme,
        token: ConnectionToken,
        signals: Signals,
    ) where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let proxy = self.proxy.clone();
        let activity = Arc::new(Activity::default());
        let requests = activity.clone();
        let service = service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(token);
            let proxy = proxy.clone();
            let open = requests.request();
            async move {
                let response = proxy.handle(request, peer, scheme).await;
                drop(open);
                Ok::<_, Infallible>(response)
            }
        });
        let io = HeadGuard::new(io, token, self.limits, self.header_read_timeout);
        let connection = self.builder.serve_connection(TokioIo::new(io), service);
        let close = |connection: Pin<&mut _>| auto::Connection::graceful_shutdown(connection);
        let ended = drive(connection, close, activity, self.idle_timeout, signals);
        if let Err(error) = ended.await {
            tracing::debug!(%peer, %error, "connection ended with an error");
        }
    }
}

/// Timer ticks per `idle_timeout`: the finer, the closer a close comes to the timeout, at
/// one timer wakeup per tick and connection.
pub(super) const IDLE_TICKS: u32 = 4;

/// What the idle timer needs to know of a connection's requests.
#[derive(Debug, Default)]
pub(super) struct Activity {
    /// Requests whose response head is not ready yet.
    open: AtomicU32,
    /// A request started since the timer last looked.
    used: AtomicBool,
}

impl Activity {
    /// Marks a request as open until the returned guard drops.
    pub(super) fn request(self: &Arc<Self>) -> OpenRequest {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.used.store(true, Ordering::Relaxed);
        OpenRequest(self.clone())
    }

    /// No request open now, and none started since the last look.
    fn quiet(&self) -> bool {
        let used = self.used.swap(false, Ordering::Relaxed);
        !used && self.open.load(Ordering::Relaxed) == 0
    }

    fn has_open_request(&self) -> bool {
        self.open.load(Ordering::Relaxed) > 0
    }
}

/// An open request of a connection (see [`Activity::request`]).
pub(super) struct OpenRequest(Arc<Activity>);

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The signals every connection listens to.
pub(super) struct Signals {
    /// Changes once, when the server stops accepting: shut down gracefully.
    pub(super) stop: watch::Receiver<()>,
    /// Changes whenever `server.max_connections` is reached: close if no request is open.
    pub(super) reap: watch::Receiver<()>,
}

impl Signals {
    /// The signals for a new connection: only what is sent from now on concerns it (a
    /// reap sent before it was accepted, perhaps to make room for it, does not).
    pub(super) fn for_connection(&self) -> Signals {
        let mut reap = self.reap.clone();
        reap.borrow_and_update();
        Signals {
            stop: self.stop.clone(),
            reap,
        }
    }
}

/// Runs `connection` to its end, calling `close` (its graceful shutdown) once: when it was
/// idle for `idle_timeout`, on a reap with no request open, or at stop.
pub(super) async fn drive<C, E>(
    connection: C,
    close: impl Fn(Pin<&mut C>),
    activity: Arc<Activity>,
    idle_timeout: Duration,
    mut signals: Signals,
) -> Result<(), E>
where
    C: Future<Output = Result<(), E>>,
{
    tokio::pin!(connection);
    // At least a millisecond: a zero period would make the interval panic.
    let tick = (idle_timeout / IDLE_TICKS).max(Duration::from_millis(1));
    let mut timer = tokio::time::interval_at(Instant::now() + tick, tick);
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut quiet_ticks = 0;
    let mut closing = false;
    let mut reaps = true;
    loop {
        tokio::select! {
            // In this order, with no random start: the connection is what wakes the task
            // nearly every time, and a random order costs a draw per wakeup.
            biased;
            ended = connection.as_mut() => return ended,
            _ = timer.tick(), if !closing => {
                quiet_ticks = if activity.quiet() { quiet_ticks + 1 } else { 0 };
                if quiet_ticks >= IDLE_TICKS {
                    tracing::debug!(?idle_timeout, "closing an idle connection");
                    close(connection.as_mut());
                    closing = true;
                }
            }
            // A closed channel means the server is gone: stop too.
            _ = signals.stop.changed(), if !closing => {
                close(connection.as_mut());
                closing = true;
            }
            reaped = signals.reap.changed(), if !closing && reaps => match reaped {
                Ok(()) if !activity.has_open_request() => {
                    close(connection.as_mut());
                    closing = true;
                }
                Ok(()) => {}
                Err(_) => reaps = false,
            },
        }
    }
}
