//! Fills that began (`Cache-Status: stored`) but never became entries are counted by
//! reason in `StoreStats::dropped_fills`; a fill that completes is not. Real sockets: a
//! scripted origin and the real proxy on 127.0.0.1:0 with a temp cache directory.

use std::time::Duration;

use crate::support::{self, Reply, ReplyBody, TestOrigin, TestProxy, body_bytes, client, get};
use secondhit_proxy::config::{AdmissionPolicy, MaxObjectSize};
use secondhit_store::FillDrop;

/// An origin that answers `/cut` with a declared length it cuts short (a reset),
/// `/stall` with a declared length it never finishes, and anything else whole.
async fn origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let body = match head.uri.path() {
            "/cut" => ReplyBody::CutAfter {
                declared: 100_000,
                sent: body_bytes(30_000, 1),
            },
            "/small-cut" => ReplyBody::CutAfter {
                declared: 5_000,
                sent: body_bytes(2_000, 4),
            },
            "/stall" => ReplyBody::Stall {
                declared: 100_000,
                sent: body_bytes(10_000, 2),
            },
            _ => ReplyBody::Full(body_bytes(50_000, 3)),
        };
        Reply {
            body,
            ..Reply::ok("max-age=3600", Vec::new())
        }
    })
    .await
}

/// A proxy that stores every storable response on its first request.
async fn proxy(origin: &TestOrigin) -> TestProxy {
    TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await
}

/// GETs `path` through `proxy` and returns the response once its head says the fill began.
async fn begin_fill(proxy: &TestProxy, path: &str) -> reqwest::Response {
    let response = client()
        .get(proxy.url(path))
        .send()
        .await
        .expect("response head arrives");
    let status = support::ParsedCacheStatus::from_headers(response.headers());
    assert!(status.stored, "the fill began: {status:?}");
    response
}

/// Waits until `proxy` counted a dropped fill, then asserts it is the only one, dropped
/// for `reason`, and that nothing was committed.
async fn assert_one_drop(proxy: &TestProxy, reason: FillDrop) {
    crate::support::wait_until(
        || "no dropped fill was counted".into(),
        || proxy.store.stats().dropped_fills.total() > 0,
    )
    .await;
    let dropped = proxy.store.stats().dropped_fills;
    assert_eq!(dropped.get(reason), 1, "{dropped:?}");
    assert_eq!(dropped.total(), 1, "{dropped:?}");
    assert_eq!(proxy.store.stats().committed_fills, 0);
}

/// A small body is stored in one call only when all of its declared length came with the
/// head: one cut short streams into its fill, which is dropped, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_body_shorter_than_its_content_length_is_not_stored() {
    let origin = origin().await;
    let proxy = proxy(&origin).await;
    let response = begin_fill(&proxy, "/small-cut").await;
    assert!(
        response.bytes().await.is_err(),
        "the client sees the body cut"
    );
    assert_one_drop(&proxy, FillDrop::OriginError).await;
    assert!(proxy.entry_files().is_empty());
    crate::support::wait_until(
        || format!("temp files left: {:?}", proxy.temp_files()),
        || proxy.temp_files().is_empty(),
    )
    .await;
    // Asked again, it is a miss: the head alone says so (the origin cuts it again).
    let again = client().get(proxy.url("/small-cut")).send().await;
    let again = support::ParsedCacheStatus::from_headers(again.expect("a head").headers());
    assert!(!again.hit, "{again:?}");
    assert_eq!(origin.count("/small-cut"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_origin_cuts_short_counts_as_an_origin_error() {
    let origin = origin().await;
    let proxy = proxy(&origin).await;
    let response = begin_fill(&proxy, "/cut").await;
    assert!(
        response.bytes().await.is_err(),
        "the client sees the body cut"
    );
    assert_one_drop(&proxy, FillDrop::OriginError).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_body_with_no_room_for_orphans_counts_as_client_gone() {
    let origin = origin().await;
    // No fill may outlive its client (with room for one, this fill would run on until
    // the origin's read timeout).
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_orphan_fills = 0;
    })
    .await;
    let mut response = begin_fill(&proxy, "/stall").await;
    let first = response.chunk().await.expect("first bytes arrive");
    assert!(first.is_some_and(|bytes| !bytes.is_empty()));
    // The origin sends nothing more; the client gives up and closes its connection.
    drop(response);
    assert_one_drop(&proxy, FillDrop::ClientGone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_fill_is_not_counted_as_dropped() {
    let origin = origin().await;
    let proxy = proxy(&origin).await;
    let miss = get(&proxy.url("/whole")).await;
    assert!(miss.cache.stored, "{:?}", miss.cache);
    proxy.wait_committed(1).await;
    let hit = get(&proxy.url("/whole")).await;
    assert!(hit.cache.hit, "{:?}", hit.cache);
    assert_eq!(hit.body, miss.body);
    let dropped = proxy.store.stats().dropped_fills;
    assert_eq!(dropped.total(), 0, "{dropped:?}");
    assert!(dropped.iter().all(|(_, count)| count == 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_silent_past_read_timeout_mid_body_ends_the_transfer_and_the_fill() {
    let origin = origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.origin.read_timeout = Duration::from_millis(300);
    })
    .await;
    // The client waits for the rest for as long as the test's patience: only the
    // proxy's read timeout between the origin's bytes can end the body first.
    let response = begin_fill(&proxy, "/stall").await;
    assert!(
        response.bytes().await.is_err(),
        "the client sees the body cut"
    );
    assert_one_drop(&proxy, FillDrop::OriginError).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_larger_than_the_whole_cache_is_too_large_not_a_store_error() {
    let origin = origin().await;
    // A config file with such a pair is refused; the same answer comes for an object
    // within max_object_size whose head makes it outgrow max_size.
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_size = 20_000;
        c.cache.max_object_size = MaxObjectSize::Bytes(1_000_000);
    })
    .await;
    for _ in 0..2 {
        let seen = get(&proxy.url("/whole")).await;
        assert_eq!(seen.status, 200);
        assert_eq!(seen.body, body_bytes(50_000, 3), "the client gets it whole");
        assert!(!seen.cache.stored, "{:?}", seen.cache);
        assert_eq!(seen.cache.detail.as_deref(), Some("too-large"));
    }
    assert_eq!(
        origin.count("/whole"),
        2,
        "never stored, so fetched each time"
    );
    let stats = proxy.store.stats();
    assert_eq!(stats.committed_fills, 0);
    assert_eq!(stats.dropped_fills.total(), 0, "no fill began");
}
