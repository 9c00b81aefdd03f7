//! The listeners: accept connections, speak HTTP/1.1 and HTTP/2 (cleartext, and over TLS on
//! the TLS listener, see [`tls`]), and shut down gracefully.
//!
//! [`Server::bind`] sets everything up in order — listening sockets ([`Listeners`]: bound,
//! or inherited from systemd or from the process an upgrade replaces), sites (origin
//! clients), access log, TLS certificates ([`Server::prepare`]), then cache directory,
//! filter seed, admission policy ([`Prepared::open`]) — so a bad setting fails before the
//! first connection (`serve` binds the sockets first and drops privileges before the rest,
//! [`Server::start`]; an upgrade's new process reports ready between the two halves), and
//! puts the `Config` in the live snapshot ([`Live`]) that the
//! proxy reads per request — with the sites, the admission, the access log and the TLS
//! certificates — and [`Server::live`] hands out to swap (for a reload:
//! [`Server::live_parts`]). [`Server::run`]
//! then accepts until its stop future completes, stops accepting, gives open
//! connections and then the fills in flight (which may outlive their client,
//! `tee`) `server.shutdown_timeout` in all to finish, saves the admission
//! filters and writes out the access log. When the stop is an upgrade's
//! ([`Stop::Handover`]), it hands the cache directory over first, without waiting for
//! the connections (`Store::close_for_handover`), and they are answered from the origin,
//! unstored, from then on.
//!
//! Limits: at most `server.max_connections` connections are open at once (a worker that
//! accepted a client beyond the limit holds it until a slot is free and accepts no
//! other, so excess clients queue in the kernel's backlog instead of being accepted and
//! starved; when a client arrives at the limit,
//! every connection that has no request open is closed, as nginx drains keep-alive
//! connections when it runs out, and that is logged at most once a minute), an HTTP/1
//! client has
//! `server.header_read_timeout` to send a request head, a connection with no request for
//! `server.idle_timeout` is closed (HTTP/2 with GOAWAY; see `connection`), and a head may
//! hold at most `server.max_headers` fields and `server.max_header_bytes` bytes (hyper
//! answers 431; the byte limit also bounds an HTTP/2 header list). HTTP/2 connections
//! also get at most `server.max_concurrent_streams` streams at once, and hyper's limits
//! on streams the client resets (`protocols::H2_MAX_PENDING_ACCEPT_RESETS`,
//! `protocols::H2_MAX_LOCAL_ERROR_RESETS`: the "rapid reset" attack, CVE-2023-44487, ends in
//! GOAWAY).
//!
//! `server.admin_listen` (unless `"off"`) is bound by [`Server::bind`] too, and
//! [`Server::run`] serves the admin API on it (`admin`) beside the proxy. One
//! shutdown ends both: when `run`'s shutdown future completes, a `watch` channel tells the
//! admin listener to stop accepting, and its connections get the same
//! `server.shutdown_timeout` to finish. The admin listener bounds its connections itself
//! (count and head timeout, see `admin::serve`), apart from the proxy port's
//! limits, so that a flood on either port leaves the other served.
//!
//! `[server.tls]` adds a TLS listener, bound by [`Server::bind`] with its certificates
//! read; the accept loop takes clients from both, and a TLS client's handshake runs in its
//! connection's task (holding its `max_connections` slot, within
//! `server.header_read_timeout`) before the connection is served like a plain one, on the
//! decrypted stream. Each connection knows its listener's scheme
//! (`key::ClientScheme`), which every request of it passes to the proxy.
//!
//! Every connection is read through a `head_guard`, which answers request heads with
//! ambiguous body framing (`Content-Length` with `Transfer-Encoding`) with 400 before
//! hyper would forward them, and carries a per-connection `ConnectionToken` that
//! every request of the connection gets as an extension.

