//! A small miss whose body arrives whole with its head is stored in one file call; the
//! client that asked for it may leave while that call waits on the blocking pool. The
//! fill then runs to its end without the client, as a streamed one does: its file is
//! renamed and indexed, and the requests collapsed onto it are answered from it.
//!
//! Real sockets (a scripted origin, the real proxy on 127.0.0.1:0, raw clients that
//! leave) on a runtime with one blocking thread that the test keeps busy: the fill's
//! file call then waits its turn, as it does when every `server.blocking_threads` thread
//! is at work on other fills, and the client leaves while it waits.

use std::sync::mpsc;

use secondhit_proxy::config::{AdmissionPolicy, Fsync};

use crate::proxy_hygiene::common::{Conn, Raw, exchange};
use crate::support::{
    Reply, TestOrigin, TestProxy, body_bytes, files_under, sample, scrape, wait_until,
};

/// The small object: fresh for an hour, whole with its head.
const SMALL: &[u8] = b"GET /small HTTP/1.1\r\nhost: test\r\n\r\n";

/// A request the origin answers `no-store`: nothing of it is stored, so it needs no
/// blocking thread.
const PROBE: &[u8] = b"GET /probe HTTP/1.1\r\nhost: test\r\n\r\n";

/// Requests collapsed onto the fill.
const FOLLOWERS: usize = 3;

/// The body of `/small`.
fn small_body() -> Vec<u8> {
    body_bytes(3_000, 21)
}

/// A current-thread runtime (the proxy's one worker, as in every test) whose blocking
/// pool has one thread.
fn one_blocking_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .expect("test runtime")
}

