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
fn check_config_warns_of_an_admin_listener_open_beyond_loopback_without_a_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("cache");
    let check = |server: &str| {
        let text = format!("[server]\n{server}[cache]\ndir = \"{}\"\n", cache.display());
        run(&[
            "check-config",
            &write_config(dir.path(), &text).to_string_lossy(),
        ])
    };
    for open in ["0.0.0.0:9190", "[::]:9190", "192.0.2.7:9190"] {
        let (code, stderr) = check(&format!("admin_listen = \"{open}\"\n"));
        assert_eq!(code, Some(0), "a warning, not an error: {stderr}");
        assert!(
            stderr.contains("warning: server.admin_listen")
                && stderr.contains("server.admin_token"),
            "{open}: {stderr}"
        );
    }
    for quiet in [
        "admin_listen = \"0.0.0.0:9190\"\nadmin_token = \"s3cret\"\n",
        "admin_listen = \"127.0.0.1:9190\"\n",
        "admin_listen = \"[::1]:9190\"\n",
        "admin_listen = \"off\"\n",
    ] {
        let (code, stderr) = check(quiet);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.is_empty(), "{quiet}: no warning: {stderr}");
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_turns_transparent_huge_pages_off_for_its_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(
        dir.path(),
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\n\
             [origin]\nurl = \"http://127.0.0.1:9\"\n\
             [cache]\ndir = \"{}\"\n\
             [log]\nformat = \"json\"\n",
            dir.path().join("cache").display()
        ),
    );
    let serve = ServeProcess::start(&config).await;
    let pid = serve.child.id().expect("a running child");
    // Linux shows the process's flag here since 5.0.
    let thp = crate::support::procfs::line(pid, "status", "THP_enabled:")
        .expect("a THP_enabled line in /proc/PID/status (Linux 5.0 or later)");
    assert_eq!(thp, "0");
    let status = serve.terminate().await;
    assert!(status.success(), "graceful shutdown exits 0: {status:?}");
}

/// The commit `git` names for the source tree's HEAD, or "unknown" without git.
fn head_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn stdout_of(args: &[&str]) -> String {
    let output = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run secondhit");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn version_names_the_version_the_git_commit_and_the_features_built_in() {
    let features = if cfg!(feature = "bench") {
        "bench"
    } else {
        "none"
    };
    let expected = format!(
        "secondhit {} (commit {}; features: {features})",
        env!("CARGO_PKG_VERSION"),
        head_commit()
    );
    assert_eq!(stdout_of(&["--version"]).trim(), expected);
    assert_eq!(stdout_of(&["-V"]).trim(), expected);
}

