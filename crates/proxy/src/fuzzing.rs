//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz and libFuzzer): one function
//! per parser or decoder the crate owns, each driving the real code with arbitrary bytes
//! and asserting what its callers rely on (round-trips, agreements). A panic, a failed
//! assertion included, is a crash the fuzzer reports.
//!
//! Compiled with the `fuzzing` feature (the fuzz crate turns it on) and in tests, where
//! every input kept under `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/` runs
//! through its entry point: a crash input copied there is a regression test of plain
//! `cargo test`. Each function's doc says how it reads its bytes; the seeds follow it.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HOST, IF_RANGE, VARY};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Version};
use http_body::{Body, Frame};
use http_body_util::StreamBody;

use crate::access_log::Record;
use crate::access_log::line::LineFormat;
use crate::config::access_format::{self, FIELDS, Piece};
use crate::config::{AccessFormat, Config};
use crate::hygiene::{ClientConnection, ConnectionToken, Forwarding};
use crate::key::{CacheKey, ClientScheme};
use crate::policy::directives::{Directives, MAX_DELTA_SECONDS, Seconds};
use crate::policy::vary::{self, VarySpec};
use crate::range::{self, Multipart, PartsBody, RangeAnswer};
use crate::server::head_guard::Limits;
use crate::server::head_guard::scanner::Scanner;

/// The store's decoders, whose entry points live beside them in `secondhit-store`.
pub use secondhit_store::fuzzing::{purge_log, store_entry};

/// The moment the targets that need a clock read: 2026-11-29T00:00:00Z.
const NOW: Duration = Duration::from_secs(1_795_910_400);

/// The lean HTTP/1.1 path's head reader (`secondhit_h1::server::read_request`, as
/// `server::lean` calls it). `data[0]` picks the limits, `data[1]` the size of the reads
/// the rest of `data` arrives in. Asserts that the heads it reads, and where it stops to
/// hand the connection to hyper, do not depend on how the bytes were cut into reads; that
/// no head it reads frames a body or asks for more than a head; and that the heads it read
/// followed by what it left are the input, byte for byte, so that hyper, taking over,
/// starts exactly where it stopped.
pub fn lean_heads(data: &[u8]) {
    let [limit, cut, input @ ..] = data else {
        return;
    };
    let limits = secondhit_h1::Limits {
        max_head_bytes: 64 << (limit % 8),
        max_headers: [1, 8, 100][usize::from(limit / 8 % 3)],
    };
    let whole = read_heads(input, input.len().max(1), limits);
    let split = read_heads(input, usize::from(*cut).max(1), limits);
    assert!(whole == split, "reads of {cut} bytes");
    let mut again = whole.consumed.clone();
    again.extend_from_slice(&whole.left);
    assert!(again == input, "nothing read twice, nothing lost");
    for head in &whole.heads {
        for name in [
            "content-length",
            "transfer-encoding",
            "expect",
            "upgrade",
            "te",
        ] {
            assert!(!head.headers.contains_key(name), "a {name} head was read");
        }
        assert!(head.method != Method::CONNECT && head.version == Version::HTTP_11);
    }
}

/// What the lean reader made of an input.
#[derive(PartialEq)]
struct LeanRead {
    heads: Vec<LeanHead>,
    /// The bytes of the heads read, in order.
    consumed: Vec<u8>,
    /// What was left for hyper (or unfinished at the end of the input).
    left: Vec<u8>,
    handed_over: bool,
}

#[derive(PartialEq)]
struct LeanHead {
    method: Method,
    uri: http::Uri,
    version: Version,
    headers: HeaderMap,
    persistent: bool,
}

