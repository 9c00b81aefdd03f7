//! Cache poisoning: every normalisation the cache key does, sent raw, must never let one
//! URL's response answer another. The origin echoes the target and `Host` it received,
//! so a body shows which request it answered; every raw spelling below is keyed as its
//! normal form, and the origin must have been asked for exactly that form.

use secondhit_proxy::config::AdmissionPolicy;

use crate::proxy_hygiene::common::{Raw, exchange};
use crate::support::{Reply, TestOrigin, TestProxy};

/// What the echoing origin answers for a request of `target` with `Host: host`.
fn echo(target: &str, host: &str) -> String {
    format!("target={target} host={host}")
}

async fn echoing_setup() -> (TestOrigin, TestProxy) {
    let origin = TestOrigin::start(|head| {
        let target = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let host = (head.headers.get("host"))
            .and_then(|host| host.to_str().ok())
            .unwrap_or("");
        Reply::ok("max-age=3600", echo(target, host).into_bytes())
    })
    .await;
    let proxy = storing_proxy(&origin).await;
    (origin, proxy)
}

/// A proxy in front of `origin` that stores every response at once: a poisoned entry
/// would be there to be hit.
async fn storing_proxy(origin: &TestOrigin) -> TestProxy {
    TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await
}

async fn get(proxy: &TestProxy, target: &str, host: &str) -> Raw {
    let request = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n");
    exchange(proxy, request.as_bytes()).await
}

fn body(raw: &Raw) -> String {
    String::from_utf8_lossy(&raw.body).into_owned()
}

/// Sends `raw_target` with `raw_host` twice (a miss that stores, then a hit), then the
/// normal form: every answer must be the origin's answer to the normal form.
async fn assert_keyed_as_forwarded(raw_target: &str, raw_host: &str, target: &str, host: &str) {
    let (origin, proxy) = echoing_setup().await;
    let expected = echo(target, host);
    for round in ["first", "second"] {
        let raw = get(&proxy, raw_target, raw_host).await;
        assert_eq!(raw.status, 200, "{round} {raw_target} Host: {raw_host}");
        assert_eq!(
            body(&raw),
            expected,
            "{round} {raw_target} Host: {raw_host}: the origin was asked for what is keyed"
        );
    }
    let normal = get(&proxy, target, host).await;
    assert_eq!(normal.status, 200);
    assert!(
        normal.list("cache-status").contains("hit"),
        "{target} Host: {host} is answered from the entry {raw_target} Host: {raw_host} stored: {}",
        normal.list("cache-status")
    );
    assert_eq!(
        body(&normal),
        expected,
        "{target} Host: {host} never gets the answer to {raw_target} Host: {raw_host}"
    );
    if raw_target != target {
        assert_eq!(
            origin.count(raw_target),
            0,
            "the raw target never reached the origin"
        );
    }
    assert_eq!(origin.total(), 1, "one origin fetch for one key");
    proxy.stop().await;
}

#[tokio::test]
async fn dot_segments_are_merged_before_the_request_is_forwarded() {
    assert_keyed_as_forwarded("/evil/../app.js", "localhost", "/app.js", "localhost").await;
    assert_keyed_as_forwarded("/a/./b/../c.js", "localhost", "/a/c.js", "localhost").await;
    assert_keyed_as_forwarded("/../../top.js", "localhost", "/top.js", "localhost").await;
}

#[tokio::test]
async fn escaped_dot_segments_are_merged_before_the_request_is_forwarded() {
    assert_keyed_as_forwarded("/x/%2e%2e/lib.css", "localhost", "/lib.css", "localhost").await;
    assert_keyed_as_forwarded("/x/%2E/lib.css", "localhost", "/x/lib.css", "localhost").await;
}

#[tokio::test]
async fn percent_escapes_are_forwarded_in_their_normal_form() {
    assert_keyed_as_forwarded("/%7euser/%41", "localhost", "/~user/A", "localhost").await;
    assert_keyed_as_forwarded("/q?x=%7e&y=%3a", "localhost", "/q?x=~&y=%3A", "localhost").await;
}

