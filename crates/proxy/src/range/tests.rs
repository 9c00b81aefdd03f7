//! Tests of range answers, `If-Range`, multipart framing and the part bodies.

use http_body_util::BodyExt;

use super::*;

fn request(range: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(RANGE, HeaderValue::from_static(range));
    headers
}

#[test]
fn single_ranges_suffixes_and_unsatisfiable() {
    let none = HeaderMap::new();
    let part = |first, last| RangeAnswer::Part { first, last };
    assert_eq!(answer(&request("bytes=10-19"), &none, 100), part(10, 19));
    assert_eq!(answer(&request("bytes=-5"), &none, 100), part(95, 99));
    assert_eq!(answer(&request("bytes=90-"), &none, 100), part(90, 99));
    assert_eq!(answer(&request("bytes=90-500"), &none, 100), part(90, 99));
    assert_eq!(answer(&request("bytes=-500"), &none, 100), part(0, 99));
    assert_eq!(
        answer(&request("bytes=100-"), &none, 100),
        RangeAnswer::Unsatisfiable
    );
    assert_eq!(
        answer(&request("bytes=0-1,5-6"), &none, 100),
        RangeAnswer::Parts(vec![(0, 1), (5, 6)])
    );
    assert_eq!(
        answer(&request("bytes=50-59,-5,0-0"), &none, 100),
        RangeAnswer::Parts(vec![(50, 59), (95, 99), (0, 0)])
    );
    // Overlapping, or more than MAX_PARTS: the whole object.
    assert_eq!(
        answer(&request("bytes=0-10,5-6"), &none, 100),
        RangeAnswer::Whole
    );
    let many: Vec<String> = (0..=MAX_PARTS).map(|i| format!("{i}-{i}")).collect();
    let mut many_ranges = HeaderMap::new();
    let value = HeaderValue::from_str(&format!("bytes={}", many.join(",")));
    many_ranges.insert(RANGE, value.expect("a valid header value"));
    assert_eq!(answer(&many_ranges, &none, 1000), RangeAnswer::Whole);
    assert_eq!(
        answer(&request("items=0-1"), &none, 100),
        RangeAnswer::Whole
    );
    assert!(is_answerable_range(&request("bytes=0-1")));
    assert!(is_answerable_range(&request("bytes=0-1,3-4")));
    assert!(!is_answerable_range(&request("items=0-1")));
    assert!(ascending(&[(0, 1), (3, 4)]) && !ascending(&[(3, 4), (0, 1)]));
}

#[test]
fn multipart_framing_and_length() {
    let parts = Multipart::new(Some(HeaderValue::from_static("text/plain")), 100);
    let head = parts.part_head(5, 6);
    let text = std::str::from_utf8(&head).expect("ascii");
    assert!(text.starts_with("\r\n--secondhit-"), "{text}");
    assert!(text.ends_with("\r\nContent-Type: text/plain\r\nContent-Range: bytes 5-6/100\r\n\r\n"));
    let boundary = parts.boundary.clone();
    assert_eq!(parts.closing(), format!("\r\n--{boundary}--\r\n"));
    assert_eq!(
        parts.content_type(),
        format!("multipart/byteranges; boundary={boundary}").as_str()
    );
    let expected = parts.part_head(0, 1).len() + 2 + head.len() + 2 + parts.closing().len();
    assert_eq!(parts.content_length(&[(0, 1), (5, 6)]), expected as u64);
}

#[tokio::test]
async fn multipart_body_cuts_parts_across_frames_and_reads_to_the_end() {
    let object: Vec<u8> = (0..100u8).collect();
    let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = object
        .chunks(7)
        .map(|chunk| Ok(Frame::data(Bytes::copy_from_slice(chunk))))
        .collect();
    let inner = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
    let multipart = Multipart::new(None, 100);
    // Within one frame, across frames, adjacent, and the last byte.
    let parts = vec![(1, 2), (5, 30), (31, 31), (99, 99)];
    let body = PartsBody::multipart(inner, &multipart, parts.clone());
    assert_eq!(
        body.size_hint().exact(),
        Some(multipart.content_length(&parts))
    );
    let bytes = body.collect().await.map(|c| c.to_bytes());
    let mut expected = Vec::new();
    for &(first, last) in &parts {
        expected.extend_from_slice(&multipart.part_head(first, last));
        expected.extend_from_slice(&object[first as usize..=last as usize]);
    }
    expected.extend_from_slice(&multipart.closing());
    assert_eq!(bytes.ok().as_deref(), Some(&expected[..]));
}