/// Feeds `input` to the lean reader in reads of `piece` bytes, as `server::lean` does.
fn read_heads(input: &[u8], piece: usize, limits: secondhit_h1::Limits) -> LeanRead {
    use secondhit_h1::server::{ReadRequest, read_request};
    let mut read = LeanRead {
        heads: Vec::new(),
        consumed: Vec::new(),
        left: Vec::new(),
        handed_over: false,
    };
    let mut buf = bytes::BytesMut::new();
    for part in input.chunks(piece) {
        buf.extend_from_slice(part);
        loop {
            let before = buf.clone();
            match read_request(&mut buf, limits, &mut secondhit_h1::NameMemo::default()) {
                ReadRequest::Bodiless { parts, persistent } => {
                    let taken = before.len() - buf.len();
                    assert!(before[taken..] == buf[..], "only the head is taken");
                    read.consumed.extend_from_slice(&before[..taken]);
                    read.heads.push(LeanHead {
                        method: parts.method,
                        uri: parts.uri,
                        version: parts.version,
                        headers: parts.headers,
                        persistent,
                    });
                }
                ReadRequest::Incomplete => break,
                ReadRequest::Other => {
                    assert!(before == buf, "a head handed over is left whole");
                    read.handed_over = true;
                    read.left = buf.to_vec();
                    read.left
                        .extend_from_slice(&input[read.consumed.len() + read.left.len()..]);
                    return read;
                }
            }
        }
    }
    read.left = buf.to_vec();
    read
}

/// The head guard's framing scanner (`server::head_guard::scanner`, chunked bodies
/// included). `data[0]` and `data[1]` pick the limits, `data[2]` the size of the reads the
/// rest of `data` arrives in. Asserts that what the scanner releases to hyper by the end of
/// the input does not depend on how the bytes were cut into reads, nor on whether body bytes
/// were read past it as the guard reads them; and that it is the input itself, or a prefix
/// of it followed by the head that makes hyper answer 400.
///
/// Whether the close lingers is compared only where no read left a head unfinished: like
/// hyper, the scanner parses a head again only once its end may have come, so a malformed
/// head without an end is refused when it arrives in one read, but held until the input
/// ends when it comes in pieces (and a client that ended its input needs no linger).
pub fn head_guard(data: &[u8]) {
    let [limit, fields, cut, input @ ..] = data else {
        return;
    };
    let limits = Limits {
        max_head_bytes: 64 << (limit % 8),
        max_headers: [1, 8, 100, 101][usize::from(fields % 4)],
    };
    let Ok(token) = ConnectionToken::random() else {
        return;
    };
    let whole = scan(
        Scanner::new(token, limits),
        input,
        input.len().max(1),
        false,
    );
    let piece = usize::from(*cut).max(1);
    for (piece, direct) in [(1, false), (piece, false), (piece, true)] {
        let split = scan(Scanner::new(token, limits), input, piece, direct);
        assert!(
            split.out == whole.out,
            "reads of {piece} bytes (direct: {direct})"
        );
        assert_eq!(split.rejected, whole.rejected, "reads of {piece} bytes");
        if !split.held_partial && !whole.held_partial {
            assert_eq!(split.linger, whole.linger, "reads of {piece} bytes");
        }
    }
    let Scanned { out, rejected, .. } = whole;
    if !rejected {
        assert!(out == input, "a stream it does not reject passes unchanged");
        return;
    }
    let start = (out.windows(13).rposition(|w| w == b"GET / HTTP/1."))
        .expect("a rejection ends with its own head");
    assert!(
        input.starts_with(&out[..start]),
        "only what came before it passes"
    );
    assert!(out.ends_with(b"\r\nconnection: close\r\n\r\n"));
}

/// How a scanner ended a connection's input.
struct Scanned {
    /// What it released to hyper.
    out: Vec<u8>,
    /// It replaced a bad head.
    rejected: bool,
    /// Its close lingers.
    linger: bool,
    /// The input ended inside a head.
    held_partial: bool,
}

