//! The second and later workers (`server.workers`): each a thread of its own running a
//! single-threaded runtime, accepting on its own sockets (`listeners`) and serving what
//! it accepted to the end. The first worker is the runtime `Server::run` runs on.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use super::accept::{Accepting, Shared};
use super::listeners::WorkerSockets;
use super::{StartError, runtime};
use crate::config::ServerConfig;
use crate::tee::Fills;

/// A worker not yet started: its runtime, and its sockets registered with that runtime.
pub(super) struct Worker {
    index: usize,
    runtime: Unstarted,
    sockets: Registered,
}

/// A worker's proxy and TLS listeners.
struct Registered {
    plain: TcpListener,
    tls: Option<TcpListener>,
}

impl Worker {
    /// Worker `index` (from 1) on `sockets`, built at start so that a failure stops the
    /// start with its reason.
    pub(super) fn build(
        config: &ServerConfig,
        index: usize,
        sockets: WorkerSockets,
    ) -> Result<Worker, StartError> {
        let failed = |source| StartError::Worker { index, source };
        let runtime = runtime::worker(config, index, runtime::THREAD_NAME).map_err(failed)?;
        // Registered with the worker's own runtime, whose thread then polls them.
        let _entered = runtime.enter();
        let plain = TcpListener::from_std(sockets.proxy).map_err(failed)?;
        let tls = sockets
            .tls
            .map(TcpListener::from_std)
            .transpose()
            .map_err(failed)?;
        drop(_entered);
        Ok(Worker {
            index,
            runtime: Unstarted(Some(runtime)),
            sockets: Registered { plain, tls },
        })
    }

    /// Starts the worker's thread: it accepts until `shared.stop` changes, then gives its
    /// connections and the fills in flight `grace` to finish. `None` (logged) when the
    /// thread cannot be started; its sockets are closed, and the others serve on.
    pub(super) fn spawn(
        self,
        shared: Arc<Shared>,
        fills: Fills,
        grace: Duration,
    ) -> Option<Running> {
        let (mut unstarted, sockets) = (self.runtime, self.sockets);
        let (done, finished) = oneshot::channel();
        let index = self.index;
        let thread = std::thread::Builder::new()
            .name(runtime::THREAD_NAME.to_owned())
            .spawn(move || {
                let Some(runtime) = unstarted.0.take() else {
                    return;
                };
                crate::worker::set(index);
                runtime.block_on(serve(sockets, shared, fills, grace));
                // Whatever outlived the grace period ends with the runtime, which waits
                // for its blocking threads' work (a fill's last write) to return.
                drop(runtime);
                let _ = done.send(());
            });
        match thread {
            Ok(thread) => Some(Running { finished, thread }),
            Err(error) => {
                tracing::error!(worker = index, %error, "cannot start a worker's thread; serving without it");
                None
            }
        }
    }
}

/// A worker's runtime until its thread takes it.
struct Unstarted(Option<Runtime>);

impl Drop for Unstarted {
    /// A worker that never ran (the server was dropped, or its thread did not start): its
    /// runtime is shut down without blocking, as a runtime dropped inside another one must be.
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A worker's life on its thread: accepts on `sockets` until `shared.stop` changes, then
/// drains its connections and the fills in flight within `grace`.
async fn serve(sockets: Registered, shared: Arc<Shared>, fills: Fills, grace: Duration) {
    let mut stop = shared.stop.clone();
    let mut accepting = Accepting::new(shared);
    let stopped = async move {
        // A closed channel means the server is gone: stop too.
        let _ = stop.changed().await;
    };
    tokio::pin!(stopped);
    accepting
        .accept_until(&sockets.plain, sockets.tls.as_ref(), stopped)
        .await;
    drop(sockets);
    let deadline = tokio::time::Instant::now() + grace;
    super::drain(accepting.graceful, &fills, grace, deadline).await;
}

/// A worker's running thread.
pub(super) struct Running {
    finished: oneshot::Receiver<()>,
    thread: JoinHandle<()>,
}

impl Running {
    /// Waits for the worker to finish its drain and drop its runtime.
    pub(super) async fn finished(self) {
        // An error: the thread panicked; the join below reports it.
        let _ = self.finished.await;
        if self.thread.join().is_err() {
            tracing::error!("a worker's thread panicked");
        }
    }
}
