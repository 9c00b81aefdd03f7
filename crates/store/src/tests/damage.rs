//! Damaged entry files: found by the scan, at lookup or while streaming;
//! removed, counted, and never served whole.

use super::*;

#[tokio::test]
async fn open_removes_invalid_files_and_keeps_state() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects");
    let (good, truncated, garbage);
    {
        let store = open(dir.path()).await;
        put(&store, "good", b"fine").await;
        put(&store, "short", &body(1000, 2)).await;
        let all = files(&objects);
        let hash = format!("{:032x}", Store::key_hash("good"));
        good = all
            .iter()
            .find(|p| p.to_string_lossy().contains(&hash))
            .unwrap()
            .clone();
        truncated = all.into_iter().find(|p| *p != good).unwrap();
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&truncated)
        .unwrap();
    f.set_len(f.metadata().unwrap().len() - 1).unwrap();
    // Garbage under a well-formed name, and a file with a foreign name.
    let hash = format!("{:032x}", 0xabcd_u128 << 112);
    garbage = objects
        .join("ab/cd")
        .join(format!("{hash}-0000000000000001"));
    std::fs::create_dir_all(garbage.parent().unwrap()).unwrap();
    std::fs::write(&garbage, vec![0x5a; 9000]).unwrap();
    std::fs::write(objects.join("ab/notes.txt"), b"hello").unwrap();
    // state/ belongs to other modules.
    std::fs::create_dir_all(dir.path().join("state/snap")).unwrap();
    std::fs::write(dir.path().join("state/seed"), b"seed").unwrap();
    std::fs::write(dir.path().join("state/snap/0"), b"bits").unwrap();
    let state_before = files(&dir.path().join("state"));

    let store = open(dir.path()).await;
    assert_eq!(files(&objects), vec![good]);
    assert_eq!(read(&store, "good").await.unwrap().1, b"fine");
    assert!(!store.contains(Store::key_hash("short")));
    assert_eq!(files(&store.state_dir()), state_before);
    assert_eq!(
        std::fs::read(dir.path().join("state/seed")).unwrap(),
        b"seed"
    );
    assert_eq!(
        std::fs::read(dir.path().join("state/snap/0")).unwrap(),
        b"bits"
    );
}

#[tokio::test]
async fn corrupt_header_at_lookup_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "k", b"body").await;
    let path = files(&dir.path().join("objects")).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[64] ^= 0xff; // the key's first byte
    std::fs::write(&path, bytes).unwrap();
    assert!(
        store
            .lookup("k", Store::key_hash("k"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(!path.exists());
    assert!(!store.contains(Store::key_hash("k")));
}

#[tokio::test]
async fn corrupt_or_cut_body_fails_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(150_000, 9);
    let hash = Store::key_hash("k");
    put(&store, "k", &data).await;
    let path = files(&dir.path().join("objects")).remove(0);
    let original = std::fs::read(&path).unwrap();

    // Cut after lookup verified the length: an early EOF, and the entry is gone.
    let entry = store.lookup("k", hash).await.unwrap().unwrap();
    // Ten bytes short of the body's end (the block table after it goes too).
    std::fs::write(&path, &original[..last_body_byte(&original) - 9]).unwrap();
    let items: Vec<_> = entry.into_body_stream().collect().await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    assert!(!path.exists());
    assert!(!store.contains(hash));
    assert_eq!(store.stats().removed_invalid, 1);

    // Stored again, with one body byte flipped: the checksum catches it.
    put(&store, "k", &data).await;
    let path = files(&dir.path().join("objects")).remove(0);
    let mut flipped = std::fs::read(&path).unwrap();
    let last = last_body_byte(&flipped);
    flipped[last] ^= 0x01;
    std::fs::write(&path, &flipped).unwrap();
    let entry = store.lookup("k", hash).await.unwrap().unwrap();
    let items: Vec<_> = entry.into_body_stream().collect().await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(items[..items.len() - 1].iter().all(|c| c.is_ok()));
    assert!(!path.exists());
    assert!(!store.contains(hash));
    let stats = store.stats();
    assert_eq!(
        (stats.checksum_failures, stats.objects, stats.bytes),
        (1, 0, 0)
    );
}

#[tokio::test]
async fn small_damaged_body_is_a_miss_before_any_byte() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let data = body(10_000, 4);
    put(&store, "s", &data).await;
    let path = files(&dir.path().join("objects")).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() - data.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    assert!(
        store
            .lookup("s", Store::key_hash("s"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(!path.exists());
    let stats = store.stats();
    assert_eq!((stats.checksum_failures, stats.objects), (1, 0));
    // Undamaged, it is served whole: one piece, verified up front.
    put(&store, "s", &data).await;
    let entry = store
        .lookup("s", Store::key_hash("s"))
        .await
        .unwrap()
        .unwrap();
    let items: Vec<_> = entry.into_body_stream().collect().await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].as_ref().unwrap()[..], data[..]);
}
