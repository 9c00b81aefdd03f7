//! The lean HTTP/1.1 path: a client connection served without hyper for as long as it
//! sends only requests that frame no body.
//!
//! Nearly every request a cache sees is a `GET` or `HEAD` with no body. For those, this
//! loop reads the head (`secondhit_h1::server`), asks the proxy, and writes the answer
//! with one buffer for the head and the small frames of its body, in the connection's
//! task: no dispatcher, no second parse of the head, no per-request state machine. The
//! first request it does not serve (a body, `Expect`, `Upgrade`, `TE`, `CONNECT`, HTTP/1.0
//! or HTTP/2, or a head it cannot parse) hands the connection, with every byte read so far
//! ([`Prefixed`]), to hyper, which serves it to its end as it would have from the start;
//! so hyper still answers and refuses everything unusual. The head guard (`head_guard`)
//! stands in front of hyper only, from the head handed over on: this path's heads frame
//! no body, so none can be ambiguous, and each is parsed once. This path keeps
//! `server.header_read_timeout` itself ([`HeadClock`]).
//!
//! What a response looks like is hyper's: the same framing fields (`Content-Length` from
//! the body's known length, else chunked; none for HEAD, 204 and 304 bodies), `Date`,
//! `Connection: close` when the client asked to close. A body's trailers are not sent, as
//! hyper sends them only to a client that asked with `TE: trailers`, which this path
//! hands over. A body that fails, or ends short of or beyond its length, ends the
//! connection, as in hyper.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes, BytesMut};
use http::Request;
use http_body::Body;
use secondhit_h1::NameMemo;
use secondhit_h1::server::{self, Framing, ReadRequest};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Sleep;

use super::side_waker::SideWaker;
use crate::body::{BoxError, ClientBody};

/// The limits of the lean path.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// A head's size and fields: a head over them is handed over (hyper refuses it).
    pub(super) head: secondhit_h1::Limits,
    /// `server.header_read_timeout`: the first head must be whole that long after the
    /// connection began, a later one that long after its first bytes came (bytes that
    /// came in the read of the head before it count from when that head was answered:
    /// a pipelining client's heads do not each arm a timer).
    pub(super) header_read_timeout: Duration,
}

/// How a lean connection ended.
pub(super) enum Ended<IO> {
    /// It is closed: the client left, asked to close, or the server is shutting down.
    Closed,
    /// It met a request it does not serve: hyper takes the stream and what was read.
    HandOver(IO, Bytes),
}

/// Bytes read from the socket at a time.
const READ_SIZE: usize = 8 * 1024;

/// Body bytes gathered behind a head before they are written.
const GATHER: usize = 64 * 1024;

/// Most write buffer a connection keeps between responses.
const KEEP_OUT: usize = 16 * 1024;

/// Data frames this long or longer go to the socket as they are, not through the write
/// buffer: no copy, and a mapped body's `sendfile` (`zero_copy`) sees them whole.
const DIRECT: usize = 16 * 1024;

