//! A site rule's lifetimes: `default_ttl` for responses the origin gives none,
//! `ttl_by_status` overriding the origin's freshness (404s included), and `grace` serving
//! stale while revalidating or when the origin fails; each shows in `Cache-Status`, and a
//! reload that changes them applies to the responses already stored.

use std::time::Duration;

use secondhit_proxy::config::{AdmissionPolicy, Config, Rules};

use crate::support::{Reply, Seen, TestOrigin, TestProxy, client, get, send, send_until_hit};

/// Starts the proxy in front of `origin` with the top-level `[[rule]]`s of `rules` (TOML,
/// loaded as the config file would be) and admission `always`.
async fn proxy_with_rules(origin: &TestOrigin, rules: &str) -> TestProxy {
    let rules = rules_of(rules);
    TestProxy::start(origin.addr, move |config| {
        config.rules = rules;
        config.admission.policy = AdmissionPolicy::Always;
    })
    .await
}

/// The `[[rule]]`s of a TOML text.
fn rules_of(text: &str) -> Rules {
    Config::from_toml_str(text).expect("the rules load").rules
}

/// GETs `path` until the answer is a hit.
async fn hit(proxy: &TestProxy, path: &str) -> Seen {
    send_until_hit(|| client().get(proxy.url(path))).await
}

#[tokio::test]
async fn a_response_without_freshness_is_cached_for_the_rules_default_ttl() {
    let origin = TestOrigin::start(|_| Reply::status(200, b"plain".to_vec())).await;
    let proxy = proxy_with_rules(
        &origin,
        r#"
[[rule]]
path = "/plain/"
default_ttl = "10m"
"#,
    )
    .await;
    let seen = hit(&proxy, "/plain/a").await;
    assert_eq!(seen.body, b"plain");
    assert_eq!(seen.cache.detail.as_deref(), Some("default-ttl"));
    let ttl = seen.cache.ttl.expect("a ttl");
    assert!((590..=600).contains(&ttl), "ttl {ttl}");
    assert_eq!(origin.count("/plain/a"), 1);
    // Outside the rule, the same response still has no lifetime.
    let other = get(&proxy.url("/other")).await;
    assert_eq!(other.cache.detail.as_deref(), Some("no-lifetime"));
}

#[tokio::test(start_paused = true)]
async fn a_404_is_cached_for_the_rules_time_then_fetched_again() {
    let origin = TestOrigin::start(|_| Reply::status(404, b"gone".to_vec())).await;
    let proxy = proxy_with_rules(
        &origin,
        r#"
[[rule]]
path = "/"
ttl_by_status = { 404 = "30s" }
"#,
    )
    .await;
    let seen = hit(&proxy, "/missing").await;
    assert_eq!(seen.status, 404);
    assert_eq!(seen.cache.detail.as_deref(), Some("rule-ttl"));
    assert_eq!(origin.count("/missing"), 1);
    tokio::time::advance(Duration::from_secs(20)).await;
    let still = get(&proxy.url("/missing")).await;
    assert!(still.cache.hit, "20s in: {:?}", still.cache);
    tokio::time::advance(Duration::from_secs(11)).await;
    let later = get(&proxy.url("/missing")).await;
    assert_eq!(later.status, 404);
    assert_eq!(
        later.cache.fwd.as_deref(),
        Some("stale"),
        "{:?}",
        later.cache
    );
    assert_eq!(origin.count("/missing"), 2);
}

#[tokio::test]
async fn an_origin_max_age_0_is_overridden_on_a_chosen_path() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=0", b"body".to_vec())).await;
    let proxy = proxy_with_rules(
        &origin,
        r#"
[[rule]]
path = "/static/"
ttl_by_status = { 200 = "1h" }
"#,
    )
    .await;
    let seen = hit(&proxy, "/static/app.js").await;
    assert_eq!(seen.cache.detail.as_deref(), Some("rule-ttl"));
    let ttl = seen.cache.ttl.expect("a ttl");
    assert!((3590..=3600).contains(&ttl), "ttl {ttl}");
    assert_eq!(origin.count("/static/app.js"), 1);
    // Elsewhere the origin's max-age=0 stands.
    let other = get(&proxy.url("/api/x")).await;
    assert_eq!(other.cache.detail.as_deref(), Some("no-lifetime"));
}

#[tokio::test]
async fn an_override_never_stores_private_no_store_or_cookies() {
    let origin = TestOrigin::start(|head| match head.uri.path() {
        "/private" => Reply::ok("private", b"mine".to_vec()),
        "/no-store" => Reply::ok("no-store", b"mine".to_vec()),
        _ => Reply::ok("max-age=0", b"mine".to_vec()).header("set-cookie", "session=1"),
    })
    .await;
    let proxy = proxy_with_rules(
        &origin,
        r#"
[[rule]]
path = "/"
ttl_by_status = { 200 = "1h" }
default_ttl = "1h"
"#,
    )
    .await;
    for (path, detail) in [
        ("/private", "private"),
        ("/no-store", "no-store"),
        ("/cookie", "set-cookie"),
    ] {
        for _ in 0..2 {
            let seen = get(&proxy.url(path)).await;
            assert_eq!(seen.cache.detail.as_deref(), Some(detail), "{path}");
            assert!(!seen.cache.hit && !seen.cache.stored, "{path}");
        }
        assert_eq!(origin.count(path), 2, "{path}");
    }
}

