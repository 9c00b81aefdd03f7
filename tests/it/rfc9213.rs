//! RFC 9213 targeted cache control over real sockets: `CDN-Cache-Control` and the
//! operator's `cache.targeted_field` replace `Cache-Control` and `Expires` for this cache,
//! and pass through unchanged to the client. Each test names the section it checks.

use http::HeaderName;
use secondhit_proxy::config::{AdmissionPolicy, Config};

use crate::rfc9111::common::*;
use crate::support::{Reply, TestOrigin, TestProxy, http_date_from_now};

/// The operator's targeted field these scenarios configure.
const MINE: &str = "secondhit-cache-control";

/// A proxy with admission `always` and `cache.targeted_field = MINE`.
async fn proxy_targeting_mine(origin: &TestOrigin) -> TestProxy {
    TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.targeted_field = Some(HeaderName::from_static(MINE));
    })
    .await
}

/// RFC 9213 §2.1, §3: `CDN-Cache-Control` gives the lifetime in place of a
/// `Cache-Control: no-store`; both fields reach the client as the origin sent them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_cache_control_replaces_cache_control() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("no-store", b"cdn".to_vec()).header("cdn-cache-control", "max-age=100")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    let miss = fill(&proxy, "/cdn", &[], 1).await;
    let hit = get_with(&proxy, "/cdn", &[]).await;
    assert_hit(&hit);
    assert_eq!(hit.body, b"cdn");
    assert_eq!(origin.count("/cdn"), 1);
    let ttl = ttl(&hit);
    assert!(
        (90..=100).contains(&ttl),
        "ttl from CDN-Cache-Control: {ttl}"
    );
    for seen in [&miss, &hit] {
        assert_eq!(header(seen, "cdn-cache-control"), Some("max-age=100"));
        assert_eq!(header(seen, "cache-control"), Some("no-store"));
    }
}

/// RFC 9213 §2.1: `no-store` in `CDN-Cache-Control` wins over a storable `Cache-Control`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_no_store_overrides_a_cacheable_cache_control() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=100", b"ns".to_vec()).header("cdn-cache-control", "no-store")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    let first = get_with(&proxy, "/ns", &[]).await;
    assert!(!first.cache.stored, "{:?}", first.cache);
    assert_eq!(first.cache.detail.as_deref(), Some("no-store"));
    let second = get_with(&proxy, "/ns", &[]).await;
    assert!(!second.cache.hit, "{:?}", second.cache);
    assert_eq!(origin.count("/ns"), 2);
}

/// RFC 9213 §2.1: a targeted field overrides `Expires` too: with `must-revalidate` and no
/// `max-age` in it, a far `Expires` gives no lifetime, so every use is revalidated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_targeted_field_overrides_expires() {
    let origin = TestOrigin::start_conditional("\"ex\"", |_| {
        Reply::status(200, b"ex".to_vec()).headers(&[
            ("date", &http_date_from_now(0)),
            ("expires", &http_date_from_now(3600)),
            ("cdn-cache-control", "must-revalidate"),
        ])
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/ex", &[], 1).await;
    let second = get_with(&proxy, "/ex", &[]).await;
    assert_forwarded(&second, "stale");
    assert_eq!(second.body, b"ex");
    assert_eq!(origin.count("/ex"), 2);
}

/// RFC 9213 §2.2: a targeted field that is not a valid Dictionary (upper-case keys) is
/// ignored, and `Cache-Control` applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_targeted_field_is_ignored() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=50", b"bad".to_vec()).header("cdn-cache-control", "Max-Age=1000")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/bad", &[], 1).await;
    let hit = get_with(&proxy, "/bad", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!((40..=50).contains(&ttl), "ttl from Cache-Control: {ttl}");
}

/// RFC 9213 §2.1: the operator's targeted field comes first on the target list, ahead of
/// `CDN-Cache-Control` and `Cache-Control`; a targeted field not on the list changes
/// nothing and is passed through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_field_takes_precedence() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=10", b"mine".to_vec()).headers(&[
            ("cdn-cache-control", "max-age=20"),
            (MINE, "max-age=300"),
            ("other-cache-control", "no-store"),
        ])
    })
    .await;
    let proxy = proxy_targeting_mine(&origin).await;
    fill(&proxy, "/mine", &[], 1).await;
    let hit = get_with(&proxy, "/mine", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!((290..=300).contains(&ttl), "ttl from {MINE}: {ttl}");
    assert_eq!(header(&hit, MINE), Some("max-age=300"));
    assert_eq!(header(&hit, "other-cache-control"), Some("no-store"));
}

/// RFC 9213 §2.1 under a reload: a stored response's freshness, kept with its entry, is
/// judged again when `cache.targeted_field` changes (here: removed, so
/// `CDN-Cache-Control` applies to the next hit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_targeted_field_applies_to_the_next_hit() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=10", b"swap".to_vec())
            .headers(&[("cdn-cache-control", "max-age=100"), (MINE, "max-age=1000")])
    })
    .await;
    let proxy = proxy_targeting_mine(&origin).await;
    fill(&proxy, "/swap", &[], 1).await;
    // Two hits: the freshness is judged on the first and kept with the entry.
    for _ in 0..2 {
        let hit = get_with(&proxy, "/swap", &[]).await;
        assert_hit(&hit);
        let ttl = ttl(&hit);
        assert!((990..=1000).contains(&ttl), "ttl from {MINE}: {ttl}");
    }
    let mut config = Config::clone(&proxy.settings.load().settings);
    config.cache.targeted_field = None;
    proxy.settings.replace_settings(config);
    let hit = get_with(&proxy, "/swap", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!(
        (90..=100).contains(&ttl),
        "ttl from CDN-Cache-Control: {ttl}"
    );
    assert_eq!(origin.count("/swap"), 1);
}

/// RFC 9213 §2.2: a delta-seconds directive whose value is not an Integer (the String
/// `s-maxage="600"`, the Decimal `max-age=1.5`) is ignored, not read as a number: the
/// field still replaces `Cache-Control`, so the response has no lifetime and is not
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lifetime_of_the_wrong_type_is_ignored() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=100", b"typed".to_vec())
            .header("cdn-cache-control", "s-maxage=\"600\", max-age=1.5")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/typed", &[]).await;
        assert!(!seen.cache.hit, "{:?}", seen.cache);
        assert_eq!(seen.cache.detail.as_deref(), Some("no-lifetime"));
        assert_eq!(seen.body, b"typed");
    }
    assert_eq!(origin.count("/typed"), 2);
}

/// RFC 9213 §2.2: `no-store=3` (an Integer where `no-store` takes no value) is ignored,
/// and the field's well-typed `max-age` gives the lifetime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flag_with_a_value_is_ignored() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("no-store", b"flag".to_vec())
            .header("cdn-cache-control", "no-store=3, max-age=100")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/flag", &[], 1).await;
    let hit = get_with(&proxy, "/flag", &[]).await;
    assert_hit(&hit);
    assert_eq!(hit.body, b"flag");
    assert_eq!(origin.count("/flag"), 1);
    let ttl = ttl(&hit);
    assert!((90..=100).contains(&ttl), "ttl from max-age=100: {ttl}");
}
