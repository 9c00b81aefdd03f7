//! The HTTP bench: a workload driven through the real proxy, entirely on loopback.
//!
//! For each policy [`run_policy`] starts a [`SyntheticOrigin`], the real proxy ([`Server`])
//! with a fresh cache directory and the same byte budget, and `concurrency` client tasks
//! that share one keep-alive connection pool and take the workload's requests in order.
//! Client-side figures (hits from `Cache-Status`, bytes, latency in an HDR histogram) are
//! combined with the origin's counters and the store's write statistics into a
//! [`PolicyReport`]. `--target` drives an already running proxy instead: see
//! [`super::replay`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};

use crate::policies::ExactSecondHit;
use crate::report::PolicyReport;
use crate::synthetic_origin::SyntheticOrigin;
use crate::workload::Workload;
use secondhit_admission::Policy;
use secondhit_proxy::cache_status::CACHE_STATUS;
use secondhit_proxy::config::{AccessLog, AdmissionPolicy, Config, Fsync};
use secondhit_proxy::server::StartError;
use secondhit_proxy::server::{Server, Stop};
use secondhit_store::Store;

/// How requests are driven.
#[derive(Clone, Debug)]
pub struct DriveOptions {
    /// Requests in flight at once (one pooled connection each).
    pub concurrency: usize,
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
}

/// Why a bench run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The synthetic origin or the temp cache directory could not be set up.
    #[error("bench set-up failed: {0}")]
    Setup(#[from] std::io::Error),
    /// The proxy did not start.
    #[error("the proxy did not start: {0}")]
    Proxy(#[from] StartError),
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// A policy name the bench does not know.
    #[error("unknown policy {0:?}")]
    UnknownPolicy(String),
    /// `--target` is not an http:// URL.
    #[error("--target must be an http:// URL, got {0:?}")]
    Target(String),
}

/// What the clients saw.
struct ClientFigures {
    requests: u64,
    failures: u64,
    hits: u64,
    bytes: u64,
    hit_bytes: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
}

/// Runs `workload` through a fresh proxy using `admission`, with `cache_size` bytes of disk.
///
/// `config` supplies everything but the listeners, origin, cache directory and budget,
/// which the run sets itself (fsync off and access log off: the bench counts writes,
/// it does not measure the disk's flush latency).
pub async fn run_policy(
    workload: &Workload,
    policy: &str,
    config: &Config,
    cache_size: u64,
    options: &DriveOptions,
) -> Result<PolicyReport, BenchError> {
    let origin = SyntheticOrigin::start().await?;
    let cache_dir = tempfile::Builder::new()
        .prefix("secondhit-bench-")
        .tempdir()?;
    let mut config = config.clone();
    config.server.listen = ([127, 0, 0, 1], 0).into();
    // One proxy per policy, one after another: none needs an admin listener, and the
    // default's fixed port could be taken.
    config.server.admin_listen = None;
    config.origin.url = format!("http://{}", origin.addr())
        .parse()
        .map_err(|_| BenchError::Target(origin.addr().to_string()))?;
    config.cache.dir = cache_dir.path().join("cache");
    config.cache.max_size = cache_size;
    config.cache.fsync = Fsync::Off;
    config.log.access_log = AccessLog::Off;
    // The proxy's own policies are built from the config, exactly as `serve` builds them
    // (so `rotate = "auto"` counts this cache's objects); the reference policy is handed in.
    let server = match policy {
        "second-hit" | "always" | "auto" => {
            config.admission.policy = match policy {
                "always" => AdmissionPolicy::Always,
                "auto" => AdmissionPolicy::Auto,
                _ => AdmissionPolicy::SecondHit,
            };
            Server::bind(&config).await?
        }
        "exact-second-hit" => {
            let policy = Policy::new(Arc::new(ExactSecondHit::default()));
            Server::bind_with_admission(&config, policy).await?
        }
        other => return Err(BenchError::UnknownPolicy(other.to_owned())),
    };
    let admission = server.admission();
    let addr = server.local_addr()?;
    let store = server.store();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run(async move {
        let _ = stopped.await;
        Stop::Shutdown
    }));

    let figures = drive(workload, &format!("http://{addr}"), options, policy).await?;
    wait_for_fills(&store, Duration::from_secs(10)).await;
    let writes = store.stats();
    let _ = stop.send(());
    let _ = serving.await;

    let mut report = client_report(policy, &figures);
    report.disk_write_objects = Some(writes.committed_fills);
    report.disk_write_bytes = Some(writes.committed_bytes);
    report.origin_requests = Some(origin.counters().requests());
    report.origin_bytes = Some(origin.counters().bytes());
    report.admission_memory_bytes = Some(admission.memory_bytes());
    Ok(report)
}