/// How `scanner` ends `input` arriving `piece` bytes at a time, then its end. `direct`:
/// body bytes go past the scanner (`passing`, `pass`), as `HeadGuard::poll_read` reads them.
fn scan(mut scanner: Scanner, input: &[u8], piece: usize, direct: bool) -> Scanned {
    let mut out = Vec::new();
    for mut read in input.chunks(piece) {
        while direct && !read.is_empty() && scanner.passing() > 0 {
            let n = usize::try_from(scanner.passing()).map_or(read.len(), |p| p.min(read.len()));
            out.extend_from_slice(&read[..n]);
            scanner.pass(n);
            read = &read[n..];
        }
        scanner.feed(read, &mut out);
    }
    let held_partial = scanner.holds_partial_head();
    if !scanner.is_rejected() {
        scanner.finish(&mut out);
    }
    Scanned {
        out,
        rejected: scanner.is_rejected(),
        linger: scanner.wants_linger(),
        held_partial,
    }
}

/// `Range` and `If-Range` (`range`, `range::if_range`). `data` is lines: the object's
/// length, then `Range`, `If-Range`, the stored `ETag`, `Last-Modified` and `Date` (an
/// empty or missing line: no such field), then the size of the body's frames. Asserts that
/// a part lies within the object, that only an answerable `Range` gets parts, that an
/// `If-Range` can only take parts away, and that the body cut from an object of up to
/// 64 KiB holds exactly the bytes its length announces.
pub fn range(data: &[u8]) {
    let mut lines = data.split(|&b| b == b'\n');
    let Some(len) = lines.next().and_then(number) else {
        return;
    };
    let mut field = |name: HeaderName, map: &mut HeaderMap| {
        let line = lines.next().unwrap_or_default();
        if let (false, Ok(value)) = (line.is_empty(), HeaderValue::from_bytes(line)) {
            map.insert(name, value);
        }
    };
    let (mut request, mut stored) = (HeaderMap::new(), HeaderMap::new());
    field(http::header::RANGE, &mut request);
    field(IF_RANGE, &mut request);
    for name in [
        http::header::ETAG,
        http::header::LAST_MODIFIED,
        http::header::DATE,
    ] {
        field(name, &mut stored);
    }
    let frame = lines.next().and_then(number).unwrap_or(1024).max(1);
    let answer = range::answer(&request, &stored, len);
    match &answer {
        RangeAnswer::Part { first, last } => assert!(first <= last && *last < len),
        RangeAnswer::Parts(parts) => {
            assert!((1..=range::MAX_PARTS).contains(&parts.len()));
            let mut sorted = parts.clone();
            sorted.sort_unstable();
            assert!(
                parts
                    .iter()
                    .all(|(first, last)| first <= last && *last < len)
            );
            assert!(range::ascending(&sorted), "parts never overlap: {parts:?}");
        }
        RangeAnswer::Whole | RangeAnswer::Unsatisfiable => {}
    }
    if answer != RangeAnswer::Whole {
        assert!(range::is_answerable_range(&request));
        request.remove(IF_RANGE);
        assert_eq!(range::answer(&request, &stored, len), answer);
    }
    if len <= 64 * 1024 {
        deliver(&answer, len, usize::try_from(frame).unwrap_or(usize::MAX));
    }
}

