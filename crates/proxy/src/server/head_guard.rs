//! The connection guard: rejects HTTP/1 request heads whose body framing is ambiguous,
//! before hyper parses them.
//!
//! It stands in front of hyper only: a connection begins on the lean HTTP/1.1 path
//! (`server::lean`), whose requests have no body, and the guard begins at the head that
//! path hands hyper, with its own first-head deadline from then.
//!
//! RFC 9112 §6.3 says a request with both `Content-Length` and `Transfer-Encoding` is
//! a request-smuggling vector that a server should answer with 400. hyper 1.x instead
//! drops the `Content-Length`, decodes the body as chunked and closes the connection
//! afterwards, so the service never sees both fields and cannot refuse the request.
//! The guard therefore sits between the socket and hyper and follows HTTP/1 framing on
//! the inbound bytes:
//!
//! - it collects each request head and parses it with `httparse` (hyper's own parser,
//!   with the same header-count and size limits);
//! - a head with `Content-Length` and `Transfer-Encoding`, or with `Content-Length`
//!   values that differ or are not numbers, is replaced by a synthesized head
//!   (`GET /`, `connection: close`, and [`REJECTION_FIELD`] carrying the connection's
//!   secret [`ConnectionToken`] and the reason), which `proxy::Proxy::handle` answers
//!   with 400; everything after the bad head is discarded, so it never reaches the
//!   origin, while requests pipelined before it are answered normally;
//! - any other head is passed on unchanged, and its body is followed (`Content-Length`
//!   bytes, or chunked framing byte for byte as hyper's decoder reads it) to find the
//!   next head.
//!
//! It stops inspecting, and passes every further byte through, whenever it cannot be
//! sure it agrees with hyper about where the next head starts: on the HTTP/2
//! prior-knowledge preface, after `CONNECT` or `Upgrade`, after a head it cannot parse
//! or one over the size limit (hyper then answers 400 or 431 itself and closes), and
//! after framing hyper will refuse (a non-chunked `Transfer-Encoding`, a malformed
//! chunk). The rule that keeps it safe: whenever both accept a message, they agree on
//! its length; where either refuses, the connection ends.
//!
//! Since it collects every head, the guard also enforces `server.header_read_timeout`
//! (hyper's own HTTP/1 timer is off): the first head must be complete that long after
//! the connection was accepted (which also ends connections that never send a byte), and
//! every later one that long after its first bytes came. Between requests the connection
//! idles under `server.idle_timeout` instead, as nginx separates `keepalive_timeout` from
//! `client_header_timeout`. Why not hyper's timer: it arms a fresh timer for every
//! request, even when the whole head is already in the buffer, a cost every cache hit pays
//! (`benches/RESULTS.md`, "head guard enforces the header timeout"); here a timer is
//! armed only when a read leaves a head incomplete.
//!
//! When a connection ends after a refusal (the guard's or hyper's), the guard lingers
//! on close: it shuts down its write half and reads and discards what the client still
//! sends for up to [`LINGER`], so the client reads the 400 or 431 instead of a reset
//! caused by unread data in the kernel's receive buffer.
//!
//! [`REJECTION_FIELD`]: crate::hygiene::REJECTION_FIELD

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::hygiene::ConnectionToken;

pub(crate) mod scanner;

use scanner::Scanner;

/// Longest wait for a refused client to stop sending before the socket is closed
/// (nginx's `lingering_timeout` is 5 s; a client that read the answer closes at once).
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// Most bytes read and discarded while lingering.
const LINGER_BYTES: usize = 1024 * 1024;

/// Bytes read from the socket at a time while a head is collected.
const SCRATCH: usize = 8 * 1024;

/// The limits the guard shares with hyper's HTTP/1 parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Most bytes of a head (hyper's `max_buf_size`).
    pub max_head_bytes: usize,
    /// Most header fields of a head (hyper's `max_headers`).
    pub max_headers: usize,
}

/// A client connection with the [`Scanner`] between the socket and hyper.
pub(super) struct HeadGuard<IO> {
    io: IO,
    scanner: Scanner,
    /// Bytes the scanner released that hyper has not read yet, from `taken` on.
    ready: Vec<u8>,
    taken: usize,
    /// The write half has been shut down.
    write_closed: bool,
    /// The end of `server.header_read_timeout` for the head being collected: from the
    /// connection's start for the first head, from its first bytes for a later one that
    /// did not come whole in one read. `None` while no head is pending.
    head_deadline: Option<Pin<Box<Sleep>>>,
    /// `server.header_read_timeout`.
    header_read_timeout: Duration,
    /// The lingering close's deadline, once it started.
    linger: Option<Pin<Box<Sleep>>>,
    /// Bytes discarded while lingering.
    lingered: usize,
}