#[test]
fn completions_for_bash_zsh_and_fish_complete_the_commands() {
    let shells = [
        ("bash", "complete -F _secondhit"),
        ("zsh", "#compdef secondhit"),
        ("fish", "complete -c secondhit"),
    ];
    for (shell, marker) in shells {
        let script = stdout_of(&["completions", shell]);
        assert!(script.contains(marker), "{shell}: {script}");
        for command in ["serve", "check-config", "completions", "man"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
    }
    let (code, stderr) = run(&["completions", "tcsh"]);
    assert_eq!(code, Some(2), "an unknown shell is a usage error: {stderr}");
}

#[test]
fn man_prints_secondhit_1_and_writes_a_page_per_command_and_the_config_page_to_a_directory() {
    let page = stdout_of(&["man"]);
    assert!(page.starts_with(".ie"), "roff: {page}");
    assert!(page.contains(".TH secondhit 1"), "{page}");
    assert!(
        page.contains("check\\-config"),
        "lists the commands: {page}"
    );
    assert_operator_sections(&page);

    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_str().expect("a UTF-8 temp path");
    assert!(stdout_of(&["man", "--dir", dir_arg]).is_empty());
    for name in [
        "secondhit.1",
        "secondhit-serve.1",
        "secondhit-check-config.1",
        "secondhit.toml.5",
    ] {
        let written = std::fs::read_to_string(dir.path().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(written.contains(".TH secondhit"), "{name}: {written}");
        assert_renders(&dir.path().join(name));
    }
    let main_page = std::fs::read_to_string(dir.path().join("secondhit.1")).expect("read");
    assert_eq!(main_page, page, "the same secondhit(1) both ways");
    // The config page holds the annotated example: every key of it.
    let config_page = std::fs::read_to_string(dir.path().join("secondhit.toml.5")).expect("read");
    assert!(
        config_page.contains(".TH secondhit.toml 5"),
        "{config_page}"
    );
    let example = include_str!("../../config/secondhit.toml");
    let keys = example.lines().filter_map(|line| line.split_once(" = "));
    for (key, _) in keys {
        let key = format!("{} = ", key.trim_start_matches(['#', ' ']));
        assert!(
            config_page.contains(&key),
            "secondhit.toml(5) lacks {key:?}"
        );
    }
    let (code, stderr) = run(&["man", "--dir", "/nonexistent/secondhit-man"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("/nonexistent/secondhit-man"), "{stderr}");
}

/// secondhit(1)'s sections for operators: the signals, the files, the other pages.
fn assert_operator_sections(page: &str) {
    for needle in [
        ".SH SIGNALS",
        "SIGHUP",
        "SIGUSR1",
        "SIGUSR2",
        ".SH FILES",
        "/etc/secondhit/secondhit.toml",
        "/etc/secondhit/conf.d/*.toml",
        "/run/secondhit/secondhit.pid",
        "/etc/logrotate.d/secondhit",
        ".SH \"SEE ALSO\"",
        "secondhit.toml (5)",
        "secondhit\\-serve (1)",
    ] {
        assert!(
            page.contains(needle),
            "secondhit(1) lacks {needle:?}: {page}"
        );
    }
}

/// Where groff is installed, `page` renders with no warning (UTF-8 input read as man(1)
/// reads it, through preconv: `-k`).
fn assert_renders(page: &std::path::Path) {
    let Ok(output) = Command::new("groff")
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .arg(page)
        .output()
    else {
        println!("groff not installed: {} not rendered", page.display());
        return;
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.is_empty(),
        "{}: {stderr}",
        page.display()
    );
}

#[test]
fn check_config_reads_the_included_fragments_and_names_the_fragment_and_key_at_fault() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("cache");
    let fragments = dir.path().join("conf.d");
    std::fs::create_dir(&fragments).expect("conf.d");
    let main = format!(
        "include = [\"{}/*.toml\"]\n[cache]\ndir = \"{}\"\nmax_size = \"1GiB\"\nmin_free = 0\n",
        fragments.display(),
        cache.display()
    );
    let path = write_config(dir.path(), &main);
    let file = path.to_str().expect("utf-8 path");
    let fragment = fragments.join("50-recommend.toml");
    // A fragment overrides the main file's key: with it, max_object_size is over max_size.
    std::fs::write(
        &fragment,
        "[cache]\nmax_size = \"1MiB\"\nmax_object_size = \"2MiB\"\n",
    )
    .expect("write the fragment");
    let (code, stderr) = run(&["check-config", file]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("smaller than cache.max_object_size"),
        "{stderr}"
    );
    let cases = [
        ("[admission]\npolicy = \"sometimes\"\n", "admission.policy"),
        ("[admission]\npolcy = \"always\"\n", "admission.polcy"),
        ("include = [\"/etc/*.toml\"]\n", "include"),
    ];
    for (text, key) in cases {
        std::fs::write(&fragment, text).expect("write the fragment");
        let (code, stderr) = run(&["check-config", file]);
        assert_eq!(code, Some(1), "{text:?}: {stderr}");
        let named = format!("{}: {key}", fragment.display());
        assert!(
            stderr.contains(&named),
            "{text:?} should name {named}: {stderr}"
        );
    }
    std::fs::write(&fragment, "[admission]\npolicy = \"always\"\n").expect("write");
    let (code, stderr) = run(&["check-config", file]);
    assert_eq!(code, Some(0), "{stderr}");
}
