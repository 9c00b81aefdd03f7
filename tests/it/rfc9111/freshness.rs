//! RFC 9111 §4.2: freshness lifetime, age, heuristic freshness, invalid values.

use super::common::*;
use crate::support::{Reply, TestOrigin, http_date_from_now};

/// A 200 with no Cache-Control, `Date: now` and the given extra headers.
fn dated(body: &[u8], headers: &[(&'static str, &str)]) -> Reply {
    Reply::status(200, body.to_vec())
        .header("date", &http_date_from_now(0))
        .headers(headers)
}

/// RFC 9111 §4.2.1: in a shared cache `s-maxage` overrides `max-age`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s_maxage_overrides_max_age() {
    let origin =
        TestOrigin::start(|_| Reply::ok("max-age=0, s-maxage=100", b"shared".to_vec())).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/s", &[], 1).await;
    let hit = get_with(&proxy, "/s", &[]).await;
    assert_hit(&hit);
    assert_eq!(hit.body, b"shared");
    assert_eq!(origin.count("/s"), 1);
    let ttl = ttl(&hit);
    assert!((90..=100).contains(&ttl), "ttl from s-maxage=100: {ttl}");
}

/// RFC 9111 §4.2.1: `s-maxage=0` overrides a long `max-age`: stale at once in a shared cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s_maxage_zero_overrides_long_max_age() {
    let origin = TestOrigin::start_conditional("\"s0\"", |_| {
        Reply::ok("max-age=1000, s-maxage=0", b"s0".to_vec())
    })
    .await;
    let proxy = proxy_always(&origin).await;
    get_with(&proxy, "/s0", &[]).await;
    let second = get_with(&proxy, "/s0", &[]).await;
    assert!(!second.cache.hit, "s-maxage=0 is stale: {:?}", second.cache);
    assert_eq!(origin.count("/s0"), 2);
    assert_eq!(second.body, b"s0");
}

/// RFC 9111 §4.2.1: `max-age` overrides `Expires` (here already past).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_age_overrides_expires() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=100", b"ma".to_vec()).header("expires", &http_date_from_now(-3600))
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/ma", &[], 1).await;
    let hit = get_with(&proxy, "/ma", &[]).await;
    assert_hit(&hit);
    assert_eq!(origin.count("/ma"), 1);
}

/// RFC 9111 §4.2.1: without `max-age`, `Expires` − `Date` is the freshness lifetime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_gives_the_lifetime_without_max_age() {
    let origin =
        TestOrigin::start(|_| dated(b"exp", &[("expires", &http_date_from_now(100))])).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/exp", &[], 1).await;
    let hit = get_with(&proxy, "/exp", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!((85..=100).contains(&ttl), "ttl from Expires: {ttl}");
}

/// `date` (an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`) in the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime form (`Sun Nov  6 08:49:37 1994`).
fn obsolete_forms(date: &str) -> [String; 2] {
    let [day_name, day, month, year, time, _gmt] = date
        .split([' ', ','])
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()[..]
    else {
        panic!("not an IMF-fixdate: {date}");
    };
    let long = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ]
    .into_iter()
    .find(|long| long.starts_with(day_name))
    .expect("a day name");
    let asctime_day = day.trim_start_matches('0');
    [
        format!("{long}, {day}-{month}-{} {time} GMT", &year[2..]),
        format!("{day_name} {month} {asctime_day:>2} {time} {year}"),
    ]
}

/// RFC 9110 §5.6.7: `Expires` in the obsolete RFC 850 and asctime forms, and in lower
/// or upper case, gives the lifetime as an IMF-fixdate would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_in_obsolete_forms_and_any_case_gives_the_lifetime() {
    let expires = http_date_from_now(100);
    let [rfc850, asctime] = obsolete_forms(&expires);
    let forms = [
        rfc850.to_ascii_uppercase(),
        asctime,
        expires.to_ascii_lowercase(),
    ];
    let by_path = forms.clone();
    let origin = TestOrigin::start(move |head| {
        let n: usize = head.uri.path()[1..].parse().expect("a number path");
        dated(b"old-form", &[("expires", &by_path[n])])
    })
    .await;
    let proxy = proxy_always(&origin).await;
    for (n, form) in forms.iter().enumerate() {
        let path = format!("/{n}");
        fill(&proxy, &path, &[], n as u64 + 1).await;
        let hit = get_with(&proxy, &path, &[]).await;
        assert_hit(&hit);
        let ttl = ttl(&hit);
        assert!((85..=100).contains(&ttl), "Expires: {form}: ttl {ttl}");
    }
}