#[tokio::test]
async fn raw_utf_8_beside_an_escape_is_forwarded_and_keyed_as_sent() {
    // hyper takes UTF-8 sent raw in a target; normalising the escape next to it must leave
    // its bytes alone, not read each byte as a character of its own and encode it again.
    let (raw, normal) = ("/caf\u{e9}/%41", "/caf\u{e9}/A");
    assert_keyed_as_forwarded(raw, "localhost", normal, "localhost").await;
    let (raw, normal) = ("/q?city=k\u{f8}benhavn&x=%7e", "/q?city=k\u{f8}benhavn&x=~");
    assert_keyed_as_forwarded(raw, "localhost", normal, "localhost").await;
}

#[tokio::test]
async fn host_spellings_are_forwarded_as_the_host_they_are_keyed_as() {
    for raw_host in [
        "localhost.",
        "LocalHost",
        "localhost:80",
        "localhost:080",
        "localhost:00080",
        "localhost:",
    ] {
        assert_keyed_as_forwarded("/host.js", raw_host, "/host.js", "localhost").await;
    }
    // A port other than the default stays, written canonically.
    assert_keyed_as_forwarded("/port.js", "localhost:08080", "/port.js", "localhost:8080").await;
}

#[tokio::test]
async fn an_absolute_form_target_is_forwarded_as_it_is_keyed() {
    let (origin, proxy) = echoing_setup().await;
    let request = b"GET http://LOCALHOST./evil/../abs.js HTTP/1.1\r\nHost: localhost.\r\n\r\n";
    let raw = exchange(&proxy, request).await;
    assert_eq!(raw.status, 200);
    assert_eq!(body(&raw), echo("/abs.js", "localhost"));
    let normal = get(&proxy, "/abs.js", "localhost").await;
    assert!(normal.list("cache-status").contains("hit"));
    assert_eq!(body(&normal), echo("/abs.js", "localhost"));
    assert_eq!(origin.total(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn an_absolute_form_target_without_a_path_is_forwarded_with_its_slash() {
    // `http://host?query` names the path `/` (RFC 9110 §4.2.3), as its key does.
    let (origin, proxy) = echoing_setup().await;
    let request = b"GET http://localhost?q=1 HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let raw = exchange(&proxy, request).await;
    assert_eq!(raw.status, 200, "{}", body(&raw));
    assert_eq!(body(&raw), echo("/?q=1", "localhost"));
    let normal = get(&proxy, "/?q=1", "localhost").await;
    assert!(normal.list("cache-status").contains("hit"));
    assert_eq!(origin.total(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn an_absolute_form_target_forwards_the_authority_it_is_keyed_under_as_host() {
    // The target's authority wins over Host (RFC 9112 §3.2.2). `Host: localhost:443`
    // passes the check against `https://localhost` (443 is that scheme's port), but this
    // listener's key for it is `http://localhost/…`: the origin must be asked for that.
    let (origin, proxy) = echoing_setup().await;
    let request = b"GET https://localhost/h.js HTTP/1.1\r\nHost: localhost:443\r\n\r\n";
    let raw = exchange(&proxy, request).await;
    assert_eq!(raw.status, 200, "{}", body(&raw));
    assert_eq!(body(&raw), echo("/h.js", "localhost"));
    let normal = get(&proxy, "/h.js", "localhost").await;
    assert!(normal.list("cache-status").contains("hit"));
    assert_eq!(origin.total(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn an_unsafe_method_is_forwarded_with_the_target_it_invalidates() {
    let (origin, proxy) = echoing_setup().await;
    let request = b"POST /evil/../form HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n";
    let raw = exchange(&proxy, request).await;
    assert_eq!(raw.status, 200);
    assert_eq!(body(&raw), echo("/form", "localhost"));
    assert_eq!(origin.count("/evil/../form"), 0);
    proxy.stop().await;
}

/// The fields with which IIS, Symfony and other frameworks let a request name another
/// URL or method than its own, with a value that would poison the entry.
const OVERRIDE_FIELDS: [(&str, &str); 5] = [
    ("X-Original-URL", "/admin"),
    ("X-Rewrite-URL", "/admin"),
    ("X-HTTP-Method-Override", "DELETE"),
    ("X-HTTP-Method", "DELETE"),
    ("X-Method-Override", "DELETE"),
];

/// An origin that honours the override fields, as IIS's URL rewrite or Symfony's
/// `HttpMethodParameterOverride` do: the body names the method and URL it acted on.
async fn overridable_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let field = |name: &str| head.headers.get(name).and_then(|v| v.to_str().ok());
        let target = field("x-original-url")
            .or_else(|| field("x-rewrite-url"))
            .unwrap_or_else(|| head.uri.path());
        let method = field("x-http-method-override")
            .or_else(|| field("x-http-method"))
            .or_else(|| field("x-method-override"))
            .unwrap_or_else(|| head.method.as_str());
        Reply::ok("max-age=3600", format!("{method} {target}").into_bytes())
    })
    .await
}

/// A GET whose override field would have the origin act on another URL or method is
/// forwarded without it, so the entry stored under its key is the key's own answer.
#[tokio::test]
async fn url_and_method_override_fields_are_not_forwarded_on_the_cache_path() {
    let origin = overridable_origin().await;
    let proxy = storing_proxy(&origin).await;
    for (at, (name, value)) in OVERRIDE_FIELDS.into_iter().enumerate() {
        let path = format!("/page{at}");
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{name}: {value}\r\n\r\n");
        let hostile = exchange(&proxy, request.as_bytes()).await;
        assert_eq!(body(&hostile), format!("GET {path}"), "{name}");
        let sent = origin.last_headers(&path).expect("the origin was asked");
        assert!(
            !sent.contains_key(name),
            "{name} reached the origin: {sent:?}"
        );
        proxy.wait_committed(at as u64 + 1).await;
        let next = get(&proxy, &path, "localhost").await;
        assert!(next.list("cache-status").contains("hit"), "{name}");
        assert_eq!(body(&next), format!("GET {path}"), "{name}");
    }
    proxy.stop().await;
}

/// CGI, PHP and the frameworks on them read `X_Original_URL` as `X-Original-URL` (both
/// are `HTTP_X_ORIGINAL_URL`), so a field named with underscores is stripped too.
#[tokio::test]
async fn override_fields_spelled_with_underscores_are_not_forwarded_either() {
    let origin = TestOrigin::start(|head| {
        let spelled: Vec<&str> = (head.headers.keys())
            .map(|name| name.as_str())
            .filter(|name| name.replace('_', "-") == "x-original-url")
            .collect();
        Reply::ok("max-age=3600", format!("{spelled:?}").into_bytes())
    })
    .await;
    let proxy = storing_proxy(&origin).await;
    let request = "GET /u HTTP/1.1\r\nHost: localhost\r\nX_Original_URL: /admin\r\n\
                   X-Original_URL: /admin\r\nx_original-url: /admin\r\n\r\n";
    let raw = exchange(&proxy, request.as_bytes()).await;
    assert_eq!(raw.status, 200);
    assert_eq!(body(&raw), "[]", "no spelling reached the origin");
    proxy.stop().await;
}

/// The override fields are kept on requests the cache never answers from storage (an API
/// that tunnels PUT through POST keeps working), and on every request when the operator
/// empties `cache.strip_request_fields`.
#[tokio::test]
async fn override_fields_are_forwarded_where_nothing_is_stored_or_when_configured() {
    let origin = overridable_origin().await;
    let proxy = storing_proxy(&origin).await;
    let request = "POST /api HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\
                   X-HTTP-Method-Override: PUT\r\n\r\n";
    let tunnelled = exchange(&proxy, request.as_bytes()).await;
    assert_eq!(body(&tunnelled), "PUT /api");
    proxy.stop().await;

    let text = "[cache]\nstrip_request_fields = []\n";
    let proxy = TestProxy::start(origin.addr, move |c| {
        let parsed = secondhit_proxy::config::Config::from_toml_str(text)
            .unwrap_or_else(|e| panic!("cache.strip_request_fields must be a config key: {e}"));
        // The whole parsed table, but for where and how the test's store lives.
        let (dir, fsync) = (c.cache.dir.clone(), c.cache.fsync);
        c.cache = parsed.cache;
        c.cache.dir = dir;
        c.cache.fsync = fsync;
    })
    .await;
    let request = "GET /page HTTP/1.1\r\nHost: localhost\r\nX-Original-URL: /admin\r\n\r\n";
    let kept = exchange(&proxy, request.as_bytes()).await;
    assert_eq!(body(&kept), "GET /admin");
    proxy.stop().await;
}
