//! Heads: a request's written out, a response's parsed, and the framing each implies
//! (RFC 9112 §6).

use std::mem::MaybeUninit;
use std::ops::Range;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version, request, response};
use http_body::Body;
use smallvec::SmallVec;

use crate::conn::{Limits, MAX_HEADERS};
use crate::error::{Error, Framing};
use crate::names::NameMemo;

/// How a request's body goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Upload {
    /// No body at all.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked coding.
    Chunked,
}

/// A request head as written.
pub(crate) struct RequestHead {
    /// How the body goes out.
    pub(crate) upload: Upload,
    /// The request's `Connection` asks to close the connection after the exchange.
    pub(crate) close: bool,
}

/// Field lines written after a request's own fields, as they are: fields a proxy adds to
/// every request of a client (`Via`, `X-Forwarded-For`, ...), encoded once and written
/// without a field map. Valid by construction: only names and values of the `http`
/// crate's checked types go in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldLines(Bytes);

impl FieldLines {
    /// No lines.
    pub const NONE: FieldLines = FieldLines(Bytes::new());

    /// The lines of `fields`, in order.
    pub fn new<'a>(fields: impl IntoIterator<Item = (&'a HeaderName, &'a HeaderValue)>) -> Self {
        let mut lines = BytesMut::new();
        let mut writer = FieldWriter(&mut lines);
        for (name, value) in fields {
            writer.field(name, value);
        }
        FieldLines(lines.freeze())
    }

    /// The lines as written: each `name: value` and CRLF.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Fields a request is sent with after its own: written straight into the connection's
/// buffer as the head is, once for each time the request is sent.
pub trait AddFields {
    /// About how many bytes [`AddFields::write`] writes: room is made for them first.
    fn size(&self) -> usize;

    /// Writes the fields through `out`.
    fn write(&self, out: &mut FieldWriter<'_>);
}

impl AddFields for FieldLines {
    fn size(&self) -> usize {
        self.0.len()
    }

    fn write(&self, out: &mut FieldWriter<'_>) {
        out.lines(self);
    }
}

/// Where [`AddFields`] writes: field lines of checked names and values only, and none
/// that frames the message or names connection options.
pub struct FieldWriter<'b>(&'b mut BytesMut);

impl FieldWriter<'_> {
    /// Writes the line of `name` and `value`; nothing for `Content-Length`,
    /// `Transfer-Encoding` or `Connection`, which only the request's own fields carry,
    /// where the framing of its body is read from: a second framing written unread would
    /// let the origin read the body otherwise than it was sent.
    pub fn field(&mut self, name: &HeaderName, value: &HeaderValue) {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING || name == CONNECTION {
            return;
        }
        put_field(self.0, name.as_str().as_bytes(), value.as_bytes());
    }

    /// Writes `lines` as they are.
    pub fn lines(&mut self, lines: &FieldLines) {
        self.0.put_slice(&lines.0);
    }
}

/// Writes the head of a request with `parts`, then the `added` lines, and `body` into
/// `dst`: origin-form target, the fields as given, in order (less any
/// `Transfer-Encoding`: the framing is this crate's), then `Content-Length` or
/// `Transfer-Encoding: chunked` when the fields do not frame the body already.
/// `Content-Length` and `Connection` are read in the pass that writes the fields (the
/// `added` lines carry neither: [`FieldWriter::field`]).
pub(crate) fn encode_request<B: Body>(
    parts: &request::Parts,
    added: &dyn AddFields,
    body: &B,
    dst: &mut BytesMut,
) -> Result<RequestHead, Error> {
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |target| target.as_str());
    let headers = &parts.headers;
    let mut size = parts.method.as_str().len() + target.len() + added.size() + 64;
    size += (headers.iter()).fold(0, |n, (name, value)| {
        n + name.as_str().len() + value.len() + 4
    });
    dst.reserve(size);
    dst.put_slice(parts.method.as_str().as_bytes());
    dst.put_u8(b' ');
    dst.put_slice(target.as_bytes());
    dst.put_slice(b" HTTP/1.1\r\n");
    let (mut length, mut close) = (Ok(None), false);
    for (name, value) in headers {
        if name == TRANSFER_ENCODING {
            continue;
        }
        if name == CONTENT_LENGTH {
            if let Ok(seen) = &mut length
                && let Err(error) = add_length(value, seen)
            {
                length = Err(error);
            }
        } else if name == CONNECTION {
            close |= connection_options(value.as_bytes()).close;
        }
        put_field(dst, name.as_str().as_bytes(), value.as_bytes());
    }
    added.write(&mut FieldWriter(dst));
    let upload = match length {
        Ok(Some(length)) if body.is_end_stream() && length > 0 => {
            return Err(Error::RequestBodyLength);
        }
        Ok(Some(length)) => Upload::Length(length),
        Ok(None) if body.is_end_stream() => Upload::Empty,
        Ok(None) => match body.size_hint().exact() {
            Some(length) => {
                let value = HeaderValue::from(length);
                put_field(dst, b"content-length", value.as_bytes());
                Upload::Length(length)
            }
            None => {
                put_field(dst, b"transfer-encoding", b"chunked");
                Upload::Chunked
            }
        },
        Err(_) => return Err(Error::RequestBodyLength),
    };
    dst.put_slice(b"\r\n");
    Ok(RequestHead { upload, close })
}