mod accept;
mod connection;
mod epochs;
pub(crate) mod head_guard;
mod lean;
mod listeners;
mod open_files;
pub mod privileges;
mod protocols;
pub mod runtime;
mod send_watch;
mod side_waker;
mod start_error;
pub mod tls;
mod workers;
mod zero_copy;

pub use epochs::end_epoch;
pub use listeners::{Listeners, WorkerSockets};
pub use open_files::reserve_descriptor_table;
pub use start_error::StartError;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::access_log;
use crate::admin::{self, Admin};
use crate::admission::{self, LiveAdmission};
use crate::config::{AdmissionConfig, Config, ServerConfig};
use crate::live::{Live, Snapshot};
use crate::lost_hits::LostHits;
use crate::metrics::Metrics;
use crate::proxy::{self, Proxy};
use crate::sites::Sites;
use crate::store::{Store, StoreOptions};
use crate::tee::Fills;
use crate::tuning::Tuning;

/// How long the fills in progress at a hand-over ([`Stop::Handover`]) may take to
/// commit before they are dropped: long enough for a fill whose body has all but arrived,
/// short enough that new clients, queued for the new process meanwhile, barely notice.
pub const HANDOVER_FILL_GRACE: Duration = Duration::from_secs(2);

/// Why [`Server::run`] stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// A shutdown (SIGTERM, SIGINT): the open connections and the fills in progress get
    /// `server.shutdown_timeout` to finish, then the cache is synced, the filters saved
    /// and the process exits, releasing the cache directory.
    Shutdown,
    /// A binary upgrade's new process is ready to take over: the cache directory is
    /// handed over at once (the store closed for it, without waiting for the
    /// connections), then the open connections get
    /// `server.shutdown_timeout` to finish.
    Handover,
}

/// A bound, ready proxy server.
pub struct Server {
    listener: TcpListener,
    /// The TLS listener (`[server.tls]`), beside the plain one.
    tls: Option<tls::TlsListener>,
    /// The admin listener and what it serves; `None` with `admin_listen = "off"`.
    admin: Option<(TcpListener, Admin)>,
    proxy: Arc<Proxy>,
    store: Arc<Store>,
    /// The admission in use: `run` saves its filters periodically and at shutdown (none
    /// for `policy = "always"`), and a reload swaps it.
    admission: Arc<LiveAdmission>,
    /// The access log's writers: `run` closes them last, so their last lines are written.
    access_logs: access_log::Writers,
    /// The fills in flight: `run` waits for them after the connections, within
    /// `server.shutdown_timeout`.
    fills: Fills,
    /// What a reload can change, which the proxy loads once per request and a TLS
    /// handshake once per handshake; [`Server::live`] hands it out to swap.
    live: Live,
    /// `[server]` as it was at bind: it shapes the listener and connections `run` sets up
    /// once, so a swap of the settings does not change it.
    config: ServerConfig,
    /// The second and later workers, which `run` starts (see `runtime`).
    workers: Vec<workers::Worker>,
}

impl Server {
    /// Binds `server.listen`, `server.tls.listen` and `server.admin_listen` (or takes the
    /// sockets systemd passed, [`Listeners::open`]), then does what [`Server::start`] does.
    pub async fn bind(config: &Config) -> Result<Server, StartError> {
        let listeners = Listeners::open(&config.server)?;
        Server::start(config, listeners).await
    }

    /// Does what [`Server::prepare`] and then [`Prepared::open`] do, waiting up to
    /// `cache.lock_timeout` for the cache directory. `serve` binds the sockets first and
    /// drops privileges in between, so files are created as `server.user`.
    pub async fn start(config: &Config, listeners: Listeners) -> Result<Server, StartError> {
        let prepared = Server::prepare(config, listeners)?;
        prepared.open(config.cache.lock_timeout).await
    }

