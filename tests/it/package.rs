//! The Debian package and the systemd unit it ships: the unit, the packaged config and
//! `[package.metadata.deb]` must agree on every path (the binary, the config file, the
//! directories the service may write), and the package built by
//! `config/package/build-deb.sh` must install those files, with a config that passes
//! `check-config`.
//!
//! The install runs unprivileged: `dpkg-deb -x` unpacks the package into a scratch root
//! (no maintainer scripts run, so the test creates the two directories the unit's
//! `CacheDirectory=` and `LogsDirectory=` would), and the config's absolute paths are
//! moved under that root before `check-config` judges them. Building the package is a
//! release build, so that test is `#[ignore]`d (listed by the runner, with why) and run
//! with `--ignored` where cargo-deb and dpkg-deb are installed, as `.ci/run` does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use secondhit_proxy::config::{AccessLog, Config};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Where the package installs its config (the unit's `--config`).
const CONFIG_PATH: &str = "/etc/secondhit/secondhit.toml";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The `[Service]` settings of a unit file, in order (`Key=value`, comments skipped).
fn service_settings(unit: &str) -> Vec<(String, String)> {
    let mut in_service = false;
    let mut settings = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service
            && !line.starts_with('#')
            && let Some((key, value)) = line.split_once('=')
        {
            settings.push((key.to_owned(), value.to_owned()));
        }
    }
    settings
}

fn setting<'a>(settings: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    settings
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The directories the unit lets the service write under `ProtectSystem=strict`.
fn writable_dirs(settings: &[(String, String)]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for (key, base) in [
        ("CacheDirectory", "/var/cache"),
        ("LogsDirectory", "/var/log"),
        ("StateDirectory", "/var/lib"),
        ("RuntimeDirectory", "/run"),
    ] {
        for names in setting(settings, key) {
            dirs.extend(
                names
                    .split_whitespace()
                    .map(|name| Path::new(base).join(name)),
            );
        }
    }
    for paths in setting(settings, "ReadWritePaths") {
        dirs.extend(
            paths
                .split_whitespace()
                .map(|path| PathBuf::from(path.trim_start_matches(['-', '+']))),
        );
    }
    dirs
}

/// Asserts that the unit runs `binary` on `config_path` with both commands, and that the
/// config's cache directory and access log lie where the unit lets it write, outside a
/// private /tmp.
fn assert_unit_fits_config(unit: &str, binary: &str, config_path: &str, config: &Config) {
    let settings = service_settings(unit);
    assert_eq!(
        setting(&settings, "ExecStart"),
        [format!("{binary} serve --config {config_path}")],
        "the unit should serve the packaged config"
    );
    assert_eq!(
        setting(&settings, "ExecStartPre"),
        [format!("{binary} check-config {config_path}")],
        "the unit should check the packaged config before it starts"
    );
    assert_eq!(setting(&settings, "User"), ["secondhit"]);
    let writable = writable_dirs(&settings);
    let cache = &config.cache.dir;
    assert!(
        writable.iter().any(|dir| cache.starts_with(dir)),
        "cache.dir {} is not among the unit's writable directories {writable:?}",
        cache.display()
    );
    if setting(&settings, "PrivateTmp").contains(&"yes") {
        for tmp in ["/tmp", "/var/tmp"] {
            assert!(
                !cache.starts_with(tmp),
                "under PrivateTmp=yes a cache in {tmp} is deleted at every stop"
            );
        }
    }
    match &config.log.access_log {
        AccessLog::File(log) => assert!(
            writable.iter().any(|dir| log.starts_with(dir)),
            "log.access_log {} is not among the unit's writable directories {writable:?}",
            log.display()
        ),
        other => panic!("the packaged config should log to a file, not {other:?}"),
    }
    let pid_file = config.server.pid_file.as_ref().expect("a pid file");
    assert!(
        writable.iter().any(|dir| pid_file.starts_with(dir)),
        "server.pid_file {} is not among the unit's writable directories {writable:?}",
        pid_file.display()
    );
}