/// A decimal number, if the line is one.
fn number(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

/// The body an object of `len` bytes yields for `answer`, sent in frames of `frame`
/// bytes, against its announced length and the bytes it must hold.
fn deliver(answer: &RangeAnswer, len: u64, frame: usize) {
    // Every byte tells its offset (mod 251), so a shifted part shows.
    let object: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = (object.chunks(frame))
        .map(|chunk| Ok(Frame::data(Bytes::copy_from_slice(chunk))))
        .collect();
    let inner = StreamBody::new(futures_util::stream::iter(frames));
    let bytes = |first: u64, last: u64| &object[first as usize..=last as usize];
    let (body, expected) = match answer {
        RangeAnswer::Part { first, last } => (
            PartsBody::range(inner, *first, *last),
            bytes(*first, *last).to_vec(),
        ),
        RangeAnswer::Parts(parts) if range::ascending(parts) => {
            let multipart = Multipart::new(None, len);
            let mut expected = Vec::new();
            for &(first, last) in parts {
                expected.extend_from_slice(&multipart.part_head(first, last));
                expected.extend_from_slice(bytes(first, last));
            }
            expected.extend_from_slice(&multipart.closing());
            let announced = multipart.content_length(parts);
            assert_eq!(
                announced,
                expected.len() as u64,
                "Content-Length of {parts:?}"
            );
            (
                PartsBody::multipart(inner, &multipart, parts.clone()),
                expected,
            )
        }
        _ => return,
    };
    assert_eq!(body.size_hint().exact(), Some(expected.len() as u64));
    assert!(collect(body) == expected, "the parts of {answer:?}");
}

/// All data of a body whose frames are all ready.
fn collect<B: Body<Data = Bytes, Error = Infallible> + Unpin>(mut body: B) -> Vec<u8> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            Poll::Ready(Some(Err(never))) => match never {},
            Poll::Ready(None) => return out,
            Poll::Pending => panic!("a body over ready frames waited"),
        }
    }
}

/// Header fields from lines `name: value`; a line that is not one is left out.
fn header_lines(text: &[u8]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for line in text.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        {
            map.append(name, value);
        }
    }
    map
}

/// The directives the cache and the tests ask `Directives` about.
const DIRECTIVES: [&str; 12] = [
    "max-age",
    "s-maxage",
    "stale-while-revalidate",
    "stale-if-error",
    "max-stale",
    "min-fresh",
    "no-cache",
    "no-store",
    "private",
    "public",
    "must-revalidate",
    "x-unknown",
];

/// `Cache-Control`, `CDN-Cache-Control` and an operator's targeted field
/// (`policy::directives`). `data` is lines `name: value`; `x-targeted` stands for
/// `cache.targeted_field`. Asserts that a delta-seconds value never exceeds
/// [`MAX_DELTA_SECONDS`], that a directive has a value only when present, that directives
/// not from a targeted field are those of `Cache-Control`, and that targeted ones come from
/// a field that is there.
pub fn cache_control(data: &[u8]) {
    let headers = header_lines(data);
    let operator = HeaderName::from_static("x-targeted");
    let plain = Directives::parse(&headers);
    for field in [None, Some(&operator)] {
        let directives = Directives::of_response(&headers, field);
        for name in DIRECTIVES {
            let seconds = directives.seconds(name);
            if let Some(Seconds::Valid(n)) = seconds {
                assert!(n <= MAX_DELTA_SECONDS, "{name}={n}");
            }
            if let Some(Some(Seconds::Valid(n))) = directives.optional_seconds(name) {
                assert!(n <= MAX_DELTA_SECONDS, "{name}={n}");
            }
            assert_eq!(directives.has(name), seconds.is_some(), "{name}");
            if !directives.is_targeted() {
                assert_eq!(seconds, plain.seconds(name), "{name}");
            }
        }
        if directives.is_targeted() {
            let named = field.is_some_and(|name| headers.contains_key(name));
            assert!(named || headers.contains_key(crate::policy::directives::CDN_CACHE_CONTROL));
        }
    }
}

