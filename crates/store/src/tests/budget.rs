//! The byte budget: eviction in the index's CLOCK order, growing reservations,
//! reopening a directory that holds more than the budget.

use super::*;

#[tokio::test]
async fn fills_evict_the_oldest_entry_not_hit_to_stay_in_budget() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(StoreOptions {
        max_size: 100_000,
        ..options(dir.path())
    })
    .await;
    // Each entry is about 24.5 KB with its 2.5 KiB header: four fit, not five.
    for i in 0..4 {
        let key = format!("k{i}");
        put(&store, &key, &body(22_000, i)).await;
    }
    assert_eq!(store.stats().objects, 4);
    assert!(
        store
            .lookup("k0", Store::key_hash("k0"))
            .await
            .unwrap()
            .is_some()
    );
    put(&store, "k4", &body(22_000, 4)).await;
    // k1 is the oldest entry not hit since its fill: k0, older, was looked up.
    assert!(!store.contains(Store::key_hash("k1")));
    for key in ["k0", "k2", "k3", "k4"] {
        assert!(store.contains(Store::key_hash(key)), "{key}");
    }
    let stats = store.stats();
    assert_eq!(
        (stats.objects, stats.evictions, stats.reserved_bytes),
        (4, 1, 0)
    );
    assert_eq!(stats.bytes, object_file_bytes(dir.path()));
    assert!(stats.bytes <= 100_000);
    grow_a_chunked_reservation_within_the_budget(&store, dir.path()).await;
    refuse_more_than_the_whole_budget(&store, dir.path()).await;
}

/// The bytes of the entry files under `dir`'s `objects`.
fn object_file_bytes(dir: &Path) -> u64 {
    files(&dir.join("objects"))
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

/// Streams a 60 KB chunked body into `store` (budget 100 KB, in `dir`), checking that its
/// reservation grows as it goes, evicting as it grows, and is released at the end.
async fn grow_a_chunked_reservation_within_the_budget(store: &Store, dir: &Path) {
    // A chunked body grows its reservation as it goes, evicting as it grows.
    let mut w = store
        .begin_fill(
            "big",
            Store::key_hash("big"),
            &meta(200),
            None,
            MAX,
            store.fill_ticket(),
        )
        .await
        .unwrap();
    for chunk in body(60_000, 5).chunks(7_000) {
        w.write(chunk).await.unwrap();
        assert!(store.stats().reserved_bytes + object_file_bytes(dir) <= 100_000);
    }
    w.finish().await.unwrap();
    assert!(object_file_bytes(dir) <= 100_000);
    assert_eq!(store.stats().reserved_bytes, 0);
}

/// Checks that `store` (budget 100 KB, in `dir`) refuses a fill of the whole budget,
/// declared or streamed, and keeps no reservation or temp file of it.
async fn refuse_more_than_the_whole_budget(store: &Store, dir: &Path) {
    // More than the whole budget cannot be reserved, declared or streamed.
    let too_big = store
        .begin_fill(
            "x",
            Store::key_hash("x"),
            &meta(200),
            Some(100_000),
            MAX,
            store.fill_ticket(),
        )
        .await;
    assert!(
        matches!(too_big, Err(StoreError::NoSpace { .. })),
        "{too_big:?}"
    );
    let mut w = store
        .begin_fill(
            "x",
            Store::key_hash("x"),
            &meta(200),
            None,
            MAX,
            store.fill_ticket(),
        )
        .await
        .unwrap();
    let over = w.write(&body(100_000, 6)).await;
    assert!(matches!(over, Err(StoreError::NoSpace { .. })), "{over:?}");
    drop(w);
    assert_eq!(store.stats().reserved_bytes, 0);
    assert!(files(&dir.join("tmp")).is_empty());
}

#[tokio::test]
async fn reopen_keeps_the_budget_and_ranks_scanned_entries_oldest() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path()).await;
        for i in 0..6 {
            let key = format!("k{i}");
            put(&store, &key, &body(22_000, i)).await;
        }
    }
    // Reopened with room for four of the six: two are removed by the scan.
    let store = open_with(StoreOptions {
        max_size: 100_000,
        ..options(dir.path())
    })
    .await;
    let stats = store.stats();
    assert_eq!((stats.objects, stats.removed_invalid), (4, 0));
    assert_eq!(files(&dir.path().join("objects")).len(), 4);
    assert!(stats.bytes <= 100_000);
    // A scanned entry that is hit outranks the other scanned ones.
    let kept: Vec<String> = (0..6)
        .map(|i| format!("k{i}"))
        .filter(|k| store.contains(Store::key_hash(k)))
        .collect();
    assert!(read(&store, &kept[0]).await.is_some());
    for i in 6..9 {
        let key = format!("k{i}");
        put(&store, &key, &body(22_000, i)).await;
    }
    assert!(
        store.contains(Store::key_hash(&kept[0])),
        "the hit entry survives"
    );
    for key in &kept[1..] {
        assert!(
            !store.contains(Store::key_hash(key)),
            "{key} is evicted first"
        );
    }
}