#[test]
fn if_range_needs_the_current_strong_etag() {
    let mut stored = HeaderMap::new();
    stored.insert("etag", HeaderValue::from_static("\"v2\""));
    let mut current = request("bytes=0-0");
    current.insert("if-range", HeaderValue::from_static("\"v2\""));
    assert_eq!(
        answer(&current, &stored, 10),
        RangeAnswer::Part { first: 0, last: 0 }
    );
    let mut old = request("bytes=0-0");
    old.insert("if-range", HeaderValue::from_static("\"v1\""));
    assert_eq!(answer(&old, &stored, 10), RangeAnswer::Whole);
}

/// A request for byte 0 with `If-Range: <if_range>`.
fn conditional(if_range: &'static str) -> HeaderMap {
    let mut headers = request("bytes=0-0");
    headers.insert("if-range", HeaderValue::from_static(if_range));
    headers
}

/// Stored response fields: `Date`, `Last-Modified`, and an `ETag` when given.
fn stored(date: &'static str, modified: &'static str, etag: Option<&'static str>) -> HeaderMap {
    let mut stored = HeaderMap::new();
    stored.insert("date", HeaderValue::from_static(date));
    stored.insert("last-modified", HeaderValue::from_static(modified));
    if let Some(etag) = etag {
        stored.insert("etag", HeaderValue::from_static(etag));
    }
    stored
}

const MODIFIED: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const MINUTE_LATER: &str = "Sun, 06 Nov 1994 08:50:37 GMT";

#[test]
fn if_range_date_must_match_last_modified_exactly() {
    let part = RangeAnswer::Part { first: 0, last: 0 };
    let entry = stored(MINUTE_LATER, MODIFIED, None);
    assert_eq!(answer(&conditional(MODIFIED), &entry, 10), part);
    // The same instant in the obsolete RFC 850 form is the same date.
    let rfc850 = conditional("Sunday, 06-Nov-94 08:49:37 GMT");
    assert_eq!(answer(&rfc850, &entry, 10), part);
    // "Not modified since" is not enough: a later date does not match (§13.1.5).
    let later = conditional("Sun, 06 Nov 1994 08:49:38 GMT");
    assert_eq!(answer(&later, &entry, 10), RangeAnswer::Whole);
    let earlier = conditional("Sun, 06 Nov 1994 08:49:36 GMT");
    assert_eq!(answer(&earlier, &entry, 10), RangeAnswer::Whole);
}

#[test]
fn if_range_date_is_weak_within_a_minute_of_the_response_date() {
    // §8.8.2.2: a cache may treat Last-Modified as strong only 60 s before Date.
    let close = stored("Sun, 06 Nov 1994 08:50:36 GMT", MODIFIED, None);
    assert_eq!(
        answer(&conditional(MODIFIED), &close, 10),
        RangeAnswer::Whole
    );
    let mut no_date = stored(MINUTE_LATER, MODIFIED, None);
    no_date.remove("date");
    assert_eq!(
        answer(&conditional(MODIFIED), &no_date, 10),
        RangeAnswer::Whole
    );
}

#[test]
fn invalid_or_weak_if_range_means_the_whole_object() {
    let entry = stored(MINUTE_LATER, MODIFIED, Some("\"v1\""));
    assert_eq!(
        answer(&conditional("\"v1\""), &entry, 10),
        RangeAnswer::Part { first: 0, last: 0 }
    );
    for bad in ["W/\"v1\"", "v1", "\"v1", "yesterday", "\"v\"1\"", ""] {
        assert_eq!(
            answer(&conditional(bad), &entry, 10),
            RangeAnswer::Whole,
            "If-Range: {bad:?}"
        );
    }
    // A weak stored tag never matches strongly.
    let weak = stored(MINUTE_LATER, MODIFIED, Some("W/\"v1\""));
    assert_eq!(
        answer(&conditional("\"v1\""), &weak, 10),
        RangeAnswer::Whole
    );
    // Two If-Range lines are not one validator.
    let mut twice = conditional("\"v1\"");
    twice.append("if-range", HeaderValue::from_static("\"v1\""));
    assert_eq!(answer(&twice, &entry, 10), RangeAnswer::Whole);
}

