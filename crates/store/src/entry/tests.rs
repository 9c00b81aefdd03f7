//! Tests of the entry codec: round trips, slot selection, corruption, garbage.

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;

fn meta() -> EntryMeta {
    let mut response_headers = HeaderMap::new();
    response_headers.append("cache-control", HeaderValue::from_static("max-age=60"));
    response_headers.append("set-cookie", HeaderValue::from_static("a=1"));
    response_headers.append("set-cookie", HeaderValue::from_static("b=2"));
    // obs-text: bytes that are not UTF-8 are legal in a header value.
    let raw = HeaderValue::from_bytes(b"caf\xe9 \xff").unwrap();
    response_headers.append("x-raw", raw);
    let mut request_headers = HeaderMap::new();
    request_headers.append("accept-encoding", HeaderValue::from_static("gzip"));
    EntryMeta {
        request_time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        response_time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_456),
        status: StatusCode::NON_AUTHORITATIVE_INFORMATION,
        response_headers,
        request_headers,
        tags: Vec::new(),
        purged: None,
    }
}

fn header(key: &str) -> (Preamble, Vec<u8>) {
    encode_header(key, &meta(), FillId(7)).unwrap()
}

/// Writes a slot with `seq` and `payload` at `offset`, as a revalidation would.
fn write_slot(buf: &mut [u8], offset: usize, seq: u64, payload: &[u8]) {
    let slot = encode_slot(payload, seq, MAX_SLOT_CAPACITY as u32).unwrap();
    buf[offset..offset + slot.len()].copy_from_slice(&slot);
}

#[test]
fn round_trip_keeps_order_repeats_and_raw_bytes() {
    let key = "https://example.com/a?b=c";
    let (p, buf) = header(key);
    assert_eq!(buf.len() as u64, p.header_len());
    assert_eq!(p.slot_capacity % 512, 0);
    assert!(p.slot_capacity >= 1024);
    let h = decode_header(&buf).unwrap();
    assert_eq!(h.key, key);
    assert_eq!(h.preamble, p);
    assert_eq!(h.meta, meta());
    let cookies: Vec<_> = h
        .meta
        .response_headers
        .get_all("set-cookie")
        .iter()
        .collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert_eq!(h.meta.response_headers["x-raw"].as_bytes(), b"caf\xe9 \xff");
}

#[test]
fn tags_and_the_purge_mark_round_trip_and_entries_without_them_read_as_before() {
    let plain = encode_meta(&meta()).unwrap();
    let tagged = EntryMeta {
        tags: vec!["article-1".to_owned(), "home".to_owned()],
        purged: Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_789)),
        ..meta()
    };
    let payload = encode_meta(&tagged).unwrap();
    assert_eq!(decode_meta(&payload), Ok(tagged.clone()));
    // The section is appended: the bytes before it are the plain entry's, and the plain
    // entry (as written before tags existed) ends where they end.
    assert_eq!(&payload[..plain.len()], &plain[..]);
    assert_eq!(decode_meta(&plain), Ok(meta()));
    let marked_only = EntryMeta {
        tags: Vec::new(),
        ..tagged
    };
    assert_eq!(
        decode_meta(&encode_meta(&marked_only).unwrap()),
        Ok(marked_only)
    );
    // A cut section is an error, not a shorter list.
    assert!(decode_meta(&payload[..payload.len() - 3]).is_err());
}

#[test]
fn finished_preamble_carries_body_fields() {
    let (mut p, mut buf) = header("k");
    p.body_len = 12345;
    p.body_hash = 0xdead_beef;
    buf[..PREAMBLE_LEN].copy_from_slice(&encode_preamble(&p, b"k"));
    let h = decode_header(&buf).unwrap();
    assert_eq!(
        (h.preamble.body_len, h.preamble.body_hash),
        (12345, 0xdead_beef)
    );
}

#[test]
fn newest_valid_slot_wins_and_a_torn_one_falls_back() {
    let (p, mut buf) = header("k");
    let (a, b) = (
        p.slot_a_offset(),
        p.slot_a_offset() + p.slot_capacity as usize,
    );
    let mut newer = meta();
    newer.status = StatusCode::OK;
    let payload = encode_meta(&newer).unwrap();
    write_slot(&mut buf, b, 2, &payload);
    assert_eq!(decode_header(&buf).unwrap().meta, newer);
    // A third revalidation goes back to slot A; then slot A is torn.
    let mut newest = meta();
    newest.status = StatusCode::NOT_FOUND;
    write_slot(&mut buf, a, 3, &encode_meta(&newest).unwrap());
    assert_eq!(decode_header(&buf).unwrap().meta, newest);
    buf[a + 25] ^= 0x01;
    assert_eq!(decode_header(&buf).unwrap().meta, newer);
    // Both torn: the entry is unusable.
    buf[b + 25] ^= 0x01;
    assert!(matches!(
        decode_header(&buf),
        Err(EntryError::NoValidSlot(_))
    ));
}