/// Writes the field line `name: value`: one capacity check and two copies, where four
/// `put_slice`s checked and advanced the buffer four times (a head writes a dozen lines).
pub(crate) fn put_field(dst: &mut BytesMut, name: &[u8], value: &[u8]) {
    let line = name.len() + value.len() + 4;
    dst.reserve(line);
    let spare = dst.spare_capacity_mut();
    assert!(spare.len() >= line);
    let at = spare.as_mut_ptr().cast::<u8>();
    // SAFETY: `at` starts `line` bytes of spare capacity (checked above); the four copies
    // write exactly those bytes, from slices that cannot overlap a buffer borrowed
    // mutably, and only then does the length take them in.
    unsafe {
        std::ptr::copy_nonoverlapping(name.as_ptr(), at, name.len());
        std::ptr::copy_nonoverlapping(b": ".as_ptr(), at.add(name.len()), 2);
        std::ptr::copy_nonoverlapping(value.as_ptr(), at.add(name.len() + 2), value.len());
        std::ptr::copy_nonoverlapping(b"\r\n".as_ptr(), at.add(line - 2), 2);
        dst.set_len(dst.len() + line);
    }
}

/// Writes `n` in hexadecimal (a chunk size).
pub(crate) fn put_hex(dst: &mut BytesMut, n: usize) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = DIGITS[rest & 0xf];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    dst.put_slice(&digits[at..]);
}

/// Reads one `Content-Length` line into `length`, the lines before it already there: an
/// error when a value is no number or differs from one seen.
pub(crate) fn add_length(value: &HeaderValue, length: &mut Option<u64>) -> Result<(), Framing> {
    add_length_bytes(value.as_bytes(), length)
}

/// [`add_length`] of a line's bytes.
fn add_length_bytes(value: &[u8], length: &mut Option<u64>) -> Result<(), Framing> {
    for part in value.split(|&b| b == b',') {
        let n = parse_decimal(part.trim_ascii()).ok_or(Framing::ContentLength)?;
        if length.is_some_and(|seen| seen != n) {
            return Err(Framing::ContentLength);
        }
        *length = Some(n);
    }
    Ok(())
}

/// Digits only (no sign, no space), within a `u64`.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A head's field names, each with where its value lies in the head, read before the
/// head is split off the buffer so that the values can share its bytes. Held inline for
/// the number of fields most heads have, not allocated each time.
pub(crate) type Named = SmallVec<[(HeaderName, Range<usize>); 16]>;

/// How a response's body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delimit {
    /// Exactly this many bytes (zero: none, as for HEAD, 204 and 304).
    Length(u64),
    /// The chunked coding.
    Chunked,
    /// Until the server closes the connection.
    UntilClose,
}

/// A final response head, read.
pub(crate) struct ResponseHead {
    pub(crate) parts: response::Parts,
    pub(crate) delimit: Delimit,
    /// Whether the connection may take another request after this response, as far as
    /// the head says: persistent (RFC 9112 §9.3), and framed unambiguously.
    pub(crate) persistent: bool,
}

