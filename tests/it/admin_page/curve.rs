//! The admin page's miss-ratio curves: `admission.estimate` from `/stats` drawn as one
//! line per candidate against the cache size, the configured size as a rule, the chosen
//! candidate bold, and a caption whose figures are `/stats`' own. The browser test loads the
//! page before any traffic (it says there is nothing yet) and after skewed traffic whose tail
//! a larger cache would catch; the plain test checks that `/stats` carries every field the page's
//! drawing reads, so that renaming one on either side fails here rather than leaving an
//! empty chart.

use crate::support::browser::{chromium, keep_for_viewing, required_chromium, screenshot};
use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, get, stats};
use serde_json::Value;

use super::text_of;

/// The configured cache: about 200 of the bodies below, small enough that the estimates
/// sample every key (their smallest miniature holds far fewer than the thousand objects
/// they aim at).
const MAX_SIZE: u64 = 1 << 20;

/// Distinct objects, four times what the configured size holds.
const OBJECTS: usize = 1000;

/// Requests sent: enough that every modelled size has hits and misses to count.
const REQUESTS: usize = 3000;

/// Every field of `admission.estimate` the page's drawing reads, by level.
const ESTIMATE_FIELDS: [&str; 4] = ["curves", "optimize", "sample_rate", "seconds"];
const CURVE_FIELDS: [&str; 4] = ["candidate", "chosen", "runnable", "points"];
const POINT_FIELDS: [&str; 7] = [
    "factor",
    "cache_bytes",
    "configured_size",
    "requests",
    "object_miss_ratio",
    "byte_miss_ratio",
    "written_bytes_per_second",
];

async fn proxy_with_small_cache() -> (TestOrigin, TestProxy) {
    // `/o/{k}` has a body of 1000 + 8k bytes: the rarer objects are the larger, so the
    // byte and object miss ratios differ as they do on real traffic.
    let origin = TestOrigin::start(|request| {
        let k = (request.uri.path().rsplit('/').next()).and_then(|k| k.parse::<usize>().ok());
        Reply::ok("max-age=3600", body_bytes(1000 + 8 * k.unwrap_or(0), 5))
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.cache.max_size = MAX_SIZE;
        // No epoch ends during the test: the estimates only add up what it sends.
        c.admission.auto_epoch = std::time::Duration::from_secs(24 * 3600);
        // Nor does the replays' CPU bound lower the rate: every key stays sampled.
        c.admission.estimate_budget = std::time::Duration::from_secs(1);
    })
    .await;
    (origin, proxy)
}

/// [`REQUESTS`] requests for [`OBJECTS`] objects of Zipf-like popularity (object `k` drawn
/// with weight `1/(k+1)^0.8`, by a fixed pseudo-random sequence): a few hot objects and a
/// long tail, so that each larger size catches more of the tail.
async fn skewed_traffic(proxy: &TestProxy) {
    let weights: Vec<f64> = (0..OBJECTS)
        .map(|k| 1.0 / ((k + 1) as f64).powf(0.8))
        .collect();
    let total: f64 = weights.iter().sum();
    let cumulative: Vec<f64> = (weights.iter())
        .scan(0.0, |sum, w| {
            *sum += w / total;
            Some(*sum)
        })
        .collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..REQUESTS {
        // A 64-bit linear congruential step; its high 53 bits as a share of one.
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let draw = (state >> 11) as f64 / (1u64 << 53) as f64;
        let k = cumulative.partition_point(|&c| c < draw).min(OBJECTS - 1);
        assert_eq!(get(&proxy.url(&format!("/o/{k}"))).await.status, 200);
    }
}

/// Every number directly followed by `%` in `text`, in order.
fn percents(text: &str) -> Vec<f64> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices('%') {
        let digits = text[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_digit() || *c == '.')
            .last();
        if let Some((start, _)) = digits {
            found.push(text[start..at].parse().expect("a number before %"));
        }
    }
    found
}

/// The figure the page prints with one decimal (as a percentage or points) matches `share`.
fn shows(printed: f64, share: f64) -> bool {
    (printed - 100.0 * share).abs() <= 0.051
}

/// The attribute `name` of the start tag `tag` (its text from `<` to `>`).
fn attribute<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let needle = format!(" {name}=\"");
    let at = tag.find(&needle)? + needle.len();
    Some(&tag[at..at + tag[at..].find('"')?])
}

/// The svg with `id` in `dom`, from its start tag to its end.
fn svg_of<'d>(dom: &'d str, id: &str) -> &'d str {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id}"));
    let start = dom[..at].rfind('<').expect("a start tag");
    &dom[start..at + dom[at..].find("</svg>").expect("the svg ends")]
}

