//! Several sites routed by Host to their own origins, and each kind of per-site cache
//! rule changing the decision `Cache-Status` shows. The sites are written in TOML and
//! loaded as the config file would be; their origins are real test origins.

use secondhit_proxy::config::Config;

use crate::support::{Reply, Seen, TestOrigin, TestProxy, client, send};

/// An origin that answers every GET with `name:path?query`, cacheable for a minute, and
/// `Content-Type` after the path's extension (`.png` is an image, the rest text).
async fn named_origin(name: &'static str) -> TestOrigin {
    TestOrigin::start(move |head| {
        let target = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let body = format!("{name}:{target}").into_bytes();
        let media = if head.uri.path().ends_with(".png") {
            "image/png"
        } else {
            "text/plain"
        };
        Reply::ok("max-age=60", body).header("content-type", media)
    })
    .await
}

/// Starts the proxy with `sites` (TOML: `[[site]]`s, `[[rule]]`s, `[server]` and
/// `[admission]` keys) loaded as from a file; the origin URLs in it are `{A}` and `{B}`,
/// and `a` is `[origin]` too.
async fn proxy_with(sites: &str, a: &TestOrigin, b: &TestOrigin) -> TestProxy {
    let text = sites
        .replace("{A}", &format!("http://{}", a.addr))
        .replace("{B}", &format!("http://{}", b.addr));
    let file = Config::from_toml_str(&text).expect("the sites load");
    TestProxy::start(a.addr, move |config| {
        config.sites = file.sites;
        config.rules = file.rules;
        config.server.unknown_host = file.server.unknown_host;
        config.admission.policy = file.admission.policy;
    })
    .await
}

/// GETs `path` from the proxy as `host`, with extra `headers`.
async fn get_as(proxy: &TestProxy, host: &str, path: &str, headers: &[(&str, &str)]) -> Seen {
    let mut request = client().get(proxy.url(path)).header("host", host);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(request).await
}

/// GETs `path` as `host` and asserts that nothing stored answered it.
async fn assert_uri_miss(proxy: &TestProxy, host: &str, path: &str) {
    let seen = get_as(proxy, host, path, &[]).await;
    let fwd = seen.cache.fwd.as_deref();
    assert_eq!(fwd, Some("uri-miss"), "{host}{path}: {:?}", seen.cache);
}

/// GETs `path` as `host` until it is a hit, and returns that hit.
async fn hit_as(proxy: &TestProxy, host: &str, path: &str) -> Seen {
    crate::support::send_until_hit(|| client().get(proxy.url(path)).header("host", host)).await
}

const TWO_SITES: &str = r#"
[server]
unknown_host = "421"

[[site]]
hosts = ["a.test"]
[site.origin]
url = "{A}"

[[site]]
hosts = ["*.b.test"]
[site.origin]
url = "{B}"
"#;

#[tokio::test]
async fn two_sites_route_by_host_to_their_own_origins_and_objects() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(TWO_SITES, &a, &b).await;
    for (host, body) in [
        ("a.test", "a:/same"),
        ("one.b.test", "b:/same"),
        ("Two.B.test:8080", "b:/same"),
    ] {
        let first = get_as(&proxy, host, "/same", &[]).await;
        assert_eq!(first.body, body.as_bytes(), "{host}");
        assert_eq!(first.cache.fwd.as_deref(), Some("uri-miss"), "{host}");
        let hit = hit_as(&proxy, host, "/same").await;
        assert_eq!(hit.body, body.as_bytes(), "{host}: its own object");
    }
    // Each host filled its own object (first sight, then the fill): two fetches each.
    assert_eq!(a.count("/same"), 2);
    assert_eq!(b.count("/same"), 4);
    proxy.stop().await;
}

#[tokio::test]
async fn each_site_has_its_own_requests_and_bytes_in_the_metrics() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(TWO_SITES, &a, &b).await;
    // a.test: a first sight, a stored miss, then hits; one.b.test: one first sight.
    let hit = hit_as(&proxy, "a.test", "/x").await;
    get_as(&proxy, "one.b.test", "/y", &[]).await;
    // A host no site names: the proxy answers 421 itself, which no site counts.
    assert_eq!(get_as(&proxy, "other.test", "/z", &[]).await.status, 421);
    let m = crate::support::scrape(&proxy).await;
    let site = |name: &str, site: &str, result: &str| {
        let key = format!("{name}{{site=\"{site}\",result=\"{result}\"}}");
        crate::support::sample(&m, &key)
    };
    let a_hits = site("secondhit_site_requests_total", "a.test", "hit");
    assert!(a_hits >= 1.0, "{a_hits}");
    assert_eq!(site("secondhit_site_requests_total", "a.test", "miss"), 2.0);
    assert_eq!(
        site("secondhit_site_requests_total", "*.b.test", "miss"),
        1.0
    );
    assert_eq!(
        site("secondhit_site_requests_total", "*.b.test", "hit"),
        0.0
    );
    assert_eq!(
        site("secondhit_site_response_body_bytes_total", "a.test", "hit"),
        a_hits * hit.body.len() as f64
    );
    let b_bytes = site(
        "secondhit_site_response_body_bytes_total",
        "*.b.test",
        "miss",
    );
    assert_eq!(b_bytes, "b:/y".len() as f64);
    proxy.stop().await;
}

