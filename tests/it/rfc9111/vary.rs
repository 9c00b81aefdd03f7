//! RFC 9111 §4.1: selecting among stored variants by the headers named in `Vary`.
//!
//! The first varied response of a URL commits two entries, the URL's variant marker and
//! the variant itself; the commit counts the tests wait for include the marker.

use secondhit::config::AdmissionPolicy;

use super::common::*;
use crate::support::{Reply, TestOrigin, TestProxy};

/// An origin answering `Vary: <vary>` (fresh for 100 s) with a body naming the request's
/// value of `echo` as it arrived, e.g. `accept-language=en`.
async fn varying_origin(vary: &'static str, echo: &'static str) -> TestOrigin {
    TestOrigin::start(move |head| {
        let value = request_header(head, echo).unwrap_or("<absent>");
        Reply::ok("max-age=100", format!("{echo}={value}").into_bytes()).header("vary", vary)
    })
    .await
}

async fn language_origin() -> TestOrigin {
    varying_origin("Accept-Language", "accept-language").await
}

/// GET `/v` with `Accept-Language: <lang>`.
async fn lang(proxy: &TestProxy, lang: &str) -> crate::support::Seen {
    get_with(proxy, "/v", &[("accept-language", lang)]).await
}

/// RFC 9111 §4.1: variants for different `Accept-Language` values are stored side by side
/// and each served to its own requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variants_are_stored_side_by_side() {
    let origin = language_origin().await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/v", &[("accept-language", "en")], 2).await;
    fill(&proxy, "/v", &[("accept-language", "fr")], 3).await;
    let en = lang(&proxy, "en").await;
    let fr = lang(&proxy, "fr").await;
    assert_hit(&en);
    assert_hit(&fr);
    assert_eq!(en.body, b"accept-language=en");
    assert_eq!(fr.body, b"accept-language=fr");
    assert_eq!(origin.count("/v"), 2);
}

/// RFC 9111 §4.1 and RFC 9211 §2.2: a request matching no stored variant is `fwd=vary-miss`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_variant_is_a_vary_miss() {
    let origin = language_origin().await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/v", &[("accept-language", "en")], 2).await;
    let de = lang(&proxy, "de").await;
    assert_forwarded(&de, "vary-miss");
    assert_eq!(de.body, b"accept-language=de");
    assert_eq!(origin.count("/v"), 2);
}

/// RFC 9111 §4.1: header values are normalised before matching (trimmed, inner
/// whitespace collapsed, case folded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variant_values_are_normalised() {
    let origin = language_origin().await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/v", &[("accept-language", "en")], 2).await;
    let shouting = lang(&proxy, " EN ").await;
    assert_hit(&shouting);
    assert_eq!(shouting.body, b"accept-language=en");
    fill(&proxy, "/v", &[("accept-language", "de-DE,  fr")], 3).await;
    let spaced = lang(&proxy, "de-de, fr").await;
    assert_hit(&spaced);
    assert_eq!(origin.count("/v"), 2);
}

/// RFC 9111 §4.1 with RFC 9110 §12.5.4 and §12.4.2: `Accept-Language` values that differ
/// only in whitespace around parameters, the case of `q`, or the spelling of a weight
/// (`q=1` is the default, `0.50` is `0.5`) share one variant; another weight does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_language_weights_are_normalised() {
    let origin = language_origin().await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/v", &[("accept-language", "en-US, fr;q=0.5")], 2).await;
    for same in ["en-us;q=1.000 , FR; Q=0.50", "EN-US;q=1,fr ;q=0.500"] {
        let seen = lang(&proxy, same).await;
        assert_hit(&seen);
        assert_eq!(seen.body, b"accept-language=en-US, fr;q=0.5", "{same}");
    }
    let other = lang(&proxy, "en-US, fr;q=0.6").await;
    assert!(!other.cache.hit, "{:?}", other.cache);
    assert_eq!(origin.count("/v"), 2);
}

/// RFC 9111 §4.1: `Accept-Encoding` is reduced to its canonical set of codings, so
/// `gzip, deflate, br`, `br,gzip` and `gzip;q=1, br` share one variant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_encoding_is_reduced_to_a_canonical_set() {
    let origin = varying_origin("Accept-Encoding", "accept-encoding").await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/e", &[("accept-encoding", "gzip, deflate, br")], 2).await;
    for same in ["br,gzip", "gzip;q=1, br"] {
        let seen = get_with(&proxy, "/e", &[("accept-encoding", same)]).await;
        assert_hit(&seen);
        assert_eq!(seen.body, b"accept-encoding=gzip, deflate, br", "{same}");
    }
    assert_eq!(origin.count("/e"), 1);
}

