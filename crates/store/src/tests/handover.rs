//! Closing the store for a hand-over: what a closed store still does (streams of entries
//! already open), what it no longer does (lookups, fills, updates, removals, purges,
//! syncs, unlinks), and that the next owner can open the directory at once.

use super::*;

/// The grace the tests give fills in progress (on tokio's paused clock where it elapses).
const GRACE: Duration = Duration::from_secs(2);

/// Opens `dir` as the next owner would, without waiting for the lock: it must be free.
async fn next_owner(dir: &Path) -> Store {
    let opts = StoreOptions {
        lock_timeout: Duration::ZERO,
        ..options(dir)
    };
    open_with(opts).await
}

#[tokio::test]
async fn a_closed_store_misses_refuses_writes_and_frees_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "k", b"kept").await;
    put(&store, "v", b"revalidated").await;
    let looked_up = entry(&store, "v").await;
    store.close_for_handover(GRACE).await.unwrap();

    assert!(missing(&store, "k").await, "a lookup misses");
    let hash = Store::key_hash("new");
    let began = store
        .begin_fill("new", hash, &meta(200), Some(1), MAX, store.fill_ticket())
        .await;
    assert!(matches!(began, Err(StoreError::Closed)), "{began:?}");
    let updated = store.update_meta(&looked_up, &meta(203)).await.unwrap();
    assert!(!updated, "an update is skipped");
    let removed = store.remove("k", Store::key_hash("k")).await;
    assert!(matches!(removed, Err(StoreError::Closed)), "{removed:?}");
    let selector = PurgeSelector::Url("k".to_owned());
    let purged = store.purge(&selector, PurgeMode::Remove).await;
    assert!(matches!(purged, Err(StoreError::Closed)), "{purged:?}");
    assert!(!store.sync().await.unwrap(), "no sync after the last one");
    store.close_for_handover(GRACE).await.unwrap();

    // The lock is free while this store lives on, and the entries are intact.
    let next = next_owner(dir.path()).await;
    assert_eq!(read(&next, "k").await.unwrap().1, b"kept");
    let (meta, data) = read(&next, "v").await.unwrap();
    assert_eq!(
        (meta.status.as_u16(), &data[..]),
        (200, &b"revalidated"[..])
    );
    drop(store);
    assert_eq!(next.stats().objects, 2);
}

#[tokio::test]
async fn a_body_stream_opened_before_the_handover_reads_on_after_the_next_owner_removes_it() {
    let data = body(300_000, 4);
    let (dir, store, found, path) = stored_k(&data).await;
    assert!(found.body_in_memory().is_none(), "streamed from the file");
    store.close_for_handover(GRACE).await.unwrap();
    let next = next_owner(dir.path()).await;
    assert!(next.remove("k", Store::key_hash("k")).await.unwrap());
    assert!(!path.exists());

    let chunks: Vec<_> = found.into_body_stream().collect().await;
    let streamed: Vec<u8> = chunks.into_iter().flat_map(Result::unwrap).collect();
    assert!(streamed == data, "the stream's bytes differ from the body");
}

#[tokio::test]
async fn a_damaged_block_found_after_the_handover_ends_the_stream_and_leaves_the_file() {
    let data = body(150_000, 5);
    let (_dir, store, found, path) = stored_k(&data).await;
    let mut flipped = std::fs::read(&path).unwrap();
    let last = last_body_byte(&flipped);
    flipped[last] ^= 0x01;
    std::fs::write(&path, &flipped).unwrap();
    store.close_for_handover(GRACE).await.unwrap();

    let items: Vec<_> = found.into_body_stream().collect().await;
    let error = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(path.exists(), "the file is the next owner's to judge");
    assert_eq!(store.stats().checksum_failures, 0);
}

/// A fill of `data` under `key` with its first half written.
async fn half_filled(store: &Store, key: &str, data: &[u8]) -> EntryWriter {
    let (hash, len) = (Store::key_hash(key), Some(data.len() as u64));
    let (ticket, meta) = (store.fill_ticket(), meta(200));
    let began = store.begin_fill(key, hash, &meta, len, MAX, ticket);
    let mut writer = began.await.unwrap();
    writer.write(&data[..data.len() / 2]).await.unwrap();
    writer
}

#[tokio::test]
async fn a_fill_commits_within_the_grace_and_one_still_open_after_it_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    // The scan finished on the wall clock; the grace elapses on tokio's paused clock.
    tokio::time::pause();
    let data = body(200_000, 6);
    let rest = &data[data.len() / 2..];
    let mut quick = half_filled(&store, "quick", &data).await;
    let mut slow = half_filled(&store, "slow", &data).await;

    let finishing = async {
        assert!(store.inner.gate.closing(), "closing began");
        let hash = Store::key_hash("late");
        let (ticket, late_meta) = (store.fill_ticket(), meta(200));
        let late = store.begin_fill("late", hash, &late_meta, None, MAX, ticket);
        assert!(matches!(late.await, Err(StoreError::Closed)), "no new fill");
        quick.write(rest).await.unwrap();
        quick.finish().await.unwrap();
    };
    let (closed, ()) = tokio::join!(store.close_for_handover(GRACE), finishing);
    closed.unwrap();

    let written = slow.write(rest).await;
    assert!(matches!(written, Err(StoreError::Closed)), "{written:?}");
    assert!(
        files(&dir.path().join("tmp")).is_empty(),
        "its temp file is gone"
    );
    // A file of the next owner's under the same name is not the dropped fill's to remove.
    std::fs::write(&slow.tmp_path, b"the next owner's").unwrap();
    drop(slow);
    assert!(files(&dir.path().join("tmp")).len() == 1);
    std::fs::remove_dir_all(dir.path().join("tmp")).unwrap();

    tokio::time::resume();
    let next = next_owner(dir.path()).await;
    assert_eq!(read(&next, "quick").await.unwrap().1, data);
    assert!(missing(&next, "slow").await);
}
