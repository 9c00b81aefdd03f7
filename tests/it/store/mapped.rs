//! Large hot bodies are mapped from their entry files and sent with `sendfile(2)`:
//! what a client receives must be exactly what the origin sent, whole, as a range and
//! over HTTP/2, and a damaged body must never be mapped into the memory tier.

use super::common::*;
use crate::support::{self, TestProxy, send};

/// Under `cache.memory_max_object_size` (1 MiB) and at least the mapped minimum (64 KiB).
const PATHS: [&str; 2] = ["/mapped-200000", "/mapped-700000"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_hot_bodies_sent_from_their_files_are_byte_identical() {
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    let paths: Vec<String> = PATHS.iter().map(|p| p.to_string()).collect();
    fill_and_stop(&origin, &cache_dir, &paths).await;

    let proxy = TestProxy::start_in(origin.addr, &cache_dir, always).await;
    proxy.wait_scanned().await;
    let b = base(&proxy);
    let h2 = support::h2c_client();
    for path in PATHS {
        let expected = object(path, 1);
        // The first hit maps and verifies the body; the later ones send it from the file.
        for round in 0..3 {
            let seen = fetch(&b, path).await;
            assert!(seen.cache.hit, "{path} round {round}: {:?}", seen.cache);
            assert_eq!(seen.body.len(), expected.len(), "{path} round {round}");
            assert!(seen.body == expected, "{path} round {round}: body differs");
        }
        let part = send(request(&b, path).header("range", "bytes=70000-150000")).await;
        assert_eq!(part.status, 206, "{path}");
        assert!(
            part.body == expected[70_000..=150_000],
            "{path}: range differs"
        );
    }
    assert_eq!(origin.count(PATHS[0]), 1);
    assert_eq!(origin.count(PATHS[1]), 1);

    // HTTP/2 cuts the body into DATA frames: slices of the mapping, sent the same way.
    // (Its own path: HTTP/2 names the proxy's address as the authority, another key.)
    let path = "/mapped-h2-300000";
    let filled = send(h2.get(format!("{b}{path}"))).await;
    assert!(filled.cache.stored, "{:?}", filled.cache);
    proxy.wait_committed(1).await;
    for round in 0..3 {
        let over_h2 = send(h2.get(format!("{b}{path}"))).await;
        assert!(
            over_h2.cache.hit,
            "over h2, round {round}: {:?}",
            over_h2.cache
        );
        assert!(
            over_h2.body == object(path, 1),
            "over h2, round {round}: body differs"
        );
    }
    assert_eq!(origin.count(path), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_large_body_is_never_mapped_or_served() {
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    let path = PATHS[0];
    fill_and_stop(&origin, &cache_dir, &[path.to_owned()]).await;
    let file = entry_files_by_path(&cache_dir)[path].clone();
    let mut bytes = std::fs::read(&file).expect("entry");
    let len = bytes.len();
    bytes[len - 1000] ^= 0x01;
    std::fs::write(&file, bytes).expect("damage");

    let proxy = TestProxy::start_in(origin.addr, &cache_dir, always).await;
    proxy.wait_scanned().await;
    let seen = fetch(&base(&proxy), path).await;
    assert!(
        !seen.cache.hit,
        "a damaged body was served: {:?}",
        seen.cache
    );
    assert!(
        seen.body == object(path, 2),
        "the client gets the origin's new version"
    );
    assert_eq!(origin.count(path), 2);
    assert!(!file.exists(), "the damaged file is removed");
}

/// Flips one bit of body byte `at` of `file` in place, through a write to the open file
/// (the inode and any mapping of it see the change).
fn flip_in_place(file: &std::path::Path, body_len: usize, at: usize) {
    use std::os::unix::fs::FileExt;
    let entry = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file);
    let entry = entry.expect("open entry");
    let len = entry.metadata().expect("stat").len() as usize;
    let offset = (len - body_len.div_ceil(64 * 1024) * 8 - body_len + at) as u64;
    let mut byte = [0u8];
    entry.read_exact_at(&mut byte, offset).expect("read");
    entry.write_all_at(&[byte[0] ^ 0x08], offset).expect("flip");
}

/// The entry file of every stored path, whatever the key's authority (an HTTP/2 key
/// names the proxy's address): by the path its key ends with.
fn entry_files_by_key_end(
    cache_dir: &std::path::Path,
) -> std::collections::HashMap<String, std::path::PathBuf> {
    let mut found = std::collections::HashMap::new();
    for file in support::files_under(&cache_dir.join("objects")) {
        let bytes = std::fs::read(&file).expect("entry");
        let key_len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
        let key = String::from_utf8_lossy(&bytes[64..64 + key_len]).into_owned();
        let path = key.splitn(4, '/').nth(3).map(|path| format!("/{path}"));
        found.insert(path.expect("a key with a path"), file);
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_body_changed_or_cut_behind_the_store_is_served_as_verified_then_removed() {
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    let (flipped, cut) = ("/flipped-200000", "/cut-200000");
    fill_and_stop(&origin, &cache_dir, &[flipped.to_owned(), cut.to_owned()]).await;

    let proxy = TestProxy::start_in(origin.addr, &cache_dir, always).await;
    proxy.wait_scanned().await;
    let b = base(&proxy);
    let h2 = support::h2c_client();
    let over_h2 = "/flipped-h2-200000";
    assert!(send(h2.get(format!("{b}{over_h2}"))).await.cache.stored);
    proxy.wait_committed(1).await;
    // Hot: the first hits put the bodies into the memory tier.
    for _ in 0..3 {
        assert!(fetch(&b, flipped).await.cache.hit);
        assert!(fetch(&b, cut).await.cache.hit);
        assert!(send(h2.get(format!("{b}{over_h2}"))).await.cache.hit);
    }
    assert_eq!(proxy.store.stats().memory_objects, 3);
    let files = entry_files_by_key_end(&cache_dir);
    flip_in_place(&files[flipped], 200_000, 100_000);
    flip_in_place(&files[over_h2], 200_000, 100_000);
    let entry = std::fs::OpenOptions::new().write(true).open(&files[cut]);
    entry.and_then(|f| f.set_len(1000)).expect("cut");

    for round in 0..3 {
        for path in [flipped, cut] {
            let seen = fetch(&b, path).await;
            assert_eq!(seen.status, 200, "{path} round {round}");
            assert!(
                seen.body == object(path, 1),
                "{path} round {round}: {} bytes, not the verified body",
                seen.body.len()
            );
        }
        let seen = send(h2.get(format!("{b}{over_h2}"))).await;
        assert!(
            seen.body == object(over_h2, 1),
            "over h2, round {round}: not the verified body"
        );
    }
    proxy.stop().await;

    // Read from the disk again, the damage is found and the entries removed.
    let proxy = TestProxy::start_in(origin.addr, &cache_dir, always).await;
    proxy.wait_scanned().await;
    let b = base(&proxy);
    for path in [flipped, cut] {
        let seen = fetch(&b, path).await;
        assert!(!seen.cache.hit, "{path}: damage served: {:?}", seen.cache);
        assert!(
            seen.body == object(path, 2),
            "{path}: the origin's new version"
        );
        assert!(!files[path].exists(), "{path}: the damaged file is removed");
    }
    proxy.stop().await;
}

/// A client that reads slowly makes the socket take mapped bodies in pieces (short
/// sends, which hyper continues): pipelined responses still arrive whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mapped_bodies_to_a_slow_reader_arrive_whole_and_in_order() {
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    let (large, small) = ("/slow-700000", "/slow-after-1000");
    fill_and_stop(&origin, &cache_dir, &[large.to_owned(), small.to_owned()]).await;
    let proxy = TestProxy::start_in(origin.addr, &cache_dir, always).await;
    proxy.wait_scanned().await;
    let b = base(&proxy);
    for _ in 0..3 {
        assert!(fetch(&b, large).await.cache.hit, "hot, so mapped");
    }

    // More than the proxy's socket can hold (up to 4 MiB on loopback) before the
    // client reads it, so some of a body waits in the proxy.
    let order = [large, small, large, large, small, large, large, small];
    let received = pipeline_to_a_slow_reader(proxy.addr, &order).await;
    responses_are_whole_and_in_order(&received, &order);
    assert_eq!(
        origin.count(large),
        1,
        "every answer of it came from the cache"
    );
    proxy.stop().await;
}

/// Sends GETs of `order` pipelined on one connection to `addr` (the last with
/// `Connection: close`), and reads everything the proxy answers through a small receive
/// window, a kilobyte at a time.
async fn pipeline_to_a_slow_reader(addr: std::net::SocketAddr, order: &[&str]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // A small receive window: the proxy's socket fills long before the body is sent.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("receive buffer");
    let mut stream = socket.connect(addr).await.expect("connect");
    let ask = |path: &str, last: bool| {
        let close = if last { "Connection: close\r\n" } else { "" };
        format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\n{close}\r\n")
    };
    let asked: String = (order.iter().enumerate())
        .map(|(n, path)| ask(path, n == order.len() - 1))
        .collect();
    stream.write_all(asked.as_bytes()).await.expect("requests");
    let mut received = Vec::new();
    let mut piece = [0u8; 1024];
    loop {
        let n = stream.read(&mut piece).await.expect("read");
        if n == 0 {
            break;
        }
        received.extend_from_slice(&piece[..n]);
        tokio::task::yield_now().await;
    }
    received
}

/// Asserts that `received` is a 200 response per path of `order`, in that order, each
/// with the path's whole body, and nothing after them.
fn responses_are_whole_and_in_order(received: &[u8], order: &[&str]) {
    let mut rest = received;
    for &path in order {
        let head_end = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("{path}: no whole head in what is left"))
            + 4;
        let head = String::from_utf8_lossy(&rest[..head_end]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{path}: {head}");
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("{path}: no length in {head}"));
        let expected = object(path, 1);
        assert_eq!(length, expected.len(), "{path}");
        assert!(rest.len() >= head_end + length, "{path}: body cut short");
        assert!(
            rest[head_end..head_end + length] == expected[..],
            "{path}: body differs"
        );
        rest = &rest[head_end + length..];
    }
    assert!(
        rest.is_empty(),
        "{} bytes after the last response",
        rest.len()
    );
}
