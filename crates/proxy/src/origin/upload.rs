//! A client's request body, read ahead before an origin permit is taken.
//!
//! `origin.max_in_flight` permits protect the origin, so a permit must be held only while
//! the origin works, never while a client trickles its upload (four clients sending one
//! byte a second would otherwise hold four permits for as long as they like). Like nginx's
//! `client_body_buffer_size`, the body is read here first, up to
//! `origin.body_buffer_size`: a body that fits is sent whole once the permit is taken. A
//! larger body streams on from what was read, and so holds its permit while the rest
//! arrives. Bodies are kept in memory, never spooled to disk: the buffer size bounds
//! memory per request.
//!
//! From its first byte to its last, the body must keep a pace ([`ReadTimeout`]): over
//! every `origin.body_read_timeout` it must bring at least `origin.body_min_rate` times
//! that long in bytes, and at least one byte; then 408, whether it was still being read
//! ahead or already streaming to the origin ([`cut_for_pace`]). A timeout between reads alone (nginx's `client_body_timeout`) lets a
//! client that sends one byte just inside each timeout keep a streaming upload, and its
//! permit, as long as it likes; a minimum rate averaged over a window (Apache
//! mod_reqtimeout's `MinRate`) cuts it one window after it falls below, whatever the
//! body's size, which a total deadline could only do by also cutting large uploads on
//! honest slow links. The first window is the grace period: nothing is judged before a
//! whole window has passed.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use super::read_timeout::MinRate;
use super::{OriginError, ReadTimedOut, ReadTimeout, RequestBody};
use crate::body::BoxError;

/// How a request body is read ahead.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Bytes read before the request is sent (`origin.body_buffer_size`).
    pub(super) buffer: u64,
    /// The window over which the pace is judged (`origin.body_read_timeout`).
    pub(super) read_timeout: Duration,
    /// Bytes per second the body must average over that window (`origin.body_min_rate`;
    /// zero: only silence is cut).
    pub(super) min_rate: u64,
}

/// A request body as read ahead: to send, and a copy to send again when asked for.
pub(super) struct Ahead {
    /// The body to send: what was read, then the rest, if any.
    pub(super) body: RequestBody,
    /// Its frames when it was read whole and a copy was asked for: a body that streams
    /// on was (partly) sent by the time a failure is known, and cannot be sent again.
    pub(super) copy: Option<Vec<Frame<Bytes>>>,
}

/// Reads `body` until it ends or `limits.buffer` bytes are in hand, and returns a body
/// that replays them (then streams the rest, if any, at the same pace), with a copy of a
/// body read whole when `keep` (the frames' bytes are shared, not copied). A request
/// without a body costs nothing here.
pub(super) async fn read_ahead(
    body: RequestBody,
    limits: Limits,
    keep: bool,
) -> Result<Ahead, OriginError> {
    if body.is_end_stream() {
        let copy = keep.then(Vec::new);
        return Ok(Ahead { body, copy });
    }
    let rate = MinRate {
        per_second: limits.min_rate,
        key: "origin.body_min_rate",
    };
    let mut body =
        ReadTimeout::new(body, limits.read_timeout, "origin.body_read_timeout").with_min_rate(rate);
    let mut read = VecDeque::new();
    let mut bytes = 0u64;
    while bytes < limits.buffer {
        let frame = match body.frame().await {
            None => {
                let copy = keep.then(|| read.iter().filter_map(copy_frame).collect());
                let body = ReadAhead::new(read, bytes, None).boxed_unsync();
                return Ok(Ahead { body, copy });
            }
            Some(Err(error)) => {
                return Err(match error.downcast::<ReadTimedOut>() {
                    Ok(slow) => OriginError::RequestBodyTimeout(*slow),
                    // The client's connection failed mid-body: nothing useful can be sent.
                    Err(error) => OriginError::ClientBody(error),
                });
            }
            Some(Ok(frame)) => frame,
        };
        bytes += frame.data_ref().map_or(0, |data| data.len() as u64);
        read.push_back(frame);
    }
    let body = ReadAhead::new(read, bytes, Some(body)).boxed_unsync();
    Ok(Ahead { body, copy: None })
}

/// A body of `frames` (a copy [`read_ahead`] kept), to send the request again.
pub(super) fn replay(frames: &[Frame<Bytes>]) -> RequestBody {
    if frames.is_empty() {
        return super::empty_body();
    }
    let read: VecDeque<_> = frames.iter().filter_map(copy_frame).collect();
    let bytes = (read.iter())
        .map(|frame| frame.data_ref().map_or(0, |data| data.len() as u64))
        .sum();
    ReadAhead::new(read, bytes, None).boxed_unsync()
}

/// A copy of a data or trailers frame (the only kinds there are); the bytes are shared.
fn copy_frame(frame: &Frame<Bytes>) -> Option<Frame<Bytes>> {
    match (frame.data_ref(), frame.trailers_ref()) {
        (Some(data), _) => Some(Frame::data(data.clone())),
        (None, Some(trailers)) => Some(Frame::trailers(trailers.clone())),
        (None, None) => None,
    }
}