/// Serves `io` on the lean path until it ends or must be handed over (see the module
/// docs). `answer` answers one request; `closing` is set when the connection is to shut
/// down gracefully: it closes between requests, or after the response in flight.
pub(super) async fn serve<IO, F, A, B>(
    mut io: IO,
    limits: Limits,
    closing: &AtomicBool,
    answer: A,
) -> Result<Ended<IO>, BoxError>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    A: Fn(Request<ClientBody>) -> F,
    F: Future<Output = http::Response<B>>,
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    let mut input = BytesMut::with_capacity(READ_SIZE);
    let mut out = BytesMut::new();
    let watch = Watch::new();
    let mut head_clock = HeadClock::new(limits.header_read_timeout);
    let mut names = NameMemo::default();
    loop {
        let read = match input.is_empty() {
            // Nothing to parse yet (the usual case after a response).
            true => ReadRequest::Incomplete,
            false => server::read_request(&mut input, limits.head, &mut names),
        };
        let (parts, persistent) = match read {
            ReadRequest::Bodiless { parts, persistent } => (parts, persistent),
            ReadRequest::Other => return Ok(Ended::HandOver(io, input.freeze())),
            ReadRequest::Incomplete => {
                match read_more(&mut io, &mut input, closing, &mut head_clock).await? {
                    Read::More => continue,
                    Read::End => return Ok(Ended::Closed),
                }
            }
        };
        head_clock.head_read();
        let method = parts.method.clone();
        let mut sending = Sending {
            io: &mut io,
            input: &mut input,
            limits: limits.head,
            out: &mut out,
            watch: &watch,
            head_clock: &mut head_clock,
        };
        let asked = answer(Request::from_parts(parts, ClientBody::none()));
        let Some(response) = sending.answer(pin!(asked)).await else {
            return Ok(Ended::Closed);
        };
        let (head, body) = response.into_parts();
        let close = !persistent || closing.load(Ordering::Relaxed);
        let encoded = with_date(|date| {
            server::encode_response(&head, &method, body.size_hint(), close, date, sending.out)
        })?;
        drop(head);
        if !sending.body(body, encoded.framing).await? {
            return Ok(Ended::Closed);
        }
        if out.capacity() > KEEP_OUT {
            // An idle connection keeps no large buffer for what it once gathered.
            out = BytesMut::new();
        }
        if encoded.close || closing.load(Ordering::Relaxed) {
            io.shutdown().await?;
            return Ok(Ended::Closed);
        }
    }
}

/// What a wait for more of a head came to.
enum Read {
    /// Bytes came.
    More,
    /// The connection is closed: the client closed it (a head it began is dropped, as
    /// hyper does), or it was to close and no head had begun (and is shut down).
    End,
}

/// Reads more bytes into `input`, unless the connection is closing between requests (it
/// is then shut down); an error when a head is overdue.
async fn read_more<IO: AsyncRead + AsyncWrite + Unpin>(
    io: &mut IO,
    input: &mut BytesMut,
    closing: &AtomicBool,
    head_clock: &mut HeadClock,
) -> io::Result<Read> {
    if !input.is_empty() {
        head_clock.head_begun();
    }
    input.reserve(READ_SIZE);
    // `None`: closing between requests.
    let read = poll_fn(|cx| {
        if input.is_empty() && closing.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(None));
        }
        match tokio_util::io::poll_read_buf(Pin::new(&mut *io), cx, input) {
            Poll::Ready(Ok(0)) => Poll::Ready(Ok(Some(Read::End))),
            Poll::Ready(Ok(_)) => Poll::Ready(Ok(Some(Read::More))),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => head_clock.poll_overdue(cx),
        }
    })
    .await?;
    match read {
        Some(read) => Ok(read),
        None => {
            io.shutdown().await?;
            Ok(Read::End)
        }
    }
}

/// The deadline of the head being read (`server.header_read_timeout`), armed only while
/// one is due: a timer is made when a read leaves a head incomplete, never for a head
/// that comes whole, as most do.
struct HeadClock {
    timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl HeadClock {
    /// The clock of a connection that has just begun: its first head is due.
    fn new(timeout: Duration) -> HeadClock {
        HeadClock {
            timeout,
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
        }
    }

    /// Part of a head came: it is due from now, unless it already was.
    fn head_begun(&mut self) {
        if self.deadline.is_none() {
            self.deadline = Some(Box::pin(tokio::time::sleep(self.timeout)));
        }
    }

    /// A head was read whole: none is due.
    fn head_read(&mut self) {
        self.deadline = None;
    }

    /// Pending, or the error that ends a connection whose head is overdue.
    fn poll_overdue<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let overdue = (self.deadline.as_mut()).is_some_and(|d| d.as_mut().poll(cx).is_ready());
        if !overdue {
            return Poll::Pending;
        }
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no request head within server.header_read_timeout",
        )))
    }
}

/// The client's side of a connection while the lean path waits on something else: what
/// it sends meanwhile (a pipelined request) is read, up to a head's worth, and its leaving
/// is noticed, as hyper gives a request up when its client leaves. The socket is read
/// with a waker of its own ([`SideWaker`]), so that the other wakeups of a wait (the
/// origin's socket, the store) do not read it again.
struct Watch {
    side: Arc<SideWaker>,
    waker: Waker,
}

