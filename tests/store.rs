//! The disk store end to end: byte budget and LRU eviction, restart (clean and after
//! SIGKILL), damaged entries, the directory lock, and refills racing eviction. Real
//! sockets on 127.0.0.1, real files in temp directories.
//!
//! Requests carry a fixed `Host`, so keys stay the same when a restarted proxy listens on
//! another port.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};
use secondhit::config::AdmissionPolicy;
use secondhit::store::{EntryMeta, Store, StoreOptions};
use support::serve::{BIN, ServeProcess};
use support::{
    PATIENCE, Reply, ReplyBody, Seen, TestOrigin, TestProxy, body_bytes, client, files_under, send,
    send_until_hit,
};

/// The `Host` of every request, and so the authority of every key.
const HOST: &str = "cache.test";

/// The body the origin sends for `path` the `version`-th time it is asked: its size is the
/// number after the path's last `-`, and every version differs.
fn object(path: &str, version: usize) -> Vec<u8> {
    let size: usize = path
        .rsplit('-')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let mut body = format!("{path} v{version} ").into_bytes();
    let seed = (version as u8).wrapping_mul(17) ^ path.len() as u8;
    body.extend(body_bytes(size.saturating_sub(body.len()), seed));
    body
}

/// An origin serving `object(path, n)` with `max-age=3600` on the n-th request for a path;
/// paths starting with `/stall` send part of their body and then nothing.
async fn versioned_origin() -> TestOrigin {
    let versions: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    TestOrigin::start(move |head| {
        let path = head.uri.path().to_owned();
        if path.starts_with("/stall") {
            return Reply {
                body: ReplyBody::Stall {
                    declared: 100_000,
                    sent: body_bytes(10_000, 1),
                },
                ..Reply::ok("max-age=3600", Vec::new())
            };
        }
        let mut versions = versions.lock().expect("versions");
        let version = versions.entry(path.clone()).or_insert(0);
        *version += 1;
        Reply::ok("max-age=3600", object(&path, *version))
    })
    .await
}

/// GET `base` + `path` with the fixed test `Host`.
fn request(base: &str, path: &str) -> reqwest::RequestBuilder {
    client().get(format!("{base}{path}")).header("host", HOST)
}

async fn fetch(base: &str, path: &str) -> Seen {
    send(request(base, path)).await
}

fn base(proxy: &TestProxy) -> String {
    format!("http://{}", proxy.addr)
}

