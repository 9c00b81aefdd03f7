//! The one way the request path reaches an origin: an [`OriginRequest`], made from the
//! client's head where a request first needs its site's origin (never for a hit), sends
//! every request for it — a pass-through, a miss, a revalidation, the background refresh
//! of `stale-while-revalidate` — to the client's target and host, with the forwarding
//! fields added and, for a GET or HEAD, `cache.strip_request_fields` removed.

use std::sync::Arc;

use http::header::{CONTENT_LENGTH, HOST};
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Method, request};

use crate::hygiene::{ClientConnection, Forwarding, Stripped, is_forwarding_field};
use crate::key::KeyError;
use crate::origin::{AddFields, FieldLines, FieldWriter, OriginError, OriginResponse, RequestBody};
use crate::policy::validation;
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

/// The fields of a request to the origin after its map's ([`OriginRequest::send`]),
/// written from the client's as they go out, as often as the request is sent.
struct ClientFields<'h> {
    /// The client's fields.
    client: &'h HeaderMap,
    /// What of its conditionals and range is sent.
    shape: Shape<'h>,
    /// The fields left out, for a GET or HEAD.
    stripped: Option<Stripped<'h>>,
    /// This hop's forwarding fields ([`Forwarding::lines`]).
    forwarding: FieldLines,
}

impl ClientFields<'_> {
    /// Whether the client's field `name` goes to the origin as the client sent it.
    fn keeps(&self, name: &HeaderName) -> bool {
        // `Host` is set per server, and `Content-Length` is in the request's map.
        name != HOST
            && name != CONTENT_LENGTH
            && !(matches!(self.shape, Shape::Whole(_)) && validation::is_not_whole(name))
            && !(self.stripped.as_ref()).is_some_and(|stripped| stripped.strips(name))
            && !is_forwarding_field(name)
    }
}

/// Bytes a client's field line takes on average (a browser's run from 20 to 120).
const FIELD_GUESS: usize = 64;

impl AddFields for ClientFields<'_> {
    fn size(&self) -> usize {
        // A guess per field, where the sum of their lengths would be one more pass.
        self.client.len() * FIELD_GUESS + self.forwarding.size()
    }

    fn write(&self, out: &mut FieldWriter<'_>) {
        for (name, value) in self.client {
            if self.keeps(name) {
                out.field(name, value);
            }
        }
        if let Shape::Whole(Some(stored)) = self.shape {
            for (name, value) in validation::stored_validators(stored) {
                out.field(name, value);
            }
        }
        out.lines(&self.forwarding);
    }
}

/// How a request to the origin treats the client's conditionals and range.
#[derive(Clone, Copy)]
pub(super) enum Shape<'s> {
    /// As the client sent them.
    AsSent,
    /// Left out: the answer is to be the whole object, to store; with the validators of
    /// `stored` (a stored response's fields) when given, to revalidate it.
    Whole(Option<&'s HeaderMap>),
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

    /// Sends `method` with the client's fields, `client` (end-to-end: its hop-by-hop
    /// fields went on arrival), shaped as `shape` says, and `body` to the origin: those
    /// it strips left out, the forwarding fields after them ([`Forwarding::lines`]).
    ///
    /// Written from the client's own map, not a copy of it: each field is written once,
    /// as it goes out (`benches/RESULTS.md`, "the origin request from the client's
    /// fields"). The request's map holds only what the origin client reads: the
    /// `Content-Length` that frames a body (`Origin::send` writes `Host` per server).
    pub(super) async fn send(
        &self,
        method: Method,
        client: &HeaderMap,
        shape: Shape<'_>,
        body: RequestBody,
    ) -> Result<OriginResponse, OriginError> {
        let added = ClientFields {
            client,
            shape,
            stripped: self.strip.as_deref().map(Stripped::of),
            forwarding: self.forwarding.lines(client),
        };
        let mut headers = HeaderMap::new();
        for length in crate::fields::all(client, &CONTENT_LENGTH) {
            headers.append(CONTENT_LENGTH, length.clone());
        }
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