/// Each `<path>` start tag in `svg` with a `data-candidate`: (candidate, class, d).
fn lines_of(svg: &str) -> Vec<(String, String, String)> {
    (svg.split("<path ").skip(1))
        .filter_map(|rest| {
            // With the space the tag's name took, so its first attribute is found too.
            let tag = format!(" {}", &rest[..rest.find('>')?]);
            let tag = tag.as_str();
            Some((
                attribute(tag, "data-candidate")?.to_owned(),
                attribute(tag, "class")?.to_owned(),
                attribute(tag, "d")?.to_owned(),
            ))
        })
        .collect()
}

/// The (x, y) vertices of a path of `M x y L x y ...`.
fn vertices(d: &str) -> Vec<(f64, f64)> {
    let numbers: Vec<f64> = (d.split([' ', 'M', 'L']))
        .filter(|part| !part.is_empty())
        .map(|part| part.parse().expect("a coordinate"))
        .collect();
    numbers.chunks(2).map(|xy| (xy[0], xy[1])).collect()
}

fn curves(estimate: &Value) -> &Vec<Value> {
    estimate["curves"].as_array().expect("curves")
}

fn points(curve: &Value) -> &Vec<Value> {
    curve["points"].as_array().expect("points")
}

/// `curve`'s point at the configured size.
fn configured(curve: &Value) -> &Value {
    (points(curve).iter())
        .find(|point| point["configured_size"] == true)
        .unwrap_or_else(|| panic!("no point at the configured size: {curve}"))
}

fn curve_named<'e>(estimate: &'e Value, name: &str) -> &'e Value {
    (curves(estimate).iter())
        .find(|curve| curve["candidate"] == name)
        .unwrap_or_else(|| panic!("no curve for {name}: {estimate}"))
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// Each chart has one line per candidate with one vertex per size, the chosen one bold,
/// higher where the candidate misses more, and the configured-size rule on its vertex.
fn check_chart(dom: &str, id: &str, key: &str, estimate: &Value) {
    let svg = svg_of(dom, id);
    let lines = lines_of(svg);
    assert_eq!(lines.len(), curves(estimate).len(), "one line each: {svg}");
    let rule = svg
        .split("<line ")
        .find(|tag| tag.contains(&format!("id=\"{id}-configured\"")))
        .unwrap_or_else(|| panic!("no configured-size rule in #{id}: {svg}"));
    let rule_x: f64 = attribute(rule, "x1").expect("x1").parse().expect("x");
    for curve in curves(estimate) {
        let name = curve["candidate"].as_str().expect("a name");
        let (_, class, d) = (lines.iter())
            .find(|(candidate, ..)| candidate == name)
            .unwrap_or_else(|| panic!("no line for {name} in #{id}"));
        assert_eq!(
            curve["chosen"] == true,
            class.contains("chosen"),
            "{name}: {class}"
        );
        let drawn = vertices(d);
        let figures: Vec<f64> = points(curve).iter().map(|p| number(&p[key])).collect();
        assert_eq!(drawn.len(), figures.len(), "{name}: {d}");
        for (a, b) in (0..figures.len()).flat_map(|a| (a + 1..figures.len()).map(move |b| (a, b))) {
            if (figures[a] - figures[b]).abs() > 0.01 {
                // SVG's y grows downwards: a higher miss ratio is drawn higher up.
                let higher = drawn[a].1 < drawn[b].1;
                assert_eq!(
                    higher,
                    figures[a] > figures[b],
                    "{name} in #{id}: {d} for {figures:?}"
                );
            }
        }
        let at = (points(curve).iter()).position(|p| p["configured_size"] == true);
        let at = at.expect("a configured point");
        assert!(
            (drawn[at].0 - rule_x).abs() < 0.1,
            "the rule at {rule_x}, {name} at {d}"
        );
    }
}

