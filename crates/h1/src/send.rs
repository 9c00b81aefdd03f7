//! One exchange: the request written, its body streamed, and the response head read, all
//! in the task that awaits [`Connection::send`].

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{Method, Request, Response};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::body::ResponseBody;
use crate::conn::Connection;
use crate::error::{BoxError, Error, SendError};
use crate::head::{self, AddFields, ResponseHead, Upload};

/// Bytes of the request queued before the body is asked for more.
const HIGH_WATER: usize = 64 * 1024;

/// Data frames up to this size are copied behind what is queued, so that a head and a
/// small body leave in one write even on a stream that writes no vectors.
const COPY_BELOW: usize = 8 * 1024;

/// Buffers handed to one vectored write.
const MAX_SLICES: usize = 16;

impl<IO: AsyncRead + AsyncWrite + Unpin> Connection<IO> {
    /// Sends `request` and returns the response head, with a body that reads the rest of
    /// the response from this connection ([`ResponseBody::take_connection`] gives it back
    /// once that has ended, when it can take another request).
    ///
    /// The target is written in origin form, the fields as given and in their order (the
    /// caller has set `Host`), except `Transfer-Encoding`, then the `added` lines: the
    /// body is framed by its `Content-Length` field when it has one, else by its exact
    /// size when known, else chunked; a body that is at its end from the start is not
    /// framed at all. Request trailers are not sent.
    ///
    /// The response head is read while the body is still being written, so an early
    /// answer (a 413, say) is seen: the rest of the body is then not sent (it is dropped),
    /// and the connection is not used again. Interim (1xx) answers are skipped; a 101 is
    /// an error.
    pub async fn send<B>(
        mut self,
        request: Request<B>,
        added: &(dyn AddFields + Sync),
    ) -> Result<Response<ResponseBody<IO>>, SendError<B>>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        let (parts, mut body) = request.into_parts();
        let written = match head::encode_request(&parts, added, &body, &mut self.write_buf) {
            Ok(written) => written,
            Err(error) => {
                let request = Request::from_parts(parts, body);
                return Err(SendError::new(error, Some(request)));
            }
        };
        let closes = written.close;
        let mut exchange = Exchange {
            writer: Some(Writer::new(self.write_buf.split().freeze(), written.upload)),
            written: 0,
            body_taken: false,
            received: false,
            method: &parts.method,
        };
        let read = poll_fn(|cx| exchange.poll(cx, &mut self, &mut body)).await;
        match read {
            Ok(head) => {
                // Written whole only if the writer finished before the answer came.
                let whole = exchange.writer.is_none();
                let reusable = head.persistent && whole && !closes;
                let body = ResponseBody::new(self, head.delimit, reusable);
                Ok(Response::from_parts(head.parts, body))
            }
            Err(error) => {
                let again = matches!(error, Error::NothingReceived { .. }) && !exchange.body_taken;
                let request = again.then(|| Request::from_parts(parts, body));
                Err(SendError::new(error, request))
            }
        }
    }
}

/// The state of one exchange until its response head.
struct Exchange<'m> {
    /// `None` once the request is written whole.
    writer: Option<Writer>,
    /// Bytes of the request written so far.
    written: u64,
    /// Whether a frame was taken from the body (it can no longer be sent again whole).
    body_taken: bool,
    /// Whether any byte of a response (an interim one included) came.
    received: bool,
    method: &'m Method,
}

impl Exchange<'_> {
    /// Writes what it can of the request and reads what it can of the answer, until a
    /// final response head.
    fn poll<IO, B>(
        &mut self,
        cx: &mut Context<'_>,
        conn: &mut Connection<IO>,
        body: &mut B,
    ) -> Poll<Result<ResponseHead, Error>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        loop {
            if let Some(writer) = &mut self.writer {
                match writer.poll(
                    cx,
                    &mut conn.io,
                    body,
                    &mut self.written,
                    &mut self.body_taken,
                ) {
                    Poll::Ready(Ok(())) => self.writer = None,
                    // The server may have answered before it closed: read on. The writer
                    // stays, so the connection is not used again.
                    Poll::Ready(Err(Failure::Io)) => writer.stop(),
                    Poll::Ready(Err(Failure::Body(error))) => return Poll::Ready(Err(error)),
                    Poll::Pending => {}
                }
            }
            if self.received
                && let Some(head) = head::parse_response(
                    &mut conn.read_buf,
                    conn.limits,
                    self.method,
                    &mut conn.names,
                )?
            {
                return Poll::Ready(Ok(head));
            }
            let end = match ready!(conn.poll_fill(cx)) {
                Ok(0) => io::Error::from(io::ErrorKind::UnexpectedEof),
                Ok(_) => {
                    self.received = true;
                    continue;
                }
                Err(error) => error,
            };
            return Poll::Ready(Err(match self.received {
                true => Error::HeadCut(end),
                false => Error::NothingReceived {
                    written: self.written > 0,
                    source: end,
                },
            }));
        }
    }
}

/// Why the writer stopped.
enum Failure {
    /// The stream failed (the server closed or reset the connection).
    Io,
    /// The body failed, or did not match its length.
    Body(Error),
}

/// The request's bytes on their way out: queued buffers, then what the body gives.
struct Writer {
    /// Buffers to write, in order.
    queue: VecDeque<Bytes>,
    /// Small pieces gathered behind the queue (chunk-size lines, small frames).
    tail: BytesMut,
    /// Bytes in `queue` and `tail`.
    queued: usize,
    upload: Upload,
    /// Body bytes taken so far.
    taken: u64,
    /// Whether the body has ended (and its last framing is queued).
    body_done: bool,
    /// Whether writing failed: nothing more goes out.
    stopped: bool,
}