    /// Everything of a start that does not touch the cache directory: builds the sites'
    /// origin clients, opens the access log, reads the TLS certificates and registers
    /// `listeners` with the runtime. A process started by an upgrade (`upgrade`) reports
    /// ready after this, while the process it replaces still owns the cache directory.
    pub fn prepare(config: &Config, listeners: Listeners) -> Result<Prepared, StartError> {
        let metrics = Arc::new(Metrics::for_workers(listeners.workers.len() + 1));
        let sites = Arc::new(Sites::new(config, &metrics, Arc::default())?);
        let access_logs = access_log::Writers::default();
        let access_log = access_logs.open(&config.log)?;
        let certificates = match (&config.server.tls, &listeners.tls) {
            (Some(tls), Some(_)) => tls::load(tls)?,
            _ => Arc::new([]),
        };
        let (listener, admin_listener) =
            register(&config.server, listeners.proxy, listeners.admin)?;
        let workers = (listeners.workers.into_iter().enumerate())
            .map(|(i, sockets)| workers::Worker::build(&config.server, i + 1, sockets))
            .collect::<Result<_, _>>()?;
        Ok(Prepared {
            config: config.clone(),
            metrics,
            sites,
            access_logs,
            access_log,
            certificates,
            listener,
            admin_listener,
            tls_listener: listeners.tls,
            workers,
        })
    }

    /// Like [`Server::bind`], with an admission policy built by the caller instead of from
    /// `[admission]` (the bench compares policies the config cannot name). Such a policy
    /// is not snapshotted: its owner decides what it remembers.
    pub async fn bind_with_admission(
        config: &Config,
        policy: admission::Policy,
    ) -> Result<Server, StartError> {
        let listeners = Listeners::open(&config.server)?;
        let prepared = Server::prepare(config, listeners)?;
        let store = open_store(config, config.cache.lock_timeout)?;
        let seed = admission::resolve_seed(config.admission.seed.as_deref(), &store.state_dir())?;
        let assembled = admission::Assembled {
            policy: policy.admission,
            stats: policy.stats,
            hasher: admission::FilterHasher::new(seed),
            snapshots: None,
            auto: None,
        };
        // No shadow ledger: `[admission]` does not name the policy that runs.
        prepared.finish(store, assembled, None)
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The address the TLS listener actually bound (useful with port 0); `None` without
    /// `[server.tls]`.
    pub fn tls_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.tls.as_ref().map(|tls| tls.listener.local_addr())
    }