impl Watch {
    fn new() -> Watch {
        let side = SideWaker::new();
        let waker = Waker::from(side.clone());
        Watch { side, waker }
    }

    /// Waits for `future`, watching the client; `None` when it left or its connection
    /// failed. A head begun meanwhile is due from its first bytes (`head_clock`).
    async fn wait<IO, F>(
        &self,
        io: &mut IO,
        input: &mut BytesMut,
        limits: secondhit_h1::Limits,
        head_clock: &mut HeadClock,
        mut future: Pin<&mut F>,
    ) -> Option<F::Output>
    where
        IO: AsyncRead + Unpin,
        F: Future,
    {
        // Whatever the socket was last polled with, it is polled with this waker now.
        self.side.woken.store(true, Ordering::Relaxed);
        poll_fn(|cx| {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Some(output));
            }
            self.side.task.register(cx.waker());
            if !self.side.woken.swap(false, Ordering::Acquire) {
                return Poll::Pending;
            }
            let mut side_cx = Context::from_waker(&self.waker);
            // Read on only while a head could still be short: the rest waits in the socket.
            // Into the room the buffer has left: the request being answered still shares
            // the buffer's memory, so asking for more would allocate another.
            while input.len() <= limits.max_head_bytes {
                if input.len() == input.capacity() {
                    input.reserve(READ_SIZE);
                }
                match tokio_util::io::poll_read_buf(Pin::new(&mut *io), &mut side_cx, input) {
                    Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(None),
                    Poll::Ready(Ok(_)) => head_clock.head_begun(),
                    Poll::Pending => break,
                }
            }
            // A head begun meanwhile and overdue ends the connection, answer or not.
            match head_clock.poll_overdue::<()>(&mut side_cx) {
                Poll::Ready(_) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }
}

/// A response body on its way to the client.
struct Sending<'a, IO> {
    io: &'a mut IO,
    /// What the client sent meanwhile.
    input: &'a mut BytesMut,
    limits: secondhit_h1::Limits,
    /// The head, then the small frames of the body gathered behind it.
    out: &'a mut BytesMut,
    watch: &'a Watch,
    head_clock: &'a mut HeadClock,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Sending<'_, IO> {
    /// Waits for `future`, the answer, watching the client ([`Watch::wait`]); not an
    /// async fn, whose state would hold the wait's again.
    fn answer<'s, F: Future>(
        &'s mut self,
        future: Pin<&'s mut F>,
    ) -> impl Future<Output = Option<F::Output>> + 's {
        let (io, input, head_clock) = (&mut *self.io, &mut *self.input, &mut *self.head_clock);
        self.watch.wait(io, input, self.limits, head_clock, future)
    }

    /// Writes the head and `body` framed as `framing`: small frames are gathered while the
    /// body has more at once, and written when it has to wait. A body of known length is
    /// dropped at its last byte, as hyper does: a body teed into a fill may learn its end
    /// only later. `false`: the client left while the body waited.
    async fn body<B>(mut self, mut body: B, framing: Framing) -> Result<bool, BoxError>
    where
        B: Body<Data = Bytes, Error = BoxError> + Unpin,
    {
        let mut left = match framing {
            Framing::None => {
                drop(body);
                flush(self.io, self.out).await?;
                return Ok(true);
            }
            Framing::Length(length) => Some(length),
            Framing::Chunked => None,
        };
        while left != Some(0) {
            let Some(frame) = self.next_frame(Pin::new(&mut body)).await? else {
                return Ok(false);
            };
            let data = match frame {
                None => break,
                Some(Err(error)) => return Err(error),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    // Trailers: not sent (see the module docs).
                    Err(_) => continue,
                },
            };
            self.put(data, &mut left).await?;
        }
        drop(body);
        match left {
            Some(0) => {}
            Some(_) => return Err(BodyLength::Short.into()),
            None => self.out.extend_from_slice(server::LAST_CHUNK),
        }
        flush(self.io, self.out).await?;
        Ok(true)
    }

    /// The body's next frame: at once when it has one, else once what was gathered is
    /// written, watching the client meanwhile; `None` when the client left.
    async fn next_frame<B>(
        &mut self,
        mut body: Pin<&mut B>,
    ) -> Result<Option<Option<Result<http_body::Frame<Bytes>, BoxError>>>, BoxError>
    where
        B: Body<Data = Bytes, Error = BoxError>,
    {
        if let Poll::Ready(frame) = poll_fn(|cx| Poll::Ready(body.as_mut().poll_frame(cx))).await {
            return Ok(Some(frame));
        }
        flush(self.io, self.out).await?;
        let next = poll_fn(|cx| body.as_mut().poll_frame(cx));
        Ok(self
            .watch
            .wait(
                self.io,
                self.input,
                self.limits,
                self.head_clock,
                pin!(next),
            )
            .await)
    }

    /// Frames `data` into the write buffer, or writes it as it is when long.
    async fn put(&mut self, data: Bytes, left: &mut Option<u64>) -> Result<(), BoxError> {
        if data.is_empty() {
            return Ok(());
        }
        match left {
            Some(left) => {
                *left = left
                    .checked_sub(data.len() as u64)
                    .ok_or(BodyLength::Over)?;
            }
            None => server::put_chunk_size(data.len(), self.out),
        }
        if data.len() >= DIRECT {
            write_both(self.io, self.out, data).await?;
        } else {
            self.out.extend_from_slice(&data);
        }
        if left.is_none() {
            self.out.extend_from_slice(server::CHUNK_END);
        }
        if self.out.len() >= GATHER {
            flush(self.io, self.out).await?;
        }
        Ok(())
    }
}