/// `[package.metadata.deb]` of Cargo.toml.
fn deb_metadata() -> toml::Table {
    let manifest: toml::Table = read(&Path::new(ROOT).join("Cargo.toml"))
        .parse()
        .expect("Cargo.toml is TOML");
    manifest["package"]["metadata"]["deb"]
        .as_table()
        .expect("Cargo.toml has [package.metadata.deb]")
        .clone()
}

/// The installed path of the asset whose source is `source`, as an absolute path.
fn asset_dest(deb: &toml::Table, source: &str) -> String {
    let assets = deb["assets"].as_array().expect("assets is an array");
    let asset = assets
        .iter()
        .filter_map(toml::Value::as_array)
        .find(|asset| asset[0].as_str() == Some(source))
        .unwrap_or_else(|| panic!("no asset {source} in [package.metadata.deb]"));
    let dest = asset[1].as_str().expect("a destination");
    let file_name = Path::new(source).file_name().expect("a file name");
    let dest = match dest.strip_suffix('/') {
        Some(dir) => Path::new(dir).join(file_name),
        None => PathBuf::from(dest),
    };
    format!("/{}", dest.display())
}

#[test]
fn the_unit_runs_the_packaged_binary_on_the_packaged_config_where_it_may_write() {
    let deb = deb_metadata();
    let binary = asset_dest(&deb, "target/release/secondhit");
    let config_path = asset_dest(&deb, "config/package/secondhit.toml");
    assert_eq!(binary, "/usr/bin/secondhit");
    assert_eq!(config_path, CONFIG_PATH);
    let unit = read(&Path::new(ROOT).join("config/secondhit.service"));
    // Loaded as a file: it includes /etc/secondhit/conf.d/*.toml.
    let config = Config::load(&Path::new(ROOT).join("config/package/secondhit.toml"))
        .expect("the packaged config loads");
    assert_unit_fits_config(&unit, &binary, &config_path, &config);
    assert_eq!(config.cache.dir, Path::new("/var/cache/secondhit"));
    let logrotate = read(&Path::new(ROOT).join("config/package/logrotate"));
    let pid_file = config.server.pid_file.as_ref().expect("a pid file");
    let named = format!("pid_file={}", pid_file.display());
    assert!(
        logrotate.contains(&named),
        "the logrotate stanza should signal the pid in {}: {logrotate}",
        pid_file.display()
    );
    let admin = config.server.admin_listen.expect("an admin listener");
    assert!(admin.ip().is_loopback(), "admin listener on {admin}");
}

#[test]
fn the_packages_postinst_creates_the_user_the_unit_runs_as() {
    let postinst = read(&Path::new(ROOT).join("config/package/postinst"));
    // One command a line: continuation lines joined.
    let commands = postinst.replace("\\\n", " ");
    let creates = commands.lines().filter(|line| {
        let line = line.trim();
        (line.starts_with("adduser --system") || line.starts_with("useradd --system"))
            && line.contains("secondhit")
    });
    assert!(creates.count() >= 1, "postinst:\n{postinst}");
    assert!(
        postinst.contains("#DEBHELPER#"),
        "cargo-deb adds the unit's steps there"
    );
}

/// Runs `program args` and returns its output, or `None` when it cannot be started.
fn try_run(program: &str, args: &[&str]) -> Option<Output> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()
}

/// Runs `command`, failing the test with its stderr unless it succeeds.
fn run_ok(command: &mut Command) -> Output {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Why the install test cannot run here, if it cannot.
fn missing_tools() -> Option<&'static str> {
    let works = |program: &str, args: &[&str]| {
        try_run(program, args).is_some_and(|output| output.status.success())
    };
    if !works("cargo", &["deb", "--version"]) {
        return Some("cargo-deb is not installed (cargo install cargo-deb --locked)");
    }
    if !works("dpkg-deb", &["--version"]) {
        return Some("dpkg-deb is not installed");
    }
    None
}

