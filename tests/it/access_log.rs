//! The access log feeds `secondhit simulate --trace` as it is: the proxy serves real
//! requests and writes its log file, which is read back with the simulator's trace
//! parser — in both formats — and must hold every request, with each object's size.

use std::collections::HashMap;
use std::path::Path;

use secondhit_bench::workload::from_trace;
use secondhit_proxy::config::{AccessFormat, AccessLog, AdmissionPolicy};

use crate::support::{Reply, TestOrigin, TestProxy, body_bytes, client, send};

/// `/obj-N` is N × 100 bytes; `/chunked-N` the same, sent without a Content-Length.
async fn sized_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let path = head.uri.path();
        let n: usize = path
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        let body = body_bytes(n * 100, n as u8);
        if path.starts_with("/chunked") {
            Reply::chunked("max-age=60", body, 64)
        } else {
            Reply::ok("max-age=60", body)
        }
    })
    .await
}

/// Sends the workload: each path GET (a miss, stored), GET until a hit, and one HEAD.
/// Returns each path's body size and the number of requests sent.
async fn drive(proxy: &TestProxy) -> (HashMap<String, u64>, usize) {
    let paths = ["/obj-3", "/obj-7", "/obj-12", "/chunked-5", "/obj-3?v=2"];
    let mut sizes = HashMap::new();
    let mut sent = 0;
    for path in paths {
        let url = proxy.url(path);
        let first = send(client().get(&url)).await;
        assert!(first.cache.stored, "{path}: {:?}", first.cache);
        sent += 1;
        // Until the fill committed; every try is a request (and a line).
        crate::support::wait_until_async(
            || format!("{path} never became a hit"),
            async || {
                sent += 1;
                send(client().get(&url)).await.cache.hit
            },
        )
        .await;
        let head = send(client().head(&url)).await;
        assert!(head.cache.hit, "{path}: {:?}", head.cache);
        sent += 1;
        sizes.insert(path.to_owned(), first.body.len() as u64);
    }
    (sizes, sent)
}

/// Reads `log` back as a trace and checks it against what was sent.
fn check_trace(log: &Path, sizes: &HashMap<String, u64>, sent: usize) {
    let trace = from_trace(log).expect("the access log reads as a trace");
    assert_eq!(trace.malformed_lines, 0, "every line parses");
    assert_eq!(trace.requests.len(), sent, "one line per request");
    let mut per_object: HashMap<u64, u64> = HashMap::new();
    for request in &trace.requests {
        per_object.insert(request.object, request.size);
    }
    let mut expected: Vec<u64> = sizes.values().copied().collect();
    let mut found: Vec<u64> = per_object.values().copied().collect();
    expected.sort_unstable();
    found.sort_unstable();
    assert_eq!(found, expected, "one object per URL, with its body's size");
}

