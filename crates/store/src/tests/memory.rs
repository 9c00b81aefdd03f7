//! The memory tier: byte-identical bodies, invalidation with the disk entry, the
//! byte budget, and no promotion of what failed verification.

use super::*;

/// Options with a memory tier of `budget` bytes holding bodies up to 256 KiB.
fn with_memory(dir: &Path, budget: u64) -> StoreOptions {
    StoreOptions {
        memory_size: budget,
        memory_max_object_size: 256 * 1024,
        ..options(dir)
    }
}

/// The whole body and metadata of `key`, in whatever chunks the store yields.
async fn body_of(store: &Store, key: &str) -> Option<(EntryMeta, Vec<u8>)> {
    let entry = store.lookup(key, Store::key_hash(key)).await.unwrap()?;
    let meta = EntryMeta::clone(&entry.meta);
    let mut out = Vec::new();
    let mut stream = std::pin::pin!(entry.into_body_stream());
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    Some((meta, out))
}

/// Stores `data` under `key`, reads it twice (the second read, through the file the
/// first held open, offers even a body long enough to be mapped to the memory tier)
/// and returns the path of its file.
async fn put_and_promote(store: &Store, key: &str, data: &[u8]) -> PathBuf {
    put(store, key, data).await;
    drop(entry(store, key).await);
    let found = entry(store, key).await;
    let path = entry_path(store, &found);
    drop(found);
    path
}

#[tokio::test]
async fn a_mappable_body_is_copied_on_its_second_hit_from_the_disk_and_a_short_one_on_its_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(with_memory(dir.path(), 1 << 20)).await;
    let long_len = usize::try_from(crate::mapped::MAPPED_BODY_MIN).unwrap();
    let (short, long) = (body(5000, 1), body(long_len, 2));
    put(&store, "short", &short).await;
    put(&store, "long", &long).await;
    drop(entry(&store, "short").await);
    assert!(
        entry(&store, "long").await.body_in_memory().is_some(),
        "the first hit reads and verifies the body whole all the same"
    );
    let stats = store.stats();
    assert_eq!(
        (stats.memory_objects, stats.open_files),
        (1, 2),
        "{stats:?}"
    );
    // Through the held file: copied.
    drop(entry(&store, "long").await);
    assert_eq!(store.stats().memory_objects, 2);
    // Served from the copy, with its file gone behind the store's back.
    std::fs::remove_file(entry_path(&store, &entry(&store, "long").await)).unwrap();
    assert_eq!(body_of(&store, "long").await, Some((meta(200), long)));
    assert_eq!(body_of(&store, "short").await, Some((meta(200), short)));
}

#[tokio::test]
async fn without_held_files_a_mappable_body_is_copied_on_its_first_hit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(StoreOptions {
        open_files: 0,
        ..with_memory(dir.path(), 1 << 20)
    })
    .await;
    let data = body(100_000, 3);
    put(&store, "k", &data).await;
    assert!(entry(&store, "k").await.body_in_memory().is_some());
    assert_eq!(store.stats().memory_objects, 1);
    assert_eq!(body_of(&store, "k").await, Some((meta(200), data)));
}

#[tokio::test]
async fn a_hot_entry_is_served_from_memory_byte_for_byte_without_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(with_memory(dir.path(), 1 << 20)).await;
    let data = body(200_000, 1);
    let path = put_and_promote(&store, "k", &data).await;
    assert_eq!(store.stats().memory_objects, 1);
    // With its file gone behind the store's back, only the memory tier can answer.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(body_of(&store, "k").await, Some((meta(200), data.clone())));
    // Ranges are cut from the copy too.
    let found = entry(&store, "k").await;
    let mut range = std::pin::pin!(found.into_range_stream(1000, 1999));
    let mut cut = Vec::new();
    while let Some(chunk) = range.next().await {
        cut.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(cut, data[1000..2000]);
}

#[tokio::test]
async fn removal_newer_fills_and_metadata_updates_reach_the_memory_tier() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(with_memory(dir.path(), 1 << 20)).await;
    // Removal (purge, unsafe methods).
    put_and_promote(&store, "gone", &body(5000, 2)).await;
    assert!(store.remove("gone", Store::key_hash("gone")).await.unwrap());
    assert!(missing(&store, "gone").await);
    // A newer fill of the same key.
    put_and_promote(&store, "replaced", &body(5000, 3)).await;
    put(&store, "replaced", &body(6000, 4)).await;
    assert_eq!(
        body_of(&store, "replaced").await,
        Some((meta(200), body(6000, 4)))
    );
    // A metadata update in place (an origin's 304): the copy must not keep the old one.
    put_and_promote(&store, "updated", &body(5000, 5)).await;
    let found = entry(&store, "updated").await;
    assert_eq!(
        *found.meta,
        meta(200),
        "the copy serves the stored metadata"
    );
    let mut refreshed = meta(200);
    refreshed
        .response_headers
        .insert("etag", HeaderValue::from_static("\"v2\""));
    assert!(store.update_meta(&found, &refreshed).await.unwrap());
    assert_eq!(
        body_of(&store, "updated").await,
        Some((refreshed.clone(), body(5000, 5)))
    );
    // And again once the new metadata was read into memory.
    assert_eq!(
        body_of(&store, "updated").await,
        Some((refreshed, body(5000, 5)))
    );
    assert_eq!(store.stats().memory_objects, 2, "replaced and updated");
}

