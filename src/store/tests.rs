//! Store tests on real files in temporary directories.

use std::time::Duration;

use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode};

use super::read::BODY_CHUNK;
use super::*;

const MAX: u64 = 1 << 20;

fn options(dir: &Path) -> StoreOptions {
    StoreOptions {
        dir: dir.to_owned(),
        fsync: true,
        max_object_size: MAX,
        max_size: 64 * MAX,
        lock_timeout: Duration::from_secs(5),
        verify_whole_below: 64 * 1024,
    }
}

/// Opens a store and waits for its background scan to finish.
async fn open_with(opts: StoreOptions) -> Store {
    let store = Store::open(opts).unwrap();
    for _ in 0..1000 {
        if store.stats().scan_complete {
            return store;
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

async fn fill(store: &Store, key: &str, status: u16, data: &[u8]) -> EntryWriter {
    let hash = Store::key_hash(key);
    let len = Some(data.len() as u64);
    let mut w = store
        .begin_fill(key, hash, &meta(status), len)
        .await
        .unwrap();
    // Uneven chunks, so chunk boundaries on write and read differ.
    for chunk in data.chunks(10_007) {
        w.write(chunk).await.unwrap();
    }
    w
}

/// Looks `key` up and collects its body.
async fn read(store: &Store, key: &str) -> Option<(EntryMeta, Vec<u8>)> {
    let entry = store.lookup(key, Store::key_hash(key)).await.unwrap()?;
    let (meta, len) = (entry.meta.clone(), entry.body_len);
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
async fn fill_finish_lookup_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(200_000, 7);
    assert!(read(&store, "k").await.is_none());
    fill(&store, "k", 200, &data).await.finish().await.unwrap();
    assert_eq!(store.committed_fills(), 1);
    assert!(store.contains(Store::key_hash("k")));
    assert_eq!(read(&store, "k").await.unwrap(), (meta(200), data));
    assert_eq!(files(&dir.path().join("tmp")), Vec::<PathBuf>::new());
    let objects = files(&dir.path().join("objects"));
    assert_eq!(objects.len(), 1);
    let name = format!("{:032x}", Store::key_hash("k"));
    let rel = objects[0].strip_prefix(dir.path().join("objects")).unwrap();
    assert!(rel.starts_with(Path::new(&name[0..2]).join(&name[2..4])));
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
        .begin_fill("k", hash, &meta(200), Some(100))
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
    assert_eq!(store.committed_fills(), 0);
}

#[tokio::test]
async fn too_large_declared_or_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let hash = Store::key_hash("k");
    let declared = store.begin_fill("k", hash, &meta(200), Some(MAX + 1)).await;
    assert!(matches!(declared, Err(StoreError::TooLarge { limit: MAX })));
    // No declared length: the limit is max_object_size.
    let mut w = store.begin_fill("k", hash, &meta(200), None).await.unwrap();
    w.write(&vec![0; MAX as usize]).await.unwrap();
    let over = w.write(&[0]).await;
    assert!(matches!(over, Err(StoreError::TooLarge { limit: MAX })));
    drop(w);
    // A declared length is a limit too.
    let mut w = store
        .begin_fill("k", hash, &meta(200), Some(10))
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
    let r = store.begin_fill("k", Store::key_hash("k"), &m, None).await;
    assert!(matches!(r, Err(StoreError::Credentials)));
    assert!(cache_files(dir.path()).is_empty());
}

#[tokio::test]
async fn different_key_on_the_same_hash_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    fill(&store, "a", 200, b"AAA").await.finish().await.unwrap();
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
        fill(&store, "k", 200, &data).await.finish().await.unwrap();
    }
    // A fill cut short by a crash: its writer never ran Drop.
    let cut = disk::tmp_path(&dir.path().join("tmp"), Store::key_hash("cut"), 1);
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
    assert_eq!(store.committed_fills(), 2);
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
    assert_eq!(store.committed_fills(), 1);
}

