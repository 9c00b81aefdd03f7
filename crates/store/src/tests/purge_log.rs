//! A purge answers before its files are unlinked, and a stop before the last one is gone
//! never brings a purged entry back: the next start's scan finishes the purge.

use super::*;
use crate::PurgeMode;
use crate::catalog::PurgeSelector;

/// Stores `key` with `tags`.
async fn put_tagged(store: &Store, key: &str, tags: &[&str]) {
    let mut tagged = meta(200);
    tagged.tags = tags.iter().map(|t| (*t).to_owned()).collect();
    let hash = Store::key_hash(key);
    let mut writer = store
        .begin_fill(key, hash, &tagged, Some(3), MAX, store.fill_ticket())
        .await
        .unwrap();
    writer.write(b"abc").await.unwrap();
    writer.finish().await.unwrap();
}

/// A store of `n` entries tagged `t` (`http://h/0`, ...) and one tagged `u`.
async fn tagged_store(n: usize) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    for i in 0..n {
        put_tagged(&store, &format!("http://h/{i}"), &["t"]).await;
    }
    put_tagged(&store, "http://h/other", &["u"]).await;
    (dir, store)
}

/// Asserts that none of the first `n` tagged entries is found.
async fn assert_all_miss(store: &Store, n: usize) {
    for i in 0..n {
        let key = format!("http://h/{i}");
        let found = store.lookup(&key, Store::key_hash(&key)).await.unwrap();
        assert!(found.is_none(), "{key} was purged");
    }
}

fn pending(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("state").join(super::super::purge_log::FILE))
        .unwrap_or_default()
}

#[tokio::test]
async fn a_purge_answers_then_its_files_go_and_its_record_with_them() {
    let (dir, store) = tagged_store(20).await;
    let purged = store
        .purge(&PurgeSelector::Tag("t".to_owned()), PurgeMode::Remove)
        .await
        .unwrap();
    assert_eq!(purged, 20);
    assert_all_miss(&store, 20).await;
    // The unlinking runs on blocking threads, in real time; once done, one file is left
    // and the record is gone.
    for _ in 0..1000 {
        if files(&dir.path().join("objects")).len() == 1 && pending(dir.path()).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(files(&dir.path().join("objects")).len(), 1);
    assert_eq!(
        pending(dir.path()),
        "",
        "the finished purge is no longer pending"
    );
    entry(&store, "http://h/other").await;
}

#[tokio::test]
async fn a_purge_left_unfinished_is_finished_by_the_next_start() {
    let (dir, store) = tagged_store(5).await;
    drop(store);
    // As if the process stopped after writing the purge and before unlinking anything.
    std::fs::write(
        dir.path().join("state").join(super::super::purge_log::FILE),
        "tag\t\"t\"\n",
    )
    .unwrap();
    let store = open(dir.path()).await;
    assert_all_miss(&store, 5).await;
    entry(&store, "http://h/other").await;
    assert_eq!(files(&dir.path().join("objects")).len(), 1);
    assert_eq!(pending(dir.path()), "", "replayed, the purge is done");
}

#[tokio::test]
async fn a_pending_purge_torn_inside_a_character_is_skipped_and_the_store_still_opens() {
    let (dir, store) = tagged_store(5).await;
    drop(store);
    // A stop in the middle of appending a value with a two-byte character leaves half of
    // it: the file is no longer UTF-8. The lines around it are still purges to finish.
    std::fs::write(
        dir.path().join("state").join(super::super::purge_log::FILE),
        b"url\t\"http://h/caf\xc3\ntag\t\"t\"\n",
    )
    .unwrap();
    let store = open(dir.path()).await;
    assert_all_miss(&store, 5).await;
    entry(&store, "http://h/other").await;
    assert_eq!(pending(dir.path()), "", "replayed, the purge is done");
}

/// A stop can leave the last line without its newline. The next start writes the file
/// again without it, so a purge recorded after that start begins on a line of its own and
/// is replayed by the start after, should that stop come before its files are gone.
#[test]
fn a_purge_recorded_after_a_torn_last_line_survives_the_next_stop() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join(super::super::purge_log::FILE),
        "tag\t\"a\"\ntag\t\"b",
    )
    .unwrap();
    let (log, left) = super::super::purge_log::PurgeLog::open(&state).unwrap();
    assert_eq!(
        left.len(),
        1,
        "the whole line is replayed, the torn one skipped"
    );
    log.record(&PurgeSelector::Tag("c".to_owned())).unwrap();
    drop(log);
    let (_, left) = super::super::purge_log::PurgeLog::open(&state).unwrap();
    let tags: Vec<_> = left.iter().map(|(_, selector)| selector.clone()).collect();
    assert_eq!(
        tags,
        [
            PurgeSelector::Tag("a".to_owned()),
            PurgeSelector::Tag("c".to_owned())
        ]
    );
}