/// RFC 9111 §4.2.1: `Expires` is relative to the response's `Date`, not the cache's clock
/// (an origin clock one hour ahead: lifetime 100 s, not 3700 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_is_relative_to_the_date_header() {
    let origin = TestOrigin::start(|_| {
        Reply::status(200, b"skew".to_vec()).headers(&[
            ("date", &http_date_from_now(3600)),
            ("expires", &http_date_from_now(3700)),
        ])
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/skew", &[], 1).await;
    let hit = get_with(&proxy, "/skew", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!((85..=100).contains(&ttl), "Expires − Date = 100: {ttl}");
}

/// RFC 9111 §4.2.1: an `Expires` at or before `Date` means stale at once; with no
/// validator such a response is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_in_the_past_is_not_stored_without_validator() {
    let origin =
        TestOrigin::start(|_| dated(b"past", &[("expires", &http_date_from_now(-60))])).await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/past", &[]).await;
        assert_eq!(seen.cache.detail.as_deref(), Some("no-lifetime"));
        assert!(!seen.cache.stored);
    }
    assert_eq!(origin.count("/past"), 2);
}

/// RFC 9111 §5.3: an invalid `Expires` (`0`) means already expired: not stored without a validator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_expires_zero_is_stale() {
    let origin = TestOrigin::start(|_| dated(b"zero", &[("expires", "0")])).await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/zero", &[]).await;
        assert_eq!(seen.cache.detail.as_deref(), Some("no-lifetime"));
    }
    assert_eq!(origin.count("/zero"), 2);
}

/// RFC 9111 §5.3 and RFC 9110 §5.6.7: an `Expires` far in the future but in none of the
/// three date forms (no comma after the day name, or two spaces between fields) is
/// invalid, so already expired: not served fresh, and without a validator not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_without_its_comma_or_with_a_run_of_spaces_is_stale() {
    let origin = TestOrigin::start(|head| {
        let expires = match head.uri.path() {
            "/no-comma" => "Sun 06 Nov 2094 08:49:37 GMT",
            _ => "Sun, 06  Nov 2094 08:49:37 GMT",
        };
        dated(b"malformed", &[("expires", expires)])
    })
    .await;
    let proxy = proxy_always(&origin).await;
    for path in ["/no-comma", "/two-spaces"] {
        for _ in 0..2 {
            let seen = get_with(&proxy, path, &[]).await;
            assert!(!seen.cache.hit, "{path}: {:?}", seen.cache);
            assert_eq!(seen.cache.detail.as_deref(), Some("no-lifetime"), "{path}");
            assert_eq!(seen.body, b"malformed");
        }
        assert_eq!(
            origin.count(path),
            2,
            "{path}: both requests reach the origin"
        );
    }
}

/// RFC 9111 §5.3: an invalid `Expires` with a validator: stored stale, revalidated next time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_expires_with_validator_is_stored_and_revalidated() {
    let origin =
        TestOrigin::start_conditional("\"g1\"", |_| dated(b"garbage", &[("expires", "soon-ish")]))
            .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/garbage", &[], 1).await;
    let second = get_with(&proxy, "/garbage", &[]).await;
    assert_forwarded(&second, "stale");
    assert_eq!(second.cache.fwd_status, Some(304));
    assert_eq!(second.body, b"garbage");
    let sent = origin.last_headers("/garbage").expect("revalidated");
    assert_eq!(
        sent.get("if-none-match").map(|v| v.as_bytes()),
        Some(&b"\"g1\""[..])
    );
}

/// RFC 9111 §4.2.1 and §1.2.2: invalid `max-age` values (non-numeric, negative, two
/// conflicting) make the response stale: without a validator it is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_max_age_without_validator_is_not_stored() {
    let origin = TestOrigin::start(|head| {
        let cc = match head.uri.path() {
            "/abc" => "max-age=abc",
            "/negative" => "max-age=-1",
            _ => "max-age=60, max-age=120",
        };
        Reply::ok(cc, b"invalid".to_vec())
    })
    .await;
    let proxy = proxy_always(&origin).await;
    for path in ["/abc", "/negative", "/twice"] {
        for _ in 0..2 {
            let seen = get_with(&proxy, path, &[]).await;
            assert!(!seen.cache.hit, "{path}: {:?}", seen.cache);
            assert_eq!(seen.cache.detail.as_deref(), Some("no-lifetime"), "{path}");
        }
        assert_eq!(origin.count(path), 2, "{path}");
    }
    assert!(proxy.entry_files().is_empty());
}