#[test]
fn a_flood_of_ranges_or_huge_offsets_is_answered_whole_or_unsatisfiable() {
    // 500 distinct one-byte ranges: more than MAX_PARTS, so the whole object.
    let ranges: Vec<String> = (0..500).map(|i| format!("{}-{}", i * 2, i * 2)).collect();
    let flood = format!("bytes={}", ranges.join(","));
    let mut headers = HeaderMap::new();
    headers.insert(RANGE, HeaderValue::from_str(&flood).expect("header value"));
    assert_eq!(
        answer(&headers, &HeaderMap::new(), 10_000),
        RangeAnswer::Whole
    );
    assert!(!is_answerable_range(&headers));
    let none = HeaderMap::new();
    let huge = request("bytes=18446744073709551615-");
    assert_eq!(answer(&huge, &none, 100), RangeAnswer::Unsatisfiable);
    let overflow = request("bytes=99999999999999999999999-1");
    assert_eq!(answer(&overflow, &none, 100), RangeAnswer::Whole);
    let wide = request("bytes=0-18446744073709551615");
    assert_eq!(
        answer(&wide, &none, 100),
        RangeAnswer::Part { first: 0, last: 99 }
    );
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(256))]

    /// Any `Range` text, however malformed, gets an answer that fits the object: parts
    /// inside it, in bounds and non-empty, never a panic.
    #[test]
    fn any_range_text_gets_an_answer_within_the_object(
        text in "(bytes=)?[0-9,\\- ]{0,40}|bytes=[0-9a-z=,\\- ]{0,20}|.{0,30}",
        len in 0u64..2_000,
    ) {
        let mut headers = HeaderMap::new();
        let Ok(value) = HeaderValue::from_str(&text) else { return Ok(()) };
        headers.insert(RANGE, value);
        let answerable = is_answerable_range(&headers);
        match answer(&headers, &HeaderMap::new(), len) {
            RangeAnswer::Part { first, last } => {
                proptest::prop_assert!(answerable);
                proptest::prop_assert!(first <= last && last < len);
            }
            RangeAnswer::Parts(parts) => {
                proptest::prop_assert!(answerable);
                proptest::prop_assert!((2..=MAX_PARTS).contains(&parts.len()));
                for (first, last) in parts {
                    proptest::prop_assert!(first <= last && last < len);
                }
            }
            RangeAnswer::Unsatisfiable => proptest::prop_assert!(answerable),
            RangeAnswer::Whole => {}
        }
    }

    /// A well-formed single range `first-last` is answered with exactly the bytes of it
    /// that exist, or 416 when none do.
    #[test]
    fn a_single_range_is_cut_to_the_object(first in 0u64..3_000, extra in 0u64..3_000, len in 1u64..2_000) {
        let last = first + extra;
        let headers = {
            let mut headers = HeaderMap::new();
            let value = HeaderValue::from_str(&format!("bytes={first}-{last}")).expect("header value");
            headers.insert(RANGE, value);
            headers
        };
        let expected = if first < len {
            RangeAnswer::Part { first, last: last.min(len - 1) }
        } else {
            RangeAnswer::Unsatisfiable
        };
        proptest::prop_assert_eq!(answer(&headers, &HeaderMap::new(), len), expected);
    }

    /// Any `If-Range` value never panics, and only the exact stored strong tag lets a
    /// range through.
    #[test]
    fn any_if_range_value_is_whole_unless_it_is_the_stored_tag(value in ".{0,40}") {
        let Ok(value) = HeaderValue::from_str(&value) else { return Ok(()) };
        let matches = value.as_bytes().trim_ascii() == b"\"v1\"";
        let mut headers = request("bytes=0-0");
        headers.insert("if-range", value);
        let entry = stored(MINUTE_LATER, MODIFIED, Some("\"v1\""));
        let parsed_date = headers.get("if-range")
            .and_then(|v| v.to_str().ok())
            .and_then(|t| httpdate::parse_http_date(t.trim()).ok());
        let is_modified = parsed_date == httpdate::parse_http_date(MODIFIED).ok();
        let answered = answer(&headers, &entry, 10);
        let expected = if matches || is_modified {
            RangeAnswer::Part { first: 0, last: 0 }
        } else {
            RangeAnswer::Whole
        };
        proptest::prop_assert_eq!(answered, expected);
    }
}

#[tokio::test]
async fn range_body_slices_across_frames() {
    let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = vec![
        Ok(Frame::data(Bytes::from_static(b"0123"))),
        Ok(Frame::data(Bytes::from_static(b"4567"))),
        Ok(Frame::data(Bytes::from_static(b"89"))),
    ];
    let inner = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
    let body = PartsBody::range(inner, 3, 8);
    let bytes = body.collect().await.map(|c| c.to_bytes());
    assert_eq!(bytes.ok().as_deref(), Some(&b"345678"[..]));
}
