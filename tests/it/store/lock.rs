//! The directory lock: a second process on the same cache directory exits naming the
//! holder.

use super::common::*;
use crate::support::serve::{BIN, ServeProcess};
use crate::support::{PATIENCE, send_until_hit};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_serve_on_the_same_directory_exits_naming_the_lock_holder() {
    let origin = versioned_origin().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let first_config = serve_config(dir.path(), "first", &origin, "");
    let first = ServeProcess::start(&first_config).await;
    let pid = first.child.id().expect("pid");

    let second_config = serve_config(dir.path(), "second", &origin, "lock_timeout = \"300ms\"");
    let output = tokio::time::timeout(
        PATIENCE,
        tokio::process::Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&second_config)
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("the second serve gives up")
    .expect("run the second serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let cache_dir = dir.path().join("cache");
    for needed in [
        cache_dir.display().to_string(),
        format!("pid {pid}"),
        "secondhit.lock".to_owned(),
        "cache.lock_timeout".to_owned(),
    ] {
        assert!(
            stderr.contains(&needed),
            "{needed:?} missing from: {stderr}"
        );
    }

    let b = format!("http://{}", first.addr);
    let seen = fetch(&b, "/still-serving-100").await;
    assert_eq!(seen.status, 200);
    assert!(seen.cache.stored);
    send_until_hit(|| request(&b, "/still-serving-100")).await;
    first.kill().await;
}