    /// The address the admin listener actually bound (useful with port 0); `None` when
    /// `server.admin_listen = "off"`.
    pub fn admin_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.admin
            .as_ref()
            .map(|(listener, _)| listener.local_addr())
    }

    /// What the admission policy in use reports: the bench reports its memory.
    pub fn admission(&self) -> Arc<dyn admission::AdmissionStats> {
        self.admission.load().stats.clone()
    }

    /// The store, for its statistics ([`Store::stats`]): the one window into a running
    /// proxy, through which the bench counts disk writes and integration tests wait for a
    /// fill to commit or the start-up scan to finish (and, dropping the last `Arc`, for
    /// the cache directory's lock to be released).
    pub fn store(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// The live view the running proxy loads once per request — settings, sites and
    /// admission ([`Live`]); [`Live::replace_settings`] swaps the settings while it serves.
    pub fn live(&self) -> Live {
        self.live.clone()
    }

    /// What a reload builds its next snapshot with, for [`crate::lifecycle::Reloader`].
    pub fn live_parts(&self) -> LiveParts {
        LiveParts {
            live: self.live.clone(),
            admission: self.admission.clone(),
            store: self.store.clone(),
            access_logs: self.access_logs.clone(),
            metrics: self.proxy.metrics(),
        }
    }

    /// Serves until `stop` completes, then drains connections (the proxy's and the
    /// admin listener's) for up to `shutdown_timeout`; for a [`Stop::Handover`] it first
    /// hands the cache directory over, without waiting for them. This runtime is the
    /// first worker; the others run on threads of their own (see `runtime`).
    pub async fn run(mut self, stop: impl Future<Output = Stop>) {
        let (stop_all, stopping) = watch::channel(());
        let admin = self.spawn_admin(stopping.clone());
        let tls = self.tls.take();
        let shared = Arc::new(accept::Shared {
            serving: Arc::new(self.connection_serving()),
            acceptor: tls.as_ref().map(|tls| tls.acceptor.clone()),
            slots: Arc::new(Semaphore::new(self.config.max_connections)),
            reap: watch::Sender::new(()),
            stop: stopping,
            metrics: self.proxy.metrics(),
            max_connections: self.config.max_connections,
            full_logged: std::sync::Mutex::new(None),
        });
        let timeout = self.config.shutdown_timeout;
        let workers: Vec<_> = std::mem::take(&mut self.workers)
            .into_iter()
            .filter_map(|worker| worker.spawn(shared.clone(), self.fills.clone(), timeout))
            .collect();
        let mut accepting = accept::Accepting::new(shared);
        let periodic = tokio::spawn(self.admission.clone().run_periodic());
        let syncs = tokio::spawn(self.store.clone().sync_periodically());
        let epochs = tokio::spawn(epochs::run(self.live.clone()));
        let tls_listener = tls.as_ref().map(|tls| &tls.listener);
        let how = accept_until(&mut accepting, &self.listener, tls_listener, stop).await;
        drop(self.listener);
        drop(tls);
        // Stops the other workers' accept loops and the admin listener, and tells every
        // connection to finish (HTTP/1 after its response in flight, HTTP/2 with GOAWAY).
        let _ = stop_all.send(());
        let deadline = tokio::time::Instant::now() + timeout;
        let background = [periodic, syncs];
        if how == Stop::Handover {
            hand_over(&self.admission, &self.store, timeout, &background).await;
        }
        tracing::info!("shutting down: no new connections; waiting for open ones");
        drain(accepting.graceful, &self.fills, timeout, deadline).await;
        for worker in workers {
            worker.finished().await;
        }
        background.iter().for_each(tokio::task::JoinHandle::abort);
        epochs.abort();
        // The fills committed since the last periodic sync reach the disk before exit
        // (after a hand-over the store synced last, and this does nothing).
        if let Err(error) = self.store.sync().await {
            tracing::warn!(%error, "cannot sync the cache's filesystem at shutdown");
        }
        if let Some(admin) = admin
            && let Err(error) = admin.await
        {
            tracing::warn!(%error, "the admin listener's task failed");
        }
        // After a hand-over the filters were saved before it: the new process owns the
        // snapshot now.
        if how == Stop::Shutdown && self.admission.save_in_background().await {
            tracing::info!("admission filters saved");
        }
        self.access_logs.close().await;
    }

    /// Spawns the admin listener's task (if one is bound), which stops accepting when
    /// `stopping` changes and gives its connections `server.shutdown_timeout` to finish.
    fn spawn_admin(
        &mut self,
        stopping: watch::Receiver<()>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        self.admin.take().map(|(listener, admin)| {
            let grace = self.config.shutdown_timeout;
            let limits = admin::Limits { grace };
            tokio::spawn(admin::serve(listener, admin, stopping, limits))
        })
    }

    /// What every connection is served with, from `[server]` as it was at bind.
    fn connection_serving(&self) -> connection::Serving {
        connection::Serving {
            proxy: self.proxy.clone(),
            builder: protocols::builder(&self.config),
            limits: head_guard::Limits {
                max_head_bytes: self.config.max_header_bytes,
                max_headers: self.config.max_headers,
            },
            header_read_timeout: self.config.header_read_timeout,
            idle_timeout: self.config.idle_timeout,
            send_timeout: self.config.send_timeout,
        }
    }
}

