//! Invalidation: removed entries are gone from the index and the disk, stay
//! gone after a restart, and fills begun before the removal never bring them back.

use super::*;

#[tokio::test]
async fn a_removed_entry_is_gone_from_index_and_disk_and_stays_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let (k, other) = (Store::key_hash("k"), Store::key_hash("other"));
    put(&store, "k", &body(100_000, 1)).await;
    put(&store, "other", b"kept").await;
    let path = entry_path(&store, &entry(&store, "k").await);
    let other_path = entry_path(&store, &entry(&store, "other").await);
    assert!(store.remove("k", k).await.unwrap());
    assert!(missing(&store, "k").await);
    assert!(!path.exists());
    let stats = store.stats();
    assert_eq!((stats.objects, stats.evictions), (1, 0));
    assert_eq!(stats.bytes, std::fs::metadata(&other_path).unwrap().len());
    // Nothing left to remove, and a key never stored.
    assert!(!store.remove("k", k).await.unwrap());
    assert!(
        !store
            .remove("never", Store::key_hash("never"))
            .await
            .unwrap()
    );
    drop(store);
    let store = open(dir.path()).await;
    assert!(missing(&store, "k").await);
    assert_eq!(cache_files(dir.path()), vec![other_path]);
    assert_eq!(read(&store, "other").await.unwrap().1, b"kept");
    assert!(store.contains(other));
}

#[tokio::test]
async fn a_different_key_on_the_same_hash_is_not_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "a", b"AAA").await;
    assert!(!store.remove("b", Store::key_hash("a")).await.unwrap());
    assert_eq!(read(&store, "a").await.unwrap().1, b"AAA");
}

#[tokio::test]
async fn a_fill_begun_before_a_removal_never_commits_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let k = Store::key_hash("k");
    put(&store, "k", b"v1").await;
    let in_flight = fill(&store, "k", 201, b"v2, fetched before the removal").await;
    assert!(store.remove("k", k).await.unwrap());
    in_flight.finish().await.unwrap();
    assert!(missing(&store, "k").await);
    assert!(cache_files(dir.path()).is_empty());
    assert_eq!(store.stats().committed_fills, 1);
    // Likewise when the key had no entry at the time of the removal.
    let in_flight = fill(&store, "k", 201, b"v2").await;
    assert!(!store.remove("k", k).await.unwrap());
    in_flight.finish().await.unwrap();
    assert!(missing(&store, "k").await);
    // A fill begun after the removal commits.
    let after = fill(&store, "k", 202, b"v3").await;
    after.finish().await.unwrap();
    assert_eq!(
        read(&store, "k").await.unwrap(),
        (meta(202), b"v3".to_vec())
    );
    assert_eq!(store.stats().reserved_bytes, 0);
}

#[tokio::test]
async fn a_removal_during_the_start_up_scan_sticks() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path()).await;
        for i in 0..20 {
            put(&store, &format!("k{i}"), &body(3000, i)).await;
        }
    }
    // Not waiting for the scan: whether it has indexed k7 yet or not, the
    // removal must win, in this run and the next.
    let store = Store::open(options(dir.path())).unwrap();
    store.remove("k7", Store::key_hash("k7")).await.unwrap();
    wait_for_scan(&store).await;
    assert!(missing(&store, "k7").await);
    assert_eq!(cache_files(dir.path()).len(), 19);
    drop(store);
    let store = open(dir.path()).await;
    assert!(missing(&store, "k7").await);
    assert_eq!(store.stats().objects, 19);
    assert_eq!(cache_files(dir.path()).len(), 19);
}

#[tokio::test]
async fn a_removal_during_the_start_up_scan_is_on_disk_when_it_returns() {
    const KEYS: usize = 2000;
    let dir = tempfile::tempdir().unwrap();
    put_many_quickly(dir.path(), KEYS).await;
    // Whether the scan has reached a key's file or not, the file is gone when `remove`
    // returns.
    remove_each_during_the_scan(dir.path(), KEYS, &[disk::object_path]).await;
}