#[tokio::test]
async fn after_a_reopen_entries_hit_since_their_fill_outlive_the_others() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path()).await;
        for i in 0..4 {
            put(&store, &format!("s{i}"), &body(22_000, i)).await;
        }
        // Hits before the restart are not kept: the scan cannot know them.
        assert!(read(&store, "s0").await.is_some());
    }
    // Room for four entries of about 24.5 KB: the four scanned ones.
    let store = open_with(StoreOptions {
        max_size: 100_000,
        ..options(dir.path())
    })
    .await;
    assert_eq!(store.stats().objects, 4);
    // Two fresh fills evict two scanned entries (none was hit since the start).
    put(&store, "k6", &body(22_000, 6)).await;
    put(&store, "k7", &body(22_000, 7)).await;
    let scanned: Vec<String> = (0..4)
        .map(|i| format!("s{i}"))
        .filter(|k| store.contains(Store::key_hash(k)))
        .collect();
    assert_eq!(scanned.len(), 2, "{scanned:?}");
    // Hit k6 and both scanned survivors, not k7: the next fill evicts k7, though it
    // is the newest entry (LRU would have evicted the oldest, a scanned one).
    for key in scanned.iter().map(String::as_str).chain(["k6"]) {
        assert!(read(&store, key).await.is_some(), "{key}");
    }
    put(&store, "k8", &body(22_000, 8)).await;
    assert!(!store.contains(Store::key_hash("k7")));
    for key in scanned.iter().map(String::as_str).chain(["k6", "k8"]) {
        assert!(store.contains(Store::key_hash(key)), "{key}");
    }
    let stats = store.stats();
    assert_eq!((stats.objects, stats.evictions), (4, 3));
    assert!(stats.bytes <= 100_000);
}

#[tokio::test]
async fn evictions_leave_their_directories_on_a_disk_with_inodes_to_spare() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(StoreOptions {
        max_size: 100_000,
        ..options(dir.path())
    })
    .await;
    // Each entry is about 24.5 KB with its header: the fifth evicts the first.
    for i in 0..4 {
        put(&store, &format!("k{i}"), &body(22_000, i)).await;
    }
    let objects = dir.path().join("objects");
    let dirs: Vec<PathBuf> = (files(&objects).iter())
        .map(|file| file.parent().unwrap().to_owned())
        .collect();
    put(&store, "k4", &body(22_000, 4)).await;
    assert_eq!(store.stats().evictions, 1);
    assert_eq!(files(&objects).len(), 4);
    for dir in &dirs {
        assert!(
            dir.is_dir(),
            "{} is kept for the next fill into it",
            dir.display()
        );
    }
}

/// A store of 100 KB budget in `dir` syncing as `fsync` says, with eight entries of
/// 7,000 bytes of body (k0, the oldest, to k7) and room for fewer than five more.
async fn eight_small_entries(dir: &Path, fsync: Fsync) -> Store {
    let store = open_with(StoreOptions {
        max_size: 100_000,
        fsync,
        ..options(dir)
    })
    .await;
    for i in 0..8u8 {
        put(&store, &format!("k{i}"), &body(7_000, i)).await;
    }
    store
}

/// Begins a fill of a 40,000-byte body under `key`: several small entries must go first.
async fn begin_big(store: &Store, key: &str) -> Result<EntryWriter, StoreError> {
    let hash = Store::key_hash(key);
    let meta = meta(200);
    (store.begin_fill(key, hash, &meta, Some(40_000), MAX, store.fill_ticket())).await
}

