//! The process lifecycle, through the real binary and real signals: SIGTERM saves the
//! admission filters and the next start restores them; SIGHUP reloads the config file
//! (applying what can change live, keeping what needs a restart, rejecting an invalid
//! file); SIGUSR1 reopens the access log.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::support::procfs;
use crate::support::serve::ServeProcess;
use crate::support::{Reply, Seen, TestOrigin, client, send};

/// A `serve` config on port 0 (no admin listener: tests rewrite the listen address) in
/// front of `origin`, its cache in `dir/cache`, a fixed filter seed and a JSON diagnostic
/// log; `extra` adds lines to a section, e.g.
/// `("admission", "policy = \"always\"")`.
pub(crate) fn config_text(dir: &Path, origin: SocketAddr, extra: &[(&str, &str)]) -> String {
    let lines = |section: &str| {
        extra
            .iter()
            .filter(|(s, _)| *s == section)
            .map(|(_, line)| format!("{line}\n"))
            .collect::<String>()
    };
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\nshutdown_timeout = \"5s\"\n{}\
         [origin]\nurl = \"http://{origin}\"\n{}\
         [cache]\ndir = \"{}\"\nfsync = false\n{}\
         [admission]\nseed = \"lifecycle tests\"\nexpected_urls = 10000\n{}\
         [log]\nformat = \"json\"\n{}",
        lines("server"),
        lines("origin"),
        dir.join("cache").display(),
        lines("cache"),
        lines("admission"),
        lines("log"),
    )
}

/// Writes `text` to `dir/secondhit.toml`.
pub(crate) fn write(dir: &Path, text: &str) {
    std::fs::write(dir.join("secondhit.toml"), text).expect("write config");
}

/// An origin whose every answer may be stored for a minute.
async fn cacheable_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let reply = Reply::ok("max-age=60", head.uri.path().as_bytes().to_vec());
        if head.uri.path().starts_with("/slow") {
            reply.delayed(Duration::from_millis(1500))
        } else {
            reply
        }
    })
    .await
}

/// A `serve` process with its origin and temp directory.
struct Running {
    origin: TestOrigin,
    dir: tempfile::TempDir,
    serve: ServeProcess,
    /// `http://127.0.0.1:port`.
    base: String,
}

impl Running {
    /// Starts `serve` on [`config_text`] with `extra`, in front of [`cacheable_origin`].
    async fn start(extra: &[(&str, &str)]) -> Running {
        let origin = cacheable_origin().await;
        let dir = tempfile::tempdir().expect("temp dir");
        write(dir.path(), &config_text(dir.path(), origin.addr, extra));
        Running::serve(origin, dir).await
    }

    /// Starts `serve` on the config file in `dir`.
    async fn serve(origin: TestOrigin, dir: tempfile::TempDir) -> Running {
        let serve = ServeProcess::start(&dir.path().join("secondhit.toml")).await;
        let base = format!("http://{}", serve.addr);
        Running {
            origin,
            dir,
            serve,
            base,
        }
    }

    /// [`config_text`] for this process's directory and origin.
    fn text(&self, extra: &[(&str, &str)]) -> String {
        config_text(self.dir.path(), self.origin.addr, extra)
    }

    /// Rewrites the config as `text`, sends SIGHUP, and waits for a log line from then on
    /// containing `needles`.
    async fn reload(&mut self, text: &str, needles: &[&str]) -> String {
        let mark = self.serve.log_mark();
        write(self.dir.path(), text);
        self.serve.signal("HUP");
        self.serve.wait_for_log_with(mark, needles).await
    }

    /// GET `path`, with a fixed `Host`: the cache key includes the host, and a restarted
    /// process listens on another port.
    async fn get(&self, path: &str) -> Seen {
        send(
            client()
                .get(format!("{}{path}", self.base))
                .header("host", "site.test"),
        )
        .await
    }

    /// SIGTERM; asserts a clean exit.
    async fn stop(self) {
        let status = self.serve.terminate().await;
        assert!(status.success(), "SIGTERM exits 0: {status:?}");
    }