impl Writer {
    fn new(head: Bytes, upload: Upload) -> Writer {
        Writer {
            queued: head.len(),
            queue: VecDeque::from([head]),
            tail: BytesMut::new(),
            upload,
            taken: 0,
            body_done: upload == Upload::Empty,
            stopped: false,
        }
    }

    fn stop(&mut self) {
        self.stopped = true;
        self.queue.clear();
        self.tail.clear();
    }

    /// Writes until the request is out (ready), the stream or the body has to wait
    /// (pending), or something fails.
    fn poll<IO, B>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut IO,
        body: &mut B,
        written: &mut u64,
        body_taken: &mut bool,
    ) -> Poll<Result<(), Failure>>
    where
        IO: AsyncWrite + Unpin,
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        if self.stopped {
            return Poll::Pending;
        }
        loop {
            let waits = self.fill(cx, body, body_taken).map_err(Failure::Body)?;
            if self.queued == 0 {
                // Everything taken is written: push it out of any buffering layer (TLS).
                ready!(Pin::new(&mut *io).poll_flush(cx)).map_err(|_| Failure::Io)?;
                return match self.body_done {
                    true => Poll::Ready(Ok(())),
                    false => {
                        debug_assert!(waits, "an unfinished body is waited for");
                        Poll::Pending
                    }
                };
            }
            let n = ready!(self.poll_write(cx, io)).map_err(|_| Failure::Io)?;
            *written += n as u64;
        }
    }

    /// Takes frames from the body while little is queued; whether the body is waited for.
    fn fill<B>(
        &mut self,
        cx: &mut Context<'_>,
        body: &mut B,
        taken: &mut bool,
    ) -> Result<bool, Error>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        while !self.body_done && self.queued < HIGH_WATER {
            let frame = match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Pending => return Ok(true),
                Poll::Ready(frame) => frame,
            };
            *taken = true;
            match frame {
                None => self.end()?,
                Some(Err(error)) => return Err(Error::RequestBody(error.into())),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.data(data)?;
                    }
                    // A body that knows it has ended is not asked again.
                    if !self.body_done && body.is_end_stream() {
                        self.end()?;
                    }
                }
            }
        }
        Ok(false)
    }

    /// Queues a data frame, framed.
    fn data(&mut self, data: Bytes) -> Result<(), Error> {
        if data.is_empty() {
            return Ok(());
        }
        self.taken += data.len() as u64;
        match self.upload {
            Upload::Length(length) if self.taken > length => return Err(Error::RequestBodyLength),
            Upload::Length(_) => self.push(data),
            Upload::Chunked => {
                head::put_hex(&mut self.tail, data.len());
                self.tail.put_slice(b"\r\n");
                self.queued += self.tail.len();
                self.push(data);
                self.tail.put_slice(b"\r\n");
                self.queued += 2;
            }
            Upload::Empty => return Err(Error::RequestBodyLength),
        }
        Ok(())
    }

    /// The body has ended: queues the last chunk, or checks the length.
    fn end(&mut self) -> Result<(), Error> {
        self.body_done = true;
        match self.upload {
            Upload::Length(length) if self.taken != length => Err(Error::RequestBodyLength),
            Upload::Chunked => {
                self.tail.put_slice(b"0\r\n\r\n");
                self.queued += 5;
                Ok(())
            }
            Upload::Length(_) | Upload::Empty => Ok(()),
        }
    }

    /// Queues `data`: copied into the tail when small, else behind it as it is.
    fn push(&mut self, data: Bytes) {
        if data.len() < COPY_BELOW {
            self.queued += data.len();
            self.tail.put_slice(&data);
            return;
        }
        self.seal_tail();
        self.queued += data.len();
        self.queue.push_back(data);
    }

    /// Moves the tail into the queue.
    fn seal_tail(&mut self) {
        if !self.tail.is_empty() {
            self.queue.push_back(self.tail.split().freeze());
        }
    }

    /// One write of what is queued (vectored where the stream takes vectors).
    fn poll_write<IO: AsyncWrite + Unpin>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut IO,
    ) -> Poll<io::Result<usize>> {
        self.seal_tail();
        let io = Pin::new(io);
        let n = if io.is_write_vectored() && self.queue.len() > 1 {
            let mut slices = [IoSlice::new(&[]); MAX_SLICES];
            let count = (self.queue.iter().take(MAX_SLICES))
                .zip(slices.iter_mut())
                .map(|(buf, slice)| *slice = IoSlice::new(buf))
                .count();
            ready!(io.poll_write_vectored(cx, &slices[..count]))?
        } else {
            let front = self.queue.front().map_or(&[][..], |buf| &buf[..]);
            ready!(io.poll_write(cx, front))?
        };
        if n == 0 {
            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
        }
        self.advance(n);
        Poll::Ready(Ok(n))
    }

    /// Drops `n` written bytes from the front of the queue.
    fn advance(&mut self, mut n: usize) {
        self.queued -= n;
        while n > 0 {
            let Some(front) = self.queue.front_mut() else {
                return;
            };
            if front.len() > n {
                front.advance(n);
                return;
            }
            n -= front.len();
            self.queue.pop_front();
        }
    }
}
