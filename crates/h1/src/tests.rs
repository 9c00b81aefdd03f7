//! Exchanges over real sockets: a server on 127.0.0.1:0, scripted byte for byte by each
//! test, and a [`Connection`] to it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Version};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::{BoxError, Connection, Error, FieldLines, Framing, Limits, ResponseBody};

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(10);

/// A server that accepts one connection and runs `script` on it (whatever the script
/// returns is the test's to check), and a connection to it.
async fn server<F, Fut, T>(script: F) -> (Connection<TcpStream>, JoinHandle<T>)
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send,
    T: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        script(stream).await
    });
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    (Connection::new(stream), task)
}

/// A server that answers each request head it reads with the next of `answers`, then
/// waits for the client to close; returns the request heads it read.
async fn answering(
    answers: &'static [&'static [u8]],
) -> (Connection<TcpStream>, JoinHandle<Vec<String>>) {
    server(move |mut stream| async move {
        let mut heads = Vec::new();
        for answer in answers {
            heads.push(read_head(&mut stream).await);
            stream.write_all(answer).await.expect("answer");
        }
        let _ = stream.read(&mut [0u8; 64]).await;
        heads
    })
    .await
}

/// Reads one request head, byte by byte so that nothing after it is consumed.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            other => panic!("the request head ended early: {other:?} after {head:?}"),
        }
    }
    String::from_utf8(head).expect("a text head")
}

fn request<B>(method: Method, path: &str, body: B) -> Request<B> {
    let mut request = Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = path.parse().expect("a target");
    request
        .headers_mut()
        .insert("host", "test".parse().expect("a value"));
    request
}

fn get(path: &str) -> Request<Empty<Bytes>> {
    request(Method::GET, path, Empty::new())
}

/// The body's bytes and trailers, or its error.
async fn read_body(
    body: &mut ResponseBody<TcpStream>,
) -> Result<(Vec<u8>, Option<HeaderMap>), Error> {
    let mut data = Vec::new();
    let mut trailers = None;
    while let Some(frame) = tokio::time::timeout(PATIENCE, body.frame())
        .await
        .expect("in time")
    {
        let frame = frame?;
        match frame.into_data() {
            Ok(bytes) => data.extend_from_slice(&bytes),
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    Ok((data, trailers))
}

/// Sends `request` and reads the whole answer: status, body, and the connection when it
/// came back.
async fn exchange<B>(
    conn: Connection<TcpStream>,
    request: Request<B>,
) -> (StatusCode, Vec<u8>, Option<Connection<TcpStream>>)
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let response = conn
        .send(request, &FieldLines::NONE)
        .await
        .expect("a response");
    let status = response.status();
    let mut body = response.into_body();
    let (data, _) = read_body(&mut body).await.expect("a whole body");
    (status, data, body.take_connection())
}

/// A request body fed by the test, frame by frame.
struct Fed(mpsc::Receiver<Bytes>);

impl Body for Fed {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|data| data.map(|data| Ok(Frame::data(data))))
    }
}

#[tokio::test]
async fn a_content_length_body_is_read_and_its_connection_takes_the_next_request() {
    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello";
    let (conn, server) = answering(&[ANSWER, ANSWER]).await;
    let response = conn
        .send(get("/one?q=1"), &FieldLines::NONE)
        .await
        .expect("a response");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), Version::HTTP_11);
    let repeated: Vec<_> = response.headers().get_all("x-a").iter().collect();
    assert_eq!(repeated, ["1", "2"], "repeated fields kept, in order");
    let mut body = response.into_body();
    assert_eq!(read_body(&mut body).await.expect("the body").0, b"hello");
    let conn = body.take_connection().expect("the connection comes back");
    let (status, data, again) = exchange(conn, get("/two")).await;
    assert_eq!((status, data.as_slice()), (StatusCode::OK, &b"hello"[..]));
    assert!(again.is_some());
    drop(again);
    let heads = server.await.expect("the server");
    assert_eq!(heads[0], "GET /one?q=1 HTTP/1.1\r\nhost: test\r\n\r\n");
    assert!(
        heads[1].starts_with("GET /two HTTP/1.1\r\n"),
        "{}",
        heads[1]
    );
}