    /// SIGTERM, then `serve` again with the same config file and cache directory.
    async fn restart(self) -> Running {
        let Running {
            origin, dir, serve, ..
        } = self;
        let status = serve.terminate().await;
        assert!(status.success(), "SIGTERM exits 0: {status:?}");
        Running::serve(origin, dir).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_saves_the_filters_and_the_next_start_remembers_a_key() {
    let node = Running::start(&[]).await;
    let once = node.get("/seen-once").await;
    assert_eq!(once.cache.detail.as_deref(), Some("first-sight"));
    let mut node = node.restart().await;
    let snapshot = node.dir.path().join("cache/state/filters.snapshot");
    assert!(snapshot.exists(), "no snapshot at {}", snapshot.display());
    node.serve.wait_for_log("filter snapshot restored").await;
    let second = node.get("/seen-once").await;
    assert!(
        second.cache.stored,
        "the key seen before the restart is stored on its first request after it: {:?}",
        second.cache
    );
    let new = node.get("/never-seen").await;
    assert_eq!(new.cache.detail.as_deref(), Some("first-sight"));
    node.stop().await;
}

/// Grown while the process has one thread, the table never makes a worker wait for the
/// kernel to grow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_starts_with_a_descriptor_table_as_large_as_its_open_file_limit() {
    let node = Running::start(&[]).await;
    let pid = node.serve.child.id().expect("running");
    let limit = procfs::value(pid, "limits", "Max open files").expect("the open-file limit");
    let expected = limit
        .parse::<u64>()
        .map_or(65_536, |limit| limit.min(65_536));
    let slots = procfs::value(pid, "status", "FDSize:").expect("FDSize");
    let slots: u64 = slots.parse().expect("a number of slots");
    assert!(slots >= expected, "{slots} slots, for a limit of {limit}");
    node.stop().await;
}

const ALWAYS: (&str, &str) = ("admission", "policy = \"always\"");

/// The work-stealing runtime, the option beside thread per core: it serves, stores, and
/// stops cleanly on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_stealing_runtime_serves_and_stops_cleanly() {
    let extra = [
        ("server", "workers = 2\nruntime = \"work-stealing\""),
        ALWAYS,
    ];
    let node = Running::start(&extra).await;
    let miss = node.get("/ws").await;
    assert!(miss.cache.stored, "{:?}", miss.cache);
    // A request right after may come before the fill commits (and wait for it).
    crate::support::wait_until_async(
        || "/ws never became a hit".to_owned(),
        async || node.get("/ws").await.cache.hit,
    )
    .await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_switches_the_admission_policy_for_the_next_request() {
    let mut node = Running::start(&[ALWAYS]).await;
    assert!(node.get("/a").await.cache.stored);

    let line = node.reload(&node.text(&[]), &["config reloaded"]).await;
    assert!(line.contains("admission.policy"), "{line}");
    let first = node.get("/b").await;
    assert_eq!(first.cache.detail.as_deref(), Some("first-sight"));
    assert!(node.get("/b").await.cache.stored);

    // And back: with "always", a new URL is stored on its first request again.
    node.reload(&node.text(&[ALWAYS]), &["config reloaded"])
        .await;
    assert!(node.get("/c").await.cache.stored);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_a_new_origin_timeout() {
    // A response head may take first_byte_timeout; the origin's /slow takes 1.5 s.
    let connect = ("origin", "connect_timeout = \"200ms\"");
    let mut node = Running::start(&[connect, ("origin", "first_byte_timeout = \"5s\"")]).await;
    assert_eq!(node.get("/slow-1").await.status, 200);

    let impatient = node.text(&[connect, ("origin", "first_byte_timeout = \"500ms\"")]);
    let line = node.reload(&impatient, &["config reloaded"]).await;
    assert!(line.contains("origin.first_byte_timeout"), "{line}");
    assert_eq!(node.get("/slow-2").await.status, 504);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_with_an_invalid_file_keeps_the_running_config() {
    let mut node = Running::start(&[ALWAYS]).await;
    let invalid = node.text(&[("cache", "max_object_size = \"12XB\"")]);
    let line = node.reload(&invalid, &["config reload rejected"]).await;
    assert!(line.contains("cache.max_object_size"), "{line}");
    assert!(line.contains("ERROR"), "{line}");
    // Still serving, still with "always" (the rejected file said "second-hit"): a new URL
    // is stored on its first request.
    let seen = node.get("/after-the-bad-file").await;
    assert_eq!(seen.status, 200);
    assert!(seen.cache.stored, "{:?}", seen.cache);

    // A file that validates but names an access log that cannot be opened is rejected too.
    let unopenable = (
        "log",
        "access_log = \"/nonexistent-dir/secondhit/access.log\"",
    );
    let line = node
        .reload(&node.text(&[unopenable]), &["config reload rejected"])
        .await;
    assert!(line.contains("log.access_log"), "{line}");
    assert!(node.get("/still-always").await.cache.stored);

    // A valid file whose max_object_size only its own (restart-only) max_size would hold:
    // the running max_size stays, so the object limit would be over it.
    let outgrown = node.text(&[
        ("cache", "max_size = \"40GiB\""),
        ("cache", "max_object_size = \"20GiB\""),
    ]);
    let line = node.reload(&outgrown, &["config reload rejected"]).await;
    assert!(line.contains("cache.max_object_size"), "{line}");
    assert!(line.contains("running cache.max_size"), "{line}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_names_restart_only_changes_and_keeps_their_running_values() {
    let mut node = Running::start(&[ALWAYS]).await;
    // The listener and the cache directory need a restart; max_object_size applies now.
    let moved = node.dir.path().join("elsewhere");
    let text = node
        .text(&[ALWAYS, ("cache", "max_object_size = 4")])
        .replace("127.0.0.1:0", "127.0.0.1:1")
        .replace(
            &node.dir.path().join("cache").display().to_string(),
            &moved.display().to_string(),
        );
    let mark = node.serve.log_mark();
    node.reload(&text, &["config reloaded"]).await;
    let warning = node
        .serve
        .wait_for_log_with(mark, &["need a restart"])
        .await;
    assert!(warning.contains("server.listen"), "{warning}");
    assert!(warning.contains("cache.dir"), "{warning}");
    assert!(warning.contains("WARN"), "{warning}");
    let applied = node
        .serve
        .wait_for_log_with(mark, &["config reloaded"])
        .await;
    assert!(applied.contains("cache.max_object_size"), "{applied}");
    assert!(!applied.contains("server.listen"), "{applied}");

    // Still on the old address and directory, with the new size limit.
    let seen = node.get("/larger-than-four-bytes").await;
    assert_eq!(seen.cache.detail.as_deref(), Some("too-large"));
    assert!(!moved.exists(), "the new cache.dir was not opened");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigusr1_reopens_the_access_log_after_it_was_moved() {
    let logs = tempfile::tempdir().expect("temp dir");
    let log = logs.path().join("access.log");
    let rotated = logs.path().join("access.log.1");
    let access = format!("access_log = \"{}\"", log.display());
    let mut node = Running::start(&[("log", &access)]).await;
    node.get("/before-rotation").await;
    wait_for_line(&log, "/before-rotation").await;

    // logrotate's way: move the file, then signal.
    std::fs::rename(&log, &rotated).expect("move the log");
    let mark = node.serve.log_mark();
    node.serve.signal("USR1");
    node.serve
        .wait_for_log_with(mark, &["access log reopened"])
        .await;
    node.get("/after-rotation").await;
    wait_for_line(&log, "/after-rotation").await;
    let old = std::fs::read_to_string(&rotated).expect("read the moved log");
    assert!(old.contains("/before-rotation"), "{old}");
    assert!(!old.contains("/after-rotation"), "{old}");
    node.stop().await;
}

/// Waits until the file at `path` holds a line containing `needle`.
async fn wait_for_line(path: &Path, needle: &str) {
    crate::support::wait_until(
        || format!("{} never held {needle:?}", path.display()),
        || std::fs::read_to_string(path).is_ok_and(|text| text.contains(needle)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_new_sites_and_their_rules() {
    let mut node = Running::start(&[]).await;
    assert_eq!(
        node.get("/account").await.cache.fwd.as_deref(),
        Some("uri-miss")
    );
    let sites = "[[site]]\nhosts = [\"site.test\"]\n\
                 [[site.rule]]\npath = \"/account\"\nbypass = true\n";
    let text = format!("{}{sites}", node.text(&[]));
    node.reload(&text, &["config reloaded", "site"]).await;
    // The site's rule applies at once, and a host no site names gets 421.
    assert_eq!(
        node.get("/account").await.cache.fwd.as_deref(),
        Some("bypass")
    );
    let other = send(client().get(format!("{}/account", node.base))).await;
    assert_eq!(other.status, 421);
    assert_eq!(node.origin.count("/account"), 2);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_over_the_object_limit_is_logged_once_per_url_naming_the_limit() {
    // "auto" with an 8 MiB cache: an eighth is under the floor, so the limit is 1 MiB.
    const LIMIT: usize = 1024 * 1024;
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", vec![7; LIMIT + 1])).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let extra = [("cache", "max_size = \"8MiB\"")];
    write(dir.path(), &config_text(dir.path(), origin.addr, &extra));
    let mut node = Running::serve(origin, dir).await;

    for path in ["/big", "/big", "/big", "/other-big"] {
        let seen = node.get(path).await;
        assert_eq!(seen.body.len(), LIMIT + 1, "{path} is served whole");
        assert_eq!(seen.cache.detail.as_deref(), Some("too-large"), "{path}");
    }
    let line = node.serve.wait_for_log("http://site.test/other-big").await;
    assert!(
        line.contains("larger than cache.max_object_size")
            && line.contains(&format!("\"max_object_size\":{LIMIT}"))
            && line.contains(&format!("\"length\":{}", LIMIT + 1)),
        "the line names the limit and the length: {line}"
    );
    let lines = node
        .serve
        .log_lines_containing("larger than cache.max_object_size");
    assert_eq!(lines, 2, "one line per URL, not per request");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_adds_the_first_site_warns_that_other_hosts_are_turned_away() {
    let mut node = Running::start(&[]).await;
    assert_eq!(node.get("/before").await.status, 200);
    let with_site = format!(
        "{}[[site]]\nhosts = [\"www.example.com\"]\n[site.origin]\nurl = \"http://{}\"\n",
        node.text(&[]),
        node.origin.addr
    );
    let line = node
        .reload(&with_site, &["the reloaded config adds [[site]]s"])
        .await;
    assert!(line.contains("gets 421"), "{line}");
    node.serve.wait_for_log("config reloaded").await;
    // As the warning says: site.test is no site's host.
    assert_eq!(node.get("/after").await.status, 421);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pid_file_names_the_process_that_the_shipped_logrotate_script_signals() {
    let logs = tempfile::tempdir().expect("temp dir");
    let log = logs.path().join("access.log");
    let pid_file = logs.path().join("run").join("secondhit.pid");
    std::fs::create_dir(logs.path().join("run")).expect("the pid file's directory");
    let access = format!("access_log = \"{}\"", log.display());
    let pid_line = format!("pid_file = \"{}\"", pid_file.display());
    let mut node = Running::start(&[("log", &access), ("server", &pid_line)]).await;
    let written = std::fs::read_to_string(&pid_file).expect("serve wrote its pid file");
    let pid = node.serve.child.id().expect("a running child");
    assert_eq!(written, format!("{pid}\n"));

    // logrotate's way without systemd: move the file, then run the shipped postrotate
    // script, pointed at this process's pid file.
    node.get("/before-rotation").await;
    wait_for_line(&log, "/before-rotation").await;
    std::fs::rename(&log, logs.path().join("access.log.1")).expect("move the log");
    let mark = node.serve.log_mark();
    let script = postrotate_script().replace(
        "/run/secondhit/secondhit.pid",
        &pid_file.display().to_string(),
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .expect("run the postrotate script");
    assert!(status.success(), "the postrotate script: {status:?}");
    node.serve
        .wait_for_log_with(mark, &["access log reopened"])
        .await;
    node.get("/after-rotation").await;
    wait_for_line(&log, "/after-rotation").await;
    node.stop().await;
    assert!(!pid_file.exists(), "a clean exit removes the pid file");
}

/// The commands between `postrotate` and `endscript` of config/package/logrotate.
fn postrotate_script() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/package/logrotate");
    let stanza = std::fs::read_to_string(path).expect("read config/package/logrotate");
    let (_, after) = stanza
        .split_once("postrotate")
        .expect("a postrotate script");
    let (script, _) = after.split_once("endscript").expect("an endscript");
    script.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_merges_the_included_fragments_over_the_main_file_the_last_by_name_winning() {
    let origin = cacheable_origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    // The main file keeps the default policy (second-hit); the fragments, read in name
    // order, set it twice: the later one, 20-always.toml, wins.
    let main = format!(
        "include = [\"conf.d/*.toml\"]\n{}",
        config_text(dir.path(), origin.addr, &[])
    );
    write(dir.path(), &main);
    let fragments = dir.path().join("conf.d");
    std::fs::create_dir(&fragments).expect("conf.d");
    std::fs::write(
        fragments.join("20-always.toml"),
        "[admission]\npolicy = \"always\"\n",
    )
    .expect("write a fragment");
    std::fs::write(
        fragments.join("10-second-hit.toml"),
        "[admission]\npolicy = \"second-hit\"\n",
    )
    .expect("write a fragment");
    std::fs::write(fragments.join("notes.txt"), "not a fragment").expect("write a note");
    let node = Running::serve(origin, dir).await;
    // "always": a URL is stored on its first request; the main file's other
    // [admission] keys and its [cache] still apply.
    assert!(node.get("/first").await.cache.stored);
    assert!(node.dir.path().join("cache").is_dir());
    node.stop().await;
}
