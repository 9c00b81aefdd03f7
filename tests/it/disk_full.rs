//! A cache directory on a small tmpfs, filled past its size or its inodes under load:
//! every client gets the origin's whole body, no temp file is left behind, hits go on
//! being served, and `Cache-Status` says `stored` only for fills that began (each of
//! which then either committed or was counted as dropped). Mounting needs root: built as
//! another user, `cargo test` lists these tests as ignored, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{
    PATIENCE, ParsedCacheStatus, Reply, TestOrigin, TestProxy, body_bytes, get, sample, scrape,
};
use secondhit_proxy::config::AdmissionPolicy;
use secondhit_store::{FillDrop, Store, StoreStats};

/// A tmpfs mounted on a temp directory for one test; unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs with `options` (e.g. `size=4m`); panics, saying why, if it cannot.
    fn mount(options: &str) -> Tmpfs {
        let dir = tempfile::tempdir().expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("mount, to mount a tmpfs (util-linux)");
        let why = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "cannot mount a tmpfs ({}): {why}; these tests need root with CAP_SYS_ADMIN",
            out.status
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Free bytes on the tmpfs.
    fn free_bytes(&self) -> u64 {
        let stat = rustix::fs::statvfs(self.path()).expect("statvfs");
        stat.f_bavail * stat.f_frsize
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a file a test still holds open must not keep the mount alive.
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

/// The body of `/obj/<i>`: its own bytes, 32..160 KB long.
fn object(i: usize) -> Vec<u8> {
    body_bytes(32_000 + (i * 7919) % 128_000, i as u8)
}

/// An origin serving `/obj/<i>` (even `i` with Content-Length, odd `i` chunked) and
/// `/warm` (small, with Content-Length), all cacheable.
async fn origin(object_of: fn(usize) -> Vec<u8>) -> TestOrigin {
    TestOrigin::start(move |head| {
        let path = head.uri.path();
        if path == "/warm" {
            return Reply::ok("max-age=3600", body_bytes(4_000, 7));
        }
        let i: usize = path
            .strip_prefix("/obj/")
            .and_then(|n| n.parse().ok())
            .expect("an /obj/<i> path");
        if i.is_multiple_of(2) {
            Reply::ok("max-age=3600", object_of(i))
        } else {
            Reply::chunked("max-age=3600", object_of(i), 16 * 1024)
        }
    })
    .await
}

/// A proxy caching in `dir` whatever it is offered, with a budget far larger than the
/// disk (so the budget never saves it) and the given floor.
async fn proxy(origin: &TestOrigin, dir: &Path, min_free: u64) -> TestProxy {
    TestProxy::start_in(origin.addr, dir, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_size = 1 << 30;
        c.cache.min_free = min_free;
        c.cache.memory_size = 0;
    })
    .await
}

/// What one request of the load saw: of `/obj/<i>` (`i` set) or of `/warm`.
struct Outcome {
    i: Option<usize>,
    cache: ParsedCacheStatus,
}

impl Outcome {
    /// Whether the request's fill was refused: answered from the origin, not stored,
    /// and not a follower of another request's fetch.
    fn refused(&self) -> bool {
        !self.cache.hit && !self.cache.stored && !self.cache.collapsed
    }
}

/// GETs `/obj/0..count` through `proxy`, `concurrency` at a time, each followed by a GET
/// of `/warm` (hit once before); checks every body against the origin's.
async fn load(
    proxy: &TestProxy,
    count: usize,
    concurrency: usize,
    object_of: fn(usize) -> Vec<u8>,
) -> Vec<Outcome> {
    let warm = get(&proxy.url("/warm")).await.body;
    proxy.wait_committed(1).await;
    // Hit once before the load: an entry never hit is the first one eviction takes.
    assert!(get(&proxy.url("/warm")).await.cache.hit);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (next, base, warm) = (next.clone(), proxy.url(""), warm.clone());
        workers.spawn(async move {
            let mut seen = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= count {
                    return seen;
                }
                let got = get(&format!("{base}/obj/{i}")).await;
                assert_eq!(got.status, 200, "/obj/{i}");
                assert!(
                    got.body == object_of(i),
                    "/obj/{i}: body differs from the origin's"
                );
                seen.push(Outcome {
                    i: Some(i),
                    cache: got.cache,
                });
                let hot = get(&format!("{base}/warm")).await;
                assert_eq!(hot.status, 200, "/warm after /obj/{i}");
                assert_eq!(hot.body, warm, "/warm after /obj/{i}");
                seen.push(Outcome {
                    i: None,
                    cache: hot.cache,
                });
            }
        });
    }
    let mut outcomes = Vec::new();
    while let Some(seen) = workers.join_next().await {
        outcomes.extend(seen.expect("load worker"));
    }
    outcomes
}