/// Total bytes of the entry files under `objects/`.
fn objects_bytes(cache_dir: &Path) -> u64 {
    files_under(&cache_dir.join("objects"))
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

fn always(config: &mut secondhit::config::Config) {
    config.admission.policy = AdmissionPolicy::Always;
}

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
        let bytes = objects_bytes(&proxy.cache_dir);
        assert!(
            bytes <= MAX_SIZE,
            "objects/ holds {bytes} bytes after {path}"
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

/// Stores `paths` through a fresh proxy on `cache_dir` and stops it.
async fn fill_and_stop(origin: &TestOrigin, cache_dir: &Path, paths: &[String]) {
    let proxy = TestProxy::start_in(origin.addr, cache_dir, always).await;
    let b = base(&proxy);
    for path in paths {
        assert!(fetch(&b, path).await.cache.stored, "{path}");
    }
    proxy.wait_committed(paths.len() as u64).await;
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_serves_everything_stored_before_without_asking_the_origin() {
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    let paths: Vec<String> = (0..30)
        .map(|i| format!("/kept-{i}-{}", if i % 3 == 0 { 200_000 } else { 3000 }))
        .collect();
    fill_and_stop(&origin, &cache_dir, &paths).await;
    std::fs::write(cache_dir.join("state/keep-me"), b"state").expect("state file");

    let proxy = TestProxy::start_in(origin.addr, &cache_dir, |_| {}).await;
    proxy.wait_scanned().await;
    assert_eq!(proxy.store.object_count(), 30);
    let b = base(&proxy);
    for path in &paths {
        let seen = fetch(&b, path).await;
        assert!(seen.cache.hit, "{path}: {:?}", seen.cache);
        assert_eq!(seen.body, object(path, 1), "{path}");
        assert_eq!(origin.count(path), 1, "{path}: the origin was asked again");
    }
    assert_eq!(
        std::fs::read(cache_dir.join("state/keep-me")).expect("state file"),
        b"state"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_during_the_scan_are_never_lost_or_replaced_by_older_files() {
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    let paths: Vec<String> = (0..600).map(|i| format!("/many-{i}-500")).collect();
    fill_and_stop(&origin, &cache_dir, &paths).await;

    // Ask for every key at once after the restart: keys the scan has not reached yet are
    // misses, fetched again (version 2) and stored while the scan runs.
    let proxy = TestProxy::start_in(origin.addr, &cache_dir, always).await;
    let b = base(&proxy);
    let mut during_scan = 0;
    for chunk in paths.chunks(8) {
        let requests = chunk.iter().map(|path| fetch(&b, path));
        for seen in futures_util::future::join_all(requests).await {
            assert_eq!(seen.status, 200);
        }
        if !proxy.store.stats().scan_complete {
            during_scan += chunk.len();
        }
    }
    proxy.wait_scanned().await;
    let refetched = paths.iter().filter(|p| origin.count(p) > 1).count();
    eprintln!("{during_scan} requests while the scan ran; {refetched} keys fetched again");
    // Every key is a hit now, with the newest version the origin sent.
    for path in &paths {
        let seen = send_until_hit(|| request(&b, path)).await;
        assert_eq!(seen.body, object(path, origin.count(path)), "{path}");
    }
    assert_eq!(proxy.entry_files().len(), paths.len(), "one file per key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_entries_are_never_served_whole_and_are_removed_and_counted() {
    const SMALL: usize = 4000; // under cache.verify_whole_below (64 KiB): verified up front
    const LARGE: usize = 300_000; // streamed and verified at the end
    let origin = versioned_origin().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache_dir = temp.path().join("cache");
    // 4 kinds of damage x 5 entries (3 small, 2 large), and 2 undamaged controls.
    let kinds = ["truncated", "header", "body", "zeroed"];
    let mut damaged = Vec::new();
    for kind in kinds {
        for j in 0..5 {
            let size = if j < 3 { SMALL } else { LARGE };
            damaged.push((kind, j, format!("/{kind}-{j}-{size}")));
        }
    }
    let controls = [format!("/control-0-{SMALL}"), format!("/control-1-{LARGE}")];
    let all: Vec<String> = damaged
        .iter()
        .map(|(_, _, p)| p.clone())
        .chain(controls.iter().cloned())
        .collect();
    fill_and_stop(&origin, &cache_dir, &all).await;

    // Offline damage, file by file.
    let files = entry_files_by_path(&cache_dir);
    for (kind, j, path) in &damaged {
        let file = &files[path];
        let mut bytes = std::fs::read(file).expect("entry");
        let len = bytes.len();
        match *kind {
            "truncated" => bytes.truncate([len - 1000, 30, len / 2, 100, len - 1][*j]),
            // Magic, body length, checksum, key, metadata slot A.
            "header" => bytes[[3, 24, 60, 66, 512 + 30][*j]] ^= 0x04,
            "body" => {
                let body_len = path.rsplit('-').next().and_then(|s| s.parse().ok());
                bytes[len - body_len.unwrap_or(2) / 2] ^= 0x01;
            }
            _ => bytes.iter_mut().for_each(|b| *b = 0),
        }
        std::fs::write(file, bytes).expect("damage");
    }

    let proxy = TestProxy::start_in(origin.addr, &cache_dir, always).await;
    proxy.wait_scanned().await;
    let stats = proxy.store.stats();
    // The scan reads headers only: all but the body damage is found before any request.
    assert_eq!(
        stats.removed_invalid + stats.checksum_failures,
        15,
        "{stats:?}"
    );
    let b = base(&proxy);
    for (kind, j, path) in &damaged {
        for attempt in 0..2 {
            let cut_allowed = *kind == "body" && *j >= 3 && attempt == 0;
            let response = match request(&b, path).send().await {
                Ok(response) => response,
                // The cut can come before hyper flushed the head: no response at all.
                Err(error) if cut_allowed => {
                    assert!(error.is_request(), "{path}: {error}");
                    continue;
                }
                Err(error) => panic!("{path}: no response head: {error}"),
            };
            assert_eq!(response.status(), 200);
            let cache = support::ParsedCacheStatus::from_headers(response.headers());
            match response.bytes().await {
                // Whatever arrives complete is exactly what the origin sent last.
                Ok(body) => assert_eq!(body, object(path, origin.count(path)), "{path}"),
                Err(_) => assert!(
                    cache.hit && cut_allowed,
                    "{path}: only a large damaged body may be cut, on its first hit"
                ),
            }
            if attempt == 0 && *kind == "body" {
                // A small damaged body is a plain miss; a large one starts as a hit and is cut.
                assert_eq!(cache.hit, *j >= 3, "{path}: {cache:?}");
            }
        }
        assert!(
            !files[path].exists(),
            "{path}: the damaged file is still there"
        );
    }
    let stats = proxy.store.stats();
    assert_eq!(
        stats.removed_invalid + stats.checksum_failures,
        20,
        "{stats:?}"
    );
    assert!(stats.checksum_failures >= 5 + 3, "{stats:?}");
    for path in &controls {
        let seen = fetch(&b, path).await;
        assert!(seen.cache.hit, "{path}");
        assert_eq!(origin.count(path), 1);
    }
}

/// The entry file of every stored path, found by the key each file holds.
fn entry_files_by_path(cache_dir: &Path) -> HashMap<String, PathBuf> {
    let mut found = HashMap::new();
    for file in files_under(&cache_dir.join("objects")) {
        let bytes = std::fs::read(&file).expect("entry");
        let key_len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
        let key = String::from_utf8(bytes[64..64 + key_len].to_vec()).expect("utf-8 key");
        let path = key
            .strip_prefix(&format!("http://{HOST}"))
            .expect("test key");
        found.insert(path.to_owned(), file);
    }
    found
}

/// A config file for the binary: json logs (the harness reads them), policy always.
fn serve_config(dir: &Path, name: &str, origin: &TestOrigin, extra: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nshutdown_timeout = \"1s\"\n\
         [origin]\nurl = \"http://{}\"\n\
         [cache]\ndir = \"{}\"\nfsync = false\n{extra}\n\
         [admission]\npolicy = \"always\"\nseed = \"store test\"\n\
         [log]\nformat = \"json\"\naccess_log = \"off\"\n",
        origin.addr,
        dir.join("cache").display(),
    );
    std::fs::write(&path, text).expect("write config");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_survive_sigkill_and_its_temp_files_are_removed() {
    let origin = versioned_origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = serve_config(dir.path(), "serve", &origin, "");
    let tmp = dir.path().join("cache/tmp");
    let paths: Vec<String> = (0..10)
        .map(|i| format!("/crash-{i}-{}", if i % 2 == 0 { 2000 } else { 150_000 }))
        .collect();

    let first = ServeProcess::start(&config).await;
    let b = format!("http://{}", first.addr);
    let mut stored = Vec::new();
    for path in &paths {
        fetch(&b, path).await;
        let hit = send_until_hit(|| request(&b, path)).await;
        stored.push((path, hit.body, origin.count(path)));
    }
    // A fill in progress when the process dies: its origin never finishes the body.
    let stalled = tokio::spawn(request(&b, "/stall-1").send());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while files_under(&tmp).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fill never began"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.kill().await;
    stalled.abort();
    assert_eq!(
        files_under(&tmp).len(),
        1,
        "the killed fill's temp file is left behind"
    );

    let mut second = ServeProcess::start(&config).await;
    assert!(
        files_under(&tmp).is_empty(),
        "temp files are removed at start-up"
    );
    second.wait_for_log("cache scan finished").await;
    let b = format!("http://{}", second.addr);
    for (path, body, asked) in stored {
        let seen = fetch(&b, path).await;
        assert!(seen.cache.hit, "{path}: {:?}", seen.cache);
        assert_eq!(seen.body, body, "{path}");
        assert_eq!(
            origin.count(path),
            asked,
            "{path}: the origin was asked again"
        );
    }
    second.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_serve_on_the_same_directory_exits_naming_the_lock_holder() {
    let origin = versioned_origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let first_config = serve_config(dir.path(), "first", &origin, "");
    let first = ServeProcess::start(&first_config).await;
    let pid = first.child.id().expect("pid");

    let second_config = serve_config(dir.path(), "second", &origin, "lock_timeout = \"300ms\"");
    let output = tokio::time::timeout(
        PATIENCE,
        tokio::process::Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&second_config)
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("the second serve gives up")
    .expect("run the second serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let cache_dir = dir.path().join("cache");
    for needed in [
        cache_dir.display().to_string(),
        format!("pid {pid}"),
        "secondhit.lock".to_owned(),
        "cache.lock_timeout".to_owned(),
    ] {
        assert!(
            stderr.contains(&needed),
            "{needed:?} missing from: {stderr}"
        );
    }

    let b = format!("http://{}", first.addr);
    let seen = fetch(&b, "/still-serving-100").await;
    assert_eq!(seen.status, 200);
    assert!(seen.cache.stored);
    send_until_hit(|| request(&b, "/still-serving-100")).await;
    first.kill().await;
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
    }
}

/// Stores `body` under `key` through the store's own API.
async fn put(store: &Store, key: &str, body: &[u8]) {
    let hash = Store::key_hash(key);
    let mut writer = store
        .begin_fill(key, hash, &meta(), Some(body.len() as u64))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refill_racing_the_eviction_of_its_key_leaves_the_newer_entry_intact() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(
        Store::open(StoreOptions {
            dir: dir.path().to_owned(),
            fsync: false,
            max_object_size: 1 << 20,
            max_size: 200_000,
            lock_timeout: Duration::from_secs(5),
            verify_whole_below: 64 * 1024,
        })
        .expect("open store"),
    );
    let objects = dir.path().join("objects");
    let key = "http://cache.test/raced";
    let hash = Store::key_hash(key);

    // Step by step: v2 is being written while v1 is evicted, then v2 commits.
    put(&store, key, &body_bytes(30_000, 1)).await;
    let v1_file = files_under(&objects).pop().expect("v1 file");
    let mut v2 = store
        .begin_fill(key, hash, &meta(), Some(30_000))
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
        let refill = {
            let store = store.clone();
            tokio::spawn(async move { put(&store, key, &body_bytes(20_000, round)).await })
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
        // The key holds this round's body, or nothing if it was evicted since.
        if let Some(body) = stored_body(&store, key).await {
            assert_eq!(body, body_bytes(20_000, round), "round {round}");
        }
        let files = files_under(&objects);
        let name = format!("{hash:032x}");
        let of_key = files
            .iter()
            .filter(|p| p.to_string_lossy().contains(&name))
            .count();
        assert!(of_key <= usize::from(store.contains(hash)), "round {round}");
        // Every file is indexed, and nothing indexed is missing.
        assert_eq!(files.len() as u64, store.object_count(), "round {round}");
        assert!(objects_bytes(dir.path()) <= 200_000);
    }
    assert!(store.stats().evictions > 40);
}
