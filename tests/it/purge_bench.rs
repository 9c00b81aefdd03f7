//! A measurement, not a check (`#[ignore]`d; run it alone with `cargo test --release --test
//! it purge_bench -- --ignored --nocapture`): a store holding `SECONDHIT_PURGE_ENTRIES`
//! entries tagged `bench` (default 100000) beside 1000 untagged ones is purged by tag while
//! another task looks the untagged ones up in a loop. It prints how long the purge took
//! (until a sample of the purged entries all miss, until it returned, and until its files
//! were unlinked in the background) and the lookups' latency percentiles before the purge
//! and until its files were gone. A lookup here is a store hit from the memory tier
//! (`Store::lookup`), the part of a hit a purge could hold up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, StatusCode};
use secondhit_proxy::config::Fsync;
use secondhit_store::{EntryMeta, PurgeMode, PurgeSelector, Store, StoreHash, StoreOptions};

fn meta(tags: &[&str]) -> EntryMeta {
    EntryMeta {
        request_time: SystemTime::now(),
        response_time: SystemTime::now(),
        status: StatusCode::OK,
        response_headers: HeaderMap::new(),
        request_headers: HeaderMap::new(),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        purged: None,
    }
}

async fn put(store: &Store, key: &str, tags: &[&str]) {
    let hash = Store::key_hash(key);
    let mut writer = (store
        .begin_fill(
            key,
            hash,
            &meta(tags),
            Some(16),
            1 << 20,
            store.fill_ticket(),
        )
        .await)
        .expect("begin fill");
    writer.write(&[7; 16]).await.expect("write");
    writer.finish().await.expect("finish");
}

/// Looks the first hundred of `keys` up, a hundred a millisecond, until `stop`, timing each.
async fn look_up_until(
    store: Arc<Store>,
    keys: Arc<Vec<String>>,
    stop: Arc<AtomicBool>,
) -> Vec<Duration> {
    let mut took = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        // A hundred lookups a millisecond at most: a steady load of hits, not a spin that
        // takes a core from the purge on a small machine.
        for key in keys.iter().take(100) {
            let started = Instant::now();
            let found = store
                .lookup(key, Store::key_hash(key))
                .await
                .expect("lookup");
            took.push(started.elapsed());
            assert!(found.is_some(), "{key} is not tagged and must stay");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    took
}

/// How long after `started` every one of a thousand sampled tagged entries is a miss.
async fn all_gone(store: Arc<Store>, entries: usize, started: Instant) -> Duration {
    let step = (entries / 1000).max(1);
    let sample: Vec<StoreHash> = (0..entries)
        .step_by(step)
        .map(|i| Store::key_hash(&format!("http://bench.test/tagged/{i}")))
        .collect();
    while sample.iter().any(|&hash| store.contains(hash)) {
        tokio::task::yield_now().await;
    }
    started.elapsed()
}

fn percentiles(mut took: Vec<Duration>) -> String {
    took.sort();
    let at = |p: f64| took[((took.len() - 1) as f64 * p) as usize];
    format!(
        "{} lookups, p50 {:?}, p99 {:?}, p99.9 {:?}, max {:?}",
        took.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        took[took.len() - 1]
    )
}

/// A store in `dir` holding `entries` entries tagged `bench` and 1000 tagged `kept`, and
/// the keys of those.
async fn filled(dir: &std::path::Path, entries: usize) -> (Arc<Store>, Vec<String>) {
    let store = Arc::new(
        Store::open(StoreOptions {
            dir: dir.to_owned(),
            fsync: Fsync::Off,
            max_size: 1 << 40,
            lock_timeout: Duration::from_secs(5),
            verify_whole_below: 64 * 1024,
            memory_size: 64 << 20,
            memory_max_object_size: 1 << 20,
            open_files: 0,
            min_free: 0,
            tag_memory: u64::MAX,
            max_write_rate: 0,
        })
        .expect("open store"),
    );
    let started = Instant::now();
    for i in 0..entries {
        let key = format!("http://bench.test/tagged/{i}");
        put(&store, &key, &["bench", "other"]).await;
    }
    let keys: Vec<String> = (0..1000)
        .map(|i| format!("http://bench.test/kept/{i}"))
        .collect();
    for key in &keys {
        put(&store, key, &["kept"]).await;
    }
    println!(
        "stored {} entries in {:?}",
        entries + keys.len(),
        started.elapsed()
    );
    (store, keys)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run alone, with --ignored --nocapture"]
async fn purge_bench() {
    let entries: usize = std::env::var("SECONDHIT_PURGE_ENTRIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, keys) = filled(dir.path(), entries).await;
    let keys = Arc::new(keys);

    let stop = Arc::new(AtomicBool::new(false));
    let baseline = tokio::spawn(look_up_until(store.clone(), keys.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    println!(
        "before the purge: {}",
        percentiles(baseline.await.expect("lookups"))
    );

    let stop = Arc::new(AtomicBool::new(false));
    let during = tokio::spawn(look_up_until(store.clone(), keys.clone(), stop.clone()));
    let started = Instant::now();
    let gone = tokio::spawn(all_gone(store.clone(), entries, started));
    let selector = PurgeSelector::Tag("bench".to_owned());
    let purged = store
        .purge(&selector, PurgeMode::Remove)
        .await
        .expect("purge");
    let took = started.elapsed();
    // The files go after the answer; the purge stays in state/pending-purges until then.
    let pending = dir.path().join("state").join("pending-purges");
    while std::fs::read_to_string(&pending).is_ok_and(|text| !text.is_empty()) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let unlinked = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let gone = gone.await.expect("sampler");
    println!(
        "purged {purged} entries by tag: all misses after {gone:?}, returned after {took:?}, \
         files unlinked after {unlinked:?}"
    );
    println!(
        "during the purge and its unlinking: {}",
        percentiles(during.await.expect("lookups"))
    );
    assert_eq!(purged, entries as u64);
    assert_eq!(store.stats().objects, keys.len() as u64);
}
