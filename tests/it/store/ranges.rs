//! One flipped byte in a 5 MB entry: no Range request covering it gets a complete 206 with
//! the wrong byte, and ranges that do not touch its block are served from the cache intact.

use super::common::*;
use crate::support::{self, TestOrigin, TestProxy};
use std::path::Path;

/// Five megabytes: 77 blocks of 64 KiB.
const SIZE: u64 = 5_000_000;
/// The flipped body byte, which `bytes=99990-100010` covers: inside block 1.
const FLIPPED: u64 = 100_000;
/// Block 1's body bytes.
const BLOCK_1: (u64, u64) = (65_536, 131_071);

/// Flips body byte `FLIPPED` of the entry file of `path` (the body ends where the block
/// table of `SIZE.div_ceil(64 KiB)` entries starts).
fn flip(file: &std::path::Path) {
    let mut bytes = std::fs::read(file).expect("entry");
    let body_start = bytes.len() - SIZE.div_ceil(65_536) as usize * 8 - SIZE as usize;
    bytes[body_start + FLIPPED as usize] ^= 0x20;
    std::fs::write(file, bytes).expect("damage");
}

/// What a Range request got: status, Cache-Status, and the body or the error that cut it.
struct Got {
    status: u16,
    cache: support::ParsedCacheStatus,
    body: Result<Vec<u8>, String>,
}

async fn get_range(base: &str, path: &str, range: &str) -> Result<Got, String> {
    let response = request(base, path)
        .header("range", range)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let cache = support::ParsedCacheStatus::from_headers(response.headers());
    let body = response
        .bytes()
        .await
        .map(|b| b.to_vec())
        .map_err(|e| e.to_string());
    Ok(Got {
        status,
        cache,
        body,
    })
}

/// The ranges that touch block 1, each with the name of the object it is sent for.
const TOUCHING: [(&str, &str); 5] = [
    ("issue", "bytes=99990-100010"),
    ("edge", "bytes=131000-131071"),
    ("edge-start", "bytes=65536-65540"),
    ("long", "bytes=1000-4999999"),
    ("multi", "bytes=0-10,99999-100001"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_range_covering_a_flipped_byte_gets_a_complete_206() {
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    // One object for the ranges that keep away from block 1, and one per range that
    // touches it: the first such request finds the damage and discards the entry.
    let intact = format!("/intact-{SIZE}");
    let touched: Vec<String> = (TOUCHING.iter())
        .map(|(name, _)| format!("/{name}-{SIZE}"))
        .collect();
    let all: Vec<String> = touched.iter().chain([&intact]).cloned().collect();
    fill_and_stop(&origin, &cache_dir, &all).await;
    let files = entry_files_by_path(&cache_dir);
    for path in &all {
        flip(&files[path]);
    }
    // The memory tier would read these bodies whole and verify them up front: off, so
    // that ranges are read from the files.
    let proxy = TestProxy::start_in(origin.addr, &cache_dir, |config| {
        always(config);
        config.cache.memory_size = 0;
    })
    .await;
    proxy.wait_scanned().await;
    let b = base(&proxy);

    ranges_away_from_block_1_are_intact_hits(&b, &intact).await;
    assert!(files[&intact].exists());
    assert_eq!(proxy.store.stats().checksum_failures, 0);

    // Touching block 1, covering the flipped byte or not: never a complete answer from the
    // damaged file. A small range is checked before the head and goes to the origin; a
    // long one is cut before block 1's bytes.
    for ((name, range), path) in TOUCHING.iter().zip(&touched) {
        a_range_touching_block_1_is_no_complete_hit(&b, &origin, name, range, path, &files[path])
            .await;
    }
    let stats = proxy.store.stats();
    assert_eq!(stats.checksum_failures, TOUCHING.len() as u64, "{stats:?}");
    assert!(files[&intact].exists());
}

/// Requests ranges of `intact` that keep away from block 1 through the proxy at `b`, and
/// checks that each is a hit with exactly the stored bytes.
async fn ranges_away_from_block_1_are_intact_hits(b: &str, intact: &str) {
    // Not touching block 1: hits, exactly the stored bytes.
    let stored = object(intact, 1);
    for (first, last) in [(0, 1000), (BLOCK_1.1 + 1, 140_000), (200_000, SIZE - 1)] {
        let got = get_range(b, intact, &format!("bytes={first}-{last}"))
            .await
            .expect("a response");
        assert_eq!((got.status, got.cache.hit), (206, true), "{first}-{last}");
        let body = got.body.expect("a complete body");
        assert!(
            body == stored[first as usize..=last as usize],
            "{first}-{last}: wrong bytes"
        );
    }
}

/// Requests `range` (of [`TOUCHING`], named `name`) of the damaged `path` through the proxy
/// at `b`, and checks that it is either cut on a hit or answered completely from the
/// origin, and that the damaged `file` is gone; only a long or multipart range may get no
/// response at all.
async fn a_range_touching_block_1_is_no_complete_hit(
    b: &str,
    origin: &TestOrigin,
    name: &str,
    range: &str,
    path: &str,
    file: &Path,
) {
    let got = match get_range(b, path, range).await {
        Ok(got) => got,
        // The cut can come before hyper flushed the head: no response at all.
        Err(error) => {
            assert!(["long", "multi"].contains(&name), "{name}: {error}");
            return;
        }
    };
    match got.body {
        Ok(body) => {
            assert!(
                !got.cache.hit,
                "{name}: a complete answer from the damaged entry"
            );
            assert_eq!(got.status, 206, "{name}");
            let fresh = object(path, origin.count(path));
            if name != "multi" {
                let (first, last) = range["bytes=".len()..].split_once('-').expect("range");
                let (first, last): (usize, usize) =
                    (first.parse().expect("first"), last.parse().expect("last"));
                assert!(body == fresh[first..=last], "{name}: wrong bytes");
            }
            assert!(["issue", "edge", "edge-start"].contains(&name), "{name}");
        }
        Err(error) => assert!(got.cache.hit, "{name}: cut, but not a hit: {error}"),
    }
    assert!(!file.exists(), "{name}: the damaged file is still there");
}