/// The upload's own failure behind a failed exchange with the origin: the body streaming
/// after the read-ahead was cut for its pace, which is the client's fault (408), not the
/// origin's.
pub(super) fn cut_for_pace(error: &(dyn std::error::Error + 'static)) -> Option<ReadTimedOut> {
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        if let Some(slow) = e.downcast_ref::<ReadTimedOut>() {
            return Some(*slow);
        }
        cause = e.source();
    }
    None
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

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use tokio::time::Instant;

    use super::*;

    /// A body of `burst` bytes at once, then one byte every `every`, forever.
    fn burst_then_trickle(burst: usize, every: Duration) -> RequestBody {
        let frames = futures_util::stream::unfold(0u64, move |sent| async move {
            if sent > 0 {
                tokio::time::sleep(every).await;
            }
            let data = if sent == 0 {
                Bytes::from(vec![b'b'; burst])
            } else {
                Bytes::from_static(b"t")
            };
            Some((Ok::<_, BoxError>(Frame::data(data)), sent + 1))
        });
        http_body_util::StreamBody::new(frames.boxed()).boxed_unsync()
    }

    /// `frames` frames of `size` bytes, one every `every`, then the end.
    fn steady(frames: u32, size: usize, every: Duration) -> RequestBody {
        let frames = futures_util::stream::unfold(0u32, move |sent| async move {
            if sent == frames {
                return None;
            }
            tokio::time::sleep(every).await;
            let frame = Frame::data(Bytes::from(vec![b's'; size]));
            Some((Ok::<_, BoxError>(frame), sent + 1))
        });
        http_body_util::StreamBody::new(frames.boxed()).boxed_unsync()
    }

    const WINDOW: Duration = Duration::from_secs(1);

    fn limits(buffer: u64, min_rate: u64) -> Limits {
        Limits {
            buffer,
            read_timeout: WINDOW,
            min_rate,
        }
    }

    /// Reads `body` to its end, or to the error that cut it.
    async fn drain(mut body: RequestBody) -> Result<u64, BoxError> {
        let mut bytes = 0;
        while let Some(frame) = body.frame().await {
            bytes += frame?.data_ref().map_or(0, |data| data.len() as u64);
        }
        Ok(bytes)
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_after_a_burst_larger_than_the_buffer_is_cut_about_a_window_later() {
        let start = Instant::now();
        let body = burst_then_trickle(70_000, Duration::from_millis(200));
        let body = read_ahead(body, limits(64 * 1024, 1000), true)
            .await
            .expect("the burst fills the buffer at once");
        assert!(body.copy.is_none(), "a body that streams on is never kept");
        let body = body.body;
        let error = drain(body).await.expect_err("the trickle is cut");
        let slow = error.downcast::<ReadTimedOut>().expect("cut for its pace");
        assert!(slow.bytes > 0 && slow.bytes < 1000, "{slow}");
        assert!(slow.to_string().contains("origin.body_min_rate"), "{slow}");
        // Once the burst has left the window, and no later than a window and a tick more.
        let cut = start.elapsed();
        assert!(cut >= WINDOW && cut <= WINDOW * 2, "cut after {cut:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_at_the_minimum_rate_is_read_whole_however_long_it_takes() {
        // 1500 bytes/s for ten windows, streamed past a small buffer.
        let body = steady(100, 150, Duration::from_millis(100));
        let body = read_ahead(body, limits(1024, 1000), false)
            .await
            .expect("read ahead")
            .body;
        assert_eq!(drain(body).await.expect("never cut"), 15_000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_body_still_in_the_read_ahead_gets_a_request_body_timeout() {
        let start = Instant::now();
        let body = steady(u32::MAX, 1, Duration::from_millis(200));
        let error = read_ahead(body, limits(64 * 1024, 1000), false)
            .await
            .map(|ahead| ahead.body)
            .expect_err("cut before the buffer fills");
        let OriginError::RequestBodyTimeout(slow) = error else {
            panic!("{error}");
        };
        assert!(slow.bytes > 0, "{slow}");
        let cut = start.elapsed();
        assert!(cut >= WINDOW && cut <= WINDOW * 2, "cut after {cut:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_minimum_rate_only_silence_is_cut() {
        // A byte every 0.6 windows for ten windows is slow, but never silent for one.
        let body = steady(17, 1, WINDOW * 3 / 5);
        let body = read_ahead(body, limits(0, 0), false)
            .await
            .expect("read ahead");
        assert_eq!(drain(body.body).await.expect("never cut"), 17);
        let silent = burst_then_trickle(10, Duration::MAX / 4);
        let ahead = read_ahead(silent, limits(0, 0), false)
            .await
            .expect("read ahead");
        let error = drain(ahead.body).await.expect_err("silence is cut");
        assert!(error.to_string().contains("no body bytes"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_read_whole_is_kept_to_be_sent_again_byte_for_byte() {
        let body = steady(3, 10, Duration::from_millis(10));
        let ahead = read_ahead(body, limits(1024, 0), true).await.expect("read");
        let copy = ahead.copy.expect("read whole, so kept");
        assert_eq!(drain(ahead.body).await.expect("the body"), 30);
        assert_eq!(drain(replay(&copy)).await.expect("again"), 30);
        assert_eq!(drain(replay(&copy)).await.expect("and again"), 30);
        let none = read_ahead(super::super::empty_body(), limits(1024, 0), true).await;
        let none = none.expect("no body");
        assert_eq!(none.copy.map(|copy| copy.len()), Some(0));
        assert!(replay(&[]).is_end_stream());
    }
}
