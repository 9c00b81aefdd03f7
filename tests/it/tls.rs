//! TLS on both sides, over real sockets, with a test CA made in the test: the TLS listener
//! (HTTP/1.1 and h2 by ALPN, SNI choosing the certificate, `X-Forwarded-Proto` and the
//! cache key following the listener, a certificate swapped by SIGHUP, `check-config`
//! reading the files), and `https://` origins (verified against `origin.ca_file`, refused
//! without it, accepted unverified with the unsafe option).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use secondhit_proxy::config::{AdmissionPolicy, Config, TlsConfig};

use crate::support::serve::{BIN, ServeProcess};
use crate::support::tls::{IssuedCertificate, TestCa, server_acceptor, tls_get};
use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, get};

/// Larger than the memory tier would take and than the zero-copy threshold: a hit reads
/// it mapped from its file, which a TLS connection must encrypt from memory instead.
const LARGE: usize = 256 * 1024;

/// An origin whose answers may be stored for a minute, with a body per path.
async fn cacheable_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let seed = head.uri.path().len() as u8;
        Reply::ok("max-age=60", body_bytes(LARGE, seed))
    })
    .await
}

/// `[server.tls]` on a free port serving `certificates`, first one the default.
fn tls_on(config: &mut Config, certificates: &[&IssuedCertificate]) {
    config.server.tls = Some(TlsConfig {
        listen: "127.0.0.1:0".parse().expect("address"),
        certificates: certificates
            .iter()
            .map(|issued| issued.files.clone())
            .collect(),
    });
}

/// A proxy with a TLS listener serving one certificate, for `site.test`, from a test CA,
/// in front of [`cacheable_origin`]; `tweak` adjusts the rest. The CA trusts it; the temp
/// directory holds the certificate's files.
struct SiteOverTls {
    _dir: tempfile::TempDir,
    ca: TestCa,
    origin: TestOrigin,
    proxy: TestProxy,
}

