//! The README's "Deploying" walk-through, run as written. The test reads the commands
//! from README.md's first indented block under "## Deploying" and runs each with `sh`,
//! changing only what must change for a test that runs beside others on one machine:
//! the origin directory becomes a temp directory, the fixed ports become free ones (the
//! origin's `8081` becomes `0` and its printed port is used; the proxy listens on
//! `127.0.0.1:0`), and `cargo run --release --` becomes the binary under test, with a copy
//! of `config/secondhit.toml` whose listeners, origin, cache directory and log format are
//! moved accordingly. It checks that the ports the walk-through uses agree with that
//! config, and that the GETs answer what the block's comment says, in order.
//!
//! It needs `python3` and `curl`, as the walk-through does; without either it says why and
//! skips.

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::PATIENCE;
use crate::support::serve::ServeProcess;

/// The commands of the first indented block after `## Deploying`.
fn deploying_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let section = readme
        .split("\n## Deploying\n")
        .nth(1)
        .expect("README has a Deploying section");
    section
        .lines()
        .skip_while(|line| !line.starts_with("    "))
        .take_while(|line| line.starts_with("    "))
        .map(|line| line.trim().to_owned())
        .collect()
}

/// The one command starting with `prefix`.
fn command<'a>(commands: &'a [String], prefix: &str) -> &'a str {
    let found: Vec<&String> = commands.iter().filter(|c| c.starts_with(prefix)).collect();
    assert_eq!(
        found.len(),
        1,
        "the walk-through should have one `{prefix}` command: {commands:#?}; \
         if it changed, teach this test the new steps"
    );
    found[0]
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// Runs `script` with `sh -c` and returns its standard output; fails the test on an error.
async fn sh(script: &str) -> String {
    let output = tokio::time::timeout(
        PATIENCE,
        tokio::process::Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("`{script}` took over {PATIENCE:?}"))
    .expect("run sh");
    assert!(
        output.status.success(),
        "`{script}` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Sets `table[section][key]` in a parsed TOML document.
fn set(config: &mut toml::Table, section: &str, key: &str, value: &str) {
    config
        .get_mut(section)
        .and_then(toml::Value::as_table_mut)
        .unwrap_or_else(|| panic!("config/secondhit.toml has no [{section}]"))
        .insert(key.to_owned(), toml::Value::String(value.to_owned()));
}

fn get<'a>(config: &'a toml::Table, section: &str, key: &str) -> &'a str {
    config
        .get(section)
        .and_then(|s| s.get(key))
        .and_then(toml::Value::as_str)
        .unwrap_or_else(|| panic!("config/secondhit.toml has no {section}.{key}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploying_walk_through_works_as_written() {
    for tool in ["python3", "curl"] {
        if !on_path(tool) {
            println!("skipped: the walk-through needs {tool}, which is not on PATH");
            return;
        }
    }
    let commands = deploying_commands();
    let prepare = command(&commands, "mkdir ");
    let origin = command(&commands, "python3 -m http.server ");
    let serve = command(&commands, "cargo run --release -- ");
    let check = command(&commands, "curl ");

    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/secondhit.toml");
    let mut config: toml::Table = std::fs::read_to_string(example)
        .expect("read the example config")
        .parse()
        .expect("the example config is TOML");
    // The walk-through's ports are the example config's.
    let origin_url = get(&config, "origin", "url").to_owned();
    let origin_port = origin_url.rsplit(':').next().expect("a port").to_owned();
    assert!(
        origin.contains(&format!(" {origin_port} ")),
        "the origin command should listen where {origin_url} points: {origin}"
    );
    let listen = get(&config, "server", "listen").to_owned();
    assert!(
        check.contains(&format!("http://{listen}/")),
        "the check should ask the proxy at {listen}: {check}"
    );
    let (check, expected) = check
        .split_once("# three times:")
        .expect("the check's comment says what the three GETs answer");
    let expected: Vec<&str> = expected.split(',').map(str::trim).collect();
    assert_eq!(expected, ["first-sight", "stored", "hit"]);

    let dir = tempfile::tempdir().expect("temp dir");
    let files = dir.path().join("origin");
    let files = files.to_str().expect("a UTF-8 temp path");
    sh(&prepare.replace("/tmp/secondhit-origin", files)).await;

    let origin = origin
        .replace("/tmp/secondhit-origin", files)
        .replace(&format!(" {origin_port} "), " 0 ");
    let origin = origin.trim_end().trim_end_matches('&');
    // `exec`, so that killing the child on drop kills the server itself.
    let mut server = tokio::process::Command::new("sh")
        .args(["-c", &format!("exec {origin}")])
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the origin");
    let mut lines = BufReader::new(server.stdout.take().expect("piped stdout")).lines();
    // "Serving HTTP on 127.0.0.1 port 43567 (http://127.0.0.1:43567/) ..."
    let serving = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("the origin announces itself")
        .expect("read the origin's output")
        .expect("a line");
    let port = serving
        .split(" port ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the origin prints its port");

    let args = serve.trim_start_matches("cargo run --release -- ");
    assert_eq!(
        args, "serve --config config/secondhit.toml",
        "the walk-through's serve command changed; teach this test"
    );
    set(&mut config, "server", "listen", "127.0.0.1:0");
    set(&mut config, "server", "admin_listen", "127.0.0.1:0");
    set(
        &mut config,
        "origin",
        "url",
        &format!("http://127.0.0.1:{port}"),
    );
    let cache = dir.path().join("cache");
    set(&mut config, "cache", "dir", cache.to_str().expect("UTF-8"));
    // The test harness reads the bound address from the JSON log.
    set(&mut config, "log", "format", "json");
    let config_path = dir.path().join("secondhit.toml");
    let text = toml::to_string(&config).expect("serialise the config");
    std::fs::write(&config_path, text).expect("write the config");
    let proxy = ServeProcess::start(&config_path).await;

    let check = check.replace(&listen, &proxy.addr);
    let first = sh(&check).await;
    assert!(first.contains(expected[0]), "first GET: {first}");
    let second = sh(&check).await;
    assert!(second.contains(expected[1]), "second GET: {second}");
    // The third is a hit once the second's fill has committed (the README says so); until
    // then a GET stores the object again.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let third = sh(&check).await;
        if third.contains(&format!("; {}", expected[2])) {
            break;
        }
        assert!(third.contains("stored"), "a GET before the commit: {third}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "never a hit: {third}"
        );
    }
    let status = proxy.terminate().await;
    assert!(status.success(), "{status:?}");
    drop(server);
    assert!(Path::new(files).join("hello.txt").is_file());
}