/// RFC 9111 §4.2.1 and §4.3.1: an invalid `max-age` with a validator is stored stale and
/// revalidated on the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_max_age_with_validator_is_revalidated() {
    let origin = TestOrigin::start_conditional("\"inv\"", |head| {
        let cc = if head.uri.path() == "/abc" {
            "max-age=abc"
        } else {
            "max-age=60, max-age=120"
        };
        Reply::ok(cc, b"invalid".to_vec())
    })
    .await;
    let proxy = proxy_always(&origin).await;
    for (i, path) in ["/abc", "/twice"].into_iter().enumerate() {
        fill(&proxy, path, &[], i as u64 + 1).await;
        let second = get_with(&proxy, path, &[]).await;
        assert_forwarded(&second, "stale");
        assert_eq!(second.body, b"invalid");
        let sent = origin.last_headers(path).expect("revalidated");
        assert!(sent.contains_key("if-none-match"), "{path}: {sent:?}");
    }
}

/// RFC 9111 §4.2.3: the origin's `Age` counts: `max-age=60` with `Age: 60` is stale on arrival.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_age_makes_a_response_stale_on_arrival() {
    let origin =
        TestOrigin::start(|_| Reply::ok("max-age=60", b"aged".to_vec()).header("age", "60")).await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/aged", &[]).await;
        assert!(!seen.cache.hit, "{:?}", seen.cache);
    }
    assert_eq!(origin.count("/aged"), 2);
}

/// RFC 9111 §4.2.3 and §4.3.1: stale on arrival with a validator: stored, then revalidated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_age_stale_on_arrival_with_validator_is_revalidated() {
    let origin = TestOrigin::start_conditional("\"a1\"", |_| {
        Reply::ok("max-age=60", b"aged".to_vec()).header("age", "60")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/aged", &[], 1).await;
    let second = get_with(&proxy, "/aged", &[]).await;
    assert_forwarded(&second, "stale");
    assert_eq!(second.cache.fwd_status, Some(304));
    assert_eq!(second.body, b"aged");
}

/// RFC 9111 §4.2.3 and §5.1: `max-age=100` with `Age: 40` is a hit with at most 60 s left,
/// and the served `Age` includes the 40 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_age_reduces_the_remaining_ttl_and_is_served() {
    let origin =
        TestOrigin::start(|_| Reply::ok("max-age=100", b"forty".to_vec()).header("age", "40"))
            .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/forty", &[], 1).await;
    let hit = get_with(&proxy, "/forty", &[]).await;
    assert_hit(&hit);
    assert!(age(&hit) >= 40, "served Age {}", age(&hit));
    let ttl = ttl(&hit);
    assert!((50..=60).contains(&ttl), "ttl {ttl}");
}

/// RFC 9111 §5.1: an `Age` that is not delta-seconds (trailing garbage, a sign) is
/// invalid and ignored: `max-age=100` keeps its whole lifetime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_age_is_ignored() {
    let origin = TestOrigin::start(|head| {
        let age = if head.uri.path() == "/suffix" {
            "40abc"
        } else {
            "+40"
        };
        Reply::ok("max-age=100", b"junk".to_vec()).header("age", age)
    })
    .await;
    let proxy = proxy_always(&origin).await;
    for (n, path) in ["/suffix", "/sign"].into_iter().enumerate() {
        fill(&proxy, path, &[], n as u64 + 1).await;
        let hit = get_with(&proxy, path, &[]).await;
        assert_hit(&hit);
        let ttl = ttl(&hit);
        assert!((90..=100).contains(&ttl), "{path}: Age ignored, ttl {ttl}");
    }
}

/// RFC 9111 §5.1: of a list-based `Age` the first member counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_based_age_uses_its_first_member() {
    let origin =
        TestOrigin::start(|_| Reply::ok("max-age=100", b"list".to_vec()).header("age", "40, 90"))
            .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/list", &[], 1).await;
    let hit = get_with(&proxy, "/list", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!((50..=60).contains(&ttl), "Age 40 counted, ttl {ttl}");
}

