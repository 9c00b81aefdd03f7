use super::*;

/// The framing and persistence [`parse_response`] reads from `head`, answering `method`.
fn read(head: &str, method: Method) -> Result<(Delimit, bool), Error> {
    let mut buf = BytesMut::from(head);
    let head = parse_response(
        &mut buf,
        Limits::default(),
        &method,
        &mut NameMemo::default(),
    )?
    .expect("a whole head");
    Ok((head.delimit, head.persistent))
}

fn get(head: &str) -> Result<(Delimit, bool), Error> {
    read(head, Method::GET)
}

/// [`get`], which must succeed.
fn framed(head: &str) -> (Delimit, bool) {
    get(head).expect("a framed head")
}

#[test]
fn a_length_frames_the_body_and_lines_that_agree_are_one_length() {
    assert_eq!(
        framed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"),
        (Delimit::Length(5), true)
    );
    assert_eq!(
        framed("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\ncontent-length: 5\r\n\r\n"),
        (Delimit::Length(5), true)
    );
    for bad in ["5, 6", "abc", "", "-1"] {
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
        assert!(
            matches!(get(&head), Err(Error::Framing(Framing::ContentLength))),
            "{bad:?}"
        );
    }
}

#[test]
fn a_bodiless_answer_ignores_its_length_however_it_is_written() {
    let bad_length = "Content-Length: abc\r\n\r\n";
    let head = format!("HTTP/1.1 200 OK\r\n{bad_length}");
    assert_eq!(
        read(&head, Method::HEAD).expect("HEAD"),
        (Delimit::Length(0), true)
    );
    for status in ["204 No Content", "304 Not Modified"] {
        let head = format!("HTTP/1.1 {status}\r\n{bad_length}");
        assert_eq!(get(&head).expect(status), (Delimit::Length(0), true));
    }
}

