//! S3-FIFO's ghost in the store's index follows the admission policy: kept under
//! `always`, which stores first sights, and dropped (its keys forgotten) by a reload to
//! `second-hit`, whose filter already remembers the keys seen once.

use secondhit_proxy::config::{AdmissionPolicy, Config, MaxObjectSize};

use crate::support::{Reply, TestOrigin, TestProxy, get, stats};

/// Every answer's body: about a tenth of the cache below with its entry header.
const BODY: usize = 10_000;

/// `/stats`' count of keys the ghost remembers.
async fn ghost_keys(proxy: &TestProxy) -> u64 {
    let stats = stats(proxy).await;
    stats["store"]["ghost_keys"]
        .as_u64()
        .unwrap_or_else(|| panic!("no store.ghost_keys in {stats}"))
}

#[tokio::test]
async fn the_store_remembers_keys_evicted_unhit_under_always_and_forgets_them_under_second_hit() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=3600", vec![b'x'; BODY])).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_size = 120_000;
        c.cache.max_object_size = MaxObjectSize::Bytes(20_000);
    })
    .await;
    // Thirty new objects, each requested once, through a cache that holds about eight:
    // the small queue evicts them unhit.
    for i in 0..30 {
        let got = get(&proxy.url(&format!("/o/{i}"))).await;
        assert!(got.cache.stored, "/o/{i}: {:?}", got.cache);
    }
    proxy.wait_committed(30).await;
    let evictions = proxy.store.stats().evictions;
    assert!(evictions >= 20, "{evictions} evictions");
    let remembered = ghost_keys(&proxy).await;
    assert!(
        remembered > 0 && remembered <= evictions,
        "{remembered} keys remembered of {evictions} evicted"
    );

    let mut second_hit = Config::clone(&proxy.settings.load().settings);
    second_hit.admission.policy = AdmissionPolicy::SecondHit;
    proxy.reloader.apply(second_hit).await.expect("reload");
    assert_eq!(ghost_keys(&proxy).await, 0);
    // Under second-hit, evictions remember nothing.
    for round in 0..2 {
        for i in 30..60 {
            get(&proxy.url(&format!("/o/{i}"))).await;
        }
        assert_eq!(ghost_keys(&proxy).await, 0, "round {round}");
    }
}
