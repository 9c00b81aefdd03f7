//! The admin listener over real sockets: `/metrics` after a scripted sequence (exact
//! counts), `/purge` (variants, memory tier, unknown URLs), `/rotate` and `/stats`, the
//! bearer token on every endpoint, methods and paths, `admin_listen = "off"`, and
//! `/healthz` answering while partial request heads crowd the admin or the proxy port.

use crate::support::{
    Reply, TestOrigin, TestProxy, body_bytes, client, get, sample, scrape, send, send_until_hit,
    stats,
};
use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::PATIENCE;
use secondhit_proxy::config::{AdmissionPolicy, Config};

/// A request head that never ends: no blank line after its last field.
const PARTIAL_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: a\r\n";

/// Opens `count` connections to `addr`, each sending [`PARTIAL_HEAD`] and then nothing.
async fn partial_heads(addr: std::net::SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut streams = Vec::new();
    for _ in 0..count {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(PARTIAL_HEAD).await.expect("partial head");
        streams.push(stream);
    }
    streams
}

/// The admin URL that purges `url` (form-encoded, as `curl --data-urlencode` would).
fn purge_url(proxy: &TestProxy, url: &str) -> String {
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("url", url)
        .finish();
    proxy.admin_url(&format!("/purge?{query}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_a_scripted_sequence_exactly() {
    let origin = TestOrigin::start(|head| match head.uri.path() {
        "/a" => Reply::ok("max-age=3600", body_bytes(1000, 1)),
        "/b" => Reply::ok("no-store", body_bytes(300, 2)),
        _ => Reply::status(200, b"posted".to_vec()),
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    run_the_scripted_sequence(&proxy).await;

    let m = scrape(&proxy).await;
    assert_requests_and_decisions_counted(&m);
    assert_store_and_origin_counted(&m);
    assert_filters_bytes_and_process_reported(&m);

    // /stats agrees, and so does the hit ratio: 1 of 4 answerable requests.
    let s = stats(&proxy).await;
    assert_eq!(s["policy"], "second-hit");
    assert_eq!(s["requests"]["hit"], 1);
    assert_eq!(s["requests"]["pass"], 2);
    assert_eq!(s["hit_ratio"], 0.25);
    assert_eq!(s["admission"]["disk_writes_avoided_bytes"], 1000);
    assert_eq!(s["store"]["objects"], 1);
    assert_eq!(s["filters"]["configured"]["expected_urls"], 1_000_000);
    assert_eq!(s["filters"]["configured"]["rotate"], "auto");
    assert_eq!(s["filters"]["generation"], 0);
    proxy.stop().await;
}

/// Sends the scripted sequence: /a seen first, stored, hit; a client no-store; a POST; and
/// an unstorable /b, checking each one's outcome.
async fn run_the_scripted_sequence(proxy: &TestProxy) {
    let http = client();
    // 1. First sight: a miss, kept off the disk.
    let first = get(&proxy.url("/a")).await;
    assert_eq!(first.cache.detail.as_deref(), Some("first-sight"));
    // 2. Seen before: a miss, stored.
    assert!(get(&proxy.url("/a")).await.cache.stored);
    proxy.wait_committed(1).await;
    // 3. A hit.
    assert!(get(&proxy.url("/a")).await.cache.hit);
    // 4. The client's own no-store: passed to the origin.
    let no_store = send(
        http.get(proxy.url("/a"))
            .header("cache-control", "no-store"),
    )
    .await;
    assert_eq!(no_store.cache.fwd.as_deref(), Some("request"));
    // 5. Another method: passed.
    let posted = send(http.post(proxy.url("/p")).body("x")).await;
    assert_eq!(posted.cache.fwd.as_deref(), Some("method"));
    // 6. A response that may not be stored: a miss, but no admission decision.
    let unstorable = get(&proxy.url("/b")).await;
    assert_eq!(unstorable.cache.detail.as_deref(), Some("no-store"));
}

/// Asserts the scripted sequence's requests by result and admission decisions in `m`.
fn assert_requests_and_decisions_counted(m: &HashMap<String, f64>) {
    let requests = |result: &str| {
        sample(
            m,
            &format!("secondhit_requests_total{{result=\"{result}\"}}"),
        )
    };
    assert_eq!(
        (
            requests("hit"),
            requests("stale"),
            requests("miss"),
            requests("pass")
        ),
        (1.0, 0.0, 3.0, 2.0)
    );
    let decision = |decision: &str, reason: &str| {
        sample(
            m,
            &format!(
                "secondhit_admission_decisions_total{{decision=\"{decision}\",reason=\"{reason}\"}}"
            ),
        )
    };
    assert_eq!(decision("reject", "first-sight"), 1.0);
    assert_eq!(decision("admit", "seen-before"), 1.0);
    assert_eq!(decision("admit", "always"), 0.0);
    assert_eq!(decision("admit", "already-stored"), 0.0);
}

/// Asserts the scripted sequence's disk writes, store contents and origin requests in `m`.
fn assert_store_and_origin_counted(m: &HashMap<String, f64>) {
    assert_eq!(sample(m, "secondhit_disk_write_bytes_total"), 1000.0);
    assert_eq!(
        sample(m, "secondhit_disk_writes_avoided_bytes_total"),
        1000.0
    );
    assert_eq!(sample(m, "secondhit_store_objects"), 1.0);
    assert!(
        sample(m, "secondhit_store_bytes") > 1000.0,
        "headers count too"
    );
    assert_eq!(sample(m, "secondhit_store_evictions_total"), 0.0);
    // The hit read /a from its file: a copy in the memory tier, and the file held open.
    assert!(sample(m, "secondhit_store_memory_bytes") > 1000.0);
    assert_eq!(sample(m, "secondhit_store_open_files"), 1.0);
    // Five requests reached the origin: two misses of /a, the no-store GET, the POST, /b.
    assert_eq!(
        sample(m, "secondhit_origin_request_duration_seconds_count"),
        5.0
    );
    assert_eq!(
        sample(
            m,
            "secondhit_origin_request_duration_seconds_bucket{le=\"+Inf\"}"
        ),
        5.0
    );
    assert_eq!(
        sample(m, "secondhit_errors_total{kind=\"origin-unreachable\"}"),
        0.0
    );
}

/// Asserts the filters, response bytes, build info and process metrics in `m` after the
/// scripted sequence, and that no shadow metrics are exported.
fn assert_filters_bytes_and_process_reported(m: &HashMap<String, f64>) {
    // The filters: /a and /b recorded, no rotation yet.
    let keys = sample(m, "secondhit_filter_estimated_keys{filter=\"current\"}");
    assert!((1.5..2.5).contains(&keys), "about two keys, got {keys}");
    assert!(sample(m, "secondhit_filter_fill_ratio{filter=\"current\"}") > 0.0);
    assert_eq!(
        sample(m, "secondhit_filter_rotations_total{cause=\"fill\"}"),
        0.0
    );
    assert!(sample(m, "secondhit_filter_generation_age_seconds") >= 0.0);
    assert!(sample(m, "secondhit_filter_estimated_fp_rate") < 0.01);
    // Response bytes by result: the hit's 1000, and the two misses of /a.
    assert_eq!(
        sample(m, "secondhit_response_body_bytes_total{result=\"hit\"}"),
        1000.0
    );
    assert!(sample(m, "secondhit_response_body_bytes_total{result=\"miss\"}") >= 2000.0);
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        m.keys().any(|k| k.starts_with("secondhit_build_info{")
            && k.contains(version)
            && k.contains(&format!("features=\"{}\"", env!("SECONDHIT_FEATURES")))),
        "build info names {version}"
    );
    assert!(sample(m, "process_open_fds") > 0.0);
    assert!(sample(m, "process_resident_memory_bytes") > 0.0);
    assert!(sample(m, "process_cpu_seconds_total") > 0.0);
    assert!(sample(m, "process_start_time_seconds") > 1.7e9);
    assert!(
        !m.keys().any(|name| name.starts_with("secondhit_shadow_")),
        "shadow metrics only in shadow mode"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_that_is_down_counts_as_an_error_and_a_pass() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    origin.go_down().await;
    let seen = get(&proxy.url("/down")).await;
    assert_eq!(seen.status, 502);
    let m = scrape(&proxy).await;
    assert_eq!(
        sample(&m, "secondhit_errors_total{kind=\"origin-unreachable\"}"),
        1.0
    );
    assert_eq!(sample(&m, "secondhit_requests_total{result=\"pass\"}"), 1.0);
    assert_eq!(
        sample(&m, "secondhit_origin_request_duration_seconds_count"),
        1.0
    );
    proxy.stop().await;
}

/// An origin whose `/v` varies on `Accept-Language` and whose other paths do not.
async fn varying_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        if head.uri.path() == "/v" {
            let lang = head
                .headers
                .get("accept-language")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("none")
                .to_owned();
            Reply::ok("max-age=3600", lang.into_bytes()).header("vary", "accept-language")
        } else {
            Reply::ok("max-age=3600", body_bytes(500, 9))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_removes_every_variant_and_the_memory_copy() {
    let origin = varying_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let http = client();
    let variant = |lang: &'static str| {
        let http = http.clone();
        let url = proxy.url("/v");
        move || http.get(&url).header("accept-language", lang)
    };
    for lang in ["en", "fr"] {
        let hit = send_until_hit(variant(lang)).await;
        assert_eq!(hit.body, lang.as_bytes());
    }
    assert_eq!(origin.count("/v"), 2);

    // The key is the URL as the client asked for it: the proxy's own host and port here.
    let purged = send(http.post(purge_url(&proxy, &proxy.url("/v")))).await;
    assert_eq!(
        purged.status,
        200,
        "{}",
        String::from_utf8_lossy(&purged.body)
    );
    // Neither variant is served from storage any more (the first refetch stores a new
    // variant set, so the second one finds that set without its variant).
    for (lang, count) in [("en", 3), ("fr", 4)] {
        let seen = send(variant(lang)()).await;
        assert!(!seen.cache.hit, "{lang} after the purge: {:?}", seen.cache);
        assert_eq!(seen.body, lang.as_bytes());
        assert_eq!(origin.count("/v"), count);
    }

    // A hit from memory: the second hit reads the copy the first one left there.
    let plain = || http.get(proxy.url("/plain"));
    send_until_hit(plain).await;
    assert!(send(plain()).await.cache.hit);
    assert!(
        proxy.store.stats().memory_objects >= 1,
        "the memory tier holds it"
    );
    let purged = send(http.post(purge_url(&proxy, &proxy.url("/plain")))).await;
    assert_eq!(purged.status, 200);
    let after = send(plain()).await;
    assert!(!after.cache.hit, "{:?}", after.cache);
    assert_eq!(
        origin.count("/plain"),
        2,
        "the purge sent it back to the origin"
    );

    // Nothing stored: 404. Not an absolute http:// URL: 400.
    let unknown = send(http.post(purge_url(&proxy, &proxy.url("/never")))).await;
    assert_eq!(unknown.status, 404);
    assert!(String::from_utf8_lossy(&unknown.body).contains("/never"));
    let relative = send(http.post(proxy.admin_url("/purge?url=%2Fv"))).await;
    assert_eq!(relative.status, 400);
    let missing = send(http.post(proxy.admin_url("/purge"))).await;
    assert_eq!(missing.status, 400);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_required_on_every_endpoint() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.admin_token = Some("s3cret-token".to_owned())
    })
    .await;
    let http = client();
    let never = proxy.url("/never");
    let endpoints: [(&str, &str, u16); 7] = [
        ("GET", "/metrics", 200),
        ("GET", "/livez", 200),
        ("GET", "/readyz", 200),
        ("GET", "/healthz", 200),
        ("GET", "/stats", 200),
        ("POST", "/purge", 404),
        ("POST", "/rotate", 200),
    ];
    for (method, path, expected) in endpoints {
        let request = |token: Option<&str>| {
            let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
            let url = match path {
                "/purge" => purge_url(&proxy, &never),
                _ => proxy.admin_url(path),
            };
            let builder = http.request(method, url);
            match token {
                Some(token) => builder.bearer_auth(token),
                None => builder,
            }
        };
        let without = send(request(None)).await;
        assert_eq!(without.status, 401, "{method} {path} without a token");
        assert_eq!(
            without
                .headers
                .get("www-authenticate")
                .map(|v| v.as_bytes()),
            Some(&b"Bearer"[..])
        );
        let wrong = send(request(Some("s3cret-tokeN"))).await;
        assert_eq!(wrong.status, 401, "{method} {path} with a wrong token");
        let short = send(request(Some("s3cret"))).await;
        assert_eq!(
            short.status, 401,
            "{method} {path} with a prefix of the token"
        );
        let right = send(request(Some("s3cret-token"))).await;
        assert_eq!(right.status, expected, "{method} {path} with the token");
    }
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_paths_and_health() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    proxy.wait_scanned().await;
    let http = client();
    let health = get(&proxy.admin_url("/healthz")).await;
    assert_healthy(&health);
    let post_metrics = send(http.post(proxy.admin_url("/metrics"))).await;
    assert_eq!(post_metrics.status, 405);
    assert_eq!(post_metrics.headers["allow"], "GET, HEAD");
    let get_purge = get(&proxy.admin_url("/purge?url=http://a/")).await;
    assert_eq!(get_purge.status, 405);
    assert_eq!(get_purge.headers["allow"], "POST");
    assert_eq!(get(&proxy.admin_url("/nope")).await.status, 404);
    // The admin API is not on the public port: there it is just a path for the origin.
    let public = get(&proxy.url("/metrics")).await;
    assert_eq!(public.body, b"x");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_starts_a_generation_and_counts_a_forced_rotation() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    let http = client();
    get(&proxy.url("/remembered")).await;
    let before = stats(&proxy).await;
    assert_eq!(before["filters"]["generation"], 0);
    assert!(before["filters"]["last_rotation_cause"].is_null());

    let rotated = send(http.post(proxy.admin_url("/rotate"))).await;
    assert_eq!(rotated.status, 200);
    assert_eq!(rotated.body, b"rotated: generation 1\n");
    let after = stats(&proxy).await;
    assert_eq!(after["filters"]["generation"], 1);
    assert_eq!(after["filters"]["rotations"]["forced"], 1);
    assert_eq!(after["filters"]["last_rotation_cause"], "forced");
    assert_eq!(after["filters"]["current"]["inserts"], 0);
    assert!(after["filters"]["previous"].is_object());
    let m = scrape(&proxy).await;
    assert_eq!(
        sample(&m, "secondhit_filter_rotations_total{cause=\"forced\"}"),
        1.0
    );
    assert_eq!(
        sample(&m, "secondhit_filter_rotations_total{cause=\"fill\"}"),
        0.0
    );
    // A key seen before the rotation is still remembered (it is in `previous` now).
    assert!(get(&proxy.url("/remembered")).await.cache.stored);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_under_policy_always_is_a_conflict() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let rotated = send(client().post(proxy.admin_url("/rotate"))).await;
    assert_eq!(rotated.status, 409);
    assert!(String::from_utf8_lossy(&rotated.body).contains("always"));
    let s = stats(&proxy).await;
    assert!(s["filters"].is_null());
    let m = scrape(&proxy).await;
    assert!(!m.keys().any(|name| name.starts_with("secondhit_filter_")));
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_listen_off_means_no_listener_and_the_public_port_is_refused() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |c| c.server.admin_listen = None).await;
    assert_eq!(proxy.admin, None);
    assert_eq!(get(&proxy.url("/x")).await.status, 200);
    proxy.stop().await;

    let error = Config::from_toml_str(
        "[server]\nlisten = \"127.0.0.1:8080\"\nadmin_listen = \"127.0.0.1:8080\"",
    )
    .expect_err("the public port is refused");
    assert!(
        error.to_string().starts_with("server.admin_listen:"),
        "{error}"
    );
    let off = Config::from_toml_str("[server]\nadmin_listen = \"off\"").expect("off is valid");
    assert_eq!(off.server.admin_listen, None);
}

/// `/healthz` answered 200 with its JSON saying `"status": "ok"` (it was the text `ok`
/// before it checked the store, the disk and the origin servers; the JSON names what is
/// degraded or failing).
fn assert_healthy(health: &crate::support::Seen) {
    let body: serde_json::Value = serde_json::from_slice(&health.body).expect("JSON");
    assert_eq!(
        (health.status, body["status"].as_str()),
        (200, Some("ok")),
        "{body}"
    );
}

/// More partial heads than the admin listener's connection limit (64) cannot keep
/// `/healthz` waiting for their header timeout: the oldest ones are closed to make room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_partial_heads_exceed_the_admin_limit() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    proxy.wait_scanned().await;
    let admin = proxy.admin.expect("the admin listener is on");
    // One bound for connecting and the answer: connections the listener does not take
    // wait in its backlog, and past it a connect waits too.
    let health = tokio::time::timeout(PATIENCE, async {
        let held = partial_heads(admin, 300).await;
        let health = get(&proxy.admin_url("/healthz")).await;
        (held, health)
    })
    .await;
    let (mut held, health) = health.expect("/healthz is answered while partial heads crowd in");
    assert_healthy(&health);
    // The first partial head was among the oldest: closed without an answer.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, held[0].read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the oldest partial head was closed");
    proxy.stop().await;
}

