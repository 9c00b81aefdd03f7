//! Fills that outlive their client: a client that leaves, or had all of the range it
//! asked for, does not take the fill with it (up to `cache.max_orphan_fills`), and a
//! graceful shutdown waits for fills in flight. Real sockets: a scripted origin, the real
//! proxy on 127.0.0.1:0 (and the real binary for SIGTERM), temp cache directories.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use crate::support::serve::ServeProcess;
use crate::support::{
    Meter, ParsedCacheStatus, Reply, TestOrigin, TestProxy, body_bytes, client, get, send,
};
use secondhit_proxy::config::{AdmissionPolicy, MaxObjectSize};

/// A large body: big enough that the client leaves long before it is all through.
const LARGE: usize = 20 * 1024 * 1024;

/// A body whose commit takes a while after the client has it (fsync on), but that fits
/// the tee's buffer (`tee::FILL_BUFFER_BYTES`, 16 MiB): a client on the loopback can read
/// faster than the disk writes, and a larger body would then be dropped as disk-behind
/// (by design: the client is never slowed for the disk) before the stop this test is about.
const BUFFERED: usize = 12 * 1024 * 1024;

/// GETs `url`, checks that its fill began, reads the first bytes of the body and goes
/// away (closing the connection).
async fn read_first_chunk_and_leave(url: &str) {
    let mut response = client().get(url).send().await.expect("response head");
    assert!(ParsedCacheStatus::from_headers(response.headers()).stored);
    let first = response.chunk().await.expect("first bytes");
    assert!(first.is_some_and(|bytes| !bytes.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_one_chunk_and_leaves_still_leaves_a_stored_object() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=3600", body_bytes(LARGE, 1))).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    read_first_chunk_and_leave(&proxy.url("/big")).await;
    proxy.wait_committed(1).await;
    let hit = get(&proxy.url("/big")).await;
    assert!(hit.cache.hit, "{:?}", hit.cache);
    assert!(
        hit.body == body_bytes(LARGE, 1),
        "the whole object was stored"
    );
    assert_eq!(origin.count("/big"), 1);
    assert_eq!(proxy.store.stats().dropped_fills.total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_byte_poll_of_a_slow_large_object_makes_one_origin_fetch() {
    // About a second to send: the polls below arrive while it is being fetched.
    let body = body_bytes(2 * 1024 * 1024, 2);
    let served = body.clone();
    let origin = TestOrigin::start(move |_| {
        let pause = Duration::from_millis(50);
        Reply::slow("max-age=3600", served.clone(), 100 * 1024, pause)
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let mut polls = Vec::new();
    for _ in 0..20 {
        let request = client()
            .get(proxy.url("/poll"))
            .header("range", "bytes=0-0");
        polls.push(tokio::spawn(send(request)));
        // Wall clock: the polls are spread over the real origin's slow body, on real sockets.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for poll in polls {
        let seen = poll.await.expect("poll task");
        assert_eq!(seen.status, 206, "{:?}", seen.cache);
        assert_eq!(seen.body, &body[..1]);
    }
    assert_eq!(origin.count("/poll"), 1, "one fetch of the whole object");
    proxy.wait_committed(1).await;
    let hit = get(&proxy.url("/poll")).await;
    assert!(hit.cache.hit, "{:?}", hit.cache);
    assert!(hit.body == body);
}

/// Writes a config for `secondhit serve` in `dir` in front of `origin`, with its cache in
/// `dir/cache` (fsync on: a large commit takes a while after the client has it all).
fn serve_config(dir: &std::path::Path, origin: &TestOrigin) -> std::path::PathBuf {
    let config = dir.join("secondhit.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\nshutdown_timeout = \"10s\"\n\
             [origin]\nurl = \"http://{}\"\n\
             [cache]\ndir = \"{}\"\nfsync = true\n\
             [admission]\npolicy = \"always\"\nseed = \"orphan test\"\n\
             [log]\nformat = \"json\"\naccess_log = \"off\"\n",
            origin.addr,
            dir.join("cache").display()
        ),
    )
    .expect("write config");
    config
}

/// Restarts a proxy on `dir/cache` and asserts that `path`, asked for with the `Host` the
/// stopped process was asked with (the key names it), is a hit holding `body`.
async fn assert_hit_after_restart(
    dir: &std::path::Path,
    origin: &TestOrigin,
    host: &str,
    path: &str,
    body: &[u8],
) {
    let proxy = TestProxy::start_in(origin.addr, &dir.join("cache"), |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    proxy.wait_scanned().await;
    let after = send(client().get(proxy.url(path)).header("host", host)).await;
    assert!(
        after.cache.hit,
        "stored before the process exited: {:?}",
        after.cache
    );
    assert!(after.body == body);
    assert_eq!(origin.count(path), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_after_the_client_has_the_body_keeps_the_fill() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=3600", body_bytes(BUFFERED, 3))).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = ServeProcess::start(&serve_config(dir.path(), &origin)).await;
    let host = serve.addr.clone();
    let miss = get(&format!("http://{host}/whole")).await;
    assert!(miss.cache.stored, "{:?}", miss.cache);
    assert_eq!(miss.body.len(), BUFFERED);
    let status = serve.terminate().await;
    assert!(status.success(), "graceful shutdown exits 0: {status:?}");
    let body = body_bytes(BUFFERED, 3);
    assert_hit_after_restart(dir.path(), &origin, &host, "/whole", &body).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_fill_whose_client_left_waits_for_it() {
    // About a second to send, so the fill is surely still running at SIGTERM.
    let body = body_bytes(1024 * 1024, 4);
    let served = body.clone();
    let origin = TestOrigin::start(move |_| {
        let pause = Duration::from_millis(60);
        Reply::slow("max-age=3600", served.clone(), 64 * 1024, pause)
    })
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = ServeProcess::start(&serve_config(dir.path(), &origin)).await;
    let host = serve.addr.clone();
    read_first_chunk_and_leave(&format!("http://{host}/slow")).await;
    let status = serve.terminate().await;
    assert!(status.success(), "graceful shutdown exits 0: {status:?}");
    assert_hit_after_restart(dir.path(), &origin, &host, "/slow", &body).await;
}

/// A body far larger than what the sockets between origin and proxy buffer.
const HUGE: usize = 64 * 1024 * 1024;

/// Starts an origin serving `/huge`, a `HUGE` body with an `ETag`, metered.
async fn metered_origin() -> (TestOrigin, Arc<Meter>) {
    let meter = Arc::new(Meter::default());
    let body = Bytes::from(body_bytes(HUGE, 7));
    let metered = Arc::clone(&meter);
    let origin = TestOrigin::start(move |_| {
        Reply::metered(
            "max-age=3600",
            body.to_vec(),
            64 * 1024,
            Arc::clone(&metered),
        )
        .header("etag", "\"huge\"")
    })
    .await;
    (origin, meter)
}

/// GETs `/huge` with `If-None-Match: *`, expecting the proxy's own 304.
async fn not_modified(proxy: &TestProxy) -> crate::support::Seen {
    let request = client()
        .get(proxy.url("/huge"))
        .header("if-none-match", "*");
    let seen = send(request).await;
    assert_eq!(seen.status, 304, "{:?}", seen.cache);
    seen
}

/// Waits until the origin is done with its body, and asserts it was cut off: the proxy
/// read no more than its sockets took before it let go.
async fn assert_body_cut_off(meter: &Meter) {
    crate::support::wait_until(
        || "the origin's body was never let go".into(),
        || meter.ended.load(Ordering::SeqCst),
    )
    .await;
    let sent = meter.sent.load(Ordering::SeqCst);
    assert!(sent < HUGE, "the origin sent all {sent} bytes for a 304");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_for_an_object_too_large_to_store_does_not_read_the_body_on() {
    let (origin, meter) = metered_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_object_size = MaxObjectSize::Bytes(1024 * 1024);
    })
    .await;
    let seen = not_modified(&proxy).await;
    assert_eq!(seen.cache.detail.as_deref(), Some("too-large"));
    assert_body_cut_off(&meter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_whose_fill_finds_no_orphan_room_drops_the_fill_and_the_body() {
    let (origin, meter) = metered_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_orphan_fills = 0;
    })
    .await;
    let seen = not_modified(&proxy).await;
    assert!(seen.cache.stored, "{:?}", seen.cache);
    assert_body_cut_off(&meter).await;
    crate::support::wait_until(
        || "the fill was never dropped".into(),
        || proxy.store.stats().dropped_fills.total() == 1,
    )
    .await;
    assert!(proxy.entry_files().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_whose_fill_finds_orphan_room_stores_the_object() {
    let (origin, meter) = metered_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let seen = not_modified(&proxy).await;
    assert!(seen.cache.stored, "{:?}", seen.cache);
    proxy.wait_committed(1).await;
    assert_eq!(meter.sent.load(Ordering::SeqCst), HUGE);
    let hit = get(&proxy.url("/huge")).await;
    assert!(hit.cache.hit, "{:?}", hit.cache);
    assert!(hit.body == body_bytes(HUGE, 7));
}