impl<IO> HeadGuard<IO> {
    /// Guards `io` for one connection, marking its rejections with `token`; the first
    /// head must arrive within `header_read_timeout`.
    pub(super) fn new(
        io: IO,
        token: ConnectionToken,
        limits: Limits,
        header_read_timeout: Duration,
    ) -> HeadGuard<IO> {
        HeadGuard {
            io,
            scanner: Scanner::new(token, limits),
            ready: Vec::new(),
            taken: 0,
            write_closed: false,
            head_deadline: Some(Box::pin(tokio::time::sleep(header_read_timeout))),
            header_read_timeout,
            linger: None,
            lingered: 0,
        }
    }

    /// Hands hyper released bytes from `ready`; false when there are none.
    fn take_ready(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let left = &self.ready[self.taken..];
        if left.is_empty() {
            return false;
        }
        let n = left.len().min(buf.remaining());
        buf.put_slice(&left[..n]);
        self.taken += n;
        if self.taken == self.ready.len() {
            self.taken = 0;
            // Keep a small buffer for the next head; give a large one back.
            if self.ready.capacity() > SCRATCH {
                self.ready = Vec::new();
            } else {
                self.ready.clear();
            }
        }
        true
    }
}

impl<IO: AsyncRead + Unpin> HeadGuard<IO> {
    /// Reads from the socket into `part`; an error once the first head is overdue.
    fn poll_socket(
        &mut self,
        cx: &mut Context<'_>,
        part: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_read(cx, part);
        if polled.is_pending()
            && let Some(deadline) = &mut self.head_deadline
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request head within server.header_read_timeout",
            )));
        }
        polled
    }

    /// Feeds bytes read from the socket to the scanner, and keeps the head deadline:
    /// none once no head is pending, armed when a head came only in part.
    fn scan(&mut self, input: &[u8]) {
        self.scanner.feed(input, &mut self.ready);
        if !self.scanner.holds_partial_head() {
            self.head_deadline = None;
        } else if self.head_deadline.is_none() {
            let timeout = self.header_read_timeout;
            self.head_deadline = Some(Box::pin(tokio::time::sleep(timeout)));
        }
    }

    /// Reads and discards what the client still sends, until it closes, [`LINGER`]
    /// passes or [`LINGER_BYTES`] were discarded.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self
            .linger
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(LINGER)));
        if deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        let mut scratch = [MaybeUninit::<u8>::uninit(); SCRATCH];
        while self.lingered < LINGER_BYTES {
            let mut part = ReadBuf::uninit(&mut scratch);
            match ready!(Pin::new(&mut self.io).poll_read(cx, &mut part)) {
                Ok(()) if !part.filled().is_empty() => self.lingered += part.filled().len(),
                Ok(()) | Err(_) => return Poll::Ready(()),
            }
        }
        Poll::Ready(())
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for HeadGuard<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.take_ready(buf) {
                return Poll::Ready(Ok(()));
            }
            let passing = this.scanner.passing();
            if passing > 0 {
                // Body data passes unchanged: read it straight into hyper's buffer.
                let want =
                    usize::try_from(passing).map_or(buf.remaining(), |p| p.min(buf.remaining()));
                let mut part = ReadBuf::new(buf.initialize_unfilled_to(want));
                ready!(this.poll_socket(cx, &mut part))?;
                let n = part.filled().len();
                buf.advance(n);
                this.scanner.pass(n);
                return Poll::Ready(Ok(()));
            }
            // Uninitialised: zeroing 8 KiB for every read is work every hit would pay for
            // (`benches/RESULTS.md`, "head guard reads into uninitialised scratch").
            let mut scratch = [MaybeUninit::<u8>::uninit(); SCRATCH];
            let mut part = ReadBuf::uninit(&mut scratch);
            ready!(this.poll_socket(cx, &mut part))?;
            if part.filled().is_empty() {
                if this.scanner.is_rejected() {
                    // hyper takes end of input during a request as an abort and would
                    // drop the 400; it closes the connection after the answer anyway.
                    return Poll::Pending;
                }
                // Nothing released: end of input for hyper too.
                this.scanner.finish(&mut this.ready);
                this.take_ready(buf);
                return Poll::Ready(Ok(()));
            }
            this.scan(part.filled());
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for HeadGuard<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
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
        let this = self.get_mut();
        if !this.write_closed {
            ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
            this.write_closed = true;
        }
        if this.scanner.wants_linger() {
            ready!(this.poll_linger(cx));
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests;
