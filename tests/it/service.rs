//! Running as a service: sockets passed the way systemd passes them (`LISTEN_FDS`), root
//! dropped after binding (`server.user`), and `check-config` refusing what `serve` would.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::serve::{BIN, ServeProcess};
use crate::support::{PATIENCE, files_under, get, send_until_hit};
use crate::support::{Reply, TestOrigin};

fn write_config(dir: &Path, origin: std::net::SocketAddr, extra_server: &str) -> PathBuf {
    let path = dir.join("secondhit.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\nshutdown_timeout = \"5s\"\n{extra_server}\n\
         [origin]\nurl = \"http://{origin}\"\n\
         [cache]\ndir = \"{}\"\nfsync = false\n\
         [admission]\npolicy = \"always\"\nseed = \"service test\"\n\
         [log]\nformat = \"json\"\n",
        dir.join("cache").display()
    );
    std::fs::write(&path, text).expect("write config");
    path
}

/// `secondhit serve` started the way systemd starts a socket-activated service: `fd` on
/// file descriptor 3, `LISTEN_FDS=1`, and `LISTEN_PID` set to the pid of the process that
/// runs secondhit (the shell's, which `exec` keeps).
fn activated(config: &Path, fd: OwnedFd) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(
            "exec 3<&0 0</dev/null; export LISTEN_PID=$$ LISTEN_FDS=1; \
             exec \"$0\" serve --config \"$1\"",
        )
        .arg(BIN)
        .arg(config)
        .stdin(Stdio::from(fd));
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inherited_socket_is_served_and_holds_clients_across_a_restart() {
    let origin = TestOrigin::start(|head| {
        Reply::ok(
            "max-age=60",
            format!("origin {}", head.uri.path()).into_bytes(),
        )
    })
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), origin.addr, "");
    // The test plays systemd: it owns the socket, and only lends it to each process.
    let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = socket.local_addr().expect("address");
    let lend = || OwnedFd::from(socket.try_clone().expect("dup the socket"));

    let first = ServeProcess::start_command(activated(&config, lend())).await;
    assert_eq!(first.addr, addr.to_string(), "serves the inherited socket");
    let seen = get(&format!("http://{addr}/before")).await;
    assert_eq!(seen.body, b"origin /before");
    let status = first.terminate().await;
    assert!(status.success(), "{status:?}");

    // No secondhit runs now: the kernel still completes the handshake on the socket the
    // test holds, and the request waits in the backlog instead of being refused.
    let mut waiting = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects while no secondhit runs");
    waiting
        .write_all(b"GET /during HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await
        .expect("send while no secondhit runs");

    let mut second = ServeProcess::start_command(activated(&config, lend())).await;
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, waiting.read_to_end(&mut answer))
        .await
        .expect("the queued client is answered by the next process")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("origin /during"), "{answer}");
    // And the cache of the first process is the second's, once its scan has indexed it:
    // until then a lookup is a miss by design, and would ask the origin again.
    second.wait_for_log("cache scan finished").await;
    let page = format!("http://{addr}/before");
    let hit = send_until_hit(|| crate::support::client().get(&page)).await;
    assert_eq!(hit.body, b"origin /before");
    assert_eq!(
        origin.count("/before"),
        1,
        "the restart kept the stored object"
    );
    let status = second.terminate().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inherited_descriptor_that_is_no_socket_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), "127.0.0.1:9".parse().expect("addr"), "");
    let file = std::fs::File::open(&config).expect("open a plain file");
    let output = activated(&config, OwnedFd::from(file))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let output = tokio::time::timeout(PATIENCE, output)
        .await
        .expect("exits")
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("socket activation: file descriptor 3"),
        "{stderr}"
    );
}

/// The uid and gid of `nobody`, the user the root test drops privileges to.
fn nobody() -> (u32, u32) {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "dropping privileges needs root, but this test was built as root and runs as a user"
    );
    match nix::unistd::User::from_name("nobody") {
        Ok(Some(user)) => (user.uid.as_raw(), user.gid.as_raw()),
        other => panic!("no user \"nobody\" on this machine to drop privileges to: {other:?}"),
    }
}

