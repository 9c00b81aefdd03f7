//! Helpers shared by the store scenarios: the versioned origin, requests with the fixed
//! `Host`, and config for proxies and for the binary.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use secondhit_proxy::config::AdmissionPolicy;

use crate::support::{
    Reply, ReplyBody, Seen, TestOrigin, TestProxy, body_bytes, client, files_under, send,
};

/// The `Host` of every request, and so the authority of every key.
pub(super) const HOST: &str = "cache.test";

/// The body the origin sends for `path` the `version`-th time it is asked: its size is the
/// number after the path's last `-`, and every version differs.
pub(super) fn object(path: &str, version: usize) -> Vec<u8> {
    let size: usize = path
        .rsplit('-')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let mut body = format!("{path} v{version} ").into_bytes();
    let seed = (version as u8).wrapping_mul(17) ^ path.len() as u8;
    body.extend(body_bytes(size.saturating_sub(body.len()), seed));
    body
}

/// An origin serving `object(path, n)` with `max-age=3600` on the n-th request for a path;
/// paths starting with `/stall` send part of their body and then nothing.
pub(super) async fn versioned_origin() -> TestOrigin {
    let versions: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    TestOrigin::start(move |head| {
        let path = head.uri.path().to_owned();
        if path.starts_with("/stall") {
            return Reply {
                body: ReplyBody::Stall {
                    declared: 100_000,
                    sent: body_bytes(10_000, 1),
                },
                ..Reply::ok("max-age=3600", Vec::new())
            };
        }
        let mut versions = versions.lock().expect("versions");
        let version = versions.entry(path.clone()).or_insert(0);
        *version += 1;
        Reply::ok("max-age=3600", object(&path, *version))
    })
    .await
}

/// GET `base` + `path` with the fixed test `Host`.
pub(super) fn request(base: &str, path: &str) -> reqwest::RequestBuilder {
    client().get(format!("{base}{path}")).header("host", HOST)
}

pub(super) async fn fetch(base: &str, path: &str) -> Seen {
    send(request(base, path)).await
}

pub(super) fn base(proxy: &TestProxy) -> String {
    format!("http://{}", proxy.addr)
}

/// Total bytes of the entry files under `objects/`.
pub(super) fn objects_bytes(cache_dir: &Path) -> u64 {
    files_under(&cache_dir.join("objects"))
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

pub(super) fn always(config: &mut secondhit_proxy::config::Config) {
    config.admission.policy = AdmissionPolicy::Always;
}

/// Stores `paths` through a fresh proxy on `cache_dir` and stops it.
pub(super) async fn fill_and_stop(origin: &TestOrigin, cache_dir: &Path, paths: &[String]) {
    let proxy = TestProxy::start_in(origin.addr, cache_dir, always).await;
    let b = base(&proxy);
    for path in paths {
        assert!(fetch(&b, path).await.cache.stored, "{path}");
    }
    proxy.wait_committed(paths.len() as u64).await;
    proxy.stop().await;
}

/// A config file for the binary: json logs (the harness reads them), policy always,
/// `cache.fsync` at its default.
pub(super) fn serve_config(dir: &Path, name: &str, origin: &TestOrigin, extra: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nshutdown_timeout = \"1s\"\n\
         [origin]\nurl = \"http://{}\"\n\
         [cache]\ndir = \"{}\"\n{extra}\n\
         [admission]\npolicy = \"always\"\nseed = \"store test\"\n\
         [log]\nformat = \"json\"\naccess_log = \"off\"\n",
        origin.addr,
        dir.join("cache").display(),
    );
    std::fs::write(&path, text).expect("write config");
    path
}

/// The entry file of every stored path, found by the key each file holds.
pub(super) fn entry_files_by_path(cache_dir: &Path) -> HashMap<String, PathBuf> {
    let mut found = HashMap::new();
    for file in files_under(&cache_dir.join("objects")) {
        let bytes = std::fs::read(&file).expect("entry");
        let key_len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
        let key = String::from_utf8(bytes[64..64 + key_len].to_vec()).expect("utf-8 key");
        let path = key
            .strip_prefix(&format!("http://{HOST}"))
            .expect("test key");
        found.insert(path.to_owned(), file);
    }
    found
}
