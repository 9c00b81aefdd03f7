//! The byte budget: LRU eviction, and a refill racing the eviction of its key.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};
use secondhit_proxy::config::Fsync;
use secondhit_store::{EntryMeta, Store, StoreOptions};

use super::common::*;
use crate::support::{TestProxy, body_bytes, files_under};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_keeps_objects_under_max_size_and_the_most_recently_hit_survives() {
    const MAX_SIZE: u64 = 1024 * 1024;
    let origin = versioned_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        always(c);
        c.cache.max_size = MAX_SIZE;
    })
    .await;
    let b = base(&proxy);
    assert!(fetch(&b, "/hot-30000").await.cache.stored);
    proxy.wait_committed(1).await;
    // About 48 KB per entry with its header: 10x the budget is some 220 objects.
    let mut stored = 0u64;
    let mut i = 0u64;
    while stored < 10 * MAX_SIZE {
        let path = format!("/cold-{i}-40000");
        let seen = fetch(&b, &path).await;
        assert!(seen.cache.stored, "{path}: {:?}", seen.cache);
        proxy.wait_committed(i + 2).await;
        stored += seen.body.len() as u64;
        // The victims' files may still be unlinked behind the fill, up to a sixteenth
        // of the budget, and no more once their unlinks are done.
        let bytes = objects_bytes(&proxy.cache_dir);
        assert!(
            bytes <= MAX_SIZE + MAX_SIZE / 16,
            "objects/ holds {bytes} bytes after {path}"
        );
        proxy.store.unlinks_done().await;
        let bytes = objects_bytes(&proxy.cache_dir);
        assert!(
            bytes <= MAX_SIZE,
            "objects/ holds {bytes} bytes after {path}'s unlinks"
        );
        let hot = fetch(&b, "/hot-30000").await;
        assert!(hot.cache.hit, "the hot object was evicted at {path}");
        assert_eq!(hot.body, object("/hot-30000", 1));
        i += 1;
    }
    assert_eq!(origin.count("/hot-30000"), 1);
    let stats = proxy.store.stats();
    assert!(stats.evictions >= i - 25, "{stats:?}");
    assert_eq!(stats.bytes, objects_bytes(&proxy.cache_dir));
    assert_eq!(stats.objects as usize, proxy.entry_files().len());
    assert_eq!(stats.reserved_bytes, 0);
    // The oldest cold objects are gone; the newest is still there.
    assert!(!fetch(&b, "/cold-0-40000").await.cache.hit);
    assert!(fetch(&b, &format!("/cold-{}-40000", i - 1)).await.cache.hit);
}

fn meta() -> EntryMeta {
    let mut response_headers = HeaderMap::new();
    response_headers.insert("cache-control", HeaderValue::from_static("max-age=3600"));
    EntryMeta {
        request_time: SystemTime::now(),
        response_time: SystemTime::now(),
        status: StatusCode::OK,
        response_headers,
        request_headers: HeaderMap::new(),
        tags: Vec::new(),
        purged: None,
    }
}

/// The largest body a fill here may store: more than any test body.
const MAX_OBJECT: u64 = 1 << 20;

/// Stores `body` under `key` through the store's own API.
async fn put(store: &Store, key: &str, body: &[u8]) {
    let hash = Store::key_hash(key);
    let mut writer = store
        .begin_fill(
            key,
            hash,
            &meta(),
            Some(body.len() as u64),
            MAX_OBJECT,
            store.fill_ticket(),
        )
        .await
        .expect("begin fill");
    writer.write(body).await.expect("write");
    writer.finish().await.expect("finish");
}

/// The body stored under `key`, if any.
async fn stored_body(store: &Store, key: &str) -> Option<Vec<u8>> {
    use futures_util::TryStreamExt;
    let entry = store
        .lookup(key, Store::key_hash(key))
        .await
        .expect("lookup")?;
    let chunks: Vec<_> = entry.into_body_stream().try_collect().await.expect("body");
    Some(chunks.concat())
}

