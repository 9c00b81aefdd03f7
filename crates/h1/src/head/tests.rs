use super::*;

/// The framing and persistence [`parse_response`] reads from `head`, answering `method`.
fn read(head: &str, method: Method) -> Result<(Delimit, bool), Error> {
    let mut buf = BytesMut::from(head);
    let head = parse_response(&mut buf, Limits::default(), &method)?.expect("a whole head");
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
