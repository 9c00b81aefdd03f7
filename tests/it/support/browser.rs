//! Headless Chromium for the tests of pages: the admin page and the simulator's report.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The longest one Chromium run may take before the test fails (it is killed on drop).
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

/// The first of the usual Chromium binaries on `PATH`.
pub(crate) fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Runs headless Chromium on `url` with `extra` arguments (a profile in `profile`) and
/// returns its standard output; fails the test on a timeout or an error exit.
pub(crate) async fn chromium(binary: &Path, profile: &Path, url: &str, extra: &[String]) -> String {
    let mut command = tokio::process::Command::new(binary);
    command
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(BROWSER_TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| panic!("{} took over {BROWSER_TIMEOUT:?}", binary.display()))
        .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("a UTF-8 DOM")
}

/// Takes a screenshot of `url` at `width`×`height` into `png` (a profile in `profile`), and
/// checks that a PNG was written.
pub(crate) async fn screenshot(
    binary: &Path,
    profile: &Path,
    url: &str,
    png: &Path,
    (width, height): (u32, u32),
) {
    let extra = [
        format!("--screenshot={}", png.display()),
        format!("--window-size={width},{height}"),
    ];
    chromium(binary, profile, url, &extra).await;
    let written = std::fs::read(png).expect("the screenshot was written");
    assert!(written.starts_with(b"\x89PNG"), "not a PNG");
}

/// The Chromium binary for a browser test; fails the test, naming what to install, where
/// there is none.
pub(crate) fn required_chromium() -> PathBuf {
    let browser = find_chromium();
    let install =
        "no chromium, chromium-browser or google-chrome on PATH: apt-get install chromium";
    crate::support::shell::require("chromium", browser.is_some(), install);
    browser.expect("required above")
}

/// Keeps `dir` (not removed when the test ends) and prints where `what`'s screenshot and
/// DOM, the files `png` and `dom` in it, can be opened.
pub(crate) fn keep_for_viewing(dir: tempfile::TempDir, what: &str, png: &str, dom: &str) {
    let kept = dir.keep();
    eprintln!(
        "{what}: screenshot {} (DOM beside it: {})",
        kept.join(png).display(),
        kept.join(dom).display()
    );
}