/// The key the refill tests race against its own eviction.
const RACED: &str = "http://cache.test/raced";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refill_racing_the_eviction_of_its_key_leaves_the_newer_entry_intact() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_store_of_200_kb(dir.path());
    let objects = dir.path().join("objects");
    let key = RACED;
    let hash = Store::key_hash(key);

    // Step by step: v2 is being written while v1 is evicted, then v2 commits.
    put(&store, key, &body_bytes(30_000, 1)).await;
    let v1_file = files_under(&objects).pop().expect("v1 file");
    let mut v2 = store
        .begin_fill(
            key,
            hash,
            &meta(),
            Some(30_000),
            MAX_OBJECT,
            store.fill_ticket(),
        )
        .await
        .expect("begin v2");
    v2.write(&body_bytes(30_000, 2)).await.expect("write v2");
    let mut others = 0;
    while store.contains(hash) {
        put(
            &store,
            &format!("http://cache.test/other-{others}"),
            &[7; 30_000],
        )
        .await;
        others += 1;
        assert!(others < 20, "v1 is never evicted");
    }
    assert!(!v1_file.exists(), "the eviction unlinked v1");
    v2.finish().await.expect("finish v2");
    assert_eq!(stored_body(&store, key).await, Some(body_bytes(30_000, 2)));

    // Concurrently: each round refills the key while other fills force evictions.
    for round in 0..40u8 {
        refill_under_eviction_pressure(&store, round).await;
        // The key holds this round's body, or nothing if it was evicted since.
        if let Some(body) = stored_body(&store, key).await {
            assert_eq!(body, body_bytes(20_000, round), "round {round}");
        }
        assert_files_and_index_agree(&store, dir.path(), round);
    }
    assert!(store.stats().evictions > 40);
}

/// Opens a store in `dir` with a 200 KB budget, no fsync and no memory tier.
fn open_store_of_200_kb(dir: &Path) -> Arc<Store> {
    Arc::new(
        Store::open(StoreOptions {
            dir: dir.to_owned(),
            fsync: Fsync::Off,
            max_size: 200_000,
            lock_timeout: Duration::from_secs(5),
            verify_whole_below: 64 * 1024,
            // Off: these tests are about the files; the memory tier has tests of its own.
            memory_size: 0,
            memory_max_object_size: 0,
            open_files: 16,
            min_free: 0,
            tag_memory: u64::MAX,
            max_write_rate: 0,
        })
        .expect("open store"),
    )
}

/// Refills [`RACED`] with round `round`'s body while three other fills force evictions,
/// concurrently, and waits for all of them.
async fn refill_under_eviction_pressure(store: &Arc<Store>, round: u8) {
    let refill = {
        let store = store.clone();
        tokio::spawn(async move { put(&store, RACED, &body_bytes(20_000, round)).await })
    };
    let pressure = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..3 {
                let other = format!("http://cache.test/pressure-{round}-{i}");
                put(&store, &other, &[round; 25_000]).await;
            }
        })
    };
    refill.await.expect("refill");
    pressure.await.expect("pressure");
}

/// Asserts that [`RACED`] has a file only while indexed, that every file under `dir` is
/// indexed and nothing indexed is missing, and that the files keep within the budget.
fn assert_files_and_index_agree(store: &Store, dir: &Path, round: u8) {
    let hash = Store::key_hash(RACED);
    let files = files_under(&dir.join("objects"));
    let name = format!("{hash:032x}");
    let of_key = files
        .iter()
        .filter(|p| p.to_string_lossy().contains(&name))
        .count();
    assert!(of_key <= usize::from(store.contains(hash)), "round {round}");
    // Every file is indexed, and nothing indexed is missing.
    assert_eq!(files.len() as u64, store.stats().objects, "round {round}");
    assert!(objects_bytes(dir) <= 200_000);
}
