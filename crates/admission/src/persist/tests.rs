use super::*;
use crate::{FilterHash, FilterParams, Rotation};
use proptest::prelude::*;
use xxhash_rust::xxh3::xxh3_128;

const HOUR: Duration = Duration::from_secs(3600);

fn key(i: u64) -> FilterHash {
    FilterHash(xxh3_128(&i.to_le_bytes()))
}

fn params() -> FilterParams {
    FilterParams::for_expected_keys(10_000, 0.01)
}

/// Snapshots of a fresh pair with `params`, in `dir`, with `seed`.
fn snapshots(dir: &Path, params: FilterParams, seed: u64) -> Snapshots {
    let pair = AgingPair::new(params, HOUR, Rotation::Fill, Instant::now());
    Snapshots::new(Arc::new(pair), dir, seed, Duration::from_secs(60))
}

/// A pair with keys 0..500 in `previous` and 500..1000 in `current`, saved to `dir`.
fn saved(dir: &Path) -> Snapshots {
    let snapshots = snapshots(dir, params(), 7);
    let t0 = Instant::now();
    for i in 0..500 {
        snapshots.pair.check_and_record_at(key(i), t0);
    }
    // The pair was created just before t0; an hour later the first generation is over.
    for i in 500..1_000 {
        snapshots.pair.check_and_record_at(key(i), t0 + HOUR);
    }
    assert_eq!(snapshots.pair.generation(), 1);
    snapshots.save().unwrap();
    snapshots
}

#[test]
fn save_then_restore_gives_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let original = saved(dir.path());
    let restored = snapshots(dir.path(), params(), 7);
    assert!(restored.restore());
    assert_eq!(restored.pair.generation(), 1);
    for i in 0..5_000 {
        assert_eq!(
            restored.pair.contains(key(i)),
            original.pair.contains(key(i)),
            "key {i}"
        );
    }
    assert!((0..1_000).all(|i| restored.pair.contains(key(i))));
    let stats = restored.pair.stats_at(Instant::now());
    assert_eq!(stats.current.inserts, 500);
    assert_eq!(stats.previous.map(|p| p.inserts), Some(500));
    // The snapshot, and the room taken for the next one: a temp file of its size.
    let snapshot_len = fs::metadata(original.path()).unwrap().len();
    let mut others: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != SNAPSHOT_FILE)
        .collect();
    assert_eq!(others.len(), 1);
    let reserved = others.remove(0);
    assert!(reserved.file_name().to_string_lossy().ends_with(".tmp"));
    assert!(reserved.metadata().unwrap().len() >= snapshot_len);
}

#[test]
fn a_save_into_room_taken_ahead_writes_a_snapshot_of_its_own_length() {
    let dir = tempfile::tempdir().unwrap();
    let saver = snapshots(dir.path(), params(), 7);
    let reserved = saver.reserve().unwrap();
    saver.save().unwrap();
    let saved = fs::metadata(saver.path()).unwrap().len();
    assert_eq!(
        saved, reserved,
        "an empty pair's snapshot fills its room exactly"
    );
    // Room taken for a fuller pair is cut to what the save wrote.
    for i in 0..500 {
        saver.pair.check_and_record_at(key(i), Instant::now());
    }
    saver.reserve().unwrap();
    let restored = snapshots(dir.path(), params(), 7);
    saver.save().unwrap();
    assert!(
        restored.restore(),
        "the snapshot written into the room reads back"
    );
    assert!((0..500).all(|i| restored.pair.contains(key(i))));
}

#[test]
fn temp_files_other_processes_left_are_removed_when_room_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join(format!(".{SNAPSHOT_FILE}.999999999.0.tmp"));
    fs::write(&stale, vec![0u8; 4096]).unwrap();
    snapshots(dir.path(), params(), 7).reserve().unwrap();
    assert!(!stale.exists());
}

#[test]
fn no_snapshot_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = snapshots(dir.path(), params(), 7);
    assert!(!fresh.restore());
    assert_eq!(fresh.pair.generation(), 0);
}

