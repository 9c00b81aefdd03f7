//! The proxy's thread count and memory stay bounded while the origin is slow: hundreds of
//! concurrent misses, each stored, queue their file work on `server.blocking_threads`
//! instead of starting a thread each, and hold no more memory than their small bodies. The
//! real `secondhit serve` runs as a child process, so its `/proc/<pid>/task` holds its
//! threads alone.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::serve::ServeProcess;
use crate::support::{Reply, TestOrigin, body_bytes, client};

const WORKERS: usize = 2;
const BLOCKING_THREADS: usize = 4;
/// Threads beside the runtime's: `main` (which blocks on the runtime), the access log's
/// writer, the filter cleaner, the start-up scan (gone once it finished), the memory
/// release, and one to spare for any other helper.
const OTHER_THREADS: usize = 6;
const MISSES: usize = 200;
/// How much the resident set may grow per waiting miss over its size before the wave: above
/// what a waiting miss holds (connection and origin buffers, tasks, the fills' state;
/// `benches/RESULTS.md`, "resident set per waiting miss"), far below the 2 MiB stack a
/// thread per waiting request would add.
const RSS_GROWTH_PER_MISS_KIB: u64 = 256;

/// The resident set size of process `pid` in KiB (`VmRSS` in `/proc/<pid>/status`).
fn rss_kib(pid: u32) -> Option<u64> {
    crate::support::procfs::value(pid, "status", "VmRSS:")?
        .parse()
        .ok()
}

/// The names (`comm`) of the threads of process `pid`, with how many carry each.
fn threads_of(pid: u32) -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return names;
    };
    for task in tasks.flatten() {
        if let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) {
            *names.entry(comm.trim_end().to_owned()).or_insert(0) += 1;
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_and_memory_stay_bounded_while_hundreds_of_misses_wait_for_a_slow_origin() {
    let origin = TestOrigin::start(|head| {
        let seed = head.uri.path().len() as u8;
        Reply::ok("max-age=3600", body_bytes(20_000, seed)).delayed(Duration::from_secs(2))
    })
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = serve_storing_everything(&origin, dir.path()).await;
    let pid = serve.child.id().expect("child pid");
    let rss_before = rss_kib(pid).expect("VmRSS of the proxy");
    let misses = spawn_misses(&format!("http://{}", serve.addr));
    let Sampled {
        most,
        busiest,
        rss_peak,
        answered,
    } = sample_until_answered(pid, misses, rss_before).await;
    eprintln!(
        "at most {most} threads: {busiest:?}; RSS {rss_before} KiB before, {rss_peak} KiB at most"
    );
    assert!(
        answered
            .iter()
            .all(|&(status, len)| status == 200 && len == 20_000),
        "every miss gets the whole object"
    );
    let bound = WORKERS + BLOCKING_THREADS + OTHER_THREADS;
    assert!(most <= bound, "{most} threads, over {bound}: {busiest:?}");
    // The runtime's own threads never exceed its workers plus its blocking pool.
    let runtime = busiest.get("secondhit-rt").copied().unwrap_or(0);
    assert!(runtime <= WORKERS + BLOCKING_THREADS, "{busiest:?}");
    assert!(
        rss_peak - rss_before <= RSS_GROWTH_PER_MISS_KIB * MISSES as u64,
        "RSS grew from {rss_before} to {rss_peak} KiB while {MISSES} misses waited"
    );
    serve.kill().await;
}

/// Starts `secondhit serve` in front of `origin`, its cache and config in `dir`, with
/// [`WORKERS`] workers, [`BLOCKING_THREADS`] blocking threads, and `policy = "always"`.
async fn serve_storing_everything(origin: &TestOrigin, dir: &Path) -> ServeProcess {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\nworkers = {WORKERS}\n\
         blocking_threads = {BLOCKING_THREADS}\n\
         [origin]\nurl = \"http://{}\"\n\
         [cache]\ndir = \"{}\"\nfsync = false\n\
         [admission]\npolicy = \"always\"\nseed = \"thread tests\"\n\
         [log]\nformat = \"json\"\n",
        origin.addr,
        dir.join("cache").display(),
    );
    let config_path = dir.join("secondhit.toml");
    std::fs::write(&config_path, config).expect("write config");
    ServeProcess::start(&config_path).await
}

/// Sends [`MISSES`] concurrent GETs of distinct URLs to `base`, each task answering with
/// its status and body length.
fn spawn_misses(base: &str) -> tokio::task::JoinSet<(u16, usize)> {
    let client = client();
    let mut misses = tokio::task::JoinSet::new();
    for i in 0..MISSES {
        let (client, url) = (client.clone(), format!("{base}/slow/{i}"));
        misses.spawn(async move {
            let response = client.get(url).send().await.expect("response head");
            let status = response.status().as_u16();
            (status, response.bytes().await.expect("whole body").len())
        });
    }
    misses
}

/// What [`sample_until_answered`] saw of the proxy while the misses waited.
struct Sampled {
    /// The most threads the proxy had at once.
    most: usize,
    /// The proxy's threads by name when it had the most.
    busiest: BTreeMap<String, usize>,
    /// The largest resident set, in KiB.
    rss_peak: u64,
    /// Each miss's status and body length.
    answered: Vec<(u16, usize)>,
}

/// Samples the threads and the resident set of process `pid` every 20 ms until every one
/// of `misses` has its answer.
async fn sample_until_answered(
    pid: u32,
    mut misses: tokio::task::JoinSet<(u16, usize)>,
    rss_before: u64,
) -> Sampled {
    // Sample the thread count until every miss has its answer.
    let mut most = 0;
    let mut rss_peak = rss_before;
    let mut busiest = BTreeMap::new();
    let mut answered = Vec::new();
    while answered.len() < MISSES {
        let names = threads_of(pid);
        let total: usize = names.values().sum();
        rss_peak = rss_peak.max(rss_kib(pid).unwrap_or(0));
        if total > most {
            most = total;
            busiest = names;
        }
        tokio::select! {
            Some(done) = misses.join_next() => answered.push(done.expect("miss task")),
            // Wall clock: it samples the process's threads and RSS from /proc as they are.
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
    Sampled {
        most,
        busiest,
        rss_peak,
        answered,
    }
}