/// Partial heads holding every one of the proxy port's `server.max_connections` slots do
/// not reach the admin listener: `/healthz` still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_partial_heads_fill_the_proxy_port() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.max_connections = 8;
        // Longer than the test waits: the partial heads keep their slots throughout.
        c.server.header_read_timeout = Duration::from_secs(60);
    })
    .await;
    proxy.wait_scanned().await;
    let held = partial_heads(proxy.addr, 12).await;
    let health = tokio::time::timeout(PATIENCE, get(&proxy.admin_url("/healthz")))
        .await
        .expect("/healthz is answered while the proxy port is full");
    assert_healthy(&health);
    drop(held);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_served_is_documented_in_the_guide() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    let seen = get(&proxy.admin_url("/metrics")).await;
    let text = String::from_utf8(seen.body).expect("utf-8 metrics");
    let guide: String = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide"))
        .expect("the guide")
        .map(|entry| entry.expect("a page").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| std::fs::read_to_string(path).expect("read"))
        .collect();
    let mut families = 0;
    for line in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = line.split_once(' ').expect("name and type");
        // OpenMetrics names a counter's family without the `_total` its samples carry.
        let shown = match kind {
            "counter" => format!("`{name}_total`"),
            _ => format!("`{name}`"),
        };
        assert!(
            guide.contains(&shown),
            "{shown} ({kind}) is served but not in docs/guide"
        );
        families += 1;
    }
    assert!(families > 20, "{text}");
}

