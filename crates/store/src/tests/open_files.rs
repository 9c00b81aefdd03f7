//! Entry files held open (`cache.open_files`): a hit on one reads only its body, and
//! the held file follows the disk entry (removal, newer fills, metadata updates,
//! eviction, damage, and files cut short behind the store's back).

use futures_util::{FutureExt, TryStreamExt};

use super::*;

/// Options holding up to `open_files` files open, without the memory tier.
fn holding(dir: &Path, open_files: usize) -> StoreOptions {
    StoreOptions {
        open_files,
        ..options(dir)
    }
}

/// Options holding up to 16 files open, with a memory tier of 1 MiB beside them.
fn holding_and_copying(dir: &Path) -> StoreOptions {
    StoreOptions {
        memory_size: 1 << 20,
        memory_max_object_size: 256 * 1024,
        ..holding(dir, 16)
    }
}

/// The whole body and metadata of `key`, in whatever chunks the store yields.
async fn read_whole(store: &Store, key: &str) -> Option<(EntryMeta, Vec<u8>)> {
    let entry = store.lookup(key, Store::key_hash(key)).await.unwrap()?;
    let meta = EntryMeta::clone(&entry.meta);
    let chunks: Vec<_> = entry.into_body_stream().try_collect().await.unwrap();
    Some((meta, chunks.concat()))
}

/// Stores `data` under `key` and looks it up once (which holds its file open);
/// returns the path of the file.
async fn put_and_hold(store: &Store, key: &str, data: &[u8]) -> PathBuf {
    put(store, key, data).await;
    let found = entry(store, key).await;
    entry_path(store, &found)
}

/// How many of this process's descriptors are open on files below `dir` (unlinked
/// ones included: the kernel shows them as "<path> (deleted)").
fn descriptors_below(dir: &Path) -> usize {
    let dir = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with(&dir))
        .count()
}

#[tokio::test]
async fn a_held_file_serves_byte_identical_bodies_without_being_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding(dir.path(), 16)).await;
    // One body read whole (below verify_whole_below), one streamed.
    let (small, large) = (body(3000, 1), body(300_000, 2));
    let small_path = put_and_hold(&store, "small", &small).await;
    let large_path = put_and_hold(&store, "large", &large).await;
    assert_eq!(store.stats().open_files, 2);
    // Moved away behind the store's back: a lookup that opened the file by its name
    // would find nothing, so these answers come from the held files.
    std::fs::rename(&small_path, dir.path().join("small-moved")).unwrap();
    std::fs::rename(&large_path, dir.path().join("large-moved")).unwrap();
    assert_eq!(read_whole(&store, "small").await, Some((meta(200), small)));
    assert_eq!(
        read_whole(&store, "large").await,
        Some((meta(200), large.clone()))
    );
    let found = entry(&store, "large").await;
    let range: Vec<_> = found
        .into_range_stream(70_000, 140_000)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(range.concat(), large[70_000..=140_000]);
}

#[tokio::test]
async fn removal_newer_fills_and_metadata_updates_reach_the_held_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding(dir.path(), 16)).await;
    // Removal (purge, unsafe methods) closes the held file.
    let gone = put_and_hold(&store, "gone", &body(5000, 3)).await;
    assert_eq!(descriptors_below(&gone), 1);
    assert!(store.remove("gone", Store::key_hash("gone")).await.unwrap());
    assert!(missing(&store, "gone").await);
    assert_eq!(descriptors_below(&gone), 0, "the removed file is closed");
    // A newer fill of the same key.
    let old = put_and_hold(&store, "replaced", &body(5000, 4)).await;
    put(&store, "replaced", &body(6000, 5)).await;
    assert_eq!(
        read_whole(&store, "replaced").await,
        Some((meta(200), body(6000, 5)))
    );
    assert_eq!(descriptors_below(&old), 0, "the replaced file is closed");
    // A metadata update in place (an origin's 304): the held header must not stay.
    put_and_hold(&store, "updated", &body(5000, 6)).await;
    let found = entry(&store, "updated").await;
    let refreshed = refreshed();
    assert!(store.update_meta(&found, &refreshed).await.unwrap());
    drop(found);
    for _ in 0..2 {
        assert_eq!(
            read_whole(&store, "updated").await,
            Some((refreshed.clone(), body(5000, 6)))
        );
    }
}