#[tokio::test]
async fn a_fill_that_needs_several_victims_has_their_files_gone_before_it_begins() {
    let dir = tempfile::tempdir().unwrap();
    // The victims take more than a sixteenth of the 100 KB budget, so they are unlinked
    // before the fill begins. No fsync: on this thread, as the fills' own calls are.
    let store = eight_small_entries(dir.path(), Fsync::Off).await;
    let calls = store.stats().fill_calls;
    let mut writer = begin_big(&store, "big").await.unwrap();
    let stats = store.stats();
    let evicted = stats.evictions as usize;
    assert!(
        evicted >= 2,
        "a 40 KB fill takes several 9.6 KB entries: {evicted}"
    );
    for i in 0..8 {
        let kept = store.contains(Store::key_hash(&format!("k{i}")));
        assert_eq!(kept, i >= evicted, "the oldest go first: k{i}");
    }
    // The files are gone before the bytes count as free, and the unlinks are not
    // counted as the fill's own calls (one: the create).
    assert_eq!(files(&dir.path().join("objects")).len(), 8 - evicted);
    assert_eq!(stats.bytes, object_file_bytes(dir.path()));
    let (now, before) = (stats.fill_calls, calls);
    assert_eq!(now.worker + now.pool, before.worker + before.pool + 1);
    writer.write(&body(40_000, 9)).await.unwrap();
    writer.finish().await.unwrap();
    let stats = store.stats();
    assert_eq!(
        (stats.reserved_bytes, stats.bytes),
        (0, object_file_bytes(dir.path()))
    );
    assert!(stats.bytes <= 100_000);
}

#[tokio::test]
async fn a_fill_dropped_while_its_victims_are_unlinked_leaves_the_budget_true() {
    let dir = tempfile::tempdir().unwrap();
    // fsync per fill: every file call, the victims' unlinks too, goes to the blocking
    // pool, so the fill waits for them there.
    let store = eight_small_entries(dir.path(), Fsync::EachFill).await;
    let mut begin = Box::pin(begin_big(&store, "big"));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    // Its client leaves while the fill waits: the future is dropped.
    if let std::task::Poll::Ready(writer) = begin.as_mut().poll(&mut cx) {
        drop(writer);
    }
    drop(begin);
    // The pool finishes the unlinks on its own: wait for the files to match the index.
    let objects = dir.path().join("objects");
    for _ in 0..500 {
        if files(&objects).len() as u64 == store.stats().objects {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = store.stats();
    assert!(stats.evictions >= 2, "{}", stats.evictions);
    assert_eq!(files(&objects).len() as u64, stats.objects);
    assert_eq!(
        (stats.reserved_bytes, stats.bytes),
        (0, object_file_bytes(dir.path())),
        "no bytes held for files gone or for the dropped fill"
    );
    // The budget has its room back: a fill of the same size begins and commits.
    let mut writer = begin_big(&store, "big").await.unwrap();
    writer.write(&body(40_000, 9)).await.unwrap();
    writer.finish().await.unwrap();
    assert!(store.contains(Store::key_hash("big")));
}

/// A runtime with one blocking thread, for a test that holds it ([`hold_the_pool`]).
fn runtime_of_one_blocking_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .unwrap()
}

/// Occupies the blocking pool's one thread until the sender is used or dropped; the
/// handle ends after that.
async fn hold_the_pool() -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (started, running) = tokio::sync::oneshot::channel();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let blocker = tokio::task::spawn_blocking(move || {
        let _ = started.send(());
        let _ = held.recv();
    });
    running.await.unwrap();
    (release, blocker)
}

/// A store of 1 MB budget in `dir`, without fsync, filled with entries of 7,000 bytes of
/// body (k0, the oldest, first) until less than 40 KB is left; and their number.
async fn nearly_full(dir: &Path) -> (Store, usize) {
    let store = open_with(StoreOptions {
        max_size: 1_000_000,
        fsync: Fsync::Off,
        ..options(dir)
    })
    .await;
    // About 9.6 KB each with the header.
    let mut kept = 0;
    while store.stats().bytes < 960_000 {
        put(&store, &format!("k{kept}"), &body(7_000, kept)).await;
        kept += 1;
    }
    assert_eq!(store.stats().evictions, 0);
    (store, usize::from(kept))
}

/// A fill begun in a [`nearly_full`] store while the blocking pool is held.
struct Held {
    dir: tempfile::TempDir,
    store: Store,
    /// The entries before the fill.
    kept: usize,
    /// Lets the pool go.
    release: std::sync::mpsc::Sender<()>,
    blocker: tokio::task::JoinHandle<()>,
    writer: EntryWriter,
}

/// Begins a fill of 40,000 bytes in a [`nearly_full`] store, which evicts k0, while the
/// blocking pool's one thread is held: k0's unlink waits behind it, the fill does not.
async fn big_fill_with_the_pool_held() -> Held {
    let dir = tempfile::tempdir().unwrap();
    let (store, kept) = nearly_full(dir.path()).await;
    let (release, blocker) = hold_the_pool().await;
    let writer = begin_big(&store, "big").await.unwrap();
    Held {
        dir,
        store,
        kept,
        release,
        blocker,
        writer,
    }
}

