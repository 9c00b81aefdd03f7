//! The access log end to end without HTTP: records through the queue and the writer
//! thread into real files in a temp directory.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use http_body_util::{BodyExt, Full};

use super::*;
use crate::config::AccessFormat;

fn record(path: &str) -> Record {
    Record {
        received: SystemTime::now(),
        peer: IpAddr::V4(Ipv4Addr::LOCALHOST),
        method: Method::GET,
        target: path.parse().expect("test target"),
        version: Version::HTTP_11,
        status: StatusCode::OK,
        referer: None,
        user_agent: None,
        host: None,
        forwarded_for: None,
        upstream: None,
        outcome: crate::outcome::Outcome::hit(),
        bytes: 0,
        duration: Duration::ZERO,
    }
}

fn to_file(path: &Path, format: AccessFormat) -> LogConfig {
    LogConfig {
        access_log: Destination::File(path.to_owned()),
        access_format: format,
        ..LogConfig::default()
    }
}

fn body(bytes: &'static [u8]) -> ProxyBody {
    Full::new(Bytes::from_static(bytes))
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read the log")
}

#[tokio::test]
async fn a_body_read_to_its_end_logs_its_bytes_once_it_is_dropped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("access.log");
    let writers = Writers::default();
    let log = writers
        .open(&to_file(&path, AccessFormat::Combined))
        .expect("open");
    assert!(log.is_on());
    let wrapped = log.wrap_body(record("/a"), Instant::now(), body(b"twelve bytes"));
    let sent = wrapped.collect().await.expect("whole body").to_bytes();
    assert_eq!(&sent[..], b"twelve bytes");
    writers.close().await;
    let text = read(&path);
    assert!(
        text.contains("\"GET /a HTTP/1.1\" 200 12 \"-\" \"-\" \"secondhit; hit\" "),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);
}

#[tokio::test]
async fn a_body_dropped_unread_logs_zero_bytes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("access.jsonl");
    let writers = Writers::default();
    let log = writers
        .open(&to_file(&path, AccessFormat::Json))
        .expect("open");
    drop(log.wrap_body(record("/head"), Instant::now(), body(b"unsent")));
    writers.close().await;
    let line: serde_json::Value = serde_json::from_str(&read(&path)).expect("a JSON line");
    assert_eq!(line["request_uri"], "/head");
    assert_eq!(line["body_bytes_sent"], 0);
}

#[tokio::test]
async fn reopen_follows_the_path_after_the_file_was_moved() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("access.log");
    let rotated = dir.path().join("access.log.1");
    let writers = Writers::default();
    let log = writers
        .open(&to_file(&path, AccessFormat::Combined))
        .expect("open");
    log.send(record("/before"));
    wait_for(&path, "/before").await;
    std::fs::rename(&path, &rotated).expect("rotate");
    // Until the reopen, lines still go to the moved file, as with nginx.
    log.send(record("/moved"));
    wait_for(&rotated, "/moved").await;
    log.reopen();
    wait_until(|| path.exists()).await;
    log.send(record("/after"));
    writers.close().await;
    assert!(read(&path).contains("/after"));
    assert!(!read(&rotated).contains("/after"));
}

#[tokio::test]
async fn a_new_destination_gets_its_own_writer_and_the_old_one_writes_out_its_queue() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = dir.path().join("first.log");
    let second = dir.path().join("second.jsonl");
    let writers = Writers::default();
    let old = writers
        .open(&to_file(&first, AccessFormat::Combined))
        .expect("open");
    let new = writers
        .open(&to_file(&second, AccessFormat::Json))
        .expect("open");
    assert!(second.exists(), "opening creates the file");
    // Queued, then its last handle dropped at once, before its writer's next round.
    old.send(record("/one"));
    drop(old);
    new.send(record("/two"));
    wait_for(&first, "/one").await;
    wait_for(&second, "\"request_uri\":\"/two\"").await;
    let off = LogConfig {
        access_log: Destination::Off,
        ..LogConfig::default()
    };
    assert!(!writers.open(&off).expect("open off").is_on());
    writers.close().await;
    assert!(!read(&first).contains("/two"));
    assert!(!read(&second).contains("/one"));
}

#[test]
fn a_file_that_cannot_be_opened_is_an_error_naming_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = to_file(
        &dir.path().join("missing/dir/access.log"),
        AccessFormat::Combined,
    );
    let Err(error) = Writers::default().open(&config) else {
        panic!("a file in a missing directory was opened");
    };
    assert!(error.to_string().starts_with("log.access_log: "), "{error}");
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_rather_than_blocks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("access.log");
    let writers = Writers::default();
    let log = writers
        .open(&to_file(&path, AccessFormat::Combined))
        .expect("open");
    // Far more than the queue holds, faster than one round of the writer.
    let sent = 4 * CAPACITY as u64;
    for _ in 0..sent {
        log.send(record("/flood"));
    }
    writers.close().await;
    let written = read(&path).lines().count() as u64;
    assert!(log.dropped() > 0, "nothing dropped: {written} written");
    assert_eq!(written + log.dropped(), sent);
}

/// Waits until `path` holds `needle`.
async fn wait_for(path: &Path, needle: &str) {
    wait_until(|| std::fs::read_to_string(path).is_ok_and(|text| text.contains(needle))).await;
}

/// Polls `done` on the wall clock: the log's writer is a thread of its own.
async fn wait_until(done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
