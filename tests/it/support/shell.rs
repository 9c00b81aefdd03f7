//! Running a documented walk-through's commands as written: `sh -c`, and whether a tool
//! they need is installed.

use std::process::Stdio;

use super::PATIENCE;

/// Fails the test, naming `tool` and how to install it, where it is missing: a test that
/// needs a tool and runs without it says so as a failure, never as a pass.
pub(crate) fn require(tool: &str, present: bool, install: &str) {
    assert!(
        present,
        "this test needs {tool}, which is not installed ({install})"
    );
}

/// Whether an executable `tool` is in a directory of `PATH`.
pub(crate) fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// Runs `script` with `sh -c` and no standard input and returns its standard output;
/// fails the test on an error or after [`PATIENCE`].
pub(crate) async fn sh(script: &str) -> String {
    let output = tokio::time::timeout(
        PATIENCE,
        tokio::process::Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("`{script}` took over {PATIENCE:?}"))
    .expect("run sh");
    assert!(
        output.status.success(),
        "`{script}` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
