//! The `secondhit` binary: `check-config` verdicts and a `serve` run from start to SIGTERM.

use std::process::{Command, Stdio};

use crate::support::serve::{BIN, ServeProcess};
use crate::support::{Reply, TestOrigin, client, get, send_until_hit};

fn write_config(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("secondhit.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

/// Runs the binary with `args` and no standard input; returns its exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run secondhit");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn check_config_accepts_the_shipped_example() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/secondhit.toml");
    let output = Command::new(BIN)
        .args(["check-config", example])
        .output()
        .expect("run check-config");
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("OK"));
}

#[test]
fn check_config_warns_when_sites_turn_every_other_host_away() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("cache");
    let site =
        "[[site]]\nhosts = [\"www.example.com\"]\n[site.origin]\nurl = \"http://127.0.0.1:8081\"\n";
    let check = |server: &str| {
        let text = format!(
            "[server]\nadmin_listen = \"off\"\n{server}[cache]\ndir = \"{}\"\n{site}",
            cache.display()
        );
        run(&[
            "check-config",
            &write_config(dir.path(), &text).to_string_lossy(),
        ])
    };
    let (code, stderr) = check("");
    assert_eq!(code, Some(0), "a warning, not an error: {stderr}");
    assert!(
        stderr.contains("warning: a request for a host no [[site]] names gets 421")
            && stderr.contains("server.unknown_host = \"default\""),
        "{stderr}"
    );
    let (code, stderr) = check("unknown_host = \"404\"\n");
    assert_eq!(code, Some(0));
    assert!(stderr.contains("gets 404"), "{stderr}");
    let (code, stderr) = check("unknown_host = \"default\"\n");
    assert_eq!(code, Some(0));
    assert!(
        stderr.is_empty(),
        "[origin] serves other hosts: no warning: {stderr}"
    );
}

#[test]
fn check_config_and_serve_reject_bad_files_naming_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        (
            "[cache]\nmax_object_size = \"12XB\"\n",
            "cache.max_object_size",
        ),
        ("[server]\nbogus = 1\n", "server.bogus"),
        (
            "[admission]\nfalse_positive_rate = 1.5\n",
            "admission.false_positive_rate",
        ),
        (
            "[admission]\nexpected_urls = 0\n",
            "admission.expected_urls",
        ),
        (
            "[admission]\nexpected_urls = 10\nmemory = \"1MiB\"\n",
            "admission.memory",
        ),
        ("[origin]\nurl = \"not a url\"\n", "origin.url"),
        (
            "[server]\nheader_read_timeout = \"soon\"\n",
            "server.header_read_timeout",
        ),
        // TLS options for an origin that speaks none.
        (
            "[origin]\nurl = \"http://127.0.0.1\"\nca_file = \"/etc/ssl/ca.pem\"\n",
            "origin.ca_file",
        ),
        // Both keys are named (the key itself is checked in the config's unit tests).
        (
            "[cache]\nmax_size = \"1MiB\"\nmax_object_size = \"2MiB\"\n",
            "smaller than cache.max_object_size",
        ),
    ];
    for (text, named) in cases {
        let path = write_config(dir.path(), text);
        let file = path.to_str().expect("utf-8 path");
        // Both commands take the file both ways.
        for args in [
            vec!["check-config", file],
            vec!["check-config", "--config", file],
            vec!["serve", "--config", file],
            vec!["serve", file],
        ] {
            let (code, stderr) = run(&args);
            assert_eq!(code, Some(1), "{args:?} on {text:?}: {stderr}");
            assert!(
                stderr.contains(named),
                "{args:?} on {text:?} should name {named}: {stderr}"
            );
        }
    }
}

#[test]
fn check_config_needs_one_file_given_one_way() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/secondhit.toml");
    for (args, expected) in [
        (vec!["check-config"], "required"),
        (
            vec!["check-config", example, "--config", example],
            "cannot be used with",
        ),
        (
            vec!["serve", example, "--config", example],
            "cannot be used with",
        ),
    ] {
        let (code, stderr) = run(&args);
        assert_ne!(code, Some(0), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_proxies_and_caches_then_stops_on_sigterm() {
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"from the origin".to_vec())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(
        dir.path(),
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nshutdown_timeout = \"5s\"\n\
             [origin]\nurl = \"http://{}\"\n\
             [cache]\ndir = \"{}\"\nfsync = false\n\
             [admission]\npolicy = \"always\"\nseed = \"cli test\"\n\
             [log]\nformat = \"json\"\n",
            origin.addr,
            dir.path().join("cache").display()
        ),
    );
    let serve = ServeProcess::start(&config).await;
    let addr = serve.addr.clone();

    let first = get(&format!("http://{addr}/page")).await;
    assert_eq!(first.body, b"from the origin");
    assert!(first.cache.stored);
    let page = format!("http://{addr}/page");
    send_until_hit(|| client().get(&page)).await;

    let status = serve.terminate().await;
    assert!(status.success(), "graceful shutdown exits 0: {status:?}");
}

#[test]
fn version_prints_the_crate_version() {
    let output = Command::new(BIN)
        .arg("--version")
        .output()
        .expect("run --version");
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("secondhit {}", env!("CARGO_PKG_VERSION"))
    );
}