/// Without a token, a browser on another site could POST to the admin listener (a form
/// or `fetch` needs no preflight), or rebind its own name to the listener's address and
/// read it. The listener refuses a state-changing request whose `Origin` is not its own
/// or whose `Sec-Fetch-Site` says another site sent it, and any request whose `Host` is
/// not an IP literal, `localhost` or a name in `server.admin_hosts`; tools that send no
/// `Origin`, and the page's own same-origin requests, go on working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_requests_and_foreign_hosts_are_refused_without_a_token() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=600", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.server.admin_hosts = vec!["cache-admin.internal".to_owned()];
    })
    .await;
    let http = client();
    let page = proxy.url("/page");
    assert!(get(&page).await.cache.stored);
    proxy.wait_committed(1).await;
    let admin = proxy.admin.expect("admin listener");
    let purge = purge_url(&proxy, &page);

    for (name, value) in [
        ("origin", "http://attacker.example".to_owned()),
        ("origin", "null".to_owned()),
        ("origin", format!("http://{admin}.attacker.example")),
        ("sec-fetch-site", "cross-site".to_owned()),
        ("sec-fetch-site", "same-site".to_owned()),
    ] {
        let refused = send(http.post(&purge).header(name, &value)).await;
        assert_eq!(refused.status, 403, "{name}: {value}");
        let refused = send(http.post(proxy.admin_url("/rotate")).header(name, &value)).await;
        assert_eq!(refused.status, 403, "{name}: {value}");
    }
    assert!(
        get(&page).await.cache.hit,
        "the refused purges purged nothing"
    );

    for host in [
        "attacker.example",
        "attacker.example:9090",
        "127.0.0.1.nip.io",
    ] {
        let refused = send(http.get(proxy.admin_url("/stats")).header("host", host)).await;
        assert_eq!(refused.status, 421, "Host: {host}");
        let refused = send(http.post(&purge).header("host", host)).await;
        assert_eq!(refused.status, 421, "Host: {host}");
    }
    assert!(
        get(&page).await.cache.hit,
        "the refused purges purged nothing"
    );

    let port = admin.port();
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("CACHE-ADMIN.internal.:{port}"),
        "10.1.2.3".to_owned(),
    ] {
        let seen = send(http.get(proxy.admin_url("/stats")).header("host", &host)).await;
        assert_eq!(seen.status, 200, "Host: {host}");
    }
    // The page's own requests: same origin, as a browser labels them. Rotating reaches
    // the endpoint (409: `always` keeps no filters to rotate).
    let same_origin = http
        .post(proxy.admin_url("/rotate"))
        .header("origin", format!("http://{admin}"))
        .header("sec-fetch-site", "same-origin");
    assert_eq!(send(same_origin).await.status, 409);
    let purged = send(http.post(&purge)).await;
    assert_eq!(purged.status, 200, "a tool sends no Origin");
    assert!(get(&page).await.cache.stored, "purged, then stored again");
    proxy.stop().await;
}

