//! What a memory-tier hit costs the store when several threads hit the same key, against
//! when they hit different keys: the cache-line traffic of the counts and locks a hit
//! writes, which a wrk run across cores shows only as CPU time per request.
//!
//! # Workload
//! A store with its memory tier on, holding one 1 KiB entry and 1,000 others, with the
//! response headers a static file gets (content type, length, dates, validators, cache
//! control). Each of `T` threads (1, then 2), each pinned to a CPU of its own and with
//! its own single-threaded runtime as a worker has, looks entries up for 2 s and does with each what a response does:
//! clones the stored header map and the body, then drops them. `hot`: every lookup of
//! every thread is the one entry; `spread`: each thread picks among the 1,000 others
//! uniformly at random, with a generator of its own; `large`: every lookup is one 100
//! KiB entry, which the tier holds as a sealed memory file, and each also finds the
//! body's file twice, as sending a head and then the body with `sendfile` does;
//! `absent`: every lookup is one key the store does not hold, as each request for a URL
//! passed through again and again looks it up. Prints ns per lookup per thread (the
//! thread's time over its lookups) and the lookups per second of all threads together.
//!
//! # Running
//! `cargo bench --bench hot_lookup` (about 50 s with its build). Results: `benches/RESULTS.md`.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};
use secondhit_proxy::config::Fsync;
use secondhit_store::entry::EntryMeta;
use secondhit_store::{Store, StoreHash, StoreOptions, mapped};

const SPREAD: usize = 1000;
const LARGE: usize = 100 * 1024;
const RUN: Duration = Duration::from_secs(2);

fn meta() -> EntryMeta {
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("content-type", "text/html; charset=utf-8"),
        ("content-length", "1024"),
        ("date", "Fri, 27 Nov 2026 12:00:00 GMT"),
        ("last-modified", "Thu, 26 Nov 2026 12:00:00 GMT"),
        ("etag", "\"6747c1a0-400\""),
        ("cache-control", "max-age=7200"),
        ("expires", "Fri, 27 Nov 2026 14:00:00 GMT"),
    ] {
        // From bytes, as the store decodes them: owned buffers, not statics.
        let value = HeaderValue::from_bytes(value.as_bytes()).expect("a valid value");
        headers.append(name, value);
    }
    EntryMeta {
        request_time: SystemTime::now(),
        response_time: SystemTime::now(),
        status: StatusCode::OK,
        response_headers: headers,
        request_headers: HeaderMap::new(),
        tags: Vec::new(),
        purged: None,
    }
}

async fn put(store: &Store, key: &str, len: usize) {
    let body = vec![b'x'; len];
    let mut writer = store
        .begin_fill(
            key,
            Store::key_hash(key),
            &meta(),
            Some(len as u64),
            1 << 20,
            store.fill_ticket(),
        )
        .await
        .expect("a fill starts");
    writer.write(&body).await.expect("the body is written");
    writer.finish().await.expect("the fill finishes");
}

/// Looks `key` up and does with it what a response does; false if it is not there.
async fn hit(store: &Store, key: &str, hash: StoreHash) -> bool {
    let Ok(Some(entry)) = store.lookup(key, hash).await else {
        return false;
    };
    let headers = entry.meta.response_headers.clone();
    let body = entry.body_in_memory().cloned();
    if let Some(body) = &body
        && body.len() >= LARGE
    {
        for _ in 0..2 {
            let found = mapped::with_file_span(body, |file, offset| {
                std::hint::black_box((file, offset));
            });
            assert!(found.is_some(), "a large body is mapped");
        }
    }
    std::hint::black_box((&headers, &body));
    body.is_some()
}

/// Pins this thread to the `n`th CPU it may run on, so that two threads never share one
/// (the scheduler sometimes put both on one CPU, which doubled each one's time per lookup).
fn pin_to_cpu(n: usize) {
    use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
    let Ok(allowed) = sched_getaffinity(None) else {
        return;
    };
    let Some(cpu) = (0..CpuSet::MAX_CPU)
        .filter(|&cpu| allowed.is_set(cpu))
        .nth(n)
    else {
        eprintln!("hot_lookup: fewer CPUs than threads; thread {n} is not pinned");
        return;
    };
    let mut only = CpuSet::new();
    only.set(cpu);
    if let Err(error) = sched_setaffinity(None, &only) {
        eprintln!("hot_lookup: cannot pin thread {n} to CPU {cpu}: {error}");
    }
}

