//! Request heads read and response heads written, byte for byte.

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Method, Response, StatusCode, Version};
use http_body::SizeHint;
use proptest::prelude::*;

use super::{Encoded, Framing, ReadRequest, encode_response, put_chunk_size, read_request};
use crate::{Limits, NameMemo};

const DATE: &[u8] = b"Sun, 29 Nov 2026 21:00:00 GMT";

fn limits() -> Limits {
    Limits {
        max_headers: 16,
        max_head_bytes: 1024,
    }
}

fn read_bytes(bytes: &[u8]) -> (ReadRequest, BytesMut) {
    let mut buf = BytesMut::from(bytes);
    (
        read_request(&mut buf, limits(), &mut NameMemo::default()),
        buf,
    )
}

#[test]
fn heads_read_one_after_another_on_a_connection_each_keep_their_own_fields() {
    let mut buf = BytesMut::from(
        &b"GET /1 HTTP/1.1\r\nHost: a.test\r\nX-Trace: 1\r\nAccept: */*\r\n\r\n\
           GET /2 HTTP/1.1\r\nHost: a.test\r\nX-Other: 2\r\nAccept: */*\r\n\r\n\
           GET /3 HTTP/1.1\r\nhost: a.test\r\nX-Trace: 3\r\n\r\n"[..],
    );
    let mut names = NameMemo::default();
    let mut fields = Vec::new();
    for _ in 0..3 {
        let read = read_request(&mut buf, limits(), &mut names);
        let ReadRequest::Bodiless { parts, .. } = read else {
            panic!("not read: {read:?}");
        };
        let named = parts.headers.iter().map(|(name, value)| {
            let value = value.to_str().expect("ASCII");
            format!("{name}={value}")
        });
        fields.push(named.collect::<Vec<_>>().join(" "));
    }
    assert_eq!(
        fields,
        [
            "host=a.test x-trace=1 accept=*/*",
            "host=a.test x-other=2 accept=*/*",
            "host=a.test x-trace=3",
        ]
    );
}

#[test]
fn a_bodiless_get_is_read_and_taken_off_the_buffer() {
    let (read, rest) = read_bytes(
        b"GET /a?b=c HTTP/1.1\r\nHost: example.test\r\nX-A: 1\r\nX-A: 2\r\n\r\nGET /next",
    );
    let ReadRequest::Bodiless { parts, persistent } = read else {
        panic!("not read: {read:?}");
    };
    assert_eq!(parts.method, Method::GET);
    assert_eq!(parts.uri, "/a?b=c");
    assert_eq!(parts.version, Version::HTTP_11);
    assert_eq!(parts.headers["host"], "example.test");
    let values: Vec<_> = parts.headers.get_all("x-a").iter().collect();
    assert_eq!(values, ["1", "2"]);
    assert!(persistent);
    assert_eq!(&rest[..], b"GET /next", "what follows the head stays");
}

#[test]
fn a_head_cut_short_asks_for_more_and_leaves_the_buffer() {
    let (read, rest) = read_bytes(b"GET / HTTP/1.1\r\nHost: a");
    assert!(matches!(read, ReadRequest::Incomplete), "{read:?}");
    assert_eq!(&rest[..], b"GET / HTTP/1.1\r\nHost: a");
}

#[test]
fn connection_close_and_absolute_targets_are_read() {
    let (read, _) =
        read_bytes(b"HEAD http://example.test/x HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n");
    let ReadRequest::Bodiless { parts, persistent } = read else {
        panic!("not read: {read:?}");
    };
    assert_eq!(parts.method, Method::HEAD);
    assert_eq!(parts.uri.host(), Some("example.test"));
    assert!(!persistent);
}