/// Waits until every fill that began has ended (committed or counted as dropped), then
/// checks that no temp file is left.
async fn fills_settle(proxy: &TestProxy, began: u64) {
    let ended = |stats: &StoreStats| stats.committed_fills + stats.dropped_fills.total();
    let stats = crate::support::eventually(
        || {
            let stats = proxy.store.stats();
            format!("{began} fills began, {} ended: {stats:?}", ended(&stats))
        },
        async || Some(proxy.store.stats()).filter(|stats| ended(stats) >= began),
    )
    .await;
    // `/warm` is a fill too; each began one ends one way.
    assert_eq!(ended(&stats), began, "{stats:?}");
    assert_eq!(proxy.temp_files(), Vec::<PathBuf>::new(), "temp files left");
}

/// The whole story on one tmpfs: load, honesty, leftovers, hits afterwards. `prepare`
/// runs once the proxy has opened its directory, before the load.
async fn fill_past_the_limit(
    fs: &Tmpfs,
    count: usize,
    object_of: fn(usize) -> Vec<u8>,
    prepare: impl FnOnce(&TestProxy),
) {
    let origin = origin(object_of).await;
    let cache = fs.path().join("cache");
    let proxy = proxy(&origin, &cache, 0).await;
    proxy.wait_scanned().await;
    prepare(&proxy);
    let outcomes = load(&proxy, count, 8, object_of).await;
    let (objects, warm): (Vec<&Outcome>, Vec<&Outcome>) =
        outcomes.iter().partition(|o| o.i.is_some());
    // The proxy never stops serving hits because the disk is full. Not every one: when
    // fills in flight hold the disk, eviction may take even a hot entry, which the next
    // request stores again.
    let warm_hits = warm.iter().filter(|o| o.cache.hit).count();
    assert!(
        warm_hits * 10 >= warm.len() * 9,
        "/warm was a hit {warm_hits} times in {}",
        warm.len()
    );
    let stored = outcomes.iter().filter(|o| o.cache.stored).count() as u64;
    // `/warm` was stored first.
    fills_settle(&proxy, stored + 1).await;
    // A fill not started says why: the disk had no room for it.
    for outcome in outcomes.iter().filter(|o| o.refused()) {
        assert_eq!(
            outcome.cache.detail.as_deref(),
            Some("disk-full"),
            "{:?}: {:?}",
            outcome.i,
            outcome.cache
        );
    }
    let stats = proxy.store.stats();
    eprintln!(
        "{count} objects: {stored} stored, {} committed, dropped {:?}, disk {:?}, evictions {}",
        stats.committed_fills, stats.dropped_fills, stats.disk, stats.evictions
    );
    assert_full_disk_counted(&proxy, &stats, &outcomes, &objects).await;
    stored_objects_are_hits_with_the_origins_bytes(&proxy, &objects, object_of).await;
    proxy.stop().await;
}