#[tokio::test]
async fn open_removes_invalid_files_and_keeps_state() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects");
    let (good, truncated, garbage);
    {
        let store = open(dir.path()).await;
        fill(&store, "good", 200, b"fine")
            .await
            .finish()
            .await
            .unwrap();
        fill(&store, "short", 200, &body(1000, 2))
            .await
            .finish()
            .await
            .unwrap();
        let all = files(&objects);
        let hash = format!("{:032x}", Store::key_hash("good"));
        good = all
            .iter()
            .find(|p| p.to_string_lossy().contains(&hash))
            .unwrap()
            .clone();
        truncated = all.into_iter().find(|p| *p != good).unwrap();
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&truncated)
        .unwrap();
    f.set_len(f.metadata().unwrap().len() - 1).unwrap();
    // Garbage under a well-formed name, and a file with a foreign name.
    let hash = format!("{:032x}", 0xabcd_u128 << 112);
    garbage = objects
        .join("ab/cd")
        .join(format!("{hash}-0000000000000001"));
    std::fs::create_dir_all(garbage.parent().unwrap()).unwrap();
    std::fs::write(&garbage, vec![0x5a; 9000]).unwrap();
    std::fs::write(objects.join("ab/notes.txt"), b"hello").unwrap();
    // state/ belongs to other modules.
    std::fs::create_dir_all(dir.path().join("state/snap")).unwrap();
    std::fs::write(dir.path().join("state/seed"), b"seed").unwrap();
    std::fs::write(dir.path().join("state/snap/0"), b"bits").unwrap();
    let state_before = files(&dir.path().join("state"));

    let store = open(dir.path()).await;
    assert_eq!(files(&objects), vec![good]);
    assert_eq!(read(&store, "good").await.unwrap().1, b"fine");
    assert!(!store.contains(Store::key_hash("short")));
    assert_eq!(files(&store.state_dir()), state_before);
    assert_eq!(
        std::fs::read(dir.path().join("state/seed")).unwrap(),
        b"seed"
    );
    assert_eq!(
        std::fs::read(dir.path().join("state/snap/0")).unwrap(),
        b"bits"
    );
}

