//! A body stored whole (`Store::store_whole`): the entry a streamed fill makes, with the
//! same bookkeeping, written in one file call on the worker or on the blocking pool.

use bytes::Bytes;

use super::range::collect;
use super::*;

/// Stores `data` whole under `key` as a 200, for a request sent at `ticket`.
async fn put_whole(
    store: &Store,
    key: &str,
    data: &[u8],
    ticket: FillTicket,
) -> Result<WholeFill, StoreError> {
    let (hash, body) = (Store::key_hash(key), Bytes::copy_from_slice(data));
    (store.store_whole(key, hash, &meta(200), body, MAX, ticket)).await
}

/// The file calls of fills since `before`: on the worker, on the pool.
fn calls_since(store: &Store, before: FillCalls) -> (u64, u64) {
    let now = store.stats().fill_calls;
    (now.worker - before.worker, now.pool - before.pool)
}

#[tokio::test]
async fn a_whole_body_is_stored_in_one_file_call_as_a_streamed_fill_stores_it() {
    // Without fsync the calls run on the worker; with an fsync per fill, on the pool.
    for (fsync, one_call) in [(Fsync::Off, (1, 0)), (Fsync::EachFill, (0, 1))] {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            fsync,
            ..options(dir.path())
        };
        let store = open_with(opts.clone()).await;
        // Past one 64 KiB block, so the block table has two checksums.
        let data = body(70_000, 3);
        let before = store.stats().fill_calls;
        put(&store, "streamed", &data).await;
        let (worker, pool) = calls_since(&store, before);
        assert!(
            worker + pool >= 2,
            "{fsync:?}: a streamed fill, {worker} + {pool}"
        );
        let before = store.stats().fill_calls;
        let stored = put_whole(&store, "whole", &data, store.fill_ticket()).await;
        assert!(matches!(stored, Ok(WholeFill::Committed)), "{stored:?}");
        assert_eq!(calls_since(&store, before), one_call, "{fsync:?}");
        let stats = store.stats();
        assert_eq!((stats.committed_fills, stats.objects), (2, 2));
        assert_eq!(stats.committed_bytes, 2 * data.len() as u64);
        assert_eq!(stats.reserved_bytes, 0, "the reservation became the entry");
        assert!(files(&dir.path().join("tmp")).is_empty());
        // The body is verified as it streams, and a range by the blocks it touches.
        assert_eq!(
            read(&store, "whole").await.unwrap(),
            (meta(200), data.clone())
        );
        let range = entry(&store, "whole")
            .await
            .into_range_stream(60_000, 69_999);
        let (got, error) = collect(range).await;
        assert!(error.is_none(), "{error:?}");
        assert!(got == data[60_000..], "{fsync:?}");
        // The same file as the streamed fill's, but for the key (of the same length).
        let sizes: Vec<u64> = files(&dir.path().join("objects"))
            .iter()
            .map(|path| std::fs::metadata(path).unwrap().len())
            .collect();
        assert_eq!(sizes.len(), 2);
        assert_eq!(sizes[0], sizes[1], "{sizes:?}");
        // A new process finds it, as it finds any entry.
        drop(store);
        let store = open_with(opts).await;
        assert_eq!(read(&store, "whole").await.unwrap(), (meta(200), data));
    }
}

#[tokio::test]
async fn an_empty_body_is_stored_whole_in_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(quick_options(dir.path())).await;
    let before = store.stats().fill_calls;
    let stored = put_whole(&store, "empty", b"", store.fill_ticket()).await;
    assert!(matches!(stored, Ok(WholeFill::Committed)), "{stored:?}");
    assert_eq!(calls_since(&store, before), (1, 0));
    assert_eq!(read(&store, "empty").await.unwrap(), (meta(200), vec![]));
}

#[tokio::test]
async fn a_whole_body_over_the_limit_or_purged_in_flight_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let (hash, data) = (Store::key_hash("k"), Bytes::from(body(1000, 1)));
    let too_large =
        (store.store_whole("k", hash, &meta(200), data, 999, store.fill_ticket())).await;
    assert!(
        matches!(too_large, Err(StoreError::TooLarge { limit: 999 })),
        "{too_large:?}"
    );
    // Asked for before a removal of the key: its answer may predate the removal.
    let ticket = store.fill_ticket();
    assert!(!store.remove("k", hash).await.unwrap());
    let purged = put_whole(&store, "k", &body(1000, 1), ticket).await;
    assert!(
        matches!(purged, Err(StoreError::PurgedInFlight)),
        "{purged:?}"
    );
    let stats = store.stats();
    assert_eq!((stats.objects, stats.committed_fills), (0, 0));
    assert_eq!(
        (stats.reserved_bytes, stats.fill_calls),
        (0, FillCalls::default())
    );
    assert_eq!(stats.dropped_fills.total(), 0, "not begun, so not dropped");
    assert!(cache_files(dir.path()).is_empty());
}

#[tokio::test]
async fn a_whole_fill_loses_to_a_newer_fill_of_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    // The older fill began first, and commits last.
    let older = fill(&store, "k", 200, b"older").await;
    let stored = put_whole(&store, "k", b"newer", store.fill_ticket()).await;
    assert!(matches!(stored, Ok(WholeFill::Committed)), "{stored:?}");
    older.finish().await.unwrap();
    assert_eq!(read(&store, "k").await.unwrap().1, b"newer");
    assert_eq!(files(&dir.path().join("objects")).len(), 1);
}
