use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

/// No entries to evict.
const NOTHING: Evictable = Evictable {
    objects: 0,
    bytes: 0,
};

fn io_error(errno: Errno) -> StoreError {
    StoreError::Io {
        path: Path::new("/cache/tmp/x.tmp").to_owned(),
        source: io::Error::from(errno),
    }
}

/// The free bytes of the filesystem holding `dir`, as the floor reads them.
fn free_bytes(dir: &Path) -> u64 {
    let stat = rustix::fs::statvfs(dir).unwrap();
    stat.f_bavail * stat.f_frsize
}

#[test]
fn only_space_and_device_errors_are_disk_trouble() {
    let trouble = |errno: Errno| Trouble::of(&io::Error::from(errno));
    assert_eq!(trouble(Errno::NOSPC), Some(Trouble::NoSpace));
    assert_eq!(trouble(Errno::DQUOT), Some(Trouble::NoSpace));
    assert_eq!(trouble(Errno::IO), Some(Trouble::Io));
    assert_eq!(trouble(Errno::ACCESS), None);
    assert_eq!(trouble(Errno::NOENT), None);
    assert_eq!(Trouble::of(&io::Error::other("no errno")), None);
    assert_eq!(io_error(Errno::NOSPC).trouble(), Some(Trouble::NoSpace));
}

#[test]
fn the_back_off_doubles_while_failures_repeat_and_ends_with_a_fill() {
    let mut backoff = Backoff::default();
    let t0 = Instant::now();
    assert!(!backoff.holds(t0));
    assert_eq!(backoff.fail(Trouble::NoSpace, t0), Some(BACKOFF_MIN));
    assert!(backoff.holds(t0 + BACKOFF_MIN / 2));
    // A failure within the running period belongs to it.
    assert_eq!(backoff.fail(Trouble::NoSpace, t0 + BACKOFF_MIN / 2), None);
    assert!(!backoff.holds(t0 + BACKOFF_MIN));
    // The next failure after it ended doubles the period, up to the maximum.
    let mut at = t0 + BACKOFF_MIN;
    let mut expected = BACKOFF_MIN;
    for _ in 0..10 {
        expected = (expected * 2).min(BACKOFF_MAX);
        assert_eq!(backoff.fail(Trouble::Io, at), Some(expected));
        at += expected;
    }
    assert_eq!(expected, BACKOFF_MAX);
    backoff.succeed();
    assert!(!backoff.holds(at));
    assert_eq!(backoff.fail(Trouble::NoSpace, at), Some(BACKOFF_MIN));
}

#[test]
fn a_failed_write_holds_new_fills_back_but_not_running_ones() {
    let dir = tempfile::tempdir().unwrap();
    let space = Space::new(dir.path().to_owned(), 0);
    let now = Instant::now();
    assert_eq!(space.check(1000, true, NOTHING, now), Verdict::Room);
    space.note(&io_error(Errno::NOSPC));
    let later = Instant::now();
    assert!(matches!(
        space.check(1000, true, NOTHING, later),
        Verdict::BackingOff(Trouble::NoSpace, left) if left <= BACKOFF_MIN
    ));
    // A running fill growing its reservation is judged by the free space alone.
    assert_eq!(space.check(1000, false, NOTHING, later), Verdict::Room);
    // Errors that are not disk trouble change nothing.
    let other = Space::new(dir.path().to_owned(), 0);
    other.note(&io_error(Errno::ACCESS));
    assert_eq!(other.check(1000, true, NOTHING, later), Verdict::Room);
    let stats = space.stats(later);
    assert!(stats.backing_off);
    assert_eq!(stats.write_failures, 1);
    // Once the period is over, the free space decides.
    let over = later + BACKOFF_MIN;
    assert_eq!(space.check(1000, true, NOTHING, over), Verdict::Room);
    space.succeeded();
    assert!(!space.stats(over).backing_off);
}

#[test]
fn a_floor_above_the_free_space_asks_for_eviction_or_gives_up() {
    let dir = tempfile::tempdir().unwrap();
    // A floor 100 MB above what is free: evicting 1 GB of entries would make room,
    // evicting 1 MB would not. (Other processes change the free space meanwhile; the
    // margins are wide for that.)
    let floor = free_bytes(dir.path()) + 100_000_000;
    let space = Space::new(dir.path().to_owned(), floor);
    let now = Instant::now();
    let plenty = Evictable {
        objects: 1000,
        bytes: 1_000_000_000,
    };
    let Verdict::Short(shortfall) = space.check(4096, true, plenty, now) else {
        panic!("not short");
    };
    assert!(
        (50_000_000..=150_000_000).contains(&shortfall.bytes),
        "{shortfall:?}"
    );
    // Evicted bytes count as free until the next reading (`now` is the reading's time,
    // so it is fresh).
    space.freed(300_000_000, 1);
    assert_eq!(space.check(4096, false, plenty, now), Verdict::Room);
    let little = Evictable {
        objects: 1,
        bytes: 1_000_000,
    };
    let space = Space::new(dir.path().to_owned(), floor);
    let Verdict::Hopeless(shortfall) = space.check(4096, true, little, now) else {
        panic!("not hopeless");
    };
    // Nothing to evict is enough: new fills back off.
    space.hopeless(shortfall, now);
    assert!(matches!(
        space.check(4096, true, plenty, now),
        Verdict::BackingOff(Trouble::NoSpace, _)
    ));
}

#[test]
fn rounding_is_to_whole_blocks() {
    assert_eq!(round_up(0, 4096), 0);
    assert_eq!(round_up(1, 4096), 4096);
    assert_eq!(round_up(4096, 4096), 4096);
    assert_eq!(round_up(4097, 4096), 8192);
    assert_eq!(round_up(u64::MAX, 4096), u64::MAX);
}

#[test]
fn an_unreadable_directory_keeps_no_floor() {
    let space = Space::new(
        Path::new("/nonexistent/secondhit/cache").to_owned(),
        u64::MAX,
    );
    let now = Instant::now();
    assert_eq!(space.check(1, true, NOTHING, now), Verdict::Room);
    assert_eq!(
        space.stats(now + Duration::from_secs(1)).free_bytes,
        0,
        "no reading"
    );
}
