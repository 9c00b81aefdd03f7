//! HEAD (RFC 9110 §9.3.2, RFC 9111 §4.3.5) and Range (RFC 9110 §14, RFC 9111 §3.3-3.4).

use secondhit_proxy::config::{AdmissionPolicy, MaxObjectSize};

use super::common::*;
use crate::support::{Reply, TestOrigin, TestProxy, client, send};

/// An origin serving `thousand()` fresh for 100 s with `ETag: "r1"`, honouring a single
/// `Range: bytes=a-b` itself with a 206 (so a range passed through is visible).
async fn range_origin() -> TestOrigin {
    TestOrigin::start(|head| {
        let body = thousand();
        let reply = |status, bytes: Vec<u8>| {
            Reply::status(status, bytes)
                .header("cache-control", "max-age=100")
                .header("etag", "\"r1\"")
                .header("accept-ranges", "bytes")
        };
        match request_header(head, "range").and_then(|r| r.strip_prefix("bytes=")) {
            Some(spec) => {
                let (a, b) = spec.split_once('-').expect("a-b");
                let (a, b): (usize, usize) = (a.parse().expect("a"), b.parse().expect("b"));
                reply(206, body[a..=b].to_vec())
                    .header("content-range", &format!("bytes {a}-{b}/1000"))
            }
            None => reply(200, body),
        }
    })
    .await
}

/// An `always` proxy with `/obj` (1000 bytes) stored.
async fn stored_object(origin: &TestOrigin) -> TestProxy {
    let proxy = proxy_always(origin).await;
    fill(&proxy, "/obj", &[], 1).await;
    proxy
}

/// Asserts a 206 from storage carrying `thousand()[from..=to]`.
fn assert_partial_hit(seen: &crate::support::Seen, from: usize, to: usize) {
    assert_eq!(seen.status, 206, "{:?}", seen.cache);
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(
        header(seen, "content-range"),
        Some(format!("bytes {from}-{to}/1000").as_str())
    );
    assert_eq!(seen.body, &thousand()[from..=to]);
}

/// RFC 9110 §9.3.2 and RFC 9111 §4: HEAD is answered from a stored GET, without a body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_is_answered_from_a_stored_get() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let head = send(client().head(proxy.url("/obj"))).await;
    assert_eq!(head.status, 200);
    assert_hit(&head);
    assert!(head.body.is_empty());
    assert_eq!(header(&head, "content-length"), Some("1000"));
    assert_eq!(origin.count("/obj"), 1);
}

/// RFC 9111 §3 (this cache stores GET only): a HEAD miss stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_miss_is_not_stored() {
    let origin = range_origin().await;
    let proxy = proxy_always(&origin).await;
    let head = send(client().head(proxy.url("/obj"))).await;
    assert!(!head.cache.stored, "{:?}", head.cache);
    assert!(proxy.entry_files().is_empty());
    let get = get_with(&proxy, "/obj", &[]).await;
    assert!(!get.cache.hit);
    assert_eq!(get.body, thousand());
}

/// RFC 9111 §4.3.5: a HEAD forwarded for a stale entry never replaces the stored body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_never_replaces_a_stored_body() {
    let origin =
        TestOrigin::start_conditional("\"h1\"", |_| Reply::ok("max-age=0", thousand())).await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/obj", &[], 1).await;
    let head = send(client().head(proxy.url("/obj"))).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    let get = get_with(&proxy, "/obj", &[]).await;
    assert_eq!(get.status, 200);
    assert_eq!(get.body, thousand(), "the stored body is whole");
}

/// RFC 9110 §14.2 and RFC 9111 §3.4: a single range on a stored object is a 206 from storage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_range_is_served_from_storage() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=10-19")]).await;
    assert_partial_hit(&seen, 10, 19);
    assert_eq!(origin.count("/obj"), 1);
}

/// RFC 9110 §14.1.2: a suffix range (`bytes=-5`) is the last five bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suffix_range_is_the_last_bytes() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=-5")]).await;
    assert_partial_hit(&seen, 995, 999);
}

/// RFC 9110 §14.1.2: an open range (`bytes=100-`) runs to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_range_runs_to_the_end() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=100-")]).await;
    assert_partial_hit(&seen, 100, 999);
}

/// RFC 9110 §15.5.17: an unsatisfiable range is a 416 with `Content-Range: bytes */len`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsatisfiable_range_is_416() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=5000-")]).await;
    assert_eq!(seen.status, 416);
    assert_eq!(header(&seen, "content-range"), Some("bytes */1000"));
    assert_eq!(origin.count("/obj"), 1);
}

