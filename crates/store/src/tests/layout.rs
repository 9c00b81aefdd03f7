//! The entry directories of earlier builds (`objects/ab/cd/`), moved by the start-up
//! scan to their place in `objects/a/bc/`.

use super::*;

/// Moves every entry file under `objects` to where earlier builds kept it, and removes
/// the directories that leaves empty: a cache directory as an earlier build left it.
fn to_earlier_layout(objects: &Path) {
    for path in files(objects) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap();
        let fill = disk::parse_file_name(name).unwrap();
        let legacy = disk::legacy_object_path(objects, fill);
        std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        std::fs::rename(&path, &legacy).unwrap();
    }
    for item in std::fs::read_dir(objects).unwrap() {
        let item = item.unwrap();
        if item.file_name().len() == 1 {
            std::fs::remove_dir_all(item.path()).unwrap();
        }
    }
}

/// The names of the directories right under `objects`.
fn top_dirs(objects: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(objects)
        .unwrap()
        .map(|item| item.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_scan_moves_files_of_the_earlier_layout_to_their_place_and_they_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects");
    {
        let store = open(dir.path()).await;
        for i in 0..40u8 {
            put(&store, &format!("k{i}"), &body(500, i)).await;
        }
    }
    to_earlier_layout(&objects);
    // Directories an earlier build's evictions left empty: a leaf, and a parent.
    std::fs::create_dir_all(objects.join("ff").join("ee")).unwrap();
    std::fs::create_dir_all(objects.join("fe")).unwrap();
    assert!(top_dirs(&objects).iter().all(|name| name.len() == 2));
    assert_eq!(files(&objects).len(), 40);

    let store = open(dir.path()).await;
    assert_eq!(store.stats().objects, 40);
    for i in 0..40u8 {
        let key = format!("k{i}");
        assert_eq!(read(&store, &key).await.unwrap().1, body(500, i), "{key}");
        let stored = entry(&store, &key).await;
        assert!(
            entry_path(&store, &stored).is_file(),
            "{key} not in its place"
        );
    }
    // Every file sits in its place, and the directories of the earlier layout are gone,
    // empty ones included.
    assert_eq!(files(&objects).len(), 40);
    for path in files(&objects) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap();
        let fill = disk::parse_file_name(name).unwrap();
        assert_eq!(path, disk::object_path(&objects, fill));
    }
    let left = top_dirs(&objects);
    assert!(left.iter().all(|name| name.len() == 1), "{left:?}");
}

#[tokio::test]
async fn a_removal_while_the_scan_moves_files_of_the_earlier_layout_is_on_disk_when_it_returns() {
    const KEYS: usize = 1500;
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects");
    put_many_quickly(dir.path(), KEYS).await;
    to_earlier_layout(&objects);
    let layouts: [Layout; 2] = [disk::object_path, disk::legacy_object_path];
    remove_each_during_the_scan(dir.path(), KEYS, &layouts).await;
}