#[tokio::test]
async fn added_lines_follow_the_requests_fields_and_never_frame_it() {
    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let (conn, server) = answering(&[ANSWER]).await;
    let (via, from) = (
        http::header::VIA,
        http::HeaderName::from_static("x-forwarded-for"),
    );
    let (proxy, client) = (
        http::HeaderValue::from_static("1.1 proxy"),
        http::HeaderValue::from_static("192.0.2.1"),
    );
    // Framing and connection fields are the request's own: an added one is not written.
    let framing = [
        (http::header::CONTENT_LENGTH, "99"),
        (http::header::TRANSFER_ENCODING, "chunked"),
        (http::header::CONNECTION, "close"),
    ]
    .map(|(name, value)| (name, http::HeaderValue::from_static(value)));
    let framing = framing.iter().map(|(name, value)| (name, value));
    let added = FieldLines::new(
        [(&via, &proxy)]
            .into_iter()
            .chain(framing)
            .chain([(&from, &client)]),
    );
    assert_eq!(
        added.as_bytes(),
        b"via: 1.1 proxy\r\nx-forwarded-for: 192.0.2.1\r\n"
    );
    let upload = request(Method::POST, "/up", Full::new(Bytes::from_static(b"hi")));
    let response = conn.send(upload, &added).await.expect("a response");
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    let heads = server.await.expect("the server");
    let expected = "POST /up HTTP/1.1\r\nhost: test\r\nvia: 1.1 proxy\r\n\
                    x-forwarded-for: 192.0.2.1\r\ncontent-length: 2\r\n\r\n";
    assert_eq!(heads[0], expected);
}

#[tokio::test]
async fn a_chunked_body_with_extensions_and_trailers_is_decoded() {
    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: abc\r\n\r\n";
    let (conn, _server) = answering(&[ANSWER]).await;
    let mut body = conn
        .send(get("/"), &FieldLines::NONE)
        .await
        .expect("a response")
        .into_body();
    let (data, trailers) = read_body(&mut body).await.expect("the body");
    assert_eq!(data, b"hello world");
    let trailers = trailers.expect("a trailers frame");
    assert_eq!(
        trailers.get("x-checksum").map(|v| v.as_bytes()),
        Some(&b"abc"[..])
    );
    assert!(body.take_connection().is_some());
}

#[tokio::test]
async fn an_answer_written_a_byte_at_a_time_reads_the_same() {
    let (conn, _server) = server(|mut stream| async move {
        read_head(&mut stream).await;
        let answer =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
            3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n";
        for byte in answer {
            stream.write_all(&[*byte]).await.expect("a byte");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let _ = stream.read(&mut [0u8; 64]).await;
    })
    .await;
    let (status, data, conn) = exchange(conn, get("/")).await;
    assert_eq!((status, data.as_slice()), (StatusCode::OK, &b"abcde"[..]));
    assert!(conn.is_some());
}

#[tokio::test]
async fn a_body_without_length_runs_until_close_and_its_connection_is_not_reused() {
    let (conn, _server) = server(|mut stream| async move {
        read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\n\r\nuntil ")
            .await
            .expect("head");
        stream.write_all(b"the end").await.expect("more");
    })
    .await;
    let (status, data, conn) = exchange(conn, get("/")).await;
    assert_eq!(
        (status, data.as_slice()),
        (StatusCode::OK, &b"until the end"[..])
    );
    assert!(conn.is_none());
}

#[tokio::test]
async fn head_204_and_304_answers_have_no_body_whatever_their_fields_say() {
    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    const NO_CONTENT: &[u8] = b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n";
    const NOT_MODIFIED: &[u8] = b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n";
    const NEXT: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext";
    let (conn, _server) = answering(&[HEAD, NO_CONTENT, NOT_MODIFIED, NEXT]).await;
    let response = conn
        .send(request(Method::HEAD, "/", Empty::new()), &FieldLines::NONE)
        .await
        .expect("HEAD");
    let mut body = response.into_body();
    assert!(body.is_end_stream(), "a HEAD answer has ended at once");
    let conn = body.take_connection().expect("HEAD frees its connection");
    let (status, data, conn) = exchange(conn, get("/nc")).await;
    assert_eq!((status, data.len()), (StatusCode::NO_CONTENT, 0));
    let (status, data, conn) = exchange(conn.expect("204 frees it"), get("/nm")).await;
    assert_eq!((status, data.len()), (StatusCode::NOT_MODIFIED, 0));
    let (status, data, _) = exchange(conn.expect("304 frees it"), get("/next")).await;
    assert_eq!((status, data.as_slice()), (StatusCode::OK, &b"next"[..]));
}

#[tokio::test]
async fn interim_answers_before_the_final_one_are_skipped() {
    const ANSWER: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n\
        HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let (conn, _server) = answering(&[ANSWER]).await;
    let response = conn
        .send(get("/"), &FieldLines::NONE)
        .await
        .expect("a response");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers().get("link").is_none(),
        "the 103's fields are not the answer's"
    );
    let mut body = response.into_body();
    assert_eq!(read_body(&mut body).await.expect("the body").0, b"ok");
}

