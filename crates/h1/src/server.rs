//! The server side's lean path: reading a request head that frames no body, and writing
//! a response's head and body framing.
//!
//! It serves only the plainest request, the one nearly every cache request is: HTTP/1.1,
//! no body (no `Content-Length`, no `Transfer-Encoding`), and nothing that changes what
//! follows the head (`Expect`, `Upgrade`, `TE`, `CONNECT`). Anything else, and anything
//! it cannot parse, is [`ReadRequest::Other`]: the caller hands the connection, with the
//! bytes read so far, to a complete server, which then answers or refuses it as it would
//! have without this path. So this path never has to agree with that server about where
//! a body ends: its requests have none.

use std::mem::MaybeUninit;
use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use http::response;
use http::{HeaderMap, HeaderName, Method, StatusCode, Uri, Version, request};
use http_body::SizeHint;

use crate::conn::{Limits, MAX_HEADERS};
use crate::head::{Named, add_length, connection_options, parsed_field_value, put_field, put_hex};
use crate::names::NameMemo;

/// What the front of a connection's buffer holds.
// Large by value on purpose: the head moves straight into the request, and a box would
// cost an allocation per request.
#[expect(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ReadRequest {
    /// Not a whole head yet, and within the size limit: read more.
    Incomplete,
    /// A head this path serves, taken off the buffer; the request has no body.
    Bodiless {
        /// The request's head.
        parts: request::Parts,
        /// Whether the connection may take another request after this one (RFC 9112 §9.3).
        persistent: bool,
    },
    /// Anything else: the buffer is left as it was, for a complete server to read.
    Other,
}

/// Fields whose presence takes a request off this path: body framing, and what changes
/// what follows the head. A `static`: a `const` would be built and dropped at each use.
static NOT_LEAN: [HeaderName; 5] = [
    CONTENT_LENGTH,
    TRANSFER_ENCODING,
    http::header::EXPECT,
    http::header::UPGRADE,
    http::header::TE,
];

/// Longest request target this path takes (hyper's `MAX_URI_LEN`).
const MAX_TARGET_BYTES: usize = (u16::MAX - 1) as usize;

/// Fields a request's map has room for beyond its own.
const ROOM_TO_ADD: usize = 8;

/// Reads a request head from the front of `buf` (see [`ReadRequest`]), its field names by
/// `names`, the connection's memory of its last head's.
pub fn read_request(buf: &mut BytesMut, limits: Limits, names: &mut NameMemo) -> ReadRequest {
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let slots = &mut slots[..limits.max_headers.min(MAX_HEADERS)];
    let mut request = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut request,
        buf,
        slots,
    ) {
        Ok(httparse::Status::Complete(len)) if len <= limits.max_head_bytes => len,
        Ok(httparse::Status::Partial) if buf.len() <= limits.max_head_bytes => {
            return ReadRequest::Incomplete;
        }
        _ => return ReadRequest::Other,
    };
    if request.version != Some(1) {
        return ReadRequest::Other;
    }
    let (Some(method), Some(target)) = (request.method, request.path) else {
        return ReadRequest::Other;
    };
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return ReadRequest::Other;
    };
    if method == Method::CONNECT {
        return ReadRequest::Other;
    }
    // hyper's limit (`MAX_URI_LEN`): it answers 414 beyond it.
    if target.len() > MAX_TARGET_BYTES {
        return ReadRequest::Other;
    }
    // Names and where each value lies, so that values and target share the head's bytes
    // once it is split off.
    let base = buf.as_ptr() as usize;
    let target = offset(base, target.as_bytes());
    let mut named = Named::new();
    let mut close = false;
    for (at, field) in request.headers.iter().enumerate() {
        let Ok(name) = names.name(at, field.name.as_bytes()) else {
            return ReadRequest::Other;
        };
        if NOT_LEAN.contains(&name) {
            return ReadRequest::Other;
        }
        if name == CONNECTION {
            close |= connection_options(field.value).close;
        }
        named.push((name, offset(base, field.value)));
    }
    let Some(parts) = build(buf, len, method, target, &mut named) else {
        return ReadRequest::Other;
    };
    // HTTP/1.1: persistent unless `close` is among the connection options (RFC 9112 §9.3).
    ReadRequest::Bodiless {
        parts,
        persistent: !close,
    }
}

/// Where `part` lies in the buffer that starts at `base`.
fn offset(base: usize, part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base;
    start..start + part.len()
}

/// The head's parts, its `len` bytes split off `buf`; `None`, with `buf` as it was, when
/// the target or a value is not one `http` takes (a complete server then refuses it).
fn build(
    buf: &mut BytesMut,
    len: usize,
    method: Method,
    target: Range<usize>,
    named: &mut Named,
) -> Option<request::Parts> {
    let head = buf.split_to(len).freeze();
    let Some(parts) = parts_of(&head, method, target, named) else {
        // Rare: put the head back in front of what followed it.
        let mut whole = BytesMut::with_capacity(head.len() + buf.len());
        whole.put_slice(&head);
        whole.put_slice(buf);
        *buf = whole;
        return None;
    };
    Some(parts)
}