#[tokio::test]
async fn corrupt_header_at_lookup_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    fill(&store, "k", 200, b"body")
        .await
        .finish()
        .await
        .unwrap();
    let path = files(&dir.path().join("objects")).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[64] ^= 0xff; // the key's first byte
    std::fs::write(&path, bytes).unwrap();
    assert!(
        store
            .lookup("k", Store::key_hash("k"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(!path.exists());
    assert!(!store.contains(Store::key_hash("k")));
}

#[tokio::test]
async fn corrupt_or_cut_body_fails_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(150_000, 9);
    let hash = Store::key_hash("k");
    fill(&store, "k", 200, &data).await.finish().await.unwrap();
    let path = files(&dir.path().join("objects")).remove(0);
    let original = std::fs::read(&path).unwrap();

    // Cut after lookup verified the length: an early EOF, and the entry is gone.
    let entry = store.lookup("k", hash).await.unwrap().unwrap();
    std::fs::write(&path, &original[..original.len() - 10]).unwrap();
    let items: Vec<_> = entry.into_body_stream().collect().await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    assert!(!path.exists());
    assert!(!store.contains(hash));
    assert_eq!(store.stats().removed_invalid, 1);

    // Stored again, with one body byte flipped: the checksum catches it.
    fill(&store, "k", 200, &data).await.finish().await.unwrap();
    let path = files(&dir.path().join("objects")).remove(0);
    let mut flipped = std::fs::read(&path).unwrap();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x01;
    std::fs::write(&path, &flipped).unwrap();
    let entry = store.lookup("k", hash).await.unwrap().unwrap();
    let items: Vec<_> = entry.into_body_stream().collect().await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(items[..items.len() - 1].iter().all(|c| c.is_ok()));
    assert!(!path.exists());
    assert!(!store.contains(hash));
    let stats = store.stats();
    assert_eq!(
        (stats.checksum_failures, stats.objects, stats.bytes),
        (1, 0, 0)
    );
}

#[tokio::test]
async fn small_damaged_body_is_a_miss_before_any_byte() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(10_000, 4);
    fill(&store, "s", 200, &data).await.finish().await.unwrap();
    let path = files(&dir.path().join("objects")).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() - data.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    assert!(
        store
            .lookup("s", Store::key_hash("s"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(!path.exists());
    let stats = store.stats();
    assert_eq!((stats.checksum_failures, stats.objects), (1, 0));
    // Undamaged, it is served whole: one piece, verified up front.
    fill(&store, "s", 200, &data).await.finish().await.unwrap();
    let entry = store
        .lookup("s", Store::key_hash("s"))
        .await
        .unwrap()
        .unwrap();
    let items: Vec<_> = entry.into_body_stream().collect().await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].as_ref().unwrap()[..], data[..]);
}

#[tokio::test]
async fn fills_evict_least_recently_used_entries_to_stay_in_budget() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(StoreOptions {
        max_size: 100_000,
        ..options(dir.path())
    })
    .await;
    let sizes = || -> u64 {
        files(&dir.path().join("objects"))
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum()
    };
    // Each entry is about 21.7 KB with its 8.5 KiB header: four fit, not five.
    for i in 0..4 {
        let key = format!("k{i}");
        fill(&store, &key, 200, &body(13_000, i))
            .await
            .finish()
            .await
            .unwrap();
    }
    assert_eq!(store.object_count(), 4);
    assert!(
        store
            .lookup("k0", Store::key_hash("k0"))
            .await
            .unwrap()
            .is_some()
    );
    fill(&store, "k4", 200, &body(13_000, 4))
        .await
        .finish()
        .await
        .unwrap();
    // k1 was the least recently used: k0 was just looked up.
    assert!(!store.contains(Store::key_hash("k1")));
    for key in ["k0", "k2", "k3", "k4"] {
        assert!(store.contains(Store::key_hash(key)), "{key}");
    }
    let stats = store.stats();
    assert_eq!(
        (stats.objects, stats.evictions, stats.reserved_bytes),
        (4, 1, 0)
    );
    assert_eq!(stats.bytes, sizes());
    assert!(stats.bytes <= 100_000);
    // A chunked body grows its reservation as it goes, evicting as it grows.
    let mut w = store
        .begin_fill("big", Store::key_hash("big"), &meta(200), None)
        .await
        .unwrap();
    for chunk in body(60_000, 5).chunks(7_000) {
        w.write(chunk).await.unwrap();
        assert!(store.stats().reserved_bytes + sizes() <= 100_000);
    }
    w.finish().await.unwrap();
    assert!(sizes() <= 100_000);
    assert_eq!(store.stats().reserved_bytes, 0);
    // More than the whole budget cannot be reserved, declared or streamed.
    let too_big = store
        .begin_fill("x", Store::key_hash("x"), &meta(200), Some(100_000))
        .await;
    assert!(
        matches!(too_big, Err(StoreError::NoSpace { .. })),
        "{too_big:?}"
    );
    let mut w = store
        .begin_fill("x", Store::key_hash("x"), &meta(200), None)
        .await
        .unwrap();
    let over = w.write(&body(100_000, 6)).await;
    assert!(matches!(over, Err(StoreError::NoSpace { .. })), "{over:?}");
    drop(w);
    assert_eq!(store.stats().reserved_bytes, 0);
    assert!(files(&dir.path().join("tmp")).is_empty());
}

/// The proxy spawns these futures and streams onto a multi-threaded runtime.
#[tokio::test]
async fn futures_and_streams_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    assert_send(&store.lookup("k", 1));
    let m = meta(200);
    let begin = store.begin_fill("k", Store::key_hash("k"), &m, None);
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
async fn reopen_keeps_the_budget_and_ranks_scanned_entries_oldest() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path()).await;
        for i in 0..6 {
            let key = format!("k{i}");
            fill(&store, &key, 200, &body(13_000, i))
                .await
                .finish()
                .await
                .unwrap();
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
        fill(&store, &key, 200, &body(13_000, i))
            .await
            .finish()
            .await
            .unwrap();
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
