//! Read timeouts between a body's frames: an origin's response body
//! (`origin.read_timeout`) and a client's upload (`origin.body_read_timeout`, which also
//! needs `origin.body_min_rate`).

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::body::BoxError;

/// A body was too slow over its timeout: silent, for the origin's response
/// (`origin.read_timeout`) or the client's upload (`origin.body_read_timeout`), or, for
/// an upload, slower than `origin.body_min_rate`.
#[derive(Clone, Copy, Debug)]
pub struct ReadTimedOut {
    /// The window judged: the timeout.
    pub(super) after: Duration,
    /// The setting that timed out.
    pub(super) key: &'static str,
    /// Data bytes received in that window.
    pub(super) bytes: u64,
    /// The rate the body fell below, when it had one and was not silent.
    pub(super) min_rate: Option<MinRate>,
}

/// A body's minimum rate, averaged over its timeout.
#[derive(Clone, Copy, Debug)]
pub(super) struct MinRate {
    /// Bytes per second.
    pub(super) per_second: u64,
    /// The setting it comes from.
    pub(super) key: &'static str,
}

impl ReadTimedOut {
    /// A body silent for `after` (no rate to name).
    pub(super) fn silent(after: Duration, key: &'static str) -> ReadTimedOut {
        ReadTimedOut {
            after,
            key,
            bytes: 0,
            min_rate: None,
        }
    }
}

impl std::error::Error for ReadTimedOut {}

impl fmt::Display for ReadTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.min_rate {
            Some(rate) if self.bytes > 0 => write!(
                f,
                "{} body bytes in {:?} ({}), under {} bytes/s ({})",
                self.bytes, self.after, self.key, rate.per_second, rate.key
            ),
            _ => write!(f, "no body bytes for {:?} ({})", self.after, self.key),
        }
    }
}

/// A body that fails with [`ReadTimedOut`] when fewer than its minimum bytes arrive over
/// its timeout: one byte (silence) for a response from the origin (`origin.read_timeout`),
/// `origin.body_min_rate` times the timeout for a client's upload
/// (`origin.body_read_timeout`). A long transfer is never cut while it keeps that pace.
///
/// The timer is lazy, as the connection idle timer is: it is armed only when the body
/// first has to wait (a short body whose frames are all ready never arms one), it ticks
/// `READ_TICKS` times per timeout, and a frame only adds to a count. At each tick the
/// body fails if that many last ticks together counted fewer bytes than the
/// minimum, so after between the timeout and a quarter more below it; no tick judges
/// before that many have passed since the first wait, which is a slow start's grace. A
/// tick is only waited for while the inner body has nothing ready, so time the reader
/// spends not polling (a slow client downstream, an origin that reads slowly upstream)
/// never counts against the body. Why ticks: restarting a timer for every frame took the
/// time driver's lock and read the clock twice per pass-through response.
pub struct ReadTimeout<B = super::PooledBody> {
    inner: B,
    timeout: Duration,
    /// The setting named when it fires.
    key: &'static str,
    /// Data bytes needed per timeout (at least one).
    min_bytes: u64,
    /// Where `min_bytes` comes from, when more than one.
    min_rate: Option<MinRate>,
    /// Armed at the first wait. Boxed: a `Sleep` is `!Unpin`, and the body moves between
    /// owners.
    tick: Option<Pin<Box<Sleep>>>,
    /// Data bytes counted in each of the last ticks (a ring, oldest at `oldest`).
    ticks: [u64; READ_TICKS],
    /// Where the next tick's count goes.
    oldest: usize,
    /// Ticks so far, up to [`READ_TICKS`]: none judges before the ring is full.
    ticked: usize,
    /// Data bytes since the last tick.
    since_tick: u64,
    /// What [`ReadTimeout::peek_whole`] read ahead, served before anything else.
    ahead: VecDeque<Result<Frame<Bytes>, BoxError>>,
}

/// Timer ticks per read timeout (see [`ReadTimeout`]).
const READ_TICKS: usize = 4;