#[test]
fn a_snapshot_of_other_parameters_or_seed_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    saved(dir.path());
    for (params, seed) in [
        (FilterParams::for_expected_keys(20_000, 0.01), 7),
        (FilterParams::for_expected_keys(10_000, 0.001), 7),
        (
            FilterParams {
                generation_size: 9_000,
                ..params()
            },
            7,
        ),
        (params(), 8),
    ] {
        let other = snapshots(dir.path(), params, seed);
        assert!(!other.restore(), "{params:?} seed {seed}");
        assert!(!other.pair.contains(key(1)));
        assert_eq!(other.pair.generation(), 0);
    }
}

#[test]
fn a_torn_or_foreign_file_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let original = saved(dir.path());
    let bytes = fs::read(original.path()).unwrap();
    for bad in [
        bytes[..bytes.len() / 2].to_vec(),
        bytes[..7].to_vec(),
        Vec::new(),
        b"SHBLOOM2 not this version".to_vec(),
        // A snapshot of format version 1 (bits laid out over whole blocks, not two words).
        [&bytes[..8], &1u32.to_le_bytes()[..], &bytes[12..]].concat(),
        [bytes.as_slice(), b"trailing"].concat(),
    ] {
        fs::write(original.path(), &bad).unwrap();
        let fresh = snapshots(dir.path(), params(), 7);
        assert!(!fresh.restore(), "{} bytes", bad.len());
        assert!(!fresh.pair.contains(key(1)));
    }
}

#[test]
fn downtime_counts_toward_max_age() {
    let dir = tempfile::tempdir().unwrap();
    saved(dir.path());
    // In the future, so that going back 59 minutes works on a machine up for less than that.
    let now = Instant::now() + 3 * HOUR;
    // Restarted 59 minutes later: the young generation is kept, and is 59 minutes old.
    let soon = snapshots(dir.path(), params(), 7);
    assert!(soon.restore_at(now, SystemTime::now() + Duration::from_secs(59 * 60)));
    assert_eq!(soon.pair.generation(), 1);
    assert!(soon.pair.contains(key(1)) && soon.pair.contains(key(600)));
    soon.pair
        .check_and_record_at(key(5_000), now + Duration::from_secs(61));
    assert_eq!(soon.pair.generation(), 2, "59 min before plus 1 min after");
    // Restarted 90 minutes later: rotated on load.
    let later = snapshots(dir.path(), params(), 7);
    assert!(later.restore_at(now, SystemTime::now() + Duration::from_secs(90 * 60)));
    assert_eq!(later.pair.generation(), 2);
    assert!(!later.pair.contains(key(1)) && later.pair.contains(key(600)));
    // Restarted 3 hours later: everything forgotten.
    let much_later = snapshots(dir.path(), params(), 7);
    assert!(much_later.restore_at(now, SystemTime::now() + 3 * HOUR));
    assert!(!much_later.pair.contains(key(1)) && !much_later.pair.contains(key(600)));
}

#[test]
fn save_reports_an_unwritable_directory() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("state");
    fs::write(&blocker, "a file where the directory should be").unwrap();
    let snapshots = snapshots(&blocker, params(), 7);
    assert!(snapshots.save().is_err());
}

proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(32))]

    /// Any corruption of one byte is caught (by the checksum, or by the format checks
    /// before it): the snapshot is ignored and the pair starts empty.
    #[test]
    fn any_corrupted_byte_is_rejected(position in any::<prop::sample::Index>(), flip in 1..=255u8) {
        let dir = tempfile::tempdir().unwrap();
        let original = saved(dir.path());
        let mut bytes = fs::read(original.path()).unwrap();
        let at = position.index(bytes.len());
        bytes[at] ^= flip;
        fs::write(original.path(), &bytes).unwrap();
        let fresh = snapshots(dir.path(), params(), 7);
        prop_assert!(!fresh.restore(), "byte {} of {}", at, bytes.len());
        prop_assert!(!fresh.pair.contains(key(1)));
    }
}
