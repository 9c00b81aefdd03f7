//! Byte ranges (RFC 9110 §14): which part of an object a request asks for, and a body
//! that delivers only that part.
//!
//! A single range is answered with a 206 of that part. Several ranges of a stored object
//! (at most [`MAX_PARTS`], none overlapping) get a 206 `multipart/byteranges` (§14.6),
//! one part per range in the order asked, read from the file in turn; cut from an object
//! streaming in from the origin ([`PartsBody`]) they must also come in ascending
//! order. More ranges, overlapping ones, or (from the origin) ranges out of order get the
//! whole object as a 200, which §14.2 allows for a range set a server will not serve. A
//! syntactically invalid `Range` is ignored (whole object), an unsatisfiable single range
//! is answered 416, and an `If-Range` that does not match the stored validator strongly,
//! or is not a valid validator at all, turns the request into a plain GET (`if_range`).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::header::RANGE;
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use http_range_header::{RangeUnsatisfiableError, StartPosition};

mod if_range;

/// The most ranges one request is answered part by part; a request for more gets the
/// whole object (each part is a separate read, and a flood of tiny ranges costs the
/// disk far more than it saves the network).
pub(crate) const MAX_PARTS: usize = 64;

/// How to answer a request for an object of known length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RangeAnswer {
    /// The whole object, 200.
    Whole,
    /// Bytes `first..=last`, 206.
    Part {
        /// First byte offset.
        first: u64,
        /// Last byte offset, inclusive.
        last: u64,
    },
    /// Several non-overlapping ranges `first..=last`, in the order asked: 206
    /// `multipart/byteranges`.
    Parts(Vec<(u64, u64)>),
    /// No requested byte exists: 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// True if the request carries a `Range` of one to [`MAX_PARTS`] syntactically valid byte
/// ranges: the kind this cache can answer from a whole object.
pub(crate) fn is_answerable_range(request: &HeaderMap) -> bool {
    range_text(request)
        .and_then(|text| http_range_header::parse_range_header(text).ok())
        .is_some_and(|parsed| (1..=MAX_PARTS).contains(&parsed.ranges.len()))
}

/// True if `parts` come in ascending order: the only order in which they can be cut
/// from a body as it streams.
pub(crate) fn ascending(parts: &[(u64, u64)]) -> bool {
    parts.windows(2).all(|pair| pair[0].1 < pair[1].0)
}

fn range_text(request: &HeaderMap) -> Option<&str> {
    crate::fields::first(request, &RANGE).and_then(|v| v.to_str().ok())
}

/// Decides how to answer `request` from an object of `len` bytes whose validators
/// are in `stored` (for `If-Range`).
pub(crate) fn answer(request: &HeaderMap, stored: &HeaderMap, len: u64) -> RangeAnswer {
    let Some(text) = range_text(request) else {
        return RangeAnswer::Whole;
    };
    if if_range::holds(request, stored) == Some(false) {
        return RangeAnswer::Whole;
    }
    let Ok(parsed) = http_range_header::parse_range_header(text) else {
        return RangeAnswer::Whole;
    };
    if parsed.ranges.len() > 1 {
        return match parsed.validate(len) {
            Ok(ranges) if ranges.len() <= MAX_PARTS && len > 0 => {
                RangeAnswer::Parts(ranges.iter().map(|r| (*r.start(), *r.end())).collect())
            }
            // Overlapping, too many, or some part unsatisfiable: the whole object, which
            // answers any range request (§14.2).
            _ => RangeAnswer::Whole,
        };
    }
    // A suffix longer than the object means the whole object (§14.1.3); the crate
    // calls it unsatisfiable.
    if let StartPosition::FromLast(suffix) = parsed.ranges[0].start
        && suffix > len
        && len > 0
    {
        return RangeAnswer::Part {
            first: 0,
            last: len - 1,
        };
    }
    match parsed.validate(len) {
        Ok(ranges) => match ranges.first() {
            Some(range) if len > 0 => RangeAnswer::Part {
                first: *range.start(),
                last: *range.end(),
            },
            _ => RangeAnswer::Unsatisfiable,
        },
        Err(RangeUnsatisfiableError::OverlappingRanges) => RangeAnswer::Whole,
        Err(_) => RangeAnswer::Unsatisfiable,
    }
}

/// `Content-Range: bytes first-last/len`.
pub(crate) fn content_range(first: u64, last: u64, len: u64) -> HeaderValue {
    headers_value(format!("bytes {first}-{last}/{len}"))
}

/// The framing of a `multipart/byteranges` body (RFC 9110 §14.6): a boundary, and the
/// head of each part.
pub(crate) struct Multipart {
    /// The boundary between parts: random, so that no body can contain it by design.
    boundary: String,
    /// The object's own `Content-Type`, repeated in every part.
    content_type: Option<HeaderValue>,
    /// The object's length, for each part's `Content-Range`.
    len: u64,
}

impl Multipart {
    /// Framing for the parts of an object of `len` bytes with `content_type`.
    pub(crate) fn new(content_type: Option<HeaderValue>, len: u64) -> Multipart {
        // A fixed fallback is still a valid boundary; randomness only makes a collision
        // with the content implausible.
        let token = getrandom::u64().unwrap_or(0x5ec0_d417_b0a7_da7a);
        Multipart {
            boundary: format!("secondhit-{token:016x}"),
            content_type,
            len,
        }
    }

