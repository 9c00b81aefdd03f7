use super::*;
use crate::server::head_guard::tests::{GOOD, LIMITS, rejection_of, token};

/// Feeds `input` in pieces cut at `cuts`, then ends the input.
fn scan_cut(scanner: &mut Scanner, input: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain([input.len()].iter()) {
        let cut = cut.clamp(start, input.len());
        scanner.feed(&input[start..cut], &mut out);
        start = cut;
    }
    out
}

/// Runs `input` through fresh scanners split every way the tests care about (whole, one
/// byte at a time, every two-piece split, a few irregular piece sizes) and checks that
/// every split gives the same output; returns it with the scanner of the whole feed.
fn scan(input: &[u8]) -> (Vec<u8>, Scanner) {
    let token = token();
    let mut whole = Scanner::new(token, LIMITS);
    let expected = scan_cut(&mut whole, input, &[]);
    let mut splits: Vec<Vec<usize>> = vec![(1..input.len()).collect()];
    splits.extend((1..input.len()).map(|cut| vec![cut]));
    for step in [2, 3, 7, 13, 64] {
        splits.push((1..input.len()).step_by(step).collect());
    }
    for cuts in splits {
        let mut scanner = Scanner::new(token, LIMITS);
        let out = scan_cut(&mut scanner, input, &cuts);
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&expected),
            "split at {cuts:?}"
        );
        assert_eq!(scanner.wants_linger(), whole.wants_linger(), "{cuts:?}");
    }
    (expected, whole)
}

#[test]
fn well_framed_pipelined_requests_pass_unchanged_however_they_are_split() {
    let (out, scanner) = scan(GOOD);
    assert_eq!(out, GOOD);
    assert!(matches!(&scanner.state, State::Head { buf, .. } if buf.is_empty()));
    assert!(!scanner.wants_linger());
}

#[test]
fn content_length_with_transfer_encoding_is_replaced_after_earlier_requests() {
    for bad in [
        &b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..],
        b"POST /x HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\ncontent-length: 4\r\n\r\n0\r\n\r\n",
        b"POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\nabcd",
    ] {
        let input = [GOOD, bad, b"GET /after HTTP/1.1\r\nHost: a\r\n\r\n"].concat();
        let (out, scanner) = scan(&input);
        assert!(out.starts_with(GOOD), "earlier requests are untouched");
        let synthesized = &out[GOOD.len()..];
        assert!(synthesized.starts_with(b"GET / HTTP/1."));
        assert!(rejection_of(synthesized, Rejection::LengthWithTransferEncoding));
        assert!(!String::from_utf8_lossy(&out).contains("/after"), "nothing after it");
        assert!(scanner.is_rejected() && scanner.wants_linger());
    }
}

#[test]
fn differing_or_malformed_content_lengths_are_replaced_and_equal_ones_pass() {
    let cases: [(&[u8], Option<Rejection>); 5] = [
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", Some(Rejection::ConflictingLength)),
        (b"POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc", Some(Rejection::InvalidLength)),
        (b"POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n", Some(Rejection::InvalidLength)),
        (b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", Some(Rejection::InvalidLength)),
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n", None),
    ];
    for (input, expected) in cases {
        let (out, scanner) = scan(input);
        match expected {
            Some(reason) => assert!(
                rejection_of(&out, reason),
                "{}",
                String::from_utf8_lossy(input)
            ),
            None => {
                assert_eq!(out, input);
                assert!(!scanner.wants_linger());
            }
        }
    }
}

#[test]
fn a_bad_head_inside_a_body_is_only_body() {
    let smuggled = b"GET /s HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let sized = [
        format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            smuggled.len()
        )
        .as_bytes(),
        smuggled,
    ]
    .concat();
    let chunked = [
        format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
            smuggled.len()
        )
        .as_bytes(),
        smuggled,
        b"\r\n0\r\n\r\n",
    ]
    .concat();
    for input in [sized, chunked] {
        let (out, scanner) = scan(&input);
        assert_eq!(out, input);
        assert!(!scanner.is_rejected());
    }
}

#[test]
fn inspection_stops_on_h2_upgrade_connect_refused_framing_and_oversized_heads() {
    let after = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let huge = format!(
        "GET / HTTP/1.1\r\nx: {}\r\n\r\n",
        "y".repeat(LIMITS.max_head_bytes)
    );
    let cases: [(&[u8], bool); 7] = [
        (H2_PREFACE, false),
        (
            b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            false,
        ),
        (b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", false),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", true),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            true,
        ),
        (b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", true),
        (huge.as_bytes(), true),
    ];
    for (first, linger) in cases {
        let input = [first, after].concat();
        let (out, scanner) = scan(&input);
        assert_eq!(out, input, "{}", String::from_utf8_lossy(first));
        assert_eq!(scanner.wants_linger(), linger);
        assert!(matches!(scanner.state, State::Passthrough { .. }));
    }
    // A method that merely starts like the preface is HTTP/1.
    let (out, scanner) = scan(&[b"PUT / HTTP/1.1\r\n\r\n".as_slice(), after].concat());
    assert!(rejection_of(&out, Rejection::LengthWithTransferEncoding));
    assert!(scanner.is_rejected());
}

#[test]
fn too_many_fields_pass_to_hyper_which_answers_431() {
    let mut head = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..=LIMITS.max_headers {
        head.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    let (out, scanner) = scan(&head);
    assert_eq!(out, head);
    assert!(scanner.wants_linger());
}

#[test]
fn a_partial_head_is_released_at_end_of_input() {
    let mut scanner = Scanner::new(token(), LIMITS);
    let mut out = Vec::new();
    scanner.feed(b"GET / HTTP/1.1\r\nHo", &mut out);
    assert!(out.is_empty(), "a head is held until it is whole");
    scanner.finish(&mut out);
    assert_eq!(out, b"GET / HTTP/1.1\r\nHo");
}

#[test]
fn chunk_sizes_that_overflow_are_malformed() {
    let mut chunked = Chunked::default();
    let mut result = Ok(false);
    for &b in b"10000000000000000\r\n" {
        result = chunked.advance(b);
        if result.is_err() {
            break;
        }
    }
    assert!(result.is_err());
}

#[test]
fn a_limit_above_the_stack_array_is_honoured() {
    let limits = Limits {
        max_headers: STACK_FIELDS + 50,
        ..LIMITS
    };
    let head_with = |fields: usize| {
        let mut head = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..fields {
            head.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        head
    };
    for (fields, refused) in [(STACK_FIELDS + 50, false), (STACK_FIELDS + 51, true)] {
        let head = head_with(fields);
        let mut scanner = Scanner::new(token(), limits);
        let out = scan_cut(&mut scanner, &head, &[]);
        assert_eq!(out, head, "{fields} fields pass to hyper either way");
        assert_eq!(scanner.wants_linger(), refused, "{fields} fields");
    }
}
