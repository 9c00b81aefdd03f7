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
