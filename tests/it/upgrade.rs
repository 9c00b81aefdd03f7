//! The binary upgrade SIGUSR2 starts, through the real binary and real signals: a new
//! process takes the listening sockets over while clients keep their keep-alive
//! connections busy, none of their requests fails, and the store and the admission
//! filters pass to the new process; a new process that cannot start leaves the running
//! one serving, which logs why.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

use crate::lifecycle::{config_text, write};
use crate::support::serve::ServeProcess;
use crate::support::{PATIENCE, Reply, Seen, TestOrigin, client, send, wait_until};

mod slow_clients;

/// Keys stored before the upgrade, which the load asks for.
const STORED: usize = 16;

/// Concurrent keep-alive connections of the load.
const CONNECTIONS: usize = 24;

/// The body the origin sends for `path`: long enough to span several reads.
fn body_of(path: &str) -> Vec<u8> {
    path.repeat(400).into_bytes()
}

/// An origin whose every answer may be stored for a minute.
async fn origin() -> TestOrigin {
    TestOrigin::start(|head| Reply::ok("max-age=60", body_of(head.uri.path()))).await
}

/// GET `path` from `addr` with a fixed `Host` (the cache key includes it).
async fn get(addr: &str, path: &str) -> Seen {
    send(
        client()
            .get(format!("http://{addr}{path}"))
            .header("host", "site.test"),
    )
    .await
}

/// What the load saw: answers verified, and every failure with its reason.
#[derive(Default)]
struct Tally {
    verified: AtomicU64,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failures.lock().expect("failures").push(what);
    }

    fn verified(&self) -> u64 {
        self.verified.load(Ordering::Relaxed)
    }
}

/// One client as wrk is one: a keep-alive connection sending its next request as soon as
/// the last response ended, a new connection after a response with `Connection: close`.
/// Anything else that ends a connection — a reset, a close without `Connection: close`,
/// a refused connect — is a failure, as is a wrong status or body.
async fn client_loop(addr: String, first: usize, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let mut next = first;
    while !stop.load(Ordering::Relaxed) {
        let stream = match tokio::net::TcpStream::connect(&addr).await {
            Ok(stream) => stream,
            Err(error) => {
                tally.fail(format!("connect: {error}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (mut sender, connection) =
            match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
                Ok(pair) => pair,
                Err(error) => {
                    tally.fail(format!("handshake: {error}"));
                    continue;
                }
            };
        tokio::spawn(connection);
        while !stop.load(Ordering::Relaxed) {
            let path = format!("/stored/{}", next % STORED);
            next += 1;
            let request = http::Request::get(&path)
                .header("host", "site.test")
                .body(Empty::<Bytes>::new())
                .expect("a request");
            let response = match sender.send_request(request).await {
                Ok(response) => response,
                Err(error) => {
                    tally.fail(format!("{path}: {error}"));
                    break;
                }
            };
            let status = response.status();
            let closes = response
                .headers()
                .get(http::header::CONNECTION)
                .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"close"));
            match response
                .into_body()
                .collect()
                .await
                .map(|body| body.to_bytes())
            {
                Ok(body) if status == 200 && body == body_of(&path) => {
                    tally.verified.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) => tally.fail(format!("{path}: status {status} or a wrong body")),
                Err(error) => tally.fail(format!("{path}: body: {error}")),
            }
            if closes {
                break;
            }
        }
    }
}

/// The pid `path` names, once it names one other than `old`.
async fn new_pid(path: &Path, old: u32) -> u32 {
    let read = || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
    };
    wait_until(
        || format!("the pid file never named a process other than {old}"),
        || read().is_some_and(|pid| pid != old),
    )
    .await;
    read().expect("a pid")
}

/// The process an upgrade started, which the test did not spawn: stopped with SIGTERM at
/// the end, killed if the test fails before.
struct Upgraded(u32);

impl Upgraded {
    /// Whether the process still runs: a zombie has exited, whether or not whoever
    /// inherited it (the old process is gone) has reaped it yet.
    fn alive(&self) -> bool {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.0)) else {
            return false;
        };
        // The state follows the command name, which ends at the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        !matches!(state, Some("Z" | "X"))
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.0.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {}", self.0);
    }

    async fn terminate(self) {
        self.signal("TERM");
        wait_until(
            || format!("pid {} never exited after SIGTERM", self.0),
            || !self.alive(),
        )
        .await;
    }
}