impl SiteOverTls {
    async fn start(tweak: impl FnOnce(&mut Config)) -> SiteOverTls {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = TestCa::new();
        let site = ca.issue(dir.path(), "site", &["site.test"]);
        let origin = cacheable_origin().await;
        let proxy = TestProxy::start(origin.addr, |config| {
            tls_on(config, &[&site]);
            tweak(config);
        })
        .await;
        SiteOverTls {
            _dir: dir,
            ca,
            origin,
            proxy,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_http1_and_h2_and_keys_https_apart_from_http() {
    let SiteOverTls {
        _dir,
        ca,
        origin,
        proxy,
    } = SiteOverTls::start(|config| {
        config.admission.policy = AdmissionPolicy::Always;
        config.cache.memory_size = 0;
    })
    .await;
    let tls = proxy.tls.expect("the TLS listener");
    let expected = body_bytes(LARGE, "/large".len() as u8);

    let http1 = tls_get(&ca.client(&[b"http/1.1"]), tls, "site.test", "/large").await;
    assert_eq!(http1.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(http1.version, http::Version::HTTP_11);
    assert_eq!(http1.status, 200);
    assert!(http1.cache.stored, "{:?}", http1.cache);
    assert_eq!(http1.body, expected);
    let forwarded = origin.last_headers("/large").expect("the origin saw it");
    assert_eq!(forwarded.get("x-forwarded-proto").expect("xfp"), "https");
    proxy.wait_committed(1).await;

    let h2 = tls_get(
        &ca.client(&[b"h2", b"http/1.1"]),
        tls,
        "site.test",
        "/large",
    )
    .await;
    assert_eq!(h2.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(h2.version, http::Version::HTTP_2);
    assert!(h2.cache.hit, "{:?}", h2.cache);
    assert_eq!(h2.body, expected, "a mapped body sent whole over TLS");
    assert_eq!(origin.count("/large"), 1);

    // The same URL in cleartext is another key: a miss, forwarded as http.
    let plain = crate::support::send(
        crate::support::client()
            .get(proxy.url("/large"))
            .header("host", "site.test"),
    )
    .await;
    assert!(!plain.cache.hit, "{:?}", plain.cache);
    assert_eq!(origin.count("/large"), 2);
    let forwarded = origin.last_headers("/large").expect("the origin saw it");
    assert_eq!(forwarded.get("x-forwarded-proto").expect("xfp"), "http");
    proxy.stop().await;
}

/// ALPN: an HTTP/1.0 client that names its protocol is served, as nginx serves it; a
/// client that offers only protocols the listener does not speak is refused in the
/// handshake (RFC 7301 §3.2), not left to send bytes no parser expects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_0_alpn_client_is_served_and_one_offering_no_known_protocol_is_refused() {
    let SiteOverTls {
        _dir,
        ca,
        origin: _origin,
        proxy,
    } = SiteOverTls::start(|_| {}).await;
    let tls = proxy.tls.expect("the TLS listener");
    let seen = tls_get(&ca.client(&[b"http/1.0"]), tls, "site.test", "/").await;
    assert_eq!(seen.alpn.as_deref(), Some(&b"http/1.0"[..]));
    assert_eq!(seen.status, 200);
    let tcp = tokio::net::TcpStream::connect(tls).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("site.test").expect("name");
    let refused = ca.client(&[b"spdy/3.1"]).connect(name, tcp).await;
    let error = refused.expect_err("no protocol in common: refused");
    assert!(
        error.to_string().contains("NoApplicationProtocol"),
        "{error}"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_chooses_the_certificate_and_no_name_gets_the_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new();
    let first = ca.issue(dir.path(), "first", &["a.test", "127.0.0.1"]);
    let wildcard = ca.issue(dir.path(), "wildcard", &["*.b.test"]);
    let origin = cacheable_origin().await;
    let proxy = TestProxy::start(origin.addr, |config| tls_on(config, &[&first, &wildcard])).await;
    let tls = proxy.tls.expect("the TLS listener");
    let client = ca.client(&[b"http/1.1"]);

    let seen = tls_get(&client, tls, "a.test", "/").await;
    assert_eq!(seen.certificate, first.der);
    let seen = tls_get(&client, tls, "www.b.test", "/").await;
    assert_eq!(seen.certificate, wildcard.der);
    assert_eq!(seen.status, 200);
    // An IP address is never sent as SNI: no name, the first certificate.
    let seen = tls_get(&client, tls, "127.0.0.1", "/").await;
    assert_eq!(seen.certificate, first.der);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_starts_its_handshake_is_closed_at_the_header_read_timeout() {
    use tokio::io::AsyncReadExt;
    // The origin is bound too: dropping it would stop it.
    let SiteOverTls {
        _dir,
        ca,
        origin: _origin,
        proxy,
    } = SiteOverTls::start(|config| {
        config.server.header_read_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let mut silent = tokio::net::TcpStream::connect(proxy.tls.expect("the TLS listener"))
        .await
        .expect("connect");
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(crate::support::PATIENCE, silent.read(&mut buf))
        .await
        .expect("the proxy closed the silent connection");
    // Closed (or reset) without a byte: no TLS alert is owed to a client that said nothing.
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // The listener still serves others.
    let seen = tls_get(
        &ca.client(&[b"http/1.1"]),
        proxy.tls.expect("TLS"),
        "site.test",
        "/",
    )
    .await;
    assert_eq!(seen.status, 200);
    proxy.stop().await;
}

/// A TLS handshake in progress holds a connection slot and no request, as a silent
/// cleartext connection does: at `server.max_connections`, clients that opened the TLS
/// listener and never finished their handshake are dropped to make room, so a new client
/// waits neither for `server.header_read_timeout` nor for them to give up.
#[tokio::test(start_paused = true)]
async fn with_max_connections_full_of_stalled_handshakes_a_new_tls_client_is_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let SiteOverTls {
        _dir,
        ca,
        origin: _origin,
        proxy,
    } = SiteOverTls::start(|config| {
        config.server.max_connections = 4;
        // Longer than the test waits: no timer of the proxy's frees a slot in time.
        config.server.header_read_timeout = std::time::Duration::from_secs(120);
        config.server.idle_timeout = std::time::Duration::from_secs(120);
    })
    .await;
    let tls = proxy.tls.expect("the TLS listener");
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut stream = tokio::net::TcpStream::connect(tls).await.expect("connect");
        // The first bytes of a ClientHello's record, and then nothing.
        stream.write_all(&[0x16, 0x03, 0x01]).await.expect("write");
        stalled.push(stream);
    }
    let seen = tokio::time::timeout(
        crate::support::PATIENCE,
        tls_get(&ca.client(&[b"http/1.1"]), tls, "site.test", "/new"),
    )
    .await
    .expect("the new client is served while stalled handshakes hold every slot");
    assert_eq!(seen.status, 200);
    for stream in &mut stalled {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(crate::support::PATIENCE, stream.read(&mut buf))
            .await
            .expect("a stalled handshake was dropped to make room");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    proxy.stop().await;
}

/// An `https://` origin on 127.0.0.1 whose certificate, for `localhost`, is issued by a
/// CA of its own; written to `dir` with that CA's file `origin-ca.pem`.
async fn https_origin(dir: &Path) -> (TestOrigin, std::path::PathBuf) {
    let ca = TestCa::new();
    let certificate = ca.issue(dir, "origin", &["localhost"]);
    let origin = TestOrigin::start_tls(server_acceptor(&certificate), |head| {
        Reply::ok("max-age=60", head.uri.path().as_bytes().to_vec())
    })
    .await;
    (origin, ca.write_pem(dir, "origin-ca.pem"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_origin_is_verified_against_origin_ca_file_or_accepted_only_unsafely() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (origin, ca_file) = https_origin(dir.path()).await;
    // The certificate names `localhost`: the name checked (and sent as SNI) is the URL's.
    let url: http::Uri = format!("https://localhost:{}", origin.addr.port())
        .parse()
        .expect("origin url");

    let (u, ca) = (url.clone(), ca_file.clone());
    let proxy = TestProxy::start(origin.addr, move |config| {
        config.origin.url = u;
        config.origin.ca_file = Some(ca);
    })
    .await;
    let seen = get(&proxy.url("/verified")).await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body, b"/verified");
    let received = origin.last_headers("/verified").expect("the origin saw it");
    // `origin.host_header = "client"`: the client's Host, over a connection to localhost.
    assert_eq!(received.get("host").expect("host"), &proxy.addr.to_string());
    proxy.stop().await;

    let u = url.clone();
    let proxy = TestProxy::start(origin.addr, move |config| {
        config.origin.url = u;
        config.origin.danger_accept_invalid_certs = true;
    })
    .await;
    let seen = get(&proxy.url("/unverified")).await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body, b"/unverified");
    proxy.stop().await;
    assert_eq!(origin.count("/verified") + origin.count("/unverified"), 2);
}

/// A `serve` config in `dir` in front of `origin_url`, with `extra` lines in `[server]`
/// and `[origin]`; JSON logs, so [`ServeProcess`] can read them.
fn write_serve_config(
    dir: &Path,
    origin_url: &str,
    server: &str,
    origin: &str,
) -> std::path::PathBuf {
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\nshutdown_timeout = \"5s\"\n{server}\n\
         [origin]\nurl = \"{origin_url}\"\n{origin}\n\
         [cache]\ndir = \"{}\"\nfsync = false\n\
         [admission]\nseed = \"tls tests\"\nexpected_urls = 10000\n\
         [log]\nformat = \"json\"\n",
        dir.join("cache").display()
    );
    let path = dir.join("secondhit.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_origin_without_its_ca_is_refused_with_502_and_a_log_line_saying_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (origin, _ca_file) = https_origin(dir.path()).await;
    let url = format!("https://localhost:{}", origin.addr.port());
    // The system's trust store does not know the test CA. Without one at all, the start
    // itself refuses, naming the remedy; either way nothing unverified is fetched.
    let config = write_serve_config(dir.path(), &url, "", "");
    let (ok, stderr) = check_config(&config);
    if !ok {
        assert!(stderr.contains("origin.ca_file"), "{stderr}");
        eprintln!("skipped the 502: this system has no CA certificates ({stderr})");
        return;
    }
    let mut serve = ServeProcess::start(&config).await;
    let seen = get(&format!("http://{}/refused", serve.addr)).await;
    assert_eq!(seen.status, 502);
    assert_eq!(origin.count("/refused"), 0);
    let line = serve
        .wait_for_log("origin unreachable: TLS handshake with the origin failed")
        .await;
    assert!(line.contains("request failed"), "{line}");
    assert!(line.contains("invalid peer certificate"), "{line}");
    assert!(serve.terminate().await.success());
}

/// The address in the `"tls"` field of `serve`'s "listening" line.
async fn tls_addr(serve: &mut ServeProcess) -> SocketAddr {
    let line = serve.wait_for_log("\"listening\"").await;
    let start = line.find("\"tls\":\"").expect("tls field") + "\"tls\":\"".len();
    let end = line[start..].find('"').expect("tls end") + start;
    line[start..end].parse().expect("TLS address")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_swaps_a_renewed_certificate_and_keeps_it_when_the_new_file_is_broken() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new();
    let old = ca.issue(dir.path(), "site", &["site.test"]);
    let origin = cacheable_origin().await;
    let server = format!(
        "[server.tls]\nlisten = \"127.0.0.1:0\"\ncertificates = [{{ chain = \"{}\", key = \"{}\" }}]",
        old.files.chain.display(),
        old.files.key.display()
    );
    let config = write_serve_config(dir.path(), &format!("http://{}", origin.addr), &server, "");
    let mut serve = ServeProcess::start(&config).await;
    let tls = tls_addr(&mut serve).await;
    // A new client for each connection: one that resumed its earlier session would be
    // shown that session's certificate again.
    let client = || ca.client(&[b"http/1.1"]);
    assert_eq!(
        tls_get(&client(), tls, "site.test", "/").await.certificate,
        old.der
    );

    // A renewal writes over the same files; the config file does not change.
    let renewed = ca.issue(dir.path(), "site", &["site.test"]);
    assert_ne!(renewed.der, old.der);
    let mark = serve.log_mark();
    serve.signal("HUP");
    serve
        .wait_for_log_with(mark, &["TLS certificates reloaded"])
        .await;
    let seen = tls_get(&client(), tls, "site.test", "/").await;
    assert_eq!(seen.certificate, renewed.der);
    assert_eq!(seen.status, 200);

    std::fs::write(&renewed.files.chain, "not a certificate\n").expect("break the chain");
    let mark = serve.log_mark();
    serve.signal("HUP");
    let chain = renewed.files.chain.display().to_string();
    // The reload is rejected whole, naming the file; the running certificate stays.
    let line = serve
        .wait_for_log_with(mark, &["config reload rejected", &chain])
        .await;
    assert!(line.contains("server.tls.certificates[0].chain"), "{line}");
    let seen = tls_get(&client(), tls, "site.test", "/").await;
    assert_eq!(
        seen.certificate, renewed.der,
        "the running certificate is kept"
    );
    assert!(serve.terminate().await.success());
}

/// Runs `check-config` on `path`: whether it accepted the file, and its stderr.
fn check_config(path: &Path) -> (bool, String) {
    let output = Command::new(BIN)
        .arg("check-config")
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .expect("run check-config");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stderr)
}

#[test]
fn check_config_reads_the_certificate_files_and_names_the_key_of_one_that_does_not_parse() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new();
    let good = ca.issue(dir.path(), "good", &["good.test"]);
    let other = ca.issue(dir.path(), "other", &["other.test"]);
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\nnot base64\n").expect("write");
    let table = |chain: &Path, key: &Path| {
        format!(
            "[server.tls]\nlisten = \"127.0.0.1:0\"\ncertificates = [\n  {{ chain = \"{}\", key = \"{}\" }},\n  {{ chain = \"{}\", key = \"{}\" }},\n]",
            good.files.chain.display(),
            good.files.key.display(),
            chain.display(),
            key.display()
        )
    };
    let origin = "http://127.0.0.1:8081";
    let config = write_serve_config(
        dir.path(),
        origin,
        &table(&other.files.chain, &other.files.key),
        "",
    );
    let (ok, stderr) = check_config(&config);
    assert!(ok, "{stderr}");

    let cases = [
        (
            table(&garbage, &other.files.key),
            "server.tls.certificates[1].chain",
        ),
        (
            table(&other.files.chain, &garbage),
            "server.tls.certificates[1].key",
        ),
        // A key that parses but belongs to another certificate.
        (
            table(&other.files.chain, &good.files.key),
            "server.tls.certificates[1].key",
        ),
        (
            table(&dir.path().join("missing.pem"), &other.files.key),
            "server.tls.certificates[1].chain",
        ),
    ];
    for (server, key) in cases {
        let config = write_serve_config(dir.path(), origin, &server, "");
        let (ok, stderr) = check_config(&config);
        assert!(!ok, "accepted: {server}");
        assert!(stderr.contains(key), "{key} not named: {stderr}");
    }
    let ca_file = format!("ca_file = \"{}\"", garbage.display());
    let config = write_serve_config(dir.path(), "https://127.0.0.1:8443", "", &ca_file);
    let (ok, stderr) = check_config(&config);
    assert!(!ok && stderr.contains("origin.ca_file"), "{stderr}");
}

#[test]
fn the_guide_tls_example_passes_check_config_with_its_files_in_place() {
    let text = crate::support::guide_toml_block("tls.md");
    let config = Config::from_toml_str(&text).expect("the guide's TLS config validates");
    let tls = config.server.tls.as_ref().expect("a TLS listener");
    assert_eq!(tls.certificates.len(), 2);
    assert_eq!(config.origin.url.scheme_str(), Some("https"));

    // The files it names, made by a test CA in a temp directory standing for /etc/secondhit/tls.
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new();
    ca.issue(dir.path(), "example.com", &["example.com"]);
    ca.issue(dir.path(), "example.org", &["*.example.org"]);
    ca.write_pem(dir.path(), "origin-ca.pem");
    let moved = text.replace("/etc/secondhit/tls", &dir.path().display().to_string());
    assert_ne!(moved, text, "the guide's paths moved to the temp directory");
    let path = dir.path().join("secondhit.toml");
    std::fs::write(&path, moved).expect("write config");
    let (ok, stderr) = check_config(&path);
    assert!(ok, "{stderr}");
}