/// RFC 9111 §5.1 and §1.2.2: an `Age` too large to represent counts as 2^31 seconds, so
/// the response is stale on arrival (and, without a validator, not stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflowing_age_is_the_largest_delta_seconds() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=100", b"huge".to_vec()).header("age", "99999999999999999999")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    let first = get_with(&proxy, "/huge", &[]).await;
    assert!(!first.cache.stored, "{:?}", first.cache);
    assert_eq!(first.cache.detail.as_deref(), Some("no-lifetime"));
    get_with(&proxy, "/huge", &[]).await;
    assert_eq!(origin.count("/huge"), 2);
}

/// RFC 9111 §5.1: every response served from storage carries `Age`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hit_carries_age() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=100", b"x".to_vec())).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/age", &[], 1).await;
    for _ in 0..3 {
        let hit = get_with(&proxy, "/age", &[]).await;
        assert_hit(&hit);
        assert!(age(&hit) < 10);
    }
}

/// RFC 9111 §4.2.2: heuristic freshness is 10% of `Date` − `Last-Modified` (1000 s → 100 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heuristic_lifetime_is_ten_percent_of_last_modified_age() {
    let origin =
        TestOrigin::start(|_| dated(b"h", &[("last-modified", &http_date_from_now(-1000))])).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/h", &[], 1).await;
    let hit = get_with(&proxy, "/h", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!((85..=100).contains(&ttl), "10% of 1000 s: {ttl}");
}

/// RFC 9111 §4.2.2: the heuristic lifetime is capped by `cache.heuristic_max_age`
/// (default one day; 10% of 100 days would be 10 days).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heuristic_lifetime_is_capped_at_one_day_by_default() {
    let origin = TestOrigin::start(|_| {
        dated(
            b"old",
            &[("last-modified", &http_date_from_now(-100 * 86_400))],
        )
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/old", &[], 1).await;
    let hit = get_with(&proxy, "/old", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!((86_000..=86_400).contains(&ttl), "capped at 1 day: {ttl}");
}

/// RFC 9111 §4.2.2: a configured `cache.heuristic_max_age` caps the heuristic lifetime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heuristic_lifetime_follows_the_configured_cap() {
    let origin =
        TestOrigin::start(|_| dated(b"cap", &[("last-modified", &http_date_from_now(-1000))]))
            .await;
    let proxy = proxy_with_heuristic_max_age(&origin, "50s").await;
    fill(&proxy, "/cap", &[], 1).await;
    let hit = get_with(&proxy, "/cap", &[]).await;
    assert_hit(&hit);
    let ttl = ttl(&hit);
    assert!((40..=50).contains(&ttl), "capped at 50 s: {ttl}");
}

/// RFC 9111 §4.2.2: `cache.heuristic_max_age = "0s"` turns heuristic freshness off: the
/// response is stale on arrival, so it is stored only for its validator (`Last-Modified`)
/// and revalidated on every use (§4.3.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heuristic_freshness_can_be_disabled() {
    let modified = http_date_from_now(-10_000);
    let origin = TestOrigin::start(move |_| dated(b"off", &[("last-modified", &modified)])).await;
    let proxy = proxy_with_heuristic_max_age(&origin, "0s").await;
    fill(&proxy, "/off", &[], 1).await;
    let again = get_with(&proxy, "/off", &[]).await;
    assert_forwarded(&again, "stale");
    assert_eq!(again.body, b"off");
    let sent = origin
        .last_headers("/off")
        .expect("the origin was asked again");
    assert!(
        sent.contains_key("if-modified-since"),
        "revalidated with If-Modified-Since: {sent:?}"
    );
    assert_eq!(origin.count("/off"), 2);
}

/// RFC 9111 §4.2.2: no explicit expiry and no `Last-Modified`: no heuristic, not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_heuristic_without_last_modified() {
    let origin = TestOrigin::start(|_| dated(b"bare", &[])).await;
    let proxy = proxy_always(&origin).await;
    for _ in 0..2 {
        let seen = get_with(&proxy, "/bare", &[]).await;
        assert!(!seen.cache.stored);
        assert!(!seen.cache.hit);
    }
    assert_eq!(origin.count("/bare"), 2);
}
