//! The admission filters across restarts: a graceful shutdown saves them to
//! `<cache.dir>/state/`, the next start restores them, a periodic snapshot appears on its
//! own, and a corrupted snapshot is ignored. Real proxy and origin on 127.0.0.1:0.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::support::{
    PATIENCE, Reply, Seen, TestOrigin, body_bytes, client, init_logs, send, test_config,
};
use secondhit_admission::SNAPSHOT_FILE;
use secondhit_proxy::config::Config;
use secondhit_proxy::server::{Server, Stop};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A proxy that can be stopped gracefully and awaited.
struct Running {
    addr: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    done: JoinHandle<()>,
}

impl Running {
    async fn start(config: &Config) -> Running {
        init_logs();
        let server = Server::bind(config).await.expect("proxy starts");
        let addr = server.local_addr().expect("proxy address");
        let (stop, stopped) = oneshot::channel::<()>();
        let done = tokio::spawn(server.run(async move {
            let _ = stopped.await;
            Stop::Shutdown
        }));
        Running { addr, stop, done }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Graceful shutdown; returns once `Server::run` has finished (final snapshot included).
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(PATIENCE, self.done)
            .await
            .expect("shutdown within PATIENCE")
            .expect("server task");
    }
}

/// GET `path` from `proxy` with a fixed `Host`: the cache key includes the host, and each
/// proxy listens on another port.
async fn get(proxy: &Running, path: &str) -> Seen {
    send(client().get(proxy.url(path)).header("host", "site.test")).await
}

async fn cacheable_origin() -> TestOrigin {
    TestOrigin::start(|_| Reply::ok("max-age=3600", body_bytes(512, 3))).await
}

fn snapshot(cache_dir: &Path) -> std::path::PathBuf {
    cache_dir.join("state").join(SNAPSHOT_FILE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_remembers_first_requests() {
    let origin = cacheable_origin().await;
    let temp = tempfile::tempdir().unwrap();
    let config = test_config(origin.addr, &temp.path().join("cache"));

    let proxy = Running::start(&config).await;
    let first = get(&proxy, "/remembered").await;
    assert_eq!(first.cache.detail.as_deref(), Some("first-sight"));
    proxy.stop().await;
    assert!(
        snapshot(&config.cache.dir).is_file(),
        "shutdown saves the filters"
    );

    let proxy = Running::start(&config).await;
    let second = get(&proxy, "/remembered").await;
    assert!(
        second.cache.stored,
        "seen before the restart: {:?}",
        second.cache
    );
    let other = get(&proxy, "/new").await;
    assert_eq!(other.cache.detail.as_deref(), Some("first-sight"));
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_snapshot_is_ignored() {
    let origin = cacheable_origin().await;
    let temp = tempfile::tempdir().unwrap();
    let config = test_config(origin.addr, &temp.path().join("cache"));

    let proxy = Running::start(&config).await;
    get(&proxy, "/remembered").await;
    proxy.stop().await;
    let path = snapshot(&config.cache.dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();

    let proxy = Running::start(&config).await;
    let again = get(&proxy, "/remembered").await;
    assert_eq!(
        again.cache.detail.as_deref(),
        Some("first-sight"),
        "the filters start empty"
    );
    proxy.stop().await;
}

/// Waits until the file at `path` was modified after `after`; returns its modification time.
async fn modified_after(path: &Path, after: SystemTime) -> SystemTime {
    crate::support::eventually(
        || "no new periodic snapshot".into(),
        async || {
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
            (modified > after).then_some(modified)
        },
    )
    .await
}

// On the paused clock: `admission.snapshot_every` is a tokio timer, and each save runs on
// the blocking pool, which holds the paused clock still until it is done.
#[tokio::test(start_paused = true)]
async fn snapshots_are_taken_periodically() {
    let origin = cacheable_origin().await;
    let temp = tempfile::tempdir().unwrap();
    let mut config = test_config(origin.addr, &temp.path().join("cache"));
    config.admission.snapshot_every = Duration::from_millis(100);

    let proxy = Running::start(&config).await;
    get(&proxy, "/periodic").await;
    let recorded = SystemTime::now();
    // Two saves finished after the request: the second one began after it (saves take turns).
    let path = snapshot(&config.cache.dir);
    let first = modified_after(&path, recorded).await;
    modified_after(&path, first).await;

    // A crash now (no final save) would not forget the key: start a second proxy on a copy
    // of the snapshot alone.
    let mut crashed = config.clone();
    crashed.cache.dir = temp.path().join("after-crash");
    std::fs::create_dir_all(crashed.cache.dir.join("state")).unwrap();
    std::fs::copy(&path, snapshot(&crashed.cache.dir)).unwrap();
    let restarted = Running::start(&crashed).await;
    let again = get(&restarted, "/periodic").await;
    assert!(again.cache.stored, "{:?}", again.cache);
    restarted.stop().await;
    proxy.stop().await;
}

/// The filter seed is a secret (who knows it can aim URLs at chosen filter bits): the
/// file a start generates is readable by the proxy's user only, and one a start finds
/// readable by others is made so.
#[tokio::test]
async fn the_generated_filter_seed_is_readable_by_the_proxys_user_only() {
    use std::os::unix::fs::PermissionsExt;
    let origin = cacheable_origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = test_config(origin.addr, &dir.path().join("cache"));
    config.admission.seed = None;
    let seed = dir.path().join("cache/state/filter-seed");
    let mode = |path: &Path| {
        let metadata = std::fs::metadata(path).expect("the seed file");
        metadata.permissions().mode() & 0o777
    };
    let proxy = Running::start(&config).await;
    assert_eq!(mode(&seed), 0o600, "a generated seed");
    proxy.stop().await;
    std::fs::set_permissions(&seed, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let proxy = Running::start(&config).await;
    assert_eq!(mode(&seed), 0o600, "a seed found readable by others");
    proxy.stop().await;
}
