//! `admission.policy = "auto"` over real sockets: the live miss-ratio estimates follow the
//! traffic, and `auto` switches to the candidate they say misses least, after leading for
//! two epochs; `/stats` and `/metrics` show the curves and the choice. Epochs are ended by
//! the test (`server::end_epoch`), `admission.auto_epoch` being far longer than the test.

use std::time::Duration;

use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, get, sample, scrape, stats};
use secondhit_proxy::config::{AdmissionPolicy, Config};
use secondhit_proxy::server::end_epoch;
use serde_json::Value;

/// Bodies of this many bytes.
const BODY: usize = 1000;

/// Small enough that the estimates sample every key (the smallest miniature holds a
/// thousand objects of this size), so that their figures follow the traffic exactly.
const MAX_SIZE: u64 = 1 << 20;

fn auto_config(c: &mut Config) {
    c.admission.policy = AdmissionPolicy::Auto;
    c.admission.auto_epoch = Duration::from_secs(24 * 3600);
    c.cache.max_size = MAX_SIZE;
    // The replays of a test's bursts, in a debug build beside other tests, can take more
    // than the default budget: no bound, so that every key stays sampled.
    c.admission.estimate_budget = Duration::from_secs(1);
}

async fn cacheable_origin() -> TestOrigin {
    TestOrigin::start(|_| Reply::ok("max-age=3600", body_bytes(BODY, 7))).await
}

/// `candidate`'s point at the configured size in `/stats`' estimate.
fn at_configured_size<'a>(estimate: &'a Value, candidate: &str) -> &'a Value {
    let curve = (estimate["curves"].as_array().expect("curves").iter())
        .find(|curve| curve["candidate"] == candidate)
        .unwrap_or_else(|| panic!("no curve for {candidate}: {estimate}"));
    (curve["points"].as_array().expect("points").iter())
        .find(|point| point["configured_size"] == true)
        .unwrap_or_else(|| panic!("no point at the configured size: {curve}"))
}

fn miss_ratio(estimate: &Value, candidate: &str) -> f64 {
    at_configured_size(estimate, candidate)["byte_miss_ratio"]
        .as_f64()
        .expect("a ratio")
}

