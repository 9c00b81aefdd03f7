//! Helpers shared by the RFC 9111 scenarios.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use secondhit_proxy::config::{AdmissionPolicy, Config};

use crate::support::{self, Reply, Seen, TestOrigin, TestProxy};

/// A proxy in front of `origin` with admission `always`: storable responses are stored
/// on first sight.
pub(crate) async fn proxy_always(origin: &TestOrigin) -> TestProxy {
    TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always
    })
    .await
}

/// A proxy with admission `always` and `cache.heuristic_max_age = <value>`, set through
/// the TOML key (the key the contract names) so that this file compiles before the
/// field exists.
pub(crate) async fn proxy_with_heuristic_max_age(origin: &TestOrigin, value: &str) -> TestProxy {
    let text = format!("[cache]\nheuristic_max_age = \"{value}\"\n");
    TestProxy::start(origin.addr, move |c| {
        let parsed = Config::from_toml_str(&text)
            .unwrap_or_else(|e| panic!("cache.heuristic_max_age must be a config key: {e}"));
        let (dir, fsync) = (c.cache.dir.clone(), c.cache.fsync);
        c.cache = parsed.cache;
        c.cache.dir = dir;
        c.cache.fsync = fsync;
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await
}

/// Sends `method path` with `headers` to the proxy and reads the whole answer.
pub(crate) async fn request(
    proxy: &TestProxy,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Seen {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method token");
    let mut builder = support::client().request(method, proxy.url(path));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    support::send(builder).await
}

/// GET `path` with `headers`.
pub(crate) async fn get_with(proxy: &TestProxy, path: &str, headers: &[(&str, &str)]) -> Seen {
    request(proxy, "GET", path, headers).await
}

/// GET `path` (with `headers`), expect the answer to be stored, and wait until the
/// proxy has committed `committed` fills in all.
pub(crate) async fn fill(
    proxy: &TestProxy,
    path: &str,
    headers: &[(&str, &str)],
    committed: u64,
) -> Seen {
    let seen = get_with(proxy, path, headers).await;
    assert!(
        seen.cache.stored,
        "GET {path} should be stored: {:?}",
        seen.cache
    );
    proxy.wait_committed(committed).await;
    seen
}

/// A response header as text.
pub(crate) fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers.get(name).and_then(|v| v.to_str().ok())
}

/// The served `Age` in seconds; every hit must carry one (RFC 9111 §5.1).
pub(crate) fn age(seen: &Seen) -> u64 {
    header(seen, "age")
        .unwrap_or_else(|| panic!("a hit carries Age: {:?}", seen.headers))
        .parse()
        .expect("Age is a non-negative integer")
}

/// Asserts a response served from storage: `hit` and an `Age` header.
pub(crate) fn assert_hit(seen: &Seen) {
    assert!(seen.cache.hit, "expected a hit: {:?}", seen.cache);
    assert!(
        seen.cache.fwd.is_none(),
        "a hit is not forwarded: {:?}",
        seen.cache
    );
    age(seen);
}

/// Asserts a response that went to the origin for `fwd`.
pub(crate) fn assert_forwarded(seen: &Seen, fwd: &str) {
    assert!(!seen.cache.hit, "expected fwd={fwd}, got {:?}", seen.cache);
    assert_eq!(seen.cache.fwd.as_deref(), Some(fwd), "{:?}", seen.cache);
}

/// The `ttl` parameter of a hit, which must be present.
pub(crate) fn ttl(seen: &Seen) -> i64 {
    seen.cache
        .ttl
        .unwrap_or_else(|| panic!("expected a ttl parameter: {:?}", seen.cache))
}

/// A shared counter a script can bump and a test can read.
#[derive(Clone, Default)]
pub(crate) struct Counter(Arc<AtomicUsize>);

impl Counter {
    /// Adds one and returns the value before.
    pub(crate) fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst)
    }

    /// The current value.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Sets the value.
    pub(crate) fn set(&self, value: usize) {
        self.0.store(value, Ordering::SeqCst)
    }
}

/// A request header as text, for scripts.
pub(crate) fn request_header<'a>(head: &'a http::request::Parts, name: &str) -> Option<&'a str> {
    head.headers.get(name).and_then(|v| v.to_str().ok())
}

/// A deterministic 1000-byte body (the Range scenarios slice it).
pub(crate) fn thousand() -> Vec<u8> {
    support::body_bytes(1000, 7)
}

/// A validated origin that answers `Cache-Control: <cc>` with `Age: 70` (so `max-age=60`
/// is stale by 10 s on arrival) while `errors` is 0, and status `errors` otherwise.
pub(crate) async fn stale_origin(cc: &'static str, errors: &Counter) -> TestOrigin {
    let errors = errors.clone();
    TestOrigin::start(move |_| match errors.get() {
        0 => Reply::ok(cc, b"stale-body".to_vec())
            .header("age", "70")
            .header("etag", "\"st\""),
        status => Reply::status(status as u16, b"origin-error".to_vec()),
    })
    .await
}