/// A server prepared by [`Server::prepare`]: everything but the cache directory.
pub struct Prepared {
    config: Config,
    metrics: Arc<Metrics>,
    sites: Arc<Sites>,
    access_logs: access_log::Writers,
    access_log: access_log::AccessLog,
    certificates: Arc<[crate::live::Certificate]>,
    listener: TcpListener,
    admin_listener: Option<TcpListener>,
    /// Registered in [`Prepared::finish`], where its acceptor is built.
    tls_listener: Option<std::net::TcpListener>,
    workers: Vec<workers::Worker>,
}

impl Prepared {
    /// Opens the cache directory (waiting up to `lock_timeout` for another process to
    /// release it) and builds admission (restoring its snapshot): the server is ready.
    pub async fn open(self, lock_timeout: Duration) -> Result<Server, StartError> {
        let store = open_store(&self.config, lock_timeout)?;
        // Reads the filter snapshot synchronously, like the store's open above.
        let assembled = assemble_admission(&self.config.admission, &store)?;
        let lost_hits = LostHits::for_policy(self.config.admission.policy, &store);
        self.finish(store, assembled, lost_hits)
    }

    /// Builds the proxy around an open store and `admission`, with the shadow policy's
    /// ledger when it runs.
    fn finish(
        self,
        store: Arc<Store>,
        admission: admission::Assembled,
        lost_hits: Option<Arc<LostHits>>,
    ) -> Result<Server, StartError> {
        let config = &self.config;
        let admission = Arc::new(LiveAdmission::new(admission));
        let live = Live::new(Snapshot {
            settings: Arc::new(config.clone()),
            sites: self.sites,
            admission: admission.current(),
            lost_hits,
            tuning: Arc::new(Tuning::new(config, tokio::time::Instant::now().into_std())),
            access_log: self.access_log,
            certificates: self.certificates,
        });
        let tls = match (&config.server.tls, self.tls_listener) {
            (Some(tls), Some(listener)) => Some(tls::TlsListener::start(tls, listener, &live)?),
            _ => None,
        };
        let fills = Fills::new(config.cache.max_orphan_fills);
        let parts = proxy::Parts {
            live: live.clone(),
            store: store.clone(),
            metrics: self.metrics.clone(),
            fills: fills.clone(),
        };
        let proxy = Arc::new(Proxy::new(parts));
        let admin = (self.admin_listener)
            .map(|listener| (listener, Admin::new(&proxy, &store, &admission, &live)));
        Ok(Server {
            listener: self.listener,
            tls,
            admin,
            proxy,
            store,
            admission,
            access_logs: self.access_logs,
            fills,
            live,
            config: config.server.clone(),
            workers: self.workers,
        })
    }
}

/// The proxy's and the admin listener's sockets, registered with this runtime.
fn register(
    config: &ServerConfig,
    proxy: std::net::TcpListener,
    admin: Option<std::net::TcpListener>,
) -> Result<(TcpListener, Option<TcpListener>), StartError> {
    let addr = config.listen;
    let proxy = TcpListener::from_std(proxy).map_err(|source| StartError::Bind { addr, source })?;
    let admin = match (config.admin_listen, admin) {
        (Some(addr), Some(listener)) => Some(
            TcpListener::from_std(listener)
                .map_err(|source| StartError::AdminBind { addr, source })?,
        ),
        _ => None,
    };
    Ok((proxy, admin))
}

/// Accepts on `plain` and `tls` until `stop` completes; returns why it did.
async fn accept_until(
    accepting: &mut accept::Accepting,
    plain: &TcpListener,
    tls: Option<&TcpListener>,
    stop: impl Future<Output = Stop>,
) -> Stop {
    let mut how = Stop::Shutdown;
    {
        let stopped = std::pin::pin!(async { how = stop.await });
        accepting.accept_until(plain, tls, stopped).await;
    }
    how
}

