//! The README's five-minute walk-through, run as written. The test reads the commands
//! from README.md's first indented block under "## Try it in five minutes" and runs each with `sh`,
//! changing only what must change for a test that runs beside others on one machine:
//! the origin directory becomes a temp directory, the fixed ports become free ones (the
//! origin's `8081` becomes `0` and its printed port is used; the proxy listens on
//! `127.0.0.1:0`), and `cargo run --release --` becomes the binary under test, with a copy
//! of `config/secondhit.toml` whose listeners, origin, cache directory and log format are
//! moved accordingly. It checks that the ports the walk-through uses agree with that
//! config, and that the GETs answer what the block's comment says, in order.
//!
//! The admin session shown in `docs/guide/admin.md` runs the same way on top of it (with the
//! `admin_token` it names, and the admin listener on a free port too): every command's
//! output must be the one shown, but for the third GET, which the guide says came before
//! the second one's fill had committed; when it comes after, the GET is a hit and the
//! request counters shift by one, as the test then expects. Before the first purge, which
//! the guide shows finding the object, the test waits (through `/stats`) for the fills to
//! commit, as a person typing the commands does without noticing.
//!
//! Both need `python3` and `curl`, as the walk-through does; without either they say why
//! and skip.

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::serve::ServeProcess;
use crate::support::shell::{on_path, sh};
use crate::support::{PATIENCE, client, send};

/// The commands of the first indented block after `## Try it in five minutes`.
fn deploying_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let section = readme
        .split("\n## Try it in five minutes\n")
        .nth(1)
        .expect("README has a \"Try it in five minutes\" section");
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

/// The five-minute walk-through, up and running: its origin and proxy, and its check.
struct Deployed {
    /// The origin's files, the cache and the config.
    dir: tempfile::TempDir,
    /// The `python3 -m http.server` origin (killed on drop).
    origin: tokio::process::Child,
    proxy: ServeProcess,
    /// The proxy's address in the README (`server.listen` of the example config).
    listen: String,
    /// The check, with the proxy's real address.
    check: String,
    /// What the three GETs answer, from the check's comment.
    expected: Vec<String>,
}

/// Runs the five-minute walk-through's setup (see the module doc); `tweak` adjusts the
/// config before the proxy starts. Fails, saying why, without `python3` or `curl`.
async fn deploy(tweak: impl FnOnce(&mut toml::Table)) -> Deployed {
    for tool in ["python3", "curl"] {
        let install = "the README's walk-through needs it: apt-get install python3 curl";
        crate::support::shell::require(tool, on_path(tool), install);
    }
    let commands = deploying_commands();
    let prepare = command(&commands, "mkdir ");
    let origin = command(&commands, "python3 -m http.server ");
    let serve = command(&commands, "cargo run --release -- ");
    let check = command(&commands, "curl ");

    let mut config = example_config();
    // The walk-through's ports are the example config's.
    let (origin_port, listen) = ports_agreeing_with_the_config(&config, origin, check);
    let (check, expected) = expected_answers(check);

    let dir = tempfile::tempdir().expect("temp dir");
    let files = dir.path().join("origin");
    let files = files.to_str().expect("a UTF-8 temp path");
    sh(&prepare.replace("/tmp/secondhit-origin", files)).await;
    assert!(Path::new(files).join("hello.txt").is_file());
    let (server, port) = start_the_origin(origin, files, &origin_port).await;

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
    // The test harness reads the bound addresses from the JSON log.
    set(&mut config, "log", "format", "json");
    tweak(&mut config);
    let config_path = dir.path().join("secondhit.toml");
    let text = toml::to_string(&config).expect("serialise the config");
    std::fs::write(&config_path, text).expect("write the config");
    let proxy = ServeProcess::start(&config_path).await;
    let check = check.trim().replace(&listen, &proxy.addr);
    Deployed {
        dir,
        origin: server,
        proxy,
        listen,
        check,
        expected,
    }
}

/// `config/secondhit.toml`, parsed.
fn example_config() -> toml::Table {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/secondhit.toml");
    std::fs::read_to_string(example)
        .expect("read the example config")
        .parse()
        .expect("the example config is TOML")
}

/// Asserts that the walk-through's `origin` command and `check` use the example `config`'s
/// ports, and returns the origin's port and the proxy's `server.listen`.
fn ports_agreeing_with_the_config(
    config: &toml::Table,
    origin: &str,
    check: &str,
) -> (String, String) {
    let origin_url = get(config, "origin", "url").to_owned();
    let origin_port = origin_url.rsplit(':').next().expect("a port").to_owned();
    assert!(
        origin.contains(&format!(" {origin_port} ")),
        "the origin command should listen where {origin_url} points: {origin}"
    );
    let listen = get(config, "server", "listen").to_owned();
    assert!(
        check.contains(&format!("http://{listen}/")),
        "the check should ask the proxy at {listen}: {check}"
    );
    (origin_port, listen)
}

/// The `check` command without its comment, and what its comment says the three GETs answer.
fn expected_answers(check: &str) -> (&str, Vec<String>) {
    let (check, expected) = check
        .split_once("# three times:")
        .expect("the check's comment says what the three GETs answer");
    let expected: Vec<String> = expected.split(',').map(|e| e.trim().to_owned()).collect();
    assert_eq!(expected, ["first-sight", "stored", "hit"]);
    (check, expected)
}

