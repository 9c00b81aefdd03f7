//! An upgrade while the old process has slow work in flight: a download of a large stored
//! object to a client that reads a few KB at a time, a request waiting on a slow origin,
//! and a fill whose origin body trickles in. The old process hands the cache directory
//! over once its store work is done, not its connections: a new client is answered by
//! the new process while the old one still streams, every slow exchange ends with the
//! right bytes, and the store the new process opens is intact.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{Upgraded, get};
use crate::lifecycle::{config_text, write};
use crate::support::serve::ServeProcess;
use crate::support::{PATIENCE, ParsedCacheStatus, Reply, TestOrigin, send_until_hit, wait_until};

/// The large stored object: far more than the kernel buffers on both ends of a
/// connection hold, so its slow download is in flight in the old process until the
/// client speeds up.
const BIG_LEN: usize = 16 * 1024 * 1024;

/// Small stored objects, beside the large one.
const SMALL: usize = 4;

/// How long the slow origin waits before it answers `/slow-origin`.
const ORIGIN_DELAY: Duration = Duration::from_secs(3);

/// How long a new client may wait for its answer after the old process stopped
/// accepting: the fills' grace and a start of the new process, far below the
/// `server.shutdown_timeout` (30 s) the old process waits for its slowest connection.
const ANSWERED_WITHIN: Duration = Duration::from_secs(6);

/// The large object's bytes: no two 64 KiB blocks alike, so a block out of place shows.
fn big_body() -> Vec<u8> {
    (0..BIG_LEN).map(|i| (i % 251 + i / 65_536) as u8).collect()
}

/// The body the origin sends for the small objects and the slow exchanges.
fn body_of(path: &str) -> Vec<u8> {
    path.repeat(300).into_bytes()
}

/// The origin: `/big` large, `/slow-origin` after [`ORIGIN_DELAY`], `/slow-body` in 16
/// pieces 300 ms apart (a fill in progress for about 5 s), the rest at once.
async fn origin() -> TestOrigin {
    let big = Arc::new(big_body());
    TestOrigin::start(move |head| {
        let path = head.uri.path();
        match path {
            "/big" => Reply::ok("max-age=600", big.to_vec()),
            "/slow-origin" => Reply::ok("max-age=600", body_of(path)).delayed(ORIGIN_DELAY),
            "/slow-body" => {
                let pause = Duration::from_millis(300);
                Reply::slow(
                    "max-age=600",
                    body_of(path),
                    body_of(path).len() / 16,
                    pause,
                )
            }
            _ => Reply::ok("max-age=600", body_of(path)),
        }
    })
    .await
}

/// A download of `/big` by a client with a small receive buffer that reads 4 KiB every
/// 50 ms until `fast` turns true, then reads the rest at once; returns the response head
/// and the body.
async fn slow_download(addr: String, fast: watch::Receiver<bool>) -> (String, Vec<u8>) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(16 * 1024).expect("SO_RCVBUF");
    let mut stream = socket
        .connect(addr.parse().expect("an address"))
        .await
        .expect("connect");
    let request = "GET /big HTTP/1.1\r\nhost: site.test\r\n\r\n";
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.expect("read the head");
        assert!(n > 0, "closed before the head: {received:?}");
        received.extend_from_slice(&chunk[..n]);
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let mut body = received.split_off(head_end);
    while body.len() < BIG_LEN && !*fast.borrow() {
        let n = stream.read(&mut chunk).await.expect("read slowly");
        assert!(n > 0, "the slow download ended after {} bytes", body.len());
        body.extend_from_slice(&chunk[..n]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut rest = vec![0u8; BIG_LEN - body.len().min(BIG_LEN)];
    stream
        .read_exact(&mut rest)
        .await
        .expect("the rest of /big");
    body.extend_from_slice(&rest);
    (head, body)
}

/// The `Cache-Status` of a raw response head.
fn cache_status(head: &str) -> ParsedCacheStatus {
    let mut headers = http::HeaderMap::new();
    for (name, value) in head.lines().skip(1).filter_map(|line| line.split_once(':')) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.trim().as_bytes()),
            http::HeaderValue::from_str(value.trim()),
        ) {
            headers.append(name, value);
        }
    }
    ParsedCacheStatus::from_headers(&headers)
}

/// The `new_pid` a log line names.
fn pid_in(line: &str) -> u32 {
    let after = line
        .split_once("\"new_pid\":")
        .unwrap_or_else(|| panic!("no new_pid in {line}"))
        .1;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no new_pid in {line}"))
}

