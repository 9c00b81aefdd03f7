//! The accept loop: takes clients from a worker's listeners while a connection slot
//! (`server.max_connections`, shared by all workers) is free, and serves each in a task of
//! its own on that worker.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::{connection, tls, zero_copy};
use crate::hygiene::ConnectionToken;
use crate::key::ClientScheme;
use crate::metrics::Metrics;

/// A client just accepted, ready to be served.
struct Client {
    stream: TcpStream,
    peer: SocketAddr,
    /// The scheme of the listener that accepted it.
    scheme: ClientScheme,
    token: ConnectionToken,
}

/// One worker's accept loop: what each connection is served with, and the connection
/// slots (`server.max_connections`) it hands out.
pub(super) struct Accepting {
    /// What every worker's accept loop shares.
    shared: Arc<Shared>,
    /// What this worker's connections are served with: its own copy of `shared.serving`
    /// ([`connection::Serving::for_worker`]).
    serving: Arc<connection::Serving>,
    /// Counts this worker's open connections for the drain at shutdown.
    pub(super) graceful: GracefulShutdown,
    /// What every connection of this worker listens to; each gets its own copy.
    signals: connection::Signals,
}

/// What the workers' accept loops share.
pub(super) struct Shared {
    /// What every connection is served with.
    pub(super) serving: Arc<connection::Serving>,
    /// Handshakes the TLS listener's clients; `None` without `[server.tls]`.
    pub(super) acceptor: Option<TlsAcceptor>,
    /// One permit per open connection, of any worker.
    pub(super) slots: Arc<Semaphore>,
    /// Asks connections with no request open to close, when the slots run out.
    pub(super) reap: watch::Sender<()>,
    /// Changes once, when the server stops accepting.
    pub(super) stop: watch::Receiver<()>,
    /// Counts the connections each worker accepts.
    pub(super) metrics: Arc<Metrics>,
    /// `server.max_connections`, for the log line.
    pub(super) max_connections: usize,
    /// When reaching `max_connections` was last logged, by any worker: only a full
    /// server takes this lock.
    pub(super) full_logged: std::sync::Mutex<Option<Instant>>,
}

impl Accepting {
    /// A worker's accept loop over `shared`.
    pub(super) fn new(shared: Arc<Shared>) -> Accepting {
        let signals = connection::Signals {
            stop: shared.stop.clone(),
            reap: shared.reap.subscribe(),
        };
        Accepting {
            serving: Arc::new(shared.serving.for_worker()),
            shared,
            graceful: GracefulShutdown::new(),
            signals,
        }
    }

    /// Accepts clients from `plain` and `tls` and serves each in a task of its own, until
    /// `shutdown` completes.
    pub(super) async fn accept_until(
        &mut self,
        plain: &TcpListener,
        tls: Option<&TcpListener>,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) {
        loop {
            let Some((slot, (accepted, scheme))) =
                self.next_client(plain, tls, shutdown.as_mut()).await
            else {
                break;
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            self.shared.metrics.count_connection();
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
            }
            let token = match ConnectionToken::random() {
                Ok(token) => token,
                Err(error) => {
                    // Without a token the guard cannot mark a rejection: refuse the
                    // connection rather than serve it unguarded.
                    tracing::warn!(%peer, %error, "no random token for the connection; closing it");
                    continue;
                }
            };
            let client = Client {
                stream,
                peer,
                scheme,
                token,
            };
            self.spawn_connection(client, slot);
        }
    }

    /// The next client with a connection slot for it; `None` once `shutdown` completed.
    /// The slot is taken once the client is accepted, not before: a worker waiting for
    /// clients holds no slot that another worker's client could use.
    async fn next_client(
        &mut self,
        plain: &TcpListener,
        tls: Option<&TcpListener>,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> Option<(OwnedSemaphorePermit, Accepted)> {
        let accepted = tokio::select! {
            accepted = tls::accept_either(plain, tls) => accepted,
            () = &mut shutdown => return None,
        };
        if let Ok(slot) = self.shared.slots.clone().try_acquire_owned() {
            return Some((slot, accepted));
        }
        // Every slot is taken. This client's connection is held (at most one beyond the
        // limit per worker; later ones wait in the listen backlog), connections with no
        // request open are asked to close, as nginx drains keep-alive connections when it
        // runs out, and the client waits for the first free slot.
        self.note_full();
        let slot = self.slot_reaping(shutdown).await?;
        Some((slot, accepted))
    }

    /// Waits for a free slot, asking again at every tick of the connections' timer: a
    /// connection counts as stalled only once its client took nothing for a tick, so one
    /// that stalled just before the first reap is dropped at the next, not after
    /// `server.send_timeout`. `None` once `shutdown` completed.
    async fn slot_reaping(
        &self,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> Option<OwnedSemaphorePermit> {
        let slot = self.shared.slots.clone().acquire_owned();
        tokio::pin!(slot);
        let tick = self.serving.tick();
        let mut reaps = tokio::time::interval_at(tokio::time::Instant::now() + tick, tick);
        reaps.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                // The semaphore is never closed.
                slot = &mut slot => return slot.ok(),
                () = &mut shutdown => return None,
                _ = reaps.tick() => {
                    self.shared.reap.send_replace(());
                }
            }
        }
    }

