//! Damaged entry files are never served whole; they are removed and counted.

use super::common::*;
use crate::support::{self, TestOrigin, TestProxy};
use std::path::Path;

/// An entry under cache.verify_whole_below (64 KiB): verified up front.
const SMALL: usize = 4000;
/// An entry streamed and verified block by block.
const LARGE: usize = 300_000;
/// The kinds of damage [`damage`] does.
const KINDS: [&str; 4] = ["truncated", "header", "body", "zeroed"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_entries_are_never_served_whole_and_are_removed_and_counted() {
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    let (damaged, controls) = damaged_and_control_paths();
    let all: Vec<String> = damaged
        .iter()
        .map(|(_, _, p)| p.clone())
        .chain(controls.iter().cloned())
        .collect();
    fill_and_stop(&origin, &cache_dir, &all).await;

    // Offline damage, file by file.
    let files = entry_files_by_path(&cache_dir);
    for (kind, j, path) in &damaged {
        damage(&files[path], kind, *j, path);
    }

    // The files' own checks are under test: no memory tier, which would read the
    // large bodies whole (and verify them up front) on their first hit.
    let proxy = TestProxy::start_in(origin.addr, &cache_dir, |config| {
        always(config);
        config.cache.memory_size = 0;
    })
    .await;
    proxy.wait_scanned().await;
    let stats = proxy.store.stats();
    // The scan reads headers only: all but the body damage is found before any request.
    assert_eq!(
        stats.removed_invalid + stats.checksum_failures,
        15,
        "{stats:?}"
    );
    let b = base(&proxy);
    for (kind, j, path) in &damaged {
        request_a_damaged_entry_twice(&b, &origin, kind, *j, path).await;
        assert!(
            !files[path].exists(),
            "{path}: the damaged file is still there"
        );
    }
    let stats = proxy.store.stats();
    assert_eq!(
        stats.removed_invalid + stats.checksum_failures,
        20,
        "{stats:?}"
    );
    assert!(stats.checksum_failures >= 5 + 3, "{stats:?}");
    for path in &controls {
        let seen = fetch(&b, path).await;
        assert!(seen.cache.hit, "{path}");
        assert_eq!(origin.count(path), 1);
    }
}

/// The paths to damage (4 kinds of damage x 5 entries, 3 small and 2 large, each with its
/// kind and index) and 2 undamaged controls.
fn damaged_and_control_paths() -> (Vec<(&'static str, usize, String)>, [String; 2]) {
    let mut damaged = Vec::new();
    for kind in KINDS {
        for j in 0..5 {
            let size = if j < 3 { SMALL } else { LARGE };
            damaged.push((kind, j, format!("/{kind}-{j}-{size}")));
        }
    }
    let controls = [format!("/control-0-{SMALL}"), format!("/control-1-{LARGE}")];
    (damaged, controls)
}

/// Damages the entry `file` of `path` the `j`th way of `kind`: truncated, a header byte
/// flipped, a body byte flipped, or zeroed.
fn damage(file: &Path, kind: &str, j: usize, path: &str) {
    let mut bytes = std::fs::read(file).expect("entry");
    let len = bytes.len();
    match kind {
        "truncated" => bytes.truncate([len - 1000, 30, len / 2, 100, len - 1][j]),
        // Magic, body length, checksum, key, metadata slot A.
        "header" => bytes[[3, 24, 60, 66, 512 + 30][j]] ^= 0x04,
        "body" => {
            let body_len = path.rsplit('-').next().and_then(|s| s.parse().ok());
            bytes[len - body_len.unwrap_or(2) / 2] ^= 0x01;
        }
        _ => bytes.iter_mut().for_each(|b| *b = 0),
    }
    std::fs::write(file, bytes).expect("damage");
}

/// Requests the damaged `path` twice through the proxy at `b`, and checks that whatever
/// arrives complete is what the origin sent last, and that only a large body damaged in
/// its body is cut, on its first hit.
async fn request_a_damaged_entry_twice(
    b: &str,
    origin: &TestOrigin,
    kind: &str,
    j: usize,
    path: &str,
) {
    for attempt in 0..2 {
        let cut_allowed = kind == "body" && j >= 3 && attempt == 0;
        let response = match request(b, path).send().await {
            Ok(response) => response,
            // The cut can come before hyper flushed the head: no response at all.
            Err(error) if cut_allowed => {
                assert!(error.is_request(), "{path}: {error}");
                continue;
            }
            Err(error) => panic!("{path}: no response head: {error}"),
        };
        assert_eq!(response.status(), 200);
        let cache = support::ParsedCacheStatus::from_headers(response.headers());
        match response.bytes().await {
            // Whatever arrives complete is exactly what the origin sent last.
            Ok(body) => assert_eq!(body, object(path, origin.count(path)), "{path}"),
            Err(_) => assert!(
                cache.hit && cut_allowed,
                "{path}: only a large damaged body may be cut, on its first hit"
            ),
        }
        if attempt == 0 && kind == "body" {
            // A small damaged body is a plain miss; a large one starts as a hit and is cut.
            assert_eq!(cache.hit, j >= 3, "{path}: {cache:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_damaged_while_held_open_is_not_served_and_is_fetched_again() {
    use std::os::unix::fs::FileExt;
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    // No memory tier: every hit reads the file, held open after the first one.
    let proxy = TestProxy::start_in(origin.addr, &cache_dir, |config| {
        always(config);
        config.cache.memory_size = 0;
    })
    .await;
    let b = base(&proxy);
    let path = "/held-4000";
    assert!(fetch(&b, path).await.cache.stored);
    proxy.wait_committed(1).await;
    let seen = fetch(&b, path).await;
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(proxy.store.stats().open_files, 1);
    // Damaged in place, behind the open descriptor: the last body byte flipped.
    let file = &entry_files_by_path(&cache_dir)[path];
    let bytes = std::fs::read(file).expect("entry");
    let table = 8; // one block: one checksum after the body
    let last = (bytes.len() - table - 1) as u64;
    let handle = std::fs::OpenOptions::new().write(true).open(file);
    handle
        .and_then(|f| f.write_at(&[bytes[last as usize] ^ 0x01], last))
        .expect("damage");
    let seen = fetch(&b, path).await;
    assert!(!seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(
        seen.body,
        object(path, 2),
        "fetched again, not the damaged copy"
    );
    assert_eq!(origin.count(path), 2);
    let stats = proxy.store.stats();
    assert_eq!(stats.checksum_failures, 1, "{stats:?}");
}

/// Flips one bit of body byte `at` of the entry file `file`, whose body is `body_len`
/// bytes followed by its block table; returns the flipped byte's body offset.
fn flip_body_byte(file: &std::path::Path, body_len: usize, at: usize) -> usize {
    let mut bytes = std::fs::read(file).expect("entry");
    let table = body_len.div_ceil(64 * 1024) * 8;
    let body_start = bytes.len() - table - body_len;
    bytes[body_start + at] ^= 0x10;
    std::fs::write(file, bytes).expect("damage");
    at
}

/// Reads a response's body until it ends or fails: what a client received.
async fn received(response: reqwest::Response) -> (Vec<u8>, bool) {
    let mut response = response;
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => return (body, true),
            Err(_) => return (body, false),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_large_body_is_cut_before_its_first_bad_block_and_removed() {
    const BLOCK: usize = 64 * 1024;
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    let (big, edge) = ("/big-3000000", "/edge-1048577");
    fill_and_stop(&origin, &cache_dir, &[big.to_owned(), edge.to_owned()]).await;
    let files = entry_files_by_path(&cache_dir);
    let damaged_at = [
        (big, flip_body_byte(&files[big], 3_000_000, 1_500_000)),
        (edge, flip_body_byte(&files[edge], 1_048_577, 524_300)),
    ];
    // Bodies streamed from their files, block by block.
    let proxy = TestProxy::start_in(origin.addr, &cache_dir, |config| {
        always(config);
        config.cache.memory_size = 0;
    })
    .await;
    let b = base(&proxy);
    for (path, at) in damaged_at {
        let original = object(path, 1);
        let response = request(&b, path).send().await;
        let (body, complete) = match response {
            Ok(response) => received(response).await,
            // The cut may come before the head was flushed.
            Err(_) => (Vec::new(), false),
        };
        assert!(!complete, "{path}: a damaged body is never sent complete");
        // Compared whole, printed by length only: the bodies are megabytes.
        assert!(
            body[..] == original[..body.len()],
            "{path}: the {} bytes received are not all the origin's",
            body.len()
        );
        assert!(
            body.len() <= at / BLOCK * BLOCK,
            "{path}: {} bytes received, the block of byte {at} was sent",
            body.len()
        );
        assert!(!files[path].exists(), "{path}: the damaged file is removed");
        // A resumed download is not served from the removed entry.
        let resumed = request(&b, path)
            .header("range", format!("bytes={}-", body.len()))
            .send()
            .await
            .expect("resumed request");
        let cache = support::ParsedCacheStatus::from_headers(resumed.headers());
        assert!(
            !cache.hit,
            "{path}: resumed from the damaged entry: {cache:?}"
        );
    }
    assert_eq!(proxy.store.stats().checksum_failures, 2);
    proxy.stop().await;
}