#[test]
fn a_fill_whose_victims_fit_in_a_sixteenth_of_the_budget_begins_before_their_files_go() {
    runtime_of_one_blocking_thread().block_on(async {
        let Held {
            dir,
            store,
            kept,
            release,
            blocker,
            mut writer,
        } = big_fill_with_the_pool_held().await;
        let objects = dir.path().join("objects");
        let stats = store.stats();
        assert_eq!(stats.evictions, 1);
        assert!(
            !store.contains(Store::key_hash("k0")),
            "k0 is out of the index"
        );
        assert_eq!(files(&objects).len(), kept, "k0's file is still there");
        assert_eq!(stats.bytes, object_file_bytes(dir.path()), "and counted");

        release.send(()).unwrap();
        blocker.await.unwrap();
        store.unlinks_done().await;
        assert_eq!(files(&objects).len(), kept - 1);
        assert_eq!(store.stats().bytes, object_file_bytes(dir.path()));
        writer.write(&body(40_000, 9)).await.unwrap();
        writer.finish().await.unwrap();
        let stats = store.stats();
        assert_eq!(
            (stats.reserved_bytes, stats.bytes),
            (0, object_file_bytes(dir.path()))
        );
        assert!(stats.bytes <= 1_000_000);
    });
}

#[test]
fn a_hand_over_waits_for_the_unlinks_behind_a_fill() {
    runtime_of_one_blocking_thread().block_on(async {
        let Held {
            dir,
            store,
            kept,
            release,
            blocker,
            mut writer,
        } = big_fill_with_the_pool_held().await;
        let objects = dir.path().join("objects");
        writer.write(&body(40_000, 9)).await.unwrap();
        writer.finish().await.unwrap();

        assert!(
            store.inner.gate.stepped(),
            "k0's unlink holds a step of the gate"
        );
        let mut close = Box::pin(store.close_for_handover(Duration::from_secs(2)));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(
            close.as_mut().poll(&mut cx).is_pending(),
            "the hand-over waits while k0's unlink cannot run"
        );
        assert_eq!(files(&objects).len(), kept + 1);
        release.send(()).unwrap();
        blocker.await.unwrap();
        close.await.unwrap();
        // The next owner finds k0's file gone.
        assert_eq!(files(&objects).len(), kept);
        assert!(files(&objects).iter().all(|f| {
            !f.to_string_lossy()
                .contains(&format!("{:032x}", Store::key_hash("k0")))
        }));
    });
}

#[test]
fn a_purge_answers_once_the_files_of_entries_evicted_before_it_are_gone() {
    runtime_of_one_blocking_thread().block_on(async {
        let Held {
            dir,
            store,
            kept,
            release,
            blocker,
            writer,
        } = big_fill_with_the_pool_held().await;
        let objects = dir.path().join("objects");
        // k0 left the index for the fill, and its file waits to be unlinked.
        let selector = PurgeSelector::Url("k0".to_owned());
        let mut purge = Box::pin(store.purge(&selector, PurgeMode::Remove));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(
            purge.as_mut().poll(&mut cx).is_pending(),
            "the purge waits while k0's file is there"
        );
        assert_eq!(files(&objects).len(), kept);
        release.send(()).unwrap();
        blocker.await.unwrap();
        assert_eq!(purge.await.unwrap(), 0, "k0 was no longer indexed");
        assert_eq!(files(&objects).len(), kept - 1, "k0's file is gone");
        drop(writer);
    });
}

#[test]
fn a_removal_answers_once_the_file_of_its_key_evicted_before_it_is_gone() {
    runtime_of_one_blocking_thread().block_on(async {
        let Held {
            dir,
            store,
            kept,
            release,
            blocker,
            writer,
        } = big_fill_with_the_pool_held().await;
        let objects = dir.path().join("objects");
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let absent = store.remove("absent", Store::key_hash("absent"));
        assert!(
            matches!(
                Box::pin(absent).as_mut().poll(&mut cx),
                std::task::Poll::Ready(Ok(false))
            ),
            "a key with no file behind does not wait"
        );
        // k0 left the index for the fill, and its file waits to be unlinked.
        let mut remove = Box::pin(store.remove("k0", Store::key_hash("k0")));
        assert!(
            remove.as_mut().poll(&mut cx).is_pending(),
            "the removal waits while k0's file is there"
        );
        assert_eq!(files(&objects).len(), kept);
        release.send(()).unwrap();
        blocker.await.unwrap();
        assert!(!remove.await.unwrap(), "k0 was no longer indexed");
        assert_eq!(files(&objects).len(), kept - 1, "k0's file is gone");
        drop(writer);
    });
}
