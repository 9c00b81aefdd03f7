//! Ranges of a large body verified by the blocks they touch: a damaged block is
//! found before its bytes go out (or before anything does, for a small range read
//! ahead), and only ranges touching it are affected; files of the previous format
//! version are dropped by the scan.

use xxhash_rust::xxh3::Xxh3Default;

use super::super::entry::blocks::BLOCK_LEN;
use super::range::collect;
use super::*;

/// Five blocks, the last one short.
const LEN: usize = 4 * BLOCK_LEN as usize + 1000;
/// The body byte the tests flip: inside block 2.
const FLIPPED: u64 = 2 * BLOCK_LEN + 20_000;

/// Stores `data` under "k" and flips body byte `at` in its file; returns the file.
async fn stored_flipped(store: &Store, dir: &Path, data: &[u8], at: u64) -> PathBuf {
    put(store, "k", data).await;
    let path = files(&dir.join("objects")).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    let body_start = last_body_byte(&bytes) + 1 - data.len();
    bytes[body_start + at as usize] ^= 0x08;
    std::fs::write(&path, &bytes).unwrap();
    path
}

#[tokio::test]
async fn a_streamed_range_stops_before_a_damaged_block() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(LEN, 3);
    let mut failures = 0;
    // Streamed (nothing read ahead): covering the byte, touching its block only at the
    // block's first byte (from it, or ending on it), and not touching it.
    let cases = [
        (0, LEN as u64 - 1, true),
        (BLOCK_LEN + 5, FLIPPED, true),
        (2 * BLOCK_LEN, LEN as u64 - 1, true),
        (BLOCK_LEN, 2 * BLOCK_LEN, true),
        (3 * BLOCK_LEN, LEN as u64 - 1, false),
        (0, 2 * BLOCK_LEN - 1, false),
    ];
    for (first, last, touches) in cases {
        let path = stored_flipped(&store, dir.path(), &data, FLIPPED).await;
        let (got, error) = collect(entry(&store, "k").await.into_range_stream(first, last)).await;
        let want = &data[first as usize..=last as usize];
        if touches {
            failures += 1;
            let error = error.unwrap_or_else(|| panic!("{first}-{last}: served whole"));
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
            // Everything before the damaged block, nothing of it.
            let before = (2 * BLOCK_LEN).saturating_sub(first) as usize;
            assert_eq!(got, want[..before.min(want.len())], "{first}-{last}");
            assert!(!path.exists(), "{first}-{last}: discarded");
            assert!(!store.contains(Store::key_hash("k")));
        } else {
            assert!(error.is_none(), "{first}-{last}: {error:?}");
            assert!(got == want, "{first}-{last}: wrong bytes");
            assert!(path.exists());
        }
        assert_eq!(store.stats().checksum_failures, failures);
        store.remove("k", Store::key_hash("k")).await.unwrap();
    }
}

#[tokio::test]
async fn a_small_range_is_verified_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(LEN, 5);
    let path = stored_flipped(&store, dir.path(), &data, FLIPPED).await;
    // Untouched blocks: read ahead, verified, and served from what was read.
    let mut e = entry(&store, "k").await;
    let (first, last) = (BLOCK_LEN - 100, BLOCK_LEN + 100);
    assert!(e.verify_range(first, last).await);
    let (got, error) = collect(e.into_range_stream(first, last)).await;
    assert!(error.is_none() && got == data[first as usize..=last as usize]);
    // A range the read-ahead did not cover still comes from the file, verified.
    let mut e = entry(&store, "k").await;
    assert!(e.verify_range(10, 20).await);
    let (got, error) = collect(e.into_range_stream(30, 40)).await;
    assert!(error.is_none() && got == data[30..=40]);
    // 21 bytes around the flipped one: a miss before any byte.
    let mut e = entry(&store, "k").await;
    assert!(!e.verify_range(FLIPPED - 10, FLIPPED + 10).await);
    assert!(!path.exists());
    assert!(missing(&store, "k").await);
    assert_eq!(store.stats().checksum_failures, 1);
    // A range of more than four blocks is left to the stream.
    let path = stored_flipped(&store, dir.path(), &data, FLIPPED).await;
    let mut e = entry(&store, "k").await;
    assert!(e.verify_range(0, LEN as u64 - 1).await);
    assert!(path.exists());
}

#[tokio::test]
async fn a_damaged_table_entry_fails_only_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(LEN, 7);
    put(&store, "k", &data).await;
    let path = files(&dir.path().join("objects")).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    // The entry of block 1 in the table after the body.
    let table = last_body_byte(&bytes) + 1;
    bytes[table + 8 + 3] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let mut e = entry(&store, "k").await;
    assert!(e.verify_range(0, 100).await);
    let mut e = entry(&store, "k").await;
    assert!(!e.verify_range(BLOCK_LEN, BLOCK_LEN).await);
    assert_eq!(store.stats().checksum_failures, 1);
}

#[tokio::test]
async fn a_file_of_format_version_1_is_dropped_by_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let data = body(LEN, 9);
    let (v1, v2);
    {
        let store = open(dir.path()).await;
        put(&store, "old", &data).await;
        v1 = files(&dir.path().join("objects")).remove(0);
        put(&store, "new", &data).await;
        v2 = files(&dir.path().join("objects"))
            .into_iter()
            .find(|p| *p != v1)
            .unwrap();
    }
    // What the previous release wrote: no block table, version 1, and the header
    // checksum (over the preamble's first 56 bytes and the key) to match.
    let mut bytes = std::fs::read(&v1).unwrap();
    bytes.truncate(last_body_byte(&bytes) + 1);
    bytes[8..10].copy_from_slice(&1u16.to_le_bytes());
    let key_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let mut sum = Xxh3Default::new();
    sum.update(&bytes[..56]);
    sum.update(&bytes[64..64 + key_len]);
    bytes[56..64].copy_from_slice(&sum.digest().to_le_bytes());
    std::fs::write(&v1, &bytes).unwrap();

    let store = open(dir.path()).await;
    assert!(!v1.exists(), "the version 1 file is removed");
    assert!(missing(&store, "old").await);
    let stats = store.stats();
    assert_eq!((stats.removed_invalid, stats.checksum_failures), (1, 0));
    // The version 2 file beside it is kept and served, any range verified.
    assert!(v2.exists());
    let mut e = entry(&store, "new").await;
    assert!(e.verify_range(FLIPPED - 10, FLIPPED + 10).await);
    let (got, error) = collect(e.into_range_stream(FLIPPED - 10, FLIPPED + 10)).await;
    assert!(error.is_none() && got == data[FLIPPED as usize - 10..=FLIPPED as usize + 10]);
}