/// Starts the walk-through's `origin` command serving `files` on a free port instead of
/// `origin_port`, and returns it with the port it printed.
async fn start_the_origin(
    origin: &str,
    files: &str,
    origin_port: &str,
) -> (tokio::process::Child, String) {
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
        .expect("the origin prints its port")
        .to_owned();
    (server, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_five_minute_walk_through_works_as_written() {
    let deployed = deploy(|_| {}).await;
    let (check, expected) = (&deployed.check, &deployed.expected);
    let first = sh(check).await;
    assert!(first.contains(&expected[0]), "first GET: {first}");
    let second = sh(check).await;
    assert!(second.contains(&expected[1]), "second GET: {second}");
    // The third is a hit once the second's fill has committed (the README says so); until
    // then a GET waits for that fill and is answered from it (`collapsed`).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let third = sh(check).await;
        if third.contains(&format!("; {}", expected[2])) {
            break;
        }
        assert!(
            third.contains("collapsed"),
            "a GET before the commit: {third}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "never a hit: {third}"
        );
    }
    let status = deployed.proxy.terminate().await;
    assert!(status.success(), "{status:?}");
    drop(deployed.origin);
    drop(deployed.dir);
}

/// Waits until the proxy whose admin listener is at `admin` (token `s3cret`) holds an
/// object and no fill is in progress.
async fn fills_committed(admin: &str) {
    let last = std::cell::RefCell::new(serde_json::Value::Null);
    crate::support::wait_until_async(
        || format!("the fill never committed: {}", last.borrow()),
        async || {
            let stats = send(
                client()
                    .get(format!("http://{admin}/stats"))
                    .bearer_auth("s3cret"),
            )
            .await;
            let json: serde_json::Value =
                serde_json::from_slice(&stats.body).expect("/stats is JSON");
            let store = &json["store"];
            *last.borrow_mut() = store.clone();
            store["objects"].as_u64() >= Some(1) && store["reserved_bytes"].as_u64() == Some(0)
        },
    )
    .await;
}

/// The admin session of `docs/guide/admin.md`: each command (a line starting with `$ `) with the
/// output lines shown under it.
fn admin_session() -> Vec<(String, Vec<String>)> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide/admin.md"))
            .expect("read docs/guide/admin.md");
    let intro = "A session against `secondhit serve` with `admin_token = \"s3cret\"`";
    let after = readme
        .split(intro)
        .nth(1)
        .expect("the admin guide shows a session with the token s3cret");
    let mut session: Vec<(String, Vec<String>)> = Vec::new();
    for line in after
        .lines()
        .skip_while(|line| !line.starts_with("    "))
        .take_while(|line| line.starts_with("    "))
    {
        match line.trim().strip_prefix("$ ") {
            Some(command) => session.push((command.to_owned(), Vec::new())),
            None => session
                .last_mut()
                .expect("the session starts with a command")
                .1
                .push(line.trim().to_owned()),
        }
    }
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_session_answers_as_shown() {
    let mut deployed = deploy(|config| {
        set(config, "server", "admin_token", "s3cret");
    })
    .await;
    let line = deployed.proxy.wait_for_log("\"listening\"").await;
    let admin = line
        .split("\"admin\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the listening line names the admin listener");
    let session = admin_session();
    let config = example_config();
    let admin_listen = get(&config, "server", "admin_listen");
    let moved = |text: &str| {
        text.replace(&deployed.listen, &deployed.proxy.addr)
            .replace(admin_listen, admin)
    };
    // A shell per command, each after the session's variable assignments so far (`T=...`).
    // `less` would wait for a terminal.
    let mut assignments = String::new();
    let (mut third_was_a_hit, mut purged) = (false, false);
    for (command, shown) in &session {
        let script = moved(command).replace("| less", "| cat");
        let is_assignment = command
            .split_once('=')
            .is_some_and(|(name, _)| name.chars().all(|c| c.is_ascii_uppercase()));
        if is_assignment {
            assignments.push_str(&script);
            assignments.push('\n');
            continue;
        }
        if command.contains("/purge") && !purged {
            // The guide's first purge found the stored object: wait until every fill is in.
            fills_committed(admin).await;
            purged = true;
        }
        let output = sh(&format!("{assignments}{script}")).await;
        let seen: Vec<&str> = output.lines().collect();
        let mut shown: Vec<String> = shown.iter().map(|line| moved(line)).collect();
        allow_a_third_get_after_the_commit(command, &seen, &mut shown, &mut third_was_a_hit);
        if command.contains("/stats") {
            let json: serde_json::Value = serde_json::from_str(&output).expect("/stats is JSON");
            assert_eq!(json["policy"], "second-hit", "{json:#}");
            continue;
        }
        assert_eq!(seen, shown, "`{command}`");
    }
    let status = deployed.proxy.terminate().await;
    assert!(status.success(), "{status:?}");
}

/// Adjusts the guide's `shown` output of `command` to the `seen` one where the guide's
/// third GET came before the second one's fill committed and the session's came after
/// (`third_was_a_hit`, set by the three GETs' command): that GET, and the request counters.
fn allow_a_third_get_after_the_commit(
    command: &str,
    seen: &[&str],
    shown: &mut [String],
    third_was_a_hit: &mut bool,
) {
    if command.starts_with("for i in 1 2 3") {
        // The guide's third GET came before the commit and waited for the fill
        // (`collapsed`, whose ttl depends on the second it was served in); a later one
        // is a hit.
        *third_was_a_hit = seen.get(2).is_some_and(|l| l.contains("secondhit; hit"));
        let collapsed = seen.get(2).is_some_and(|l| {
            l.starts_with("cache-status: secondhit; fwd=uri-miss; ttl=")
                && l.ends_with("; collapsed")
        });
        if *third_was_a_hit || collapsed {
            shown[2] = seen[2].to_owned();
        }
    }
    if command.contains("/metrics") && *third_was_a_hit {
        for line in shown {
            *line = line
                .replace("{result=\"hit\"} 0", "{result=\"hit\"} 1")
                .replace("{result=\"miss\"} 3", "{result=\"miss\"} 2");
        }
    }
}