/// HTTP-dates (`policy::date`): `data` is the field's value, and only a value a field can
/// carry is read (the parser is only ever given one: no CR, LF or other control byte but
/// tab). Asserts that the names in it are read in any case, that a date this parser
/// accepts is the date `httpdate` writes and reads back, and that a date `httpdate`
/// accepts (but for RFC 850's two-digit years, which §5.6.7 reads differently) is the
/// same date here.
pub fn http_date(data: &[u8]) {
    let Ok(value) = HeaderValue::from_bytes(data) else {
        return;
    };
    let Ok(text) = value.to_str() else {
        return;
    };
    let now = SystemTime::UNIX_EPOCH + NOW;
    let parsed = crate::policy::date::parse(text, now);
    for cased in [text.to_ascii_lowercase(), text.to_ascii_uppercase()] {
        assert_eq!(crate::policy::date::parse(&cased, now), parsed, "{cased:?}");
    }
    if let Some(at) = parsed.filter(|at| *at >= SystemTime::UNIX_EPOCH) {
        let written = httpdate::fmt_http_date(at);
        assert_eq!(
            crate::policy::date::parse(&written, now),
            Some(at),
            "{written}"
        );
        assert_eq!(
            httpdate::parse_http_date(&written).ok(),
            Some(at),
            "{written}"
        );
    }
    if let Ok(at) = httpdate::parse_http_date(text)
        && !text.contains('-')
    {
        assert_eq!(parsed, Some(at), "httpdate reads {text:?}");
    }
}