/// Reads a final response head from the front of `buf`, skipping interim (1xx) ones:
/// `None` while it is incomplete. `method` is the request's, which decides whether the
/// answer has a body.
pub(crate) fn parse_response(
    buf: &mut BytesMut,
    limits: Limits,
    method: &Method,
    names: &mut NameMemo,
) -> Result<Option<ResponseHead>, Error> {
    loop {
        let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut []);
        let slots = &mut slots[..limits.max_headers];
        let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut response,
            buf,
            slots,
        ) {
            Ok(httparse::Status::Complete(len)) if len > limits.max_head_bytes => {
                return Err(Error::HeadTooLarge(limits.max_head_bytes));
            }
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() > limits.max_head_bytes => {
                return Err(Error::HeadTooLarge(limits.max_head_bytes));
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let code = response.code.unwrap_or_default();
        if code == 101 {
            return Err(Error::SwitchingProtocols);
        }
        if (100..200).contains(&code) {
            buf.advance(len);
            continue;
        }
        let status = StatusCode::from_u16(code).map_err(|_| httparse::Error::Status)?;
        let version = match response.version {
            Some(0) => Version::HTTP_10,
            _ => Version::HTTP_11,
        };
        // The names now, and where each value lies in the head ([`Named`]). The fields
        // that frame the body are read on the way, not looked up in the map afterwards;
        // the hop-by-hop ones are read and not passed on (RFC 9110 §7.6.1).
        let base = buf.as_ptr() as usize;
        let mut named = Named::new();
        let mut framing = FramingFields::default();
        for (at, field) in response.headers.iter().enumerate() {
            let name =
                (names.name(at, field.name.as_bytes())).map_err(|_| httparse::Error::HeaderName)?;
            framing.read(&name, field.value);
            if is_hop_by_hop(&name) {
                continue;
            }
            let value = field.value.as_ptr() as usize - base;
            named.push((name, value..value + field.value.len()));
        }
        let head = buf.split_to(len).freeze();
        let mut headers = fields(&head, &mut named)?;
        framing.strip(&mut headers);
        return finish(status, version, headers, &framing, method).map(Some);
    }
}