/// Waits until no fill holds a reservation (every fill committed or dropped), or `timeout`
/// passed: fills commit just after their responses end, so this lets the last ones land
/// before the writes are counted.
async fn wait_for_fills(store: &Store, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    while store.stats().reserved_bytes > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn client_report(policy: &str, figures: &ClientFigures) -> PolicyReport {
    let ratio = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    };
    let millis = |quantile: f64| figures.latency_us.value_at_quantile(quantile) as f64 / 1000.0;
    PolicyReport {
        policy: policy.to_owned(),
        requests: figures.requests,
        failed_requests: figures.failures,
        hit_ratio: ratio(figures.hits, figures.requests),
        byte_hit_ratio: ratio(figures.hit_bytes, figures.bytes),
        disk_write_objects: None,
        disk_write_bytes: None,
        origin_requests: None,
        origin_bytes: None,
        admission_memory_bytes: None,
        throughput_rps: Some(figures.requests as f64 / figures.elapsed.as_secs_f64().max(1e-9)),
        p50_ms: Some(millis(0.5)),
        p99_ms: Some(millis(0.99)),
        p999_ms: Some(millis(0.999)),
    }
}

/// Sends every request of `workload` to `base`, `concurrency` at a time.
async fn drive(
    workload: &Workload,
    base: &str,
    options: &DriveOptions,
    label: &str,
) -> Result<ClientFigures, BenchError> {
    let concurrency = options.concurrency.max(1);
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()?;
    let progress = progress_bar(workload.requests.len() as u64, label, options.progress);
    let requests: Arc<[crate::workload::Request]> = workload.requests.clone().into();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, requests, next, progress) = (
                client.clone(),
                requests.clone(),
                next.clone(),
                progress.clone(),
            );
            let base = base.to_owned();
            tokio::spawn(async move { worker(&client, &base, &requests, &next, &progress).await })
        })
        .collect();
    let mut total = ClientFigures::new();
    for worker in workers {
        // A worker only ends by running out of requests; a panic there is a bug worth seeing.
        let figures = worker.await.map_err(std::io::Error::other)?;
        total.requests += figures.requests;
        total.failures += figures.failures;
        total.hits += figures.hits;
        total.bytes += figures.bytes;
        total.hit_bytes += figures.hit_bytes;
        // Both histograms share bounds, so adding cannot fail.
        let _ = total.latency_us.add(&figures.latency_us);
    }
    total.elapsed = started.elapsed();
    progress.finish_and_clear();
    Ok(total)
}

/// A progress bar of `len` requests labelled `label` on stderr, or a hidden one.
pub(super) fn progress_bar(len: u64, label: &str, shown: bool) -> ProgressBar {
    let progress = if shown {
        ProgressBar::new(len)
    } else {
        ProgressBar::hidden()
    };
    progress.set_style(
        ProgressStyle::with_template("{prefix:>17} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    progress.set_prefix(label.to_owned());
    progress
}

/// An empty histogram of latencies in microseconds.
pub(super) fn latency_histogram() -> Histogram<u64> {
    // 1 µs to 10 minutes at 3 significant digits: constant bounds hdrhistogram accepts.
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("constant histogram bounds are valid")
}

impl ClientFigures {
    fn new() -> ClientFigures {
        ClientFigures {
            requests: 0,
            failures: 0,
            hits: 0,
            bytes: 0,
            hit_bytes: 0,
            elapsed: Duration::ZERO,
            latency_us: latency_histogram(),
        }
    }
}

async fn worker(
    client: &reqwest::Client,
    base: &str,
    requests: &[crate::workload::Request],
    next: &AtomicUsize,
    progress: &ProgressBar,
) -> ClientFigures {
    let mut figures = ClientFigures::new();
    loop {
        // Relaxed: the counter only hands out distinct indices.
        let index = next.fetch_add(1, Ordering::Relaxed);
        let Some(request) = requests.get(index) else {
            break;
        };
        let started = Instant::now();
        let outcome = async {
            let response = client
                .get(format!("{base}{}", request.path()))
                .send()
                .await?;
            // Served without an origin request of its own: a hit, or a miss collapsed
            // into another request's fetch of the key (the origin offload a hit ratio
            // stands for; the origin's own count agrees with it).
            let hit = response
                .headers()
                .get(CACHE_STATUS)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| {
                    v.split(';')
                        .any(|param| matches!(param.trim(), "hit" | "collapsed"))
                });
            let ok = response.status().is_success();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((ok, hit, body.len() as u64))
        }
        .await;
        figures.requests += 1;
        match outcome {
            Ok((true, hit, length)) => {
                figures.bytes += length;
                if hit {
                    figures.hits += 1;
                    figures.hit_bytes += length;
                }
            }
            Ok((false, ..)) | Err(_) => figures.failures += 1,
        }
        let _ = figures
            .latency_us
            .record(started.elapsed().as_micros().max(1) as u64);
        progress.inc(1);
    }
    figures
}
