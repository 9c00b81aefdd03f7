//! Settings swapped on a running proxy through `Server::live`: a value read per
//! request changes what the next request does, over real sockets (a scripted origin and
//! the real proxy on 127.0.0.1:0 with a temp cache directory).

use std::time::Duration;

use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, get};
use secondhit_proxy::config::{AdmissionPolicy, Config, MaxObjectSize};
use secondhit_store::FillDrop;

/// The `max_object_size` the proxy starts with; the origin's bodies are larger.
const SMALL: u64 = 100_000;
/// A `max_object_size` the origin's bodies fit in.
const LARGE: u64 = 1024 * 1024;

/// The running proxy's settings with `cache.max_object_size` set to `limit`.
fn with_max_object_size(proxy: &TestProxy, limit: u64) -> Config {
    let mut config = Config::clone(&proxy.settings.load().settings);
    config.cache.max_object_size = MaxObjectSize::Bytes(limit);
    config
}

/// Waits until `proxy` counted `n` fills dropped for growing past the size limit.
async fn wait_dropped_too_large(proxy: &TestProxy, n: u64) {
    crate::support::wait_until(
        || {
            let dropped = proxy.store.stats().dropped_fills;
            format!("no fill was dropped as too large: {dropped:?}")
        },
        || proxy.store.stats().dropped_fills.get(FillDrop::TooLarge) >= n,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_max_object_size_changes_what_the_next_request_stores() {
    // `/declared-*` with a Content-Length; `/chunked-*` without one, so only the fill
    // finds out its size (the store's limit for it comes with each fill).
    let origin = TestOrigin::start(|head| {
        if head.uri.path().starts_with("/chunked") {
            Reply::chunked("max-age=60", body_bytes(300_000, 4), 16_384)
        } else {
            Reply::ok("max-age=60", body_bytes(200_000, 3))
        }
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_object_size = MaxObjectSize::Bytes(SMALL);
    })
    .await;

    let declared = get(&proxy.url("/declared-1")).await;
    assert_eq!(declared.body, body_bytes(200_000, 3));
    assert_eq!(declared.cache.detail.as_deref(), Some("too-large"));
    let chunked = get(&proxy.url("/chunked-1")).await;
    assert_eq!(chunked.body, body_bytes(300_000, 4));
    wait_dropped_too_large(&proxy, 1).await;
    assert_eq!(proxy.store.stats().committed_fills, 0);

    let old = proxy
        .settings
        .replace_settings(with_max_object_size(&proxy, LARGE));
    assert_eq!(old.cache.max_object_size, MaxObjectSize::Bytes(SMALL));

    // The same URLs, on the next requests: both are stored now, and then hits.
    let declared = get(&proxy.url("/declared-1")).await;
    assert!(declared.cache.stored, "{:?}", declared.cache);
    let chunked = get(&proxy.url("/chunked-1")).await;
    assert!(chunked.cache.stored, "{:?}", chunked.cache);
    proxy.wait_committed(2).await;
    for (path, body) in [
        ("/declared-1", body_bytes(200_000, 3)),
        ("/chunked-1", body_bytes(300_000, 4)),
    ] {
        let hit = get(&proxy.url(path)).await;
        assert!(hit.cache.hit, "{path}: {:?}", hit.cache);
        assert_eq!(hit.body, body, "{path}");
    }
    assert_eq!(origin.count("/declared-1"), 2);
    assert_eq!(origin.count("/chunked-1"), 2);

    // And back: a lower limit applies to the next request just the same.
    proxy
        .settings
        .replace_settings(with_max_object_size(&proxy, SMALL));
    let declared = get(&proxy.url("/declared-2")).await;
    assert_eq!(declared.cache.detail.as_deref(), Some("too-large"));
    get(&proxy.url("/chunked-2")).await;
    wait_dropped_too_large(&proxy, 2).await;
    assert_eq!(proxy.store.stats().committed_fills, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_heuristic_max_age_changes_the_next_hits_ttl() {
    // Heuristic freshness only: 10% of a Last-Modified 10,000 s old is 1,000 s.
    let modified = crate::support::http_date_from_now(-10_000);
    let origin = TestOrigin::start(move |_| {
        let mut reply = Reply::ok("", b"heuristic".to_vec());
        reply.headers = vec![
            ("date", crate::support::http_date_from_now(0)),
            ("last-modified", modified.clone()),
        ];
        reply
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let ttl_of_hit = || async {
        let seen = get(&proxy.url("/h")).await;
        assert!(seen.cache.hit, "{:?}", seen.cache);
        seen.cache.ttl.expect("a hit carries its ttl")
    };
    assert!(get(&proxy.url("/h")).await.cache.stored);
    proxy.wait_committed(1).await;
    // Two hits: the freshness is judged on the first and kept with the entry.
    for _ in 0..2 {
        let ttl = ttl_of_hit().await;
        assert!((900..=1_000).contains(&ttl), "10% of 10,000 s: {ttl}");
    }
    let mut config = Config::clone(&proxy.settings.load().settings);
    config.cache.heuristic_max_age = Duration::from_secs(50);
    proxy.settings.replace_settings(config);
    let ttl = ttl_of_hit().await;
    assert!((40..=50).contains(&ttl), "capped at the new 50 s: {ttl}");
    assert_eq!(origin.count("/h"), 1);
}