#[test]
fn requests_with_a_body_or_more_than_a_head_are_left_for_a_complete_server() {
    let others: [&[u8]; 11] = [
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
        b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
        b"GET / HTTP/1.1\r\nTE: trailers\r\n\r\n",
        b"CONNECT example.test:443 HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.0\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        b"GET /\x7f HTTP/1.1\r\n\r\n",
    ];
    for bytes in others {
        let (read, rest) = read_bytes(bytes);
        assert!(
            matches!(read, ReadRequest::Other),
            "{:?}: {read:?}",
            String::from_utf8_lossy(bytes)
        );
        assert_eq!(&rest[..], bytes, "the buffer is left as it was");
    }
}

#[test]
fn a_target_http_refuses_is_put_back_in_front_of_what_followed() {
    // httparse takes this target; `http`'s `Uri` does not.
    let bytes = b"GET http://[::1 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    let (read, rest) = read_bytes(bytes);
    assert!(matches!(read, ReadRequest::Other), "{read:?}");
    assert_eq!(&rest[..], bytes);
}

#[test]
fn heads_over_the_limits_are_left_for_a_complete_server() {
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(1100));
    let (read, rest) = read_bytes(long.as_bytes());
    assert!(matches!(read, ReadRequest::Other), "{read:?}");
    assert_eq!(rest.len(), long.len());
    let unfinished = format!("GET /{}", "a".repeat(1100));
    let (read, _) = read_bytes(unfinished.as_bytes());
    assert!(
        matches!(read, ReadRequest::Other),
        "too long to finish: {read:?}"
    );
    let many: String = (0..20).map(|i| format!("x-{i}: 1\r\n")).collect();
    let (read, _) = read_bytes(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes());
    assert!(
        matches!(read, ReadRequest::Other),
        "too many fields: {read:?}"
    );
}

/// The head written for `response` to a `method` request with a body of `hint`.
fn head(response: Response<()>, method: &Method, hint: SizeHint, close: bool) -> (String, Encoded) {
    let (parts, ()) = response.into_parts();
    let mut dst = BytesMut::new();
    let encoded = encode_response(&parts, method, hint, close, DATE, &mut dst).expect("encoded");
    (String::from_utf8(dst.to_vec()).expect("text"), encoded)
}

fn response(status: u16, fields: &[(&'static str, &str)]) -> Response<()> {
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::from_u16(status).expect("status");
    for (name, value) in fields {
        let value = HeaderValue::from_str(value).expect("value");
        response.headers_mut().append(*name, value);
    }
    response
}

fn exact(n: u64) -> SizeHint {
    SizeHint::with_exact(n)
}

#[test]
fn a_body_of_known_length_gets_its_length_and_a_date() {
    let (text, encoded) = head(
        response(200, &[("x-a", "1")]),
        &Method::GET,
        exact(5),
        false,
    );
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\ndate: Sun, 29 Nov 2026 21:00:00 GMT\r\n\r\n"
    );
    assert_eq!(encoded.framing, Framing::Length(5));
    assert!(!encoded.close);
}

#[test]
fn a_body_of_unknown_length_is_chunked_unless_its_fields_give_the_length() {
    let (text, encoded) = head(response(404, &[]), &Method::GET, SizeHint::new(), false);
    assert!(
        text.starts_with("HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n"),
        "{text}"
    );
    assert_eq!(encoded.framing, Framing::Chunked);
    let fields = [("content-length", "7"), ("transfer-encoding", "chunked")];
    let (text, encoded) = head(response(200, &fields), &Method::GET, SizeHint::new(), false);
    assert_eq!(encoded.framing, Framing::Length(7));
    assert!(text.contains("content-length: 7\r\n"), "{text}");
    assert!(
        !text.contains("transfer-encoding"),
        "one framing only: {text}"
    );
}

#[test]
fn head_204_and_304_answers_send_no_body() {
    let fields = [
        ("content-length", "42"),
        ("date", "Sat, 28 Nov 2026 00:00:00 GMT"),
    ];
    let (text, encoded) = head(response(200, &fields), &Method::HEAD, exact(0), false);
    assert_eq!(encoded.framing, Framing::None);
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\r\ndate: Sat, 28 Nov 2026 00:00:00 GMT\r\ncontent-length: 42\r\n\r\n",
        "a HEAD answer keeps the GET's length, and the date it has"
    );
    let (text, encoded) = head(
        response(304, &[("content-length", "42")]),
        &Method::GET,
        exact(0),
        false,
    );
    assert_eq!(encoded.framing, Framing::None);
    assert!(!text.contains("content-length"), "{text}");
    let (text, encoded) = head(response(204, &[]), &Method::GET, SizeHint::new(), false);
    assert_eq!(encoded.framing, Framing::None);
    assert!(
        !text.contains("content-length") && !text.contains("transfer-encoding"),
        "{text}"
    );
}