#[tokio::test(start_paused = true)]
async fn grace_serves_stale_while_the_origin_is_down() {
    let origin = TestOrigin::start(|head| match head.uri.path() {
        // Its own stale-while-revalidate (none at all): only grace's stale-if-error applies.
        "/own-window" => Reply::ok("max-age=10, stale-while-revalidate=0", b"b".to_vec()),
        _ => Reply::ok("max-age=10", b"a".to_vec()),
    })
    .await;
    let proxy = proxy_with_rules(
        &origin,
        r#"
[[rule]]
path = "/"
grace = "1h"
"#,
    )
    .await;
    hit(&proxy, "/plain").await;
    hit(&proxy, "/own-window").await;
    tokio::time::advance(Duration::from_secs(60)).await;
    origin.go_down().await;
    let stale = get(&proxy.url("/plain")).await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.body, b"a");
    assert!(stale.cache.hit, "{:?}", stale.cache);
    assert_eq!(stale.cache.detail.as_deref(), Some("grace-revalidate"));
    let on_error = get(&proxy.url("/own-window")).await;
    assert_eq!(on_error.status, 200);
    assert_eq!(on_error.body, b"b");
    assert_eq!(on_error.cache.detail.as_deref(), Some("grace-if-error"));
    // Past the grace, the origin's failure shows.
    tokio::time::advance(Duration::from_secs(2 * 3600)).await;
    let expired = get(&proxy.url("/own-window")).await;
    assert_eq!(expired.status, 502, "{:?}", expired.cache);
}

#[tokio::test(start_paused = true)]
async fn a_reload_that_changes_a_ttl_applies_to_stored_responses() {
    let origin = TestOrigin::start(|_| Reply::status(200, b"plain".to_vec())).await;
    let short = r#"
[[rule]]
path = "/"
default_ttl = "1m"
"#;
    let proxy = proxy_with_rules(&origin, short).await;
    let seen = hit(&proxy, "/a").await;
    assert!(
        seen.cache.ttl.is_some_and(|ttl| ttl <= 60),
        "{:?}",
        seen.cache
    );
    let mut next = Config::clone(&proxy.settings.load().settings);
    next.rules = rules_of(&short.replace("1m", "1h"));
    proxy.reloader.apply(next).await.expect("reload");
    tokio::time::advance(Duration::from_secs(120)).await;
    let after = get(&proxy.url("/a")).await;
    assert!(after.cache.hit, "{:?}", after.cache);
    assert_eq!(after.cache.detail.as_deref(), Some("default-ttl"));
    let ttl = after.cache.ttl.expect("a ttl");
    assert!((3470..=3480).contains(&ttl), "ttl {ttl}");
    assert_eq!(origin.count("/a"), 1);
    // And back: the stored response is now past the shorter lifetime.
    let mut back = Config::clone(&proxy.settings.load().settings);
    back.rules = rules_of(short);
    proxy.reloader.apply(back).await.expect("reload");
    let refetched = send(client().get(proxy.url("/a"))).await;
    assert_eq!(
        refetched.cache.fwd.as_deref(),
        Some("stale"),
        "{:?}",
        refetched.cache
    );
    assert_eq!(origin.count("/a"), 2);
}

#[tokio::test]
async fn the_stats_show_each_rules_lifetimes() {
    let origin = TestOrigin::start(|_| Reply::status(200, b"plain".to_vec())).await;
    let proxy = proxy_with_rules(
        &origin,
        r#"
[[rule]]
glob = "/img/**"
default_ttl = "10m"
ttl_by_status = { 404 = "30s" }
grace = "1h"

[[rule]]
path = "/api/"
bypass = true
"#,
    )
    .await;
    let stats = crate::support::stats(&proxy).await;
    let rules = stats["rules"].as_array().expect("a rules list");
    assert_eq!(rules.len(), 2, "{rules:?}");
    let first = &rules[0];
    assert_eq!(first["site"], "default");
    assert_eq!(first["glob"], "/img/**");
    assert_eq!(first["default_ttl_seconds"], 600.0);
    assert_eq!(first["ttl_by_status_seconds"]["404"], 30.0);
    assert_eq!(first["grace_seconds"], 3600.0);
    assert_eq!(rules[1]["path"], "/api/");
    assert_eq!(rules[1]["bypass"], true);
    assert!(rules[1]["default_ttl_seconds"].is_null());
}
