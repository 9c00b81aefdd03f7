//! Restarts, clean and after SIGKILL: what was stored is served again, fills racing the
//! start-up scan survive, and leaked temp files are removed.

use std::time::Duration;

use secondhit_proxy::config::Fsync;

use super::common::*;
use crate::support::serve::ServeProcess;
use crate::support::{TestProxy, files_under, send_until_hit, wait_until};

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
    assert_eq!(proxy.store.stats().objects, 30);
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
    crate::support::wait_until(
        || "the fill never began".into(),
        || !files_under(&tmp).is_empty(),
    )
    .await;
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

/// SIGKILL while a hundred fills run at once, under the default `cache.fsync`: after the
/// restart no temp file is left, and every answer is byte for byte an object the origin
/// sent, a hit its first version. Ten of the fills stall (their origin sends part of the
/// body and then nothing), so some are surely in their temp files at the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_hundred_concurrent_fills_leaves_no_wrong_byte_and_no_temp_file() {
    let origin = versioned_origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = serve_config(dir.path(), "serve", &origin, "");
    let (tmp, objects) = (
        dir.path().join("cache/tmp"),
        dir.path().join("cache/objects"),
    );
    let paths: Vec<String> = (0..90)
        .map(|i| format!("/burst-{i}-{}", if i % 3 == 0 { 300_000 } else { 3000 }))
        .collect();
    let first = ServeProcess::start(&config).await;
    let b = format!("http://{}", first.addr);
    let mut fills = tokio::task::JoinSet::new();
    for i in 0..10 {
        fills.spawn(request(&b, &format!("/stall-{i}")).send());
    }
    for path in &paths {
        fills.spawn(request(&b, path).send());
    }
    wait_until(
        || "half the fills never committed".into(),
        || files_under(&objects).len() >= paths.len() / 2 && !files_under(&tmp).is_empty(),
    )
    .await;
    first.kill().await;
    fills.abort_all();

    let mut second = ServeProcess::start(&config).await;
    assert!(
        files_under(&tmp).is_empty(),
        "temp files are removed at start-up"
    );
    second.wait_for_log("cache scan finished").await;
    let b = format!("http://{}", second.addr);
    let mut hits = 0;
    for path in &paths {
        let seen = fetch(&b, path).await;
        if seen.cache.hit {
            hits += 1;
            assert!(
                seen.body == object(path, 1),
                "{path}: a hit that is not what was stored"
            );
        } else {
            let version = origin.count(path);
            assert!(
                seen.body == object(path, version),
                "{path}: v{version} from the origin"
            );
        }
    }
    assert!(
        hits >= paths.len() / 2,
        "{hits} of {} committed fills kept",
        paths.len()
    );
    second.kill().await;
}

#[tokio::test]
async fn a_batched_fsync_syncs_the_cache_after_fills() {
    let origin = versioned_origin().await;
    let proxy = TestProxy::start(origin.addr, |config| {
        always(config);
        config.cache.fsync = Fsync::Every(Duration::from_millis(20));
    })
    .await;
    let b = base(&proxy);
    for path in ["/synced-1-3000", "/synced-2-3000"] {
        assert!(fetch(&b, path).await.cache.stored, "{path}");
    }
    proxy.wait_committed(2).await;
    wait_until(
        || format!("no sync after two fills: {:?}", proxy.store.stats().syncs),
        || proxy.store.stats().syncs >= 1,
    )
    .await;
    // A hit changes no file: the intervals since made no sync of their own.
    let synced = proxy.store.stats().syncs;
    let hit = fetch(&b, "/synced-1-3000").await;
    assert!(hit.cache.hit, "{:?}", hit.cache);
    assert!(synced <= 2, "{synced} syncs for two fills");
    proxy.stop().await;
}
