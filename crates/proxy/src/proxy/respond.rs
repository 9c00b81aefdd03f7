//! Responses built from a stored entry: the whole object (200), one range (206), several
//! ranges (206 `multipart/byteranges`), an unsatisfiable range (416), a client's satisfied
//! conditional (304), or a HEAD. The heads of the 206 answers are built here for the miss
//! path too, which cuts the same answers out of an object as it arrives.

use std::time::SystemTime;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use http::header::{ACCEPT_RANGES, AGE, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE};
use http::{HeaderValue, Method, Response, StatusCode, request, response};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::Frame;

use super::Answer;
use super::cache::Found;
use crate::body::{BoxError, ProxyBody};
use crate::header_text::decimal;
use crate::outcome::Outcome;
use crate::policy::freshness::StoredFreshness;
use crate::policy::validation;
use crate::range::{self, Multipart, RangeAnswer};
use crate::store::StoredEntry;

/// Answers `request` from `found`, whose freshness was judged by `freshness` at `now`;
/// `outcome` says what the answer is (a hit, a stale hit, a revalidated entry).
pub(super) fn from_store(
    request: &request::Parts,
    found: Found,
    freshness: &StoredFreshness,
    now: SystemTime,
    outcome: Outcome,
) -> Answer {
    Answer::new(response_from_store(request, found, freshness, now), outcome)
}

fn response_from_store(
    request: &request::Parts,
    found: Found,
    freshness: &StoredFreshness,
    now: SystemTime,
) -> Response<ProxyBody> {
    let entry = found.entry;
    let mut head = Response::new(()).into_parts().0;
    head.status = entry.meta.status;
    // A copy: the entry stays stored for the next hit, and hyper consumes the response's.
    head.headers = entry.meta.response_headers.clone();
    let age = decimal(freshness.age(now).as_secs());
    head.headers.insert(AGE, age);
    let len = entry.body_len;
    // Conditionals select among representations: only a successful response has one.
    if head.status.is_success()
        && validation::client_not_modified(&request.headers, &entry.meta.response_headers)
    {
        let head = validation::not_modified_head(head);
        return Response::from_parts(head, empty());
    }
    head.headers.insert(CONTENT_LENGTH, decimal(len));
    if request.method == Method::HEAD {
        return Response::from_parts(head, empty());
    }
    let ranged = if head.status == StatusCode::OK {
        head.headers
            .entry(ACCEPT_RANGES)
            .or_insert(HeaderValue::from_static("bytes"));
        range::answer(&request.headers, &entry.meta.response_headers, len)
    } else {
        RangeAnswer::Whole
    };
    answer_range(head, entry, ranged, len)
}

/// The 200, 206 or 416 that `ranged` calls for, with `head` and `entry`'s body (of `len`
/// bytes) or the parts of it.
fn answer_range(
    mut head: response::Parts,
    entry: StoredEntry,
    ranged: RangeAnswer,
    len: u64,
) -> Response<ProxyBody> {
    match cut(&mut head, ranged, len) {
        Cut::Whole => {
            if let Some(body) = entry.body_in_memory() {
                // One frame of known size: hyper ends the response without polling a
                // stream again, and no checksum state is set up for a verified body.
                let body = Full::new(body.clone()).map_err(|never| match never {});
                return Response::from_parts(head, body.boxed_unsync());
            }
            streamed(head, entry.into_body_stream())
        }
        Cut::Part(first, last) => streamed(head, entry.into_range_stream(first, last)),
        Cut::Parts(parts, multipart) => streamed(head, multipart_stream(entry, parts, multipart)),
        Cut::Nothing => Response::from_parts(head, empty()),
    }
}

/// The response of `head` whose body is the chunks of `stream`.
fn streamed(
    head: response::Parts,
    stream: impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static,
) -> Response<ProxyBody> {
    let frames = stream.map_ok(Frame::data).map_err(BoxError::from);
    Response::from_parts(head, BodyExt::boxed_unsync(StreamBody::new(frames)))
}

/// The `multipart/byteranges` body of `parts` of `entry`, framed by `multipart`.
fn multipart_stream(
    entry: StoredEntry,
    parts: Vec<(u64, u64)>,
    multipart: Multipart,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static {
    let heads: Vec<Bytes> = (parts.iter())
        .map(|&(first, last)| multipart.part_head(first, last))
        .collect();
    // Each part's head goes out just before its first chunk.
    let mut started = None;
    entry
        .into_ranges_stream(parts)
        .map_ok(move |(part, chunk)| {
            let head = (started != Some(part)).then(|| heads[part].clone());
            started = Some(part);
            futures_util::stream::iter(head.into_iter().chain([chunk]).map(Ok::<_, std::io::Error>))
        })
        .try_flatten()
        .chain(futures_util::stream::once(async move {
            Ok(multipart.closing())
        }))
}

/// Which bytes of a whole object answer a range request, once [`cut`] has set the head.
pub(super) enum Cut {
    /// The whole body (200).
    Whole,
    /// Bytes `first..=last` (206).
    Part(u64, u64),
    /// These ranges, each framed by the `multipart/byteranges` body's framing (206).
    Parts(Vec<(u64, u64)>, Multipart),
    /// No body at all (416).
    Nothing,
}

/// Makes `head`, a 200 for a whole object of `len` bytes, the head of the answer that
/// `ranged` calls for, and says which bytes of the object its body carries: the one
/// place the status and framing fields of a range answer are decided, for an entry read
/// from storage and for an object cut as it streams in from the origin alike.
pub(super) fn cut(head: &mut response::Parts, ranged: RangeAnswer, len: u64) -> Cut {
    match ranged {
        RangeAnswer::Whole => Cut::Whole,
        RangeAnswer::Part { first, last } => {
            part_head(head, first, last, len);
            Cut::Part(first, last)
        }
        RangeAnswer::Parts(parts) => {
            let multipart = multipart_head(head, &parts, len);
            Cut::Parts(parts, multipart)
        }
        RangeAnswer::Unsatisfiable => {
            head.status = StatusCode::RANGE_NOT_SATISFIABLE;
            let headers = &mut head.headers;
            headers.insert(CONTENT_RANGE, range::unsatisfied_range(len));
            headers.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
            Cut::Nothing
        }
    }
}

/// Makes `head`, a 200 for a whole object of `len` bytes, the head of the 206 answering
/// the one range `first..=last` of it (RFC 9110 §14.4).
fn part_head(head: &mut response::Parts, first: u64, last: u64, len: u64) {
    head.status = StatusCode::PARTIAL_CONTENT;
    let headers = &mut head.headers;
    headers.insert(CONTENT_RANGE, range::content_range(first, last, len));
    headers.insert(CONTENT_LENGTH, decimal(last - first + 1));
}

/// Makes `head`, a 200 for a whole object of `len` bytes, the head of the 206
/// `multipart/byteranges` answering `parts` of it (RFC 9110 §14.6), and returns the
/// framing its body must follow (the object's own `Content-Type` moves into each part).
fn multipart_head(head: &mut response::Parts, parts: &[(u64, u64)], len: u64) -> Multipart {
    let headers = &mut head.headers;
    let multipart = Multipart::new(headers.get(CONTENT_TYPE).cloned(), len);
    head.status = StatusCode::PARTIAL_CONTENT;
    headers.insert(CONTENT_TYPE, multipart.content_type());
    let length = multipart.content_length(parts);
    headers.insert(CONTENT_LENGTH, decimal(length));
    multipart
}

/// An empty response body.
pub(super) fn empty() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}
