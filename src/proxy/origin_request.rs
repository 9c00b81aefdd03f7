//! The one way the request path reaches an origin: an [`OriginRequest`], made from the
//! client's head where a request first needs its site's origin (never for a hit), sends
//! every request for it — a pass-through, a miss, a revalidation, the background refresh
//! of `stale-while-revalidate` — to the client's target and host, with the forwarding
//! fields added.

use std::sync::Arc;

use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderValue, Method, request};

use crate::hygiene::{ClientConnection, Forwarding};
use crate::key::KeyError;
use crate::origin::{OriginError, OriginResponse, RequestBody};
use crate::proxy::error::ProxyError;
use crate::sites::Site;

/// Where and how a client's request reaches its site's origin. Owned, so that a
/// background refresh can outlive the request it was made from.
pub(super) struct OriginRequest {
    /// The site whose origin is asked.
    site: Arc<Site>,
    /// The client's own path and query.
    target: PathAndQuery,
    /// What the client named as host (sent on when the origin's `host_header` says so).
    host: HeaderValue,
    /// The fields added to every request sent for the client.
    forwarding: Forwarding,
}

impl OriginRequest {
    /// The origin request for the client's `head` from `client` to `site`; fails when
    /// the client named no host.
    pub(super) fn of(
        head: &request::Parts,
        client: ClientConnection,
        site: &Arc<Site>,
    ) -> Result<OriginRequest, ProxyError> {
        let target =
            (head.uri.path_and_query().cloned()).unwrap_or_else(|| PathAndQuery::from_static("/"));
        let forwarding = Forwarding::of(head, client);
        let host = forwarding.client_host().cloned();
        Ok(OriginRequest {
            site: Arc::clone(site),
            target,
            host: host.ok_or(ProxyError::BadRequest(KeyError::MissingHost))?,
            forwarding,
        })
    }

    /// Sends `method` with `headers` (the client's end-to-end fields, as the caller
    /// shaped them) and `body` to the origin, adding the forwarding fields.
    pub(super) async fn send(
        &self,
        method: Method,
        mut headers: HeaderMap,
        body: RequestBody,
    ) -> Result<OriginResponse, OriginError> {
        self.forwarding.apply(&mut headers);
        let (origin, target, host) = (&self.site.origin, self.target.as_str(), self.host.clone());
        origin.send(method, target, headers, host, body).await
    }
}
