//! Per-request orchestration: key → admission → store lookup → origin → policy → tee.
//!
//! This module decides and delegates; it parses nothing and touches no file itself.
//! The order of steps follows ARCHITECTURE.md, "The request path":
//! 1. Methods other than GET and HEAD, and requests with credentials, are passed
//!    through untouched (`fwd=method`, `fwd=bypass`).
//! 2. Every GET/HEAD key is checked against *and recorded in* the admission filter,
//!    hits included, so a hot object stays known to the filter.
//! 3. A fresh stored entry is served from disk (`hit`); a stale one is refetched and,
//!    being already stored, re-admitted without asking the filter.
//! 4. A miss goes to the origin; a storable response is written to disk only when
//!    admission admits it (`stored`), otherwise `detail` names why not.
//!
//! A cache failure (lookup or fill) is logged and the request proxied uncached.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use futures_util::TryStreamExt;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, HOST, IF_MODIFIED_SINCE, IF_NONE_MATCH, RANGE};
use http::{HeaderValue, Method, Request, Response, request};
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::{Frame, Incoming};

use crate::admission::{Admission, AdmitReason, Decision, FilterHasher};
use crate::cache_status::{CACHE_STATUS, CacheStatus, Forward};
use crate::error::{BoxError, ProxyBody, ProxyError, error_response};
use crate::key::{CacheKey, KeyError};
use crate::origin::{BodyFraming, Origin, OriginResponse};
use crate::policy::{self, Freshness, NotStored};
use crate::store::entry::EntryMeta;
use crate::store::{Store, StoredEntry};
use crate::tee::TeeBody;

/// Everything a request needs, shared by all connections.
pub struct Proxy {
    origin: Origin,
    store: Arc<Store>,
    admission: Arc<dyn Admission>,
    hasher: FilterHasher,
    /// `cache.max_object_size`: larger responses are streamed and not stored.
    max_object_size: u64,
    /// `log.access_log`: one `access` event per request when true.
    access_log: bool,
}

impl Proxy {
    /// Assembles a proxy from its parts (see `server::Server::bind`).
    pub fn new(
        origin: Origin,
        store: Arc<Store>,
        admission: Arc<dyn Admission>,
        hasher: FilterHasher,
        max_object_size: u64,
        access_log: bool,
    ) -> Proxy {
        Proxy {
            origin,
            store,
            admission,
            hasher,
            max_object_size,
            access_log,
        }
    }

    /// The admission policy in use.
    pub fn admission(&self) -> Arc<dyn Admission> {
        self.admission.clone()
    }

