//! A response body, read from the connection by whoever polls it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use tokio::io::AsyncRead;

use crate::conn::{Connection, Limits, MAX_HEADERS};
use crate::error::{Error, Framing};
use crate::head::Delimit;

/// Where a body's reading stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// This many bytes to go.
    Length(u64),
    /// Chunked: a chunk-size line next.
    ChunkSize,
    /// Chunked: this many bytes of the current chunk to go.
    ChunkData(u64),
    /// Chunked: the CRLF after a chunk's data.
    ChunkEnd,
    /// Chunked: the trailer section after the last chunk.
    Trailers,
    /// Until the server closes the connection.
    UntilClose,
    /// Ended, cleanly or not.
    Done,
}

/// What one step of decoding gave.
enum Step {
    Frame(Frame<Bytes>),
    /// The body ended without a frame.
    End,
    /// More bytes are needed.
    More,
}

/// The body of a response from [`Connection::send`]: frames read straight from the
/// connection in the task that polls it, split off its read buffer without copying.
///
/// Once it has ended cleanly, [`ResponseBody::take_connection`] hands the connection back
/// when it can take another request. A body dropped before its end, or one that failed,
/// closes the connection.
pub struct ResponseBody<IO> {
    /// `None` once taken back, or closed.
    conn: Option<Connection<IO>>,
    state: State,
    /// Whether the connection may take another request once this body has ended.
    reusable: bool,
    /// How the response delimited it.
    delimit: Delimit,
}

impl<IO> ResponseBody<IO> {
    pub(crate) fn new(conn: Connection<IO>, delimit: Delimit, reusable: bool) -> Self {
        let state = match delimit {
            Delimit::Length(0) => State::Done,
            Delimit::Length(n) => State::Length(n),
            Delimit::Chunked => State::ChunkSize,
            Delimit::UntilClose => State::UntilClose,
        };
        let mut body = ResponseBody {
            conn: Some(conn),
            state,
            reusable,
            delimit,
        };
        if body.state == State::Done {
            body.ended();
        }
        body
    }

    /// How the response delimited this body: for a HEAD request or a 204 or 304 answer,
    /// a length of zero whatever its fields say.
    pub fn delimit(&self) -> Delimit {
        self.delimit
    }

    /// The connection, when the body has ended cleanly and it can take another request:
    /// the response said it persists, the request went out whole, and the server sent
    /// nothing past the body. `None` otherwise, and after the first call.
    pub fn take_connection(&mut self) -> Option<Connection<IO>> {
        let mut conn = self.conn.take_if(|_| self.state == State::Done)?;
        conn.trim();
        Some(conn)
    }

    /// The body has ended cleanly: keeps the connection only if it can be used again.
    fn ended(&mut self) {
        self.state = State::Done;
        let clean = (self.conn.as_ref()).is_some_and(|conn| conn.read_buf.is_empty());
        if !(self.reusable && clean) {
            self.conn = None;
        }
    }

    /// The body failed: closes the connection.
    fn failed(&mut self, error: Error) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        self.state = State::Done;
        self.conn = None;
        Poll::Ready(Some(Err(error)))
    }
}

impl<IO: AsyncRead + Unpin> Body for ResponseBody<IO> {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        loop {
            let Some(conn) = this.conn.as_mut().filter(|_| this.state != State::Done) else {
                return Poll::Ready(None);
            };
            match decode(&mut this.state, &mut conn.read_buf, conn.limits) {
                Ok(Step::Frame(frame)) => {
                    if this.state == State::Done {
                        this.ended();
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Ok(Step::End) => {
                    this.ended();
                    return Poll::Ready(None);
                }
                Ok(Step::More) => {}
                Err(error) => return this.failed(error),
            }
            match ready!(conn.poll_fill(cx)) {
                Ok(0) if this.state == State::UntilClose => {
                    this.reusable = false;
                    this.ended();
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    let cut = io::Error::from(io::ErrorKind::UnexpectedEof);
                    return this.failed(Error::BodyCut(cut));
                }
                Ok(_) => {}
                Err(error) => return this.failed(Error::BodyCut(error)),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.state == State::Done
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Length(n) => SizeHint::with_exact(n),
            State::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

/// Decodes what `buf` holds of the body in `state`, advancing both.
fn decode(state: &mut State, buf: &mut BytesMut, limits: Limits) -> Result<Step, Error> {
    loop {
        match *state {
            State::Length(_) | State::ChunkData(_) | State::UntilClose if buf.is_empty() => {
                return Ok(Step::More);
            }
            State::Length(left) => {
                let data = take(buf, left);
                *state = match left - data.len() as u64 {
                    0 => State::Done,
                    left => State::Length(left),
                };
                return Ok(Step::Frame(Frame::data(data)));
            }
            State::ChunkData(left) => {
                let data = take(buf, left);
                *state = match left - data.len() as u64 {
                    0 => State::ChunkEnd,
                    left => State::ChunkData(left),
                };
                return Ok(Step::Frame(Frame::data(data)));
            }
            State::UntilClose => return Ok(Step::Frame(Frame::data(buf.split().freeze()))),
            State::ChunkSize => match httparse::parse_chunk_size(buf) {
                Ok(httparse::Status::Complete((line, size))) => {
                    buf.advance(line);
                    *state = match size {
                        0 => State::Trailers,
                        size => State::ChunkData(size),
                    };
                }
                Ok(httparse::Status::Partial) if buf.len() <= limits.max_head_bytes => {
                    return Ok(Step::More);
                }
                _ => return Err(Framing::ChunkSize.into()),
            },
            State::ChunkEnd => match buf.get(..2) {
                None if buf.first().is_none_or(|&b| b == b'\r') => return Ok(Step::More),
                Some(b"\r\n") => {
                    buf.advance(2);
                    *state = State::ChunkSize;
                }
                _ => return Err(Framing::ChunkEnd.into()),
            },
            State::Trailers => return trailers(state, buf, limits),
            State::Done => return Ok(Step::End),
        }
    }
}

/// Up to `left` bytes from the front of `buf`, shared, not copied.
fn take(buf: &mut BytesMut, left: u64) -> Bytes {
    let n = usize::try_from(left).map_or(buf.len(), |left| left.min(buf.len()));
    buf.split_to(n).freeze()
}

/// The trailer section after the last chunk: a trailers frame when it has fields.
fn trailers(state: &mut State, buf: &mut BytesMut, limits: Limits) -> Result<Step, Error> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let (len, fields) = match httparse::parse_headers(buf, &mut slots[..limits.max_headers]) {
        Ok(httparse::Status::Complete((len, fields))) => (len, trailer_map(fields)?),
        Ok(httparse::Status::Partial) if buf.len() <= limits.max_head_bytes => {
            return Ok(Step::More);
        }
        _ => return Err(Framing::Trailers.into()),
    };
    buf.advance(len);
    *state = State::Done;
    Ok(match fields.is_empty() {
        true => Step::End,
        false => Step::Frame(Frame::trailers(fields)),
    })
}

/// The trailer fields, copied (they are rare and small).
fn trailer_map(fields: &[httparse::Header<'_>]) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::with_capacity(fields.len());
    for field in fields {
        let name = HeaderName::from_bytes(field.name.as_bytes());
        let value = HeaderValue::from_bytes(field.value);
        let (Ok(name), Ok(value)) = (name, value) else {
            return Err(Framing::Trailers.into());
        };
        map.append(name, value);
    }
    Ok(map)
}

impl<IO> std::fmt::Debug for ResponseBody<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("state", &self.state)
            .field("reusable", &self.reusable)
            .field("open", &self.conn.is_some())
            .finish()
    }
}
