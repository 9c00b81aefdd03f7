//! The one way the request path reaches an origin: an [`OriginRequest`], made from the
//! client's head where a request first needs its site's origin (never for a hit), sends
//! every request for it — a pass-through, a miss, a revalidation, the background refresh
//! of `stale-while-revalidate` — to the client's target and host, with the forwarding
//! fields added and, for a GET or HEAD, `cache.strip_request_fields` removed.

use std::sync::Arc;

use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Method, request};

use crate::hygiene::{ClientConnection, Forwarding};
use crate::key::KeyError;
use crate::origin::{OriginError, OriginResponse, RequestBody};
use crate::proxy::error::ProxyError;
use crate::sites::Site;

/// Where and how a client's request reaches its site's origin. A request's own borrows
/// its site; [`OriginRequest::into_owned`] makes one a background refresh can keep after
/// the request ends.
pub(super) struct OriginRequest<'a> {
    /// The site whose origin is asked.
    site: SiteRef<'a>,
    /// The client's own path and query.
    target: PathAndQuery,
    /// What the client named as host (sent on when the origin's `host_header` says so).
    host: HeaderValue,
    /// The fields added to every request sent for the client.
    forwarding: Forwarding,
    /// The fields removed from every request sent for the client: for a GET or HEAD,
    /// `cache.strip_request_fields`, since its answer may be stored under a key they
    /// are not part of; for any other method none, since nothing of its is stored.
    strip: Option<Arc<[HeaderName]>>,
}

/// The target the origin is asked for on the client's behalf: the path and query of the
/// client's (normalised) target, `/` when it has none.
pub(crate) fn forwarded_target(head: &request::Parts) -> PathAndQuery {
    (head.uri.path_and_query().cloned()).unwrap_or_else(|| PathAndQuery::from_static("/"))
}

/// The site of an [`OriginRequest`]: borrowed from the request's snapshot, so that a
/// request takes no count on a site every worker shares, or held by a refresh.
enum SiteRef<'a> {
    Borrowed(&'a Arc<Site>),
    Owned(Arc<Site>),
}

impl<'a> OriginRequest<'a> {
    /// The origin request for the client's `head` from `client` to `site`, without the
    /// fields `strip` names when it is a GET or HEAD; fails when the client named no host.
    pub(super) fn of(
        head: &request::Parts,
        client: ClientConnection,
        site: &'a Arc<Site>,
        strip: &Arc<[HeaderName]>,
    ) -> Result<OriginRequest<'a>, ProxyError> {
        let target = forwarded_target(head);
        let forwarding = Forwarding::of(head, client);
        let host = forwarding.client_host().cloned();
        Ok(OriginRequest {
            site: SiteRef::Borrowed(site),
            target,
            host: host.ok_or(ProxyError::BadRequest(KeyError::MissingHost))?,
            forwarding,
            strip: (matches!(head.method, Method::GET | Method::HEAD) && !strip.is_empty())
                .then(|| Arc::clone(strip)),
        })
    }

    /// Sends `method` with `headers` (the client's end-to-end fields, as the caller
    /// shaped them) and `body` to the origin, with the forwarding fields after them
    /// ([`Forwarding::lines`]) and without those it strips.
    pub(super) async fn send(
        &self,
        method: Method,
        mut headers: HeaderMap,
        body: RequestBody,
    ) -> Result<OriginResponse, OriginError> {
        if let Some(strip) = &self.strip {
            crate::hygiene::strip_fields(&mut headers, strip);
        }
        let added = self.forwarding.lines(&mut headers);
        let site = match &self.site {
            SiteRef::Borrowed(site) => site,
            SiteRef::Owned(site) => site,
        };
        let (target, host) = (self.target.clone(), self.host.clone());
        (site
            .origin
            .send(method, target, headers, &added, host, body))
        .await
    }

    /// The same request, holding its site for as long as it is kept.
    pub(super) fn into_owned(self) -> OriginRequest<'static> {
        let site = match self.site {
            SiteRef::Borrowed(site) => Arc::clone(site),
            SiteRef::Owned(site) => site,
        };
        OriginRequest {
            site: SiteRef::Owned(site),
            target: self.target,
            host: self.host,
            forwarding: self.forwarding,
            strip: self.strip,
        }
    }
}