#[tokio::test]
async fn an_unknown_host_gets_the_configured_answer() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(TWO_SITES, &a, &b).await;
    // `*.b.test` names the names below b.test, not b.test itself.
    for host in ["elsewhere.test", "b.test"] {
        let seen = get_as(&proxy, host, "/x", &[]).await;
        assert_eq!(seen.status, 421, "{host}");
        assert_eq!(seen.cache.detail.as_deref(), Some("unknown-host"));
    }
    proxy.stop().await;
    let not_found = TWO_SITES.replace(r#""421""#, r#""404""#);
    let proxy = proxy_with(&not_found, &a, &b).await;
    assert_eq!(
        get_as(&proxy, "elsewhere.test", "/x", &[]).await.status,
        404
    );
    proxy.stop().await;
    // "default": [origin] serves it (the test config's origin is `a`).
    let default = TWO_SITES.replace(r#""421""#, r#""default""#);
    let c = named_origin("c").await;
    let proxy = proxy_with(&default, &c, &b).await;
    let seen = get_as(&proxy, "elsewhere.test", "/x", &[]).await;
    assert_eq!(seen.body, b"c:/x");
    proxy.stop().await;
    assert_eq!(
        (a.total(), b.total()),
        (0, 0),
        "no unknown host reached a site's origin"
    );
}

/// One site with a rule of each kind. The policy is "shadow", which stores every
/// storable response: a rule that keeps one out, or waits for the second request, shows.
const RULES: &str = r#"
[admission]
policy = "shadow"

[[site]]
hosts = ["r.test"]
[site.origin]
url = "{A}"

[[site.rule]]
path = "/never/"
admission = "never"

[[site.rule]]
glob = "/second/**/*.bin"
admission = "second-hit"

[[site.rule]]
path = "/private/"
bypass = true

[[site.rule]]
path = "/static/"
ignore_client_no_cache = true

[[site.rule]]
path = "/typed/"
content_type = ["image/"]
admission = "never"

[[site.rule]]
path = "/sized/"
min_size = 16
admission = "never"

[[site.rule]]
path = "/q/"
drop_query = ["utm_source"]
sort_query = true
ignore_port = true
"#;

#[tokio::test]
async fn admission_rules_change_the_decision_per_path() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(RULES, &a, &b).await;
    let get = |path: &'static str| get_as(&proxy, "r.test", path, &[]);
    // No rule: the policy stores at once.
    assert!(get("/plain").await.cache.stored);
    let never = get("/never/x").await;
    assert!(!never.cache.stored);
    assert_eq!(never.cache.detail.as_deref(), Some("rule-never"));
    assert_eq!(
        get("/never/x").await.cache.detail.as_deref(),
        Some("rule-never")
    );
    // second-hit obeys the filters, which have not seen the key yet.
    let first = get("/second/a/b.bin").await;
    assert_eq!(first.cache.detail.as_deref(), Some("first-sight"));
    assert!(get("/second/a/b.bin").await.cache.stored);
    // The glob's `**/*.bin` does not match another extension: the policy stores it.
    assert!(get("/second/a/b.txt").await.cache.stored);
    // A response rule: images under /typed/ are kept out, the rest stored.
    let image = get("/typed/a.png").await;
    assert_eq!(image.cache.detail.as_deref(), Some("rule-never"));
    assert!(get("/typed/a.txt").await.cache.stored);
    // A size rule: the declared length of `a:/sized/long` (13 bytes) is under its
    // min_size, that of `a:/sized/much-longer` (20 bytes) is not.
    assert!(get("/sized/long").await.cache.stored);
    let large = get("/sized/much-longer").await;
    assert_eq!(large.cache.detail.as_deref(), Some("rule-never"));
    proxy.stop().await;
}

