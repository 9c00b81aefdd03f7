//! Shadow mode over real sockets: every storable response is stored as under `always`,
//! while the filter pair counts the writes second-hit would have avoided and the hits it
//! would have lost.

use crate::support::{
    Reply, TestOrigin, TestProxy, body_bytes, client, get, sample, scrape, send, stats,
};
use secondhit_proxy::config::AdmissionPolicy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_stores_everything_and_counts_what_second_hit_would_change() {
    // Body sizes differ per path so that byte counts tell them apart.
    let origin = TestOrigin::start(|head| {
        let len = match head.uri.path() {
            "/x" => 1000,
            "/y" => 300,
            _ => 50,
        };
        Reply::ok("max-age=3600", body_bytes(len, 4))
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Shadow
    })
    .await;
    store_and_hit_like_always(&proxy).await;
    assert_eq!(
        origin.total(),
        4,
        "every fill was stored and hit like always"
    );

    let m = scrape(&proxy).await;
    assert_eq!(sample(&m, "secondhit_shadow_writes_avoided_total"), 2.0);
    assert_eq!(
        sample(&m, "secondhit_shadow_writes_avoided_bytes_total"),
        1300.0
    );
    assert_eq!(sample(&m, "secondhit_shadow_hits_lost_total"), 2.0);
    assert_eq!(sample(&m, "secondhit_shadow_hits_lost_bytes_total"), 1300.0);
    let decision = |reason: &str| {
        sample(
            &m,
            &format!(
                "secondhit_admission_decisions_total{{decision=\"admit\",reason=\"{reason}\"}}"
            ),
        )
    };
    assert_eq!(decision("shadow-first-sight"), 2.0);
    assert_eq!(decision("seen-before"), 1.0);
    // Nothing was actually kept off the disk.
    assert_eq!(sample(&m, "secondhit_disk_writes_avoided_bytes_total"), 0.0);
    assert_eq!(sample(&m, "secondhit_disk_write_bytes_total"), 1350.0);
    assert_eq!(sample(&m, "secondhit_requests_total{result=\"hit\"}"), 4.0);

    let s = stats(&proxy).await;
    assert_eq!(s["policy"], "shadow");
    assert_eq!(s["shadow"]["writes_avoided"], 2);
    assert_eq!(s["shadow"]["hits_lost"], 2);
    assert!(s["filters"].is_object(), "the shadow pair is reported");
    proxy.stop().await;
}

/// Requests /x (stored at first sight, then hit twice), /y (stored at first sight, hit
/// once) and /z (first with the client's no-store, then stored and hit) through `proxy`,
/// checking that each is stored and hit as under `always`.
async fn store_and_hit_like_always(proxy: &TestProxy) {
    let http = client();
    // /x: stored at first sight (second-hit would not have), then its first hit is one
    // second-hit would have lost; the second hit is one it would have had.
    let first = get(&proxy.url("/x")).await;
    assert!(first.cache.stored, "stored like always: {:?}", first.cache);
    assert_eq!(first.cache.detail, None, "no shadow detail in Cache-Status");
    proxy.wait_committed(1).await;
    assert!(get(&proxy.url("/x")).await.cache.hit);
    assert!(get(&proxy.url("/x")).await.cache.hit);
    // /y: the same, one lost hit.
    assert!(get(&proxy.url("/y")).await.cache.stored);
    proxy.wait_committed(2).await;
    assert!(get(&proxy.url("/y")).await.cache.hit);
    // /z: first requested with the client's no-store (recorded, not stored), then stored
    // as second-hit would store it: no write avoided, no hit lost.
    send(
        http.get(proxy.url("/z"))
            .header("cache-control", "no-store"),
    )
    .await;
    assert!(get(&proxy.url("/z")).await.cache.stored);
    proxy.wait_committed(3).await;
    assert!(get(&proxy.url("/z")).await.cache.hit);
}
