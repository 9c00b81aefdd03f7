//! A reload applies a whole config as one view: each request reads the settings, its site
//! (and so its origin), the admission and its access log from the snapshot it loaded when
//! it arrived, each TLS handshake its certificate; a reload switches them all in one step,
//! and a reload that fails to build changes nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use secondhit_proxy::config::{AccessLog, AdmissionPolicy, Config, MaxObjectSize, TlsConfig};

use crate::support::tls::{IssuedCertificate, TestCa, tls_get};
use crate::support::{Reply, TestOrigin, TestProxy, eventually, get, wait_until};

/// Bodies of this size are stored under one config and too large under the other.
const BODY: usize = 2_000;

/// Starts an origin whose every answer is `BODY` bytes of `tag`.
async fn origin_of(tag: u8) -> TestOrigin {
    TestOrigin::start(move |_| Reply::ok("max-age=3600", vec![tag; BODY])).await
}

/// `base` with `origin` as its origin and `max_object_size` as its limit.
fn config(base: &Config, origin: &TestOrigin, max_object_size: u64) -> Config {
    let mut config = base.clone();
    config.origin.url = format!("http://{}", origin.addr)
        .parse()
        .expect("origin url");
    config.cache.max_object_size = MaxObjectSize::Bytes(max_object_size);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_during_requests_never_shows_a_request_a_mix_of_old_and_new() {
    let (origin_a, origin_b) = (origin_of(b'a').await, origin_of(b'b').await);
    let proxy = TestProxy::start(origin_a.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let base = Config::clone(&proxy.settings.load().settings);
    // Config A stores the origin A's bodies; config B sends to origin B and stores none.
    let config_a = config(&base, &origin_a, 1 << 20);
    let config_b = config(&base, &origin_b, BODY as u64 / 2);
    proxy
        .reloader
        .apply(config_a.clone())
        .await
        .expect("reload A");
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..4 {
        let (stop, answered, base) = (stop.clone(), answered.clone(), proxy.url(""));
        clients.spawn(async move {
            let mut seen = [0usize; 2];
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                // A new key each time: every request is a miss that A's settings store.
                let got = get(&format!("{base}/{client}/{i}")).await;
                i += 1;
                assert_eq!(got.status, 200);
                let from_a = got.body == vec![b'a'; BODY];
                let too_large = got.cache.detail.as_deref() == Some("too-large");
                assert!(
                    (from_a && got.cache.stored) || (!from_a && too_large),
                    "a request saw a mix: body from {}, {:?}",
                    if from_a { "A" } else { "B" },
                    got.cache
                );
                seen[usize::from(!from_a)] += 1;
                answered.fetch_add(1, Ordering::Relaxed);
            }
            seen
        });
    }
    for round in 0..20 {
        let next = if round % 2 == 0 { &config_b } else { &config_a };
        proxy.reloader.apply(next.clone()).await.expect("reload");
        // Some requests under each config before the next reload.
        let before = answered.load(Ordering::Relaxed);
        eventually(
            || "requests after a reload".to_owned(),
            async || (answered.load(Ordering::Relaxed) >= before + 8).then_some(()),
        )
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut seen = [0usize; 2];
    while let Some(client) = clients.join_next().await {
        let [a, b] = client.expect("client task");
        seen = [seen[0] + a, seen[1] + b];
    }
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "both configs answered: {seen:?}"
    );
}

/// A proxy in front of `origin` that stores every miss, serves `certificate` on its TLS
/// listener and logs to `log`.
async fn proxy_with(origin: &TestOrigin, certificate: &IssuedCertificate, log: &Path) -> TestProxy {
    let (certificate, log) = (certificate.files.clone(), log.to_owned());
    TestProxy::start(origin.addr, move |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.server.tls = Some(TlsConfig {
            listen: "127.0.0.1:0".parse().expect("address"),
            certificates: vec![certificate],
        });
        c.log.access_log = AccessLog::File(log);
    })
    .await
}

/// `config` with `certificate` on its TLS listener and its access log in `log`.
fn serving(mut config: Config, certificate: &IssuedCertificate, log: PathBuf) -> Config {
    if let Some(tls) = &mut config.server.tls {
        tls.certificates = vec![certificate.files.clone()];
    }
    config.log.access_log = AccessLog::File(log);
    config
}