/// A body that did not keep to its length: the connection cannot go on.
#[derive(Debug, thiserror::Error)]
enum BodyLength {
    #[error("the response body went on past its length")]
    Over,
    #[error("the response body ended short of its length")]
    Short,
}

/// Writes all of `out`, then empties it. Flushed too: a TLS stream may hold records back
/// when the socket is full, and nothing else would push them out before the next write.
async fn flush<IO: AsyncWrite + Unpin>(io: &mut IO, out: &mut BytesMut) -> Result<(), BoxError> {
    io.write_all(out).await?;
    out.clear();
    io.flush().await?;
    Ok(())
}

/// Writes all of `out` and then all of `data`, in as few calls as the socket allows.
async fn write_both<IO: AsyncWrite + Unpin>(
    io: &mut IO,
    out: &mut BytesMut,
    mut data: Bytes,
) -> io::Result<()> {
    while !out.is_empty() {
        let slices = [IoSlice::new(out), IoSlice::new(&data)];
        let n = io.write_vectored(&slices).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let from_out = n.min(out.len());
        out.advance(from_out);
        data.advance(n - from_out);
    }
    out.clear();
    io.write_all(&data).await?;
    io.flush().await
}

thread_local! {
    /// This thread's `Date` value and the second it is for.
    static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Calls `f` with the current `Date` value, formatted once per second on each thread.
fn with_date<T>(f: impl FnOnce(&[u8]) -> T) -> T {
    let now = SystemTime::now();
    let second = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    DATE.with(|date| {
        let mut date = date.borrow_mut();
        if date.0 != second {
            let text = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(second));
            let len = text.len().min(date.1.len());
            date.1[..len].copy_from_slice(&text.as_bytes()[..len]);
            date.0 = second;
        }
        f(&date.1)
    })
}

/// A stream that reads `prefix` before what is still to come from `io`: the bytes the
/// lean path read, for hyper to read again.
pub(super) struct Prefixed<IO> {
    prefix: Bytes,
    io: IO,
}

impl<IO> Prefixed<IO> {
    /// `io`, with `prefix` read first.
    pub(super) fn new(prefix: Bytes, io: IO) -> Prefixed<IO> {
        Prefixed { prefix, io }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Prefixed<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.is_empty() {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let n = this.prefix.len().min(buf.remaining());
        buf.put_slice(&this.prefix[..n]);
        this.prefix.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Prefixed<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