/// Asserts that `stats` and `proxy`'s metrics show evictions, count every refused fill of
/// `outcomes`, and drop fills for a full disk only among the chunked `objects` stored.
async fn assert_full_disk_counted(
    proxy: &TestProxy,
    stats: &StoreStats,
    outcomes: &[Outcome],
    objects: &[&Outcome],
) {
    // The disk filled up: entries were evicted to make room, as the budget never asked.
    assert!(stats.evictions > 0, "{stats:?}");
    // Every fill not started was counted as refused, and the metrics say so.
    let refused = outcomes.iter().filter(|o| o.refused()).count() as u64;
    assert_eq!(stats.disk.refused_fills, refused, "{stats:?}");
    let metrics = scrape(proxy).await;
    assert_eq!(
        sample(&metrics, "secondhit_disk_refused_fills_total"),
        refused as f64
    );
    assert_eq!(
        sample(&metrics, "secondhit_errors_total{kind=\"fill-disk-full\"}"),
        stats.dropped_fills.get(FillDrop::DiskFull) as f64
    );
    // A fill with a declared length has its room allocated before it says `stored`, so
    // only chunked fills can meet a full disk after that.
    let stored_chunked = objects
        .iter()
        .filter(|o| o.cache.stored && o.i.is_some_and(|i| i % 2 == 1))
        .count() as u64;
    let dropped = stats.dropped_fills;
    assert!(
        dropped.get(FillDrop::DiskFull) + dropped.get(FillDrop::StoreError) <= stored_chunked,
        "{dropped:?}, {stored_chunked} chunked fills stored"
    );
}

/// Requests again every one of `objects` that was stored, newest first, and asserts that
/// each answers with the origin's bytes and that some are hits.
async fn stored_objects_are_hits_with_the_origins_bytes(
    proxy: &TestProxy,
    objects: &[&Outcome],
    object_of: fn(usize) -> Vec<u8>,
) {
    // Objects still stored are hits, with the origin's bytes. Newest first: a re-fetch of
    // an evicted object stores it again and evicts the oldest, so in storing order every
    // survivor could be evicted just before its turn.
    let mut newest_first: Vec<usize> = objects
        .iter()
        .filter(|o| o.cache.stored)
        .filter_map(|o| o.i)
        .collect();
    newest_first.sort_by_key(|&i| std::cmp::Reverse(i));
    let mut hits = 0;
    for i in newest_first {
        let again = get(&proxy.url(&format!("/obj/{i}"))).await;
        assert_eq!(again.status, 200);
        assert!(again.body == object_of(i), "/obj/{i}");
        hits += u64::from(again.cache.hit);
    }
    assert!(hits > 0, "no stored object was a hit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(tests_as_root),
    ignore = "needs root to mount a tmpfs: run cargo test as root (.ci/run does)"
)]
async fn a_cache_on_a_full_disk_serves_every_client_whole_and_keeps_its_hits() {
    let fs = Tmpfs::mount("size=3m");
    // About 14 MB of objects on a 3 MiB filesystem.
    fill_past_the_limit(&fs, 150, object, |_| {}).await;
}

/// Inodes left free on the tmpfs once `prepare_inodes` ran.
const FREE_INODES: u64 = 40;

