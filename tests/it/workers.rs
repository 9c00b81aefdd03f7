//! Several workers (`server.workers`): each a thread with its own runtime and its own
//! socket on the shared port, accepting and serving its connections to the end.

use std::time::Duration;

use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, sample, scrape, wait_until};

/// A client that opens a new connection for every request, so the kernel places each.
fn fresh_connections() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

#[tokio::test]
async fn two_workers_share_the_port_and_each_serves_the_connections_it_accepts() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", body_bytes(1_000, 7))).await;
    let proxy = TestProxy::start(origin.addr, |config| config.server.workers = Some(2)).await;
    let client = fresh_connections();
    const CONNECTIONS: usize = 40;
    for i in 0..CONNECTIONS {
        let response = client
            .get(proxy.url(&format!("/object/{}", i % 4)))
            .send()
            .await
            .expect("response");
        assert_eq!(response.status(), 200);
        assert_eq!(response.bytes().await.expect("body").len(), 1_000);
    }
    let metrics = scrape(&proxy).await;
    let first = sample(&metrics, "secondhit_connections_total{worker=\"0\"}");
    let second = sample(&metrics, "secondhit_connections_total{worker=\"1\"}");
    // The kernel spreads connections by their address hash: over 40 of them, each worker
    // gets some but for a chance of 2^-39.
    assert!(
        first > 0.0 && second > 0.0,
        "worker 0: {first}, worker 1: {second}"
    );
    assert_eq!(first + second, CONNECTIONS as f64);
    // Requests are counted by whichever worker served them, and summed when scraped.
    let requests: f64 = ["hit", "miss", "stale", "pass"]
        .iter()
        .map(|result| {
            sample(
                &metrics,
                &format!("secondhit_requests_total{{result=\"{result}\"}}"),
            )
        })
        .sum();
    assert_eq!(requests, CONNECTIONS as f64);
    proxy.stop().await;
}

#[tokio::test]
async fn a_shutdown_lets_every_workers_requests_finish() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("no-store", body_bytes(5_000, 3)).delayed(Duration::from_millis(300))
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |config| config.server.workers = Some(2)).await;
    let client = fresh_connections();
    // Enough that both workers hold some, but for a chance of 2^-23 (see above).
    const REQUESTS: usize = 24;
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..REQUESTS {
        let request = client.get(proxy.url(&format!("/slow/{i}")));
        requests.spawn(async move {
            let response = request.send().await.expect("response head");
            let status = response.status().as_u16();
            (status, response.bytes().await.expect("whole body").len())
        });
    }
    // Every request reached the origin (and so its worker) before the stop.
    wait_until(
        || format!("the origin saw {} of {REQUESTS}", origin.total()),
        || origin.total() == REQUESTS,
    )
    .await;
    let metrics = scrape(&proxy).await;
    let workers_used = ["0", "1"]
        .iter()
        .filter(|w| {
            sample(
                &metrics,
                &format!("secondhit_connections_total{{worker=\"{w}\"}}"),
            ) > 0.0
        })
        .count();
    assert_eq!(workers_used, 2, "both workers hold requests at the stop");
    proxy.stop().await;
    let answered = requests.join_all().await;
    assert!(
        answered
            .iter()
            .all(|&(status, len)| status == 200 && len == 5_000),
        "every request finished whole: {answered:?}"
    );
}