/// Starts the old process on a cache holding `/big` and the small objects (every
/// storable answer stored, a 30 s `shutdown_timeout`).
async fn old_process(dir: &Path, origin: &TestOrigin) -> ServeProcess {
    let server = format!("pid_file = \"{}\"", dir.join("secondhit.pid").display());
    let text = config_text(
        dir,
        origin.addr,
        &[("server", &server), ("admission", "policy = \"always\"")],
    )
    .replace("shutdown_timeout = \"5s\"", "shutdown_timeout = \"30s\"");
    write(dir, &text);
    let old = ServeProcess::start(&dir.join("secondhit.toml")).await;
    let url = |path: &str| format!("http://{}{path}", old.addr);
    for path in std::iter::once("/big".to_owned()).chain((0..SMALL).map(|i| format!("/small/{i}")))
    {
        let client = crate::support::client();
        send_until_hit(|| client.get(url(&path)).header("host", "site.test")).await;
    }
    old
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_hands_the_cache_over_without_waiting_for_slow_clients_or_origins() {
    let origin = origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut old = old_process(dir.path(), &origin).await;
    let addr = old.addr.clone();
    let (speed_up, fast) = watch::channel(false);
    let download = tokio::spawn(slow_download(addr.clone(), fast));
    let slow_origin = tokio::spawn({
        let addr = addr.clone();
        async move { get(&addr, "/slow-origin").await }
    });
    let slow_body = tokio::spawn({
        let addr = addr.clone();
        async move { get(&addr, "/slow-body").await }
    });
    // Both slow requests reached the origin: one waits for its head, one fills.
    wait_until(
        || "the slow requests never reached the origin".to_owned(),
        || origin.count("/slow-origin") == 1 && origin.count("/slow-body") == 1,
    )
    .await;
    let mark = old.log_mark();
    old.signal("USR2");
    let ready = old
        .wait_for_log_with(mark, &["the new process is ready"])
        .await;
    let new = Upgraded(pid_in(&ready));

    // A new client, after the old process stopped accepting: the new one answers it
    // while the old one is still busy with the slow download.
    let answered = tokio::time::timeout(ANSWERED_WITHIN, get(&addr, "/small/0")).await;
    let seen =
        answered.expect("a new client is answered soon after the old process stops accepting");
    assert_eq!(
        (seen.status, &seen.body),
        (200, &body_of("/small/0")),
        "the new client's answer"
    );
    assert!(
        matches!(old.child.try_wait(), Ok(None)),
        "the old process still serves the slow download"
    );
    speed_up.send_replace(true);
    let (head, body) = download.await.expect("the slow download");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(cache_status(&head).hit, "served from the store: {head}");
    assert!(
        body == big_body(),
        "the slow download's bytes differ from /big's"
    );
    let slow = slow_origin.await.expect("the slow-origin request");
    assert_eq!((slow.status, &slow.body), (200, &body_of("/slow-origin")));
    assert_eq!(
        slow.cache.detail.as_deref(),
        Some("handover"),
        "answered from the origin, not stored: {:?}",
        slow.cache
    );
    let trickled = slow_body.await.expect("the slow-body request");
    assert_eq!(
        (trickled.status, &trickled.body),
        (200, &body_of("/slow-body"))
    );
    let status = tokio::time::timeout(PATIENCE, old.child.wait())
        .await
        .expect("the old process exits once its connections are done")
        .expect("wait");
    assert!(status.success(), "the old process exits 0: {status:?}");
    store_is_intact(&mut old, mark, &addr, dir.path()).await;
    new.terminate().await;
}

/// After the upgrade: every object stored before it is a hit in the new process with
/// its bytes, the two the old process could no longer store are not, and neither process
/// found a damaged file or left a temp file behind.
async fn store_is_intact(old: &mut ServeProcess, mark: usize, addr: &str, dir: &Path) {
    old.wait_for_successor_log(mark, &["cache scan finished"])
        .await;
    let big = get(addr, "/big").await;
    assert!(big.cache.hit, "/big a hit: {:?}", big.cache);
    assert!(big.body == big_body(), "/big's bytes after the upgrade");
    for i in 0..SMALL {
        let path = format!("/small/{i}");
        let seen = get(addr, &path).await;
        assert!(seen.cache.hit, "{path} a hit: {:?}", seen.cache);
        assert_eq!(seen.body, body_of(&path), "{path}'s bytes");
    }
    for path in ["/slow-origin", "/slow-body"] {
        let seen = get(addr, path).await;
        assert!(
            !seen.cache.hit,
            "{path} was not stored by the old process: {:?}",
            seen.cache
        );
        assert_eq!(seen.body, body_of(path));
    }
    for needle in ["removing damaged", "removing invalid"] {
        assert_eq!(
            old.log_lines_containing(needle),
            0,
            "a line with {needle:?}"
        );
    }
    let tmp = dir.join("cache").join("tmp");
    wait_until(
        || "a temp file stays in the cache's tmp/".to_owned(),
        || std::fs::read_dir(&tmp).is_ok_and(|mut items| items.next().is_none()),
    )
    .await;
}