    /// The response's `Content-Type: multipart/byteranges; boundary=...`.
    pub(crate) fn content_type(&self) -> HeaderValue {
        headers_value(format!("multipart/byteranges; boundary={}", self.boundary))
    }

    /// What precedes part `first..=last`: the delimiter and the part's fields.
    pub(crate) fn part_head(&self, first: u64, last: u64) -> Bytes {
        let mut head = format!("\r\n--{}\r\n", self.boundary).into_bytes();
        if let Some(content_type) = &self.content_type {
            head.extend_from_slice(b"Content-Type: ");
            head.extend_from_slice(content_type.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(
            format!("Content-Range: bytes {first}-{last}/{}\r\n\r\n", self.len).as_bytes(),
        );
        Bytes::from(head)
    }

    /// The closing delimiter, after the last part.
    pub(crate) fn closing(&self) -> Bytes {
        Bytes::from(format!("\r\n--{}--\r\n", self.boundary))
    }

    /// The body's length for `parts`: every part's head and bytes, and the closing.
    pub(crate) fn content_length(&self, parts: &[(u64, u64)]) -> u64 {
        let parts_len: u64 = parts
            .iter()
            .map(|&(first, last)| self.part_head(first, last).len() as u64 + (last - first + 1))
            .sum();
        parts_len + self.closing().len() as u64
    }
}

/// `Content-Range: bytes */len`, for a 416.
pub(crate) fn unsatisfied_range(len: u64) -> HeaderValue {
    headers_value(format!("bytes */{len}"))
}

/// A header value from text made of digits, spaces and `-*/`: always valid.
fn headers_value(text: String) -> HeaderValue {
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("bytes */0"))
}

/// A body that passes on only parts `first..=last` of `inner` (ascending, not
/// overlapping): one range as it is, or several framed as `multipart/byteranges` by a
/// [`Multipart`]. It reads `inner` to its end, so a fill teed from `inner` still gets the
/// whole object (the client's response ends when the whole object has arrived, not when
/// its last part has).
pub(crate) struct PartsBody<B> {
    inner: B,
    /// Offset of the next byte `inner` yields.
    position: u64,
    parts: Vec<(u64, u64)>,
    /// Each part's head, sent before its first byte (none for a single plain range).
    heads: Vec<Bytes>,
    /// The first part not yet delivered whole.
    next: usize,
    /// Whether the head of part `next` has been queued.
    head_queued: bool,
    /// Bytes ready to go to the client, in order.
    pending: VecDeque<Bytes>,
    /// The closing delimiter (multipart only), until it is queued after the last part.
    closing: Option<Bytes>,
    /// Client bytes not yet yielded.
    remaining: u64,
}

impl<B> PartsBody<B> {
    /// Bytes `first..=last` of `inner`, as they are (a single-range 206).
    pub(crate) fn range(inner: B, first: u64, last: u64) -> PartsBody<B> {
        PartsBody::new(inner, vec![(first, last)], Vec::new(), None)
    }

    /// `parts` (ascending, see [`ascending`]) of `inner`, framed by `multipart`.
    pub(crate) fn multipart(
        inner: B,
        multipart: &Multipart,
        parts: Vec<(u64, u64)>,
    ) -> PartsBody<B> {
        let heads = (parts.iter())
            .map(|&(first, last)| multipart.part_head(first, last))
            .collect();
        PartsBody::new(inner, parts, heads, Some(multipart.closing()))
    }

    fn new(
        inner: B,
        parts: Vec<(u64, u64)>,
        heads: Vec<Bytes>,
        closing: Option<Bytes>,
    ) -> PartsBody<B> {
        let framing: u64 = heads.iter().chain(&closing).map(|b| b.len() as u64).sum();
        let bytes: u64 = parts.iter().map(|&(first, last)| last - first + 1).sum();
        PartsBody {
            inner,
            position: 0,
            parts,
            heads,
            next: 0,
            head_queued: false,
            pending: VecDeque::new(),
            closing,
            remaining: framing + bytes,
        }
    }

    /// Queues what of `data`, the object's next bytes, falls in the parts.
    fn take(&mut self, data: &Bytes) {
        let start = self.position;
        let end = start + data.len() as u64; // exclusive
        self.position = end;
        while let Some(&(first, last)) = self.parts.get(self.next) {
            if first >= end {
                break;
            }
            let (from, to) = (first.max(start), (last + 1).min(end));
            if from < to {
                if !self.head_queued
                    && let Some(head) = self.heads.get(self.next)
                {
                    self.pending.push_back(head.clone());
                }
                self.head_queued = true;
                let slice = data.slice((from - start) as usize..(to - start) as usize);
                self.pending.push_back(slice);
            }
            if last + 1 > end {
                break; // the part goes on in the next frame
            }
            self.next += 1;
            self.head_queued = false;
        }
        if self.next == self.parts.len()
            && let Some(closing) = self.closing.take()
        {
            self.pending.push_back(closing);
        }
    }
}

impl<B> Body for PartsBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        loop {
            if let Some(bytes) = self.pending.pop_front() {
                self.remaining = self.remaining.saturating_sub(bytes.len() as u64);
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            let Some(frame) = ready!(Pin::new(&mut self.inner).poll_frame(cx)) else {
                return Poll::Ready(None);
            };
            // Trailers describe the whole object; a 206 does not carry them.
            if let Ok(data) = frame?.into_data() {
                self.take(&data);
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests;
