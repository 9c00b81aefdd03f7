//! Store tests on real files in temporary directories: fills, lookups, races
//! between fills, the directory lock. The byte budget, damaged files, range
//! reads and their blocks, removals and metadata updates have their own files
//! beside this one.

mod blocks;
mod budget;
mod damage;
mod handover;
mod layout;
mod memory;
mod open_files;
mod purge_log;
mod range;
mod remove;
mod update;
mod whole;

use std::io;
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode};

use super::read::BODY_CHUNK;
use super::*;

const MAX: u64 = 1 << 20;

fn options(dir: &Path) -> StoreOptions {
    StoreOptions {
        dir: dir.to_owned(),
        fsync: Fsync::EachFill,
        max_size: 64 * MAX,
        lock_timeout: Duration::from_secs(5),
        verify_whole_below: 64 * 1024,
        // Off: these tests are about the files; the memory tier has tests of its own.
        memory_size: 0,
        memory_max_object_size: 0,
        // On, as by default: every test of the files also reads through held files.
        open_files: 16,
        // Off: these tests are about the budget; the floor has tests of its own.
        min_free: 0,
        tag_memory: u64::MAX,
        max_write_rate: 0,
    }
}

/// Opens a store and waits for its background scan to finish.
async fn open_with(opts: StoreOptions) -> Store {
    let store = Store::open(opts).unwrap();
    wait_for_scan(&store).await;
    store
}

/// Waits for the background scan of `store` to finish, on the wall clock: the scan runs on
/// a thread of its own.
async fn wait_for_scan(store: &Store) {
    for _ in 0..1000 {
        if store.stats().scan_complete {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the scan did not finish");
}

async fn open(dir: &Path) -> Store {
    open_with(options(dir)).await
}

fn meta(status: u16) -> EntryMeta {
    let mut response_headers = HeaderMap::new();
    response_headers.append("content-type", HeaderValue::from_static("text/plain"));
    response_headers.append("x-dup", HeaderValue::from_static("1"));
    response_headers.append("x-dup", HeaderValue::from_static("2"));
    EntryMeta {
        request_time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_000),
        response_time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_250),
        status: StatusCode::from_u16(status).unwrap(),
        response_headers,
        request_headers: HeaderMap::new(),
        tags: Vec::new(),
        purged: None,
    }
}