/// Waits until the access log `path` has a line for `target`.
async fn wait_logged(path: &Path, target: &str) {
    let line = format!("\"GET {target} ");
    wait_until(
        || format!("{} never logged {target}", path.display()),
        || std::fs::read_to_string(path).is_ok_and(|text| text.contains(&line)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_reload_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new();
    let certificate = ca.issue(dir.path(), "site", &["site.test"]);
    let (origin_a, origin_b) = (origin_of(b'a').await, origin_of(b'b').await);
    let log = dir.path().join("access.log");
    let proxy = proxy_with(&origin_a, &certificate, &log).await;
    let before = proxy.settings.load_full();
    let base = Config::clone(&before.settings);
    // Valid on its own, but its object limit is over the running cache.max_size (which
    // needs a restart): rejected after the new origin was named.
    let mut over_max_size = config(&base, &origin_b, 1 << 20);
    over_max_size.cache.max_object_size = MaxObjectSize::Bytes(base.cache.max_size + 1);
    over_max_size.admission.policy = AdmissionPolicy::SecondHit;
    // A new origin and a new certificate, with an access log that cannot be opened.
    let renewed = ca.issue(dir.path(), "renewed", &["site.test"]);
    let unopenable = dir.path().join("missing/access.log");
    let bad_log = serving(config(&base, &origin_b, 1 << 20), &renewed, unopenable);
    // A new origin and a new access log, with a certificate file that does not load.
    let broken = ca.issue(dir.path(), "broken", &["site.test"]);
    std::fs::write(&broken.files.chain, "not a certificate\n").expect("break the chain");
    let other_log = dir.path().join("other.log");
    let bad_certificate = serving(config(&base, &origin_b, 1 << 20), &broken, other_log);
    let cases = [
        (over_max_size, "cache.max_object_size"),
        (bad_log, "log.access_log"),
        (bad_certificate, "server.tls.certificates[0].chain"),
    ];
    for (rejected, key) in cases {
        let error = proxy.reloader.apply(rejected).await.expect_err("rejected");
        assert!(error.to_string().contains(key), "{key} not named: {error}");
        let after = proxy.settings.load_full();
        assert!(
            Arc::ptr_eq(&before, &after),
            "the running view is the same one"
        );
    }
    let got = get(&proxy.url("/x")).await;
    assert_eq!(got.body, vec![b'a'; BODY], "still origin A");
    assert!(got.cache.stored, "still stored at once: {:?}", got.cache);
    let tls = proxy.tls.expect("the TLS listener");
    let seen = tls_get(&ca.client(&[b"http/1.1"]), tls, "site.test", "/y").await;
    assert_eq!(
        seen.certificate, certificate.der,
        "still the first certificate"
    );
    wait_logged(&log, "/x").await;
    wait_logged(&log, "/y").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_switches_origin_access_log_and_certificate_together() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new();
    let first = ca.issue(dir.path(), "first", &["site.test"]);
    let (origin_a, origin_b) = (origin_of(b'a').await, origin_of(b'b').await);
    let (log_a, log_b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    let proxy = proxy_with(&origin_a, &first, &log_a).await;
    let base = Config::clone(&proxy.settings.load().settings);
    // Answered, and so queued for the first log's writer, just before the reload.
    assert_eq!(get(&proxy.url("/before")).await.body, vec![b'a'; BODY]);
    let second = ca.issue(dir.path(), "second", &["site.test"]);
    let next = serving(config(&base, &origin_b, 1 << 20), &second, log_b.clone());
    proxy.reloader.apply(next).await.expect("reload");

    let tls = proxy.tls.expect("the TLS listener");
    let seen = tls_get(&ca.client(&[b"http/1.1"]), tls, "site.test", "/after").await;
    assert_eq!(seen.certificate, second.der, "the new certificate");
    assert_eq!(seen.body, vec![b'b'; BODY], "the new origin");
    wait_logged(&log_b, "/after").await;
    // The first log's writer wrote out what it had, and nothing after the reload.
    wait_logged(&log_a, "/before").await;
    let old = std::fs::read_to_string(&log_a).expect("the first log");
    assert!(!old.contains("/after"), "{old}");
    let new = std::fs::read_to_string(&log_b).expect("the second log");
    assert!(!new.contains("/before"), "{new}");
}