/// `Vary` and the variant selector (`policy::vary`), through its entry points only:
/// `VarySpec::of` and `selector`. `data` is the response's fields, an empty line, then
/// the request's fields, as lines `name: value`. Asserts that the fields are sorted and
/// unique, that the canonical `Vary` reads back as the same spec, and that the selector
/// depends only on the fields named.
pub fn vary(data: &[u8]) {
    let split = data.windows(2).position(|w| w == b"\n\n");
    let (response, request) = match split {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let (response, request) = (header_lines(response), header_lines(request));
    let spec = VarySpec::of(&response);
    let mut again = HeaderMap::new();
    let canonical = spec.to_field_value();
    let value = HeaderValue::from_str(&canonical).expect("field names make a field value");
    again.insert(VARY, value);
    assert_eq!(VarySpec::of(&again), spec, "Vary: {canonical}");
    let VarySpec::Fields(fields) = spec else {
        return;
    };
    assert!(!fields.is_empty());
    assert!(
        fields.windows(2).all(|w| w[0].as_str() < w[1].as_str()),
        "{fields:?}"
    );
    let selector = vary::selector(&fields, &request);
    let unrelated = HeaderName::from_static("x-fuzz-unrelated");
    if !fields.contains(&unrelated) {
        let mut more = request.clone();
        more.append(unrelated, HeaderValue::from_static("1"));
        assert_eq!(vary::selector(&fields, &more), selector, "an unnamed field");
    }
}

/// Cache keys and the target forwarded (`key`, `proxy::target_form`,
/// `proxy::origin_request`). `data[0]`: bit 0 the TLS listener, the next bits the HTTP
/// version (1.0, 1.1, 2); then lines: the request target, and each line after it one
/// `Host`. A `GET` the proxy would forward (its head checked, not one it answers itself,
/// its target normalised as the proxy does) is keyed; asserts that normalising kept its
/// key and left it in its normal form, and that the request the origin gets (the
/// forwarded target and host, origin-form HTTP/1.1) has the key of the client's request.
pub fn cache_key(data: &[u8]) {
    let Some((&flags, text)) = data.split_first() else {
        return;
    };
    let scheme = [ClientScheme::Http, ClientScheme::Https][usize::from(flags & 1)];
    let version = [Version::HTTP_10, Version::HTTP_11, Version::HTTP_2];
    let version = version[usize::from(flags >> 1) % 3];
    let mut lines = text.split(|&b| b == b'\n');
    let Some(Ok(uri)) = lines.next().map(http::Uri::try_from) else {
        return;
    };
    let mut builder = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .version(version);
    for host in lines {
        builder = builder.header(HOST, host);
    }
    let Ok(request) = builder.body(()) else {
        return;
    };
    let (mut head, ()) = request.into_parts();
    let forwarded = crate::hygiene::check_request(&mut head).is_ok()
        && !crate::proxy::target_form::is_own(&head);
    let Ok(key) = CacheKey::from_request(&head, scheme)
        .map_err(drop)
        .and_then(|key| if forwarded { Ok(key) } else { Err(()) })
    else {
        return;
    };
    let sent = head.uri.clone();
    // A target with no normal form (a `GET` in authority form) is answered 400: nothing
    // is forwarded, and nothing stored.
    let Ok(changed) = crate::key::normalise_target(&mut head, scheme) else {
        return;
    };
    // As text: `Uri`'s own equality ignores the case of the host.
    match changed {
        None => assert_eq!(head.uri.to_string(), sent.to_string(), "unchanged"),
        Some(original) => assert_eq!(original.to_string(), sent.to_string(), "as sent"),
    }
    assert_eq!(CacheKey::from_request(&head, scheme).as_ref(), Ok(&key));
    let mut twice = head.clone();
    assert_eq!(crate::key::normalise_target(&mut twice, scheme), Ok(None));
    let client = ClientConnection {
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        scheme,
    };
    let host = Forwarding::of(&head, client).client_host().cloned();
    let host = host.expect("a keyed request names its host");
    let target = crate::proxy::origin_request::forwarded_target(&head);
    let at_origin = Request::builder().uri(target.as_str()).header(HOST, host);
    let (at_origin, ()) = at_origin
        .body(())
        .expect("a forwarded request")
        .into_parts();
    assert_eq!(
        CacheKey::from_request(&at_origin, scheme),
        Ok(key),
        "forwarded {target}"
    );
}

/// `log.access_format` templates (`config::access_format`) and the lines they render
/// (`access_log::line`). `data` is lines: the request target, `Host`, `Referer`,
/// `User-Agent` and `X-Forwarded-For` (from a trusted proxy), then the template (which
/// may span lines). Asserts that a parsed template written back as text parses the same,
/// that a template's line ends with its one newline and has no control or non-ASCII byte
/// but those of the template's own text, that a combined line has none, and that a JSON
/// line is one JSON object.
pub fn access_format(data: &[u8]) {
    let mut lines = data.splitn(6, |&b| b == b'\n');
    let mut next = || lines.next().unwrap_or_default();
    let target = http::Uri::try_from(next()).unwrap_or_else(|_| http::Uri::from_static("/"));
    let mut field = || HeaderValue::from_bytes(next()).ok();
    let (host, referer, user_agent, forwarded_for) = (field(), field(), field(), field());
    let Ok(template) = std::str::from_utf8(next()) else {
        return;
    };
    let record = Record {
        received: SystemTime::UNIX_EPOCH + NOW,
        peer: IpAddr::V4(Ipv4Addr::LOCALHOST),
        method: Method::GET,
        target,
        version: Version::HTTP_11,
        status: StatusCode::OK,
        referer,
        user_agent,
        outcome: crate::outcome::Outcome::hit(),
        host,
        forwarded_for,
        upstream: None,
        bytes: 5,
        duration: Duration::from_micros(1500),
    };
    let combined = render(AccessFormat::Combined, &record);
    assert_eq!(
        unprintable(&combined),
        1,
        "{}",
        String::from_utf8_lossy(&combined)
    );
    let json = render(AccessFormat::Json, &record);
    let object: serde_json::Value = serde_json::from_slice(&json).expect("a JSON line");
    assert!(object.is_object() && json.iter().filter(|&&b| b == b'\n').count() == 1);
    let Ok(pieces) = access_format::parse(template) else {
        return;
    };
    let written: String = pieces.iter().map(piece_text).collect();
    assert_eq!(
        access_format::parse(&written).as_ref(),
        Ok(&pieces),
        "{written:?}"
    );
    let own: usize = (pieces.iter())
        .map(|piece| match piece {
            Piece::Text(text) => unprintable(text.as_bytes()),
            Piece::Field(_) => 0,
        })
        .sum();
    let line = render(AccessFormat::Template(pieces), &record);
    assert_eq!(
        unprintable(&line),
        own + 1,
        "{}",
        String::from_utf8_lossy(&line)
    );
}

/// One access-log line of `record` in `format`, its peer (127.0.0.1) a trusted proxy.
fn render(format: AccessFormat, record: &Record) -> Vec<u8> {
    let trusted = vec![ipnet::IpNet::from(ipnet::Ipv4Net::from(
        Ipv4Addr::LOCALHOST,
    ))];
    let mut line = Vec::new();
    LineFormat::new(format, trusted).append(record, &mut line);
    assert!(line.ends_with(b"\n"));
    line
}

/// A template piece as template text: `${name}` for a variable.
fn piece_text(piece: &Piece) -> String {
    match piece {
        Piece::Text(text) => text.clone(),
        Piece::Field(field) => {
            let (name, _) = (FIELDS.iter().find(|(_, known)| known == field))
                .expect("every variable is listed");
            format!("${{{name}}}")
        }
    }
}

/// How many bytes of `bytes` are control bytes or not ASCII.
fn unprintable(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| !(0x20..0x7f).contains(*b)).count()
}

