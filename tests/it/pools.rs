//! Origin pools over real sockets: round robin spreads by weight; consistent hashing keeps
//! a key on one server; `host_header = "origin"` sends each server its own host; a refused connection goes to the next server; failures
//! (`max_fails` within `fail_timeout`; of the answers, only the statuses in
//! `fail_statuses`) and failed probes take a server out of rotation,
//! and it comes back after `fail_timeout` or a passing probe; a server killed mid-load
//! costs no more than its requests in flight and rejoins once it is back; every server
//! down is a 502 at once, or a stale copy; a reload keeps the state of servers that
//! stay; `/healthz` stays ready naming the site whose servers are all down; `/metrics` and `/stats`
//! show each server, and the access log's `$upstream_addr` the one that answered.
//!
//! Each backend is a small hyper server on 127.0.0.1 that can be killed (its listener
//! and every connection closed) and started again on the same port. Timers are short
//! (probes every 50 ms, `fail_timeout` of a few hundred ms) and waited for with
//! `eventually`, which polls; no test sleeps for a fixed time to let something happen.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use secondhit_proxy::config::{Balance, Config, HealthCheck, OriginServer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::support::{TestProxy, client, eventually, get, scrape, send, stats, wait_until};

/// One origin server of a pool: answers `GET` with its name, `/health` with
/// `health_status`, everything else with `status`.
struct Backend {
    name: &'static str,
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// The accept loop, whose `JoinSet` owns every connection: aborting it closes them.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

#[derive(Default)]
struct Shared {
    /// Requests answered, probes not counted, by path.
    hits: Mutex<HashMap<String, usize>>,
    /// Requests being answered now (probes not counted).
    in_flight: AtomicUsize,
    /// Of those, the ones that came while stopped: held until resumed, so surely unanswered
    /// (a request already past the hold when `stop` came may still be answered).
    held: AtomicUsize,
    status: AtomicU16,
    health_status: AtomicU16,
    /// How long each answer (probes excepted) waits.
    delay_ms: AtomicUsize,
    /// Probes received.
    probes: AtomicUsize,
    /// `POST`s received, answered or not.
    posts: AtomicUsize,
    /// While set, the server accepts connections and reads requests but answers nothing,
    /// probes included: a stopped process (SIGSTOP), whose kernel still completes
    /// handshakes.
    stopped: AtomicBool,
    /// Wakes the requests held while stopped.
    resumed: tokio::sync::Notify,
}

impl Backend {
    async fn start(name: &'static str) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let shared = Arc::new(Shared::default());
        shared.status.store(200, Ordering::Relaxed);
        shared.health_status.store(200, Ordering::Relaxed);
        let task = tokio::spawn(serve(listener, name, shared.clone()));
        Backend {
            name,
            addr,
            shared,
            task: Mutex::new(Some(task)),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Closes the listener and every open connection, as a crashed server would.
    fn kill(&self) -> usize {
        let in_flight = self.shared.in_flight.load(Ordering::SeqCst);
        if let Some(task) = self.task.lock().expect("task").take() {
            task.abort();
        }
        in_flight
    }

    /// Listens again on the same port.
    async fn restart(&self) {
        // The aborted task drops its listener at its next poll, a moment after `kill`.
        let listener = eventually(
            || format!("{} cannot listen on {} again", self.name, self.addr),
            async || TcpListener::bind(self.addr).await.ok(),
        )
        .await;
        let task = tokio::spawn(serve(listener, self.name, self.shared.clone()));
        *self.task.lock().expect("task") = Some(task);
    }

    fn hits(&self) -> usize {
        self.shared.hits.lock().expect("hits").values().sum()
    }

    fn set_status(&self, status: u16) {
        self.shared.status.store(status, Ordering::Relaxed);
    }

    fn set_health(&self, status: u16) {
        self.shared.health_status.store(status, Ordering::Relaxed);
    }

    fn probes(&self) -> usize {
        self.shared.probes.load(Ordering::Relaxed)
    }

    /// Holds every request from now on, unanswered, until [`Backend::resume`].
    fn stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
    }

    /// Answers the requests held, and those after them.
    fn resume(&self) {
        self.shared.stopped.store(false, Ordering::SeqCst);
        self.shared.resumed.notify_waiters();
    }

    /// Requests that came while stopped, held unanswered now.
    fn held(&self) -> usize {
        self.shared.held.load(Ordering::SeqCst)
    }

    fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }
}

impl Shared {
    /// Returns once the server is not stopped.
    async fn unless_stopped(&self) {
        loop {
            let resumed = self.resumed.notified();
            if !self.stopped.load(Ordering::SeqCst) {
                return;
            }
            resumed.await;
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn serve(listener: TcpListener, name: &'static str, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            let shared = shared.clone();
            async move { Ok::<_, Infallible>(answer(request, name, &shared).await) }
        });
        connections.spawn(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(request: Request<Incoming>, name: &str, shared: &Shared) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let host = request.headers().get("host").cloned();
    if request.method() == http::Method::POST {
        shared.posts.fetch_add(1, Ordering::SeqCst);
    }
    let _ = request.into_body().collect().await;
    let reply = |status: u16| {
        Response::builder()
            .status(status)
            .header("x-server", name)
            .header(
                "x-host",
                host.clone().unwrap_or(http::HeaderValue::from_static("")),
            )
            .header("cache-control", "no-store")
            .body(Full::new(Bytes::from(name.to_owned())))
            .expect("response")
    };
    if path == "/cacheable" {
        // Stale on arrival (age 70 > max-age 60): served again only as a stale copy.
        let mut response = reply(200);
        let headers = response.headers_mut();
        headers.insert(
            "cache-control",
            http::HeaderValue::from_static("max-age=60"),
        );
        headers.insert("age", http::HeaderValue::from_static("70"));
        headers.insert("etag", http::HeaderValue::from_static("\"c\""));
        return response;
    }
    if path == "/health" {
        shared.probes.fetch_add(1, Ordering::Relaxed);
        shared.unless_stopped().await;
        return reply(shared.health_status.load(Ordering::Relaxed));
    }
    shared.in_flight.fetch_add(1, Ordering::SeqCst);
    let held = shared.stopped.load(Ordering::SeqCst);
    if held {
        shared.held.fetch_add(1, Ordering::SeqCst);
    }
    shared.unless_stopped().await;
    if held {
        shared.held.fetch_sub(1, Ordering::SeqCst);
    }
    let delay = shared.delay_ms.load(Ordering::Relaxed) as u64;
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    *shared.hits.lock().expect("hits").entry(path).or_insert(0) += 1;
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);
    reply(shared.status.load(Ordering::Relaxed))
}

/// The pool of `backends`, each with weight 1.
fn pool(backends: &[&Backend]) -> Vec<OriginServer> {
    (backends.iter())
        .map(|backend| OriginServer {
            url: backend.url().parse().expect("url"),
            weight: 1,
        })
        .collect()
}

/// A proxy in front of `servers` (the first one is also `origin.url`), then `tweak`.
async fn proxy_for(servers: Vec<OriginServer>, tweak: impl FnOnce(&mut Config)) -> TestProxy {
    let first = servers[0].url.to_string();
    let addr: SocketAddr = first
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("addr");
    TestProxy::start(addr, |config| {
        config.origin.url = servers[0].url.clone();
        config.origin.servers = servers;
        tweak(config);
    })
    .await
}

fn probes_every(interval_ms: u64) -> Option<HealthCheck> {
    Some(HealthCheck {
        path: "/health".to_owned(),
        interval: Duration::from_millis(interval_ms),
        expect: 200,
        timeout: Duration::from_secs(2),
    })
}

/// Which backend answered a `GET path`, and its status.
async fn served_by(proxy: &TestProxy, path: &str) -> (u16, String) {
    let seen = get(&proxy.url(path)).await;
    let server = seen
        .headers
        .get("x-server")
        .map(|v| v.to_str().unwrap_or("?").to_owned());
    (seen.status, server.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_spreads_requests_over_the_servers_by_weight() {
    let (a, b, c) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
    );
    let mut servers = pool(&[&a, &b, &c]);
    servers[2].weight = 2;
    let proxy = proxy_for(servers, |_| {}).await;
    let mut order = Vec::new();
    for i in 0..40 {
        let (status, server) = served_by(&proxy, &format!("/rr/{i}")).await;
        assert_eq!(status, 200);
        order.push(server);
    }
    assert_eq!((a.hits(), b.hits(), c.hits()), (10, 10, 20));
    // Smooth: the heavier server's turns are spread out, never three in a row.
    assert!(
        !order.windows(3).any(|w| w.iter().all(|s| s == "c")),
        "{order:?}"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_host_header_origin_each_server_gets_its_own_host() {
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let proxy = proxy_for(pool(&[&a, &b]), |config| {
        config.origin.host_header = secondhit_proxy::config::HostHeader::Origin;
    })
    .await;
    for i in 0..4 {
        let seen = get(&proxy.url(&format!("/h/{i}"))).await;
        let backend = match &seen.headers["x-server"] {
            name if name == "a" => &a,
            _ => &b,
        };
        assert_eq!(seen.headers["x-host"], backend.addr.to_string().as_str());
    }
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_hashing_keeps_each_key_on_one_server_and_moves_only_a_lost_servers_keys() {
    let (a, b, c) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
    );
    let proxy = proxy_for(pool(&[&a, &b, &c]), |config| {
        config.origin.balance = Balance::ConsistentHash;
        config.origin.health_check = probes_every(50);
    })
    .await;
    let mut owner = HashMap::new();
    for round in 0..3 {
        for key in 0..30 {
            let (status, server) = served_by(&proxy, &format!("/key/{key}")).await;
            assert_eq!(status, 200);
            let first = owner.entry(key).or_insert_with(|| server.clone());
            assert_eq!(*first, server, "key {key} moved in round {round}");
        }
    }
    let used: std::collections::HashSet<_> = owner.values().collect();
    assert_eq!(
        used.len(),
        3,
        "30 keys spread over the three servers: {owner:?}"
    );
    b.kill();
    wait_until(|| "b probed down".into(), || !server_up(&proxy, 1)).await;
    for key in 0..30 {
        let (status, server) = served_by(&proxy, &format!("/key/{key}")).await;
        assert_eq!(status, 200);
        match owner[&key].as_str() {
            "b" => assert_ne!(server, "b"),
            kept => assert_eq!(server, kept, "key {key} moved though its server stayed up"),
        }
    }
    proxy.stop().await;
}

/// Whether the `index`th server of the default site is in rotation.
fn server_up(proxy: &TestProxy, index: usize) -> bool {
    let live = proxy.settings.load();
    let site = live.sites.all().last().expect("the default site").clone();
    site.origin.servers_up()[index].1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_goes_to_the_next_server_unseen_by_the_client() {
    let a = Backend::start("a").await;
    let dead = Backend::start("dead").await;
    dead.kill();
    let proxy = proxy_for(pool(&[&dead, &a]), |config| {
        // Never out of rotation: every request that picks it must be retried.
        config.origin.max_fails = 0;
    })
    .await;
    for i in 0..10 {
        assert_eq!(
            served_by(&proxy, &format!("/r/{i}")).await,
            (200, "a".to_owned())
        );
    }
    let metrics = scrape(&proxy).await;
    let failures = format!(
        "secondhit_origin_server_failures_total{{server=\"{}\"}}",
        dead.url()
    );
    assert_eq!(metrics.get(&failures), Some(&5.0), "{metrics:?}");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_take_a_server_out_for_fail_timeout_then_it_is_tried_again() {
    const FAIL_TIMEOUT: Duration = Duration::from_secs(1);
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    b.set_status(503);
    let proxy = proxy_for(pool(&[&a, &b]), |config| {
        config.origin.max_fails = 2;
        config.origin.fail_timeout = FAIL_TIMEOUT;
    })
    .await;
    let first_failure = Instant::now();
    let mut statuses = Vec::new();
    for i in 0..4 {
        statuses.push(served_by(&proxy, &format!("/p/{i}")).await);
    }
    // Round robin: a, b (503), a, b (503): the second failure takes b out.
    assert_eq!(
        statuses.iter().filter(|(s, _)| *s == 503).count(),
        2,
        "{statuses:?}"
    );
    for i in 0..4 {
        let (_, server) = served_by(&proxy, &format!("/q/{i}")).await;
        assert!(
            server == "a" || first_failure.elapsed() >= FAIL_TIMEOUT,
            "{i}: {server}"
        );
    }
    let (up, failures) = server_figures(&proxy, &b).await;
    assert!(!up || first_failure.elapsed() >= FAIL_TIMEOUT, "b is out");
    assert_eq!(failures, 2.0);
    b.set_status(200);
    eventually(
        || "b back in rotation after fail_timeout".into(),
        async || (served_by(&proxy, "/again").await.1 == "b").then_some(()),
    )
    .await;
    assert!(
        first_failure.elapsed() >= FAIL_TIMEOUT,
        "b was out for fail_timeout"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_leaves_a_server_in_rotation_unless_fail_statuses_names_it_while_a_503_takes_it_out()
{
    let (a, b, c) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
    );
    b.set_status(500);
    c.set_status(503);
    let proxy = proxy_for(pool(&[&a, &b, &c]), |config| {
        config.origin.max_fails = 1;
        // Out for the rest of the test once out: nothing waits for a server to return.
        config.origin.fail_timeout = Duration::from_secs(600);
    })
    .await;
    let mut seen = Vec::new();
    for i in 0..6 {
        seen.push(served_by(&proxy, &format!("/bug/{i}")).await);
    }
    assert!(seen.contains(&(500, "b".to_owned())), "{seen:?}");
    assert!(seen.contains(&(503, "c".to_owned())), "{seen:?}");
    assert!(
        server_up(&proxy, 1),
        "b's 500 is its application's, not b's"
    );
    assert!(
        !server_up(&proxy, 2),
        "c's 503 is in the default fail_statuses"
    );
    let (up, failures) = server_figures(&proxy, &b).await;
    assert!(up);
    assert!(failures >= 1.0, "a 500 is still a failure in b's figures");
    // b keeps its share of every other URL.
    b.set_status(200);
    let mut servers = Vec::new();
    for i in 0..4 {
        servers.push(served_by(&proxy, &format!("/fine/{i}")).await.1);
    }
    assert!(servers.contains(&"b".to_owned()), "{servers:?}");
    assert!(!servers.contains(&"c".to_owned()), "{servers:?}");
    // Named in fail_statuses (applied by a reload), a 500 takes b out too.
    b.set_status(500);
    let mut next = (*proxy.settings.load().settings).clone();
    next.origin.fail_statuses = vec![500];
    proxy.reloader.apply(next).await.expect("reload");
    let mut seen = Vec::new();
    // Three turns of round robin reach b once (c's turn goes to the next server up).
    for i in 0..3 {
        seen.push(served_by(&proxy, &format!("/counted/{i}")).await);
    }
    assert!(seen.contains(&(500, "b".to_owned())), "{seen:?}");
    assert!(!server_up(&proxy, 1), "b answered 500, now a failure of b");
    for i in 0..4 {
        let (status, server) = served_by(&proxy, &format!("/after/{i}")).await;
        assert_eq!((status, server.as_str()), (200, "a"));
    }
    proxy.stop().await;
}

/// Whether `backend` is up, and its failures, on `/metrics`; `/stats` must agree.
async fn server_figures(proxy: &TestProxy, backend: &Backend) -> (bool, f64) {
    let label = format!("{{server=\"{}\"}}", backend.url());
    let metrics = scrape(proxy).await;
    let up = metrics[&format!("secondhit_origin_server_up{label}")] == 1.0;
    let failures = metrics[&format!("secondhit_origin_server_failures_total{label}")];
    let requests = metrics[&format!("secondhit_origin_server_requests_total{label}")];
    let count = metrics[&format!("secondhit_origin_server_request_duration_seconds_count{label}")];
    assert_eq!(
        requests, count,
        "every request's latency is in the histogram"
    );
    let stats = stats(proxy).await;
    let servers = stats["origin"]["servers"].as_array().expect("servers");
    let url = backend.url();
    let server = servers
        .iter()
        .find(|s| s["url"] == url.as_str())
        .expect("in /stats");
    assert_eq!(server["failures"].as_f64(), Some(failures));
    (up, failures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_probe_takes_a_server_out_and_a_passing_one_brings_it_back() {
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let proxy = proxy_for(pool(&[&a, &b]), |config| {
        config.origin.health_check = probes_every(50);
    })
    .await;
    wait_until(|| "b probed".into(), || b.probes() > 0).await;
    b.set_health(503);
    wait_until(|| "b probed down".into(), || !server_up(&proxy, 1)).await;
    let before = b.hits();
    for i in 0..6 {
        assert_eq!(served_by(&proxy, &format!("/x/{i}")).await.1, "a");
    }
    assert_eq!(b.hits(), before, "no request goes to a server probed down");
    assert!(!server_figures(&proxy, &b).await.0, "b shows as out");
    b.set_health(200);
    wait_until(|| "b probed up".into(), || server_up(&proxy, 1)).await;
    let served: Vec<String> = futures_util::future::join_all((0..4).map(|i| {
        let proxy = &proxy;
        async move { served_by(proxy, &format!("/y/{i}")).await.1 }
    }))
    .await;
    assert!(served.iter().any(|s| s == "b"), "{served:?}");
    proxy.stop().await;
}

/// Clients sending one request after another, each on its own connection to the proxy.
struct Load {
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    /// Answers other than 200.
    errors: Arc<AtomicUsize>,
    clients: JoinSet<()>,
}

impl Load {
    fn start(proxy: &TestProxy, clients: usize) -> Load {
        let mut load = Load {
            stop: Arc::default(),
            served: Arc::default(),
            errors: Arc::default(),
            clients: JoinSet::new(),
        };
        for worker in 0..clients {
            let url = proxy.url("");
            let (stop, served, errors) =
                (load.stop.clone(), load.served.clone(), load.errors.clone());
            load.clients.spawn(async move {
                let http = client();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let seen = send(http.get(format!("{url}/load/{worker}/{i}"))).await;
                    match seen.status {
                        200 => served.fetch_add(1, Ordering::Relaxed),
                        _ => errors.fetch_add(1, Ordering::Relaxed),
                    };
                }
            });
        }
        load
    }

    /// Stops the clients after their requests in flight; returns the errors in all.
    async fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        while self.clients.join_next().await.is_some() {}
        self.errors.load(Ordering::Relaxed)
    }
}

/// Servers a, b and c, each answering 5 ms after a request: requests spend time in flight.
async fn three_under_load() -> [Backend; 3] {
    let backends = [
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
    ];
    for backend in &backends {
        backend.shared.delay_ms.store(5, Ordering::Relaxed);
    }
    backends
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_load_with_requests_in_flight_costs_no_get_an_error_and_rejoins() {
    let backends = three_under_load().await;
    let [a, b, c] = &backends;
    let proxy = proxy_for(pool(&[a, b, c]), |config| {
        config.origin.health_check = probes_every(50);
    })
    .await;
    let load = Load::start(&proxy, 8);
    let served = &load.served;
    wait_until(|| "load reaches b".into(), || b.hits() > 20).await;
    // Requests surely in flight on b when it dies: held, then reset with its connections.
    // Only the held ones are counted: one past the hold when b stopped may be answered
    // while the abort of b's connections is on its way.
    b.stop();
    wait_until(|| "b holds requests".into(), || b.held() >= 2).await;
    let in_flight = b.held();
    b.kill();
    let served_at_kill = served.load(Ordering::Relaxed);
    wait_until(
        || "load goes on without b".into(),
        || served.load(Ordering::Relaxed) > served_at_kill + 200,
    )
    .await;
    // Only now: a held request woken before its task was aborted would be answered by b.
    b.resume();
    b.restart().await;
    let hits = b.hits();
    wait_until(
        || "b back in rotation under load".into(),
        || b.hits() > hits + 20,
    )
    .await;
    let total = served.load(Ordering::Relaxed);
    let errors = load.stop().await;
    let retried = retries(&scrape(&proxy).await);
    eprintln!(
        "killed with {in_flight} in flight: {total} served, {errors} errors, retries {retried:?}"
    );
    assert_eq!(
        errors, 0,
        "b had {in_flight} requests in flight when killed"
    );
    assert!(retried["error"] >= in_flight as f64, "{retried:?}");
    proxy.stop().await;
}

/// `secondhit_origin_retries_total` by reason (empty where the metric is missing).
fn retries(metrics: &HashMap<String, f64>) -> HashMap<String, f64> {
    let prefix = "secondhit_origin_retries_total{reason=\"";
    (metrics.iter())
        .filter_map(|(name, value)| {
            let reason = name.strip_prefix(prefix)?.strip_suffix("\"}")?;
            Some((reason.to_owned(), *value))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_held_by_a_server_that_dies_goes_to_the_next_server_and_a_post_is_never_resent() {
    let logs = tempfile::tempdir().expect("temp dir");
    let log = logs.path().join("access.log");
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let proxy = proxy_for(pool(&[&a, &b]), |config| {
        // b stays in rotation whatever happens: only the retry decides where requests go.
        config.origin.max_fails = 0;
        config.log.access_log = secondhit_proxy::config::AccessLog::File(log.clone());
        config.log.access_format = secondhit_proxy::config::AccessFormat::Template(
            secondhit_proxy::config::access_format::parse("$request_method $upstream_addr $status")
                .expect("template"),
        );
    })
    .await;
    b.stop();
    // Two at once take consecutive turns of round robin: one of each lands on b, held.
    let http = client();
    let send_two = |method: reqwest::Method, path: &str| {
        let url = proxy.url(path);
        let two = [0, 1].map(|i| send(http.request(method.clone(), format!("{url}/{i}"))));
        tokio::spawn(futures_util::future::join_all(two))
    };
    let gets = send_two(reqwest::Method::GET, "/get");
    wait_until(|| "b holds a GET".into(), || b.in_flight() == 1).await;
    let posts = send_two(reqwest::Method::POST, "/post");
    wait_until(|| "b holds a POST".into(), || b.in_flight() == 2).await;
    b.kill();
    let gets: Vec<u16> = gets.await.expect("GETs").iter().map(|s| s.status).collect();
    let posts: Vec<u16> = posts
        .await
        .expect("POSTs")
        .iter()
        .map(|s| s.status)
        .collect();
    assert_eq!(gets, [200, 200], "the GET b held was answered by a");
    assert!(posts.contains(&502) && posts.contains(&200), "{posts:?}");
    assert_eq!(
        (
            a.shared.posts.load(Ordering::SeqCst),
            b.shared.posts.load(Ordering::SeqCst)
        ),
        (1, 1),
        "each POST reached one server only"
    );
    let retried = retries(&scrape(&proxy).await);
    assert_eq!(retried.get("error"), Some(&1.0), "{retried:?}");
    proxy.stop().await;
    let text = std::fs::read_to_string(&log).expect("read the log");
    let retried_line = format!("GET {}, {} 200", b.addr, a.addr);
    assert!(text.lines().any(|line| line == retried_line), "{text}");
    assert!(text.lines().any(|line| line == "POST - 502"), "{text}");
}

/// The figures of [`hung_under_load`]: requests failed, and how long after
/// the server stopped it was out of rotation, and after it resumed, back.
#[derive(Debug)]
struct HungFigures {
    errors: usize,
    out_after: Duration,
    back_after: Duration,
    retries: HashMap<String, f64>,
}

/// Three servers under load, the timeouts at their defaults (`tweak` sets the rest); the
/// second stops answering (it still accepts), then resumes once out of rotation and
/// once the others carried the load a while.
async fn hung_under_load(tweak: impl FnOnce(&mut Config)) -> HungFigures {
    let backends = three_under_load().await;
    let [a, b, c] = &backends;
    let proxy = proxy_for(pool(&[a, b, c]), |config| {
        let defaults = Config::default().origin;
        config.origin.connect_timeout = defaults.connect_timeout;
        config.origin.read_timeout = defaults.read_timeout;
        tweak(config);
    })
    .await;
    let load = Load::start(&proxy, 8);
    let served = &load.served;
    wait_until(|| "load reaches b".into(), || b.hits() > 20).await;
    let stopped = tokio::time::Instant::now();
    b.stop();
    wait_until(|| "b out of rotation".into(), || !server_up(&proxy, 1)).await;
    let out_after = stopped.elapsed();
    let served_when_out = served.load(Ordering::Relaxed);
    wait_until(
        || "a and c carry the load".into(),
        || served.load(Ordering::Relaxed) > served_when_out + 200,
    )
    .await;
    let resumed = tokio::time::Instant::now();
    b.resume();
    wait_until(|| "b back in rotation".into(), || server_up(&proxy, 1)).await;
    let back_after = resumed.elapsed();
    let hits = b.hits();
    wait_until(|| "b serves again".into(), || b.hits() > hits + 20).await;
    let served = served.load(Ordering::Relaxed);
    let errors = load.stop().await;
    let figures = HungFigures {
        errors,
        out_after,
        back_after,
        retries: retries(&scrape(&proxy).await),
    };
    proxy.stop().await;
    eprintln!("{served} served, {figures:?}");
    figures
}

// On the paused clock: the timeouts and probes are tokio timers, so the seconds measured
// are the proxy's own, whatever the machine's load.
#[tokio::test(start_paused = true)]
async fn a_hung_server_is_probed_out_within_seconds_while_the_others_carry_its_requests() {
    let figures = hung_under_load(|config| {
        // health_check's own defaults (timeout included), probing twice a second.
        let probes = "[origin]\nhealth_check = { path = \"/health\", interval = \"500ms\" }";
        let probes = Config::from_toml_str(probes).expect("config");
        config.origin.health_check = probes.origin.health_check;
    })
    .await;
    assert!(figures.out_after <= Duration::from_secs(3), "{figures:?}");
    assert_eq!(
        figures.errors, 0,
        "the requests b held went to a or c: {figures:?}"
    );
    assert!(figures.retries["timeout"] >= 1.0, "{figures:?}");
    assert!(figures.back_after <= Duration::from_secs(2), "{figures:?}");
}

#[tokio::test(start_paused = true)]
async fn without_probes_a_hung_server_is_out_after_its_first_timeout_and_no_get_fails() {
    let figures = hung_under_load(|_| {}).await;
    // One request timing out for want of a response head takes it out (max_fails = 1).
    assert!(figures.out_after <= Duration::from_secs(6), "{figures:?}");
    assert_eq!(figures.errors, 0, "{figures:?}");
    assert!(figures.retries["timeout"] >= 1.0, "{figures:?}");
    // Back after fail_timeout (10 s), counted from when it went out.
    assert!(figures.back_after <= Duration::from_secs(11), "{figures:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_server_down_a_request_gets_502_at_once_or_a_stale_copy() {
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let proxy = proxy_for(pool(&[&a, &b]), |config| {
        config.origin.health_check = probes_every(50);
        config.cache.stale_if_unreachable = Duration::from_secs(3600);
        config.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always;
    })
    .await;
    let stored = get(&proxy.url("/cacheable")).await;
    assert!(stored.cache.stored, "{:?}", stored.cache);
    proxy.wait_committed(1).await;
    a.kill();
    b.kill();
    wait_until(
        || "both probed down".into(),
        || !server_up(&proxy, 0) && !server_up(&proxy, 1),
    )
    .await;
    let asked = Instant::now();
    let (status, _) = served_by(&proxy, "/anything").await;
    assert_eq!(status, 502);
    // The stored entry (stale on arrival) is served where the allowance permits.
    let seen = get(&proxy.url("/cacheable")).await;
    assert_eq!(
        (seen.status, seen.body.as_slice()),
        (200, stored.body.as_slice())
    );
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(seen.cache.detail.as_deref(), Some("stale-if-unreachable"));
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "answered at once: {:?}",
        asked.elapsed()
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_state_of_servers_that_stay() {
    let (a, b, c) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
    );
    b.set_status(503);
    let proxy = proxy_for(pool(&[&a, &b]), |config| {
        config.origin.max_fails = 1;
        config.origin.fail_timeout = Duration::from_secs(600);
    })
    .await;
    served_by(&proxy, "/1").await;
    served_by(&proxy, "/2").await;
    assert!(!server_up(&proxy, 1), "b failed once: out for fail_timeout");
    let mut next = (*proxy.settings.load().settings).clone();
    next.origin.servers = pool(&[&a, &b, &c]);
    proxy.reloader.apply(next).await.expect("reload");
    assert!(!server_up(&proxy, 1), "b is still out after the reload");
    assert!(server_up(&proxy, 2), "c starts in rotation");
    for i in 0..6 {
        assert_ne!(served_by(&proxy, &format!("/after/{i}")).await.1, "b");
    }
    let (_, failures) = server_figures(&proxy, &b).await;
    assert_eq!(failures, 1.0, "b's counters carried over");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_stays_ready_naming_the_site_whose_servers_are_all_down() {
    let (a, b, other) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("o").await,
    );
    let proxy = proxy_for(pool(&[&other]), |config| {
        let mut origin = config.origin.clone();
        origin.servers = pool(&[&a, &b]);
        origin.health_check = probes_every(50);
        config.sites = vec![secondhit_proxy::config::SiteConfig {
            hosts: vec!["shop.example".to_owned()],
            origin,
            ..Default::default()
        }];
        config.server.unknown_host = secondhit_proxy::config::UnknownHost::Default;
    })
    .await;
    proxy.wait_scanned().await;
    let health = get(&proxy.admin_url("/healthz")).await;
    let body: serde_json::Value = serde_json::from_slice(&health.body).expect("JSON");
    assert_eq!(
        (health.status, body["status"].as_str()),
        (200, Some("ok")),
        "{body}"
    );
    assert_eq!(body["store"]["usable"], true);
    a.kill();
    wait_until(|| "a probed down".into(), || !server_up_in(&proxy, 0, 0)).await;
    assert_eq!(
        get(&proxy.admin_url("/healthz")).await.status,
        200,
        "b is still up"
    );
    b.kill();
    wait_until(|| "b probed down".into(), || !server_up_in(&proxy, 0, 1)).await;
    // Its stored copies are still served: the node stays ready, naming the site.
    let health = get(&proxy.admin_url("/healthz")).await;
    let body: serde_json::Value = serde_json::from_slice(&health.body).expect("JSON");
    assert_eq!(
        (health.status, body["status"].as_str()),
        (200, Some("degraded")),
        "{body}"
    );
    assert_eq!(
        body["degraded"],
        serde_json::json!(["origins-down"]),
        "{body}"
    );
    let problems = body["problems"].to_string();
    assert!(problems.contains("site shop.example"), "{problems}");
    assert!(
        !problems.contains("default"),
        "the default site is fine: {problems}"
    );
    b.restart().await;
    wait_until(|| "b probed up".into(), || server_up_in(&proxy, 0, 1)).await;
    let health = get(&proxy.admin_url("/healthz")).await;
    let body: serde_json::Value = serde_json::from_slice(&health.body).expect("JSON");
    assert_eq!(body["status"].as_str(), Some("ok"), "{body}");
    proxy.stop().await;
}

/// Whether server `index` of site `site` (in `[[site]]` order) is in rotation.
fn server_up_in(proxy: &TestProxy, site: usize, index: usize) -> bool {
    let live = proxy.settings.load();
    let site = live.sites.all().nth(site).expect("the site").clone();
    site.origin.servers_up()[index].1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_access_log_names_the_server_of_the_pool_that_answered() {
    let logs = tempfile::tempdir().expect("temp dir");
    let log = logs.path().join("access.log");
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let proxy = proxy_for(pool(&[&a, &b]), |config| {
        config.log.access_log = secondhit_proxy::config::AccessLog::File(log.clone());
        config.log.access_format = secondhit_proxy::config::AccessFormat::Template(
            secondhit_proxy::config::access_format::parse("$upstream_addr $upstream_status")
                .expect("template"),
        );
    })
    .await;
    let mut answered = Vec::new();
    for i in 0..4 {
        let (_, server) = served_by(&proxy, &format!("/log/{i}")).await;
        let backend = if server == "a" { &a } else { &b };
        answered.push(format!("{} 200", backend.addr));
    }
    proxy.stop().await;
    let text = std::fs::read_to_string(&log).expect("read the log");
    assert_eq!(text.lines().collect::<Vec<_>>(), answered);
}