/// With a token set, the token is what keeps a rebound page out (it cannot present it),
/// so a scraper may reach the listener by any name; a page of another origin still
/// cannot change state, token or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_the_listener_answers_to_any_host_name() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=600", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.admin_token = Some("s3cret-token".to_owned())
    })
    .await;
    let http = client();
    let stats = http
        .get(proxy.admin_url("/stats"))
        .header("host", "cache-01.internal:9090")
        .header("authorization", "Bearer s3cret-token");
    assert_eq!(send(stats).await.status, 200);
    let unauthorized = http
        .get(proxy.admin_url("/stats"))
        .header("host", "cache-01.internal:9090");
    assert_eq!(send(unauthorized).await.status, 401);
    let cross_site = http
        .post(proxy.admin_url("/rotate"))
        .header("authorization", "Bearer s3cret-token")
        .header("origin", "http://attacker.example");
    assert_eq!(send(cross_site).await.status, 403);
    proxy.stop().await;
}

/// Every field path of `value` with its JSON type (`path: type`), array items under
/// `path[]`: the document's shape, whatever its figures.
fn shape(value: &serde_json::Value, path: &str, out: &mut std::collections::BTreeSet<String>) {
    use serde_json::Value;
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(items) => {
            for item in items {
                shape(item, &format!("{path}[]"), out);
            }
            "array"
        }
        Value::Object(fields) => {
            for (name, field) in fields {
                shape(field, &format!("{path}.{name}"), out);
            }
            "object"
        }
    };
    out.insert(format!("{path}: {kind}"));
}