    /// A client arrived with `server.max_connections` reached: asks connections with no
    /// request open to close (`reap`), and logs it at most once per [`FULL_LOG_EVERY`].
    fn note_full(&mut self) {
        self.shared.reap.send_replace(());
        let mut logged = match self.shared.full_logged.lock() {
            Ok(logged) => logged,
            // A worker panicked while holding it; the time is still good.
            Err(poisoned) => poisoned.into_inner(),
        };
        if logged.is_some_and(|at| at.elapsed() < FULL_LOG_EVERY) {
            return;
        }
        *logged = Some(Instant::now());
        drop(logged);
        tracing::warn!(
            max_connections = self.shared.max_connections,
            "server.max_connections reached: new connections wait in the listen backlog; \
             connections with no request open are being closed (logged at most once a minute)"
        );
    }

    /// Serves `client` in a task of its own, holding `slot` until it ends; a client of
    /// the TLS listener is handshaken first.
    fn spawn_connection(&self, client: Client, slot: OwnedSemaphorePermit) {
        let Client {
            stream,
            peer,
            scheme,
            token,
        } = client;
        // Not `graceful.watch`: the idle timer must shut the connection down too. The
        // watcher still counts it for the drain at shutdown.
        let watcher = self.graceful.watcher();
        let (serving, signals) = (self.serving.clone(), self.signals.for_connection());
        match (scheme, &self.shared.acceptor) {
            (ClientScheme::Https, Some(acceptor)) => {
                let handshake = acceptor.accept(stream);
                let limit = serving.header_read_timeout;
                tokio::spawn(async move {
                    // The handshake holds the slot (it counts toward `max_connections`)
                    // and has `header_read_timeout`; then the head guard reads the
                    // decrypted stream. No sendfile under TLS: rustls encrypts the
                    // mapped bodies from memory.
                    let mut signals = signals;
                    match handshake_within(handshake, limit, &mut signals.reap).await {
                        Handshake::Done(stream) => {
                            serving.serve(stream, peer, scheme, token, signals).await;
                        }
                        Handshake::Failed(error) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                        }
                        Handshake::TimedOut => {
                            tracing::debug!(%peer, ?limit, "TLS handshake timed out (server.header_read_timeout)");
                        }
                        Handshake::Reaped => {
                            tracing::debug!(%peer, "TLS handshake unfinished at server.max_connections: dropped to make room");
                        }
                    }
                    drop((watcher, slot));
                });
            }
            _ => {
                let stream = zero_copy::ZeroCopyStream::new(stream);
                tokio::spawn(async move {
                    serving.serve(stream, peer, scheme, token, signals).await;
                    drop((watcher, slot));
                });
            }
        }
    }
}

/// How a TLS client's handshake ended ([`handshake_within`]).
enum Handshake<S> {
    /// Done: the decrypted stream, to serve.
    Done(S),
    /// The client broke it off, or sent something that is no TLS.
    Failed(std::io::Error),
    /// Not done within `server.header_read_timeout`.
    TimedOut,
    /// Not done when the slots ran out and [`HANDSHAKE_GRACE`] had passed since it began.
    Reaped,
}

/// Runs `handshake` to its end within `limit`. A reap (the slots ran out) ends it once it
/// has run for [`HANDSHAKE_GRACE`]: a handshake in progress holds a slot and no request,
/// as a silent connection does, and clients that open the TLS listener and never finish
/// would otherwise keep a new client waiting for `limit`. A closed reap channel (the
/// server going away) leaves only `limit`.
async fn handshake_within<S>(
    handshake: impl Future<Output = std::io::Result<S>>,
    limit: Duration,
    reap: &mut watch::Receiver<()>,
) -> Handshake<S> {
    let began = tokio::time::Instant::now();
    let cut = tokio::time::sleep_until(began + limit);
    tokio::pin!(handshake, cut);
    let (mut reaped, mut reaping) = (false, true);
    loop {
        tokio::select! {
            done = &mut handshake => return match done {
                Ok(stream) => Handshake::Done(stream),
                Err(error) => Handshake::Failed(error),
            },
            () = &mut cut => return match reaped {
                true => Handshake::Reaped,
                false => Handshake::TimedOut,
            },
            changed = reap.changed(), if reaping && !reaped => match changed {
                Ok(()) if HANDSHAKE_GRACE < limit => {
                    reaped = true;
                    cut.as_mut().reset(began + HANDSHAKE_GRACE);
                }
                // Its own deadline comes first, or the server is going away.
                Ok(()) | Err(_) => reaping = false,
            },
        }
    }
}

/// How long a TLS handshake may run before a reap drops it: many round trips of a slow
/// network, so that a client in the middle of an honest handshake is not cut.
const HANDSHAKE_GRACE: Duration = Duration::from_secs(1);

/// What [`tls::accept_either`] gives: the accepted connection (or why not) and the scheme
/// of the listener it came from.
type Accepted = (std::io::Result<(TcpStream, SocketAddr)>, ClientScheme);

/// How often at most reaching `server.max_connections` is logged.
const FULL_LOG_EVERY: Duration = Duration::from_secs(60);