/// RFC 9110 §14.2: a multi-range request is answered with the full 200 or a multipart 206;
/// either way the bytes are right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_range_is_full_or_multipart() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=0-1,5-6")]).await;
    let body = thousand();
    match seen.status {
        200 => assert_eq!(seen.body, body),
        206 => {
            let kind = header(&seen, "content-type").unwrap_or("");
            assert!(kind.starts_with("multipart/byteranges"), "{kind}");
            let contains = |part: &[u8]| seen.body.windows(part.len()).any(|w| w == part);
            assert!(contains(&body[0..2]) && contains(&body[5..7]));
            assert!(contains(b"bytes 0-1/1000") && contains(b"bytes 5-6/1000"));
        }
        other => panic!("unexpected status {other}"),
    }
    assert_eq!(origin.count("/obj"), 1);
}

/// RFC 9110 §13.1.5: `If-Range` with the current ETag gets the range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_range_with_current_etag_gets_the_range() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let seen = get_with(
        &proxy,
        "/obj",
        &[("range", "bytes=10-19"), ("if-range", "\"r1\"")],
    )
    .await;
    assert_partial_hit(&seen, 10, 19);
}

/// RFC 9110 §13.1.5: `If-Range` with an old ETag gets the whole object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_range_with_old_etag_gets_everything() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let seen = get_with(
        &proxy,
        "/obj",
        &[("range", "bytes=10-19"), ("if-range", "\"old\"")],
    )
    .await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body, thousand());
}

/// RFC 9111 §3.3-3.4: a range miss on an admitted key fetches the whole object (no Range to
/// the origin), answers the range from it, and stores it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_miss_fetches_and_stores_the_whole_object() {
    let origin = range_origin().await;
    let proxy = proxy_always(&origin).await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=10-19")]).await;
    assert_eq!(seen.status, 206);
    assert_eq!(seen.body, &thousand()[10..20]);
    assert_eq!(header(&seen, "content-range"), Some("bytes 10-19/1000"));
    let sent = origin.last_headers("/obj").expect("fetched");
    assert!(
        !sent.contains_key("range"),
        "the whole object is fetched: {sent:?}"
    );
    proxy.wait_committed(1).await;
    let whole = get_with(&proxy, "/obj", &[]).await;
    assert_hit(&whole);
    assert_eq!(whole.body, thousand());
}

/// RFC 9111 §3.3: a 206 passed through from the origin is never stored as the full object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_from_origin_is_never_stored_as_the_object() {
    let origin = range_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::SecondHit
    })
    .await;
    let part = get_with(&proxy, "/obj", &[("range", "bytes=10-19")]).await;
    assert_eq!(part.status, 206);
    assert_eq!(part.body, &thousand()[10..20]);
    assert!(!part.cache.stored, "{:?}", part.cache);
    let whole = get_with(&proxy, "/obj", &[]).await;
    assert!(!whole.cache.hit, "{:?}", whole.cache);
    assert_eq!(whole.body, thousand());
}

/// RFC 9111 §3.3 with `cache.max_object_size`: a range miss on an object too large to store
/// is not fetched whole; the origin answers the range itself and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_miss_on_an_object_too_large_to_store_asks_the_origin_for_the_range() {
    let origin = range_origin().await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_object_size = MaxObjectSize::Bytes(500);
    })
    .await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=10-19")]).await;
    assert_eq!(seen.status, 206);
    assert_eq!(seen.body, &thousand()[10..20]);
    assert_eq!(header(&seen, "content-range"), Some("bytes 10-19/1000"));
    assert!(!seen.cache.stored, "{:?}", seen.cache);
    assert_eq!(seen.cache.detail.as_deref(), Some("range"));
    let sent = origin.last_headers("/obj").expect("fetched");
    assert_eq!(
        sent.get("range").map(|v| v.as_bytes()),
        Some(&b"bytes=10-19"[..]),
        "the second request carries the client's range"
    );
    assert_eq!(origin.count("/obj"), 2, "one whole attempt, one range");
    assert!(proxy.entry_files().is_empty());
}

/// RFC 9110 §14.6: several ranges of a stored object are answered from storage with a 206
/// `multipart/byteranges`, one part per range in the order asked, each with its
/// `Content-Range`, under a `Content-Length` that counts every byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_ranges_are_a_multipart_206_from_storage() {
    let origin = range_origin().await;
    let proxy = stored_object(&origin).await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=900-909,0-1,500-599")]).await;
    assert!(seen.cache.hit, "{:?}", seen.cache);
    assert_eq!(header(&seen, "content-range"), None);
    assert_multipart(&seen, &thousand(), None, &[(900, 909), (0, 1), (500, 599)]);
    assert_eq!(origin.count("/obj"), 1);
}