fn body(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Every file below `dir`, recursively, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for item in std::fs::read_dir(dir).unwrap() {
        let path = item.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Entry and temp files: everything but the lock file and `state/`.
fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut all = files(&dir.join("objects"));
    all.extend(files(&dir.join("tmp")));
    all
}

/// Options without fsync, so that a setup is quick and what follows races the scan.
fn quick_options(dir: &Path) -> StoreOptions {
    StoreOptions {
        fsync: Fsync::Off,
        ..options(dir)
    }
}

/// Stores `keys` entries `k0`, `k1`, … of 100 bytes in `dir` and closes the store.
async fn put_many_quickly(dir: &Path, keys: usize) {
    let store = open_with(quick_options(dir)).await;
    for i in 0..keys {
        put(&store, &format!("k{i}"), &body(100, i as u8)).await;
    }
}

/// The names of the files of `hash` in the directory of `any` (a path in it).
fn key_files_beside(any: &Path, hash: StoreHash) -> Vec<String> {
    let prefix = format!("{hash:032x}-");
    std::fs::read_dir(any.parent().unwrap())
        .into_iter()
        .flatten()
        .filter_map(|item| item.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

/// Where a layout keeps a fill: `disk::object_path` or `disk::legacy_object_path`.
type Layout = fn(&Path, FillRef) -> PathBuf;

/// Opens the store in `dir` (holding `k0`, `k1`, … up to `keys`) and removes each key
/// while the start-up scan runs, checking as each `remove` returns that no file of the
/// key is left where any of `layouts` keeps it; then, after a crash-like drop, that a
/// new store finds nothing.
async fn remove_each_during_the_scan(dir: &Path, keys: usize, layouts: &[Layout]) {
    let store = Store::open(quick_options(dir)).unwrap();
    let objects = dir.join("objects");
    let mut during_scan = 0;
    for i in 0..keys {
        let key = format!("k{i}");
        let hash = Store::key_hash(&key);
        during_scan += usize::from(!store.stats().scan_complete);
        // Its answer may be false if the scan itself unlinked the file first.
        store.remove(&key, hash).await.unwrap();
        for layout in layouts {
            let any_fill = FillRef {
                key: hash,
                fill: FillId(0),
            };
            let left = key_files_beside(&layout(&objects, any_fill), hash);
            assert!(left.is_empty(), "{key} still on disk: {left:?}");
        }
    }
    eprintln!("{during_scan} of {keys} removals ran while the scan had not finished");
    // Dropping the store stops the scan, as a crash would: nothing comes back.
    drop(store);
    let store = open(dir).await;
    assert_eq!(store.stats().objects, 0);
    assert!(cache_files(dir).is_empty());
}

async fn fill(store: &Store, key: &str, status: u16, data: &[u8]) -> EntryWriter {
    let hash = Store::key_hash(key);
    let len = Some(data.len() as u64);
    let mut w = store
        .begin_fill(key, hash, &meta(status), len, MAX, store.fill_ticket())
        .await
        .unwrap();
    // Uneven chunks, so chunk boundaries on write and read differ.
    for chunk in data.chunks(10_007) {
        w.write(chunk).await.unwrap();
    }
    w
}

/// Stores `data` under `key` as a 200.
async fn put(store: &Store, key: &str, data: &[u8]) {
    fill(store, key, 200, data).await.finish().await.unwrap();
}

/// Looks `key` up; it must be there.
async fn entry(store: &Store, key: &str) -> StoredEntry {
    let found = store.lookup(key, Store::key_hash(key)).await.unwrap();
    found.unwrap_or_else(|| panic!("{key} is not stored"))
}

/// The offset of the last body byte in `file`, the bytes of an entry file (the block
/// table follows the body).
fn last_body_byte(file: &[u8]) -> usize {
    let preamble = entry::decode_preamble(file).unwrap();
    usize::try_from(preamble.header_len() + preamble.body_len).unwrap() - 1
}

/// The file `entry` was read from.
fn entry_path(store: &Store, entry: &StoredEntry) -> PathBuf {
    store.inner.object_path(entry.fill)
}

/// True if a lookup of `key` misses.
async fn missing(store: &Store, key: &str) -> bool {
    let found = store.lookup(key, Store::key_hash(key)).await.unwrap();
    found.is_none()
}

/// A store in a fresh directory holding `data` under "k", with k's entry and
/// the path of its file.
async fn stored_k(data: &[u8]) -> (tempfile::TempDir, Store, StoredEntry, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "k", data).await;
    let found = entry(&store, "k").await;
    let path = entry_path(&store, &found);
    (dir, store, found, path)
}

/// Looks `key` up and collects its body.
async fn read(store: &Store, key: &str) -> Option<(EntryMeta, Vec<u8>)> {
    let entry = store.lookup(key, Store::key_hash(key)).await.unwrap()?;
    let (meta, len) = (EntryMeta::clone(&entry.meta), entry.body_len);
    let mut out = Vec::new();
    let mut stream = std::pin::pin!(entry.into_body_stream());
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        assert!(chunk.len() as u64 <= BODY_CHUNK);
        out.extend_from_slice(&chunk);
    }
    assert_eq!(out.len() as u64, len);
    Some((meta, out))
}

#[tokio::test]
async fn a_batched_sync_runs_only_after_a_change_and_once_for_many() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(StoreOptions {
        fsync: Fsync::Every(Duration::from_secs(3600)),
        ..options(dir.path())
    })
    .await;
    assert_eq!(store.sync_interval(), Some(Duration::from_secs(3600)));
    assert!(!store.sync().await.unwrap(), "nothing changed yet");
    put(&store, "k1", &body(100, 1)).await;
    put(&store, "k2", &body(100, 2)).await;
    assert!(store.sync().await.unwrap(), "two fills, one sync");
    assert!(!store.sync().await.unwrap(), "nothing changed since");
    assert!(store.remove("k1", Store::key_hash("k1")).await.unwrap());
    assert!(store.sync().await.unwrap(), "a removal is a change too");
    assert_eq!(store.stats().syncs, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_use_the_blocking_pool_while_a_sync_runs() {
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        open_with(StoreOptions {
            fsync: Fsync::Every(Duration::from_secs(3600)),
            ..options(dir.path())
        })
        .await,
    );
    // A thread watching the gate while syncs run: a sync is short, so a few rounds may
    // pass before the watcher looks during one.
    let (closed_seen, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let watcher = std::thread::spawn({
        let (store, closed_seen, stop) = (store.clone(), closed_seen.clone(), stop.clone());
        move || {
            while !stop.load(Ordering::Relaxed) {
                if !store.inner.inline_io.open_at(std::time::Instant::now()) {
                    closed_seen.store(true, Ordering::Relaxed);
                }
            }
        }
    });
    for round in 0..1000 {
        put(&store, &format!("k{round}"), &body(100, 1)).await;
        assert!(store.sync().await.unwrap());
        if closed_seen.load(Ordering::Relaxed) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(
        closed_seen.load(Ordering::Relaxed),
        "the gate closed while a sync ran"
    );
    assert!(
        store.inner.inline_io.open_at(std::time::Instant::now()),
        "and opened again once it returned"
    );
}

#[tokio::test]
async fn fsync_per_fill_or_none_makes_no_batched_sync() {
    for fsync in [Fsync::EachFill, Fsync::Off] {
        let dir = tempfile::tempdir().unwrap();
        let store = open_with(StoreOptions {
            fsync,
            ..options(dir.path())
        })
        .await;
        assert_eq!(store.sync_interval(), None);
        put(&store, "k", &body(100, 1)).await;
        assert!(!store.sync().await.unwrap(), "{fsync:?}");
    }
}

#[tokio::test]
async fn fill_finish_lookup_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(200_000, 7);
    assert!(read(&store, "k").await.is_none());
    put(&store, "k", &data).await;
    assert_eq!(store.stats().committed_fills, 1);
    assert!(store.contains(Store::key_hash("k")));
    assert_eq!(read(&store, "k").await.unwrap(), (meta(200), data));
    assert_eq!(files(&dir.path().join("tmp")), Vec::<PathBuf>::new());
    let objects = files(&dir.path().join("objects"));
    assert_eq!(objects.len(), 1);
    let name = format!("{:032x}", Store::key_hash("k"));
    let rel = objects[0].strip_prefix(dir.path().join("objects")).unwrap();
    assert!(rel.starts_with(Path::new(&name[0..1]).join(&name[1..3])));
    // An empty body is an entry too.
    fill(&store, "empty", 204, b"")
        .await
        .finish()
        .await
        .unwrap();
    assert_eq!(read(&store, "empty").await.unwrap(), (meta(204), vec![]));
}

#[tokio::test]
async fn dropped_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let w = fill(&store, "k", 200, &body(50_000, 1)).await;
    assert_eq!(files(&dir.path().join("tmp")).len(), 1);
    drop(w);
    assert!(files(&dir.path().join("tmp")).is_empty());
    assert!(files(&dir.path().join("objects")).is_empty());
    assert!(!store.contains(Store::key_hash("k")));
}

#[tokio::test]
async fn length_mismatch_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let hash = Store::key_hash("k");
    let mut w = store
        .begin_fill("k", hash, &meta(200), Some(100), MAX, store.fill_ticket())
        .await
        .unwrap();
    w.write(&[1; 60]).await.unwrap();
    let err = w.finish().await.unwrap_err();
    assert!(matches!(
        err,
        StoreError::LengthMismatch {
            declared: 100,
            received: 60
        }
    ));
    assert!(cache_files(dir.path()).is_empty());
    assert!(store.lookup("k", hash).await.unwrap().is_none());
    assert_eq!(store.stats().committed_fills, 0);
    // The failed commit counts the fill as dropped: the origin sent less than it declared.
    let dropped = store.stats().dropped_fills;
    assert_eq!(
        (dropped.get(FillDrop::OriginError), dropped.total()),
        (1, 1)
    );
}

