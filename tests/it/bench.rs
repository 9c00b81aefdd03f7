//! The bench harness and the simulator, end to end on small seeded workloads.

use std::process::Command;

use secondhit_bench::driver::DriveOptions;
use secondhit_bench::replay::{self, Pace, ReplayOptions};
use secondhit_bench::synthetic_origin::SyntheticOrigin;
use secondhit_bench::workload::{self, SyntheticSpec, Workload};
use secondhit_bench::{self as bench, BenchOptions, CacheSize};
use secondhit_proxy::config::{Config, FilterSizing};

use crate::support;

/// A workload small enough for a debug build, shaped like the default one.
fn small_workload(seed: u64, catalog: u64, requests: u64) -> Workload {
    let spec = SyntheticSpec {
        catalog,
        requests,
        seed,
        ..SyntheticSpec::default()
    };
    workload::synthetic(&spec).expect("valid spec")
}

/// Defaults, with the filter's generation sized to about the objects a 5% cache holds.
fn bench_config() -> Config {
    let mut config = Config::default();
    config.admission.sizing = FilterSizing::ExpectedUrls(1_000);
    config
}

fn options(policies: &[&str], concurrency: usize) -> BenchOptions {
    BenchOptions {
        cache_size: CacheSize::OfUniqueBytes(0.05),
        policies: policies.iter().map(|p| p.to_string()).collect(),
        drive: DriveOptions {
            concurrency,
            progress: false,
        },
        config: bench_config(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_hit_writes_far_less_than_always_for_almost_the_same_hits() {
    support::init_logs();
    // A catalog large enough for thousands of distinct keys: remembering all of them shows its cost.
    let workload = small_workload(11, 3_000, 6_000);
    let report = bench::run_bench(
        &workload,
        &options(&["second-hit", "always", "exact-second-hit"], 4),
    )
    .await
    .expect("bench runs");
    let second = report.policy("second-hit").expect("second-hit ran");
    let always = report.policy("always").expect("always ran");
    let exact = report.policy("exact-second-hit").expect("exact ran");
    println!("{}", report.to_table());
    for row in &report.policies {
        assert_eq!(row.requests, 6_000);
        assert_eq!(row.failed_requests, 0, "{}", row.policy);
    }
    let (second_writes, always_writes) = (
        second.disk_write_bytes.expect("measured"),
        always.disk_write_bytes.expect("measured"),
    );
    assert!(
        (second_writes as f64) <= 0.6 * always_writes as f64,
        "second-hit must write at least 40% fewer bytes: {second_writes} vs {always_writes}"
    );
    assert!(
        second.byte_hit_ratio >= always.byte_hit_ratio - 0.02,
        "byte hit ratio at most 2 points lower: {} vs {}",
        second.byte_hit_ratio,
        always.byte_hit_ratio
    );
    let (exact_memory, second_memory) = (
        exact.admission_memory_bytes.expect("measured"),
        second.admission_memory_bytes.expect("measured"),
    );
    assert!(
        exact_memory >= 20 * second_memory,
        "exact {exact_memory} B vs pair {second_memory} B"
    );
    // The origin's own count agrees with what the clients did not get from the cache.
    let misses = (second.requests as f64 * (1.0 - second.hit_ratio)).round() as u64;
    assert_eq!(second.origin_requests, Some(misses));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_agrees_with_the_http_bench_within_one_point() {
    let workload = small_workload(12, 1_000, 5_000);
    let policies = ["second-hit", "always"];
    // One request at a time: the simulator has no concurrent misses of one key, and a
    // debug build's slower fills would otherwise turn more repeats into misses.
    let http = bench::run_bench(&workload, &options(&policies, 1))
        .await
        .expect("bench runs");
    let policy_names: Vec<String> = policies.iter().map(|p| p.to_string()).collect();
    let simulated = bench::run_simulation(
        &workload,
        &policy_names,
        &bench_config(),
        CacheSize::OfUniqueBytes(0.05),
    )
    .expect("simulation runs");
    for name in policies {
        let (h, s) = (
            http.policy(name).expect("http row"),
            simulated.policy(name).expect("simulated row"),
        );
        assert!(
            (h.hit_ratio - s.hit_ratio).abs() <= 0.01,
            "{name}: HTTP hit ratio {} vs simulated {}",
            h.hit_ratio,
            s.hit_ratio
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_mode_reports_what_clients_see_of_a_running_proxy() {
    let origin = SyntheticOrigin::start().await.expect("origin starts");
    let proxy = support::TestProxy::start(origin.addr(), |c| {
        c.admission.policy = secondhit_proxy::config::AdmissionPolicy::Always
    })
    .await;
    let workload = Workload {
        name: "repeat".into(),
        requests: vec![
            workload::Request {
                object: 1,
                size: 1_000,
                at: 0.0,
            };
            50
        ],
        malformed_lines: 0,
        ignored_lines: 0,
    };
    let options = |concurrency| ReplayOptions {
        target: format!("http://{}", proxy.addr),
        concurrency,
        pace: Pace::Max,
        host: None,
        timeout: std::time::Duration::from_secs(30),
        progress: false,
    };
    // Wait for the first fill so the rest are hits, whatever the concurrency.
    let first = Workload {
        requests: workload.requests[..1].to_vec(),
        ..workload.clone()
    };
    replay::run(&replay::from_workload(&first), &options(1))
        .await
        .expect("warm-up");
    proxy.wait_committed(1).await;
    let (row, summary) = replay::run(&replay::from_workload(&workload), &options(4))
        .await
        .expect("target run");
    assert_eq!(row.policy, "target");
    assert_eq!(row.requests, 50);
    assert_eq!(row.hit_ratio, 1.0);
    assert_eq!(summary.results["hit"], 50);
    assert_eq!(
        row.origin_requests,
        Some(0),
        "no response was marked forwarded"
    );
    assert_eq!(
        row.disk_write_bytes, None,
        "a target's disk is not observable"
    );
    assert_eq!(origin.counters().requests(), 1);
}

#[test]
fn simulate_command_replays_a_trace_and_reports_skipped_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("access.log");
    let mut text = String::new();
    for i in 0..300 {
        let key = i % 40;
        text.push_str(&format!(
            "10.0.0.1 - - [10/Oct/2026:13:55:36 +0000] \"GET /img/{key}.png HTTP/1.1\" 200 {}\n",
            1000 + key
        ));
    }
    text.push_str("this line is not a log line\n\"GET broken\n");
    std::fs::write(&trace, text).expect("write trace");
    let output = Command::new(env!("CARGO_BIN_EXE_secondhit"))
        .args(["simulate", "--cache-size", "50%", "--trace"])
        .arg(&trace)
        .output()
        .expect("run simulate");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("malformed trace lines skipped: 2"),
        "{stdout}"
    );
    // A plain simulate sets the reference caches beside the proxy's policies.
    for policy in [
        "second-hit",
        "auto",
        "always",
        "exact-second-hit",
        "s3fifo",
        "sieve",
        "w-tinylfu",
        "lru",
    ] {
        assert!(
            stdout.lines().any(|line| line.starts_with(policy)),
            "{stdout}"
        );
    }
    let sweep = Command::new(env!("CARGO_BIN_EXE_secondhit"))
        .args([
            "simulate",
            "--sweep",
            "expected_urls=10,100,1000",
            "--trace",
        ])
        .arg(&trace)
        .output()
        .expect("run simulate --sweep");
    let stdout = String::from_utf8_lossy(&sweep.stdout);
    assert!(
        sweep.status.success(),
        "{}",
        String::from_utf8_lossy(&sweep.stderr)
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("* expected_urls="))
            .count(),
        1,
        "{stdout}"
    );
}

/// A libCacheSim `oracleGeneral` file under a name that does not say so: `--trace-format`
/// names it, and the published policies run on it.
#[test]
fn simulate_command_reads_a_trace_in_the_format_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("requests.bin");
    let mut bytes = Vec::new();
    for i in 0u32..400 {
        let id = u64::from(i % 50);
        bytes.extend_from_slice(&i.to_le_bytes());
        bytes.extend_from_slice(&id.to_le_bytes());
        bytes.extend_from_slice(&(1_000 + id as u32).to_le_bytes());
        bytes.extend_from_slice(&(-1i64).to_le_bytes());
    }
    std::fs::write(&trace, &bytes).expect("write trace");
    let run = |format: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_secondhit"));
        command.args([
            "simulate",
            "--policies",
            "sieve,w-tinylfu",
            "--cache-size",
            "1MiB",
        ]);
        if let Some(format) = format {
            command.args(["--trace-format", format]);
        }
        command
            .arg("--trace")
            .arg(&trace)
            .output()
            .expect("run simulate")
    };
    let output = run(Some("oracle-general"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for policy in ["sieve", "w-tinylfu"] {
        let row = stdout
            .lines()
            .find(|line| line.starts_with(policy))
            .unwrap_or_else(|| panic!("no {policy} row: {stdout}"));
        // 50 objects requested 8 times each, all of them fit: every request after the first
        // 50 is a hit.
        let hit: f64 = row
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .expect("hit%");
        assert_eq!(hit, 87.5, "{row}");
    }
    // Unnamed, the binary is not an access log: nothing usable in it.
    assert!(!run(None).status.success());
}

#[test]
fn bench_command_rejects_unknown_policies_and_bad_cache_sizes() {
    for (args, expected) in [
        (
            vec!["bench", "--policies", "second-hit,lru"],
            "unknown policy",
        ),
        // The reference caches exist only in the simulator.
        (vec!["bench", "--policies", "s3fifo"], "unknown policy"),
        (
            vec!["simulate", "--policies", "s3fifo,nope"],
            "unknown policy",
        ),
        (vec!["bench", "--cache-size", "150%"], "cache-size"),
        (vec!["simulate", "--sweep", "rate=1"], "cannot sweep"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_secondhit"))
            .args(&args)
            .output()
            .expect("run secondhit");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_against_a_target_that_answers_no_2xx_fails_and_says_so() {
    let origin = support::TestOrigin::start(|_| support::Reply::status(404, b"no".to_vec())).await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_secondhit"))
        .args(["bench", "--requests", "40", "--catalog", "10", "--target"])
        .arg(format!("http://{}", origin.addr))
        .output()
        .await
        .expect("run bench --target");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no request got a 2xx answer (40 of 40 failed)"),
        "{stderr}"
    );
    assert_eq!(origin.total(), 40, "every request reached the target");
}