/// The real and effective ids on the `Uid:` or `Gid:` line of `/proc/<pid>/status`.
fn ids(pid: u32, field: &str) -> Vec<u32> {
    let line = crate::support::procfs::line(pid, "status", field).expect("field in status");
    line.split_whitespace()
        .map(|id| id.parse().expect("numeric id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(tests_as_root),
    ignore = "needs root to drop privileges: run cargo test as root (.ci/run does)"
)]
async fn started_as_root_it_binds_then_runs_and_writes_as_the_configured_user() {
    let (uid, gid) = nobody();
    let origin = TestOrigin::start(|_| Reply::ok("max-age=60", b"served".to_vec())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    // The service's directory belongs to its user, as a package would set it up.
    std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown the temp dir");
    let config = write_config(dir.path(), origin.addr, "user = \"nobody\"");
    let serve = ServeProcess::start(&config).await;
    let pid = serve.child.id().expect("running");
    for field in ["Uid:", "Gid:"] {
        let want = if field == "Uid:" { uid } else { gid };
        assert_eq!(
            ids(pid, field),
            vec![want; 4],
            "{field} real, effective, saved, fs"
        );
    }
    let groups = ids(pid, "Groups:");
    assert!(
        groups.iter().all(|g| *g == gid),
        "supplementary groups {groups:?}"
    );

    let page = format!("http://{}/owned", serve.addr);
    let hit = send_until_hit(|| crate::support::client().get(&page)).await;
    assert_eq!(hit.body, b"served");
    let cache = dir.path().join("cache");
    let mut entries = 0;
    for path in files_under(&cache.join("objects")) {
        assert_eq!(
            std::fs::metadata(&path).expect("metadata").uid(),
            uid,
            "{path:?}"
        );
        entries += 1;
    }
    assert!(entries > 0, "the fill is on disk");
    assert_eq!(
        std::fs::metadata(cache.join("state")).expect("state").uid(),
        uid
    );
    let status = serve.terminate().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(tests_as_root),
    ignore = "needs root to drop privileges: run cargo test as root (.ci/run does)"
)]
async fn a_cache_dir_the_user_cannot_write_is_refused_by_check_config_and_serve() {
    let (uid, _) = nobody();
    let dir = tempfile::tempdir().expect("temp dir");
    // A cache directory owned by root, mode 0755: nobody may not write it.
    std::fs::create_dir(dir.path().join("cache")).expect("cache dir");
    let config = write_config(
        dir.path(),
        "127.0.0.1:9".parse().expect("addr"),
        "user = \"nobody\"",
    );
    for command in ["check-config", "serve"] {
        let output = tokio::process::Command::new(BIN)
            .args([command, "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        let output = tokio::time::timeout(Duration::from_secs(30), output)
            .await
            .expect("exits")
            .expect("run");
        assert_eq!(output.status.code(), Some(1), "{command}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "cache.dir: {}",
                dir.path().join("cache").display()
            )) && stderr.contains(&format!(
                "not writable by the user secondhit runs as (uid {uid})"
            )),
            "{command}: {stderr}"
        );
    }
}

#[test]
fn check_config_refuses_what_serve_would_refuse_on_this_machine() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").expect("write");
    let cases = [
        (
            format!("[cache]\ndir = \"{}\"", file.display()),
            "cache.dir: ",
            "not a directory",
        ),
        (
            "[server]\nuser = \"no-such-user-secondhit\"".to_owned(),
            "server.user: ",
            "no user \"no-such-user-secondhit\"",
        ),
        (
            "[admission]\nexpected_urls = 1000000000000000".to_owned(),
            "admission.expected_urls: ",
            "more than this machine's",
        ),
        (
            format!(
                "[log]\naccess_log = \"{}/missing/access.log\"",
                dir.path().display()
            ),
            "log.access_log: ",
            "cannot be created",
        ),
    ];
    for (text, key, reason) in cases {
        let config = dir.path().join("check.toml");
        // Each case keeps its cache dir usable unless the case is about it.
        let text = if text.starts_with("[cache]") {
            text
        } else {
            format!(
                "{text}\n[cache]\ndir = \"{}\"",
                dir.path().join("cache").display()
            )
        };
        std::fs::write(&config, &text).expect("write config");
        let output = std::process::Command::new(BIN)
            .arg("check-config")
            .arg(&config)
            .output()
            .expect("run check-config");
        assert_eq!(output.status.code(), Some(1), "{text}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(key) && stderr.contains(reason),
            "{text}: {stderr}"
        );
    }
}