#[tokio::test]
async fn too_large_declared_or_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let hash = Store::key_hash("k");
    let declared = store
        .begin_fill(
            "k",
            hash,
            &meta(200),
            Some(MAX + 1),
            MAX,
            store.fill_ticket(),
        )
        .await;
    assert!(matches!(declared, Err(StoreError::TooLarge { limit: MAX })));
    // No declared length: the limit is the fill's max_len.
    let mut w = store
        .begin_fill("k", hash, &meta(200), None, MAX, store.fill_ticket())
        .await
        .unwrap();
    w.write(&vec![0; MAX as usize]).await.unwrap();
    let over = w.write(&[0]).await;
    assert!(matches!(over, Err(StoreError::TooLarge { limit: MAX })));
    drop(w);
    // A declared length is a limit too.
    let mut w = store
        .begin_fill("k", hash, &meta(200), Some(10), MAX, store.fill_ticket())
        .await
        .unwrap();
    let over = w.write(&[0; 11]).await;
    assert!(matches!(over, Err(StoreError::TooLarge { limit: 10 })));
    drop(w);
    assert!(cache_files(dir.path()).is_empty());
}

#[tokio::test]
async fn credentials_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let mut m = meta(200);
    m.request_headers
        .append("cookie", HeaderValue::from_static("session=1"));
    let r = store
        .begin_fill(
            "k",
            Store::key_hash("k"),
            &m,
            None,
            MAX,
            store.fill_ticket(),
        )
        .await;
    assert!(matches!(r, Err(StoreError::Credentials)));
    assert!(cache_files(dir.path()).is_empty());
}

