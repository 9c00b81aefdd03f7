//! The connection guard: rejects HTTP/1 request heads whose body framing is ambiguous,
//! before hyper parses them.
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
//! Holding a head back has one cost: hyper-util's protocol detection reads the first
//! bytes before hyper's HTTP/1 `header_read_timeout` starts, so the guard enforces that
//! timeout itself until it first hands hyper any bytes (which also ends connections
//! that never send a byte, which detection alone would wait for forever).
//!
//! When a connection ends after a refusal (the guard's or hyper's), the guard lingers
//! on close: it shuts down its write half and reads and discards what the client still
//! sends for up to [`LINGER`], so the client reads the 400 or 431 instead of a reset
//! caused by unread data in the kernel's receive buffer.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::hygiene::{ConnectionToken, REJECTION_FIELD, Rejection};

/// The HTTP/2 connection preface a prior-knowledge (h2c) client opens with (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Longest wait for a refused client to stop sending before the socket is closed
/// (nginx's `lingering_timeout` is 5 s; a client that read the answer closes at once).
pub const LINGER: Duration = Duration::from_secs(2);

/// Most bytes read and discarded while lingering.
const LINGER_BYTES: usize = 1024 * 1024;

/// Bytes read from the socket at a time while a head is collected.
const SCRATCH: usize = 8 * 1024;

/// The limits the guard shares with hyper's HTTP/1 parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes of a head (hyper's `max_buf_size`).
    pub max_head_bytes: usize,
    /// Most header fields of a head (hyper's `max_headers`).
    pub max_headers: usize,
}

/// The framing state machine over a connection's inbound bytes. Pure: no I/O.
pub(super) struct Scanner {
    state: State,
    limits: Limits,
    token: ConnectionToken,
}

enum State {
    /// Collecting a head; the first `scanned` bytes of `buf` are known not to end it.
    Head { buf: Vec<u8>, scanned: usize },
    /// Inside a body of known length: this many bytes left (never zero).
    Length(u64),
    /// Inside a chunked body.
    Chunked(Chunked),
    /// No longer inspecting; `linger` when hyper is about to refuse what it reads.
    Passthrough { linger: bool },
    /// A bad head was replaced; everything after it is discarded.
    Rejected,
}

impl State {
    fn head() -> State {
        State::Head {
            buf: Vec::new(),
            scanned: 0,
        }
    }
}

/// What one step of [`Scanner::feed`] did with its input.
enum Step {
    /// Used this many bytes of the input.
    Used(usize),
    /// Used all of the input, and these bytes after a completed head must be fed again.
    Leftover(Vec<u8>),
}

/// What a complete head asks for.
enum Verdict {
    Reject(Rejection),
    Forward {
        framing: Framing,
        /// The connection may change protocol after this message (CONNECT, Upgrade).
        stop: bool,
    },
}

/// How the body after a head is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    /// hyper will refuse the head (a transfer coding other than a final `chunked`).
    Refused,
}

impl Scanner {
    /// A scanner at the start of a connection.
    pub(super) fn new(token: ConnectionToken, limits: Limits) -> Scanner {
        Scanner {
            state: State::head(),
            limits,
            token,
        }
    }

