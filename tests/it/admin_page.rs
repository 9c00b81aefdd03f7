//! The admin page (`GET /`) in a real browser: the proxy takes a scripted sequence (a
//! generation fills and rotates, one URL is admitted and hit), headless Chromium loads the
//! page with the admin token in the URL fragment, and the DOM its script rendered must show
//! the same fills, rotations and decisions `/stats` reports. A screenshot at 1280×800 is
//! written beside the DOM (its path is printed); `docs/admin-page.png` is one of them.
//!
//! Chromium is found as `chromium`, `chromium-browser` or `google-chrome`; without one the
//! browser test is `#[ignore]`d (the runner lists it, with why), and run with `--ignored`
//! where Chromium is installed, as `.ci/run` does; run without it, it fails naming what is
//! missing. The page's
//! headers and the token rules need no browser and always run.

mod curve;

use crate::support::browser::{chromium, keep_for_viewing, required_chromium, screenshot};
use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, client, get, send};
use secondhit_proxy::config::FilterSizing;
use std::path::Path;

const TOKEN: &str = "page-token";

/// The text inside the element with `id` in `dom` (an element holding text only).
fn text_of(dom: &str, id: &str) -> String {
    let needle = format!("id=\"{id}\"");
    let at = dom
        .find(&needle)
        .unwrap_or_else(|| panic!("no #{id} in the DOM"));
    let start = at + dom[at..].find('>').expect("the tag ends") + 1;
    let end = start + dom[start..].find('<').expect("the text ends");
    dom[start..end]
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

/// The attribute `name` of the element with `id` in `dom`.
fn attribute_of(dom: &str, id: &str, name: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let tag_start = dom[..at].rfind('<')?;
    let tag = &dom[tag_start..at + dom[at..].find('>')?];
    let value_at = tag.find(&format!("{name}=\""))? + name.len() + 2;
    Some(tag[value_at..value_at + tag[value_at..].find('"')?].to_owned())
}

/// `share` as the page prints a percentage with one decimal.
fn percent(share: f64) -> String {
    format!("{:.1}%", 100.0 * share)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium: cargo test -- --ignored once installed (.ci/run does)"]
async fn the_page_renders_the_live_filters_rotations_and_decisions() {
    let browser = required_chromium();
    let origin = TestOrigin::start(|_| Reply::ok("max-age=3600", body_bytes(2000, 3))).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.admin_token = Some(TOKEN.to_owned());
        // Generations of 8 new keys: the ninth distinct URL lands in a new generation.
        c.admission.sizing = FilterSizing::ExpectedUrls(8);
    })
    .await;
    let truth = rotate_once_and_admit_one_url(&proxy).await;

    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("{}#token={TOKEN}", proxy.admin_url("/"));
    let dom = chromium(
        &browser,
        &dir.path().join("profile"),
        &url,
        &["--dump-dom".to_owned()],
    )
    .await;
    std::fs::write(dir.path().join("page.html"), &dom).expect("DOM written");

    assert_eq!(text_of(&dom, "policy"), "second-hit");
    let polls: u32 = dom
        .split_once("data-polls=\"")
        .and_then(|(_, rest)| rest.split('"').next())
        .expect("the page polled /stats")
        .parse()
        .expect("a count");
    assert!(polls >= 2, "the page polled {polls} times: {dom}");
    assert_generations_as_stats_has_them(&dom, &truth["filters"]);
    assert_operations_as_stats_has_them(&dom, &truth);
    assert_rotation_decisions_and_model(&dom);

    screenshot_under_traffic(&browser, &proxy, dir.path(), &url).await;
    keep_for_viewing(dir, "admin page", "admin-page.png", "page.html");
}

/// Drives the scripted sequence (eight first sights rotate generation 0, one URL is
/// admitted and hit, two more first sights) and returns `/stats` after it.
async fn rotate_once_and_admit_one_url(proxy: &TestProxy) -> serde_json::Value {
    // 1. Eight first sights fill generation 0, and the eighth rotates it (cause: fill).
    for i in 0..8 {
        let seen = get(&proxy.url(&format!("/first/{i}"))).await;
        assert_eq!(seen.cache.detail.as_deref(), Some("first-sight"));
    }
    // 2. One URL twice: rejected, then admitted and stored; then a hit.
    assert_eq!(
        get(&proxy.url("/twice")).await.cache.detail.as_deref(),
        Some("first-sight")
    );
    assert!(get(&proxy.url("/twice")).await.cache.stored);
    proxy.wait_committed(1).await;
    assert!(get(&proxy.url("/twice")).await.cache.hit);
    // 3. Two more first sights in the new generation.
    for i in 0..2 {
        get(&proxy.url(&format!("/later/{i}"))).await;
    }
    let answer = send(client().get(proxy.admin_url("/stats")).bearer_auth(TOKEN)).await;
    assert_eq!(answer.status, 200);
    let truth: serde_json::Value = serde_json::from_slice(&answer.body).expect("JSON");
    let filters = &truth["filters"];
    assert_eq!(filters["rotations"]["fill"], 1, "{truth:#}");
    assert_eq!(filters["recent_rotations"][0]["cause"], "fill", "{truth:#}");
    truth
}

