//! `secondhit bench --target URL --trace LOG`: a log's own requests replayed against a
//! running proxy, over real sockets. The command is the one `docs/guide/bench.md` shows
//! under "Replaying a log against a deployment", run as written (the test's addresses and
//! files in place of the page's).

use std::collections::BTreeSet;
use std::path::Path;

use secondhit_proxy::config::AdmissionPolicy;
use serde_json::Value;

use crate::support::{self, Reply, TestOrigin, TestProxy};

/// A request line of the generated log: method, target, host.
type Logged = (&'static str, String, &'static str);

/// 200 requests over two hosts: 40 images requested again and again, a few 404s, a HEAD,
/// and a POST every 50 lines that a replay must not send.
fn generated_log() -> Vec<Logged> {
    (0..200)
        .map(|i| {
            let host = if i % 3 == 0 { "b.example" } else { "a.example" };
            match i {
                i if i % 50 == 49 => ("POST", format!("/form/{i}"), host),
                i if i % 25 == 7 => ("GET", format!("/missing/{}", i % 2), host),
                100 => ("HEAD", "/img/3.png?v=1".to_owned(), host),
                i => ("GET", format!("/img/{}.png?v=1", i % 40), host),
            }
        })
        .collect()
}

/// The log in secondhit's JSON format (which names the host), a second apart.
fn json_log(lines: &[Logged]) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, (method, target, host))| {
            let status = if target.starts_with("/missing/") { 404 } else { 200 };
            format!(
                "{{\"time\":\"2026-10-10T13:{:02}:{:02}Z\",\"host\":\"{host}\",\"request_method\":\"{method}\",\"request_uri\":\"{target}\",\"status\":{status},\"body_bytes_sent\":100}}\n",
                i / 60,
                i % 60
            )
        })
        .collect()
}

/// The guide's replay command, its words with the page's proxy and files replaced.
fn guide_command(proxy: &str, log: &str, json: &str) -> Vec<String> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide/bench.md"))
        .expect("read docs/guide/bench.md");
    let section = page
        .split("\n## Replaying a log against a deployment\n")
        .nth(1)
        .expect("the bench guide has a replay section");
    let command = section
        .lines()
        .map(str::trim)
        .find_map(|line| line.strip_prefix("$ secondhit bench "))
        .expect("the section shows a bench command");
    command
        .split_whitespace()
        .map(|word| match word {
            "http://127.0.0.1:8080" => proxy.to_owned(),
            "access.jsonl" => log.to_owned(),
            "replay.json" => json.to_owned(),
            other => other.to_owned(),
        })
        .collect()
}

