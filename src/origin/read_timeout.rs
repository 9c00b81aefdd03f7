//! Read timeouts between a body's frames: an origin's response body
//! (`origin.read_timeout`) and the rest of a client's upload (`origin.body_read_timeout`).

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::error::BoxError;

/// A body went silent for longer than its timeout: the origin's response
/// (`origin.read_timeout`) or the client's upload (`origin.body_read_timeout`).
#[derive(Debug, thiserror::Error)]
#[error("no body bytes for {after:?} ({key})")]
pub struct ReadTimedOut {
    /// How long the body was silent.
    pub(super) after: Duration,
    /// The setting that timed out.
    pub(super) key: &'static str,
}

/// A body that fails with [`ReadTimedOut`] when no frame arrives for its timeout: a
/// response from the origin (`origin.read_timeout`), or the rest of a client's upload
/// (`origin.body_read_timeout`). A long transfer is never cut while frames keep coming.
///
/// The timer is lazy, as the connection idle timer is: it is armed only when the body
/// first has to wait (a short body whose frames are all ready never arms one), it ticks
/// [`READ_TICKS`] times per timeout, and a frame only sets a flag. The body fails after
/// that many ticks in a row without a frame, so after between the timeout and a quarter
/// more of silence. Why: restarting a timer for every frame took the time driver's lock
/// and read the clock twice per pass-through response.
pub struct ReadTimeout<B = super::PooledBody> {
    inner: B,
    timeout: Duration,
    /// The setting named when it fires.
    key: &'static str,
    /// Armed at the first wait. Boxed: a `Sleep` is `!Unpin`, and the body moves between
    /// owners.
    tick: Option<Pin<Box<Sleep>>>,
    /// Ticks in a row with no frame.
    quiet_ticks: u32,
    /// A frame arrived since the last tick.
    progressed: bool,
}

/// Timer ticks per read timeout (see [`ReadTimeout`]).
const READ_TICKS: u32 = 4;

impl<B> ReadTimeout<B> {
    /// `inner`, failing after `timeout` of silence with an error naming `key`.
    pub(super) fn new(inner: B, timeout: Duration, key: &'static str) -> ReadTimeout<B> {
        ReadTimeout {
            inner,
            timeout,
            key,
            tick: None,
            quiet_ticks: 0,
            progressed: false,
        }
    }

    /// The time between ticks (never zero: validation keeps timeouts positive).
    fn tick_period(&self) -> Duration {
        self.timeout / READ_TICKS
    }
}

impl<B> Body for ReadTimeout<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            this.progressed = true;
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let period = this.tick_period();
        let tick = this
            .tick
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(period)));
        loop {
            ready!(tick.as_mut().poll(cx));
            if std::mem::take(&mut this.progressed) {
                this.quiet_ticks = 0;
            } else {
                this.quiet_ticks += 1;
            }
            if this.quiet_ticks >= READ_TICKS {
                let timed_out = ReadTimedOut {
                    after: this.timeout,
                    key: this.key,
                };
                return Poll::Ready(Some(Err(timed_out.into())));
            }
            // From now, not from the last deadline: a body its reader left unpolled for
            // a while (a slow client) must not count the ticks it missed as silence.
            tick.as_mut().reset(Instant::now() + period);
        }
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
    use http_body_util::BodyExt;

    use super::*;

    /// A body whose frames come every 0.6 timeouts for longer than the timeout is read
    /// whole; when it then falls silent, it fails after the timeout, not before.
    #[tokio::test]
    async fn a_read_timeout_cuts_silence_but_not_a_slow_steady_body() {
        use futures_util::StreamExt;
        let timeout = Duration::from_millis(200);
        let frames = futures_util::stream::unfold(0, move |sent| async move {
            if sent == 4 {
                // Silent from here on.
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(timeout * 3 / 5).await;
            let frame = Frame::data(Bytes::from_static(b"x"));
            Some((Ok::<_, std::io::Error>(frame), sent + 1))
        })
        .boxed();
        let body = http_body_util::StreamBody::new(frames);
        let mut body = ReadTimeout::new(body, timeout, "origin.read_timeout");
        let mut silent = Instant::now();
        for _ in 0..4 {
            // Taken before the last frame is awaited: the silence starts after it.
            silent = Instant::now();
            let frame = body
                .frame()
                .await
                .expect("a frame")
                .expect("no timeout yet");
            assert_eq!(frame.into_data().ok(), Some(Bytes::from_static(b"x")));
        }
        let error = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("the timeout fires")
            .expect("an end or an error")
            .expect_err("silence is an error");
        assert!(error.to_string().contains("origin.read_timeout"), "{error}");
        assert!(silent.elapsed() >= timeout, "{:?}", silent.elapsed());
    }
}
