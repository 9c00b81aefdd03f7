//! Active health checks (`origin.health_check`): every server of a pool is asked `GET
//! path` every `interval`, the first time at once; the expected status puts it (back) in
//! rotation, anything else (another status, no connection, no answer within the probe's
//! own `timeout`, short by default so that a server that accepts connections but answers
//! nothing is out within seconds) takes it out.
//!
//! A probe goes out on the server's own connection pool, so it also keeps a connection
//! warm. Each server has a task of its own, holding the server weakly: when a reload
//! drops the client (the last snapshot naming it gone), its probes end; the new client's
//! probes start at once and write to the same state (`health`), keyed by URL.

use std::sync::{Arc, Weak};

use http::header::{HOST, USER_AGENT};
use http::{HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Limited};
use tokio::time::{Instant, MissedTickBehavior};

use super::{FieldLines, Server, empty_body};
use crate::config::HealthCheck;

/// Of a probe's answer, at most this much body is read (so that its connection can be
/// kept); a larger body closes the connection instead.
const MAX_BODY: usize = 64 * 1024;

/// Starts probing each of `servers` on the current runtime; without one (a config
/// check), there is nothing to probe for.
pub(super) fn start(servers: &[Arc<Server>], check: &HealthCheck) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    for server in servers {
        runtime.spawn(probe_every(Arc::downgrade(server), check.clone()));
    }
}

/// Probes `server` every `check.interval` until it is dropped.
async fn probe_every(server: Weak<Server>, check: HealthCheck) {
    let mut ticks = tokio::time::interval(check.interval);
    // A slow probe delays the next one rather than making the next ones come in a burst.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(server) = server.upgrade() else {
            return;
        };
        let (passed, detail) = probe(&server, &check).await;
        server.state.probed(passed, &detail);
    }
}

/// One probe: whether it passed, and what it saw.
async fn probe(server: &Server, check: &HealthCheck) -> (bool, String) {
    let timeout = check.timeout;
    let mut request = Box::new(Request::new(empty_body()));
    match Uri::try_from(check.path.as_str()) {
        Ok(uri) => *request.uri_mut() = uri,
        Err(error) => return (false, format!("health_check.path: {error}")),
    }
    let headers = request.headers_mut();
    headers.insert(HOST, server.origin_host.clone());
    headers.insert(
        USER_AGENT,
        HeaderValue::from_static("secondhit-health-check"),
    );
    let added = FieldLines::NONE;
    let sending = (server.pool).send(&server.address, request, &added, Instant::now());
    let response = match tokio::time::timeout(timeout, sending).await {
        Err(_) => {
            return (
                false,
                format!("no answer within {timeout:?} (health_check.timeout)"),
            );
        }
        Ok(Err(failed)) => return (false, failed.error.to_string()),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    // Read to its end (within the limits) so that the connection goes back to the pool.
    let body = Limited::new(response.into_body(), MAX_BODY).collect();
    let _ = tokio::time::timeout(timeout, body).await;
    (status.as_u16() == check.expect, format!("status {status}"))
}