    /// Consumes `input`, appending what hyper may read to `out`.
    pub(super) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut carried: Vec<u8>;
        let mut rest = input;
        while !rest.is_empty() {
            match self.step(rest, out) {
                Step::Used(n) => rest = &rest[n..],
                Step::Leftover(bytes) => {
                    carried = bytes;
                    rest = &carried;
                }
            }
        }
    }

    /// The client closed its side: releases a partial head (hyper reports it incomplete).
    pub(super) fn finish(&mut self, out: &mut Vec<u8>) {
        if let State::Head { buf, .. } = &mut self.state {
            out.append(buf);
            self.state = State::Passthrough { linger: false };
        }
    }

    /// How many of the next bytes pass through unchanged (body data), so they can be
    /// read straight into hyper's buffer.
    pub(super) fn passing(&self) -> u64 {
        match &self.state {
            State::Passthrough { .. } => u64::MAX,
            State::Length(left) => *left,
            State::Chunked(chunked) if chunked.step == ChunkStep::Data => chunked.size,
            _ => 0,
        }
    }

    /// Records that `n` (at most [`Scanner::passing`]) bytes passed through unchanged.
    pub(super) fn pass(&mut self, n: usize) {
        let n = n as u64;
        match &mut self.state {
            State::Length(left) => {
                *left = left.saturating_sub(n);
                if *left == 0 {
                    self.state = State::head();
                }
            }
            State::Chunked(chunked) if chunked.step == ChunkStep::Data => {
                chunked.size = chunked.size.saturating_sub(n);
                if chunked.size == 0 {
                    chunked.step = ChunkStep::DataCr;
                }
            }
            _ => {}
        }
    }

    /// A bad head was replaced and the connection is closing.
    pub(super) fn is_rejected(&self) -> bool {
        matches!(self.state, State::Rejected)
    }

    /// The connection ends with a refusal, so its close should linger.
    pub(super) fn wants_linger(&self) -> bool {
        matches!(
            self.state,
            State::Rejected | State::Passthrough { linger: true }
        )
    }

    fn step(&mut self, input: &[u8], out: &mut Vec<u8>) -> Step {
        let passing = usize::try_from(self.passing()).map_or(input.len(), |p| p.min(input.len()));
        if passing > 0 {
            out.extend_from_slice(&input[..passing]);
            self.pass(passing);
            return Step::Used(passing);
        }
        match &mut self.state {
            State::Rejected => Step::Used(input.len()),
            State::Chunked(chunked) => {
                // Size lines, CRLFs and trailers: one byte at a time, as hyper reads them.
                out.push(input[0]);
                match chunked.advance(input[0]) {
                    Ok(false) => {}
                    Ok(true) => self.state = State::head(),
                    Err(Malformed) => self.state = State::Passthrough { linger: true },
                }
                Step::Used(1)
            }
            State::Head { buf, .. } => {
                buf.extend_from_slice(input);
                match self.on_head_bytes(out) {
                    Some(leftover) => Step::Leftover(leftover),
                    None => Step::Used(input.len()),
                }
            }
            // Only reached with nothing left to pass (`pass` ends a finished body
            // itself); kept total instead of trusted.
            State::Length(_) | State::Passthrough { .. } => {
                self.state = State::head();
                Step::Used(0)
            }
        }
    }

    /// Decides on the head collected so far; returns the bytes after a completed head.
    fn on_head_bytes(&mut self, out: &mut Vec<u8>) -> Option<Vec<u8>> {
        let State::Head { buf, scanned } = &mut self.state else {
            return None;
        };
        if buf.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(buf) {
            // Possibly HTTP/2 prior knowledge: wait until the preface is whole or broken.
            return None;
        }
        if buf.starts_with(H2_PREFACE) {
            return self.give_up(false, out);
        }
        // Like hyper, re-parse only when the new bytes may end the head: a client
        // sending one byte at a time must not cost a full parse per byte.
        if *scanned > 0 && !may_end_head(buf, *scanned) {
            *scanned = buf.len();
            return if buf.len() >= self.limits.max_head_bytes {
                self.give_up(true, out)
            } else {
                None
            };
        }
        let mut headers = vec![httparse::EMPTY_HEADER; self.limits.max_headers];
        let mut request = httparse::Request::new(&mut headers);
        let (len, verdict, minor) = match request.parse(buf) {
            Ok(httparse::Status::Complete(len)) if len <= self.limits.max_head_bytes => {
                (len, inspect(&request), request.version.unwrap_or(1))
            }
            Ok(httparse::Status::Partial) if buf.len() < self.limits.max_head_bytes => {
                *scanned = buf.len();
                return None;
            }
            // Too large, too many fields, or malformed: hyper answers 431 or 400 and closes.
            Ok(_) | Err(_) => return self.give_up(true, out),
        };
        let mut head = std::mem::take(buf);
        let leftover = head.split_off(len);
        match verdict {
            Verdict::Reject(reason) => {
                self.write_rejection(reason, minor, out);
                self.state = State::Rejected;
                return None;
            }
            Verdict::Forward { framing, stop } if stop || framing == Framing::Refused => {
                out.append(&mut head);
                out.extend_from_slice(&leftover);
                self.state = State::Passthrough {
                    linger: framing == Framing::Refused,
                };
                return None;
            }
            Verdict::Forward { framing, .. } => {
                out.append(&mut head);
                self.state = match framing {
                    Framing::Length(0) | Framing::Refused => State::head(),
                    Framing::Length(n) => State::Length(n),
                    Framing::Chunked => State::Chunked(Chunked::default()),
                };
            }
        }
        (!leftover.is_empty()).then_some(leftover)
    }

    /// Stops inspecting: releases the collected bytes and passes all later ones through.
    fn give_up(&mut self, linger: bool, out: &mut Vec<u8>) -> Option<Vec<u8>> {
        if let State::Head { buf, .. } = &mut self.state {
            out.append(buf);
        }
        self.state = State::Passthrough { linger };
        None
    }

    /// The head hyper parses instead of a rejected one: `handle` answers it 400.
    fn write_rejection(&self, reason: Rejection, minor: u8, out: &mut Vec<u8>) {
        out.extend_from_slice(b"GET / HTTP/1.");
        out.push(if minor == 0 { b'0' } else { b'1' });
        // `.invalid` (RFC 6761) can never name a real host.
        out.extend_from_slice(b"\r\nhost: secondhit.invalid\r\n");
        out.extend_from_slice(REJECTION_FIELD.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(self.token.as_bytes());
        out.push(b' ');
        out.extend_from_slice(reason.as_str().as_bytes());
        out.extend_from_slice(b"\r\nconnection: close\r\n\r\n");
    }
}