#[test]
fn the_last_coding_of_the_last_transfer_encoding_line_decides_and_a_length_beside_it_ends_the_connection()
 {
    assert_eq!(
        framed("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"),
        (Delimit::Chunked, true)
    );
    assert_eq!(
        framed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n"),
        (Delimit::UntilClose, false)
    );
    // The coding wins over any length, even one that is no number; the connection is not
    // used again.
    for length in ["3", "abc"] {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        assert_eq!(get(&head).expect(length), (Delimit::Chunked, false));
    }
    assert!(matches!(
        get("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Err(Error::Framing(Framing::TransferEncodingInHttp10))
    ));
}

#[test]
fn persistence_follows_the_version_and_every_connection_line() {
    let length = "Content-Length: 0\r\n";
    let cases = [
        ("HTTP/1.1", "", true),
        ("HTTP/1.1", "Connection: Close\r\n", false),
        (
            "HTTP/1.1",
            "Connection: keep-alive\r\nConnection: x, close\r\n",
            false,
        ),
        ("HTTP/1.0", "", false),
        ("HTTP/1.0", "Connection: Keep-Alive\r\n", true),
        ("HTTP/1.0", "Connection: keep-alive, close\r\n", false),
    ];
    for (version, connection, persistent) in cases {
        let head = format!("{version} 200 OK\r\n{length}{connection}\r\n");
        assert_eq!(framed(&head), (Delimit::Length(0), persistent), "{head:?}");
    }
    // A body that runs until close never leaves the connection reusable.
    assert_eq!(
        framed("HTTP/1.1 200 OK\r\n\r\n"),
        (Delimit::UntilClose, false)
    );
}

/// The head of the answer to a GET that `bytes` hold, a valid and whole one.
fn whole_head(bytes: &[u8]) -> ResponseHead {
    let mut buf = BytesMut::from(bytes);
    let head = parse_response(
        &mut buf,
        Limits::default(),
        &Method::GET,
        &mut NameMemo::default(),
    );
    head.expect("a valid head").expect("a whole head")
}

/// The names of the fields [`parse_response`] passes on from `head`, in order.
fn passed_on(head: &str) -> Vec<String> {
    let head = whole_head(head.as_bytes());
    let names = head
        .parts
        .headers
        .keys()
        .map(|name| name.as_str().to_owned());
    names.collect()
}

#[test]
fn the_hop_by_hop_fields_frame_and_persist_the_message_and_are_not_passed_on() {
    let head = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\
        Proxy-Connection: close\r\nTE: trailers\r\nTrailer: x-sum\r\nUpgrade: h2c\r\n\
        Transfer-Encoding: chunked\r\nETag: \"a\"\r\nX-Kept: 1\r\n\r\n";
    assert_eq!(passed_on(head), ["etag", "x-kept"]);
    assert_eq!(
        framed(head),
        (Delimit::Chunked, true),
        "read before they were dropped"
    );
    let close = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n";
    assert_eq!(passed_on(close), ["content-length"]);
    assert_eq!(framed(close), (Delimit::Length(2), false));
}

#[test]
fn the_fields_a_connection_line_names_are_not_passed_on_whatever_their_case() {
    let head = "HTTP/1.1 200 OK\r\nConnection: Keep-Alive, X-Trace\r\nConnection: ,close , \
        X-Secret\r\nx-trace: 1\r\nX-SECRET: 2\r\nX-Kept: 3\r\nContent-Length: 0\r\n\r\n";
    let mut left = passed_on(head);
    left.sort();
    assert_eq!(left, ["content-length", "x-kept"]);
}

#[test]
fn a_length_a_transfer_coding_overrode_is_not_passed_on_and_one_that_frames_is() {
    for length in ["3", "abc"] {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        assert_eq!(passed_on(&head), Vec::<String>::new(), "{length}");
    }
    let head = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Kept: 1\r\n\r\n";
    assert_eq!(passed_on(head), ["content-length", "x-kept"]);
}

#[test]
fn values_of_ascii_and_of_bytes_from_0x80_are_passed_on_as_they_came() {
    let head = whole_head(
        b"HTTP/1.1 200 OK\r\nX-A: a\tb \"c\"\r\nX-B: caf\xe9\r\nContent-Length: 0\r\n\r\n",
    );
    let headers = &head.parts.headers;
    assert_eq!(headers["x-a"].as_bytes(), b"a\tb \"c\"");
    assert_eq!(headers["x-b"].as_bytes(), b"caf\xe9");
}

proptest::proptest! {
    /// What [`parsed_field_value`] rests on: every field value `httparse` takes is one
    /// `http` takes.
    #[test]
    fn every_field_value_httparse_takes_is_one_http_takes(
        // Mostly bytes a value may hold, so that most heads parse, and now and then any.
        value in proptest::collection::vec(proptest::prop_oneof![
            4 => 0x20u8..0x7f,
            2 => 0x80u8..=0xff,
            1 => proptest::strategy::Just(b'\t'),
            1 => proptest::prelude::any::<u8>(),
        ], 0..48),
    ) {
        let mut head = b"HTTP/1.1 200 OK\r\nx-v: ".to_vec();
        head.extend_from_slice(&value);
        head.extend_from_slice(b"\r\n\r\n");
        let mut fields = [httparse::EMPTY_HEADER; 4];
        let mut response = httparse::Response::new(&mut fields);
        if let Ok(httparse::Status::Complete(_)) = response.parse(&head) {
            for field in response.headers.iter() {
                proptest::prop_assert!(HeaderValue::from_bytes(field.value).is_ok(), "{:?}", field.value);
            }
        }
    }
}

proptest::proptest! {
    /// A field line is written whole after what the buffer held, whether or not the
    /// buffer had to grow for it.
    #[test]
    fn a_field_line_is_written_after_the_buffer_whether_or_not_it_grows(
        before in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        room in 0usize..96,
        name in proptest::collection::vec(b'a'..=b'z', 0..40),
        value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
    ) {
        let mut dst = BytesMut::with_capacity(before.len() + room);
        dst.extend_from_slice(&before);
        put_field(&mut dst, &name, &value);
        let expected = [&before[..], &name, b": ", &value, b"\r\n"].concat();
        proptest::prop_assert_eq!(&dst[..], &expected[..]);
    }
}