#[test]
fn flipped_bits_in_preamble_or_key_are_detected() {
    let (_, buf) = header("https://example.com/x");
    // Every bit of the body-length, hash and fill-id fields, and of the key.
    for byte in (24..48).chain(PREAMBLE_LEN..PREAMBLE_LEN + 21) {
        for bit in 0..8 {
            let mut bad = buf.clone();
            bad[byte] ^= 1 << bit;
            assert_eq!(decode_header(&bad).unwrap_err(), EntryError::Checksum);
        }
    }
    let mut bad = buf.clone();
    bad[0] ^= 1;
    assert_eq!(decode_header(&bad).unwrap_err(), EntryError::BadMagic);
    let mut bad = buf;
    bad[8] = 3;
    assert_eq!(decode_header(&bad).unwrap_err(), EntryError::Version(3));
}

#[test]
fn garbage_and_truncations_are_errors_not_panics() {
    let (_, buf) = header("https://example.com/x");
    for len in 0..buf.len() {
        assert!(decode_header(&buf[..len]).is_err(), "prefix of {len} bytes");
    }
    // Deterministic pseudo-random garbage, with and without a valid prefix.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..2000 {
        let len = (next() % 9000) as usize;
        let mut junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 && len >= PREAMBLE_LEN {
            junk[..16].copy_from_slice(&buf[..16]);
        }
        assert!(decode_header(&junk).is_err());
        let _ = decode_preamble(&junk);
    }
    // Valid checksums around garbage payloads must still decode safely.
    let (p, mut buf) = header("k");
    for round in 0..500 {
        let len = (next() % 300) as usize;
        let junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        write_slot(&mut buf, p.slot_a_offset(), 10 + round, &junk);
        let _ = decode_header(&buf);
    }
}

#[test]
fn credentials_are_refused() {
    for name in ["authorization", "cookie", "proxy-authorization"] {
        let mut m = meta();
        m.request_headers
            .append(name, HeaderValue::from_static("secret"));
        assert_eq!(
            encode_header("k", &m, FillId(1)).unwrap_err(),
            EntryError::Credentials
        );
    }
}

#[test]
fn oversized_key_is_refused() {
    let key = "k".repeat(MAX_KEY_LEN + 1);
    assert!(matches!(
        encode_header(&key, &meta(), FillId(1)),
        Err(EntryError::TooLarge { what: "key", .. })
    ));
}

#[test]
fn decoded_header_names_the_current_slot_and_a_replacement_must_fit() {
    let (p, mut buf) = header("k");
    let h = decode_header(&buf).unwrap();
    assert_eq!((h.slot, h.sequence), (Slot::A, 1));
    let payload = encode_meta(&meta()).unwrap();
    let next = h.slot.other();
    let slot = encode_slot(&payload, h.sequence + 1, p.slot_capacity).unwrap();
    let at = p.slot_offset(next) as usize;
    buf[at..at + slot.len()].copy_from_slice(&slot);
    let h = decode_header(&buf).unwrap();
    assert_eq!((h.slot, h.sequence), (Slot::B, 2));
    let big = vec![0u8; p.slot_capacity as usize];
    assert_eq!(
        encode_slot(&big, 3, p.slot_capacity).unwrap_err(),
        EntryError::SlotFull {
            len: big.len() + SLOT_HEADER_LEN,
            capacity: p.slot_capacity as usize
        }
    );
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(256))]

    /// Arbitrary bytes never panic the decoders; they are refused, never taken for an entry.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..2048)) {
        let _ = decode_preamble(&bytes);
        let _ = decode_meta(&bytes);
        let mut framed = MAGIC.to_vec();
        framed.extend_from_slice(&VERSION.to_le_bytes());
        framed.extend_from_slice(&bytes);
        let _ = decode_preamble(&framed);
        proptest::prop_assert!(decode_header(&bytes).is_err());
        proptest::prop_assert!(decode_header(&framed).is_err());
    }

    /// A real header with bytes overwritten anywhere, or cut short, never panics, and
    /// when it still decodes it decodes to the key and metadata it was written with:
    /// damage never turns an entry into another key's.
    #[test]
    fn damage_never_decodes_to_a_different_key(
        key in "[a-z]{1,12}://[a-z.]{1,20}/[ -~]{0,60}",
        edits in proptest::collection::vec((proptest::arbitrary::any::<proptest::sample::Index>(), proptest::arbitrary::any::<u8>()), 1..8),
        cut in proptest::arbitrary::any::<proptest::sample::Index>(),
        truncate in proptest::arbitrary::any::<bool>(),
    ) {
        let (_, mut buf) = encode_header(&key, &meta(), FillId(7)).expect("encodes");
        for (at, value) in edits {
            let at = at.index(buf.len());
            buf[at] = value;
        }
        if truncate {
            buf.truncate(cut.index(buf.len()));
        }
        if let Ok(decoded) = decode_header(&buf) {
            proptest::prop_assert_eq!(decoded.key, key);
            proptest::prop_assert_eq!(decoded.meta, meta());
        }
    }
}
