//! End-to-end behaviour of the admission proxy over real sockets: a scripted origin and
//! the real proxy on 127.0.0.1:0 with a temp cache directory.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::{
    self, Reply, ReplyBody, TestOrigin, TestProxy, body_bytes, client, get, refusing_address, send,
};
use secondhit_proxy::config::{AdmissionPolicy, FilterSizing, MaxObjectSize};

/// An origin that answers every path with a cacheable body derived from the path's length.
async fn cacheable_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let seed = head.uri.path().len() as u8;
        Reply::ok("max-age=3600", body_bytes(2048, seed))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_request_stores_and_third_is_a_hit() {
    let origin = cacheable_origin().await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    let url = proxy.url("/object");

    let first = get(&url).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.cache.fwd.as_deref(), Some("uri-miss"));
    assert_eq!(first.cache.detail.as_deref(), Some("first-sight"));
    assert!(!first.cache.stored);
    assert_eq!(origin.count("/object"), 1);
    assert!(
        proxy.entry_files().is_empty(),
        "a first sight must not touch the disk"
    );

    let second = get(&url).await;
    assert_eq!(second.cache.fwd.as_deref(), Some("uri-miss"));
    assert!(
        second.cache.stored,
        "second request is admitted: {:?}",
        second.cache
    );
    assert_eq!(origin.count("/object"), 2);
    proxy.wait_committed(1).await;
    assert_eq!(proxy.entry_files().len(), 1);

    let third = get(&url).await;
    assert!(third.cache.hit, "third request is a hit: {:?}", third.cache);
    assert_eq!(origin.count("/object"), 2, "a hit does not ask the origin");
    assert_eq!(third.body, first.body);
    assert_eq!(third.body, body_bytes(2048, "/object".len() as u8));
    assert!(third.headers.contains_key("age"), "a hit carries Age");
    assert!(proxy.temp_files().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_always_stores_on_first_request() {
    let origin = cacheable_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let first = get(&proxy.url("/a")).await;
    assert!(first.cache.stored, "{:?}", first.cache);
    proxy.wait_committed(1).await;
    let second = get(&proxy.url("/a")).await;
    assert!(second.cache.hit);
    assert_eq!(origin.count("/a"), 1);
}

/// Requests `count` distinct filler keys, to push the filter pair through rotations.
async fn request_fillers(proxy: &TestProxy, tag: &str, count: usize) {
    let http = client();
    for i in 0..count {
        let seen = send(http.get(proxy.url(&format!("/filler-{tag}-{i}")))).await;
        assert_eq!(seen.status, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotations_forget_once_seen_keys_but_keep_keys_seen_every_generation() {
    // `/steady` is asked once per generation; its origin answer is not storable until the end,
    // so only the filter decides what happens to it on the last request.
    let steady_cacheable = Arc::new(AtomicBool::new(false));
    let flag = steady_cacheable.clone();
    let origin = TestOrigin::start(move |head| {
        if head.uri.path() == "/steady" && !flag.load(Ordering::SeqCst) {
            Reply::ok("max-age=0", b"steady".to_vec())
        } else {
            Reply::ok("max-age=3600", body_bytes(64, 1))
        }
    })
    .await;
    // A generation of 20 keys: the fillers below rotate the pair several times.
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.sizing = FilterSizing::ExpectedUrls(20)
    })
    .await;

    get(&proxy.url("/once")).await;
    // 8 rounds of 15 new keys: several rotations in all, but at most one between two
    // requests for `/steady`, so it is seen in every generation.
    for round in 0..8 {
        let steady = get(&proxy.url("/steady")).await;
        assert_eq!(steady.cache.detail.as_deref(), Some("no-lifetime"));
        request_fillers(&proxy, &round.to_string(), 15).await;
    }
    steady_cacheable.store(true, Ordering::SeqCst);

    let once = get(&proxy.url("/once")).await;
    assert_eq!(
        once.cache.detail.as_deref(),
        Some("first-sight"),
        "two rotations forget a once-seen key"
    );
    let steady = get(&proxy.url("/steady")).await;
    assert!(
        steady.cache.stored,
        "a key seen every generation stays admitted: {:?}",
        steady.cache
    );
}

// On the paused clock: the entry ages with `tokio::time::advance`, as the proxy's wall
// clock follows tokio's in the tests (`secondhit_proxy::clock`).
#[tokio::test(start_paused = true)]
async fn stale_stored_object_is_readmitted_after_the_filter_forgot_it() {
    let origin = TestOrigin::start(|head| {
        if head.uri.path() == "/short" {
            Reply::ok("max-age=1", b"short-lived".to_vec())
        } else {
            Reply::ok("max-age=3600", body_bytes(64, 2))
        }
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.sizing = FilterSizing::ExpectedUrls(20)
    })
    .await;
    get(&proxy.url("/short")).await;
    assert!(get(&proxy.url("/short")).await.cache.stored);
    proxy.wait_committed(1).await;
    request_fillers(&proxy, "x", 120).await;
    // The entry's lifetime is one second: let it pass (freshness is measured in whole seconds).
    tokio::time::advance(Duration::from_millis(2100)).await;
    let refetch = get(&proxy.url("/short")).await;
    assert_eq!(refetch.cache.fwd.as_deref(), Some("stale"));
    assert!(
        refetch.cache.stored,
        "a stale stored entry is re-admitted: {:?}",
        refetch.cache
    );
    assert_eq!(refetch.body, b"short-lived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_that_must_not_be_stored_never_are() {
    let origin = TestOrigin::start(|head| match head.uri.path() {
        "/no-store" => Reply::ok("no-store", b"x".to_vec()),
        "/private" => Reply::ok("private, max-age=60", b"x".to_vec()),
        "/cookie" => Reply::ok("max-age=60", b"x".to_vec()).header("set-cookie", "session=1"),
        _ => Reply::ok("max-age=60", b"public".to_vec()),
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let http = client();
    for (path, detail) in [
        ("/no-store", "no-store"),
        ("/private", "private"),
        ("/cookie", "set-cookie"),
    ] {
        for _ in 0..2 {
            let seen = get(&proxy.url(path)).await;
            assert_eq!(seen.cache.detail.as_deref(), Some(detail), "{path}");
            assert!(!seen.cache.stored);
        }
    }
    for _ in 0..2 {
        let seen = send(
            http.get(proxy.url("/auth"))
                .header("authorization", "Bearer t"),
        )
        .await;
        // RFC 9111 §3.5: a response to credentials is stored only when declared shareable.
        assert_eq!(seen.cache.fwd.as_deref(), Some("uri-miss"));
        assert_eq!(seen.cache.detail.as_deref(), Some("authorization"));
        let seen = send(http.post(proxy.url("/post")).body("payload")).await;
        assert_eq!(seen.cache.fwd.as_deref(), Some("method"));
        let seen = send(http.head(proxy.url("/head-only"))).await;
        assert_eq!(seen.cache.detail.as_deref(), Some("method"));
    }
    assert_eq!(origin.count("/auth"), 2);
    assert_eq!(origin.count("/post"), 2);
    assert_eq!(origin.count("/head-only"), 2);
    assert!(
        proxy.entry_files().is_empty(),
        "nothing may be stored: {:?}",
        proxy.entry_files()
    );
    assert_eq!(proxy.store.stats().committed_fills, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_after_a_stored_get_is_a_hit_without_body() {
    let origin = cacheable_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let get_first = get(&proxy.url("/h")).await;
    proxy.wait_committed(1).await;
    let head = send(client().head(proxy.url("/h"))).await;
    assert!(head.cache.hit, "{:?}", head.cache);
    assert!(head.body.is_empty());
    let length = head
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    assert_eq!(length, Some(get_first.body.len().to_string()));
    assert_eq!(origin.count("/h"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_over_max_object_size_are_served_but_not_stored() {
    let origin = TestOrigin::start(|head| match head.uri.path() {
        "/big-chunked" => Reply::chunked("max-age=60", body_bytes(300_000, 4), 16_384),
        _ => Reply::ok("max-age=60", body_bytes(200_000, 3)),
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_object_size = MaxObjectSize::Bytes(100_000);
    })
    .await;
    for _ in 0..2 {
        let seen = get(&proxy.url("/big")).await;
        assert_eq!(seen.body, body_bytes(200_000, 3));
        assert_eq!(seen.cache.detail.as_deref(), Some("too-large"));
    }
    // Without a declared length the limit is found while streaming: the fill is dropped, the client is not.
    let seen = get(&proxy.url("/big-chunked")).await;
    assert_eq!(seen.body, body_bytes(300_000, 4));
    let again = get(&proxy.url("/big-chunked")).await;
    assert!(!again.cache.hit);
    assert_eq!(origin.count("/big-chunked"), 2);
    assert!(proxy.entry_files().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_object_limit_is_an_eighth_of_the_cache() {
    const LIMIT: usize = 1_500_000;
    let origin = TestOrigin::start(|head| match head.uri.path() {
        "/over" => Reply::ok("max-age=60", body_bytes(LIMIT + 1, 7)),
        _ => Reply::ok("max-age=60", body_bytes(LIMIT, 8)),
    })
    .await;
    // The default policy (second-hit) and max_object_size ("auto"): 12 MB / 8 = 1.5 MB.
    let proxy = TestProxy::start(origin.addr, |c| c.cache.max_size = 8 * LIMIT as u64).await;
    let live = proxy.settings.load();
    let settings = &live.settings;
    assert_eq!(settings.cache.max_object_size, MaxObjectSize::Auto);
    assert_eq!(settings.cache.max_object_bytes(), LIMIT as u64);

    // A byte over the limit: admitted on its second request, served, not stored.
    for _ in 0..3 {
        let seen = get(&proxy.url("/over")).await;
        assert_eq!(seen.body, body_bytes(LIMIT + 1, 7));
        assert!(!seen.cache.stored && !seen.cache.hit, "{:?}", seen.cache);
    }
    let again = get(&proxy.url("/over")).await;
    assert_eq!(again.cache.detail.as_deref(), Some("too-large"));
    assert_eq!(origin.count("/over"), 4);

    // At the limit: stored on its second request, a hit on the third.
    let first = get(&proxy.url("/at-limit")).await;
    assert!(!first.cache.stored);
    let second = get(&proxy.url("/at-limit")).await;
    assert!(second.cache.stored, "{:?}", second.cache);
    proxy.wait_committed(1).await;
    let third = get(&proxy.url("/at-limit")).await;
    assert!(third.cache.hit, "{:?}", third.cache);
    assert_eq!(third.body, body_bytes(LIMIT, 8));
    assert_eq!(origin.count("/at-limit"), 2);
    assert_eq!(proxy.entry_files().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_mib_chunked_body_arrives_intact_while_being_stored() {
    let data = body_bytes(5 * 1024 * 1024, 5);
    let served = data.clone();
    let origin =
        TestOrigin::start(move |_| Reply::chunked("max-age=60", served.clone(), 65_536)).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let first = get(&proxy.url("/five")).await;
    assert!(first.cache.stored, "{:?}", first.cache);
    assert!(
        first.body == data,
        "the client receives the whole chunked body"
    );
    proxy.wait_committed(1).await;
    let hit = get(&proxy.url("/five")).await;
    assert!(hit.cache.hit);
    assert!(hit.body == data, "the stored body is byte-identical");
    assert_eq!(origin.count("/five"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_reset_mid_body_aborts_the_client_and_stores_nothing() {
    let origin = TestOrigin::start(|_| Reply {
        body: ReplyBody::CutAfter {
            declared: 100_000,
            sent: body_bytes(30_000, 6),
        },
        ..Reply::ok("max-age=60", Vec::new())
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let response = client()
        .get(proxy.url("/cut"))
        .send()
        .await
        .expect("response head arrives");
    assert_eq!(response.status(), 200);
    assert!(
        response.bytes().await.is_err(),
        "the client must see an aborted body, not a short one"
    );
    // Give the fill's writer task a moment to notice the abort, bounded.
    crate::support::wait_until(
        || "temp file left behind".into(),
        || proxy.temp_files().is_empty(),
    )
    .await;
    assert!(proxy.entry_files().is_empty());
    assert_eq!(proxy.store.stats().committed_fills, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_down_is_a_502() {
    let (_held, refusing) = refusing_address();
    let proxy = TestProxy::start(refusing, |_| {}).await;
    let seen = get(&proxy.url("/x")).await;
    assert_eq!(seen.status, 502);
    assert_eq!(seen.cache.detail.as_deref(), Some("origin-unreachable"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_host_header_is_sent_to_the_origin_and_keys_the_cache() {
    let origin = TestOrigin::start(|head| {
        let host = head
            .headers
            .get("host")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        Reply::ok("max-age=60", host.into_bytes())
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let http = client();
    let a = send(http.get(proxy.url("/v")).header("host", "a.example")).await;
    let b = send(http.get(proxy.url("/v")).header("host", "b.example")).await;
    assert_eq!(a.body, b"a.example");
    assert_eq!(b.body, b"b.example", "the host is part of the key");
    proxy.wait_committed(2).await;
    let a_again = send(http.get(proxy.url("/v")).header("host", "A.example")).await;
    assert!(a_again.cache.hit);
    assert_eq!(a_again.body, b"a.example");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admitted_miss_does_not_forward_client_validators() {
    let origin = cacheable_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let seen = send(
        client()
            .get(proxy.url("/cond"))
            .header("if-none-match", "\"abc\""),
    )
    .await;
    assert_eq!(seen.status, 200);
    assert!(seen.cache.stored);
    let forwarded = origin
        .last_headers("/cond")
        .expect("origin saw the request");
    assert!(!forwarded.contains_key("if-none-match"));
}

// On the paused clock: the proxy's timeout and the origin's delay are tokio timers, which
// the runtime advances when nothing else can run, so the test waits for neither.
#[tokio::test(start_paused = true)]
async fn origin_slower_than_first_byte_timeout_is_a_504() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("max-age=60", b"late".to_vec()).delayed(Duration::from_secs(3))
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.origin.first_byte_timeout = Duration::from_millis(300)
    })
    .await;
    let seen = get(&proxy.url("/slow")).await;
    assert_eq!(seen.status, 504);
    assert_eq!(seen.cache.detail.as_deref(), Some("origin-timeout"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleartext_http2_clients_share_entries_with_http1_clients() {
    let origin = cacheable_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await;
    let h2 = support::h2c_client();
    let first = send(h2.get(proxy.url("/both"))).await;
    assert!(first.cache.stored, "{:?}", first.cache);
    proxy.wait_committed(1).await;
    // HTTP/2 sends :authority, HTTP/1.1 a Host header: both must map to one key.
    let over_h1 = get(&proxy.url("/both")).await;
    assert!(over_h1.cache.hit, "{:?}", over_h1.cache);
    let over_h2 = send(h2.get(proxy.url("/both"))).await;
    assert!(over_h2.cache.hit);
    assert_eq!(over_h2.body, first.body);
    assert_eq!(origin.count("/both"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_delimited_by_connection_close_is_served_but_never_stored() {
    let (origin, _stop) = support::start_raw_origin(
        b"HTTP/1.0 200 OK\r\nCache-Control: max-age=60\r\n\r\nthis body ends when the connection closes",
    )
    .await;
    let proxy = TestProxy::start(origin, |c| c.admission.policy = AdmissionPolicy::Always).await;
    for _ in 0..2 {
        let response = client()
            .get(proxy.url("/close"))
            .send()
            .await
            .expect("response");
        assert_eq!(
            response.version(),
            reqwest::Version::HTTP_11,
            "the client keeps its own protocol version"
        );
        let cache = support::ParsedCacheStatus::from_headers(response.headers());
        assert_eq!(cache.detail.as_deref(), Some("no-length"));
        let body = response.bytes().await.expect("body");
        assert_eq!(&body[..], b"this body ends when the connection closes");
    }
    assert!(proxy.entry_files().is_empty());
}