#[test]
fn an_empty_body_says_so() {
    let (text, encoded) = head(
        response(200, &[("content-length", "0")]),
        &Method::GET,
        exact(0),
        false,
    );
    assert_eq!(encoded.framing, Framing::None);
    assert_eq!(text.matches("content-length: 0\r\n").count(), 1, "{text}");
}

#[test]
fn a_close_asked_for_or_answered_ends_the_connection() {
    let (text, encoded) = head(response(200, &[]), &Method::GET, exact(1), true);
    assert!(text.contains("connection: close\r\n"), "{text}");
    assert!(encoded.close);
    let (text, encoded) = head(
        response(200, &[("connection", "close")]),
        &Method::GET,
        exact(1),
        true,
    );
    assert_eq!(text.matches("connection").count(), 1, "said once: {text}");
    assert!(encoded.close);
    let (_, encoded) = head(
        response(200, &[("connection", "close")]),
        &Method::GET,
        exact(1),
        false,
    );
    assert!(encoded.close, "the response's own close counts");
}

#[test]
fn a_length_that_is_not_one_number_is_refused() {
    let (parts, ()) = response(200, &[("content-length", "1, 2")]).into_parts();
    let mut dst = BytesMut::new();
    let encoded = encode_response(&parts, &Method::GET, SizeHint::new(), false, DATE, &mut dst);
    assert!(encoded.is_err());
}

#[test]
fn chunk_sizes_are_hexadecimal() {
    let mut dst = BytesMut::new();
    for len in [1, 15, 16, 255, 4096, 1 << 20] {
        put_chunk_size(len, &mut dst);
    }
    assert_eq!(&dst[..], b"1\r\nf\r\n10\r\nff\r\n1000\r\n100000\r\n");
}

proptest! {
    /// Whatever arrives, a head is either read whole and taken off the buffer, or the
    /// buffer is left exactly as it was.
    #[test]
    fn the_buffer_is_taken_whole_or_left_alone(
        head in "[A-Z]{1,7} /[a-z0-9/?=&%]{0,20} HTTP/1\\.[01]\r\n([a-zA-Z-]{1,12}: [ -~]{0,20}\r\n){0,6}\r\n",
        tail in proptest::collection::vec(any::<u8>(), 0..40),
        cut in 0usize..200,
    ) {
        let mut bytes = head.clone().into_bytes();
        bytes.extend_from_slice(&tail);
        let cut = cut.min(bytes.len());
        let mut buf = BytesMut::from(&bytes[..cut]);
        match read_request(&mut buf, limits(), &mut NameMemo::default()) {
            ReadRequest::Bodiless { parts, .. } => {
                prop_assert_eq!(&buf[..], &bytes[head.len()..cut]);
                prop_assert_eq!(parts.version, Version::HTTP_11);
                for name in ["content-length", "transfer-encoding", "expect", "upgrade", "te"] {
                    prop_assert!(!parts.headers.contains_key(name));
                }
            }
            ReadRequest::Incomplete | ReadRequest::Other => {
                prop_assert_eq!(Bytes::copy_from_slice(&buf), Bytes::copy_from_slice(&bytes[..cut]));
            }
        }
    }
}
