//! A client's request body, read ahead before an origin permit is taken.
//!
//! `origin.max_in_flight` permits protect the origin, so a permit must be held only while
//! the origin works, never while a client trickles its upload (four clients sending one
//! byte a second would otherwise hold four permits for as long as they like). Like nginx's
//! `client_body_buffer_size`, the body is read here first, up to
//! `origin.body_buffer_size`, each read waiting at most `origin.body_read_timeout` (408
//! after that): a body that fits is sent whole once the permit is taken. A larger body
//! streams on from what was read, with the same timeout between its frames, so a stalled
//! large upload holds its permit for at most that long. Bodies are kept in memory, never
//! spooled to disk: the buffer size bounds memory per request.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use super::{OriginError, ReadTimeout, RequestBody};
use crate::error::BoxError;

/// How a request body is read ahead.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Bytes read before the request is sent (`origin.body_buffer_size`).
    pub(super) buffer: u64,
    /// Longest wait for the body's next frame (`origin.body_read_timeout`).
    pub(super) read_timeout: Duration,
}

/// Reads `body` until it ends or `limits.buffer` bytes are in hand, and returns a body
/// that replays them (then streams the rest, if any). A request without a body costs
/// nothing here.
pub(super) async fn read_ahead(
    mut body: RequestBody,
    limits: Limits,
) -> Result<RequestBody, OriginError> {
    if body.is_end_stream() {
        return Ok(body);
    }
    let mut read = VecDeque::new();
    let mut bytes = 0u64;
    while bytes < limits.buffer {
        let frame = match tokio::time::timeout(limits.read_timeout, body.frame()).await {
            Err(_) => return Err(OriginError::RequestBodyTimeout(limits.read_timeout)),
            Ok(None) => return Ok(ReadAhead::new(read, bytes, None).boxed_unsync()),
            // The client's connection failed mid-body: nothing useful can be sent.
            Ok(Some(Err(error))) => return Err(OriginError::ClientBody(error)),
            Ok(Some(Ok(frame))) => frame,
        };
        bytes += frame.data_ref().map_or(0, |data| data.len() as u64);
        read.push_back(frame);
    }
    let rest = ReadTimeout::new(body, limits.read_timeout, "origin.body_read_timeout");
    Ok(ReadAhead::new(read, bytes, Some(rest)).boxed_unsync())
}

/// The frames read ahead, then the rest of the body.
struct ReadAhead {
    read: VecDeque<Frame<Bytes>>,
    /// Data bytes in `read`.
    read_bytes: u64,
    /// What the client has still to send; `None` when the body was read whole.
    rest: Option<ReadTimeout<RequestBody>>,
}

impl ReadAhead {
    fn new(
        read: VecDeque<Frame<Bytes>>,
        read_bytes: u64,
        rest: Option<ReadTimeout<RequestBody>>,
    ) -> ReadAhead {
        ReadAhead {
            read,
            read_bytes,
            rest,
        }
    }
}

impl Body for ReadAhead {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(frame) = self.read.pop_front() {
            let len = frame.data_ref().map_or(0, |data| data.len() as u64);
            self.read_bytes -= len;
            return Poll::Ready(Some(Ok(frame)));
        }
        match self.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_empty() && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        // Exact when read whole, so the origin gets a `Content-Length` rather than chunks.
        let rest = self
            .rest
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint);
        let mut hint = SizeHint::new();
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + self.read_bytes);
        }
        hint.set_lower(rest.lower() + self.read_bytes);
        hint
    }
}
