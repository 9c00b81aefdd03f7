//! A connection between exchanges: the stream, its buffers and its limits.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use bytes::BytesMut;
use tokio::io::{AsyncRead, ReadBuf};

use crate::names::NameMemo;

/// The most header fields a response head may have, whatever [`Limits::max_headers`] says:
/// the parser's slots live on the stack.
pub const MAX_HEADERS: usize = 128;

/// The first read of a connection asks for this much; later ones grow while they fill
/// what they were given.
const FIRST_READ: usize = 8 * 1024;

/// The most one read asks for.
const MAX_READ: usize = 256 * 1024;

/// The most read buffer an idle connection keeps.
const IDLE_BUFFER: usize = 64 * 1024;

/// A read is given at least this much room; less spare capacity is topped up first.
const MIN_ROOM: usize = 1024;

/// How large a response head may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Header fields in a head, or in a trailer section (at most [`MAX_HEADERS`]).
    pub max_headers: usize,
    /// Bytes of a head (interim answers each count alone), of a trailer section, and of a
    /// chunk-size line.
    pub max_head_bytes: usize,
}

impl Default for Limits {
    /// hyper's client defaults: 100 fields, and 400 KiB of head.
    fn default() -> Limits {
        Limits {
            max_headers: 100,
            max_head_bytes: 8192 + 4096 * 100,
        }
    }
}

/// An HTTP/1.1 client connection over an already connected stream (TCP or TLS), taking
/// one request at a time ([`Connection::send`]). Between requests it holds no task and
/// does no I/O: whoever polls the exchange does it.
pub struct Connection<IO> {
    pub(crate) io: IO,
    /// What was read and not yet consumed; reused across requests, and the source of the
    /// body's frames (split off, not copied).
    pub(crate) read_buf: BytesMut,
    /// Where a request head is written; its allocation comes back once the head is sent.
    pub(crate) write_buf: BytesMut,
    pub(crate) limits: Limits,
    /// The field names of the last response head, to read the next one's by; boxed, as
    /// a connection is moved in and out of its pool on every exchange.
    pub(crate) names: Box<NameMemo>,
    /// How much the next read asks for.
    next_read: usize,
}

impl<IO: AsyncRead + Unpin> Connection<IO> {
    /// A connection over `io` with the default [`Limits`].
    pub fn new(io: IO) -> Connection<IO> {
        Connection::with_limits(io, Limits::default())
    }

    /// A connection over `io` with `limits`.
    pub fn with_limits(io: IO, limits: Limits) -> Connection<IO> {
        Connection {
            io,
            read_buf: BytesMut::new(),
            write_buf: BytesMut::new(),
            limits: Limits {
                max_headers: limits.max_headers.min(MAX_HEADERS),
                ..limits
            },
            names: Box::default(),
            next_read: FIRST_READ,
        }
    }

    /// Whether an idle connection can take a request: the server has neither closed it nor
    /// sent anything since the last response (an unasked answer, such as a 408 before an
    /// idle close, leaves it unusable). It does not wait: it looks at what the stream has
    /// ready now.
    pub fn is_open(&mut self) -> bool {
        if !self.read_buf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        matches!(self.poll_fill(&mut cx), Poll::Pending)
    }

    /// Reads what the stream has into `read_buf`: the count, zero at its end.
    pub(crate) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read_buf.capacity() - self.read_buf.len() < MIN_ROOM {
            self.read_buf.reserve(self.next_read);
        }
        let spare = self.read_buf.spare_capacity_mut();
        let room = spare.len();
        let start = spare.as_ptr().cast::<u8>();
        let mut read = ReadBuf::uninit(spare);
        ready!(Pin::new(&mut self.io).poll_read(cx, &mut read))?;
        // A reader that swapped the buffer for its own filled that one, not this one.
        if read.filled().as_ptr() != start {
            return Poll::Ready(Err(io::Error::other("the reader replaced its buffer")));
        }
        let n = read.filled().len();
        // SAFETY: the reader initialised (filled) the first `n` bytes of the spare capacity,
        // and the check above makes sure it was this capacity it filled.
        unsafe { self.read_buf.set_len(self.read_buf.len() + n) };
        if n == room && self.next_read < MAX_READ {
            self.next_read *= 2;
        }
        Poll::Ready(Ok(n))
    }
}

impl<IO> Connection<IO> {
    /// Lets go of a large read buffer before the connection idles: a large body grew it,
    /// and an idle connection should not hold on to that.
    pub(crate) fn trim(&mut self) {
        if self.read_buf.capacity() > IDLE_BUFFER {
            self.read_buf = BytesMut::new();
        }
    }
}

impl<IO> std::fmt::Debug for Connection<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("buffered", &self.read_buf.len())
            .field("limits", &self.limits)
            .finish()
    }
}