#[tokio::test]
async fn bypass_skips_the_cache_and_says_so() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(RULES, &a, &b).await;
    for _ in 0..3 {
        let seen = get_as(&proxy, "r.test", "/private/p", &[]).await;
        assert_eq!(seen.body, b"a:/private/p");
        assert_eq!(seen.cache.fwd.as_deref(), Some("bypass"));
        assert_eq!(seen.cache.detail.as_deref(), Some("bypass"));
        assert!(!seen.cache.stored);
    }
    assert_eq!(a.count("/private/p"), 3);
    proxy.stop().await;
}

#[tokio::test]
async fn ignore_client_no_cache_serves_a_fresh_hit_anyway() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(RULES, &a, &b).await;
    let no_cache = [("cache-control", "no-cache")];
    for path in ["/static/s", "/plain-too"] {
        assert!(get_as(&proxy, "r.test", path, &[]).await.cache.stored);
        hit_as(&proxy, "r.test", path).await;
    }
    let ruled = get_as(&proxy, "r.test", "/static/s", &no_cache).await;
    assert!(ruled.cache.hit, "{:?}", ruled.cache);
    let pragma = get_as(&proxy, "r.test", "/static/s", &[("pragma", "no-cache")]).await;
    assert!(pragma.cache.hit, "{:?}", pragma.cache);
    // Without the rule the client's no-cache goes to the origin.
    let plain = get_as(&proxy, "r.test", "/plain-too", &no_cache).await;
    assert_eq!(plain.cache.fwd.as_deref(), Some("request"));
    assert_eq!(a.count("/static/s"), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn a_shaped_key_turns_other_spellings_into_hits() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(RULES, &a, &b).await;
    let cases = [
        // A dropped parameter.
        (
            "r.test",
            "/q/a?x=1&utm_source=mail",
            "r.test",
            "/q/a?x=1&utm_source=web",
        ),
        // Sorted parameters.
        ("r.test", "/q/b?b=2&a=1", "r.test", "/q/b?a=1&b=2"),
        // The port left out.
        ("r.test:8080", "/q/c", "r.test:9090", "/q/c"),
    ];
    for (first_host, first, then_host, then) in cases {
        assert!(get_as(&proxy, first_host, first, &[]).await.cache.stored);
        hit_as(&proxy, first_host, first).await;
        let asked = a.total();
        let other = get_as(&proxy, then_host, then, &[]).await;
        assert!(other.cache.hit, "{then_host}{then}: {:?}", other.cache);
        assert_eq!(a.total(), asked, "{then_host}{then} reached the origin");
        // The origin got the query as the client sent it, once.
        assert_eq!(a.count(first), 1, "{first}");
    }
    // Outside the rule's path the query is the key's, as sent.
    assert!(get_as(&proxy, "r.test", "/k?b&a", &[]).await.cache.stored);
    assert_uri_miss(&proxy, "r.test", "/k?a&b").await;
    proxy.stop().await;
}

#[tokio::test]
async fn the_guide_sites_config_checks_and_serves_as_it_says() {
    // The walk-through's block, the one with cache rules.
    let text = crate::support::guide_toml_block_with("sites.md", "[[site.rule]]");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("sites.toml");
    std::fs::write(&file, &text).expect("write the config");
    let output = std::process::Command::new(crate::support::serve::BIN)
        .arg("check-config")
        .arg(&file)
        .output()
        .expect("run check-config");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "check-config: {stderr}");
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let moved = text
        .replace("http://127.0.0.1:8081", "{A}")
        .replace("http://127.0.0.1:8082", "{B}");
    let proxy = proxy_with(&moved, &a, &b).await;
    // Small images: stored on their first request.
    let image = get_as(&proxy, "www.example.com", "/images/logo.png", &[]).await;
    assert!(image.cache.stored, "{:?}", image.cache);
    // Tracking parameters do not split objects: the second spelling is the key's
    // second request, and second-hit stores it.
    let first = get_as(&proxy, "example.com", "/page?b=1&utm_source=mail", &[]).await;
    assert_eq!(first.cache.detail.as_deref(), Some("first-sight"));
    let second = get_as(&proxy, "example.com", "/page?utm_medium=x&b=1", &[]).await;
    assert!(second.cache.stored, "{:?}", second.cache);
    // The other site: its own origin, and accounts bypass the cache.
    let account = get_as(&proxy, "eu.cdn.example.com", "/account/me", &[]).await;
    assert_eq!(account.body, b"b:/account/me");
    assert_eq!(account.cache.fwd.as_deref(), Some("bypass"));
    assert_eq!(
        get_as(&proxy, "cdn.example.com", "/", &[]).await.status,
        421
    );
    proxy.stop().await;
}