#[tokio::test]
async fn different_key_on_the_same_hash_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "a", b"AAA").await;
    let hash = Store::key_hash("a");
    assert!(store.lookup("b", hash).await.unwrap().is_none());
    // The entry itself is untouched.
    assert_eq!(read(&store, "a").await.unwrap().1, b"AAA");
}

#[tokio::test]
async fn reopen_finds_entries_and_clears_tmp() {
    let dir = tempfile::tempdir().unwrap();
    let data = body(70_000, 3);
    {
        let store = open(dir.path()).await;
        put(&store, "k", &data).await;
    }
    // A fill cut short by a crash: its writer never ran Drop.
    let cut = FillRef {
        key: Store::key_hash("cut"),
        fill: FillId(1),
    };
    let cut = disk::tmp_path(&dir.path().join("tmp"), cut);
    std::fs::write(cut, b"partial").unwrap();
    std::fs::create_dir(dir.path().join("tmp/stray-dir")).unwrap();
    std::fs::write(dir.path().join("tmp/stray-dir/x"), b"x").unwrap();
    assert_eq!(files(&dir.path().join("tmp")).len(), 2);
    let store = open(dir.path()).await;
    assert!(
        std::fs::read_dir(dir.path().join("tmp"))
            .unwrap()
            .next()
            .is_none()
    );
    assert_eq!(read(&store, "k").await.unwrap(), (meta(200), data));
    assert!(!store.contains(Store::key_hash("cut")));
    // Fill ids keep increasing: a fill after the restart replaces the old one.
    fill(&store, "k", 201, b"new").await.finish().await.unwrap();
    assert_eq!(
        read(&store, "k").await.unwrap(),
        (meta(201), b"new".to_vec())
    );
    assert_eq!(files(&dir.path().join("objects")).len(), 1);
}

/// The store remembers which `objects/a/bc/` directories exist; if something else
/// removes one, the next fill there still commits (it makes the directory again), and
/// the entry reads back.
#[tokio::test]
async fn a_fill_into_a_removed_entry_directory_makes_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "k", &body(1000, 1)).await;
    let leaf = entry_path(&store, &entry(&store, "k").await)
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::remove_dir_all(&leaf).unwrap();
    put(&store, "k", &body(1000, 2)).await;
    assert!(leaf.is_dir());
    assert_eq!(read(&store, "k").await.unwrap().1, body(1000, 2));
}

#[tokio::test]
async fn newer_fill_replaces_older() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let older = fill(&store, "k", 200, b"old").await;
    let newer = fill(&store, "k", 201, b"new").await;
    older.finish().await.unwrap();
    let old_files = files(&dir.path().join("objects"));
    newer.finish().await.unwrap();
    assert_eq!(
        read(&store, "k").await.unwrap(),
        (meta(201), b"new".to_vec())
    );
    let now = files(&dir.path().join("objects"));
    assert_eq!(now.len(), 1);
    assert!(!old_files[0].exists());
    assert_eq!(store.stats().committed_fills, 2);
}

#[tokio::test]
async fn older_fill_finishing_late_loses() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let older = fill(&store, "k", 200, b"old").await;
    let newer = fill(&store, "k", 201, b"new").await;
    newer.finish().await.unwrap();
    let kept = files(&dir.path().join("objects"));
    older.finish().await.unwrap();
    assert_eq!(
        read(&store, "k").await.unwrap(),
        (meta(201), b"new".to_vec())
    );
    assert_eq!(files(&dir.path().join("objects")), kept);
    assert!(files(&dir.path().join("tmp")).is_empty());
    assert_eq!(store.stats().committed_fills, 1);
}