/// Asserts a 206 `multipart/byteranges` of `object` with one part per `expected` range, in
/// that order, each with its `Content-Range` (and `Content-Type: <part_type>` if given),
/// under a `Content-Length` that counts every byte of the body.
fn assert_multipart(
    seen: &crate::support::Seen,
    object: &[u8],
    part_type: Option<&str>,
    expected: &[(usize, usize)],
) {
    assert_eq!(seen.status, 206, "{:?}", seen.cache);
    let kind = header(seen, "content-type").expect("content-type");
    let boundary = kind
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("{kind}"));
    let length = seen.body.len().to_string();
    assert_eq!(header(seen, "content-length"), Some(length.as_str()));
    let parts = multipart_parts(&seen.body, boundary);
    assert_eq!(parts.len(), expected.len());
    for ((fields, bytes), &(first, last)) in parts.iter().zip(expected) {
        let range = format!("Content-Range: bytes {first}-{last}/{}", object.len());
        assert!(fields.lines().any(|line| line == range), "{fields}");
        if let Some(part_type) = part_type {
            let line = format!("Content-Type: {part_type}");
            assert!(fields.lines().any(|l| l == line), "{fields}");
        }
        assert_eq!(bytes, &object[first..=last]);
    }
}

/// The parts of a `multipart/byteranges` body: each part's header lines and its bytes.
/// Checks the framing on the way: a delimiter before every part, the closing one last.
fn multipart_parts(body: &[u8], boundary: &str) -> Vec<(String, Vec<u8>)> {
    let delimiter = format!("\r\n--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut segments = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.windows(delimiter.len()).position(|w| w == delimiter) {
        segments.push(&rest[..at]);
        rest = &rest[at + delimiter.len()..];
    }
    assert_eq!(
        segments.first(),
        Some(&&b""[..]),
        "the body opens with a delimiter"
    );
    assert_eq!(rest, b"--\r\n", "the body ends with the closing delimiter");
    segments[1..]
        .iter()
        .map(|segment| {
            let segment = segment
                .strip_prefix(b"\r\n")
                .expect("CRLF after the delimiter");
            let split = (segment.windows(4).position(|w| w == b"\r\n\r\n"))
                .expect("a blank line after the part's fields");
            let fields = String::from_utf8(segment[..split].to_vec()).expect("ASCII fields");
            (fields, segment[split + 4..].to_vec())
        })
        .collect()
}

/// RFC 9110 §14.6, for a body read from the file rather than held in memory (above
/// `cache.verify_whole_below`): every part carries the object's own `Content-Type`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_ranges_of_a_large_object_are_read_from_the_file() {
    let large: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let served = large.clone();
    let origin = TestOrigin::start(move |_| {
        Reply::ok("max-age=100", served.clone()).header("content-type", "application/pdf")
    })
    .await;
    let proxy = proxy_always(&origin).await;
    fill(&proxy, "/doc.pdf", &[], 1).await;
    let ranges = "bytes=0-9,150000-150009,199990-";
    let seen = get_with(&proxy, "/doc.pdf", &[("range", ranges)]).await;
    let expected = [(0, 9), (150_000, 150_009), (199_990, 199_999)];
    assert_multipart(&seen, &large, Some("application/pdf"), &expected);
    assert_eq!(origin.count("/doc.pdf"), 1);
}

/// RFC 9110 §14.6 and RFC 9111 §3.3 on a miss: several ranges of an object about to be
/// stored are fetched whole (the origin sees no `Range`), stored, and cut into a
/// `multipart/byteranges` answer as the object streams in; the next request is a hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_ranges_on_a_miss_fetch_the_object_whole_and_answer_multipart() {
    let origin = range_origin().await;
    let proxy = proxy_always(&origin).await;
    let seen = get_with(&proxy, "/obj", &[("range", "bytes=0-1,500-599,990-")]).await;
    assert!(seen.cache.stored, "{:?}", seen.cache);
    let body = thousand();
    assert_multipart(&seen, &body, None, &[(0, 1), (500, 599), (990, 999)]);
    let sent = origin.last_headers("/obj").expect("origin saw it");
    assert!(sent.get("range").is_none(), "fetched whole: {sent:?}");
    proxy.wait_committed(1).await;
    let hit = get_with(&proxy, "/obj", &[]).await;
    assert!(hit.cache.hit, "{:?}", hit.cache);
    assert_eq!(hit.body, body);
    assert_eq!(origin.count("/obj"), 1);
}