/// Which keys a run looks up.
#[derive(Clone, Copy)]
enum Case {
    Hot,
    Spread,
    Large,
    /// One key the store does not hold, as a URL passed through again and again is.
    Absent,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Hot => "hot",
            Case::Spread => "spread",
            Case::Large => "large",
            Case::Absent => "absent",
        }
    }
}

/// Runs `threads` threads of lookups of the keys `case` names.
fn run(store: &Arc<Store>, threads: usize, keys: &Arc<Vec<(String, StoreHash)>>, case: Case) {
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let (store, keys, start) = (Arc::clone(store), Arc::clone(keys), Arc::clone(&start));
            std::thread::spawn(move || {
                pin_to_cpu(thread);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("a runtime");
                runtime.block_on(async move {
                    start.wait();
                    let began = Instant::now();
                    let mut lookups = 0u64;
                    // SplitMix64, seeded per thread: the threads' orders are unrelated.
                    let mut state = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(thread as u64 + 1);
                    let mut next = move || {
                        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                        let mut z = state;
                        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                        (z ^ (z >> 31)) as usize
                    };
                    while began.elapsed() < RUN {
                        for _ in 0..256 {
                            let (key, hash) = match case {
                                Case::Hot => &keys[0],
                                Case::Spread => &keys[1 + next() % SPREAD],
                                Case::Large => &keys[SPREAD + 1],
                                Case::Absent => &keys[SPREAD + 2],
                            };
                            let stored = !matches!(case, Case::Absent);
                            assert_eq!(hit(&store, key, *hash).await, stored, "{key}");
                            lookups += 1;
                        }
                    }
                    (began.elapsed(), lookups)
                })
            })
        })
        .collect();
    let results: Vec<(Duration, u64)> = handles
        .into_iter()
        .map(|h| h.join().expect("a lookup thread"))
        .collect();
    let per_thread: Vec<String> = results
        .iter()
        .map(|(took, n)| format!("{:.1}", took.as_nanos() as f64 / *n as f64))
        .collect();
    let total: f64 = results
        .iter()
        .map(|(took, n)| *n as f64 / took.as_secs_f64())
        .sum();
    println!(
        "{:<6} threads={threads}  ns/lookup per thread: {:<14} lookups/s: {:.0}",
        case.name(),
        per_thread.join(", "),
        total
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Store::open(StoreOptions {
        dir: dir.path().to_owned(),
        fsync: Fsync::Off,
        max_size: 1 << 30,
        lock_timeout: Duration::from_secs(5),
        verify_whole_below: 64 * 1024,
        memory_size: 64 << 20,
        memory_max_object_size: 1 << 20,
        open_files: 16,
        min_free: 0,
        tag_memory: u64::MAX,
        max_write_rate: 0,
    })
    .expect("the store opens");
    let store = Arc::new(store);
    let keys: Arc<Vec<(String, StoreHash)>> = Arc::new(
        (0..=SPREAD + 2)
            .map(|i| {
                let key = format!("GET http://bench.test/object/{i}");
                let hash = Store::key_hash(&key);
                (key, hash)
            })
            .collect(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        // The last key is never stored.
        for (i, (key, hash)) in keys.iter().enumerate().take(SPREAD + 2) {
            put(&store, key, if i == SPREAD + 1 { LARGE } else { 1024 }).await;
            // Twice: the first lookup reads the file and offers the tier a copy.
            hit(&store, key, *hash).await;
            assert!(hit(&store, key, *hash).await, "{key} is stored");
        }
    });
    for threads in [1, 2] {
        for case in [Case::Hot, Case::Spread, Case::Large, Case::Absent] {
            run(&store, threads, &keys, case);
        }
    }
}