    /// Answers one request. Never fails: errors become responses through `error_response`.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let started = Instant::now();
        let (head, body) = request.into_parts();
        let mut response = match self.route(&head, body).await {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!(method = %head.method, uri = %head.uri, %error, "request failed");
                error_response(&error)
            }
        };
        // The origin may have sent a Cache-Status of its own; ours is the only one about this cache.
        if response.headers().get(CACHE_STATUS).is_none() {
            response.headers_mut().insert(
                CACHE_STATUS,
                CacheStatus::error("internal").to_header_value(),
            );
        }
        if self.access_log {
            tracing::info!(
                target: "access",
                method = %head.method,
                uri = %head.uri,
                status = response.status().as_u16(),
                cache_status = response.headers().get(CACHE_STATUS).and_then(|v| v.to_str().ok()).unwrap_or(""),
                micros = started.elapsed().as_micros() as u64,
            );
        }
        response
    }

    async fn route(
        &self,
        head: &request::Parts,
        body: Incoming,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let cacheable_method = head.method == Method::GET || head.method == Method::HEAD;
        if !cacheable_method {
            return self
                .pass_through(head, body, CacheStatus::forward(Forward::Method))
                .await;
        }
        let key = CacheKey::from_request(head)?;
        if head.headers.contains_key(AUTHORIZATION) {
            // A shared cache may not reuse responses for credentials (RFC 9111 §3.5);
            // until the directives that allow it are handled, such requests bypass the cache.
            return self
                .pass_through(
                    head,
                    body,
                    CacheStatus::forward(Forward::Bypass).detail("authorization"),
                )
                .await;
        }
        let decision = self
            .admission
            .check_and_record(self.hasher.hash(key.as_str().as_bytes()));
        let mut forward = Forward::UriMiss;
        match self.store.lookup(key.as_str(), key.store_hash()).await {
            Ok(Some(entry)) => match policy::freshness(&key, &entry.meta, SystemTime::now()) {
                // A Range request may be answered with the whole object (RFC 9110 §14.2).
                Freshness::Fresh(fresh_head) => {
                    return Ok(serve_hit(entry, fresh_head, head.method == Method::HEAD));
                }
                Freshness::Stale => forward = Forward::Stale,
            },
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(key = %key, %error, "cache lookup failed; proxying uncached")
            }
        }
        // A stale entry being refetched was admitted once already: keep it without asking the filter.
        let admission = if forward == Forward::Stale {
            Decision::Admit(AdmitReason::AlreadyStored)
        } else {
            decision
        };
        self.fetch_miss(head, body, &key, forward, admission).await
    }

    /// Forwards a GET/HEAD miss, storing the response when policy and admission allow.
    async fn fetch_miss(
        &self,
        head: &request::Parts,
        body: Incoming,
        key: &CacheKey,
        forward: Forward,
        admission: Decision,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let is_get = head.method == Method::GET;
        let is_range = head.headers.contains_key(RANGE);
        let mut headers = head.headers.clone();
        if is_get && !is_range && admission.is_admit() {
            // The client's validators would let the origin answer 304, leaving nothing to store.
            headers.remove(IF_NONE_MATCH);
            headers.remove(IF_MODIFIED_SINCE);
        }
        let request_time = SystemTime::now();
        let origin = self
            .origin
            .send(
                head.method.clone(),
                path_and_query(head),
                headers,
                client_host(head)?,
                reqwest::Body::wrap(body),
            )
            .await?;
        let response_time = SystemTime::now();
        let verdict = if !is_get {
            Err(NotStored::Method)
        } else if is_range {
            Err(NotStored::Range)
        } else {
            self.storable(key, &origin, response_time)
        };
        let OriginResponse {
            head: response_head,
            body: origin_body,
            framing,
        } = origin;
        let miss = CacheStatus::forward(forward);
        let (status, body) = match verdict {
            Err(reason) => (
                miss.detail(reason.as_str()),
                TeeBody::passthrough(origin_body),
            ),
            Ok(()) if !admission.is_admit() => (
                miss.detail(admission.as_str()),
                TeeBody::passthrough(origin_body),
            ),
            Ok(()) => {
                let meta = EntryMeta {
                    request_time,
                    response_time,
                    status: response_head.status,
                    response_headers: response_head.headers.clone(),
                    request_headers: http::HeaderMap::new(),
                };
                let declared = match framing {
                    BodyFraming::Length(length) => Some(length),
                    _ => None,
                };
                match self
                    .store
                    .begin_fill(key.as_str(), key.store_hash(), &meta, declared)
                    .await
                {
                    Ok(writer) => (
                        miss.stored(),
                        TeeBody::with_fill(origin_body, writer, key.as_str()),
                    ),
                    Err(error) => {
                        tracing::warn!(key = %key, %error, "cannot start fill; proxying uncached");
                        (
                            miss.detail("store-error"),
                            TeeBody::passthrough(origin_body),
                        )
                    }
                }
            }
        };
        let mut response =
            Response::from_parts(response_head, body.map_err(BoxError::from).boxed_unsync());
        response
            .headers_mut()
            .insert(CACHE_STATUS, status.to_header_value());
        Ok(response)
    }

    /// Storability of a GET response: RFC 9111 policy, framing, and size.
    fn storable(
        &self,
        key: &CacheKey,
        origin: &OriginResponse,
        response_time: SystemTime,
    ) -> Result<(), NotStored> {
        policy::storability(key, &origin.head, response_time)?;
        match origin.framing {
            BodyFraming::UntilClose => Err(NotStored::NoLength),
            BodyFraming::Length(length) if length > self.max_object_size => {
                Err(NotStored::TooLarge)
            }
            BodyFraming::Length(_) | BodyFraming::Delimited => Ok(()),
        }
    }

    /// Sends a request to the origin unchanged (but for hop-by-hop fields) and relays the answer.
    async fn pass_through(
        &self,
        head: &request::Parts,
        body: Incoming,
        status: CacheStatus,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let origin = self
            .origin
            .send(
                head.method.clone(),
                path_and_query(head),
                head.headers.clone(),
                client_host(head)?,
                reqwest::Body::wrap(body),
            )
            .await?;
        let body = origin.body.map_err(BoxError::from).boxed_unsync();
        let mut response = Response::from_parts(origin.head, body);
        response
            .headers_mut()
            .insert(CACHE_STATUS, status.to_header_value());
        Ok(response)
    }
}

/// Builds the response for a fresh stored entry.
fn serve_hit(
    entry: StoredEntry,
    fresh: http::response::Parts,
    is_head: bool,
) -> Response<ProxyBody> {
    let body_len = entry.body_len;
    let body = if is_head {
        Empty::new().map_err(|never| match never {}).boxed_unsync()
    } else {
        let frames = entry
            .into_body_stream()
            .map_ok(Frame::data)
            .map_err(BoxError::from);
        BodyExt::boxed_unsync(StreamBody::new(frames))
    };
    let mut response = Response::from_parts(fresh, body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_LENGTH, HeaderValue::from(body_len));
    headers.insert(CACHE_STATUS, CacheStatus::hit().to_header_value());
    response
}

/// The request target to send to the origin: the client's own path and query.
fn path_and_query(head: &request::Parts) -> &str {
    head.uri.path_and_query().map_or("/", |pq| pq.as_str())
}

/// What the client named as host: its `Host` header, or the URI authority (HTTP/2, absolute form).
fn client_host(head: &request::Parts) -> Result<HeaderValue, ProxyError> {
    head.headers
        .get(HOST)
        .cloned()
        .or_else(|| {
            head.uri
                .authority()
                .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        })
        .ok_or(ProxyError::BadRequest(KeyError::MissingHost))
}
