//! Purges over real sockets: by tag (exact match only), prefix and site through the admin
//! API, soft purges (stale, then revalidated), the `PURGE` method on the proxy port
//! (allowed and refused), tags kept across a restart, and a purge arriving while a fill
//! of what it selects is in progress.

use std::time::Duration;

use secondhit_proxy::config::{AdmissionPolicy, Config};

use crate::support::{
    Reply, Seen, TestOrigin, TestProxy, client, get, sample, scrape, send, send_until_hit,
    wait_until,
};

/// The tags the test origin sends for `path` (`Surrogate-Key`).
fn tags_of(path: &str) -> &'static str {
    match path {
        "/a/1" | "/a/2" => "a shared",
        "/ab/1" => "ab shared",
        "/img/x.png" => "img",
        "/other" => "other",
        "/many" => "m1 m2",
        _ => "",
    }
}

/// An origin that answers every path with a fresh, validated response tagged per
/// [`tags_of`], its body the path; `/v` varies on `Accept-Language`.
async fn tagging_origin(cache_control: &'static str) -> TestOrigin {
    TestOrigin::start_conditional("\"v1\"", move |head| {
        let path = head.uri.path();
        let lang = head
            .headers
            .get("accept-language")
            .and_then(|v| v.to_str().ok());
        let body = format!("{path} {}", lang.unwrap_or("")).into_bytes();
        let reply = Reply::ok(cache_control, body).header("surrogate-key", tags_of(path));
        if path == "/v" {
            reply
                .header("vary", "accept-language")
                .header("surrogate-key", "v")
        } else {
            reply
        }
    })
    .await
}

/// A proxy that stores every storable response (no second request needed).
async fn storing_proxy(origin: &TestOrigin, tweak: impl FnOnce(&mut Config)) -> TestProxy {
    TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        tweak(c);
    })
    .await
}

/// `POST /purge?<query>` on the admin listener: the status and the JSON answer.
async fn purge(proxy: &TestProxy, query: &str) -> (u16, serde_json::Value) {
    let seen = send(client().post(proxy.admin_url(&format!("/purge?{query}")))).await;
    let json = serde_json::from_slice(&seen.body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&seen.body)));
    (seen.status, json)
}

/// Stores `paths` (each until a hit).
async fn store_all(proxy: &TestProxy, paths: &[&str]) {
    for path in paths {
        let url = proxy.url(path);
        send_until_hit(|| client().get(&url)).await;
    }
}