/// The caption's figures are those of `/stats`: the chosen candidate at the configured,
/// largest and smallest sizes, and second-hit's writes and misses against always's.
fn check_caption(dom: &str, estimate: &Value) {
    let key = match estimate["optimize"].as_str() {
        Some("objects") => "object_miss_ratio",
        _ => "byte_miss_ratio",
    };
    let chosen = curve_named(estimate, estimate["chosen"].as_str().expect("chosen"));
    let sizes = points(chosen);
    let more_disk = text_of(dom, "curve-more-disk");
    let shown = percents(&more_disk);
    let expected = [
        number(&configured(chosen)[key]),
        number(&sizes[sizes.len() - 1][key]),
        number(&sizes[0][key]),
    ];
    assert_eq!(shown.len(), 3, "{more_disk}");
    for (printed, share) in shown.iter().zip(expected) {
        assert!(shows(*printed, share), "{more_disk}: {share}");
    }
    assert!(
        more_disk.starts_with("4× the disk (4.00 MiB): "),
        "{more_disk}"
    );
    let name = chosen["candidate"].as_str().expect("a name");
    assert!(
        more_disk.ends_with(&format!("({name}, the current choice).")),
        "{more_disk}"
    );

    let second = configured(curve_named(estimate, "second-hit"));
    let always = configured(curve_named(estimate, "always"));
    let written = |p: &Value| number(&p["written_bytes_per_second"]);
    let admission = text_of(dom, "curve-admission");
    let share = percents(&admission);
    assert_eq!(share.len(), 1, "{admission}");
    assert!(
        shows(share[0], written(second) / written(always)),
        "{admission}"
    );
    let diff = number(&second[key]) - number(&always[key]);
    let (_, after) = admission.split_once("misses ").expect("misses");
    if after.starts_with("as many ") {
        // Under a twentieth of a point apart: the page calls it a tie.
        assert!(diff.abs() < 0.0005, "{admission}: {diff}");
        return;
    }
    let word = if diff > 0.0 { "more" } else { "fewer" };
    let points: f64 = (after.split(' ').next().expect("points"))
        .parse()
        .expect("a number");
    assert!(shows(points, diff.abs()), "{admission}: {diff}");
    assert!(
        after.contains(&format!(" points {word} ")),
        "{admission}: {diff}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium: cargo test -- --ignored once installed (.ci/run does)"]
async fn the_page_draws_each_candidates_miss_ratio_against_cache_size() {
    let browser = required_chromium();
    let (_origin, proxy) = proxy_with_small_cache().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = proxy.admin_url("/");
    let load = |extra: Vec<String>| {
        let (browser, profile, url) = (browser.clone(), dir.path().join("profile"), url.clone());
        async move { chromium(&browser, &profile, &url, &extra).await }
    };

    // No traffic yet: the page says so instead of drawing empty curves.
    let dom = load(vec!["--dump-dom".to_owned()]).await;
    assert_eq!(
        text_of(&dom, "curve-empty"),
        "No request seen yet: the curves appear with traffic."
    );
    assert!(
        dom.contains("id=\"curve-body\" hidden"),
        "the charts are hidden"
    );

    skewed_traffic(&proxy).await;
    let estimate = stats(&proxy).await["admission"]["estimate"].clone();
    assert_eq!(curves(&estimate).len(), 5, "{estimate:#}");
    let dom = load(vec!["--dump-dom".to_owned()]).await;
    std::fs::write(dir.path().join("curve.html"), &dom).expect("DOM written");
    assert!(
        dom.contains("id=\"curve-empty\" hidden"),
        "nothing to excuse"
    );
    check_chart(&dom, "curve-bytes", "byte_miss_ratio", &estimate);
    check_chart(&dom, "curve-objects", "object_miss_ratio", &estimate);
    check_caption(&dom, &estimate);
    // The table: a row per candidate, the chosen one marked, its figures as /stats has them.
    let chosen = estimate["chosen"].as_str().expect("chosen");
    let row = format!("class=\"chosen\" data-candidate=\"{chosen}\"");
    assert_eq!(dom.matches(&row).count(), 1, "{row}");
    assert_eq!(dom.matches("<tr data-candidate=").count(), 4);

    let (profile, png) = (
        dir.path().join("profile"),
        dir.path().join("admin-curve.png"),
    );
    screenshot(&browser, &profile, &url, &png, (1280, 1560)).await;
    keep_for_viewing(dir, "admin page's curve", "admin-curve.png", "curve.html");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_carries_every_field_the_curve_reads() {
    let (_origin, proxy) = proxy_with_small_cache().await;
    get(&proxy.url("/one")).await;
    let page = get(&proxy.admin_url("/")).await;
    let page = String::from_utf8_lossy(&page.body);
    let estimate = stats(&proxy).await["admission"]["estimate"].clone();
    let read =
        |field: &str| page.contains(&format!(".{field}")) || page.contains(&format!("\"{field}\""));
    let curve = &curves(&estimate)[0];
    let point = &points(curve)[0];
    for (fields, value) in [
        (&ESTIMATE_FIELDS[..], &estimate),
        (&CURVE_FIELDS[..], curve),
        (&POINT_FIELDS[..], point),
    ] {
        for field in fields {
            assert!(read(field), "the page reads no {field}");
            assert!(!value[field].is_null(), "/stats has no {field}: {value}");
        }
    }
    // The caption compares these two by name.
    for name in ["second-hit", "always"] {
        assert!(page.contains(&format!("c.name === \"{name}\"")), "{name}");
        assert_eq!(curve_named(&estimate, name)["runnable"], true, "{estimate}");
    }
    assert_eq!(estimate["optimize"], "bytes", "the page's default measure");
}