#[tokio::test]
async fn held_files_stay_within_their_count_and_close_when_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding(dir.path(), 4)).await;
    for i in 0..20u8 {
        put_and_hold(&store, &format!("k{i}"), &body(2000, i)).await;
        let held = store.stats().open_files;
        assert!(held <= 4, "{held} files held open after {i}");
        assert!(descriptors_below(&dir.path().join("objects")) <= 4);
    }
    // All still served, held or not.
    for i in 0..20u8 {
        let key = format!("k{i}");
        assert_eq!(
            read_whole(&store, &key).await,
            Some((meta(200), body(2000, i)))
        );
    }
    // Off: nothing is held.
    let off_dir = tempfile::tempdir().unwrap();
    let off = open_with(holding(off_dir.path(), 0)).await;
    put_and_hold(&off, "k", &body(2000, 1)).await;
    assert_eq!(off.stats().open_files, 0);
    assert_eq!(descriptors_below(&off_dir.path().join("objects")), 0);
    assert_eq!(
        read_whole(&off, "k").await,
        Some((meta(200), body(2000, 1)))
    );
}

#[tokio::test]
async fn a_held_file_cut_short_behind_the_stores_back_is_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding(dir.path(), 16)).await;
    for (key, len) in [("small", 5000), ("large", 300_000)] {
        let path = put_and_hold(&store, key, &body(len, 8)).await;
        let cut = std::fs::OpenOptions::new().write(true).open(&path);
        cut.and_then(|file| file.set_len(4000)).unwrap();
        // Read whole before the head (small) or streamed (large): either way, no
        // complete body.
        match store.lookup(key, Store::key_hash(key)).await.unwrap() {
            None => {}
            Some(found) => {
                let read: Result<Vec<_>, _> = found.into_body_stream().try_collect().await;
                let error = read.expect_err("a body cut short must not stream whole");
                assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{key}");
            }
        }
        assert!(missing(&store, key).await, "{key}");
        assert!(!path.exists(), "{key}: discarded");
        assert_eq!(descriptors_below(&path), 0, "{key}: and closed");
    }
    assert_eq!(store.stats().removed_invalid, 2);
}

#[tokio::test]
async fn a_held_file_unlinked_behind_the_stores_back_is_served_until_its_entry_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding(dir.path(), 16)).await;
    let path = put_and_hold(&store, "k", &body(5000, 7)).await;
    // As a memory copy would be: the bytes are the entry's, verified on every hit.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        read_whole(&store, "k").await,
        Some((meta(200), body(5000, 7)))
    );
    // When the entry leaves (here a purge), the file is closed and its space freed.
    assert!(store.remove("k", Store::key_hash("k")).await.is_ok());
    assert!(missing(&store, "k").await);
    assert_eq!(descriptors_below(&path), 0);
}

#[tokio::test]
async fn a_held_files_body_is_verified_on_every_hit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding(dir.path(), 16)).await;
    let path = put_and_hold(&store, "k", &body(5000, 9)).await;
    // Damaged in place after the file was held (the held header stays valid).
    let mut bytes = std::fs::read(&path).unwrap();
    let last = last_body_byte(&bytes);
    bytes[last] ^= 0x01;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut file| std::io::Write::write_all(&mut file, &bytes))
        .unwrap();
    assert!(missing(&store, "k").await, "a damaged body is a miss");
    let stats = store.stats();
    assert_eq!(stats.checksum_failures, 1, "{stats:?}");
    assert_eq!(stats.open_files, 0, "{stats:?}");
    assert!(!path.exists());
}