/// The parts of the head `head`, the target and the values sharing its bytes.
fn parts_of(
    head: &Bytes,
    method: Method,
    target: Range<usize>,
    named: &mut Named,
) -> Option<request::Parts> {
    let uri = Uri::from_maybe_shared(head.slice(target)).ok()?;
    // Room for the fields a proxy adds (forwarding, `Via`) without growing the map.
    let mut headers = HeaderMap::with_capacity(named.len() + ROOM_TO_ADD);
    for (name, value) in named.drain(..) {
        let value = parsed_field_value(head.slice(value))?;
        headers.append(name, value);
    }
    let mut parts = request::Request::new(()).into_parts().0;
    parts.method = method;
    parts.uri = uri;
    parts.version = Version::HTTP_11;
    parts.headers = headers;
    Some(parts)
}

/// How a response body goes out after its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Nothing follows the head: a HEAD request's, a 204's, a 304's, or an empty body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked coding (its trailers are not sent).
    Chunked,
}

/// A response head as written: how its body follows, and whether the connection closes
/// after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// How the body goes out.
    pub framing: Framing,
    /// The head says `Connection: close` (asked for, or among the response's own fields).
    pub close: bool,
}

/// A response head this path cannot write.
#[derive(Debug, thiserror::Error)]
#[error("the response's Content-Length is not one number")]
pub struct BadLength;

/// Writes the head of the response `parts` to a `method` request into `dst`, with the
/// framing its body needs (its `size_hint`, or the `Content-Length` it carries), a `Date`
/// of `date` when it has none, and `Connection: close` when `close` and it says nothing
/// of the kind; returns that framing. As hyper's server writes heads, with one
/// difference: the body's known length is written as its `Content-Length` (the response's
/// own value is used only when the body's length is unknown, where hyper writes the
/// response's value either way); a `Content-Length` on an empty body is dropped but for a
/// HEAD request's; a `Transfer-Encoding` is replaced by this side's own framing.
pub fn encode_response(
    parts: &response::Parts,
    method: &Method,
    body: SizeHint,
    close: bool,
    date: &[u8],
    dst: &mut BytesMut,
) -> Result<Encoded, BadLength> {
    let status = parts.status;
    dst.reserve(96 + date.len() + parts.headers.len() * FIELD_GUESS);
    put_status_line(status, dst);
    let own = put_fields(&parts.headers, dst)?;
    let has_body = !(*method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || status.is_informational());
    let empty = body.exact() == Some(0);
    let framing = match (own.length, body.exact()) {
        (_, _) if !has_body => Framing::None,
        (Some(_), Some(0)) | (None, Some(0)) => Framing::None,
        (_, Some(known)) => Framing::Length(known),
        (Some(length), None) => Framing::Length(length),
        (None, None) => Framing::Chunked,
    };
    match framing {
        Framing::Length(length) => put_length(length, dst),
        Framing::Chunked => put_field(dst, b"transfer-encoding", b"chunked"),
        // A HEAD answer keeps the length the GET would have had.
        Framing::None if *method == Method::HEAD => {
            if let Some(length) = own.length.or(body.exact().filter(|_| !empty)) {
                put_length(length, dst);
            }
        }
        Framing::None if has_body => put_field(dst, b"content-length", b"0"),
        Framing::None => {}
    }
    if close && !own.close {
        put_field(dst, b"connection", b"close");
    }
    if !own.date {
        put_field(dst, b"date", date);
    }
    dst.put_slice(b"\r\n");
    Ok(Encoded {
        framing,
        close: close || own.close,
    })
}

/// Bytes a field line takes on average, to reserve room for a head at once.
const FIELD_GUESS: usize = 48;

/// What the head's framing needs of a response's own fields.
struct OwnFields {
    /// Its `Content-Length`.
    length: Option<u64>,
    /// `close` is among its connection options.
    close: bool,
    /// It has a `Date`.
    date: bool,
}

/// Writes the response's fields but its framing ones, and notes what the framing needs of
/// them: one pass, no lookup.
fn put_fields(headers: &HeaderMap, dst: &mut BytesMut) -> Result<OwnFields, BadLength> {
    let mut own = OwnFields {
        length: None,
        close: false,
        date: false,
    };
    for (name, value) in headers {
        if *name == CONTENT_LENGTH {
            add_length(value, &mut own.length).map_err(|_| BadLength)?;
            continue;
        }
        if *name == TRANSFER_ENCODING {
            continue;
        }
        if *name == CONNECTION {
            own.close |= connection_options(value.as_bytes()).close;
        } else if *name == DATE {
            own.date = true;
        }
        put_field(dst, name.as_str().as_bytes(), value.as_bytes());
    }
    Ok(own)
}

fn put_status_line(status: StatusCode, dst: &mut BytesMut) {
    if status == StatusCode::OK {
        dst.put_slice(b"HTTP/1.1 200 OK\r\n");
        return;
    }
    dst.put_slice(b"HTTP/1.1 ");
    dst.put_slice(status.as_str().as_bytes());
    dst.put_u8(b' ');
    // A reason must be written: many parsers expect one.
    let reason = status.canonical_reason().unwrap_or("<none>");
    dst.put_slice(reason.as_bytes());
    dst.put_slice(b"\r\n");
}

fn put_length(length: u64, dst: &mut BytesMut) {
    put_field(
        dst,
        b"content-length",
        itoa::Buffer::new().format(length).as_bytes(),
    );
}

/// Writes the framing of one chunk of `len` bytes (the chunked coding's size line); the
/// data and [`CHUNK_END`] follow it.
pub fn put_chunk_size(len: usize, dst: &mut BytesMut) {
    put_hex(dst, len);
    dst.put_slice(b"\r\n");
}

/// What ends a chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";

/// What ends a chunked body: the last chunk, with no trailers.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests;