impl<B> ReadTimeout<B> {
    /// `inner`, failing after `timeout` of silence with an error naming `key`.
    pub(super) fn new(inner: B, timeout: Duration, key: &'static str) -> ReadTimeout<B> {
        ReadTimeout {
            inner,
            timeout,
            key,
            min_bytes: 1,
            min_rate: None,
            tick: None,
            ticks: [0; READ_TICKS],
            oldest: 0,
            ticked: 0,
            since_tick: 0,
            ahead: VecDeque::new(),
        }
    }

    /// The body it times.
    pub(super) fn get_ref(&self) -> &B {
        &self.inner
    }

    /// Also fails when the body averages under `rate` over its timeout (zero: only
    /// silence fails).
    pub(super) fn with_min_rate(mut self, rate: MinRate) -> ReadTimeout<B> {
        let per_timeout = u128::from(rate.per_second) * self.timeout.as_nanos() / 1_000_000_000;
        self.min_bytes = u64::try_from(per_timeout).unwrap_or(u64::MAX).max(1);
        self.min_rate = (rate.per_second > 0).then_some(rate);
        self
    }

    /// The time between ticks (never zero: validation keeps timeouts positive).
    fn tick_period(&self) -> Duration {
        self.timeout / READ_TICKS as u32
    }

    /// Counts a tick; the error when the last [`READ_TICKS`] counted too few bytes.
    fn count_tick(&mut self) -> Option<ReadTimedOut> {
        self.ticks[self.oldest] = std::mem::take(&mut self.since_tick);
        self.oldest = (self.oldest + 1) % READ_TICKS;
        self.ticked = (self.ticked + 1).min(READ_TICKS);
        let bytes = self
            .ticks
            .iter()
            .fold(0u64, |sum, &n| sum.saturating_add(n));
        (self.ticked == READ_TICKS && bytes < self.min_bytes).then_some(ReadTimedOut {
            after: self.timeout,
            key: self.key,
            bytes,
            min_rate: self.min_rate,
        })
    }
}

