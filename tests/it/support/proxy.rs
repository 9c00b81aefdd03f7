//! The proxy under test: [`TestProxy`] on 127.0.0.1:0 with a temp cache directory,
//! built from [`test_config`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use secondhit_proxy::config::{AccessLog, Config, Fsync};
use secondhit_proxy::lifecycle::Reloader;
use secondhit_proxy::live::Live;
use secondhit_proxy::server::{Server, Stop};
use secondhit_store::Store;
use tokio::sync::oneshot;

use super::{files_under, wait_until};

/// The proxy under test, serving on 127.0.0.1:0 with its own temp cache directory.
pub(crate) struct TestProxy {
    pub addr: SocketAddr,
    /// The admin listener's address, unless the test turned it off.
    pub admin: Option<SocketAddr>,
    /// The TLS listener's address, when the test set `[server.tls]`.
    pub tls: Option<SocketAddr>,
    pub store: Arc<Store>,
    /// The running proxy's settings, to swap them while it serves.
    pub settings: Live,
    /// Applies a whole config to the running proxy, as SIGHUP does with the file.
    pub reloader: Arc<Reloader>,
    pub cache_dir: PathBuf,
    /// The temp directory holding `cache_dir`, unless the test brought its own.
    _temp: Option<tempfile::TempDir>,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

/// Sends the proxy's logs to the test output when `RUST_LOG` is set (e.g. `RUST_LOG=secondhit=debug`).
pub(crate) fn init_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_test_writer()
                .init();
        }
    });
}

/// A config for tests: listen (and the admin listener) on port 0, the given origin, a temp
/// cache dir, a fixed filter seed, and the access log off (it would write to the test
/// process's stdout).
pub(crate) fn test_config(origin: SocketAddr, cache_dir: &Path) -> Config {
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse().expect("listen address");
    config.server.admin_listen = Some("127.0.0.1:0".parse().expect("admin address"));
    // One worker: the test's own runtime serves every connection, so a test on tokio's
    // paused clock governs all of their timers. Tests of several workers ask for them.
    config.server.workers = Some(1);
    config.origin.url = format!("http://{origin}").parse().expect("origin url");
    config.origin.connect_timeout = Duration::from_secs(2);
    config.origin.read_timeout = Duration::from_secs(5);
    config.cache.dir = cache_dir.to_path_buf();
    config.cache.fsync = Fsync::Off;
    config.admission.seed = Some("secondhit tests".to_owned());
    config.log.access_log = AccessLog::Off;
    config
}

impl TestProxy {
    /// Starts the proxy in front of `origin`, after `tweak` adjusts the test config.
    pub(crate) async fn start(origin: SocketAddr, tweak: impl FnOnce(&mut Config)) -> TestProxy {
        let temp = tempfile::tempdir().expect("temp cache dir");
        let mut proxy = TestProxy::start_in(origin, &temp.path().join("cache"), tweak).await;
        proxy._temp = Some(temp);
        proxy
    }

    /// Starts the proxy on a cache directory the test owns (to restart on it).
    pub(crate) async fn start_in(
        origin: SocketAddr,
        cache_dir: &Path,
        tweak: impl FnOnce(&mut Config),
    ) -> TestProxy {
        init_logs();
        // As the binary does: `/metrics` names the build the tests were compiled as.
        secondhit_proxy::build::set(secondhit_proxy::build::BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("SECONDHIT_COMMIT"),
            features: env!("SECONDHIT_FEATURES"),
        });
        // Freshness follows tokio's clock, so a test on a paused runtime can age entries
        // with `tokio::time::advance`.
        secondhit_proxy::clock::follow_tokio_time();
        let mut config = test_config(origin, cache_dir);
        tweak(&mut config);
        let server = Server::bind(&config).await.expect("proxy starts");
        let addr = server.local_addr().expect("proxy address");
        let admin = server.admin_addr().map(|addr| addr.expect("admin address"));
        let tls = server.tls_addr().map(|addr| addr.expect("TLS address"));
        let store = server.store();
        let settings = server.live();
        let reloader = Arc::new(Reloader::new(None, server.live_parts(), None));
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(server.run(async move {
            let _ = stopped.await;
            Stop::Shutdown
        }));
        TestProxy {
            addr,
            admin,
            tls,
            store,
            settings,
            reloader,
            cache_dir: cache_dir.to_path_buf(),
            _temp: None,
            stop,
            server,
        }
    }

    /// Shuts the proxy down and waits until it has let go of its store (and so of
    /// the cache directory's lock).
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        self.server.await.expect("server task");
        let store = Arc::downgrade(&self.store);
        // The live view and the reloader hold the admission, whose policy counts the
        // store's objects.
        drop(self.reloader);
        drop(self.settings);
        drop(self.store);
        // Fill writer tasks may hold the store a moment longer.
        wait_until(
            || "the store stays open".into(),
            || store.strong_count() == 0,
        )
        .await;
    }

    /// Waits until the store's start-up scan has indexed everything it found.
    pub(crate) async fn wait_scanned(&self) {
        wait_until(
            || "the scan never finished".into(),
            || self.store.stats().scan_complete,
        )
        .await;
    }

    /// `http://127.0.0.1:port{path}`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// `http://127.0.0.1:admin-port{path}`.
    pub(crate) fn admin_url(&self, path: &str) -> String {
        let admin = self.admin.expect("the admin listener is on");
        format!("http://{admin}{path}")
    }

    /// Waits until `n` fills have been committed since start.
    pub(crate) async fn wait_committed(&self, n: u64) {
        wait_until(
            || format!("timed out waiting for {n} committed fills"),
            || self.store.stats().committed_fills >= n,
        )
        .await;
    }

    /// Entry files under objects/.
    pub(crate) fn entry_files(&self) -> Vec<PathBuf> {
        files_under(&self.cache_dir.join("objects"))
    }

    /// Files under tmp/ (fills in progress or leaked).
    pub(crate) fn temp_files(&self) -> Vec<PathBuf> {
        files_under(&self.cache_dir.join("tmp"))
    }
}