/// The variables cargo sets for a test it runs: a build the test starts must not see them,
/// or build scripts that watch one (ring's watches `CARGO_MANIFEST_DIR`) would rebuild
/// their crates and everything above them, here and in the next build outside the test.
const SET_FOR_TESTS: [&str; 7] = [
    "CARGO_MANIFEST_",
    "CARGO_PKG_",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
];

/// Builds the package into `out` with `config/package/build-deb.sh`; returns its path.
fn build_package(out: &Path) -> PathBuf {
    let started = Instant::now();
    let mut build = Command::new("sh");
    build
        .arg(Path::new(ROOT).join("config/package/build-deb.sh"))
        .arg("--output")
        .arg(out)
        .current_dir(ROOT);
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text == "OUT_DIR" || SET_FOR_TESTS.iter().any(|set| text.starts_with(set)) {
            build.env_remove(&name);
        }
    }
    run_ok(&mut build);
    println!("built the package in {:.0?}", started.elapsed());
    let mut debs: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("read the output directory")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "one package: {debs:?}");
    debs.remove(0)
}

/// The files (not directories) the package holds, as absolute paths.
fn package_files(deb: &Path) -> Vec<String> {
    let listing = stdout(&run_ok(Command::new("dpkg-deb").arg("--contents").arg(deb)));
    println!("{listing}");
    listing
        .lines()
        .filter(|line| !line.starts_with('d'))
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(|path| path.trim_start_matches('.').to_owned())
        .collect()
}

/// The files the package must hold (the unit's directory is found apart).
const EXPECTED_FILES: [&str; 13] = [
    "/usr/bin/secondhit",
    CONFIG_PATH,
    "/etc/logrotate.d/secondhit",
    "/usr/share/doc/secondhit/examples/secondhit.toml",
    "/usr/share/doc/secondhit/copyright",
    "/usr/share/man/man1/secondhit.1.gz",
    "/usr/share/man/man1/secondhit-serve.1.gz",
    "/usr/share/man/man1/secondhit-check-config.1.gz",
    "/usr/share/man/man5/secondhit.toml.5.gz",
    "/usr/share/bash-completion/completions/secondhit",
    "/usr/share/zsh/vendor-completions/_secondhit",
    "/usr/share/fish/vendor_completions.d/secondhit.fish",
    "/usr/share/doc/secondhit/README.md",
];

/// The config at `root/etc/...` with its absolute paths moved under `root`, and the
/// directories the unit has systemd create made there; returns the moved config's path.
fn rooted_config(root: &Path, unit_settings: &[(String, String)]) -> PathBuf {
    let under_root = |path: &Path| root.join(path.strip_prefix("/").unwrap_or(path));
    for dir in writable_dirs(unit_settings) {
        std::fs::create_dir_all(under_root(&dir)).expect("create the unit's directory");
    }
    let installed = under_root(Path::new(CONFIG_PATH));
    let mut config: toml::Table = read(&installed).parse().expect("the config is TOML");
    for (section, key) in [("cache", "dir"), ("log", "access_log")] {
        let value = config[section][key].as_str().expect("a path").to_owned();
        let moved = under_root(Path::new(&value)).display().to_string();
        config[section]
            .as_table_mut()
            .expect("a table")
            .insert(key.to_owned(), toml::Value::String(moved));
    }
    let path = root.join("rooted-secondhit.toml");
    std::fs::write(&path, config.to_string()).expect("write the moved config");
    path
}

/// The package's control files, unpacked into `dir`: the config is a conffile (an upgrade
/// keeps its edits) and `postinst` creates the user.
fn assert_control_files(deb: &Path, dir: &Path) {
    run_ok(Command::new("dpkg-deb").arg("--control").arg(deb).arg(dir));
    let conffiles = read(&dir.join("conffiles"));
    assert!(
        conffiles.lines().any(|line| line == CONFIG_PATH),
        "conffiles: {conffiles}"
    );
    let postinst = read(&dir.join("postinst"));
    assert!(
        postinst.contains("adduser --system"),
        "postinst: {postinst}"
    );
}