impl<B> ReadTimeout<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    /// The whole body, when it is `len` bytes and all of them have arrived already: reads
    /// ahead, without waiting for the network, what the connection holds, up to `len`
    /// bytes, and keeps it to be read again, so the body streams as if never peeked at.
    /// `None` when more is to come, or the body failed or ended short.
    ///
    /// The connection's task hands over one read at a time (the first of a fresh
    /// connection is 8 KiB, head included), so when the body has no next frame yet this
    /// task yields once to let it read on: bytes already in the socket's buffer arrive
    /// then, and only a body still on its way ends the peek.
    pub async fn peek_whole(&mut self, len: u64) -> Option<Bytes> {
        let mut seen = self.ahead_len();
        let mut failed = self.ahead.iter().any(Result::is_err);
        let mut yielded = false;
        while seen < len && !failed {
            // Polled once, never waited for.
            let inner = &mut self.inner;
            let polled =
                std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *inner).poll_frame(cx)));
            let frame = match polled.await {
                Poll::Ready(Some(frame)) => frame.map_err(Into::into),
                Poll::Ready(None) => break,
                Poll::Pending if !yielded => {
                    yielded = true;
                    tokio::task::yield_now().await;
                    continue;
                }
                Poll::Pending => break,
            };
            yielded = false;
            match &frame {
                Ok(frame) => {
                    let data_len = frame.data_ref().map_or(0, |data| data.len() as u64);
                    self.since_tick = self.since_tick.saturating_add(data_len);
                    seen += data_len;
                }
                Err(_) => failed = true,
            }
            self.ahead.push_back(frame);
        }
        if seen != len || failed || !self.inner.is_end_stream() {
            return None;
        }
        let mut data = self
            .ahead
            .iter()
            .filter_map(|frame| frame.as_ref().ok()?.data_ref());
        match (data.next(), data.next()) {
            (None, _) => Some(Bytes::new()),
            (Some(only), None) => Some(only.clone()),
            (Some(first), Some(second)) => {
                let mut whole = BytesMut::with_capacity(usize::try_from(len).ok()?);
                for part in [first, second].into_iter().chain(data) {
                    whole.extend_from_slice(part);
                }
                Some(whole.freeze())
            }
        }
    }

    /// Data bytes read ahead and not yet read again.
    fn ahead_len(&self) -> u64 {
        let frames = self.ahead.iter().filter_map(|frame| frame.as_ref().ok());
        frames
            .map(|frame| frame.data_ref().map_or(0, |data| data.len() as u64))
            .sum()
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
        if let Some(frame) = this.ahead.pop_front() {
            return Poll::Ready(Some(frame));
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            if let Some(Ok(frame)) = &frame {
                let len = frame.data_ref().map_or(0, |data| data.len() as u64);
                this.since_tick = this.since_tick.saturating_add(len);
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let period = this.tick_period();
        loop {
            let tick = this
                .tick
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(period)));
            ready!(tick.as_mut().poll(cx));
            // From now, not from the last deadline: a body its reader left unpolled for
            // a while must not count the ticks it missed as slowness.
            tick.as_mut().reset(Instant::now() + period);
            if let Some(timed_out) = this.count_tick() {
                return Poll::Ready(Some(Err(timed_out.into())));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ahead.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let (hint, ahead) = (self.inner.size_hint(), self.ahead_len());
        let mut sum = SizeHint::new();
        sum.set_lower(hint.lower().saturating_add(ahead));
        if let Some(upper) = hint.upper() {
            sum.set_upper(upper.saturating_add(ahead));
        }
        sum
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

    /// A body that hands out its steps in order: data, or `None` for one poll that finds
    /// nothing yet (as a connection whose next read has not run).
    struct Scripted(VecDeque<Option<&'static [u8]>>);

    impl Body for Scripted {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            match self.0.pop_front() {
                Some(Some(data)) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(data))))),
                Some(None) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                None => Poll::Ready(None),
            }
        }

        fn is_end_stream(&self) -> bool {
            self.0.is_empty()
        }

        // Exact, as a body of declared length is.
        fn size_hint(&self) -> SizeHint {
            SizeHint::with_exact(self.0.iter().flatten().map(|data| data.len() as u64).sum())
        }
    }

    fn scripted(steps: &[Option<&'static [u8]>]) -> ReadTimeout<Scripted> {
        let body = Scripted(steps.iter().copied().collect());
        ReadTimeout::new(body, Duration::from_secs(5), "origin.read_timeout")
    }

    /// A peek finds the whole body when all of it is there, or comes after one pause of
    /// the connection; either way the body then streams exactly as it would have.
    #[tokio::test]
    async fn a_peek_finds_a_whole_body_and_leaves_it_to_stream() {
        let one_pause: &[Option<&'static [u8]>] = &[Some(b"abc"), None, Some(b"defg")];
        for steps in [&[Some(&b"abc"[..]), Some(b"defg")][..], one_pause] {
            let mut body = scripted(steps);
            let whole = body.peek_whole(7).await;
            assert_eq!(whole.as_deref(), Some(&b"abcdefg"[..]), "{steps:?}");
            assert_eq!(body.size_hint().exact(), Some(7));
            assert!(!body.is_end_stream(), "the frames are still to be read");
            let streamed = body.collect().await.unwrap().to_bytes();
            assert_eq!(streamed, Bytes::from_static(b"abcdefg"));
        }
    }

    /// A body still on its way after a pause, or shorter than asked, is not whole, and
    /// what was peeked at streams all the same.
    #[tokio::test]
    async fn a_peek_of_a_body_still_coming_or_short_finds_nothing_and_loses_nothing() {
        let still_coming: &[Option<&'static [u8]>] = &[Some(b"abc"), None, None, Some(b"defg")];
        let mut body = scripted(still_coming);
        assert_eq!(body.peek_whole(7).await, None);
        let streamed = body.collect().await.unwrap().to_bytes();
        assert_eq!(streamed, Bytes::from_static(b"abcdefg"));
        let mut short = scripted(&[Some(b"abc")]);
        assert_eq!(short.peek_whole(7).await, None);
        assert_eq!(
            short.collect().await.unwrap().to_bytes(),
            Bytes::from_static(b"abc")
        );
    }
}
