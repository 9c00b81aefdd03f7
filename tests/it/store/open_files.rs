//! Entry files held open between hits (`cache.open_files`), under churn: more keys than
//! files held, and a budget small enough that entries are evicted, and their held files
//! closed, while other clients read them.

use super::common::*;
use crate::support::{TestOrigin, TestProxy};

/// The keys the clients cycle over: more than the files held, and more than the budget holds.
const KEYS: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_through_churning_held_files_are_byte_identical_and_no_deleted_file_stays_open() {
    const OPEN_FILES: usize = 8;
    let origin = std::sync::Arc::new(versioned_origin().await);
    // About 8.5 KB per entry with its header: some 45 of the 60 fit, so fills evict.
    let proxy = TestProxy::start(origin.addr, |c| {
        always(c);
        c.cache.memory_size = 0;
        c.cache.open_files = OPEN_FILES;
        c.cache.max_size = 400_000;
    })
    .await;
    let b = base(&proxy);
    let clients: Vec<_> = (0..4usize)
        .map(|client| tokio::spawn(churn(b.clone(), std::sync::Arc::clone(&origin), client)))
        .collect();
    let mut hits = 0;
    for client in clients {
        hits += client.await.expect("client");
    }
    // Most of the 600 hit in a run (`benches/RESULTS.md`, "hits through churning held
    // files"); far fewer would mean few held files read.
    assert!(
        hits >= 100,
        "{hits} hits: the held files were hardly exercised"
    );
    let stats = proxy.store.stats();
    assert!(
        stats.evictions > 0,
        "no eviction: the budget was not exercised: {stats:?}"
    );
    assert!(stats.open_files <= OPEN_FILES as u64, "{stats:?}");
    let deleted = deleted_files_held_open_under(&proxy.cache_dir.join("objects"));
    assert!(deleted.is_empty(), "evicted files still open: {deleted:?}");
}

/// Client number `client`'s 150 requests through the proxy at `b`, half to 10 hot keys and
/// half cycling over all [`KEYS`]; checks that each answer is one version of its object,
/// whole, and returns how many were hits.
async fn churn(b: String, origin: std::sync::Arc<TestOrigin>, client: usize) -> usize {
    let mut hits = 0;
    for i in 0..150usize {
        // Every other request one of 10 hot keys (more than the files held),
        // the rest a cycle over all of them (more than the budget holds).
        let key = if i % 2 == 0 {
            i / 2 % 10
        } else {
            (client * 13 + i) % KEYS
        };
        let path = format!("/churn-{key}-6000");
        let seen = fetch(&b, &path).await;
        assert_eq!(seen.status, 200, "{path}");
        // Whichever version it is, it is that version whole.
        let prefix = format!("{path} v");
        let text = String::from_utf8_lossy(&seen.body[..prefix.len() + 4]).into_owned();
        let version: usize = text[prefix.len()..]
            .split(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{path}: no version in {text:?}"));
        assert!(version <= origin.count(&path), "{path}: v{version}");
        assert!(
            seen.body == object(&path, version),
            "{path}: v{version} differs"
        );
        hits += usize::from(seen.cache.hit);
    }
    hits
}

/// The deleted files under `dir` that this process still holds open.
fn deleted_files_held_open_under(dir: &std::path::Path) -> Vec<String> {
    let objects = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.starts_with(&objects) && target.ends_with("(deleted)"))
        .collect()
}
