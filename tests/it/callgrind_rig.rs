//! `benches/callgrind.sh`: instructions per request through this build, per case, under
//! callgrind in front of an nginx origin. Needs valgrind and nginx: `#[ignore]`d (the
//! runner lists it, with why) and run with `--ignored` where they are, as `.ci/run` does.

use std::path::Path;
use std::process::{Command, Stdio};

use super::support::shell::{on_path, require};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const CASES: [&str; 5] = [
    "pass-1k",
    "pass-1k-fields",
    "first-sight-1k",
    "miss-1k",
    "hit-1k",
];

#[test]
#[ignore = "needs valgrind and nginx: cargo test -- --ignored once installed (.ci/run does)"]
fn the_callgrind_rig_counts_each_cases_instructions_per_request() {
    for tool in ["valgrind", "callgrind_control", "nginx"] {
        require(
            tool,
            on_path(tool),
            "Debian: apt-get install valgrind nginx",
        );
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let output = Command::new("bash")
        .arg(Path::new(ROOT).join("benches/callgrind.sh"))
        .env("SECONDHIT_BIN", env!("CARGO_BIN_EXE_secondhit"))
        .env("CASES", CASES.join(" "))
        // A few requests each: this checks the rig, it measures nothing.
        .env("WARM", "2")
        .env("REQUESTS", "5")
        .env("OUT", dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run callgrind.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "callgrind.sh failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let counts: Vec<(&str, u64)> = (stdout.lines().skip(1))
        .filter_map(|line| {
            let (case, count) = line.split_once(' ')?;
            Some((case, count.trim().parse().ok()?))
        })
        .collect();
    assert_eq!(
        counts.iter().map(|(case, _)| *case).collect::<Vec<_>>(),
        CASES,
        "one line per case, in order: {stdout}"
    );
    let count = |case: &str| {
        counts
            .iter()
            .find(|(c, _)| *c == case)
            .map_or(0, |(_, n)| *n)
    };
    // A request through the proxy is thousands of instructions; a stored miss does all a
    // pass-through does and writes an entry, and a hit neither reaches the origin nor
    // writes. Not hit against pass-through: over five requests of this debug build a
    // hit's first reads of the store weigh about what a pass-through's exchange does
    // (`benches/RESULTS.md`, "the callgrind rig's test"), so their order says nothing.
    assert!(count("pass-1k") > 5_000, "{stdout}");
    assert!(count("miss-1k") > count("pass-1k"), "{stdout}");
    assert!(count("hit-1k") < count("miss-1k"), "{stdout}");
    assert!(count("pass-1k-fields") > count("pass-1k"), "{stdout}");
    for case in CASES {
        let kept = dir.path().join(format!("{case}.callgrind"));
        assert!(
            kept.is_file(),
            "{} kept for callgrind_annotate",
            kept.display()
        );
    }
}