#[tokio::test]
async fn an_early_answer_during_an_upload_is_seen_and_the_upload_stops() {
    let (conn, server) = server(|mut stream| async move {
        let head = read_head(&mut stream).await;
        // The first chunk of the upload, then the answer before the rest.
        let mut chunk = [0u8; 11];
        stream
            .read_exact(&mut chunk)
            .await
            .expect("the first chunk");
        stream
            .write_all(b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 3\r\n\r\nbig")
            .await
            .expect("answer");
        // Whatever else comes before the client closes.
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest).await;
        (head, chunk, rest)
    })
    .await;
    let (feed, fed) = mpsc::channel(4);
    feed.send(Bytes::from_static(b"upload"))
        .await
        .expect("feed");
    let response = tokio::time::timeout(
        PATIENCE,
        conn.send(request(Method::POST, "/up", Fed(fed)), &FieldLines::NONE),
    )
    .await
    .expect("the answer comes while the upload is open")
    .expect("a response");
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Fed after the answer: never sent.
    let _ = feed.send(Bytes::from_static(b"later")).await;
    let mut body = response.into_body();
    assert_eq!(read_body(&mut body).await.expect("the body").0, b"big");
    assert!(
        body.take_connection().is_none(),
        "an unfinished upload leaves it unusable"
    );
    drop(body);
    let (head, chunk, rest) = server.await.expect("the server");
    assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
    assert_eq!(&chunk, b"6\r\nupload\r\n");
    assert_eq!(rest, b"", "nothing more of the upload was sent");
}