/// Makes the load run out of inodes on entry files: creates the `objects/ab/cd/`
/// directories of the load's keys (as a cache that has run a while has them), then takes
/// all but [`FREE_INODES`] of the remaining inodes with empty files beside the cache.
fn prepare_inodes(fs: &Tmpfs, proxy: &TestProxy, count: usize) {
    let paths = (0..count).map(|i| format!("/obj/{i}"));
    for path in paths.chain(["/warm".to_owned()]) {
        let hash = format!("{:032x}", Store::key_hash(&proxy.url(&path)));
        let dir = proxy
            .cache_dir
            .join("objects")
            .join(&hash[0..2])
            .join(&hash[2..4]);
        std::fs::create_dir_all(&dir).expect("objects/ab/cd");
    }
    let filler = fs.path().join("other");
    std::fs::create_dir(&filler).expect("filler directory");
    let free = || rustix::fs::statvfs(fs.path()).expect("statvfs").f_favail;
    let mut n = 0;
    while free() > FREE_INODES {
        std::fs::File::create(filler.join(n.to_string())).expect("filler file");
        n += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(tests_as_root),
    ignore = "needs root to mount a tmpfs: run cargo test as root (.ci/run does)"
)]
async fn a_cache_out_of_inodes_serves_every_client_whole_and_keeps_its_hits() {
    // Plenty of bytes, few inodes.
    let fs = Tmpfs::mount("size=64m,nr_inodes=4000");
    const COUNT: usize = 200;
    let small = |i: usize| body_bytes(1_000 + (i * 37) % 3_000, i as u8);
    fill_past_the_limit(&fs, COUNT, small, |proxy| prepare_inodes(&fs, proxy, COUNT)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(tests_as_root),
    ignore = "needs root to mount a tmpfs: run cargo test as root (.ci/run does)"
)]
async fn fills_evict_entries_to_keep_min_free_on_the_disk() {
    let fs = Tmpfs::mount("size=8m");
    const FLOOR: u64 = 3 * 1024 * 1024;
    let origin = origin(object).await;
    let proxy = proxy(&origin, &fs.path().join("cache"), FLOOR).await;
    proxy.wait_scanned().await;
    let mut stored = 0;
    // Objects with a declared length (even numbers), one at a time: each fill's room
    // above the floor is known before it starts.
    for i in (0..120).step_by(2) {
        let got = get(&proxy.url(&format!("/obj/{i}"))).await;
        assert!(got.body == object(i), "/obj/{i}");
        assert!(got.cache.stored, "/obj/{i}: {:?}", got.cache);
        stored += 1;
        proxy.wait_committed(stored).await;
        let free = fs.free_bytes();
        assert!(
            free >= FLOOR,
            "after /obj/{i}: {free} bytes free, below the floor of {FLOOR}"
        );
    }
    let stats = proxy.store.stats();
    assert!(stats.evictions > 0, "nothing was evicted: {stats:?}");
    assert!(stats.objects > 0, "{stats:?}");
    assert_eq!(stats.disk.refused_fills, 0, "{stats:?}");
    // The newest entry is still there.
    assert!(get(&proxy.url("/obj/118")).await.cache.hit);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(tests_as_root),
    ignore = "needs root to mount a tmpfs: run cargo test as root (.ci/run does)"
)]
async fn fills_resume_once_other_files_stop_filling_the_disk() {
    let fs = Tmpfs::mount("size=4m");
    let origin = origin(object).await;
    let proxy = proxy(&origin, &fs.path().join("cache"), 256 * 1024).await;
    proxy.wait_scanned().await;
    assert!(get(&proxy.url("/obj/0")).await.cache.stored);
    proxy.wait_committed(1).await;
    // Another file takes all but 8 KiB: evicting the one entry cannot make room.
    let filler = fs.path().join("other");
    let take = fs.free_bytes().saturating_sub(8 * 1024);
    std::fs::write(&filler, vec![0u8; usize::try_from(take).expect("size")]).expect("filler");
    let refused = get(&proxy.url("/obj/2")).await;
    assert!(
        refused.body == object(2),
        "the client still gets the whole body"
    );
    assert!(!refused.cache.stored, "{:?}", refused.cache);
    assert_eq!(refused.cache.detail.as_deref(), Some("disk-full"));
    // Hits go on while fills are refused.
    let hit = get(&proxy.url("/obj/0")).await;
    assert!(hit.cache.hit && hit.body == object(0), "{:?}", hit.cache);
    // Once the other file is gone, fills start again after the back-off.
    std::fs::remove_file(&filler).expect("remove filler");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut i = 4;
    loop {
        let seen = get(&proxy.url(&format!("/obj/{i}"))).await;
        assert!(seen.body == object(i), "/obj/{i}");
        if seen.cache.stored {
            break;
        }
        assert_eq!(seen.cache.detail.as_deref(), Some("disk-full"), "/obj/{i}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "fills never resumed: {:?}",
            proxy.store.stats().disk
        );
        // Paced on the wall clock, not `support::eventually`: each try fetches (and may
        // store) a new object, so a faster poll would fill the small disk faster.
        tokio::time::sleep(Duration::from_millis(50)).await;
        i += 2;
    }
    proxy.wait_committed(2).await;
    assert!(get(&proxy.url(&format!("/obj/{i}"))).await.cache.hit);
    assert_eq!(proxy.temp_files(), Vec::<PathBuf>::new());
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(tests_as_root),
    ignore = "needs root to mount a tmpfs: run cargo test as root (.ci/run does)"
)]
async fn on_a_disk_short_of_inodes_fills_evict_for_inodes_and_leave_no_empty_directories_behind() {
    // Few inodes, a floor of about a third of them: every new key's `objects/ab/cd/`
    // takes inodes too, which evictions must give back or fills stop for good.
    let fs = Tmpfs::mount("size=64m,nr_inodes=300");
    let small = |i: usize| body_bytes(1_000 + (i * 37) % 3_000, i as u8);
    let origin = origin(small).await;
    let proxy = proxy(&origin, &fs.path().join("cache"), 20 * 1024 * 1024).await;
    proxy.wait_scanned().await;
    const COUNT: usize = 600;
    let mut stored = 0;
    for i in (0..COUNT).map(|i| i * 2) {
        let got = get(&proxy.url(&format!("/obj/{i}"))).await;
        assert!(got.body == small(i), "/obj/{i}");
        if got.cache.stored {
            stored += 1;
            proxy.wait_committed(stored).await;
        }
        if i >= COUNT {
            assert!(
                got.cache.stored,
                "/obj/{i}, late in the run: {:?}",
                got.cache
            );
        }
    }
    let stats = proxy.store.stats();
    assert!(stats.evictions > 0, "{stats:?}");
    let objects = proxy.cache_dir.join("objects");
    let empty_leaves = std::fs::read_dir(&objects)
        .expect("objects/")
        .flatten()
        .filter(|top| top.path().is_dir())
        .flat_map(|top| {
            std::fs::read_dir(top.path())
                .expect("objects/ab/")
                .flatten()
        })
        .filter(|leaf| std::fs::read_dir(leaf.path()).is_ok_and(|mut items| items.next().is_none()))
        .count();
    assert_eq!(empty_leaves, 0, "evictions leave no empty directory behind");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(tests_as_root),
    ignore = "needs root to mount a tmpfs: run cargo test as root (.ci/run does)"
)]
async fn the_filters_are_saved_at_shutdown_on_a_disk_filled_to_the_last_byte() {
    let fs = Tmpfs::mount("size=16m");
    let origin = origin(object).await;
    let cache_dir = fs.path().join("cache");
    let second_hit = |c: &mut secondhit_proxy::config::Config| {
        c.cache.min_free = 0;
        c.cache.memory_size = 0;
    };
    let proxy = TestProxy::start_in(origin.addr, &cache_dir, second_hit).await;
    proxy.wait_scanned().await;
    // One Host for both runs: the restarted proxy listens on another port.
    let fetch = |proxy: &TestProxy| {
        let request = crate::support::client().get(proxy.url("/obj/2"));
        crate::support::send(request.header("host", "cache.test"))
    };
    let first = fetch(&proxy).await;
    assert_eq!(first.cache.detail.as_deref(), Some("first-sight"));
    // Something else takes every byte left, so a save needing new room fails (ENOSPC).
    let filler = fs.path().join("filler");
    let mut file = std::fs::File::create(&filler).expect("filler");
    let chunk = vec![0u8; 64 * 1024];
    while std::io::Write::write_all(&mut file, &chunk).is_ok() {}
    drop(file);
    proxy.stop().await;
    std::fs::remove_file(&filler).expect("free the disk again");

    let proxy = TestProxy::start_in(origin.addr, &cache_dir, second_hit).await;
    proxy.wait_scanned().await;
    let second = fetch(&proxy).await;
    assert!(
        second.cache.stored,
        "the restarted filters remember the first sight: {:?}",
        second.cache
    );
    proxy.stop().await;
}