/// The proxy spawns these futures and streams onto a multi-threaded runtime.
#[tokio::test]
async fn futures_and_streams_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    assert_send(&store.lookup("k", StoreHash(1)));
    let m = meta(200);
    let begin = store.begin_fill(
        "k",
        Store::key_hash("k"),
        &m,
        None,
        MAX,
        store.fill_ticket(),
    );
    assert_send(&begin);
    let mut w = begin.await.unwrap();
    assert_send(&w.write(b"x"));
    let finish = w.finish();
    assert_send(&finish);
    finish.await.unwrap();
    let entry = store
        .lookup("k", Store::key_hash("k"))
        .await
        .unwrap()
        .unwrap();
    assert_send(&entry.into_body_stream());
}

#[tokio::test]
async fn tmp_on_another_filesystem_is_refused() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    // /dev/shm is a tmpfs of its own on Linux: another filesystem than the temp dir.
    let elsewhere = tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm");
    let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
    assert_ne!(
        dev(elsewhere.path()),
        dev(dir.path()),
        "this test needs the temp dir (TMPDIR) outside /dev/shm"
    );
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("tmp")).unwrap();
    std::fs::write(elsewhere.path().join("keep"), b"x").unwrap();
    let err = Store::open(options(dir.path())).unwrap_err();
    assert!(matches!(err, StoreError::CrossDevice { .. }), "{err}");
    let shown = err.to_string();
    assert!(shown.contains("different filesystems"), "{shown}");
    assert!(shown.contains(&dir.path().join("objects").display().to_string()));
    // Refused before anything in tmp/ was touched.
    assert!(elsewhere.path().join("keep").exists());
}

#[tokio::test]
async fn a_second_open_of_the_directory_fails_while_the_first_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path()).await;
    let err = Store::open(StoreOptions {
        lock_timeout: Duration::from_millis(100),
        ..options(dir.path())
    })
    .unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    drop(first);
    open(dir.path()).await;
}

#[tokio::test]
async fn a_file_call_that_panics_fails_as_an_io_error_on_the_worker_as_on_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    // Batched syncs, as by default: with a sync per fill no call runs on the worker.
    let store = open_with(StoreOptions {
        fsync: Fsync::Every(Duration::from_secs(3600)),
        ..options(dir.path())
    })
    .await;
    let path = dir.path().join("tmp").join("panicking");
    let panicking = || -> Result<(), StoreError> { panic!("a file call's bug") };
    assert!(store.inner.inline_io.open_at(std::time::Instant::now()));
    let on_worker = store.inner.fill_io(&path, panicking).await;
    let now = std::time::Instant::now();
    let slow = super::inline_io::STALL_BUDGET * 2;
    store.inner.inline_io.ran(now - slow, now, || true);
    assert!(!store.inner.inline_io.open_at(std::time::Instant::now()));
    let on_pool = store.inner.fill_io(&path, panicking).await;
    for (place, result) in [("worker", on_worker), ("pool", on_pool)] {
        match result {
            Err(StoreError::Io { path: at, source }) => {
                assert_eq!(at, path, "{place}");
                assert!(
                    source.to_string().contains("a file call's bug"),
                    "{place}: {source}"
                );
            }
            other => panic!("on the {place}: {other:?}"),
        }
    }
    put(&store, "after", b"still fills").await;
    assert_eq!(store.stats().committed_fills, 1);
}

#[tokio::test]
async fn after_a_slow_file_call_fills_commit_through_the_blocking_pool() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "on-worker", b"first").await;
    // A call that slept past the stall budget closes the gate: the next fill's calls use
    // the pool.
    let now = std::time::Instant::now();
    let slow = super::inline_io::STALL_BUDGET * 2;
    store.inner.inline_io.ran(now - slow, now, || true);
    assert!(!store.inner.inline_io.open_at(std::time::Instant::now()));
    put(&store, "on-pool", b"second").await;
    for (key, body) in [("on-worker", &b"first"[..]), ("on-pool", &b"second"[..])] {
        let stored = entry(&store, key).await;
        let read: Vec<u8> = stored
            .into_body_stream()
            .map(|chunk| chunk.unwrap().to_vec())
            .concat()
            .await;
        assert_eq!(read, body, "{key}");
    }
}