/// `/stats` keeps the shape `docs/guide/admin.md` and the admin page read: under shadow
/// (every optional part filled: filters with a previous generation and a rotation, the
/// shadow counts, an origin server, rules with every lifetime, the estimates), each
/// field with its type, none missing and none added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_keeps_its_documented_shape() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let rules = Config::from_toml_str(
        "[[rule]]\nglob = \"/img/**\"\ndefault_ttl = \"10m\"\nttl_by_status = { 404 = \"30s\" }\n\
         grace = \"1h\"\n[[rule]]\npath = \"/api/\"\nmethods = [\"GET\"]\nbypass = true\n",
    )
    .expect("the rules load")
    .rules;
    let proxy = TestProxy::start(origin.addr, move |c| {
        c.admission.policy = AdmissionPolicy::Shadow;
        c.rules = rules;
    })
    .await;
    get(&proxy.url("/a")).await;
    proxy.wait_committed(1).await;
    get(&proxy.url("/a")).await;
    let rotated = send(client().post(proxy.admin_url("/rotate"))).await;
    assert_eq!(rotated.status, 200);
    let mut found = std::collections::BTreeSet::new();
    shape(&stats(&proxy).await, "", &mut found);
    let expected: std::collections::BTreeSet<String> = STATS_SHAPE
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let missing: Vec<_> = expected.difference(&found).collect();
    let added: Vec<_> = found.difference(&expected).collect();
    assert!(
        missing.is_empty() && added.is_empty(),
        "missing {missing:#?}\nadded {added:#?}\nfound:\n{}",
        found.iter().cloned().collect::<Vec<_>>().join("\n")
    );
    proxy.stop().await;
}