/// Asserts that the page shows both generations as `/stats`'s `filters` has them.
fn assert_generations_as_stats_has_them(dom: &str, filters: &serde_json::Value) {
    // The generations, as /stats has them (no request came in between).
    let current = &filters["current"];
    let previous = &filters["previous"];
    assert_eq!(
        text_of(dom, "current-fill"),
        percent(current["fill_ratio"].as_f64().expect("fill"))
    );
    assert_eq!(
        text_of(dom, "previous-fill"),
        percent(previous["fill_ratio"].as_f64().expect("fill"))
    );
    assert_eq!(text_of(dom, "current-inserts"), "3");
    let previous_keys = previous["estimated_keys"].as_f64().expect("keys");
    assert_eq!(
        text_of(dom, "previous-keys"),
        format!(
            "{} of 8 ({})",
            previous_keys.round(),
            percent(previous_keys / 8.0)
        )
    );
    assert!(text_of(dom, "generation").ends_with("generation 1"));
    // Both generations on the same basis: the filters' capacity, the target beside it.
    let current_keys = text_of(dom, "current-keys");
    assert!(current_keys.contains(" of 8 ("), "{current_keys}");
}

/// Asserts that the page's operations panel shows the requests and store of `truth` (`/stats`).
fn assert_operations_as_stats_has_them(dom: &str, truth: &serde_json::Value) {
    // The operations panel, as /stats has it.
    let requests = &truth["requests"];
    let total: u64 = ["hit", "stale", "miss", "pass"]
        .iter()
        .map(|r| requests[r].as_u64().expect("a count"))
        .sum();
    assert!(
        text_of(dom, "ops-requests").starts_with(&format!("{total}: hit {}", requests["hit"])),
        "{}",
        text_of(dom, "ops-requests")
    );
    let store = &truth["store"];
    assert!(
        text_of(dom, "ops-store").ends_with(&format!(", {} objects", store["objects"])),
        "{}",
        text_of(dom, "ops-store")
    );
    assert!(
        text_of(dom, "ops-origin").starts_with("p50 "),
        "{}",
        text_of(dom, "ops-origin")
    );
    assert_eq!(text_of(dom, "ops-errors"), "none");
    assert!(
        text_of(dom, "ops-memory").contains(" of 64.0 MiB ("),
        "{}",
        text_of(dom, "ops-memory")
    );
    assert!(text_of(dom, "ops-open-files").starts_with(&format!("{} of ", store["open_files"])));
    assert_eq!(
        text_of(dom, "series-req-hit-total"),
        requests["hit"].to_string()
    );
}

/// Asserts that the page shows the one fill rotation, the decisions since start, a sizing
/// model that agrees with the server's, and a fresh update.
fn assert_rotation_decisions_and_model(dom: &str) {
    // The rotation and its timeline entry.
    assert_eq!(text_of(dom, "rotations-total"), "1");
    assert!(
        text_of(dom, "rotations-by-cause").starts_with("fill 1 · age 0 · forced 0"),
        "{}",
        text_of(dom, "rotations-by-cause")
    );
    assert_eq!(dom.matches("class=\"cause cause-fill\"").count(), 1);
    // Decisions since start: 11 first sights, 1 admitted, none re-admitted.
    assert_eq!(text_of(dom, "series-rejected-total"), "11");
    assert_eq!(text_of(dom, "series-admitted-total"), "1");
    assert_eq!(text_of(dom, "series-readmitted-total"), "0");
    // The page's port of the sizing model agrees with the server's.
    assert_eq!(
        attribute_of(dom, "model-check", "data-match").as_deref(),
        Some("yes"),
        "{}",
        text_of(dom, "model-check")
    );
    assert!(
        text_of(dom, "status").starts_with("updated"),
        "{}",
        text_of(dom, "status")
    );
}

/// Takes the page's screenshot into `dir/admin-page.png` while traffic runs, so its time
/// series have a shape: a few hot URLs among many new ones.
async fn screenshot_under_traffic(browser: &Path, proxy: &TestProxy, dir: &Path, url: &str) {
    let traffic = {
        let urls: Vec<String> = (0..10_000)
            .map(|i| {
                let path = if i % 3 == 0 {
                    format!("/hot/{}", i % 7)
                } else {
                    format!("/new/{i}")
                };
                proxy.url(&path)
            })
            .collect();
        tokio::spawn(async move {
            for url in urls {
                get(&url).await;
            }
        })
    };
    let profile = dir.join("profile");
    let png = dir.join("admin-page.png");
    screenshot(browser, &profile, url, &png, (1280, 800)).await;
    traffic.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_loads_without_the_token_but_its_data_needs_it() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.server.admin_token = Some(TOKEN.to_owned());
    })
    .await;
    let page = get(&proxy.admin_url("/")).await;
    assert_eq!(page.status, 200);
    let header = |name: &str| {
        page.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(header("content-type"), "text/html; charset=utf-8");
    assert_eq!(header("cache-control"), "no-store");
    assert!(header("content-security-policy").starts_with("default-src 'none'"));
    assert!(String::from_utf8_lossy(&page.body).contains("<title>secondhit admin</title>"));
    let head = send(client().head(proxy.admin_url("/"))).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    // Other methods are refused, and /stats still wants the token.
    let posted = send(client().post(proxy.admin_url("/"))).await;
    assert_eq!(posted.status, 405);
    assert_eq!(get(&proxy.admin_url("/stats")).await.status, 401);
    let with_token = send(client().get(proxy.admin_url("/stats")).bearer_auth(TOKEN)).await;
    assert_eq!(with_token.status, 200);
    let stats: serde_json::Value = serde_json::from_slice(&with_token.body).expect("JSON");
    // What the page reads beyond the counters: spare states, the timeline, body bytes.
    assert_eq!(
        stats["filters"]["spares"],
        serde_json::json!(["clean", "clean"])
    );
    assert_eq!(stats["filters"]["recent_rotations"], serde_json::json!([]));
    assert_eq!(stats["body_bytes"]["hit"], 0);
    assert!(stats["byte_hit_ratio"].is_null());
}