/// Runs the workload through a proxy logging to `dir/name` in `format`, stops it (which
/// writes out the log), checks the log as a trace and returns its text.
async fn logged_workload(dir: &Path, name: &str, format: AccessFormat) -> String {
    let origin = sized_origin().await;
    let log = dir.join(name);
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.log.access_log = AccessLog::File(log.clone());
        c.log.access_format = format;
    })
    .await;
    let (sizes, sent) = drive(&proxy).await;
    proxy.stop().await;
    check_trace(&log, &sizes, sent);
    std::fs::read_to_string(&log).expect("read the log")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_combined_access_log_reads_back_as_a_trace() {
    let logs = tempfile::tempdir().expect("temp dir");
    let text = logged_workload(logs.path(), "access.log", AccessFormat::Combined).await;
    let first = text.lines().next().expect("a first line");
    assert!(
        first.starts_with("127.0.0.1 - - ["),
        "combined format: {first}"
    );
    assert!(
        first.contains("\"GET /obj-3 HTTP/1.1\" 200 300 \"-\" \"-\" \"secondhit; fwd=uri-miss; fwd-status=200; stored\" "),
        "{first}"
    );
    let chunked = text
        .lines()
        .find(|line| line.contains("GET /chunked-5 "))
        .expect("the chunked response's line");
    assert!(
        chunked.contains(" 200 500 "),
        "bytes sent, without a Content-Length: {chunked}"
    );
    let head = text
        .lines()
        .find(|line| line.contains("\"HEAD /obj-7 "))
        .expect("the HEAD's line");
    assert!(head.contains(" 200 0 "), "a HEAD sends no body: {head}");
    assert!(head.contains("\"secondhit; hit"), "{head}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_access_log_reads_back_as_a_trace() {
    let logs = tempfile::tempdir().expect("temp dir");
    // Named .jsonl: the trace parser picks JSON lines by the name.
    let text = logged_workload(logs.path(), "access.jsonl", AccessFormat::Json).await;
    let first: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("a first line")).expect("JSON");
    assert_eq!(first["request_method"], "GET");
    assert_eq!(first["request_uri"], "/obj-3");
    assert_eq!(first["status"], 200);
    assert_eq!(first["body_bytes_sent"], 300);
    assert_eq!(
        first["cache_status"],
        "secondhit; fwd=uri-miss; fwd-status=200; stored"
    );
    assert!(first["request_time"].as_f64().is_some_and(|t| t > 0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_logs_the_host_the_real_client_and_the_origin_server_asked() {
    let logs = tempfile::tempdir().expect("temp dir");
    let log = logs.path().join("access.log");
    let origin = sized_origin().await;
    let template = "$remote_addr|$realip_remote_addr|$host|$request|$status|\
                    $upstream_addr|$upstream_status|$upstream_header_time|$cache_status";
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.log.access_log = AccessLog::File(log.clone());
        c.log.access_format = AccessFormat::Template(
            secondhit_proxy::config::access_format::parse(template).expect("template"),
        );
        // The test's client is the balancer in front.
        c.log.trusted_proxies = vec!["127.0.0.0/8".parse().expect("network")];
    })
    .await;
    let url = proxy.url("/obj-4");
    let from_balancer = || {
        client()
            .get(&url)
            .header("host", "www.example.test:8080")
            .header("x-forwarded-for", "203.0.113.9")
    };
    assert!(send(from_balancer()).await.cache.stored);
    crate::support::wait_until_async(
        || "/obj-4 never became a hit".to_owned(),
        async || send(from_balancer()).await.cache.hit,
    )
    .await;
    proxy.stop().await;
    let text = std::fs::read_to_string(&log).expect("read the log");
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    let miss = &lines[0];
    assert_eq!(
        miss[..7],
        [
            "203.0.113.9",
            "127.0.0.1",
            "www.example.test",
            "GET /obj-4 HTTP/1.1",
            "200",
            &origin.addr.to_string(),
            "200",
        ],
        "{text}"
    );
    let header_time: f64 = miss[7].parse().expect("seconds");
    assert!(header_time > 0.0, "{text}");
    let hit = lines.last().expect("the hit's line");
    assert_eq!(hit[5..8], ["-", "-", "-"], "a hit asked no origin: {text}");
    assert!(hit[8].starts_with("secondhit; hit"), "{text}");
}

/// A balancer that adds its own `X-Forwarded-For` line (HAProxy's `option forwardfor`)
/// after the one the client sent: the lines are one list in order (RFC 9110 §5.3), so the
/// client logged is the last untrusted address of both, not what the client wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_x_forwarded_for_line_is_read_behind_a_trusted_proxy() {
    let logs = tempfile::tempdir().expect("temp dir");
    let log = logs.path().join("access.log");
    let origin = sized_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.log.access_log = AccessLog::File(log.clone());
        c.log.access_format = AccessFormat::Template(
            secondhit_proxy::config::access_format::parse("$remote_addr|$request")
                .expect("template"),
        );
        // The test's client is the balancer, behind another trusted hop.
        c.log.trusted_proxies = ["127.0.0.0/8", "10.0.0.0/8"]
            .map(|net| net.parse().expect("network"))
            .to_vec();
    })
    .await;
    let request = "GET /obj-2 HTTP/1.1\r\nHost: localhost\r\n\
                   X-Forwarded-For: 198.51.100.66\r\n\
                   X-Forwarded-For: 203.0.113.9, 10.0.0.7\r\n\r\n";
    let raw = crate::proxy_hygiene::common::exchange(&proxy, request.as_bytes()).await;
    assert_eq!(raw.status, 200);
    proxy.stop().await;
    let text = std::fs::read_to_string(&log).expect("read the log");
    assert_eq!(text, "203.0.113.9|GET /obj-2 HTTP/1.1\n");
}