/// `<what>.<result>` of `/stats` (`requests` or `body_bytes`) after minus before.
fn counted(before: &Value, after: &Value, what: &str, result: &str) -> u64 {
    let read = |stats: &Value| stats[what][result].as_u64().expect("a count");
    read(after) - read(before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_log_sends_its_own_requests_and_reports_the_proxys_hit_ratio() {
    let origin = origin_with_missing_pages().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let lines = generated_log();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("replay.json");
    let (before, stdout, after) =
        replay_as_the_guide_shows(&proxy, &lines, dir.path(), &json).await;

    // The origin saw the log's GET and HEAD requests, hosts included, and nothing else.
    let replayed: Vec<&Logged> = lines.iter().filter(|(m, ..)| *m != "POST").collect();
    let expected: BTreeSet<(String, Option<String>)> = replayed
        .iter()
        .map(|(_, target, host)| (target.clone(), Some((*host).to_owned())))
        .collect();
    let seen: BTreeSet<(String, Option<String>)> = origin.targets_and_hosts().into_iter().collect();
    assert_eq!(seen, expected, "{stdout}");

    // The report's hit ratio is the proxy's own, over the same requests.
    let counts =
        ["hit", "stale", "miss", "pass"].map(|result| counted(&before, &after, "requests", result));
    let [hit, stale, miss, pass] = counts;
    assert_eq!(hit + stale + miss + pass, replayed.len() as u64);
    assert!(hit > 0 && miss > 0, "hits {hit}, misses {miss}");
    let ratio = hit as f64 / (hit + stale + miss) as f64;
    let row = stdout
        .lines()
        .find(|line| line.starts_with("target "))
        .unwrap_or_else(|| panic!("no target row: {stdout}"));
    let printed = row.split_whitespace().nth(2).expect("hit% column");
    assert_eq!(printed, format!("{:.2}", ratio * 100.0), "{stdout}");
    assert!(stdout.contains("client's view"), "{stdout}");
    assert!(stdout.contains("4 requests with other methods"), "{stdout}");

    let bytes =
        ["hit", "stale", "miss"].map(|result| counted(&before, &after, "body_bytes", result));
    let origin_requests = origin.total() as u64;
    assert_the_json_report_agrees(&json, counts, bytes, &replayed, origin_requests);
}

/// An origin that answers `/missing/…` with a 404 and anything else with a cacheable body
/// whose length depends on the path.
async fn origin_with_missing_pages() -> TestOrigin {
    TestOrigin::start(|head| {
        let path = head.uri.path();
        if path.starts_with("/missing/") {
            Reply::status(404, b"not here".to_vec())
        } else {
            Reply::ok("max-age=3600", vec![b'x'; 500 + path.len() * 10])
        }
    })
    .await
}

/// Writes `lines` as a JSON log into `dir` and replays it against `proxy` with the guide's
/// command (its report to `json`); returns `/stats` before, the command's output, and
/// `/stats` after.
async fn replay_as_the_guide_shows(
    proxy: &TestProxy,
    lines: &[Logged],
    dir: &Path,
    json: &Path,
) -> (Value, String, Value) {
    let log = dir.join("access.jsonl");
    std::fs::write(&log, json_log(lines)).expect("write log");
    let args = guide_command(
        &format!("http://{}", proxy.addr),
        &log.to_string_lossy(),
        &json.to_string_lossy(),
    );
    let before = support::stats(proxy).await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_secondhit"))
        .arg("bench")
        .args(&args)
        .output()
        .await
        .expect("run bench --target --trace");
    let after = support::stats(proxy).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{args:?}\n{stdout}\n{stderr}");
    println!("{stdout}");
    (before, stdout.into_owned(), after)
}

/// Asserts that the `--json` report at `json` has the proxy's own request `counts` (hit,
/// stale, miss, pass) and body `bytes` (hit, stale, miss) for the `replayed` requests, and
/// the `origin_requests` the origin received.
fn assert_the_json_report_agrees(
    json: &Path,
    counts: [u64; 4],
    bytes: [u64; 3],
    replayed: &[&Logged],
    origin_requests: u64,
) {
    let [hit, stale, miss, pass] = counts;
    let [hit_bytes, stale_bytes, miss_bytes] = bytes;
    let ratio = hit as f64 / (hit + stale + miss) as f64;
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("--json written"))
            .expect("the report is JSON");
    let target = &report["policies"][0];
    assert_eq!(target["requests"], replayed.len() as u64);
    assert_eq!(target["hit_ratio"].as_f64(), Some(ratio));
    // Bodies of known length (the origin's and the cache's), so the bytes agree too.
    let byte_ratio = hit_bytes as f64 / (hit_bytes + stale_bytes + miss_bytes) as f64;
    assert_eq!(target["byte_hit_ratio"].as_f64(), Some(byte_ratio));
    let results = &report["replay"]["results"];
    assert_eq!(
        [
            &results["hit"],
            &results["stale"],
            &results["miss"],
            &results["pass"]
        ],
        [hit, stale, miss, pass].map(Value::from).each_ref()
    );
    // The origin load the replay read from `Cache-Status` is what the origin received.
    assert_eq!(target["origin_requests"], origin_requests);
    assert_eq!(report["replay"]["skipped_methods"], 4);
    assert_eq!(
        report["replay"]["responses"]["4xx"],
        replayed
            .iter()
            .filter(|(_, t, _)| t.starts_with("/missing/"))
            .count() as u64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_without_requests_is_refused_against_a_target() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"x".to_vec())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("keys.csv");
    std::fs::write(&csv, "0,/a,10\n1,/a,10\n").expect("write trace");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_secondhit"))
        .args(["bench", "--rate", "max", "--target"])
        .arg(format!("http://{}", origin.addr))
        .arg("--trace")
        .arg(&csv)
        .output()
        .await
        .expect("run bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("holds no HTTP requests to replay"),
        "{stderr}"
    );
    assert_eq!(origin.total(), 0, "nothing is sent");
}

/// A target that accepts connections and then does `behave` with each.
async fn hostile_target(behave: fn(tokio::net::TcpStream)) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind hostile target");
    let addr = listener.local_addr().expect("target address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            behave(stream);
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_hangs_hangs_up_or_refuses_counts_each_failure_by_kind() {
    use secondhit_bench::replay::{self, Pace, ReplayOptions};
    use secondhit_bench::workload::{LoggedRequest, RequestLog};
    let log = RequestLog {
        name: "three requests".into(),
        requests: (0..3)
            .map(|i| LoggedRequest {
                at: f64::from(i),
                method: http::Method::GET,
                target: format!("/r/{i}"),
                host: Some("a.example".into()),
            })
            .collect(),
        malformed_lines: 0,
        skipped_methods: 0,
    };
    let hung = hostile_target(|stream| {
        // Read the request, never answer, keep the connection open.
        tokio::spawn(async move {
            let mut stream = stream;
            let mut sink = tokio::io::sink();
            let _ = tokio::io::copy(&mut stream, &mut sink).await;
        });
    })
    .await;
    let hangs_up = hostile_target(drop).await;
    let garbage = hostile_target(|stream| {
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let mut stream = stream;
            let _ = stream.write_all(b"not http at all\r\n\r\n").await;
        });
    })
    .await;
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address")
    };
    for (addr, kind) in [
        (hung, "timeout"),
        (hangs_up, "broken"),
        (garbage, "broken"),
        (refused, "connect"),
    ] {
        let options = ReplayOptions {
            target: format!("http://{addr}"),
            concurrency: 1,
            pace: Pace::Max,
            host: None,
            timeout: std::time::Duration::from_millis(300),
            progress: false,
        };
        let (row, summary) = replay::run(&log, &options).await.expect("the run ends");
        assert_eq!((row.requests, row.failed_requests), (3, 3), "{kind}");
        assert_eq!(summary.errors[kind], 3, "{kind}: {:?}", summary.errors);
        assert!(summary.responses.is_empty(), "{kind}");
    }
}