/// RFC 9111 §4.1: `identity` and an absent `Accept-Encoding` select a variant of their own,
/// not the gzip one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_and_absent_encoding_share_their_own_variant() {
    let origin = varying_origin("Accept-Encoding", "accept-encoding").await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/e", &[("accept-encoding", "gzip")], 2).await;
    let identity = get_with(&proxy, "/e", &[("accept-encoding", "identity")]).await;
    assert_forwarded(&identity, "vary-miss");
    assert!(identity.cache.stored, "{:?}", identity.cache);
    proxy.wait_committed(3).await;
    let absent = get_with(&proxy, "/e", &[]).await;
    assert_hit(&absent);
    assert_eq!(absent.body, b"accept-encoding=identity");
    let gzip = get_with(&proxy, "/e", &[("accept-encoding", "gzip")]).await;
    assert_hit(&gzip);
    assert_eq!(gzip.body, b"accept-encoding=gzip");
}

/// RFC 9111 §4.1 (variant explosion): 50 distinct junk `Accept-Encoding` values store at
/// most 8 variants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_accept_encoding_values_cannot_explode_variants() {
    let origin = varying_origin("Accept-Encoding", "accept-encoding").await;
    let proxy = proxy_always(&origin).await;
    for i in 0..50 {
        let value = match i % 3 {
            0 => format!("x-junk-{i}"),
            1 => format!("gzip, x-junk-{i};q=0.{}", i % 10),
            _ => format!("br;q=0.5, junk{i}, zstd"),
        };
        let seen = get_with(&proxy, "/e", &[("accept-encoding", &value)]).await;
        assert_eq!(seen.status, 200);
    }
    // Let the last fills end: each holds a reservation and a temp file until it does.
    crate::support::wait_until(
        || format!("fills still running: {:?}", proxy.store.stats()),
        || proxy.store.stats().reserved_bytes == 0 && proxy.temp_files().is_empty(),
    )
    .await;
    let files = proxy.entry_files().len();
    assert!(
        (1..=8).contains(&files),
        "{files} variants stored for 50 junk values"
    );
}

/// RFC 9111 §4.1: `Vary: *` never matches, so such a response is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_star_is_never_stored() {
    let origin = varying_origin("*", "accept-language").await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = lang(&proxy, "en").await;
        assert!(!seen.cache.hit && !seen.cache.stored, "{:?}", seen.cache);
        assert_eq!(seen.cache.detail.as_deref(), Some("vary-star"));
    }
    assert_eq!(origin.count("/v"), 2);
    assert!(proxy.entry_files().is_empty());
}

/// RFC 9111 §4.1: a request lacking the varied header matches only a variant stored for a
/// request that lacked it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absent_header_selects_the_absent_variant() {
    let origin = language_origin().await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/v", &[], 2).await;
    let en = lang(&proxy, "en").await;
    assert_forwarded(&en, "vary-miss");
    let none = get_with(&proxy, "/v", &[]).await;
    assert_hit(&none);
    assert_eq!(none.body, b"accept-language=<absent>");
}

/// RFC 9111 §4.1: a response without `Vary` replaces a varied one for every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_without_vary_replaces_a_varied_one() {
    let served = Counter::default();
    let count = served.clone();
    let origin = TestOrigin::start(move |_| {
        if count.bump() == 0 {
            Reply::ok("max-age=100", b"varied".to_vec()).header("vary", "accept-language")
        } else {
            Reply::ok("max-age=100", b"plain".to_vec())
        }
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/v", &[("accept-language", "en")], 2).await;
    let refreshed = get_with(
        &proxy,
        "/v",
        &[("accept-language", "en"), ("cache-control", "no-cache")],
    )
    .await;
    assert_eq!(refreshed.body, b"plain");
    assert!(refreshed.cache.stored, "{:?}", refreshed.cache);
    proxy.wait_committed(3).await;
    for value in ["en", "fr"] {
        let seen = lang(&proxy, value).await;
        assert_hit(&seen);
        assert_eq!(seen.body, b"plain", "{value}");
    }
    assert_eq!(origin.count("/v"), 2);
}

/// RFC 9111 §4.1: with several header names in `Vary`, all must match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_varied_header_must_match() {
    let origin = varying_origin("Accept-Language, X-Mode", "x-mode").await;
    let proxy = proxy_always(&origin).await;
    let a = [("accept-language", "en"), ("x-mode", "a")];
    fill(&proxy, "/m", &a, 2).await;
    let other_mode = get_with(&proxy, "/m", &[("accept-language", "en"), ("x-mode", "b")]).await;
    assert_forwarded(&other_mode, "vary-miss");
    let other_lang = get_with(&proxy, "/m", &[("accept-language", "fr"), ("x-mode", "a")]).await;
    assert_forwarded(&other_lang, "vary-miss");
    let same = get_with(&proxy, "/m", &a).await;
    assert_hit(&same);
    assert_eq!(same.body, b"x-mode=a");
}

/// RFC 9111 §4.1 with second-hit admission: admission counts per primary key (the URI),
/// so a second variant of a seen URI is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_counts_per_primary_key() {
    let origin = language_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::SecondHit
    })
    .await;
    let en = lang(&proxy, "en").await;
    assert_eq!(
        en.cache.detail.as_deref(),
        Some("first-sight"),
        "{:?}",
        en.cache
    );
    let fr = lang(&proxy, "fr").await;
    assert!(fr.cache.stored, "second sight of the URI: {:?}", fr.cache);
}