#[tokio::test]
async fn absolute_form_and_http2_authority_route_like_host() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(TWO_SITES, &a, &b).await;
    let absolute = b"GET http://one.b.test/abs HTTP/1.1\r\nHost: one.b.test\r\n\r\n";
    let raw = crate::proxy_hygiene::common::exchange(&proxy, absolute).await;
    assert_eq!(raw.body, b"b:/abs");
    // HTTP/2 names the host in `:authority` (the URI), with no Host field.
    let h2 = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .resolve("a.test", proxy.addr)
        .build()
        .expect("h2c client");
    let url = format!("http://a.test:{}/h2", proxy.addr.port());
    let seen = send(h2.get(url)).await;
    assert_eq!(seen.body, b"a:/h2");
    proxy.stop().await;
}

#[tokio::test]
async fn an_unsafe_method_invalidates_the_shaped_key() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(RULES, &a, &b).await;
    assert!(
        get_as(&proxy, "r.test", "/q/i?x=1&utm_source=a", &[])
            .await
            .cache
            .stored
    );
    hit_as(&proxy, "r.test", "/q/i?x=1").await;
    let post = client()
        .post(proxy.url("/q/i?utm_source=b&x=1"))
        .header("host", "r.test");
    assert_eq!(send(post).await.status, 200);
    assert_uri_miss(&proxy, "r.test", "/q/i?x=1").await;
    proxy.stop().await;
}

#[tokio::test]
async fn purge_takes_the_shaped_url() {
    let (a, b) = (named_origin("a").await, named_origin("b").await);
    let proxy = proxy_with(RULES, &a, &b).await;
    let spelled = "/q/p?b=2&utm_source=z&a=1";
    assert!(
        get_as(&proxy, "r.test:8080", spelled, &[])
            .await
            .cache
            .stored
    );
    hit_as(&proxy, "r.test:8080", spelled).await;
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("url", "http://r.test/q/p?a=1&b=2")
        .finish();
    let purged = send(client().post(proxy.admin_url(&format!("/purge?{query}")))).await;
    assert_eq!(
        purged.status,
        200,
        "{}",
        String::from_utf8_lossy(&purged.body)
    );
    assert_uri_miss(&proxy, "r.test:8080", spelled).await;
    proxy.stop().await;
}

/// The config file at `path` (relative to the repository), as the proxy under test would
/// serve it: everything as the file says but the listeners (port 0), the cache directory
/// (the test's), the access log (off) and the origin of every site (`origin`).
fn shipped(path: &str, origin: &TestOrigin) -> impl FnOnce(&mut Config) {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let mut shipped = Config::load(&file).unwrap_or_else(|e| panic!("{path} loads: {e}"));
    let url: http::Uri = format!("http://{}", origin.addr).parse().expect("url");
    shipped.origin.url = url.clone();
    for site in &mut shipped.sites {
        site.origin.url = url.clone();
    }
    move |config: &mut Config| {
        let test = std::mem::replace(config, shipped);
        config.server.listen = test.server.listen;
        config.server.admin_listen = test.server.admin_listen;
        config.server.workers = test.server.workers;
        config.cache.dir = test.cache.dir;
        config.log.access_log = test.log.access_log;
    }
}

/// Under each config this repository ships (the example and the Debian package's), a client
/// that invents `Host` values gets no origin fetch and no entry for them, while the
/// names the config lists (the five-minute walk-through's `127.0.0.1`) are served and
/// cached.
#[tokio::test]
async fn invented_hosts_cannot_multiply_entries_under_the_shipped_configs() {
    const INVENTED: usize = 16;
    for path in ["config/secondhit.toml", "config/package/secondhit.toml"] {
        let origin = TestOrigin::start(|_| Reply::ok("max-age=600", b"page".to_vec())).await;
        let proxy = TestProxy::start(origin.addr, shipped(path, &origin)).await;
        let mut answers = Vec::new();
        for _round in 0..2 {
            for i in 0..INVENTED {
                let seen = get_as(&proxy, &format!("invented-{i}.example"), "/page", &[]).await;
                answers.push((seen.status, seen.cache.detail));
            }
        }
        assert_eq!(
            origin.count("/page"),
            0,
            "{path}: invented hosts reached the origin"
        );
        assert_eq!(
            proxy.store.stats().objects,
            0,
            "{path}: entries for invented hosts"
        );
        let refused = (421, Some("unknown-host".to_owned()));
        assert!(answers.iter().all(|a| *a == refused), "{path}: {answers:?}");

        let listed = format!("127.0.0.1:{}", proxy.addr.port());
        let hit = hit_as(&proxy, &listed, "/page").await;
        assert_eq!(hit.body, b"page", "{path}: the listed host is served");
        assert_eq!(origin.count("/page"), 2, "{path}: first sight, then stored");
        assert_eq!(proxy.store.stats().objects, 1, "{path}");
        proxy.stop().await;
    }
}