impl Drop for Upgraded {
    fn drop(&mut self) {
        if self.alive() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_under_load_fails_no_request_and_hands_over_the_store_and_the_filters() {
    let origin = origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("secondhit.pid");
    // Two workers: each has a listening socket of its own (SO_REUSEPORT), and both must
    // pass to the new process.
    let server = format!("workers = 2\npid_file = \"{}\"", pid_file.display());
    let text = config_text(dir.path(), origin.addr, &[("server", &server)]);
    write(dir.path(), &text);
    let mut old = ServeProcess::start(&dir.path().join("secondhit.toml")).await;
    let addr = old.addr.clone();
    store_some_and_see_one_once(&addr).await;

    let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|i| tokio::spawn(client_loop(addr.clone(), i, stop.clone(), tally.clone())))
        .collect();
    wait_until(
        || "the load never got going".to_owned(),
        || tally.verified() > 500,
    )
    .await;
    let old_pid = old.child.id().expect("a running process");
    let mark = old.log_mark();
    old.signal("USR2");
    let new = Upgraded(new_pid(&pid_file, old_pid).await);
    old.wait_for_successor_log(mark, &["listening"]).await;
    let status = tokio::time::timeout(PATIENCE, old.child.wait())
        .await
        .expect("the old process exits after the hand-over")
        .expect("wait");
    assert!(status.success(), "the old process exits 0: {status:?}");
    // Only the new process serves now: the load goes on through it.
    let handed = tally.verified();
    wait_until(
        || "the load stalled after the upgrade".to_owned(),
        || tally.verified() > handed + 500,
    )
    .await;
    stop_the_load_and_assert_no_request_failed(&stop, clients, &tally).await;

    old.wait_for_successor_log(mark, &["cache scan finished"])
        .await;
    assert_the_store_and_the_filters_were_handed_over(&addr).await;
    new.terminate().await;
    assert!(!pid_file.exists(), "the new process removes its pid file");
}

/// Stores [`STORED`] objects through the proxy at `addr` (each requested twice), and
/// requests `/seen-once` once, so that the filters know it.
async fn store_some_and_see_one_once(addr: &str) {
    for i in 0..STORED {
        let path = format!("/stored/{i}");
        get(addr, &path).await;
        let second = get(addr, &path).await;
        assert!(second.cache.stored, "{path} stored: {:?}", second.cache);
    }
    let once = get(addr, "/seen-once").await;
    assert_eq!(once.cache.detail.as_deref(), Some("first-sight"));
}

/// Stops the load's `clients`, waits for them, and asserts that `tally` has no failure.
async fn stop_the_load_and_assert_no_request_failed(
    stop: &AtomicBool,
    clients: Vec<tokio::task::JoinHandle<()>>,
    tally: &Tally,
) {
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.expect("a client task");
    }
    let failures = tally.failures.lock().expect("failures").clone();
    assert!(
        failures.is_empty(),
        "{} of {} requests failed, the first: {:?}",
        failures.len(),
        tally.verified() + failures.len() as u64,
        &failures[..failures.len().min(5)]
    );
}

/// Asserts that the process now at `addr` hits every object stored before the upgrade
/// with its body, and stores `/seen-once`, seen once before it, on its first request.
async fn assert_the_store_and_the_filters_were_handed_over(addr: &str) {
    for i in 0..STORED {
        let path = format!("/stored/{i}");
        let seen = get(addr, &path).await;
        assert!(
            seen.cache.hit,
            "{path} a hit after the upgrade: {:?}",
            seen.cache
        );
        assert_eq!(seen.body, body_of(&path), "{path}'s body");
    }
    let second = get(addr, "/seen-once").await;
    assert!(
        second.cache.stored,
        "the key seen once before the upgrade is stored on its first request after it: {:?}",
        second.cache
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_that_cannot_start_leaves_the_running_one_serving_and_logs_why() {
    let origin = origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("secondhit.pid");
    let server = format!("pid_file = \"{}\"", pid_file.display());
    let text = config_text(dir.path(), origin.addr, &[("server", &server)]);
    write(dir.path(), &text);
    let mut old = ServeProcess::start(&dir.path().join("secondhit.toml")).await;
    let pid = old.child.id().expect("a running process");
    let addr = old.addr.clone();
    write(
        dir.path(),
        &text.replace("[cache]", "[cache]\nmax_size = \"lots\""),
    );
    let mark = old.log_mark();
    old.signal("USR2");
    let line = old
        .wait_for_log_with(mark, &["upgrade failed", "cache.max_size"])
        .await;
    assert!(line.contains("cannot start"), "{line}");
    let seen = get(&addr, "/still-served").await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body, body_of("/still-served"));
    let named = std::fs::read_to_string(&pid_file).expect("the pid file");
    assert_eq!(
        named,
        format!("{pid}\n"),
        "the pid file still names the old process"
    );
    // Fixed, the next SIGUSR2 upgrades.
    write(dir.path(), &text);
    old.signal("USR2");
    let new = Upgraded(new_pid(&pid_file, pid).await);
    old.wait_for_successor_log(mark, &["listening"]).await;
    let seen = get(&addr, "/served-after").await;
    assert_eq!(seen.body, body_of("/served-after"));
    new.terminate().await;
    let status = old.child.wait().await.expect("wait");
    assert!(status.success(), "{status:?}");
}
