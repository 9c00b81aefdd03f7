//! A reload applies a whole config as one view: each request reads the settings, its site
//! (and so its origin) and the admission from the snapshot it loaded when it arrived, and
//! a reload that fails to build changes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use secondhit::config::{AdmissionPolicy, Config, MaxObjectSize};

use crate::support::{Reply, TestOrigin, TestProxy, eventually, get};

/// Bodies of this size are stored under one config and too large under the other.
const BODY: usize = 2_000;

/// Starts an origin whose every answer is `BODY` bytes of `tag`.
async fn origin_of(tag: u8) -> TestOrigin {
    TestOrigin::start(move |_| Reply::ok("max-age=3600", vec![tag; BODY])).await
}

/// `base` with `origin` as its origin and `max_object_size` as its limit.
fn config(base: &Config, origin: &TestOrigin, max_object_size: u64) -> Config {
    let mut config = base.clone();
    config.origin.url = format!("http://{}", origin.addr)
        .parse()
        .expect("origin url");
    config.cache.max_object_size = MaxObjectSize::Bytes(max_object_size);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_during_requests_never_shows_a_request_a_mix_of_old_and_new() {
    let (origin_a, origin_b) = (origin_of(b'a').await, origin_of(b'b').await);
    let proxy = TestProxy::start(origin_a.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let base = Config::clone(&proxy.settings.load().settings);
    // Config A stores the origin A's bodies; config B sends to origin B and stores none.
    let config_a = config(&base, &origin_a, 1 << 20);
    let config_b = config(&base, &origin_b, BODY as u64 / 2);
    proxy
        .reloader
        .apply(config_a.clone())
        .await
        .expect("reload A");
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..4 {
        let (stop, answered, base) = (stop.clone(), answered.clone(), proxy.url(""));
        clients.spawn(async move {
            let mut seen = [0usize; 2];
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                // A new key each time: every request is a miss that A's settings store.
                let got = get(&format!("{base}/{client}/{i}")).await;
                i += 1;
                assert_eq!(got.status, 200);
                let from_a = got.body == vec![b'a'; BODY];
                let too_large = got.cache.detail.as_deref() == Some("too-large");
                assert!(
                    (from_a && got.cache.stored) || (!from_a && too_large),
                    "a request saw a mix: body from {}, {:?}",
                    if from_a { "A" } else { "B" },
                    got.cache
                );
                seen[usize::from(!from_a)] += 1;
                answered.fetch_add(1, Ordering::Relaxed);
            }
            seen
        });
    }
    for round in 0..20 {
        let next = if round % 2 == 0 { &config_b } else { &config_a };
        proxy.reloader.apply(next.clone()).await.expect("reload");
        // Some requests under each config before the next reload.
        let before = answered.load(Ordering::Relaxed);
        eventually(
            || "requests after a reload".to_owned(),
            async || (answered.load(Ordering::Relaxed) >= before + 8).then_some(()),
        )
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut seen = [0usize; 2];
    while let Some(client) = clients.join_next().await {
        let [a, b] = client.expect("client task");
        seen = [seen[0] + a, seen[1] + b];
    }
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "both configs answered: {seen:?}"
    );
}

#[tokio::test]
async fn a_rejected_reload_changes_nothing() {
    let (origin_a, origin_b) = (origin_of(b'a').await, origin_of(b'b').await);
    let proxy = TestProxy::start(origin_a.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let before = proxy.settings.load_full();
    let base = Config::clone(&before.settings);
    // Valid on its own, but its object limit is over the running cache.max_size (which
    // needs a restart): rejected after the new origin was named.
    let mut rejected = config(&base, &origin_b, 1 << 20);
    rejected.cache.max_object_size = MaxObjectSize::Bytes(base.cache.max_size + 1);
    rejected.admission.policy = AdmissionPolicy::SecondHit;
    let error = proxy.reloader.apply(rejected).await.expect_err("rejected");
    assert!(
        error.to_string().contains("cache.max_object_size"),
        "{error}"
    );
    let after = proxy.settings.load_full();
    assert!(
        Arc::ptr_eq(&before, &after),
        "the running view is the same one"
    );
    let got = get(&proxy.url("/x")).await;
    assert_eq!(got.body, vec![b'a'; BODY], "still origin A");
    assert!(got.cache.stored, "still stored at once: {:?}", got.cache);
}