#[tokio::test]
async fn a_fill_replaced_while_its_lookup_reads_it_is_neither_held_nor_copied() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding_and_copying(dir.path())).await;
    put(&store, "k", &body(3000, 1)).await;
    let (inner, hash) = (&store.inner, Store::key_hash("k"));
    let fill_id = inner.index.peek(hash).unwrap().fill_id;
    // A lookup's steps, with a newer fill committed between the read and the offers.
    let epoch = inner.memory.epoch();
    let opened = inner
        .open_entry(
            "k",
            FillRef {
                key: hash,
                fill: fill_id,
            },
            None,
            64 * 1024,
        )
        .await
        .unwrap()
        .unwrap();
    let old_path = inner.object_path(FillRef {
        key: hash,
        fill: fill_id,
    });
    put(&store, "k", &body(4000, 2)).await;
    assert!(!old_path.exists(), "the replaced file is unlinked");
    let entry = inner.keep_copies(
        "k",
        FillRef {
            key: hash,
            fill: fill_id,
        },
        epoch,
        opened,
    );
    // This lookup still answers with what it read, but nothing of the old fill stays.
    assert_eq!(entry.body_in_memory().map(|b| b.len()), Some(3000));
    drop(entry);
    let stats = store.stats();
    assert_eq!(
        (stats.open_files, stats.memory_objects),
        (0, 0),
        "{stats:?}"
    );
    assert_eq!(
        descriptors_below(&old_path),
        0,
        "the unlinked file is closed"
    );
    assert_eq!(
        read_whole(&store, "k").await,
        Some((meta(200), body(4000, 2)))
    );
}

/// The metadata the updates in these tests write: a 200 with a new ETag.
fn refreshed() -> EntryMeta {
    let mut refreshed = meta(200);
    refreshed
        .response_headers
        .insert("etag", HeaderValue::from_static("\"v2\""));
    refreshed
}

#[tokio::test]
async fn a_copy_made_through_a_held_file_while_its_metadata_is_rewritten_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding_and_copying(dir.path())).await;
    put_and_hold(&store, "k", &body(3000, 1)).await;
    let (inner, hash) = (&store.inner, Store::key_hash("k"));
    let fill_id = inner.index.peek(hash).unwrap().fill_id;
    let held = inner.memory.get_open("k", hash, fill_id);
    assert!(held.is_some(), "the first lookup held the file");
    // A lookup that found no copy reads through the held file (the old metadata)...
    let opened = inner
        .open_entry(
            "k",
            FillRef {
                key: hash,
                fill: fill_id,
            },
            held,
            64 * 1024,
        )
        .await
        .unwrap()
        .unwrap();
    // ...while an origin's 304 rewrites the metadata; the lookup's epoch is the one
    // after the update's, as when it read the epoch between the update's raising it
    // and its dropping the held file.
    let found = entry(&store, "k").await;
    assert!(store.update_meta(&found, &refreshed()).await.unwrap());
    drop(found);
    let epoch = inner.memory.epoch();
    let entry = inner.keep_copies(
        "k",
        FillRef {
            key: hash,
            fill: fill_id,
        },
        epoch,
        opened,
    );
    assert_eq!(
        entry.meta.as_ref(),
        &meta(200),
        "this lookup answers what it read"
    );
    drop(entry);
    for _ in 0..2 {
        assert_eq!(
            read_whole(&store, "k").await,
            Some((refreshed(), body(3000, 1)))
        );
    }
}

#[tokio::test]
async fn a_metadata_update_nobody_waits_for_still_drops_the_held_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(holding(dir.path(), 16)).await;
    let path = put_and_hold(&store, "k", &body(5000, 1)).await;
    let (hash, found) = (Store::key_hash("k"), entry(&store, "k").await);
    let fill_id = found.fill.fill;
    let file = std::fs::File::open(&path).unwrap();
    let sequence = || {
        let header = disk::read_header_sync(
            &file,
            &path,
            FillRef {
                key: hash,
                fill: fill_id,
            },
        );
        header.map(|header| header.sequence).unwrap_or(0)
    };
    let before = sequence();
    // Polled once, so that its blocking task starts, then dropped, as when the client
    // whose request revalidated went away.
    let new_meta = refreshed();
    let _ = store.update_meta(&found, &new_meta).now_or_never();
    drop(found);
    // Wall clock: the write lands on a blocking thread the test cannot await.
    let mut waited = 0;
    while sequence() == before {
        assert!(waited < 500, "the update's write never landed");
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    for _ in 0..2 {
        assert_eq!(
            read_whole(&store, "k").await,
            Some((refreshed(), body(5000, 1)))
        );
    }
}