/// The configuration loader (`Config::from_toml_str` and its validation): `data` is the
/// file's text. Asserts that no text makes it panic, and that a config that loads, reloaded
/// from the same text, changes no key.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Config::from_toml_str(text) else {
        return;
    };
    let _ = config.unknown_hosts_warning();
    let (reloaded, changes) = config.reload(config.clone());
    assert_eq!(changes, crate::config::Changes::default());
    assert!(reloaded == config, "a reload of the same file keeps it");
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Runs every file kept for `target` (its seeds, and the crash inputs under
    /// `regressions/`) through `run`; fails when the target has no seed at all.
    fn replay(target: &str, run: fn(&[u8])) {
        // The fuzz crate sits at the workspace root, two levels above this crate.
        let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let mut seeds = 0;
        for kind in ["seeds", "regressions"] {
            let Ok(dir) = std::fs::read_dir(fuzz.join(kind).join(target)) else {
                continue;
            };
            for file in dir {
                let path = file.expect("a directory entry").path();
                let input = std::fs::read(&path).expect("a kept input");
                run(&input);
                seeds += usize::from(kind == "seeds");
            }
        }
        assert!(seeds > 0, "fuzz/seeds/{target}/ holds no input");
    }

    #[test]
    fn the_head_guard_releases_the_same_bytes_however_the_kept_inputs_are_cut() {
        replay("head_guard", super::head_guard);
    }

    #[test]
    fn the_lean_reader_stops_at_the_same_head_however_the_kept_inputs_are_cut() {
        replay("lean_heads", super::lean_heads);
    }

    #[test]
    fn kept_ranges_answer_within_the_object_and_deliver_what_they_announce() {
        replay("range", super::range);
    }

    #[test]
    fn kept_cache_control_fields_keep_their_seconds_in_range() {
        replay("cache_control", super::cache_control);
    }

    #[test]
    fn kept_http_dates_read_alike_in_any_case_and_agree_with_httpdate() {
        replay("http_date", super::http_date);
    }

    #[test]
    fn kept_vary_fields_read_back_and_select_only_on_the_fields_named() {
        replay("vary", super::vary);
    }

    #[test]
    fn kept_requests_are_forwarded_with_the_key_they_are_stored_under() {
        replay("cache_key", super::cache_key);
    }

    #[test]
    fn kept_entry_fronts_decode_without_panic_and_metadata_round_trips() {
        replay("store_entry", super::store_entry);
    }

    #[test]
    fn kept_purge_logs_read_back_what_was_written() {
        replay("purge_log", super::purge_log);
    }

    #[test]
    fn kept_access_formats_parse_back_and_render_one_line() {
        replay("access_format", super::access_format);
    }

    #[test]
    fn kept_config_files_load_without_panic_and_reload_unchanged() {
        replay("config", super::config);
    }
}
