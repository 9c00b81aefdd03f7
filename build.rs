//! Build information for `secondhit --version`: the git commit the binary is built from and
//! the cargo features built in, passed to the compiler as `SECONDHIT_COMMIT` and
//! `SECONDHIT_FEATURES`; and `cfg(tests_as_root)` when the build runs as root, without
//! which the tests that need root are ignored, each saying so. Plain `git` and no
//! crates, so the script itself builds in moments.

use std::path::Path;
use std::process::Command;

fn main() {
    // A build from a source tarball has no git: its packager may name the commit.
    println!("cargo::rerun-if-env-changed=SECONDHIT_COMMIT");
    let commit = std::env::var("SECONDHIT_COMMIT")
        .ok()
        .filter(|commit| !commit.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo::rustc-env=SECONDHIT_COMMIT={commit}");
    println!("cargo::rustc-env=SECONDHIT_FEATURES={}", features());
    println!("cargo::rustc-check-cfg=cfg(tests_as_root)");
    if building_as_root() {
        println!("cargo::rustc-cfg=tests_as_root");
    }
    // `sudo` and `su` set it: a build under another user runs this script again.
    println!("cargo::rerun-if-env-changed=USER");
    watch_head();
}

/// Whether this script runs as root (the effective uid on the `Uid:` line of
/// `/proc/self/status`): the tests build as they run, so they run as root too.
fn building_as_root() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let uids = status.lines().find_map(|line| line.strip_prefix("Uid:"));
    uids.and_then(|ids| ids.split_whitespace().nth(1)) == Some("0")
}

/// The features cargo enabled (`CARGO_FEATURE_*`), comma-separated, or "none".
fn features() -> String {
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(name, _)| name.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .filter(|feature| feature != "DEFAULT")
        .map(|feature| feature.to_lowercase().replace('_', "-"))
        .collect();
    features.sort();
    if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(",")
    }
}

/// Reruns this script when HEAD moves (a commit, a checkout, a reset) and only then: with
/// no `rerun-if-changed` line cargo would rerun it on every change to any file. HEAD's
/// reflog grows at every move, even when the branch's ref is packed; the ref itself
/// covers a repository that keeps no reflog.
fn watch_head() {
    println!("cargo::rerun-if-changed=build.rs");
    let mut watched = vec!["HEAD".to_owned(), "logs/HEAD".to_owned()];
    if let Some(branch) = git(&["rev-parse", "--symbolic-full-name", "HEAD"])
        && branch.starts_with("refs/")
    {
        watched.push(branch);
    }
    for name in watched {
        // A worktree keeps HEAD apart from the shared refs: git says where each one is.
        let Some(path) = git(&["rev-parse", "--git-path", &name]) else {
            continue;
        };
        // A path that does not exist would make cargo rerun the script on every build.
        if Path::new(&path).exists() {
            println!("cargo::rerun-if-changed={path}");
        }
    }
}

/// The trimmed output of `git ARGS`, or `None` without git, outside a repository, or on
/// an error.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (output.status.success() && !text.is_empty()).then(|| text.to_owned())
}
