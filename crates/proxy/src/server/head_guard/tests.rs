use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::hygiene::Rejection;

pub(super) const LIMITS: Limits = Limits {
    max_head_bytes: 8 * 1024,
    max_headers: 100,
};

pub(super) fn token() -> ConnectionToken {
    ConnectionToken::random().expect("random token")
}

pub(super) fn rejection_of(out: &[u8], reason: Rejection) -> bool {
    let text = String::from_utf8_lossy(out);
    text.ends_with(&format!(
        " {}\r\nconnection: close\r\n\r\n",
        reason.as_str()
    )) && text.contains("\r\nx-secondhit-rejected: ")
}

pub(super) const GOOD: &[u8] = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n\
POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello\
POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
5;ext=1\r\nab\r\nc\r\n0a \t\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\n\
\r\nGET /d HTTP/1.0\r\n\r\n";

#[tokio::test]
async fn the_guard_reads_through_a_stream_written_one_byte_at_a_time() {
    let bad =
        b"POST /x HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    let input = [GOOD, bad.as_slice()].concat();
    // A one-byte pipe: every read returns a single byte.
    let (mut client, server) = tokio::io::duplex(1);
    let writer = tokio::spawn(async move {
        // Ends with end of input once everything was read (the rest is discarded).
        client.write_all(&input).await.expect("write");
    });
    let mut guard = HeadGuard::new(server, token(), LIMITS, Duration::from_secs(5));
    let mut seen = vec![0u8; GOOD.len() + 200];
    let mut filled = 0;
    // Stop once the synthesized head ends; the guard then never signals end of input.
    while !seen[..filled].ends_with(b"connection: close\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), guard.read(&mut seen[filled..]))
            .await
            .expect("the guard keeps delivering")
            .expect("read");
        assert!(n > 0, "no early end of input");
        filled += n;
    }
    assert!(seen[..filled].starts_with(GOOD));
    assert!(rejection_of(
        &seen[GOOD.len()..filled],
        Rejection::LengthWithTransferEncoding
    ));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), guard.read(&mut seen))
            .await
            .is_err(),
        "after a rejection hyper never sees end of input"
    );
    assert!(
        writer.is_finished(),
        "the bytes after the bad head were read and dropped"
    );
}

#[tokio::test]
async fn a_first_head_that_never_completes_times_out() {
    let (mut client, server) = tokio::io::duplex(64);
    client
        .write_all(b"GET / HTTP/1.1\r\nHo")
        .await
        .expect("write");
    let mut guard = HeadGuard::new(server, token(), LIMITS, Duration::from_millis(50));
    let mut seen = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), guard.read(&mut seen))
        .await
        .expect("the guard gives up on its own");
    let error = read.expect_err("a timeout error, not bytes");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
}
