//! A small miss whose body arrives whole with its head is stored in one file call of
//! the store, and served from it afterwards exactly as the origin sent it; any other
//! body streams into its fill as before (two or more calls).

use secondhit_proxy::config::{AdmissionPolicy, Fsync};
use secondhit_store::FillCalls;

use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, get, sample, scrape};

/// `/small` (10 kB with Content-Length and headers of its own), `/large` (200 kB) and
/// `/chunked` (10 kB without a length), all fresh for an hour.
async fn origin() -> TestOrigin {
    TestOrigin::start(|head| match head.uri.path() {
        "/small" => Reply::ok("max-age=3600", body_bytes(10_000, 1))
            .header("content-type", "application/x-small")
            .header("etag", "\"small-1\"")
            .header("x-origin-field", "kept as sent"),
        "/large" => Reply::ok("max-age=3600", body_bytes(200_000, 2)),
        _ => Reply::chunked("max-age=3600", body_bytes(10_000, 3), 4096),
    })
    .await
}

/// The fill calls the store made since `before`: on the worker, on the blocking pool.
fn calls_since(proxy: &TestProxy, before: FillCalls) -> (u64, u64) {
    let now = proxy.store.stats().fill_calls;
    (now.worker - before.worker, now.pool - before.pool)
}

/// Fetches `path` once through `proxy` (a stored miss), and returns the fill calls its
/// fill made once committed.
async fn stored_miss(proxy: &TestProxy, path: &str) -> (u64, u64) {
    let before = proxy.store.stats().fill_calls;
    let committed = proxy.store.stats().committed_fills;
    let miss = get(&proxy.url(path)).await;
    assert!(miss.cache.stored, "{path}: {:?}", miss.cache);
    proxy.wait_committed(committed + 1).await;
    calls_since(proxy, before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_miss_that_arrives_whole_is_stored_in_one_file_call_and_served_as_sent() {
    let origin = origin().await;
    // Without fsync the call runs on the worker; with an fsync per fill, on the pool.
    for (fsync, one_call) in [(Fsync::Off, (1, 0)), (Fsync::EachFill, (0, 1))] {
        let proxy = TestProxy::start(origin.addr, |c| {
            c.admission.policy = AdmissionPolicy::Always;
            c.cache.fsync = fsync;
            c.cache.memory_size = 0;
        })
        .await;
        let path = format!("/small?fsync={fsync:?}");
        let before = proxy.store.stats().fill_calls;
        let miss = get(&proxy.url(&path)).await;
        assert!(miss.cache.stored, "{:?}", miss.cache);
        assert!(miss.body == body_bytes(10_000, 1));
        proxy.wait_committed(1).await;
        assert_eq!(calls_since(&proxy, before), one_call, "{fsync:?}");
        let hit = get(&proxy.url(&path)).await;
        assert!(hit.cache.hit, "{:?}", hit.cache);
        assert!(hit.body == miss.body, "the hit's body is the miss's");
        for field in ["content-type", "etag", "x-origin-field", "content-length"] {
            assert_eq!(hit.headers.get(field), miss.headers.get(field), "{field}");
        }
        let metrics = scrape(&proxy).await;
        let (worker, pool) = one_call;
        let on = |at| format!("secondhit_store_fill_calls_total{{on=\"{at}\"}}");
        assert_eq!(sample(&metrics, &on("worker")), worker as f64);
        assert_eq!(sample(&metrics, &on("pool")), pool as f64);
        assert!(proxy.temp_files().is_empty());
        proxy.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_or_unmeasured_body_still_streams_into_its_fill() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    for path in ["/large", "/chunked"] {
        let (worker, pool) = stored_miss(&proxy, path).await;
        assert!(worker + pool >= 2, "{path}: {worker} + {pool} calls");
        let hit = get(&proxy.url(path)).await;
        assert!(hit.cache.hit, "{path}: {:?}", hit.cache);
    }
    assert_eq!(get(&proxy.url("/large")).await.body, body_bytes(200_000, 2));
    assert_eq!(
        get(&proxy.url("/chunked")).await.body,
        body_bytes(10_000, 3)
    );
    proxy.stop().await;
}