/// Reads the framing fields of a complete head the way hyper's `Server::parse` does.
fn inspect(request: &httparse::Request<'_, '_>) -> Verdict {
    let mut length: Option<u64> = None;
    let mut length_problem: Option<Rejection> = None;
    let mut any_length = false;
    // hyper decides on the last Transfer-Encoding line.
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut upgrade = false;
    for header in request.headers.iter() {
        let name = header.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            any_length = true;
            match (decimal(header.value), length) {
                (None, _) => {
                    length_problem.get_or_insert(Rejection::InvalidLength);
                }
                (Some(n), Some(previous)) if n != previous => {
                    length_problem.get_or_insert(Rejection::ConflictingLength);
                }
                (Some(n), _) => length = Some(n),
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = Some(header.value);
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade = true;
        }
    }
    if transfer_encoding.is_some() && any_length {
        return Verdict::Reject(Rejection::LengthWithTransferEncoding);
    }
    if let Some(problem) = length_problem {
        return Verdict::Reject(problem);
    }
    let http_11 = request.version == Some(1);
    let framing = match transfer_encoding {
        // hyper refuses Transfer-Encoding in HTTP/1.0, and any final coding but chunked.
        Some(value) if http_11 && final_coding_is_chunked(value) => Framing::Chunked,
        Some(_) => Framing::Refused,
        None => Framing::Length(length.unwrap_or(0)),
    };
    Verdict::Forward {
        framing,
        stop: request.method == Some("CONNECT") || (upgrade && http_11),
    }
}

/// A `Content-Length` value: decimal digits only, optional whitespace around them.
fn decimal(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// hyper's `is_chunked_`: the value is visible ASCII and its last coding is `chunked`.
fn final_coding_is_chunked(value: &[u8]) -> bool {
    let visible = value
        .iter()
        .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b));
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    visible
        && text
            .rsplit(',')
            .next()
            .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"))
}

/// hyper's `is_complete_fast`: whether the bytes after `scanned` may hold a head's end.
fn may_end_head(buf: &[u8], scanned: usize) -> bool {
    let tail = &buf[scanned.saturating_sub(3)..];
    tail.windows(2).any(|w| w == b"\n\n") || tail.windows(3).any(|w| w == b"\n\r\n")
}

/// The chunked body is malformed; hyper will fail the request and close.
struct Malformed;

/// Where a chunked body is, following hyper's `ChunkedState` byte for byte.
#[derive(Default)]
struct Chunked {
    step: ChunkStep,
    /// The chunk size being read, then the data bytes left in the chunk.
    size: u64,
}

#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
enum ChunkStep {
    #[default]
    Start,
    Size,
    SizeLws,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    EndCr,
    Trailer,
    TrailerLf,
    EndLf,
}

impl Chunked {
    /// Takes one byte; `Ok(true)` when it ended the body.
    fn advance(&mut self, byte: u8) -> Result<bool, Malformed> {
        use ChunkStep::*;
        self.step = match (self.step, byte) {
            (Start, b) => {
                self.size = u64::from(hex_digit(b).ok_or(Malformed)?);
                Size
            }
            (Size, b'\t' | b' ') | (SizeLws, b'\t' | b' ') => SizeLws,
            (Size | SizeLws, b';') => Extension,
            (Size | SizeLws, b'\r') | (Extension, b'\r') => SizeLf,
            (Size, b) => {
                let digit = hex_digit(b).ok_or(Malformed)?;
                self.size = (self.size.checked_mul(16))
                    .and_then(|s| s.checked_add(u64::from(digit)))
                    .ok_or(Malformed)?;
                Size
            }
            (Extension, b'\n') => return Err(Malformed),
            (Extension, _) => Extension,
            (SizeLf, b'\n') if self.size == 0 => EndCr,
            (SizeLf, b'\n') => Data,
            (Data, _) => {
                self.size = self.size.saturating_sub(1);
                if self.size == 0 { DataCr } else { Data }
            }
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => Start,
            (EndCr, b'\r') => EndLf,
            (EndCr, _) => Trailer,
            (Trailer, b'\r') => TrailerLf,
            (Trailer, _) => Trailer,
            (TrailerLf, b'\n') => EndCr,
            (EndLf, b'\n') => return Ok(true),
            (SizeLws | SizeLf | DataCr | DataLf | TrailerLf | EndLf, _) => {
                return Err(Malformed);
            }
        };
        Ok(false)
    }
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
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
    /// Until hyper got its first bytes: the end of `server.header_read_timeout`.
    first_head_deadline: Option<Pin<Box<Sleep>>>,
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
            first_head_deadline: Some(Box::pin(tokio::time::sleep(header_read_timeout))),
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
        // hyper has bytes now, and its own timer for the head.
        self.first_head_deadline = None;
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
            && let Some(deadline) = &mut self.first_head_deadline
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request head within server.header_read_timeout",
            )));
        }
        polled
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
        let mut scratch = [0u8; SCRATCH];
        while self.lingered < LINGER_BYTES {
            let mut part = ReadBuf::new(&mut scratch);
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
            let mut scratch = [0u8; SCRATCH];
            let mut part = ReadBuf::new(&mut scratch);
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
            this.scanner.feed(part.filled(), &mut this.ready);
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
