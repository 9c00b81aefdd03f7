//! `/livez` and `/readyz` (with `/healthz`, its alias): whether this process runs, and
//! whether a balancer should send it traffic.
//!
//! `/livez` checks nothing but that the admin listener's runtime answers: a supervisor
//! restarts a process that stops answering it, and restarting never helps with a full disk
//! or a down origin.
//!
//! `/readyz` stays ready (`200`) while the node can serve something a client asked for —
//! hits, stale copies, misses passed through — and names in its JSON what is degraded:
//! every origin server of a site out of rotation, the disk under `cache.min_free` (or its
//! free space unreadable), fills backing off after failed writes, the start-up scan still
//! indexing. Taking a node out for these would move its share of the URLs to nodes that
//! hold none of them, during an origin outage exactly when its stored copies matter. It is
//! not ready (`503`) when the store cannot be used at all — its directory takes no write,
//! or what was written cannot be read back, or its entries' directory cannot be listed —
//! or when the process is shutting down. The file work goes to a blocking thread, so a hung
//! disk delays `/readyz` but no request of the runtime's.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::StatusCode;
use serde_json::{Value, json};

use crate::live::Snapshot;
use crate::store::Store;

/// The start of the name of the file `/readyz` writes, reads back and removes in the
/// state directory.
const PROBE_FILE: &str = ".readyz-probe";

/// What `/readyz` writes into its probe file and expects to read back.
const PROBE_BYTES: &[u8] = b"ok";

/// The body of `/livez`: the process answers, nothing else is checked.
pub(super) fn live() -> (StatusCode, Value) {
    (StatusCode::OK, json!({ "status": "live" }))
}

/// One thing a readiness check found wrong, from where it is found to where it is
/// rendered (its name, its sentence, and whether it takes the node out).
#[derive(Debug)]
enum Finding {
    /// The store's directories take no write, or give no read back.
    StoreUnusable(String),
    /// The process is shutting down: its listeners no longer accept.
    Draining,
    /// Fills are held back after failed cache writes.
    FillsBackingOff,
    /// The cache's filesystem has less than `cache.min_free` available.
    DiskLow { free: u64, min_free: u64 },
    /// The cache's filesystem's free space cannot be read.
    DiskUnreadable(String),
    /// Every origin server of the site is out of rotation.
    OriginsDown { site: String },
    /// The start-up scan is still indexing stored entries.
    Scanning,
}

impl Finding {
    /// Its name in the body's `failing` or `degraded` list.
    fn name(&self) -> &'static str {
        match self {
            Finding::StoreUnusable(_) => "store-unusable",
            Finding::Draining => "draining",
            Finding::FillsBackingOff => "fills-backing-off",
            Finding::DiskLow { .. } => "disk-low",
            Finding::DiskUnreadable(_) => "disk-unreadable",
            Finding::OriginsDown { .. } => "origins-down",
            Finding::Scanning => "scan-running",
        }
    }

    /// Whether it takes the node out of rotation; the others leave it serving hits and
    /// stale copies.
    fn fails(&self) -> bool {
        matches!(self, Finding::StoreUnusable(_) | Finding::Draining)
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::StoreUnusable(error) => write!(f, "the store cannot be used: {error}"),
            Finding::Draining => f.write_str("the process is shutting down"),
            Finding::FillsBackingOff => {
                f.write_str("fills are backing off after failed cache writes")
            }
            Finding::DiskLow { free, min_free } => write!(
                f,
                "the cache's disk has {free} bytes free, under cache.min_free ({min_free}): \
                 no new entries are stored"
            ),
            Finding::DiskUnreadable(error) => {
                write!(f, "cannot read the cache disk's free space: {error}")
            }
            Finding::OriginsDown { site } => write!(
                f,
                "site {site}: every origin server is out of rotation; \
                 only stored copies are served"
            ),
            Finding::Scanning => f.write_str(
                "the start-up scan is still indexing stored entries: some are misses until it reaches them",
            ),
        }
    }
}

/// The verdict of `/readyz`: its status code and its `status` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readiness {
    /// Nothing found.
    Ok,
    /// Ready, with something degraded.
    Degraded,
    /// Not ready.
    Fail,
}

