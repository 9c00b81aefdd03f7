//! `admission.max_write_rate`: a burst of fills past the minute's write budget writes no
//! more than the budget, whatever the policy admits; what does not fit is served from the
//! origin with `detail=write-budget` (or, for a body without a declared length, its fill
//! is dropped as it outgrows the budget), and a reload lifts the cap.

use secondhit_proxy::config::AdmissionPolicy;
use secondhit_store::FillDrop;

use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, files_under, get};

/// 1 KiB a second: 61,440 bytes a minute.
const RATE: u64 = 1024;
const PER_MINUTE: u64 = RATE * 60;
const BODY: usize = 10 * 1024;

/// Bytes of entry files in the proxy's cache.
fn stored_bytes(proxy: &TestProxy) -> u64 {
    files_under(&proxy.cache_dir.join("objects"))
        .iter()
        .filter_map(|path| std::fs::metadata(path).ok())
        .map(|meta| meta.len())
        .sum()
}

async fn proxy_with_budget(origin: &TestOrigin) -> TestProxy {
    TestProxy::start(origin.addr, |config| {
        config.admission.policy = AdmissionPolicy::Always;
        config.admission.max_write_rate = Some(RATE);
    })
    .await
}

#[tokio::test]
async fn a_burst_past_the_write_budget_writes_only_the_minutes_budget() {
    let origin = TestOrigin::start(|head| {
        let seed = head.uri.path().len() as u8;
        Reply::ok("max-age=600", body_bytes(BODY, seed))
    })
    .await;
    let proxy = proxy_with_budget(&origin).await;
    let mut skipped = 0;
    for n in 0..12 {
        let path = format!("/burst/{n}");
        let seen = get(&proxy.url(&path)).await;
        assert_eq!(seen.status, 200);
        assert_eq!(seen.body, body_bytes(BODY, path.len() as u8), "{path}");
        if seen.cache.detail.as_deref() == Some("write-budget") {
            assert!(!seen.cache.stored, "{path}: {:?}", seen.cache);
            skipped += 1;
        }
    }
    let stats = proxy.store.stats();
    assert!(stats.committed_fills >= 1, "the budget holds a few fills");
    assert_eq!(stats.write_budget_refused, skipped);
    assert_eq!(
        stats.committed_fills + skipped,
        12,
        "each fill stored or skipped"
    );
    let written = stored_bytes(&proxy);
    assert!(
        written <= PER_MINUTE,
        "{written} bytes of entry files, past the minute's {PER_MINUTE}"
    );
}

#[tokio::test]
async fn a_body_without_a_length_is_dropped_as_it_outgrows_the_budget_and_still_served() {
    let data = body_bytes(40 * 1024, 7);
    let reply = data.clone();
    let origin =
        TestOrigin::start(move |_| Reply::chunked("max-age=600", reply.clone(), 4096)).await;
    let proxy = proxy_with_budget(&origin).await;
    for n in 0..3 {
        let seen = get(&proxy.url(&format!("/chunked/{n}"))).await;
        assert_eq!(seen.body, data, "every client gets the whole body");
    }
    crate::support::wait_until(
        || "the fills ended".to_owned(),
        || proxy.store.stats().reserved_bytes == 0,
    )
    .await;
    let stats = proxy.store.stats();
    assert_eq!(
        stats.committed_fills, 1,
        "one 40 KiB body fits a 60 KiB minute"
    );
    assert!(stats.dropped_fills.get(FillDrop::WriteBudget) >= 1);
    assert!(stored_bytes(&proxy) <= PER_MINUTE);
    let metrics = crate::support::scrape(&proxy).await;
    let refused = crate::support::sample(&metrics, "secondhit_write_budget_refused_fills_total");
    assert!(refused >= 1.0, "{refused}");
}

#[tokio::test]
async fn a_reload_that_removes_the_budget_stores_again() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=600", body_bytes(BODY, 1))).await;
    let proxy = proxy_with_budget(&origin).await;
    for n in 0..8 {
        get(&proxy.url(&format!("/before/{n}"))).await;
    }
    let spent = get(&proxy.url("/spent")).await;
    assert_eq!(spent.cache.detail.as_deref(), Some("write-budget"));
    let mut next = (*proxy.settings.load_full().settings).clone();
    next.admission.max_write_rate = None;
    proxy.reloader.apply(next).await.expect("reload");
    let after = get(&proxy.url("/after")).await;
    assert!(after.cache.stored, "{:?}", after.cache);
}
