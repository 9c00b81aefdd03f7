//! Which build is running: the binary names it once at start ([`set`]), and `/metrics`
//! shows it as `secondhit_build_info`, so a dashboard can tell which build each node runs.

use std::sync::OnceLock;

/// The version, commit and features of the running binary (as `--version` names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// The package version.
    pub version: &'static str,
    /// The git commit the binary was built from, or "unknown".
    pub commit: &'static str,
    /// The cargo features built in, comma-separated, or "none".
    pub features: &'static str,
}

static BUILD: OnceLock<BuildInfo> = OnceLock::new();

/// Names the running build; the first call wins (a process has one build).
pub fn set(info: BuildInfo) {
    // A second call names the same build: nothing to do.
    let _ = BUILD.set(info);
}

/// The running build, or this library's version with "unknown" commit and features when no
/// binary named it.
pub(crate) fn get() -> BuildInfo {
    *BUILD.get_or_init(|| BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        commit: "unknown",
        features: "unknown",
    })
}
