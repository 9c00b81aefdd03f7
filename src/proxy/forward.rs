//! Relaying the origin's answer to a GET/HEAD: teeing it to a fill when it is storable
//! and admitted, answering a client's validators with 304, and cutting a client's
//! range (or ascending ranges, as `multipart/byteranges`) out of a whole object fetched
//! to be stored.

use std::time::SystemTime;

use http::header::{CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE};
use http::{HeaderValue, Method, Response, StatusCode, request};
use http_body_util::BodyExt;

use super::cache::Marker;
use super::{Proxy, respond};
use crate::admission::Decision;
use crate::cache_status::{CACHE_STATUS, CacheStatus, Detail, Forward};
use crate::error::{BoxError, ProxyBody};
use crate::key::CacheKey;
use crate::origin::{BodyFraming, OriginResponse};
use crate::policy::NotStored;
use crate::policy::validation;
use crate::range::{self, Multipart, PartsBody, RangeAnswer};
use crate::tee::TeeBody;

impl Proxy {
    /// Relays the origin's answer to a GET/HEAD, teeing it to a fill when it is
    /// storable and admitted, and cutting the client's range out of a whole object.
    pub(super) async fn answer_from_origin(
        &self,
        head: &request::Parts,
        origin: OriginResponse,
        exchange: Exchange<'_>,
    ) -> Response<ProxyBody> {
        let verdict = if head.method != Method::GET {
            Err(NotStored::Method)
        } else if exchange.range_forwarded {
            Err(NotStored::Range)
        } else {
            self.cache
                .storable(&head.headers, &origin, exchange.times.1)
        };
        let OriginResponse {
            head: response_head,
            body: origin_body,
            framing,
        } = origin;
        let miss = CacheStatus::forward(exchange.forward).fwd_status(response_head.status);
        let (status, body) = match (verdict, exchange.admission) {
            (Err(reason), _) => (
                miss.detail(Detail::NotStored(reason)),
                TeeBody::passthrough(origin_body),
            ),
            (Ok(()), Decision::Reject(reason)) => (
                miss.detail(Detail::Admission(reason)),
                TeeBody::passthrough(origin_body),
            ),
            (Ok(()), Decision::Admit(_)) => match self
                .cache
                .begin_fill(
                    exchange.key,
                    exchange.marker,
                    &head.headers,
                    &response_head,
                    framing,
                    exchange.times,
                )
                .await
            {
                Ok(writer) if framing == BodyFraming::Length(0) => {
                    // No body to tee (a 204 is not even polled): commit it now.
                    let status = match writer.finish().await {
                        Ok(()) => miss.stored(),
                        Err(error) => {
                            tracing::warn!(key = %exchange.key, %error, "cannot store an empty body");
                            miss.detail(Detail::StoreError)
                        }
                    };
                    (status, TeeBody::passthrough(origin_body))
                }
                Ok(writer) => (
                    miss.stored(),
                    TeeBody::with_fill(origin_body, writer, exchange.key.as_str()),
                ),
                Err(error) => {
                    tracing::warn!(key = %exchange.key, %error, "cannot start fill; proxying uncached");
                    (
                        miss.detail(Detail::StoreError),
                        TeeBody::passthrough(origin_body),
                    )
                }
            },
        };
        let mut response_head = response_head;
        response_head
            .headers
            .insert(CACHE_STATUS, status.to_header_value());
        if !exchange.range_forwarded
            && head.method == Method::GET
            && response_head.status == StatusCode::OK
            && validation::client_not_modified(&head.headers, &response_head.headers)
        {
            // The client's validators were held back so that the origin sent a storable
            // 200, and that 200 matches them: the client gets its 304 (RFC 9110 §13.1.2)
            // while the body is read to its end in the background for the fill.
            tokio::spawn(drain(body));
            let head = validation::not_modified_head(response_head);
            return Response::from_parts(head, respond::empty());
        }
        if !exchange.range_forwarded
            && head.method == Method::GET
            && response_head.status == StatusCode::OK
            && let BodyFraming::Length(len) = framing
        {
            match range::answer(&head.headers, &response_head.headers, len) {
                RangeAnswer::Part { first, last } => {
                    response_head.status = StatusCode::PARTIAL_CONTENT;
                    let headers = &mut response_head.headers;
                    headers.insert(CONTENT_RANGE, range::content_range(first, last, len));
                    headers.insert(CONTENT_LENGTH, HeaderValue::from(last - first + 1));
                    let body = PartsBody::range(body, first, last);
                    return Response::from_parts(
                        response_head,
                        body.map_err(BoxError::from).boxed_unsync(),
                    );
                }
                RangeAnswer::Parts(parts) if range::ascending(&parts) => {
                    let headers = &mut response_head.headers;
                    let multipart = Multipart::new(headers.get(CONTENT_TYPE).cloned(), len);
                    response_head.status = StatusCode::PARTIAL_CONTENT;
                    headers.insert(CONTENT_TYPE, multipart.content_type());
                    let length = multipart.content_length(&parts);
                    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
                    let body = PartsBody::multipart(body, &multipart, parts);
                    return Response::from_parts(
                        response_head,
                        body.map_err(BoxError::from).boxed_unsync(),
                    );
                }
                _ => {}
            }
        }
        // A whole object for a range of unknown or unsatisfiable extent: the whole
        // 200 is a valid answer to any range request (RFC 9110 §14.2).
        Response::from_parts(response_head, body.map_err(BoxError::from).boxed_unsync())
    }
}

/// Reads `body` to its end and drops what it yields, so a fill teed from it completes
/// (or, for a body nobody stores, so the origin connection is reused rather than cut).
pub(super) async fn drain<B: hyper::body::Body + Unpin>(mut body: B) {
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            break;
        }
    }
}

/// One origin exchange for a GET/HEAD, and what the cache decided about it beforehand.
pub(super) struct Exchange<'a> {
    /// The URL's key (variants are derived from it).
    pub(super) key: &'a CacheKey,
    /// The URL's variant set, when one is stored.
    pub(super) marker: Option<&'a Marker>,
    /// Why the request went to the origin (Cache-Status `fwd`).
    pub(super) forward: Forward,
    /// What admission decided for the key, consulted only if the answer is storable.
    pub(super) admission: Decision,
    /// When the request was sent and when the response head arrived.
    pub(super) times: (SystemTime, SystemTime),
    /// The client's `Range` went to the origin (so the answer is not the whole object).
    pub(super) range_forwarded: bool,
}
