//! Range reads: slices of bodies held in memory and of bodies read from the
//! file across chunk boundaries; bad ranges; a file cut short.

use bytes::Bytes;

use super::*;

/// Collects a body stream; the first error ends it and is returned with the
/// bytes before it. No chunk may be longer than a read of the file.
pub(super) async fn collect(
    stream: impl futures_util::Stream<Item = io::Result<Bytes>>,
) -> (Vec<u8>, Option<io::Error>) {
    let mut stream = std::pin::pin!(stream);
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                assert!(chunk.len() as u64 <= BODY_CHUNK);
                out.extend_from_slice(&chunk);
            }
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

/// First, middle and last bytes, short and long ranges, and the whole body.
fn ranges(len: u64) -> Vec<(u64, u64)> {
    let mid = len / 2;
    let mut out = vec![
        (0, 0),
        (0, 9),
        (mid - 3, mid + 5),
        (len - 1, len - 1),
        (len - 10, len - 1),
        (1, len - 2),
        (0, len - 1),
    ];
    if len > 2 * BODY_CHUNK {
        // Ending exactly on, and straddling, chunk boundaries of the file.
        out.extend([
            (0, BODY_CHUNK - 1),
            (BODY_CHUNK - 5, BODY_CHUNK + 5),
            (10, 2 * BODY_CHUNK + 7),
        ]);
    }
    out
}

#[tokio::test]
async fn ranges_of_bodies_in_memory_and_on_file_are_the_right_slices() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    // Below verify_whole_below (64 KiB): in memory. Above: read from the file.
    for (key, len) in [("small", 1000usize), ("large", 300_000)] {
        let data = body(len, 4);
        put(&store, key, &data).await;
        for (first, last) in ranges(len as u64) {
            let stream = entry(&store, key).await.into_range_stream(first, last);
            let (got, error) = collect(stream).await;
            assert!(error.is_none(), "{key} {first}-{last}: {error:?}");
            let want = &data[first as usize..=last as usize];
            assert!(got == want, "{key} {first}-{last}: wrong bytes");
        }
    }
    assert_eq!(store.stats().checksum_failures, 0);
    assert_eq!(store.stats().objects, 2);
}

#[tokio::test]
async fn a_range_outside_the_body_is_an_invalid_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "k", &body(100, 1)).await;
    for (first, last) in [(5, 4), (0, 100), (100, 100)] {
        let (got, error) = collect(entry(&store, "k").await.into_range_stream(first, last)).await;
        assert!(got.is_empty());
        assert_eq!(error.unwrap().kind(), io::ErrorKind::InvalidInput);
    }
    assert!(store.contains(Store::key_hash("k")));
}

#[tokio::test]
async fn a_file_cut_short_ends_the_range_with_an_error_and_is_discarded() {
    let (_dir, store, e, path) = stored_k(&body(300_000, 2)).await;
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let len = file.metadata().unwrap().len();
    file.set_len(len - 150_000).unwrap();
    let (got, error) = collect(e.into_range_stream(100_000, 200_000)).await;
    assert!((got.len() as u64) < 100_001);
    assert_eq!(error.unwrap().kind(), io::ErrorKind::UnexpectedEof);
    assert!(!store.contains(Store::key_hash("k")));
    assert!(!path.exists());
    assert_eq!(store.stats().removed_invalid, 1);
}

#[tokio::test]
async fn several_ranges_stream_in_order_each_tagged_with_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    for (key, len) in [("small", 1000usize), ("large", 300_000)] {
        let data = body(len, 5);
        put(&store, key, &data).await;
        // Out of order, single bytes, the end, and (for the file) across chunk boundaries.
        let wanted = ranges(len as u64)
            .into_iter()
            .filter(|&(first, _)| first > 0)
            .rev()
            .collect::<Vec<_>>();
        let stream = entry(&store, key).await.into_ranges_stream(wanted.clone());
        let mut stream = std::pin::pin!(stream);
        let mut got: Vec<Vec<u8>> = vec![Vec::new(); wanted.len()];
        let mut last_index = 0;
        while let Some(chunk) = stream.next().await {
            let (index, bytes) = chunk.unwrap();
            assert!(index >= last_index, "{key}: parts in order");
            last_index = index;
            got[index].extend_from_slice(&bytes);
        }
        for (part, &(first, last)) in got.iter().zip(&wanted) {
            assert_eq!(
                part,
                &data[first as usize..=last as usize],
                "{key} {first}-{last}"
            );
        }
        // A range outside the body: one InvalidInput error, nothing else.
        let stream = entry(&store, key)
            .await
            .into_ranges_stream(vec![(0, 1), (5, len as u64)]);
        let mut stream = std::pin::pin!(stream);
        let first = stream.next().await.expect("an item");
        assert_eq!(first.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert!(stream.next().await.is_none());
    }
}
