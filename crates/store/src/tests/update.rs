//! Metadata updates in place: alternating slots, restarts, torn slots, limits,
//! entries gone meanwhile, racing updaters.

use super::*;
use crate::entry::{Slot, decode_header};

/// Metadata as a revalidation refreshes it: new times, a new status and headers.
fn refreshed(round: u64) -> EntryMeta {
    let mut m = meta(203);
    let later = Duration::from_secs(60 * round);
    m.request_time += later;
    m.response_time += later;
    let etag = HeaderValue::from_str(&format!("\"v{round}\"")).unwrap();
    m.response_headers.insert("etag", etag);
    m
}

/// The current slot and its sequence, as the file on disk says.
fn current_slot(path: &Path) -> (Slot, u64) {
    let h = decode_header(&std::fs::read(path).unwrap()).unwrap();
    (h.slot, h.sequence)
}

#[tokio::test]
async fn updates_alternate_slots_keep_the_body_and_survive_a_restart() {
    let data = body(100_000, 5);
    let (dir, store, first, path) = stored_k(&data).await;
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(store.update_meta(&first, &refreshed(1)).await.unwrap());
    assert_eq!(current_slot(&path), (Slot::B, 2));
    assert_eq!(
        read(&store, "k").await.unwrap(),
        (refreshed(1), data.clone())
    );
    // A handle from before the first update still works: the slots are read again.
    assert!(store.update_meta(&first, &refreshed(2)).await.unwrap());
    assert_eq!(current_slot(&path), (Slot::A, 3));
    assert_eq!(
        read(&store, "k").await.unwrap(),
        (refreshed(2), data.clone())
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    assert_eq!(store.stats().checksum_failures, 0);
    drop((first, store));
    let store = open(dir.path()).await;
    assert_eq!(read(&store, "k").await.unwrap(), (refreshed(2), data));
}

#[tokio::test]
async fn a_torn_new_slot_falls_back_to_the_previous_metadata() {
    let data = body(100_000, 6);
    let (_dir, store, e, path) = stored_k(&data).await;
    assert!(store.update_meta(&e, &refreshed(1)).await.unwrap());
    // Damage the slot just written, as a crash mid-write would.
    let mut bytes = std::fs::read(&path).unwrap();
    let h = decode_header(&bytes).unwrap();
    let at = h.preamble.slot_offset(h.slot) as usize + 30;
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(read(&store, "k").await.unwrap(), (meta(200), data.clone()));
    assert_eq!(store.stats().checksum_failures, 0);
    // The next update writes the damaged slot again, over the damage.
    assert!(store.update_meta(&e, &refreshed(2)).await.unwrap());
    assert_eq!(current_slot(&path), (Slot::B, 2));
    assert_eq!(read(&store, "k").await.unwrap(), (refreshed(2), data));
}

#[tokio::test]
async fn oversized_metadata_or_credentials_leave_the_file_untouched() {
    let (_dir, store, e, path) = stored_k(b"body").await;
    let before = std::fs::read(&path).unwrap();
    let mut big = meta(200);
    let value = HeaderValue::from_str(&"x".repeat(4000)).unwrap();
    big.response_headers.insert("x-big", value);
    let err = store.update_meta(&e, &big).await.unwrap_err();
    assert!(
        matches!(err, StoreError::MetaTooLarge { len, capacity: 1024 } if len > 4000),
        "{err}"
    );
    let mut secret = meta(200);
    secret
        .request_headers
        .insert("authorization", HeaderValue::from_static("Basic eA=="));
    let err = store.update_meta(&e, &secret).await.unwrap_err();
    assert!(matches!(err, StoreError::Credentials), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(read(&store, "k").await.unwrap().0, meta(200));
}

#[tokio::test]
async fn an_entry_evicted_or_replaced_meanwhile_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    // Each entry is about 24.5 KB with its header: two fit, not three.
    let store = open_with(StoreOptions {
        max_size: 50_000,
        ..options(dir.path())
    })
    .await;
    put(&store, "a", &body(22_000, 1)).await;
    let evicted = entry(&store, "a").await;
    put(&store, "b", &body(22_000, 2)).await;
    put(&store, "c", &body(22_000, 3)).await;
    // Looking "a" up counted a hit, so c's fill moved it to the main queue and evicted
    // b. c, looked up too, follows it there when b's refill walks the small queue,
    // which leaves the main queue's oldest, a, to be evicted.
    entry(&store, "c").await;
    put(&store, "b", &body(22_000, 2)).await;
    assert!(!store.contains(Store::key_hash("a")));
    let snapshot = |paths: Vec<PathBuf>| -> Vec<(PathBuf, Vec<u8>)> {
        let read = |p: PathBuf| (std::fs::read(&p).unwrap(), p);
        paths.into_iter().map(read).map(|(b, p)| (p, b)).collect()
    };
    let before = snapshot(cache_files(dir.path()));
    assert!(!store.update_meta(&evicted, &refreshed(1)).await.unwrap());
    assert_eq!(snapshot(cache_files(dir.path())), before);
    // Replaced by a newer fill: the newer entry keeps its own metadata.
    let older = entry(&store, "b").await;
    fill(&store, "b", 201, b"newer")
        .await
        .finish()
        .await
        .unwrap();
    assert!(!store.update_meta(&older, &refreshed(1)).await.unwrap());
    assert_eq!(
        read(&store, "b").await.unwrap(),
        (meta(201), b"newer".to_vec())
    );
}

#[tokio::test]
async fn racing_updates_both_land_in_turn() {
    let (_dir, store, e, path) = stored_k(&body(1000, 9)).await;
    let (one, two) = (refreshed(1), refreshed(2));
    let (a, b) = tokio::join!(store.update_meta(&e, &one), store.update_meta(&e, &two));
    assert!(a.unwrap() && b.unwrap());
    // Had both read sequence 1, both would have written sequence 2 into slot B.
    assert_eq!(current_slot(&path), (Slot::A, 3));
    let seen = read(&store, "k").await.unwrap().0;
    assert!(seen == one || seen == two);
}