impl Readiness {
    /// The verdict over `findings`.
    fn of(findings: &[Finding]) -> Readiness {
        match (findings.iter().any(Finding::fails), findings.is_empty()) {
            (true, _) => Readiness::Fail,
            (false, true) => Readiness::Ok,
            (false, false) => Readiness::Degraded,
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Readiness::Ok | Readiness::Degraded => StatusCode::OK,
            Readiness::Fail => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Readiness::Ok => "ok",
            Readiness::Degraded => "degraded",
            Readiness::Fail => "fail",
        }
    }
}

/// The status and the JSON body of `/readyz` (and `/healthz`); `draining` once the
/// process is shutting down.
pub(super) async fn ready(
    store: &Store,
    live: &Arc<Snapshot>,
    draining: bool,
) -> (StatusCode, Value) {
    let mut findings: Vec<Finding> = Vec::new();
    if draining {
        findings.push(Finding::Draining);
    }
    let usable = usable(store).await;
    if let Err(error) = &usable {
        findings.push(Finding::StoreUnusable(error.clone()));
    }
    let stats = store.stats();
    if stats.disk.backing_off {
        findings.push(Finding::FillsBackingOff);
    }
    if !stats.scan_complete {
        findings.push(Finding::Scanning);
    }
    let min_free = live.settings.cache.min_free;
    let free = free_bytes(&live.settings.cache.dir);
    match &free {
        Ok(free) if *free < min_free => findings.push(Finding::DiskLow {
            free: *free,
            min_free,
        }),
        Ok(_) => {}
        Err(error) => findings.push(Finding::DiskUnreadable(error.to_string())),
    }
    let sites = sites(live, &mut findings);
    let verdict = Readiness::of(&findings);
    let body = json!({
        "status": verdict.as_str(),
        "failing": names(&findings, true),
        "degraded": names(&findings, false),
        "problems": findings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "store": {
            "usable": usable.is_ok(),
            "backing_off": stats.disk.backing_off,
            "scan_complete": stats.scan_complete,
        },
        "disk": { "free_bytes": free.as_ref().ok(), "min_free": min_free },
        "sites": sites,
    });
    (verdict.status(), body)
}

/// The names of the `findings` that fail readiness (`fails`), or of those that degrade it,
/// each once.
fn names(findings: &[Finding], fails: bool) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for finding in findings.iter().filter(|f| f.fails() == fails) {
        if !names.contains(&finding.name()) {
            names.push(finding.name());
        }
    }
    names
}

/// Whether the store's directories can be used ([`probe`], on a blocking thread), or why
/// not.
async fn usable(store: &Store) -> Result<(), String> {
    let (state_dir, objects_dir) = (store.state_dir(), store.objects_dir());
    match tokio::task::spawn_blocking(move || probe(&state_dir, &objects_dir)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(error) => Err(format!("the check did not finish: {error}")),
    }
}

/// Each site's origin servers and whether they are in rotation; a site with none in
/// rotation adds [`Finding::OriginsDown`].
fn sites(live: &Snapshot, findings: &mut Vec<Finding>) -> Vec<Value> {
    (live.sites.all())
        .map(|site| {
            let servers = site.origin.servers_up();
            let up = servers.iter().filter(|(_, up)| *up).count();
            if up == 0 {
                findings.push(Finding::OriginsDown {
                    site: site.name.clone(),
                });
            }
            let servers: Vec<Value> = (servers.into_iter())
                .map(|(url, up)| json!({ "url": url, "up": up }))
                .collect();
            json!({ "site": site.name, "servers_up": up, "servers": servers })
        })
        .collect()
}

/// Writes a probe file in `state`, reads it back and removes it, then lists `objects`:
/// what serving and storing need of the cache directory.
fn probe(state: &Path, objects: &Path) -> std::io::Result<()> {
    // A name per check, so that checks at the same moment never remove each other's file.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = state.join(format!(
        "{PROBE_FILE}-{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, PROBE_BYTES)?;
    let read = std::fs::read(&path);
    std::fs::remove_file(&path)?;
    if read? != PROBE_BYTES {
        let differs = "the probe file read back differs from what was written";
        return Err(std::io::Error::other(differs));
    }
    std::fs::read_dir(objects).map(drop)
}

/// Bytes available to an unprivileged writer on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let stats = rustix::fs::statvfs(dir)?;
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}