/// `count` objects never seen before, named from `first`, each requested `times` times in
/// a row (the few-reuse traffic that `always` serves better).
async fn requests(proxy: &TestProxy, first: usize, count: usize, times: usize) {
    for i in first..first + count {
        for _ in 0..times {
            assert_eq!(get(&proxy.url(&format!("/o/{i}"))).await.status, 200);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_switches_to_always_when_the_traffic_turns_to_few_reuse() {
    let origin = cacheable_origin().await;
    let proxy = TestProxy::start(origin.addr, auto_config).await;
    one_hit_wonders_keep_second_hit(&proxy).await;
    let always = few_reuse_switches_to_always_after_two_epochs(&proxy).await;

    // The proxy now stores a first sight, and says why.
    let stored = get(&proxy.url("/o/new")).await;
    assert!(stored.cache.stored, "{:?}", stored.cache);
    assert_eq!(stored.cache.detail.as_deref(), Some("auto-always"));
    let m = scrape(&proxy).await;
    assert_eq!(sample(&m, "secondhit_auto_switches_total"), 1.0);
    assert_eq!(
        sample(&m, "secondhit_auto_choice{candidate=\"always\"}"),
        1.0
    );
    let decisions = |decision: &str, reason: &str| {
        let name = format!(
            "secondhit_admission_decisions_total{{decision=\"{decision}\",reason=\"{reason}\"}}"
        );
        sample(&m, &name)
    };
    assert!(decisions("admit", "auto-always") >= 1.0);
    assert!(decisions("reject", "auto-first-sight") >= 150.0);
    assert!(decisions("admit", "auto-seen-before") >= 100.0);
    let factor_one = "secondhit_estimate_byte_miss_ratio{candidate=\"always\",factor=\"1\"}";
    assert!(
        (sample(&m, factor_one) - always).abs() < 0.05,
        "{factor_one}"
    );
    proxy.stop().await;
}

/// Sends one-hit wonders for an epoch and checks that `auto` keeps second-hit, which
/// writes none of them, and says so on a first sight.
async fn one_hit_wonders_keep_second_hit(proxy: &TestProxy) {
    // One-hit wonders: both candidates miss everything, and `auto` keeps second-hit,
    // which writes none of them.
    requests(proxy, 0, 150, 1).await;
    end_epoch(&proxy.settings);
    let before = stats(proxy).await["admission"]["estimate"].clone();
    assert_eq!(before["chosen"], "second-hit", "{before}");
    assert_eq!(before["last_verdict"], "stay", "{before}");
    assert!(miss_ratio(&before, "second-hit") > 0.99, "{before}");
    assert!(miss_ratio(&before, "always") > 0.99, "{before}");
    let second_hit = at_configured_size(&before, "second-hit");
    let always = at_configured_size(&before, "always");
    assert!(
        always["written_bytes_per_second"].as_f64()
            > second_hit["written_bytes_per_second"].as_f64(),
        "always writes the one-hit wonders: {before}"
    );
    let first_sight = get(&proxy.url("/o/first")).await;
    assert_eq!(
        first_sight.cache.detail.as_deref(),
        Some("auto-first-sight")
    );
}

/// Sends few-reuse traffic for two epochs and checks that `always` leads after the first
/// and is switched to after the second; returns `always`'s miss ratio then.
async fn few_reuse_switches_to_always_after_two_epochs(proxy: &TestProxy) -> f64 {
    // Few reuse: each new object requested three times, soon. `always` misses one in
    // three, second-hit two: `always` leads for one epoch, then runs.
    requests(proxy, 1000, 50, 3).await;
    end_epoch(&proxy.settings);
    let leading = stats(proxy).await["admission"]["estimate"].clone();
    assert_eq!(leading["last_verdict"], "leading", "{leading}");
    assert_eq!(
        leading["chosen"], "second-hit",
        "one epoch is not enough: {leading}"
    );
    requests(proxy, 2000, 50, 3).await;
    end_epoch(&proxy.settings);
    let after = stats(proxy).await["admission"]["estimate"].clone();
    assert_eq!(after["chosen"], "always", "{after}");
    assert_eq!(after["last_verdict"], "switched", "{after}");
    assert_eq!(after["switches"], 1, "{after}");
    let (always, second_hit) = (
        miss_ratio(&after, "always"),
        miss_ratio(&after, "second-hit"),
    );
    assert!(
        second_hit - always > 0.2,
        "always {always} against second-hit {second_hit}: {after}"
    );
    always
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_estimates_and_the_choice_unless_what_they_model_changes() {
    let origin = cacheable_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        auto_config(c);
        c.admission.policy = AdmissionPolicy::SecondHit;
    })
    .await;
    // Under second-hit the estimates run too, and choose what `auto` would run.
    for epoch in 0..2 {
        requests(&proxy, epoch * 100, 50, 3).await;
        end_epoch(&proxy.settings);
    }
    let estimate = stats(&proxy).await["admission"]["estimate"].clone();
    assert_eq!(estimate["chosen"], "always", "{estimate}");
    assert_eq!(estimate["epochs"], 2, "{estimate}");
    let first_sight = get(&proxy.url("/o/under-second-hit")).await;
    assert_eq!(first_sight.cache.detail.as_deref(), Some("first-sight"));

    // To `auto`: nothing modelled changed, so the estimates carry over and `auto` runs
    // their choice from the first request.
    let running = || (*proxy.settings.load().settings).clone();
    let mut next = running();
    next.admission.policy = AdmissionPolicy::Auto;
    proxy.reloader.apply(next).await.expect("reload");
    let estimate = stats(&proxy).await["admission"]["estimate"].clone();
    assert_eq!(estimate["epochs"], 2, "kept: {estimate}");
    let stored = get(&proxy.url("/o/under-auto")).await;
    assert_eq!(stored.cache.detail.as_deref(), Some("auto-always"));

    // A filter window of another length is another model: the estimates start afresh,
    // and `auto` keeps running what it had chosen.
    let mut next = running();
    next.admission.max_age = Duration::from_secs(600);
    proxy.reloader.apply(next).await.expect("reload");
    let estimate = stats(&proxy).await["admission"]["estimate"].clone();
    assert_eq!(estimate["epochs"], 0, "rebuilt: {estimate}");
    assert_eq!(estimate["chosen"], "always", "{estimate}");
    let stored = get(&proxy.url("/o/after-rebuild")).await;
    assert_eq!(stored.cache.detail.as_deref(), Some("auto-always"));
    proxy.stop().await;
}