/// The header map of `head` with the fields `named` (each name, and where its value lies
/// in `head`); the values share the head's bytes.
fn fields(head: &Bytes, named: &mut Named) -> Result<HeaderMap, Error> {
    let mut headers = HeaderMap::with_capacity(named.len());
    for (name, value) in named.drain(..) {
        let value = parsed_field_value(head.slice(value)).ok_or(httparse::Error::HeaderValue)?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// `value`, the bytes of a field value that `httparse` accepted, as a [`HeaderValue`]
/// sharing them; `None` when `http` would not take them (never for bytes `httparse`
/// accepted: both allow HTAB, SP, visible ASCII and bytes from 0x80).
///
/// An ASCII value is not checked again byte by byte: `httparse` checked it, and a byte
/// at a time that check cost about a thousand instructions a pass-through.
pub(crate) fn parsed_field_value(value: Bytes) -> Option<HeaderValue> {
    if value.is_ascii() {
        // SAFETY: the unchecked constructor asks for valid UTF-8, and ASCII is. `httparse`
        // took these bytes as a field value (`is_header_value_token`: HTAB, SP and
        // 0x21..=0x7E among ASCII), which are the ASCII bytes `HeaderValue` allows, so
        // this is the value `from_maybe_shared` would have made (debug builds check it).
        return Some(unsafe { HeaderValue::from_maybe_shared_unchecked(value) });
    }
    HeaderValue::from_maybe_shared(value).ok()
}

/// What a response head's `Content-Length`, `Transfer-Encoding` and `Connection` lines
/// say, read line by line as the head is parsed.
struct FramingFields {
    /// The `Content-Length`, or why it is none: an error only matters when the body is
    /// framed by it.
    length: Result<Option<u64>, Framing>,
    /// Whether a `Transfer-Encoding` line was there.
    transfer_encoding: bool,
    /// Whether the last coding of the last `Transfer-Encoding` line is `chunked`.
    last_coding_chunked: bool,
    /// The persistence options all `Connection` lines list.
    connection: ConnectionOptions,
    /// The other options they list, lower-cased: the names of more hop-by-hop fields.
    named_by_connection: Vec<String>,
}

impl Default for FramingFields {
    fn default() -> FramingFields {
        FramingFields {
            length: Ok(None),
            transfer_encoding: false,
            last_coding_chunked: false,
            connection: ConnectionOptions {
                close: false,
                keep_alive: false,
            },
            named_by_connection: Vec::new(),
        }
    }
}

impl FramingFields {
    /// Takes in one field line.
    fn read(&mut self, name: &HeaderName, value: &[u8]) {
        if name == CONTENT_LENGTH {
            if let Ok(length) = &mut self.length
                && let Err(error) = add_length_bytes(value, length)
            {
                self.length = Err(error);
            }
        } else if name == TRANSFER_ENCODING {
            self.transfer_encoding = true;
            self.last_coding_chunked = last_coding_is_chunked(value);
        } else if name == CONNECTION {
            // One pass: the persistence options, and the names of the other fields.
            for option in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if option.eq_ignore_ascii_case(b"close") {
                    self.connection.close = true;
                } else if option.eq_ignore_ascii_case(b"keep-alive") {
                    self.connection.keep_alive = true;
                } else if !option.is_empty() {
                    let name = String::from_utf8_lossy(option).to_lowercase();
                    self.named_by_connection.push(name);
                }
            }
        }
    }

    /// Removes from `headers` what only framed this hop's message: the fields the
    /// `Connection` lines named, and a `Content-Length` that a transfer coding overrode
    /// (relayed, it would cut the body short and the next hop would take the cut as
    /// complete: RFC 9112 §6.3, rule 3).
    fn strip(&self, headers: &mut HeaderMap) {
        for name in &self.named_by_connection {
            headers.remove(name.as_str());
        }
        if self.transfer_encoding && !matches!(self.length, Ok(None)) {
            headers.remove(CONTENT_LENGTH);
        }
    }

    /// Whether the connection persists after a message of `version` with these fields
    /// (RFC 9112 §9.3): HTTP/1.1 unless `close` is among the connection options, HTTP/1.0
    /// only with `keep-alive` among them (and no `close`).
    fn persistent(&self, version: Version) -> bool {
        !self.connection.close && (version == Version::HTTP_11 || self.connection.keep_alive)
    }
}

/// The head's framing and persistence, from its status, version and framing fields.
fn finish(
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
    framing: &FramingFields,
    method: &Method,
) -> Result<ResponseHead, Error> {
    let mut persistent = framing.persistent(version);
    let bodiless = *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let delimit = if bodiless {
        Delimit::Length(0)
    } else if framing.transfer_encoding {
        if version == Version::HTTP_10 {
            return Err(Framing::TransferEncodingInHttp10.into());
        }
        // Both fields: the coding wins (rule 3), but a message framed two ways may be
        // read differently by whoever sent it, so the connection is not used again.
        if !matches!(framing.length, Ok(None)) {
            persistent = false;
        }
        match framing.last_coding_chunked {
            true => Delimit::Chunked,
            false => Delimit::UntilClose,
        }
    } else {
        match framing.length? {
            Some(length) => Delimit::Length(length),
            None => Delimit::UntilClose,
        }
    };
    let persistent = persistent && delimit != Delimit::UntilClose;
    let mut parts = response::Response::new(()).into_parts().0;
    parts.status = status;
    parts.version = version;
    parts.headers = headers;
    Ok(ResponseHead {
        parts,
        delimit,
        persistent,
    })
}

/// Whether `name` is a hop-by-hop field of RFC 9110 §7.6.1, or the obsolete `Keep-Alive`
/// or `Proxy-Connection`: it concerns only the connection it came on.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// Whether the last coding a `Transfer-Encoding` line lists is `chunked`.
fn last_coding_is_chunked(line: &[u8]) -> bool {
    let last_coding = line.rsplit(|&b| b == b',').next();
    last_coding.is_some_and(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// The persistence options one `Connection` line lists.
pub(crate) struct ConnectionOptions {
    /// `close`.
    pub(crate) close: bool,
    /// `keep-alive`.
    pub(crate) keep_alive: bool,
}

/// The persistence options `value`, a `Connection` line, lists.
pub(crate) fn connection_options(value: &[u8]) -> ConnectionOptions {
    let mut options = ConnectionOptions {
        close: false,
        keep_alive: false,
    };
    for option in value.split(|&b| b == b',') {
        let option = option.trim_ascii();
        options.close |= option.eq_ignore_ascii_case(b"close");
        options.keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
    }
    options
}

#[cfg(test)]
mod tests;