#[tokio::test]
async fn request_bodies_are_framed_by_their_length_or_chunked() {
    let (conn, server) = server(|mut stream| async move {
        let mut heads = Vec::new();
        for body_len in [5, 26] {
            heads.push(read_head(&mut stream).await);
            let mut body = vec![0u8; body_len];
            stream.read_exact(&mut body).await.expect("the body");
            heads.push(String::from_utf8(body).expect("text"));
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .await
                .expect("answer");
        }
        let _ = stream.read(&mut [0u8; 64]).await;
        heads
    })
    .await;
    let known = request(
        Method::PUT,
        "/known",
        Full::new(Bytes::from_static(b"exact")),
    );
    let (_, _, conn) = exchange(conn, known).await;
    let (feed, fed) = mpsc::channel(4);
    for part in [&b"first"[..], b"second"] {
        feed.send(Bytes::from_static(part)).await.expect("feed");
    }
    drop(feed);
    let (_, _, _) = exchange(
        conn.expect("reused"),
        request(Method::POST, "/fed", Fed(fed)),
    )
    .await;
    let seen = server.await.expect("the server");
    assert_eq!(
        seen[0],
        "PUT /known HTTP/1.1\r\nhost: test\r\ncontent-length: 5\r\n\r\n"
    );
    assert_eq!(seen[1], "exact");
    assert_eq!(
        seen[2],
        "POST /fed HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    assert_eq!(seen[3], "5\r\nfirst\r\n6\r\nsecond\r\n0\r\n\r\n");
}

#[tokio::test]
async fn a_request_body_longer_than_its_content_length_is_refused() {
    let (conn, _server) = answering(&[b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).await;
    let mut long = request(Method::PUT, "/", Full::new(Bytes::from_static(b"longer")));
    long.headers_mut()
        .insert("content-length", "3".parse().expect("a value"));
    let failed = conn
        .send(long, &FieldLines::NONE)
        .await
        .expect_err("refused");
    assert!(
        matches!(failed.error(), Error::RequestBodyLength),
        "{failed:?}"
    );
}

#[tokio::test]
async fn connection_close_and_http_1_0_without_keep_alive_end_the_connection() {
    for (answer, reused) in [
        (
            &b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"[..],
            false,
        ),
        (
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 1\r\n\r\nx",
            false,
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false),
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
            true,
        ),
    ] {
        let (conn, _server) = server(move |mut stream| async move {
            read_head(&mut stream).await;
            stream.write_all(answer).await.expect("answer");
            let _ = stream.read(&mut [0u8; 64]).await;
        })
        .await;
        let (_, data, conn) = exchange(conn, get("/")).await;
        assert_eq!(data, b"x");
        assert_eq!(
            conn.is_some(),
            reused,
            "{}",
            String::from_utf8_lossy(answer)
        );
    }
}

#[tokio::test]
async fn a_request_that_asks_to_close_does_not_leave_its_connection_for_another() {
    for (connection, reused) in [
        (None, true),
        (Some("close"), false),
        (Some("keep-alive, Close"), false),
    ] {
        let (conn, _server) = server(|mut stream| async move {
            read_head(&mut stream).await;
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
            stream.write_all(answer).await.expect("answer");
            let _ = stream.read(&mut [0u8; 64]).await;
        })
        .await;
        let mut request = get("/");
        if let Some(value) = connection {
            let value = value.parse().expect("a value");
            request
                .headers_mut()
                .insert(http::header::CONNECTION, value);
        }
        let (_, data, conn) = exchange(conn, request).await;
        assert_eq!(data, b"x");
        assert_eq!(conn.is_some(), reused, "{connection:?}");
    }
}

#[tokio::test]
async fn a_reset_mid_body_is_an_error_and_so_is_a_close() {
    for reset in [true, false] {
        let (conn, _server) = server(move |mut stream| async move {
            read_head(&mut stream).await;
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b";
            stream.write_all(answer).await.expect("answer");
            tokio::time::sleep(Duration::from_millis(50)).await;
            if reset {
                stream.set_zero_linger().expect("linger");
            }
        })
        .await;
        let mut body = conn
            .send(get("/"), &FieldLines::NONE)
            .await
            .expect("a head")
            .into_body();
        let error = read_body(&mut body).await.expect_err("a cut body");
        assert!(matches!(error, Error::BodyCut(_)), "{error:?}");
        assert!(body.take_connection().is_none());
    }
}

#[tokio::test]
async fn chunked_with_a_content_length_is_read_as_chunked_but_not_reused() {
    const ANSWER: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n\
        5\r\nhello\r\n0\r\n\r\n";
    let (conn, _server) = answering(&[ANSWER]).await;
    let (_, data, conn) = exchange(conn, get("/")).await;
    assert_eq!(data, b"hello");
    assert!(conn.is_none());
}

/// What a test expects of an error.
type Expected = fn(&Error) -> bool;

#[tokio::test]
async fn bad_heads_and_framing_are_errors() {
    let cases: [(&[u8], Expected); 6] = [
        (b"HTTP/1.1 2x0 OK\r\n\r\n", |e| {
            matches!(e, Error::BadHead(_))
        }),
        (b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", |e| {
            matches!(e, Error::BadHead(_))
        }),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n", |e| {
            matches!(e, Error::Framing(Framing::ContentLength))
        }),
        (b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", |e| {
            matches!(e, Error::Framing(Framing::ContentLength))
        }),
        (
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            |e| matches!(e, Error::Framing(Framing::TransferEncodingInHttp10)),
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
            |e| matches!(e, Error::SwitchingProtocols),
        ),
    ];
    for (answer, expected) in cases {
        let (conn, _server) = server(move |mut stream| async move {
            read_head(&mut stream).await;
            stream.write_all(answer).await.expect("answer");
            let _ = stream.read(&mut [0u8; 64]).await;
        })
        .await;
        let failed = conn
            .send(get("/"), &FieldLines::NONE)
            .await
            .expect_err("an error");
        assert!(
            expected(failed.error()),
            "{}: {failed:?}",
            String::from_utf8_lossy(answer)
        );
    }
    let (conn, _server) =
        answering(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]).await;
    let mut body = conn
        .send(get("/"), &FieldLines::NONE)
        .await
        .expect("a head")
        .into_body();
    let error = read_body(&mut body).await.expect_err("a bad chunk size");
    assert!(
        matches!(error, Error::Framing(Framing::ChunkSize)),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_head_over_the_limits_is_refused() {
    let (stream, _server) = server(|mut stream| async move {
        read_head(&mut stream).await;
        let mut answer = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..20 {
            answer.extend_from_slice(format!("X-Field-{i}: {}\r\n", "v".repeat(40)).as_bytes());
        }
        stream.write_all(&answer).await.expect("answer");
        let _ = stream.read(&mut [0u8; 64]).await;
    })
    .await;
    let limits = Limits {
        max_headers: 100,
        max_head_bytes: 512,
    };
    let conn = Connection::with_limits(stream.io, limits);
    let failed = conn
        .send(get("/"), &FieldLines::NONE)
        .await
        .expect_err("too large");
    assert!(
        matches!(failed.error(), Error::HeadTooLarge(512)),
        "{failed:?}"
    );
}

#[tokio::test]
async fn a_close_before_any_answer_gives_the_request_back() {
    let (conn, _server) = server(|mut stream| async move {
        read_head(&mut stream).await;
    })
    .await;
    let failed = conn
        .send(get("/again"), &FieldLines::NONE)
        .await
        .expect_err("no answer");
    let (error, request) = failed.into_parts();
    assert!(
        matches!(error, Error::NothingReceived { written: true, .. }),
        "{error:?}"
    );
    let request = request.expect("a bodiless request comes back");
    assert_eq!(request.uri(), "/again");
}

#[tokio::test]
async fn a_close_mid_head_is_an_error() {
    let (conn, _server) = server(|mut stream| async move {
        read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Le")
            .await
            .expect("part");
    })
    .await;
    let failed = conn
        .send(get("/"), &FieldLines::NONE)
        .await
        .expect_err("a cut head");
    let (error, request) = failed.into_parts();
    assert!(matches!(error, Error::HeadCut(_)), "{error:?}");
    assert!(request.is_none(), "something was received");
}

#[tokio::test]
async fn an_idle_connection_the_server_closed_is_seen_closed() {
    let (conn, _server) = server(|mut stream| async move {
        read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .await
            .expect("answer");
        // Then an idle close.
    })
    .await;
    let (_, _, conn) = exchange(conn, get("/")).await;
    let mut conn = conn.expect("kept");
    let start = tokio::time::Instant::now();
    while conn.is_open() {
        assert!(start.elapsed() < PATIENCE, "the close was never seen");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_body_dropped_halfway_closes_the_connection() {
    let (conn, server) = server(|mut stream| async move {
        read_head(&mut stream).await;
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst";
        stream.write_all(answer).await.expect("answer");
        // The client's close ends this read.
        stream.read(&mut [0u8; 64]).await.map_err(|e| e.kind())
    })
    .await;
    let mut body = conn
        .send(get("/"), &FieldLines::NONE)
        .await
        .expect("a head")
        .into_body();
    let frame = body.frame().await.expect("a frame").expect("data");
    assert_eq!(frame.into_data().ok().as_deref(), Some(&b"first"[..]));
    drop(body);
    let closed = tokio::time::timeout(PATIENCE, server)
        .await
        .expect("in time")
        .expect("server");
    assert_eq!(closed, Ok(0), "the client closed its end");
}