/// Hands the cache directory over to the process an upgrade started, without waiting
/// for the open connections: stops the periodic filter snapshots and syncs
/// (`background`), saves the filters, then closes the store for the hand-over, which
/// gives the fills in progress [`HANDOVER_FILL_GRACE`] (at most `shutdown_timeout`) to
/// commit, syncs and releases the directory's lock. The connections go on, answered
/// from the origin, unstored.
async fn hand_over(
    admission: &Arc<LiveAdmission>,
    store: &Store,
    shutdown_timeout: Duration,
    background: &[tokio::task::JoinHandle<()>],
) {
    background.iter().for_each(tokio::task::JoinHandle::abort);
    if admission.save_in_background().await {
        tracing::info!("admission filters saved");
    }
    let grace = HANDOVER_FILL_GRACE.min(shutdown_timeout);
    if let Err(error) = store.close_for_handover(grace).await {
        tracing::warn!(%error, "cannot sync the cache's filesystem at the hand-over");
    }
}

/// Waits for the open connections (shut down gracefully through `graceful`) and then for
/// the fills they leave running, with one `deadline` for both, `timeout` after the server
/// stopped accepting.
async fn drain(
    graceful: GracefulShutdown,
    fills: &Fills,
    timeout: Duration,
    deadline: tokio::time::Instant,
) {
    if tokio::time::timeout_at(deadline, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?timeout,
            "connections still open at shutdown_timeout; closing them"
        );
    }
    // A fill may run on after its client has the whole body (the disk is behind) or
    // left (an orphan): let it commit rather than throw the download away.
    if tokio::time::timeout_at(deadline, fills.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            ?timeout,
            "fills still running at shutdown_timeout; dropping them"
        );
    }
}

/// The parts of a running server that a reload (`lifecycle::Reloader`) swaps, from
/// [`Server::live_parts`].
pub struct LiveParts {
    /// Everything a reload can change, which the proxy loads per request; swapped whole.
    pub live: Live,
    /// The admission in use, which saves its filters' snapshots.
    pub admission: Arc<LiveAdmission>,
    /// The store, whose state directory and object count a new admission is built over.
    pub store: Arc<Store>,
    /// The access log's writers, which a new destination's writer joins.
    pub access_logs: access_log::Writers,
    /// The counters, which a new origin client feeds too.
    pub metrics: Arc<Metrics>,
}

/// The admission `[admission]` names, over `store`'s state directory (seed, snapshot) and,
/// for `rotate = "auto"`, its object count: at bind, and on a reload that changes it.
pub(crate) fn assemble_admission(
    config: &AdmissionConfig,
    store: &Arc<Store>,
) -> Result<admission::Assembled, admission::AdmissionError> {
    let objects: admission::ObjectCount = {
        let store = store.clone();
        Arc::new(move || store.objects_when_full())
    };
    admission::assemble(config, &store.state_dir(), objects)
}

/// Opens the cache directory named by `[cache]`, waiting up to `lock_timeout` for its lock.
fn open_store(config: &Config, lock_timeout: Duration) -> Result<Arc<Store>, StartError> {
    let options = StoreOptions {
        dir: config.cache.dir.clone(),
        fsync: config.cache.fsync,
        max_size: config.cache.max_size,
        lock_timeout,
        verify_whole_below: config.cache.verify_whole_below,
        memory_size: config.cache.memory_size,
        memory_max_object_size: config.cache.memory_max_object_size,
        open_files: open_files::budget(
            config.cache.open_files,
            open_files::mapped_bodies(
                config.cache.memory_size,
                config.cache.memory_max_object_size,
            ),
        ),
        min_free: config.cache.min_free,
        tag_memory: config.tags.max_memory,
        max_write_rate: config.admission.max_write_rate.unwrap_or(0),
    };
    // Opening may wait up to `cache.lock_timeout` for the directory lock; nothing is
    // served yet, so blocking this thread delays only the start. The index is built
    // in the background while requests are served.
    let store = Arc::new(Store::open(options)?);
    store.keep_ghost(config.admission.policy.stores_first_sights());
    Ok(store)
}