async fn hit(proxy: &TestProxy, path: &str) -> bool {
    get(&proxy.url(path)).await.cache.hit
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_purge_removes_exactly_the_entries_carrying_that_tag() {
    let origin = tagging_origin("max-age=3600").await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    let paths = ["/a/1", "/a/2", "/ab/1", "/other"];
    store_all(&proxy, &paths).await;
    // The tags are the cache's business: clients never see the field.
    let seen = get(&proxy.url("/a/1")).await;
    assert!(seen.cache.hit);
    assert!(
        !seen.headers.contains_key("surrogate-key"),
        "{:?}",
        seen.headers
    );

    // `a` is not `ab` (Souin #867): only the two entries tagged `a` go.
    let (status, json) = purge(&proxy, "tag=a").await;
    assert_eq!(
        (status, &json["purged"], &json["tags"]),
        (200, &2.into(), &serde_json::json!(["a"]))
    );
    assert!(!hit(&proxy, "/a/1").await && !hit(&proxy, "/a/2").await);
    assert!(hit(&proxy, "/ab/1").await && hit(&proxy, "/other").await);
    assert_eq!(origin.count("/ab/1"), 1);

    // Several tags at once: repeated or space-separated; a tag nobody carries purges none.
    store_all(&proxy, &["/a/1"]).await;
    let (status, json) = purge(&proxy, "tag=ab&tag=other%20nothing").await;
    assert_eq!((status, &json["purged"]), (200, &2.into()));
    assert!(!hit(&proxy, "/ab/1").await && !hit(&proxy, "/other").await);
    assert!(hit(&proxy, "/a/1").await);
    let (status, json) = purge(&proxy, "tag=nothing").await;
    assert_eq!((status, &json["purged"]), (200, &0.into()));
    let (status, _) = purge(&proxy, "tag=a&site=x").await;
    assert_eq!(status, 400, "one selector at a time");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tag_field_reaches_clients_only_when_configured() {
    let origin = tagging_origin("max-age=3600").await;
    let proxy = storing_proxy(&origin, |c| c.tags.keep_header = true).await;
    let first = get(&proxy.url("/a/1")).await;
    let stored = send_until_hit(|| client().get(proxy.url("/a/1"))).await;
    for seen in [first, stored] {
        assert_eq!(seen.headers["surrogate-key"], "a shared");
    }
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_and_site_purges_stay_within_what_they_name() {
    let origin = tagging_origin("max-age=3600").await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    let paths = ["/img/x.png", "/img/y.png", "/imgs/z.png", "/other"];
    store_all(&proxy, &paths).await;
    let prefix = proxy.url("/img/");
    let (status, json) = purge(&proxy, &format!("prefix={prefix}")).await;
    assert_eq!(
        (status, &json["purged"], &json["prefix"]),
        (200, &2.into(), &prefix.as_str().into())
    );
    assert!(!hit(&proxy, "/img/x.png").await && !hit(&proxy, "/img/y.png").await);
    assert!(hit(&proxy, "/imgs/z.png").await && hit(&proxy, "/other").await);

    // Another host's site purges nothing here; this one's purges everything.
    let (_, json) = purge(&proxy, "site=example.com").await;
    assert_eq!(json["purged"], 0);
    store_all(&proxy, &["/img/x.png", "/img/y.png"]).await;
    let site = proxy.addr.to_string();
    let (status, json) = purge(&proxy, &format!("site={site}")).await;
    assert_eq!((status, &json["purged"]), (200, &4.into()));
    for path in paths {
        assert!(!hit(&proxy, path).await, "{path} after the site purge");
    }
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_reach_every_vary_variant() {
    let origin = tagging_origin("max-age=3600").await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    let variant = |lang: &'static str| {
        let url = proxy.url("/v");
        move || client().get(&url).header("accept-language", lang)
    };
    for lang in ["en", "fr"] {
        send_until_hit(variant(lang)).await;
    }
    // By tag: both variants carry `v` (the marker that names them carries none).
    let (_, json) = purge(&proxy, "tag=v").await;
    assert_eq!(json["purged"], 2);
    for lang in ["en", "fr"] {
        assert!(
            !send(variant(lang)()).await.cache.hit,
            "{lang} after the tag purge"
        );
    }
    // By URL, soft: both variants are marked stale, then each is revalidated once.
    for lang in ["en", "fr"] {
        send_until_hit(variant(lang)).await;
    }
    let (_, json) = purge(&proxy, &format!("url={}&soft=1", proxy.url("/v"))).await;
    assert_eq!(json["soft"], true);
    assert!(json["purged"].as_u64() >= Some(2), "{json}");
    for lang in ["en", "fr"] {
        let seen = send(variant(lang)()).await;
        assert_eq!(
            seen.cache.fwd.as_deref(),
            Some("stale"),
            "{lang}: {:?}",
            seen.cache
        );
        assert_eq!(seen.cache.detail.as_deref(), Some("purged"));
        assert!(send(variant(lang)()).await.cache.hit);
    }
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_purge_makes_entries_stale_until_revalidated() {
    let origin = tagging_origin("max-age=3600").await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    store_all(&proxy, &["/a/1", "/a/2"]).await;
    let (status, json) = purge(&proxy, "tag=a&soft=1").await;
    assert_eq!(
        (status, &json["purged"], &json["soft"]),
        (200, &2.into(), &true.into())
    );
    let seen = get(&proxy.url("/a/1")).await;
    assert_eq!(seen.cache.fwd.as_deref(), Some("stale"), "{:?}", seen.cache);
    assert_eq!(
        seen.cache.fwd_status,
        Some(304),
        "revalidated with the stored validator"
    );
    assert_eq!(seen.cache.detail.as_deref(), Some("purged"));
    assert_eq!(seen.body, b"/a/1 ");
    // Revalidated: a fresh hit again, and the purge mark is gone.
    assert!(hit(&proxy, "/a/1").await);
    assert_eq!(origin.count("/a/1"), 2);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_purged_entry_is_served_stale_where_stale_while_revalidate_allows() {
    let origin = tagging_origin("max-age=3600, stale-while-revalidate=60").await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    store_all(&proxy, &["/a/1"]).await;
    let (_, json) = purge(&proxy, "tag=a&soft=1").await;
    assert_eq!(json["purged"], 1);
    let seen = get(&proxy.url("/a/1")).await;
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(seen.cache.detail.as_deref(), Some("stale-while-revalidate"));
    // The background refresh revalidates it: a fresh hit follows.
    crate::support::eventually(
        || "never a fresh hit after the refresh".into(),
        async || {
            let seen = get(&proxy.url("/a/1")).await;
            (seen.cache.hit && seen.cache.detail.is_none()).then_some(())
        },
    )
    .await;
    assert_eq!(origin.count("/a/1"), 2, "one background revalidation");
    proxy.stop().await;
}

/// `PURGE <path>` to the proxy port.
async fn purge_method(proxy: &TestProxy, path: &str, soft: bool) -> Seen {
    let method = reqwest::Method::from_bytes(b"PURGE").expect("method");
    let request = client().request(method, proxy.url(path));
    send(if soft {
        request.header("soft-purge", "1")
    } else {
        request
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_on_the_proxy_port_is_refused_unless_allowed_and_never_forwarded() {
    let origin = tagging_origin("max-age=3600").await;
    let refusing = storing_proxy(&origin, |_| {}).await;
    store_all(&refusing, &["/a/1"]).await;
    let refused = purge_method(&refusing, "/a/1", false).await;
    assert_eq!(refused.status, 405);
    assert_eq!(refused.cache.detail.as_deref(), Some("purge-refused"));
    assert!(hit(&refusing, "/a/1").await, "still stored");
    assert_eq!(
        origin.count("/a/1"),
        1,
        "the PURGE never reached the origin"
    );
    refusing.stop().await;

    let origin = tagging_origin("max-age=3600").await;
    let allowing = storing_proxy(&origin, |c| {
        c.purge.allow = vec![
            "10.0.0.0/8".parse().expect("net"),
            "127.0.0.1/32".parse().expect("net"),
        ];
    })
    .await;
    store_all(&allowing, &["/a/1", "/a/2"]).await;
    let done = purge_method(&allowing, "/a/1", false).await;
    assert_eq!(done.status, 200);
    let json: serde_json::Value = serde_json::from_slice(&done.body).expect("JSON");
    assert_eq!(
        (&json["purged"], &json["url"]),
        (&1.into(), &allowing.url("/a/1").into())
    );
    assert_eq!(done.cache.detail.as_deref(), Some("purge"));
    assert!(!hit(&allowing, "/a/1").await);
    let soft = purge_method(&allowing, "/a/2", true).await;
    assert_eq!(soft.status, 200);
    assert_eq!(
        get(&allowing.url("/a/2")).await.cache.detail.as_deref(),
        Some("purged")
    );
    let nothing = purge_method(&allowing, "/never", false).await;
    assert_eq!(nothing.status, 404);
    assert_eq!(origin.count("/never"), 0);
    allowing.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_survive_a_restart() {
    let origin = tagging_origin("max-age=3600").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("cache");
    let always = |c: &mut Config| c.admission.policy = AdmissionPolicy::Always;
    let proxy = TestProxy::start_in(origin.addr, &cache, always).await;
    store_all(&proxy, &["/a/1", "/a/2", "/other"]).await;
    let addr = proxy.addr;
    proxy.stop().await;

    // On the same address: the keys name it.
    let proxy = TestProxy::start_in(origin.addr, &cache, |c| {
        always(c);
        c.server.listen = addr;
    })
    .await;
    proxy.wait_scanned().await;
    assert!(
        hit(&proxy, "/a/1").await,
        "the entries are back after the restart"
    );
    let (_, json) = purge(&proxy, "tag=shared").await;
    assert_eq!(json["purged"], 2, "the scan indexed the tags again");
    assert!(!hit(&proxy, "/a/1").await && !hit(&proxy, "/a/2").await);
    let other = get(&proxy.url("/other")).await;
    assert!(other.cache.hit, "{:?}", other.cache);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_in_progress_when_its_tag_is_purged_is_not_stored() {
    // A slow body: the purge arrives while the fill is being written.
    let origin = TestOrigin::start(|_| {
        Reply::slow(
            "max-age=3600",
            vec![7; 64 * 1024],
            4096,
            Duration::from_millis(20),
        )
        .header("surrogate-key", "slow")
    })
    .await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    let url = proxy.url("/slow");
    let leader = tokio::spawn(send(client().get(&url)));
    wait_until(
        || "the fill never began".into(),
        || !proxy.temp_files().is_empty(),
    )
    .await;
    // Collapses on the leader's fill.
    let follower = tokio::spawn(send(client().get(&url)));
    let (status, json) = purge(&proxy, "tag=slow").await;
    assert_eq!(
        (status, &json["purged"]),
        (200, &0.into()),
        "nothing was stored yet"
    );
    let leader = leader.await.expect("leader");
    assert_eq!(
        leader.body.len(),
        64 * 1024,
        "its client still gets the whole body"
    );
    let follower = follower.await.expect("follower");
    // Had the leader's fill been stored, the follower would have been answered from it
    // (`collapsed`); it went to the origin itself, and its own fill, begun after the
    // purge, is the one stored.
    assert!(
        !follower.cache.hit && !follower.cache.collapsed,
        "{:?}",
        follower.cache
    );
    assert_eq!(origin.count("/slow"), 2);
    assert!(send_until_hit(|| client().get(&url)).await.cache.hit);
    assert_eq!(origin.count("/slow"), 2);
    proxy.stop().await;
}

/// A soft purge that lands while a revalidation of the entry is waiting for the origin
/// keeps its mark: the 304 answered a question asked before the purge, so the entry is
/// revalidated again on its next request rather than served fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_purge_during_a_revalidation_keeps_its_mark() {
    // Long enough for the purge below to land first; the test fails loudly if not.
    const ORIGIN_PAUSE: Duration = Duration::from_secs(3);
    let origin = TestOrigin::start_conditional("\"v1\"", |head| {
        let reply = Reply::ok("max-age=3600", b"page".to_vec()).header("surrogate-key", "p");
        if head.headers.contains_key("if-none-match") {
            reply.delayed(ORIGIN_PAUSE)
        } else {
            reply
        }
    })
    .await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    store_all(&proxy, &["/p"]).await;
    let url = proxy.url("/p");
    let revalidation = tokio::spawn(send(client().get(&url).header("cache-control", "no-cache")));
    wait_until(
        || "the revalidation never reached the origin".into(),
        || origin.count("/p") == 2,
    )
    .await;
    let (status, json) = purge(&proxy, "tag=p&soft=1").await;
    assert_eq!((status, &json["purged"]), (200, &1.into()));
    assert!(
        !revalidation.is_finished(),
        "the origin answered before the purge landed: the test proves nothing"
    );
    let revalidated = revalidation.await.expect("revalidating client");
    assert_eq!(revalidated.cache.fwd_status, Some(304));
    let next = get(&url).await;
    assert_eq!(next.cache.fwd.as_deref(), Some("stale"), "{:?}", next.cache);
    assert_eq!(next.cache.detail.as_deref(), Some("purged"));
    proxy.stop().await;
}

/// A soft-purged entry is revalidated even for a client whose `max-stale` would accept
/// any staleness (the purge says the content changed, not that it aged); and while the
/// origin cannot be reached, `cache.stale_if_unreachable` still serves it, as a soft
/// purge keeps the copy for exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_purged_entry_ignores_max_stale_but_serves_while_the_origin_is_unreachable() {
    let origin = tagging_origin("max-age=3600").await;
    let proxy = storing_proxy(&origin, |c| {
        c.cache.stale_if_unreachable = Duration::from_secs(3600);
    })
    .await;
    store_all(&proxy, &["/a/1", "/a/2"]).await;
    let (_, json) = purge(&proxy, "tag=a&soft=1").await;
    assert_eq!(json["purged"], 2);
    let url = proxy.url("/a/1");
    let tolerant = send(client().get(&url).header("cache-control", "max-stale")).await;
    assert_eq!(
        tolerant.cache.fwd.as_deref(),
        Some("stale"),
        "{:?}",
        tolerant.cache
    );
    assert_eq!(tolerant.cache.detail.as_deref(), Some("purged"));
    assert_eq!(origin.count("/a/1"), 2, "revalidated with the origin");
    origin.go_down().await;
    let unreachable = get(&proxy.url("/a/2")).await;
    assert_eq!(unreachable.status, 200);
    assert!(unreachable.cache.hit, "{:?}", unreachable.cache);
    assert_eq!(
        unreachable.cache.detail.as_deref(),
        Some("stale-if-unreachable")
    );
    assert_eq!(unreachable.body, b"/a/2 ");
    proxy.stop().await;
}

/// Asserts that `path`'s answer was not stored, for the `Cache-Status` detail `detail`.
async fn refused_for_tags(proxy: &TestProxy, path: &str, detail: &str) {
    let seen = get(&proxy.url(path)).await;
    assert!(
        !seen.cache.hit && !seen.cache.stored,
        "{path}: {:?}",
        seen.cache
    );
    assert_eq!(seen.cache.detail.as_deref(), Some(detail), "{path}");
}

/// Once `tags.max_memory` is spent (here by one group of entries), a response whose tags
/// do not fit is not stored, rather than stored with tags no purge could find: a purge
/// of its tag never leaves it a hit. The purge answer and `/metrics` count the responses
/// refused so; once purges give the budget back, the tag is stored and purged again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_whose_tags_do_not_fit_the_budget_is_not_stored_unpurgeable() {
    let origin = tagging_origin("max-age=3600").await;
    // Each tag is charged twice its length plus 64 bytes: `a` and `shared` of two entries.
    let proxy = storing_proxy(&origin, |c| c.tags.max_memory = 2 * (66 + 76)).await;
    store_all(&proxy, &["/a/1", "/a/2"]).await;
    for _ in 0..2 {
        refused_for_tags(&proxy, "/other", "tag-memory-full").await;
    }
    let (status, json) = purge(&proxy, "tag=other").await;
    assert_eq!((status, &json["purged"]), (200, &0.into()));
    assert_eq!(json["unindexed"], 2, "{json}");
    assert!(
        !hit(&proxy, "/other").await,
        "nothing tagged `other` outlives its purge"
    );
    let metrics = scrape(&proxy).await;
    let refused = "secondhit_tags_unindexed_total{reason=\"tag-memory-full\"}";
    assert_eq!(sample(&metrics, refused), 3.0);

    let (_, json) = purge(&proxy, "tag=shared").await;
    assert_eq!(json["purged"], 2, "{json}");
    store_all(&proxy, &["/other"]).await;
    let (_, json) = purge(&proxy, "tag=other").await;
    assert_eq!(json["purged"], 1, "{json}");
    assert!(!hit(&proxy, "/other").await);
    proxy.stop().await;
}

/// A response with more tags than `tags.max_per_entry`, or one longer than
/// `tags.max_length`, is not stored either: keeping only the tags that fit would leave
/// it a hit after a purge of one of the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_with_tags_beyond_the_per_entry_limits_is_not_stored() {
    let origin = tagging_origin("max-age=3600").await;
    let proxy = storing_proxy(&origin, |c| {
        c.tags.max_per_entry = 1;
        c.tags.max_length = 4;
    })
    .await;
    refused_for_tags(&proxy, "/many", "tags-too-many").await;
    refused_for_tags(&proxy, "/other", "tag-too-long").await;
    store_all(&proxy, &["/img/x.png"]).await;
    let (_, json) = purge(&proxy, "tag=m2").await;
    assert_eq!(
        (&json["purged"], &json["unindexed"]),
        (&0.into(), &2.into())
    );
    assert!(!hit(&proxy, "/many").await);
    let (_, json) = purge(&proxy, "tag=img").await;
    assert_eq!(json["purged"], 1, "{json}");
    proxy.stop().await;
}

/// Stores `path` requested with `Host: host` (until a hit).
async fn store_as(proxy: &TestProxy, host: &str, path: &str) {
    let url = proxy.url(path);
    send_until_hit(|| client().get(&url).header("host", host)).await;
}

/// Whether `path` requested with `Host: host` is a hit.
async fn hit_as(proxy: &TestProxy, host: &str, path: &str) -> bool {
    send(client().get(proxy.url(path)).header("host", host))
        .await
        .cache
        .hit
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_purge_without_a_port_reaches_every_port_of_that_host_and_one_with_a_port_that_port()
{
    let origin = tagging_origin("max-age=3600").await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    let hosts = [
        "cdn.example.com:8080",
        "CDN.example.com:9000",
        "cdn.example.com",
        "other.example.com:8080",
        "cdn.example.com.evil:8080",
    ];
    let store = async || {
        for host in hosts {
            store_as(&proxy, host, "/a.css").await;
        }
    };
    store().await;
    let (status, json) = purge(&proxy, "site=cdn.example.com").await;
    assert_eq!((status, &json["purged"]), (200, &3.into()), "{json}");
    let mut left = Vec::new();
    for host in hosts {
        left.push(hit_as(&proxy, host, "/a.css").await);
    }
    assert_eq!(
        left,
        [false, false, false, true, true],
        "hits after the purge"
    );

    // With a port, that port only; the default port is the entry keyed without one.
    store().await;
    for (site, purged) in [("cdn.example.com:8080", 0), ("cdn.example.com:80", 2)] {
        let (status, json) = purge(&proxy, &format!("site={site}")).await;
        assert_eq!(
            (status, &json["purged"]),
            (200, &1.into()),
            "{site}: {json}"
        );
        assert!(!hit_as(&proxy, hosts[purged], "/a.css").await, "{site}");
    }
    assert!(hit_as(&proxy, hosts[1], "/a.css").await, "port 9000 kept");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_requested_before_its_tag_was_purged_is_served_but_not_stored() {
    // The origin takes its time to answer: the purge comes between the request reaching
    // it and its answer, so the answer may hold what the purge meant to remove.
    let version = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(1));
    let served = version.clone();
    let origin = TestOrigin::start(move |_| {
        let v = served.load(std::sync::atomic::Ordering::SeqCst);
        Reply::ok("max-age=3600", format!("v{v}").into_bytes())
            .header("surrogate-key", "news")
            .delayed(Duration::from_millis(400))
    })
    .await;
    let proxy = storing_proxy(&origin, |_| {}).await;
    let url = proxy.url("/news");
    let first = tokio::spawn(send(client().get(&url)));
    wait_until(
        || "the request reached the origin".into(),
        || origin.count("/news") == 1,
    )
    .await;
    // The content changes and the purge says so, before the origin's answer is in.
    version.store(2, std::sync::atomic::Ordering::SeqCst);
    let (status, _) = purge(&proxy, "tag=news").await;
    assert_eq!(status, 200);
    let first = first.await.expect("first request");
    assert_eq!(
        first.body, b"v1",
        "its client gets the answer to its request"
    );
    assert_eq!(
        first.cache.detail.as_deref(),
        Some("purged-in-flight"),
        "{:?}",
        first.cache
    );
    assert!(!first.cache.stored);
    // Nothing from before the purge is served after it.
    let next = get(&url).await;
    assert_eq!(next.body, b"v2", "{:?}", next.cache);
    assert!(!next.cache.hit);
    proxy.stop().await;
}
