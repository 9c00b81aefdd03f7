//! `benches/device_bundle.sh`: the bundle it packs runs secondhit, bare_proxy, nginx and wrk
//! through its own loader and libraries, for a machine where nothing can be installed, and
//! packs it again as one archive. Needs nginx, wrk and ldd: `#[ignore]`d (the
//! runner lists it, with why) and run with `--ignored` where they are, as `.ci/run` does.

use std::path::Path;
use std::process::{Command, Stdio};

use super::support::shell::on_path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs `program` from the bundle with `args`; its standard output and error together.
/// `wrk --version` prints its version and exits 1, so the status is checked only where
/// `succeeds`.
fn run_bundled(bundle: &Path, program: &str, args: &[&str], succeeds: bool) -> String {
    let output = Command::new(bundle.join("bin").join(program))
        .args(args)
        .stdin(Stdio::null())
        // Nothing of the system's on PATH but the shell tools the wrappers use.
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap_or_else(|e| panic!("run the bundled {program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() || !succeeds,
        "bundled {program} failed: {text}"
    );
    text
}

/// This build's `examples/bare_proxy`, built by cargo if `cargo test` has not built it
/// already (it does, unless told which tests to build), so the script builds no release.
fn bare_proxy() -> std::path::PathBuf {
    let profile_dir = Path::new(env!("CARGO_BIN_EXE_secondhit"))
        .parent()
        .expect("the binary's directory");
    let example = profile_dir.join("examples/bare_proxy");
    if !example.is_file() {
        let release = profile_dir.ends_with("release");
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--locked", "--quiet", "--example", "bare_proxy"])
            .args(release.then_some("--release"))
            .current_dir(ROOT)
            .stdin(Stdio::null())
            .status()
            .expect("run cargo build --example bare_proxy");
        assert!(status.success(), "cargo build --example bare_proxy failed");
    }
    example
}

#[test]
#[ignore = "needs nginx, wrk and ldd: cargo test -- --ignored once installed (.ci/run does)"]
fn the_device_bundle_runs_each_program_through_its_own_loader_and_libraries() {
    for tool in ["nginx", "wrk", "ldd"] {
        let install = "Debian: apt-get install nginx wrk";
        crate::support::shell::require(tool, on_path(tool), install);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let bundle = dir.path().join("bundle");
    let status = Command::new("bash")
        .arg(Path::new(ROOT).join("benches/device_bundle.sh"))
        .env("BUNDLE", &bundle)
        .env("SECONDHIT_BIN", env!("CARGO_BIN_EXE_secondhit"))
        .env("BARE_BIN", bare_proxy())
        .stdin(Stdio::null())
        .status()
        .expect("run device_bundle.sh");
    assert!(status.success(), "device_bundle.sh failed");
    let libs: Vec<String> = std::fs::read_dir(bundle.join("lib"))
        .expect("the bundle's lib/")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for needed in ["ld-linux", "libc.so", "libssl", "libluajit"] {
        assert!(
            libs.iter().any(|lib| lib.starts_with(needed)),
            "{needed} is packed: {libs:?}"
        );
    }
    assert!(run_bundled(&bundle, "secondhit", &["--version"], true).starts_with("secondhit "));
    assert!(run_bundled(&bundle, "nginx", &["-v"], true).contains("nginx version"));
    assert!(run_bundled(&bundle, "bare_proxy", &[], false).contains("usage: bare_proxy"));
    assert!(run_bundled(&bundle, "wrk", &["--version"], false).starts_with("wrk "));
    // The wrappers start the packed loader, not the system's.
    let wrapper = std::fs::read_to_string(bundle.join("bin/nginx")).expect("read wrapper");
    assert!(
        wrapper.contains("/lib/ld-linux") && wrapper.contains("--library-path"),
        "{wrapper}"
    );
    assert!(bundle.join("run.sh").is_file());
    if on_path("perf") {
        assert!(run_bundled(&bundle, "perf", &["--version"], true).starts_with("perf version"));
    } else {
        eprintln!(
            "perf is not installed, so the bundle packs none (Debian: apt-get install linux-perf)"
        );
    }
    // The archive holds the same directory, for a machine it is carried to.
    let listing = Command::new("tar")
        .arg("tzf")
        .arg(dir.path().join("bundle.tgz"))
        .output()
        .expect("run tar");
    assert!(listing.status.success(), "tar could not read bundle.tgz");
    let listing = String::from_utf8_lossy(&listing.stdout);
    for packed in ["bundle/run.sh", "bundle/bin/secondhit", "bundle/real/nginx"] {
        assert!(
            listing.lines().any(|line| line == packed),
            "{packed} in the archive: {listing}"
        );
    }
}
