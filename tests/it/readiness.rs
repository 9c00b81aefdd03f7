//! Liveness apart from readiness, over real sockets: `/livez` answers while the process
//! runs, whatever its disk or origins; `/readyz` (and `/healthz`, its alias) stays ready
//! while the node can serve hits and stale copies with its origins down or its disk
//! short of room, naming what is degraded, and answers 503 only when the store cannot be
//! used at all.

use std::time::Duration;

use secondhit_proxy::config::HealthCheck;

use crate::support::{
    Reply, Seen, TestOrigin, TestProxy, client, eventually, get, send, send_until_hit,
};

/// The status and the JSON body of the admin endpoint `path`.
async fn check(proxy: &TestProxy, path: &str) -> (u16, serde_json::Value) {
    let seen: Seen = get(&proxy.admin_url(path)).await;
    let body = serde_json::from_slice(&seen.body)
        .unwrap_or_else(|e| panic!("{path} answers JSON ({e}): {:?}", seen.body));
    (seen.status, body)
}

/// The names under `field` of a readiness body (`degraded` or `failing`).
fn names(body: &serde_json::Value, field: &str) -> Vec<String> {
    (body[field]
        .as_array()
        .unwrap_or_else(|| panic!("{field} in {body}"))
        .iter())
    .map(|name| name.as_str().expect("a name").to_owned())
    .collect()
}

/// Asserts `/livez` answers 200 with `"status": "live"`.
async fn assert_live(proxy: &TestProxy) {
    let (status, body) = check(proxy, "/livez").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("live")),
        "{body}"
    );
}

/// Once the start-up scan is done, asserts `/readyz` answers 200 with `"status": "ok"`.
async fn assert_ready_ok(proxy: &TestProxy) {
    proxy.wait_scanned().await;
    let (status, body) = check(proxy, "/readyz").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("ok")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_stays_ready_naming_the_origins_down_while_hits_are_served() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=600", b"kept".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |config| {
        config.origin.health_check = Some(HealthCheck {
            path: "/probe".to_owned(),
            interval: Duration::from_millis(50),
            expect: 200,
            timeout: Duration::from_secs(2),
        });
    })
    .await;
    assert_ready_ok(&proxy).await;
    let hit = || client().get(proxy.url("/kept"));
    send_until_hit(hit).await;

    origin.go_down().await;
    let body = eventually(
        || "the origin was never probed down".into(),
        async || {
            let (status, body) = check(&proxy, "/readyz").await;
            assert_eq!(status, 200, "ready with the origin down: {body}");
            names(&body, "degraded")
                .contains(&"origins-down".to_owned())
                .then_some(body)
        },
    )
    .await;
    assert_eq!(body["status"].as_str(), Some("degraded"), "{body}");
    assert!(names(&body, "failing").is_empty(), "{body}");
    assert!(
        body["problems"].to_string().contains("site default"),
        "the site is named: {body}"
    );
    let served = send(hit()).await;
    assert_eq!(
        (served.status, served.cache.hit),
        (200, true),
        "a hit all the same"
    );
    let (status, alias) = check(&proxy, "/healthz").await;
    assert_eq!(
        (status, &alias["status"]),
        (200, &body["status"]),
        "{alias}"
    );
    assert_live(&proxy).await;
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_503_when_the_store_is_unusable_while_livez_answers_200() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=600", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    assert_ready_ok(&proxy).await;

    // A file where the state directory was: no write there can succeed, even as root.
    let state = proxy.cache_dir.join("state");
    let moved = proxy.cache_dir.join("state-moved");
    std::fs::rename(&state, &moved).expect("move the state directory");
    std::fs::write(&state, b"not a directory").expect("a file in its place");
    let (status, body) = check(&proxy, "/readyz").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (503, Some("fail")),
        "{body}"
    );
    assert_eq!(names(&body, "failing"), ["store-unusable"], "{body}");
    assert_eq!(check(&proxy, "/healthz").await.0, 503, "the alias agrees");
    assert_live(&proxy).await;
    std::fs::remove_file(&state).expect("remove the file");
    std::fs::rename(&moved, &state).expect("put the state directory back");
    assert_eq!(check(&proxy, "/readyz").await.0, 200, "ready again");

    // The whole cache directory gone: the store can be neither read nor written.
    let away = proxy.cache_dir.with_extension("gone");
    std::fs::rename(&proxy.cache_dir, &away).expect("move the cache directory away");
    let (status, body) = check(&proxy, "/readyz").await;
    assert_eq!(
        (status, names(&body, "failing")),
        (503, vec!["store-unusable".to_owned()]),
        "{body}"
    );
    assert_live(&proxy).await;
    std::fs::rename(&away, &proxy.cache_dir).expect("put the cache directory back");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_under_min_free_degrades_readiness_without_failing_it() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=600", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |config| {
        // More than any test machine's disk has free.
        config.cache.min_free = u64::MAX / 2;
    })
    .await;
    let (status, body) = check(&proxy, "/readyz").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("degraded")),
        "{body}"
    );
    assert!(
        names(&body, "degraded").contains(&"disk-low".to_owned()),
        "{body}"
    );
    assert!(
        body["problems"].to_string().contains("cache.min_free"),
        "{body}"
    );
    assert_live(&proxy).await;
    proxy.stop().await;
}
