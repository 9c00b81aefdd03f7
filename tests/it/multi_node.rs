//! Several nodes behind a hashing load balancer: three proxies on loopback, and nginx in
//! front of them running the shipped `config/nginx-balancer.conf` (its node addresses and
//! port replaced). Each URL must live on exactly one node: stored there once, and a hit
//! there on every later request.
//!
//! Needs `nginx` (`.ci/run` installs it); without it the test says so and returns.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use secondhit_proxy::config::AdmissionPolicy;
use tokio::process::{Child, Command};

use crate::support::{Reply, TestOrigin, TestProxy, get};

/// The shipped example.
const EXAMPLE: &str = include_str!("../../config/nginx-balancer.conf");

/// URLs in the workload; each is requested [`ROUNDS`] times.
const URLS: usize = 50;
const ROUNDS: usize = 3;

/// `nginx` on PATH, or in the sbin directories a non-root PATH may lack.
fn find_nginx() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join("nginx"))
        .find(|candidate| candidate.is_file())
}

/// A free port on 127.0.0.1 (bound and released; nginx binds it right after).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("bound address").port()
}

/// The shipped example with the nodes' addresses and the listen port replaced, inside a
/// main config that keeps nginx in the foreground, in one process, with every path in `dir`.
fn nginx_conf(dir: &Path, port: u16, nodes: &[SocketAddr]) -> String {
    let example_nodes = ["10.0.0.11:8080", "10.0.0.12:8080", "10.0.0.13:8080"];
    assert_eq!(nodes.len(), example_nodes.len());
    let mut balancer = EXAMPLE.replace("listen 80;", &format!("listen 127.0.0.1:{port};"));
    for (example, node) in example_nodes.iter().zip(nodes) {
        assert!(balancer.contains(example), "the example names {example}");
        balancer = balancer.replace(example, &node.to_string());
    }
    let d = dir.display();
    // One process (`master_process off`): no workers that would switch to another user when
    // run as root, and nothing left behind when the test kills it.
    format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n\
         access_log off;\n\
         client_body_temp_path {d}/client_body;\nproxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\nuwsgi_temp_path {d}/uwsgi;\nscgi_temp_path {d}/scgi;\n\
         {balancer}\n}}\n"
    )
}

/// Starts nginx with `conf` and waits until it accepts connections on `port`.
async fn start_nginx(nginx: &Path, dir: &Path, conf: &str, port: u16) -> Child {
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).expect("write nginx.conf");
    let mut child = Command::new(nginx)
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start nginx");
    crate::support::eventually(
        || "nginx never listened".into(),
        async || {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Some(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
                panic!("nginx exited ({status}): {log}");
            }
            None
        },
    )
    .await;
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx: cargo test -- --ignored once installed (.ci/run does)"]
async fn a_hashing_balancer_keeps_each_url_on_one_node() {
    let nginx = find_nginx();
    let install = "not on PATH nor in /usr/sbin: apt-get install nginx";
    crate::support::shell::require("nginx", nginx.is_some(), install);
    let Some(nginx) = nginx else { return };
    let origin =
        TestOrigin::start(|head| Reply::ok("max-age=600", head.uri.path().as_bytes().to_vec()))
            .await;
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let node = TestProxy::start(origin.addr, |c| {
            c.admission.policy = AdmissionPolicy::Always;
        })
        .await;
        nodes.push(node);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    let mut nginx = start_nginx(
        &nginx,
        dir.path(),
        &nginx_conf(dir.path(), port, &addrs),
        port,
    )
    .await;

    let url = |i: usize| format!("http://127.0.0.1:{port}/object-{i}?v=1");
    for i in 0..URLS {
        let seen = get(&url(i)).await;
        assert_eq!(seen.status, 200, "{}", url(i));
        assert!(seen.cache.stored, "{}: {:?}", url(i), seen.cache);
    }
    // Every first request was stored by the node it reached; wait for the fills to commit.
    let committed = || -> u64 { nodes.iter().map(|n| n.store.stats().committed_fills).sum() };
    crate::support::wait_until(
        || format!("{} of {URLS} fills committed", committed()),
        || committed() >= URLS as u64,
    )
    .await;
    // Every later request reaches the same node: a hit, never a second copy.
    for _ in 1..ROUNDS {
        for i in 0..URLS {
            let seen = get(&url(i)).await;
            assert!(
                seen.cache.hit,
                "{} went elsewhere: {:?}",
                url(i),
                seen.cache
            );
            assert_eq!(seen.body, format!("/object-{i}").into_bytes());
        }
    }
    let per_node: Vec<usize> = nodes.iter().map(|n| n.entry_files().len()).collect();
    eprintln!("objects per node: {per_node:?}");
    assert_eq!(per_node.iter().sum::<usize>(), URLS, "one copy of each URL");
    assert!(
        per_node.iter().all(|&n| n > 0),
        "the hash spreads the URLs over every node: {per_node:?}"
    );
    assert_eq!(committed(), URLS as u64);
    for i in 0..URLS {
        assert_eq!(origin.count(&format!("/object-{i}?v=1")), 1, "fetched once");
    }

    nginx.kill().await.expect("stop nginx");
    for node in nodes {
        node.stop().await;
    }
}