/// The shape [`stats_keeps_its_documented_shape`] expects.
const STATS_SHAPE: &str = "
.admission.decisions.already-stored: number
.admission.decisions.always: number
.admission.decisions.auto-always: number
.admission.decisions.auto-first-sight: number
.admission.decisions.auto-seen-before: number
.admission.decisions.first-sight: number
.admission.decisions.rule-always: number
.admission.decisions.rule-never: number
.admission.decisions.seen-before: number
.admission.decisions.shadow-first-sight: number
.admission.decisions: object
.admission.disk_writes_avoided_bytes: number
.admission.estimate.cache_bytes: number
.admission.estimate.chosen: string
.admission.estimate.curves: array
.admission.estimate.curves[].candidate: string
.admission.estimate.curves[].chosen: bool
.admission.estimate.curves[].points: array
.admission.estimate.curves[].points[].byte_miss_ratio: number
.admission.estimate.curves[].points[].cache_bytes: number
.admission.estimate.curves[].points[].configured_size: bool
.admission.estimate.curves[].points[].factor: number
.admission.estimate.curves[].points[].object_miss_ratio: number
.admission.estimate.curves[].points[].requests: number
.admission.estimate.curves[].points[].written_bytes_per_second: number
.admission.estimate.curves[].points[]: object
.admission.estimate.curves[].runnable: bool
.admission.estimate.curves[]: object
.admission.estimate.epoch_seconds: number
.admission.estimate.epochs: number
.admission.estimate.last_verdict: null
.admission.estimate.max_write_rate: null
.admission.estimate.memory_bytes: number
.admission.estimate.optimize: string
.admission.estimate.sample_rate: number
.admission.estimate.seconds: number
.admission.estimate.switches: number
.admission.estimate: object
.admission: object
.body_bytes.hit: number
.body_bytes.miss: number
.body_bytes.pass: number
.body_bytes.stale: number
.body_bytes: object
.byte_hit_ratio: number
.errors.bad-request: number
.errors.fill-not-started: number
.errors.must-revalidate: number
.errors.only-if-cached: number
.errors.origin-busy: number
.errors.origin-error: number
.errors.origin-timeout: number
.errors.origin-unreachable: number
.errors.rejected: number
.errors.request-body-timeout: number
.errors.store-lookup: number
.errors: object
.filters.bits_per_filter: number
.filters.bytes_per_filter: number
.filters.configured.expected_urls: number
.filters.configured.false_positive_rate: number
.filters.configured.max_age_seconds: number
.filters.configured.memory_bytes: null
.filters.configured.min_generation_age_seconds: number
.filters.configured.rotate: string
.filters.configured: object
.filters.current.age_seconds: number
.filters.current.estimated_false_positive_rate: number
.filters.current.estimated_keys: number
.filters.current.fill_ratio: number
.filters.current.inserts: number
.filters.current: object
.filters.estimated_pair_false_positive_rate: number
.filters.generation: number
.filters.generation_size: number
.filters.generation_target: number
.filters.last_rotation_cause: string
.filters.modelled_pair_false_positive_rate.after_rotation: number
.filters.modelled_pair_false_positive_rate.before_rotation: number
.filters.modelled_pair_false_positive_rate: object
.filters.previous.age_seconds: number
.filters.previous.estimated_false_positive_rate: number
.filters.previous.estimated_keys: number
.filters.previous.fill_ratio: number
.filters.previous.inserts: number
.filters.previous: object
.filters.probes: number
.filters.recent_rotations: array
.filters.recent_rotations[].cause: string
.filters.recent_rotations[].ended_generation_inserts: number
.filters.recent_rotations[].ended_generation_seconds: number
.filters.recent_rotations[].generation: number
.filters.recent_rotations[].seconds_ago: number
.filters.recent_rotations[]: object
.filters.rotations.age: number
.filters.rotations.fill: number
.filters.rotations.forced: number
.filters.rotations.idle: number
.filters.rotations.saturation: number
.filters.rotations: object
.filters.spares: array
.filters.spares[]: string
.filters: object
.hit_ratio: number
.origin.mean_seconds: number
.origin.p50_seconds: number
.origin.p99_seconds: number
.origin.requests: number
.origin.servers: array
.origin.servers[].failures: number
.origin.servers[].latency_buckets: array
.origin.servers[].latency_buckets[]: array
.origin.servers[].latency_buckets[][]: number
.origin.servers[].latency_buckets[][]: string
.origin.servers[].mean_seconds: number
.origin.servers[].requests: number
.origin.servers[].up: bool
.origin.servers[].url: string
.origin.servers[]: object
.origin: object
.policy: string
.requests.hit: number
.requests.miss: number
.requests.pass: number
.requests.stale: number
.requests: object
.rules: array
.rules[].bypass: bool
.rules[].default_ttl_seconds: null
.rules[].default_ttl_seconds: number
.rules[].glob: null
.rules[].glob: string
.rules[].grace_seconds: null
.rules[].grace_seconds: number
.rules[].methods: array
.rules[].methods[]: string
.rules[].path: null
.rules[].path: string
.rules[].rule: number
.rules[].site: string
.rules[].ttl_by_status_seconds.404: number
.rules[].ttl_by_status_seconds: object
.rules[]: object
.shadow.hits_lost: number
.shadow.hits_lost_bytes: number
.shadow.writes_avoided: number
.shadow.writes_avoided_bytes: number
.shadow: object
.store.bytes: number
.store.committed_bytes: number
.store.committed_fills: number
.store.dropped_fills: number
.store.evictions: number
.store.ghost_keys: number
.store.max_bytes: number
.store.memory_bytes: number
.store.memory_max_bytes: number
.store.memory_objects: number
.store.objects: number
.store.open_files: number
.store.open_files_max: number
.store.reserved_bytes: number
.store.scan_complete: bool
.store.tag_bytes: number
.store: object
.uptime_seconds: number
: object
";
