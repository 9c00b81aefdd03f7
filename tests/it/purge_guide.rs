//! `docs/guide/purge.md`'s walk-through, run as written: the commands of the indented
//! block under "## Walk-through" run with `sh` against a proxy started by the test (its
//! addresses replace the page's `127.0.0.1:8080` and `127.0.0.1:9090`) in front of an
//! origin that serves the page's three tagged pages, and each command's output must be
//! the one shown. Before each command the test waits until every fill an earlier output
//! called `stored` has committed, as a person typing the commands does without noticing. It needs `curl`, as the page does;
//! without it, it fails saying so.

use secondhit_proxy::config::AdmissionPolicy;

use crate::support::shell::{on_path, sh};
use crate::support::{Reply, TestOrigin, TestProxy};

/// The guide's walk-through: each command with the output lines shown under it.
fn session() -> Vec<(String, Vec<String>)> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide/purge.md"))
        .expect("read docs/guide/purge.md");
    let section = page
        .split("\n## Walk-through\n")
        .nth(1)
        .expect("the guide has a Walk-through section");
    let mut session: Vec<(String, Vec<String>)> = Vec::new();
    let block = section
        .lines()
        .skip_while(|line| !line.starts_with("    "))
        .take_while(|line| line.starts_with("    "));
    for line in block.map(str::trim) {
        match line.strip_prefix("$ ") {
            Some(command) => session.push((command.to_owned(), Vec::new())),
            None => session
                .last_mut()
                .expect("output before any command")
                .1
                .push(line.to_owned()),
        }
    }
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purge_guide_walk_through_works_as_written() {
    crate::support::shell::require("curl", on_path("curl"), "apt-get install curl");
    // The page's origin: three pages of one article, validated, tagged `article-1`.
    let origin = TestOrigin::start_conditional("\"v1\"", |head| {
        let body = format!("{}\n", head.uri.path()).into_bytes();
        Reply::ok("max-age=3600", body).header("surrogate-key", "article-1")
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let admin = proxy.admin_url("");
    let admin = admin.trim_start_matches("http://");
    let moved = |text: &str| {
        text.replace("127.0.0.1:8080", &proxy.addr.to_string())
            .replace("127.0.0.1:9090", admin)
    };
    let session = session();
    assert!(
        session.len() >= 8,
        "the walk-through is shorter than expected: {session:#?}"
    );
    // Definitions (commands with no output shown) run before every later command.
    let mut definitions = String::new();
    // Fills the outputs so far said were stored.
    let mut stored = 0;
    for (command, shown) in &session {
        let script = moved(command);
        if shown.is_empty() {
            definitions.push_str(&script);
            definitions.push('\n');
            continue;
        }
        proxy.wait_committed(stored).await;
        let output = sh(&format!("{definitions}{script}")).await;
        let seen: Vec<&str> = output.lines().collect();
        let shown: Vec<String> = shown.iter().map(|line| moved(line)).collect();
        assert_eq!(seen, shown, "`{command}`");
        stored += seen
            .iter()
            .filter(|line| line.ends_with("; stored"))
            .count() as u64;
    }
    assert_eq!(
        origin.count("/article-1/page-1"),
        3,
        "two fetches and one revalidation"
    );
    proxy.stop().await;
}