/// The one thread of the blocking pool, at work until this is dropped: file calls sent
/// to the pool meanwhile wait their turn.
struct BusyPool(#[expect(dead_code, reason = "held to keep the thread at work")] mpsc::Sender<()>);

impl BusyPool {
    /// Sets the pool's thread to work; returns once it is.
    async fn hold() -> BusyPool {
        let (release, released) = mpsc::channel::<()>();
        let (busy, working) = tokio::sync::oneshot::channel();
        tokio::task::spawn_blocking(move || {
            let _ = busy.send(());
            // Returns when the sender is dropped.
            let _ = released.recv();
        });
        working.await.expect("the pool's thread starts");
        BusyPool(release)
    }
}

/// An origin serving `/small`, `/varies` (the same body, varying on
/// `Accept-Language`) and `/probe`, and a proxy under `policy` with an fsync per fill (so
/// each fill's file call goes to the blocking pool).
async fn setup(policy: AdmissionPolicy) -> (TestOrigin, TestProxy) {
    let origin = TestOrigin::start(|head| match head.uri.path() {
        "/probe" => Reply::ok("no-store", b"probe".to_vec()),
        "/varies" => Reply::ok("max-age=3600", small_body()).header("vary", "accept-language"),
        _ => Reply::ok("max-age=3600", small_body()),
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = policy;
        c.cache.fsync = Fsync::EachFill;
    })
    .await;
    (origin, proxy)
}

/// Sends `request` on a new connection, without reading the answer yet.
async fn ask(proxy: &TestProxy, request: &[u8]) -> Conn {
    let mut conn = Conn::open(proxy).await;
    conn.write(request).await;
    conn
}

/// Asks for `request` with the blocking pool busy; returns the pool, still busy, and the
/// client, once the first file call of its fill waits for the pool.
async fn fill_waiting(proxy: &TestProxy, request: &[u8]) -> (BusyPool, Conn) {
    let pool = BusyPool::hold().await;
    let client = ask(proxy, request).await;
    wait_until(
        || "the fill's file call never reached the pool".into(),
        || proxy.store.stats().fill_calls.pool == 1,
    )
    .await;
    (pool, client)
}

/// `client` goes away; returns once the proxy has let it go.
async fn leave(mut client: Conn) {
    client.leave().await;
    assert!(client.closed().await, "the proxy let the client go");
}

/// Asks for `request`, leaves while the first file call of its fill waits for the
/// pool, then lets the pool work; returns once that call's file is in place and the
/// store has counted one fill committed.
async fn left_while_the_fill_waited(proxy: &TestProxy, request: &[u8]) {
    let (pool, client) = fill_waiting(proxy, request).await;
    leave(client).await;
    drop(pool);
    wait_until(
        || "the fill's file never reached its place".into(),
        || !files_under(&proxy.store.objects_dir()).is_empty(),
    )
    .await;
    proxy.wait_committed(1).await;
}

/// Asserts that `raw` is `/small`, whole, answered from the one fill.
fn from_the_fill(raw: &Raw) {
    assert_eq!(raw.status, 200);
    assert!(raw.body == small_body(), "the whole body");
    let status = raw.list("cache-status");
    assert!(status.contains("collapsed"), "{status}");
}

/// Asserts that `raw` was answered from the store.
fn assert_hit(raw: &Raw) {
    assert_eq!(raw.status, 200);
    assert!(raw.body == small_body(), "the whole body");
    let status = raw.list("cache-status");
    assert!(status.contains("; hit"), "{status}");
}

#[test]
fn a_fill_stored_in_one_call_outlives_its_client_and_answers_the_requests_waiting_for_it() {
    one_blocking_thread().block_on(async {
        let (origin, proxy) = setup(AdmissionPolicy::Always).await;
        let (pool, leader) = fill_waiting(&proxy, SMALL).await;
        let mut followers = Vec::new();
        for _ in 0..FOLLOWERS {
            followers.push(ask(&proxy, SMALL).await);
        }
        leave(leader).await;
        // Accepted after the followers, on the same listener: once it is answered, they
        // have all been read and are waiting for the fill.
        assert_eq!(exchange(&proxy, PROBE).await.status, 200);
        assert_eq!(origin.count("/small"), 1, "the waiting requests still wait");
        drop(pool);
        for mut follower in followers {
            from_the_fill(&follower.response().await);
        }
        assert_eq!(origin.count("/small"), 1, "one origin request in all");
        proxy.wait_committed(1).await;
        assert_hit(&exchange(&proxy, SMALL).await);
        assert_eq!(proxy.store.stats().dropped_fills.total(), 0);
        assert!(proxy.temp_files().is_empty());
        proxy.stop().await;
    });
}

#[test]
fn a_vary_marker_whose_client_left_while_it_was_written_is_indexed_with_its_file() {
    one_blocking_thread().block_on(async {
        let (origin, proxy) = setup(AdmissionPolicy::Always).await;
        let request = b"GET /varies HTTP/1.1\r\nhost: test\r\n\r\n";
        // The first file call of a varying response's fill is its URL's marker.
        left_while_the_fill_waited(&proxy, request).await;
        let stats = proxy.store.stats();
        let files = files_under(&proxy.store.objects_dir());
        assert_eq!(
            files.len() as u64,
            stats.objects,
            "every file indexed: {files:?}"
        );
        // The marker is in use: the next request finds the URL's variants, not its own.
        let next = exchange(&proxy, request).await.list("cache-status");
        assert!(
            next.contains("fwd=vary-miss") && next.contains("stored"),
            "{next}"
        );
        proxy.wait_committed(2).await;
        assert_hit(&exchange(&proxy, request).await);
        assert_eq!(origin.count("/varies"), 2);
        assert!(proxy.temp_files().is_empty());
        proxy.stop().await;
    });
}

#[test]
fn a_shadowed_fill_whose_client_left_during_its_one_call_counts_as_a_write_avoided() {
    one_blocking_thread().block_on(async {
        let (_origin, proxy) = setup(AdmissionPolicy::Shadow).await;
        left_while_the_fill_waited(&proxy, SMALL).await;
        assert_hit(&exchange(&proxy, SMALL).await);
        let m = scrape(&proxy).await;
        let len = small_body().len() as f64;
        assert_eq!(sample(&m, "secondhit_shadow_writes_avoided_total"), 1.0);
        assert_eq!(
            sample(&m, "secondhit_shadow_writes_avoided_bytes_total"),
            len
        );
        // Its first hit is one second-hit would have lost.
        assert_eq!(sample(&m, "secondhit_shadow_hits_lost_total"), 1.0);
        assert_eq!(sample(&m, "secondhit_disk_write_bytes_total"), len);
        proxy.stop().await;
    });
}