#[test]
#[ignore = "needs cargo-deb and dpkg-deb: cargo test -- --ignored once installed (.ci/run does)"]
fn the_debian_package_installs_a_unit_and_a_config_that_check_config_accepts() {
    if let Some(why) = missing_tools() {
        panic!("this test needs {why}");
    }
    let scratch = tempfile::tempdir().expect("temp dir");
    let deb = build_package(scratch.path());
    let files = package_files(&deb);
    for expected in EXPECTED_FILES {
        assert!(
            files.iter().any(|f| f == expected),
            "no {expected} in {files:#?}"
        );
    }
    let unit_path = files
        .iter()
        .find(|f| f.ends_with("/systemd/system/secondhit.service"))
        .expect("the package holds the unit");
    let socket = unit_path.replace(".service", ".socket");
    assert!(files.contains(&socket), "no {socket} in {files:#?}");

    assert_control_files(&deb, &scratch.path().join("control"));

    let root = scratch.path().join("root");
    run_ok(
        Command::new("dpkg-deb")
            .arg("--extract")
            .arg(&deb)
            .arg(&root),
    );
    let unit = read(&root.join(unit_path.trim_start_matches('/')));
    let config = Config::load(&root.join(CONFIG_PATH.trim_start_matches('/')))
        .expect("the installed config loads");
    assert_unit_fits_config(&unit, "/usr/bin/secondhit", CONFIG_PATH, &config);

    let binary = root.join("usr/bin/secondhit");
    let rooted = rooted_config(&root, &service_settings(&unit));
    let checked = run_ok(Command::new(&binary).arg("check-config").arg(&rooted));
    assert!(stdout(&checked).contains(": OK"), "{}", stdout(&checked));
    let version = stdout(&run_ok(Command::new(&binary).arg("--version")));
    assert!(version.contains("features: bench"), "{version}");
    let bash = stdout(&run_ok(Command::new(&binary).args(["completions", "bash"])));
    let packaged = read(&root.join("usr/share/bash-completion/completions/secondhit"));
    assert_eq!(bash, packaged, "the packaged completions are the binary's");
}

/// The argument of each `sudo apt install` line of `text`.
fn apt_install_paths(text: &str) -> Vec<String> {
    (text.lines())
        .filter_map(|line| line.trim().strip_prefix("sudo apt install "))
        .map(|rest| rest.split_whitespace().next().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn the_install_instructions_find_the_package_wherever_the_target_directory_is() {
    // cargo deb writes the package to <target directory>/debian/.
    let scratch = tempfile::tempdir().expect("temp dir");
    let elsewhere = scratch.path().join("elsewhere");
    let default = scratch.path().join("checkout");
    for dir in [&elsewhere, &default.join("target")] {
        std::fs::create_dir_all(dir.join("debian")).expect("a debian directory");
        let deb = dir.join("debian/secondhit_0.1.0-1_amd64.deb");
        std::fs::write(deb, b"").expect("a stand-in package");
    }
    for page in ["README.md", "docs/guide/install.md"] {
        let paths = apt_install_paths(&read(&Path::new(ROOT).join(page)));
        assert!(!paths.is_empty(), "{page} has no `sudo apt install` line");
        for path in paths {
            let expand = |command: &mut Command| {
                let output = run_ok(command.args(["-c", &format!("echo {path}")]));
                stdout(&output).trim().to_owned()
            };
            let with_dir = expand(
                Command::new("sh")
                    .env("CARGO_TARGET_DIR", &elsewhere)
                    .current_dir(&default),
            );
            let expected = elsewhere.join("debian/secondhit_0.1.0-1_amd64.deb");
            assert_eq!(with_dir, expected.display().to_string(), "{page}: {path}");
            let without = expand(
                Command::new("sh")
                    .env_remove("CARGO_TARGET_DIR")
                    .current_dir(&default),
            );
            let found = default.join(without.trim_start_matches("./"));
            assert!(found.is_file(), "{page}: {path} gives {without}");
        }
    }
}
