use std::os::unix::fs::PermissionsExt;

use nix::unistd::{Gid, Uid};

use super::{Account, check, run_as};
use crate::config::{AccessLog, Config, FilterSizing};

/// A config whose cache directory is `dir` and that needs nothing else from the machine.
fn config_with_cache_dir(dir: &std::path::Path) -> Config {
    let mut config = Config::default();
    config.cache.dir = dir.to_owned();
    config.log.access_log = AccessLog::Off;
    config
}

#[test]
fn a_usable_cache_dir_passes_existing_or_to_be_created() {
    let temp = tempfile::tempdir().expect("temp dir");
    assert_eq!(
        check(&config_with_cache_dir(temp.path())).expect("usable"),
        None
    );
    let deeper = temp.path().join("a/b/cache");
    check(&config_with_cache_dir(&deeper)).expect("creatable");
}

#[test]
fn a_cache_dir_that_is_a_file_or_under_a_file_is_refused_by_key() {
    let temp = tempfile::tempdir().expect("temp dir");
    let file = temp.path().join("plain");
    std::fs::write(&file, b"x").expect("write");
    let error = check(&config_with_cache_dir(&file)).expect_err("a file");
    assert_eq!(error.key, "cache.dir");
    assert!(error.reason.contains("not a directory"), "{error}");
    let error = check(&config_with_cache_dir(&file.join("cache"))).expect_err("under a file");
    assert_eq!(error.key, "cache.dir");
    assert!(error.to_string().starts_with("cache.dir: "), "{error}");
}

#[test]
fn writability_follows_owner_group_and_other_bits_for_the_account() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path();
    let meta = |mode: u32| {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
        std::fs::metadata(dir).expect("metadata")
    };
    let owner = Uid::from_raw(
        std::fs::metadata(dir)
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .expect("owner"),
    );
    // A uid and gid that own nothing here: only the "other" bits apply to them.
    let stranger = Account {
        uid: Uid::from_raw(owner.as_raw().wrapping_add(4242).max(1)),
        gids: vec![Gid::from_raw(4242)],
    };
    assert!(!stranger.may_write(&meta(0o755)));
    assert!(stranger.may_write(&meta(0o777)));
    // Writable but not searchable: files inside cannot be created.
    assert!(!stranger.may_write(&meta(0o772)));
    let root = Account {
        uid: Uid::from_raw(0),
        gids: vec![],
    };
    assert!(root.may_write(&meta(0o500)));
    if !owner.is_root() {
        let me = Account {
            uid: owner,
            gids: vec![],
        };
        assert!(me.may_write(&meta(0o700)));
        assert!(!me.may_write(&meta(0o500)));
    }
    meta(0o700);
}

#[test]
fn unknown_users_and_groups_are_refused_by_key() {
    let error = run_as(Some("no-such-user-secondhit"), None).expect_err("unknown user");
    assert_eq!(error.key, "server.user");
    assert!(
        error.reason.contains("no user \"no-such-user-secondhit\""),
        "{error}"
    );
    let error = run_as(Some("root"), Some("no-such-group-secondhit")).expect_err("unknown group");
    assert_eq!(error.key, "server.group");
    let error = run_as(None, Some("root")).expect_err("group alone");
    assert_eq!(error.key, "server.group");
    let root = run_as(Some("root"), None)
        .expect("root exists")
        .expect("an account");
    assert!(root.uid.is_root());
    assert_eq!(root.gid, Gid::from_raw(0));
}

#[test]
fn an_access_log_in_a_missing_directory_is_refused_by_key() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut config = config_with_cache_dir(temp.path());
    config.log.access_log = AccessLog::File(temp.path().join("missing/access.log"));
    let error = check(&config).expect_err("missing directory");
    assert_eq!(error.key, "log.access_log");
    config.log.access_log = AccessLog::File(temp.path().join("access.log"));
    check(&config).expect("a writable directory");
}

#[test]
fn filters_larger_than_the_machine_are_refused_by_the_sizing_key() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut config = config_with_cache_dir(temp.path());
    // About 1.2 PB of filter bits: more than any machine this runs on.
    config.admission.sizing = FilterSizing::ExpectedUrls(1_000_000_000_000_000);
    let error = check(&config).expect_err("too large");
    assert_eq!(error.key, "admission.expected_urls");
    assert!(error.reason.contains("more than this machine's"), "{error}");
    config.admission.sizing = FilterSizing::ExpectedUrls(1_000_000);
    check(&config).expect("a million URLs fit");
}
