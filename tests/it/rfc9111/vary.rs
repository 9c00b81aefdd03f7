//! RFC 9111 §4.1: selecting among stored variants by the headers named in `Vary`.
//!
//! The first varied response of a URL commits two entries, the URL's variant marker and
//! the variant itself; the commit counts the tests wait for include the marker.

use secondhit_proxy::config::AdmissionPolicy;

use super::common::*;
use crate::proxy_hygiene::common::exchange;
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
/// `gzip, deflate, br`, `br,deflate,gzip` and `deflate, gzip;q=1, br, x-junk` share one
/// variant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_encoding_is_reduced_to_a_canonical_set() {
    let origin = varying_origin("Accept-Encoding", "accept-encoding").await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/e", &[("accept-encoding", "gzip, deflate, br")], 2).await;
    for same in ["br,deflate,gzip", "deflate, gzip;q=1, br, x-junk"] {
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

/// An origin that content-codes `/e…` with the first coding of the request's
/// `Accept-Encoding` it has (`deflate`, `compress`, `x-custom`; `*` takes `deflate`), as
/// Express's `compression` or IIS do, and varies on `Accept-Encoding`. The body names the
/// coding, so a test sees which answer it got.
async fn coding_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let accepted = request_header(head, "accept-encoding").unwrap_or("");
        let coding = accepted
            .split(',')
            .map(|item| item.split(';').next().unwrap_or("").trim())
            .find_map(|coding| match coding {
                "deflate" | "compress" | "x-custom" => Some(coding),
                "*" => Some("deflate"),
                _ => None,
            });
        let reply = Reply::ok(
            "max-age=100",
            format!("coded={}", coding.unwrap_or("identity")).into_bytes(),
        )
        .header("vary", "Accept-Encoding");
        match coding {
            Some(coding) => reply.header("content-encoding", coding),
            None => reply,
        }
    })
    .await
}

/// RFC 9111 §4.1 with RFC 9110 §12.5.3: a variant the origin content-coded is never
/// served to a request that does not accept its coding, whichever codings the cache
/// distinguishes: each pair stores the first request's variant, then asks with the second
/// `Accept-Encoding` (`None`: absent), which the origin answers uncoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_coded_variant_is_served_only_to_requests_that_accept_its_coding() {
    let origin = coding_origin().await;
    let proxy = proxy_always(&origin).await;
    let pairs: [(&str, Option<&str>); 6] = [
        ("deflate", None),
        ("gzip, deflate", Some("gzip")),
        ("*", Some("gzip, br, zstd")),
        ("compress", Some("identity")),
        ("x-custom", None),
        ("gzip, x-custom", Some("gzip")),
    ];
    for (at, (filler, other)) in pairs.into_iter().enumerate() {
        let path = format!("/e{at}");
        // Each pair commits three entries: the marker and two variants.
        let committed = 3 * at as u64;
        let first = fill(&proxy, &path, &[("accept-encoding", filler)], committed + 2).await;
        assert!(header(&first, "content-encoding").is_some(), "{filler}");
        let headers: Vec<(&str, &str)> =
            other.map(|v| ("accept-encoding", v)).into_iter().collect();
        let seen = get_with(&proxy, &path, &headers).await;
        assert_eq!(
            header(&seen, "content-encoding"),
            None,
            "{other:?} after {filler:?}: {:?}",
            seen.cache
        );
        assert_eq!(seen.body, b"coded=identity", "{other:?} after {filler:?}");
        assert_eq!(origin.count(&path), 2, "{other:?} after {filler:?}");
        proxy.wait_committed(committed + 3).await;
    }
}

/// RFC 9111 §4.1: the coding a variant was stored with still answers the requests that
/// accept it, however they spell it (`x-gzip` is `gzip`, RFC 9110 §8.4.1.3; case and
/// order do not matter), so distinguishing every coding adds no variant for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_accepting_the_same_codings_share_a_coded_variant() {
    let origin = coding_origin().await;
    let proxy = proxy_always(&origin).await;
    fill(
        &proxy,
        "/e",
        &[("accept-encoding", "gzip, deflate, br, zstd")],
        2,
    )
    .await;
    for same in [
        "zstd, br, x-gzip, deflate",
        "GZIP, Deflate;q=0.5, br, zstd, x-junk",
    ] {
        let seen = get_with(&proxy, "/e", &[("accept-encoding", same)]).await;
        assert_hit(&seen);
        assert_eq!(header(&seen, "content-encoding"), Some("deflate"), "{same}");
    }
    assert_eq!(origin.count("/e"), 1);
}

/// RFC 9111 §4.1: field values are compared as sent unless the field is defined as
/// case-insensitive: `Cookie` values that differ only in case select different variants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_of_case_sensitive_fields_keep_their_case() {
    let origin = varying_origin("Cookie", "cookie").await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/c", &[("cookie", "session=AbC")], 2).await;
    let other = get_with(&proxy, "/c", &[("cookie", "session=abc")]).await;
    assert_forwarded(&other, "vary-miss");
    assert_eq!(other.body, b"cookie=session=abc");
    let same = get_with(&proxy, "/c", &[("cookie", "session=AbC")]).await;
    assert_hit(&same);
    assert_eq!(same.body, b"cookie=session=AbC");
}

/// RFC 9111 §4.1: values that are not UTF-8 (obs-text, RFC 9110 §5.5) are compared byte
/// for byte, not after replacing what is not UTF-8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_that_are_not_utf8_are_compared_byte_for_byte() {
    let served = Counter::default();
    let count = served.clone();
    let origin = TestOrigin::start(move |_| {
        Reply::ok(
            "max-age=100",
            format!("answer {}", count.bump()).into_bytes(),
        )
        .header("vary", "X-Token")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    let ask = |token: &'static [u8]| {
        let mut request = b"GET /t HTTP/1.1\r\nHost: localhost\r\nX-Token: ".to_vec();
        request.extend_from_slice(token);
        request.extend_from_slice(b"\r\n\r\n");
        request
    };
    let first = exchange(&proxy, &ask(b"\xff")).await;
    assert_eq!(first.body, b"answer 0");
    proxy.wait_committed(2).await;
    let other = exchange(&proxy, &ask(b"\xfe")).await;
    assert_eq!(other.body, b"answer 1", "{}", other.list("cache-status"));
    let same = exchange(&proxy, &ask(b"\xff")).await;
    assert_eq!(same.body, b"answer 0", "{}", same.list("cache-status"));
    assert!(same.list("cache-status").contains("hit"));
}