/// Where the body of `key`'s entry lies in memory, as the lookup returned it.
async fn body_address(store: &Store, key: &str) -> usize {
    let found = entry(store, key).await;
    found.body_in_memory().expect("served from memory").as_ptr() as usize
}

#[tokio::test]
async fn a_key_hit_often_is_served_from_this_threads_copy_until_its_entry_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(with_memory(dir.path(), 1 << 20)).await;
    put_and_promote(&store, "hot", &body(1000, 6)).await;
    // The first hits share the tier's buffer; after a run of them this thread serves
    // its own copy, the same one from then on.
    let shared = body_address(&store, "hot").await;
    let mut addresses = Vec::new();
    for _ in 0..12 {
        addresses.push(body_address(&store, "hot").await);
    }
    let own = *addresses.last().unwrap();
    assert_ne!(own, shared, "a copy of its own after a run of hits");
    assert_eq!(addresses[0], shared);
    assert!(
        addresses
            .iter()
            .skip_while(|&&a| a == shared)
            .all(|&a| a == own)
    );
    assert_eq!(
        body_of(&store, "hot").await,
        Some((meta(200), body(1000, 6)))
    );

    // A metadata update in place keeps the fill: the copy must not serve the old one.
    let found = entry(&store, "hot").await;
    let mut refreshed = meta(200);
    refreshed
        .response_headers
        .insert("etag", HeaderValue::from_static("\"v2\""));
    assert!(store.update_meta(&found, &refreshed).await.unwrap());
    drop(found);
    for _ in 0..12 {
        assert_eq!(
            body_of(&store, "hot").await,
            Some((refreshed.clone(), body(1000, 6)))
        );
    }
    // A newer fill, then a removal.
    put(&store, "hot", &body(900, 7)).await;
    for _ in 0..12 {
        assert_eq!(
            body_of(&store, "hot").await,
            Some((meta(200), body(900, 7)))
        );
    }
    assert!(store.remove("hot", Store::key_hash("hot")).await.unwrap());
    assert!(missing(&store, "hot").await);
}

#[tokio::test]
async fn a_body_over_the_copy_limit_is_always_served_from_the_tier() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(with_memory(dir.path(), 1 << 20)).await;
    let len = crate::thread_copies::COPY_MAX + 1;
    put_and_promote(&store, "large", &body(len, 8)).await;
    let shared = body_address(&store, "large").await;
    for _ in 0..20 {
        assert_eq!(body_address(&store, "large").await, shared);
    }
}

#[tokio::test]
async fn the_memory_tier_stays_within_its_budget_and_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 64 * 1024;
    let store = open_with(with_memory(dir.path(), budget)).await;
    for i in 0..100 {
        let key = format!("k{i}");
        put_and_promote(&store, &key, &body(4000, i as u8)).await;
        let stats = store.stats();
        assert!(stats.memory_bytes <= budget, "{stats:?}");
    }
    let stats = store.stats();
    assert!(
        stats.memory_objects > 0 && stats.memory_objects < 100,
        "{stats:?}"
    );
    // Over memory_max_object_size (256 KiB): served from the file, never held.
    let big = body(300_000, 9);
    let before = store.stats().memory_objects;
    put_and_promote(&store, "big", &big).await;
    assert_eq!(store.stats().memory_objects, before);
    assert_eq!(body_of(&store, "big").await, Some((meta(200), big)));
}

#[tokio::test]
async fn a_damaged_file_is_never_promoted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(with_memory(dir.path(), 1 << 20)).await;
    let data = body(100_000, 7);
    put(&store, "k", &data).await;
    // The first hit verifies the body whole and holds the file, copying nothing yet.
    let found = entry(&store, "k").await;
    let path = entry_path(&store, &found);
    drop(found);
    let stats = store.stats();
    assert_eq!(
        (stats.memory_objects, stats.open_files),
        (0, 1),
        "{stats:?}"
    );
    // Damaged in place, so the held descriptor reads the damage: the next hit copies the
    // body into a memory file through it, and the copy's checksum finds the damage.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = last_body_byte(&bytes);
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    assert!(missing(&store, "k").await, "a damaged body is a miss");
    let stats = store.stats();
    assert_eq!(stats.memory_objects, 0, "{stats:?}");
    assert_eq!(stats.checksum_failures, 1, "{stats:?}");
    assert!(!path.exists());
}
