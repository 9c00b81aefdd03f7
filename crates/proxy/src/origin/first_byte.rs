//! `origin.first_byte_timeout`: how long a server may take to its response head once a
//! request is on a connection.
//!
//! The time runs while the server owes the next step: from the request handed to the
//! connection, and, for a request with a body, from the last frame of it the connection
//! took, whether it was the last one or the next is ready and waits for the server to
//! read on. While the connection waits for the client's next bytes, the server owes
//! nothing: the client's pace has its own limits (`origin.body_read_timeout`,
//! `origin.body_min_rate`), so a long upload is never cut for taking long, and a server
//! that stops reading one is. A server that accepts the connection and says nothing (a
//! stopped process: the kernel still completes handshakes) is given up on after the
//! timeout, where the time between body bytes (`origin.read_timeout`) can stay long.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::RequestBody;
use super::deadline::{Board, Deadline};
use crate::body::BoxError;

/// Who the exchange waits for, as a request body's frames are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owed {
    /// The server, since then: to read on, or to answer.
    Since(Instant),
    /// The client, for more of its body.
    Client,
}

/// Where a request body's [`Watched`] wrapper says who the exchange waits for.
pub(super) struct Progress(Mutex<Owed>);

impl Progress {
    fn owed(&self) -> Owed {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, owed: Owed) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = owed;
    }
}

/// Wraps the body of `request`, when it has one, so that its progress can be told;
/// `None` for a request without a body (the server owes the answer at once).
pub(super) fn watch(request: &mut Request<RequestBody>) -> Option<Arc<Progress>> {
    if request.body().is_end_stream() {
        return None;
    }
    let progress = Arc::new(Progress(Mutex::new(Owed::Since(Instant::now()))));
    let body = std::mem::replace(request.body_mut(), super::empty_body());
    let watched = Watched {
        inner: body,
        progress: Arc::clone(&progress),
    };
    *request.body_mut() = watched.boxed_unsync();
    Some(progress)
}

/// Waits for `sending`, handed to the connection at `from`, while the server keeps within
/// `timeout` of owing the next step; `None` when it did not. `sending` is pinned by the
/// caller: an async fn keeps its arguments for its whole life, so a future taken by value
/// would be held twice.
pub(super) async fn within<F: Future>(
    mut sending: Pin<&mut F>,
    progress: Option<&Progress>,
    mut from: Instant,
    timeout: Duration,
    board: &Arc<Board>,
) -> Option<F::Output> {
    loop {
        // Set at the first wait only: an answer ready at once needs no deadline.
        let mut deadline: Option<Deadline<'_>> = None;
        let answered = poll_fn(|cx| {
            if let Poll::Ready(done) = sending.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            match &mut deadline {
                Some(deadline) => deadline.poll_passed(cx).map(|()| None),
                None => {
                    // Not looked at yet: the board wakes this task once the watcher,
                    // which `set` wakes for an earlier deadline, sees it passed.
                    deadline = Some(board.set(from + timeout, cx.waker()));
                    Poll::Pending
                }
            }
        })
        .await;
        if let Some(done) = answered {
            return Some(done);
        }
        let now = Instant::now();
        from = match progress.map(Progress::owed) {
            // The client's pace has limits of its own; look again a timeout later.
            Some(Owed::Client) => now,
            Some(Owed::Since(at)) if at + timeout > now => at,
            _ => return None,
        };
    }
}

/// A request body that tells its [`Progress`] whether the connection waits for the
/// client's bytes or the server took the last ones.
struct Watched {
    inner: RequestBody,
    progress: Arc<Progress>,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        self.progress.set(match polled {
            Poll::Pending => Owed::Client,
            Poll::Ready(_) => Owed::Since(Instant::now()),
        });
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(2);

    /// A body of `frames` one-byte frames, one every `every`.
    fn paced(frames: u32, every: Duration) -> RequestBody {
        let frames = futures_util::stream::unfold(0u32, move |sent| async move {
            (sent < frames).then_some(())?;
            tokio::time::sleep(every).await;
            let frame = Frame::data(Bytes::from_static(b"u"));
            Some((Ok::<_, BoxError>(frame), sent + 1))
        });
        http_body_util::StreamBody::new(frames.boxed()).boxed_unsync()
    }

    /// [`within`] of `TIMEOUT`, the request handed to the connection now.
    async fn within_from_now<F: Future>(
        sending: Pin<&mut F>,
        progress: Option<&Progress>,
    ) -> Option<F::Output> {
        let board = Arc::new(Board::default());
        within(sending, progress, Instant::now(), TIMEOUT, &board).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_server_is_given_up_on_after_the_timeout() {
        let start = Instant::now();
        let never = std::future::pending::<()>();
        assert_eq!(within_from_now(std::pin::pin!(never), None).await, None);
        assert_eq!(start.elapsed(), TIMEOUT);
        let answer = async {
            tokio::time::sleep(TIMEOUT / 2).await;
            7
        };
        assert_eq!(within_from_now(std::pin::pin!(answer), None).await, Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_upload_runs_on_while_the_server_keeps_reading_and_answers_after_it() {
        let mut request = Request::new(paced(10, TIMEOUT / 2));
        let progress = watch(&mut request).expect("a body to watch");
        // The server reads the whole body (five timeouts long), then answers a moment later.
        let server = async move {
            let read = request.into_body().collect().await.expect("the body");
            tokio::time::sleep(TIMEOUT / 2).await;
            read.to_bytes().len()
        };
        let start = Instant::now();
        assert_eq!(
            within_from_now(std::pin::pin!(server), Some(&progress)).await,
            Some(10)
        );
        assert!(start.elapsed() > TIMEOUT * 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_stops_reading_an_upload_is_given_up_on() {
        let mut request = Request::new(paced(10, Duration::from_millis(10)));
        let progress = watch(&mut request).expect("a body to watch");
        let server = async move {
            let mut body = request.into_body();
            let _ = body.frame().await;
            // Reads no more, and never answers.
            std::future::pending::<()>().await
        };
        let start = Instant::now();
        assert_eq!(
            within_from_now(std::pin::pin!(server), Some(&progress)).await,
            None
        );
        assert!(start.elapsed() <= TIMEOUT + Duration::from_millis(10));
    }

    #[test]
    fn a_request_without_a_body_is_not_wrapped() {
        let mut request = Request::new(super::super::empty_body());
        assert!(watch(&mut request).is_none());
    }
}
