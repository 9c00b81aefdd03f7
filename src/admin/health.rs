//! `/healthz`: whether this node can do its job, for a balancer in front of several
//! nodes to take a sick one out.
//!
//! Three checks, each named in the JSON body:
//! - `store`: the cache directory takes a write (a small file is created in its state
//!   directory and removed), and fills are not backing off after write failures;
//! - `disk`: the cache's filesystem has more than `cache.min_free` available (read
//!   fresh with `statvfs`);
//! - `sites`: every site has at least one origin server in rotation.
//!
//! All passing: `200` and `"status": "ok"`; any failing: `503`, `"status": "fail"`,
//! and `problems` lists each failure in a sentence. The file write goes to a blocking
//! thread, so a hung disk delays `/healthz` but no request of the runtime's.

use std::path::Path;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};

use crate::live::Snapshot;
use crate::store::Store;

/// The file `/healthz` writes and removes in the state directory.
const PROBE_FILE: &str = ".healthz-probe";

/// The status and the JSON body of `/healthz`.
pub(super) async fn report(store: &Store, live: &Arc<Snapshot>) -> (StatusCode, Value) {
    let mut problems: Vec<String> = Vec::new();
    let state_dir = store.state_dir();
    let written = tokio::task::spawn_blocking(move || write_probe(&state_dir)).await;
    let write_error = match written {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(error.to_string()),
        Err(error) => Some(format!("the write check did not finish: {error}")),
    };
    let backing_off = store.stats().disk.backing_off;
    if let Some(error) = &write_error {
        problems.push(format!("the store is not writable: {error}"));
    }
    if backing_off {
        problems.push("the store is backing off after failed writes".to_owned());
    }
    let min_free = live.settings.cache.min_free;
    let free = free_bytes(&live.settings.cache.dir);
    match &free {
        Ok(free) if *free < min_free => problems.push(format!(
            "the cache's disk has {free} bytes free, under cache.min_free ({min_free})"
        )),
        Ok(_) => {}
        Err(error) => problems.push(format!("cannot read the cache disk's free space: {error}")),
    }
    let sites: Vec<Value> = (live.sites.all())
        .map(|site| {
            let servers = site.origin.servers_up();
            let up = servers.iter().filter(|(_, up)| *up).count();
            if up == 0 {
                problems.push(format!(
                    "site {}: every origin server is out of rotation",
                    site.name
                ));
            }
            let servers: Vec<Value> = (servers.into_iter())
                .map(|(url, up)| json!({ "url": url, "up": up }))
                .collect();
            json!({ "site": site.name, "servers_up": up, "servers": servers })
        })
        .collect();
    let status = match problems.is_empty() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    let body = json!({
        "status": if problems.is_empty() { "ok" } else { "fail" },
        "problems": problems,
        "store": { "writable": write_error.is_none(), "backing_off": backing_off },
        "disk": {
            "free_bytes": free.as_ref().ok(),
            "min_free": min_free,
        },
        "sites": sites,
    });
    (status, body)
}

/// Creates, writes and removes [`PROBE_FILE`] in `dir`.
fn write_probe(dir: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let path = dir.join(PROBE_FILE);
    let mut file = std::fs::File::create(&path)?;
    file.write_all(b"ok")?;
    drop(file);
    match std::fs::remove_file(&path) {
        // Another `/healthz` at the same moment removed it first.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Bytes available to an unprivileged writer on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let stats = rustix::fs::statvfs(dir)?;
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}
