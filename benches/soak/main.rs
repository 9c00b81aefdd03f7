//! The soak under faults: CDN-like traffic through the release binary for many minutes
//! while it is reloaded, purged, killed and restarted, its origin hangs and goes down and
//! its disk fills, with every response checked (`clients`). A benchmark target, never a
//! test: `cargo bench --bench soak -- --minutes 25` (CI runs `--minutes 2`).
//!
//! Prints a table of requests by outcome, faults injected, and the proxy's resident
//! memory and open files over time; exits non-zero on any violation (a body that is not
//! the origin's bytes for what it claims, another URL's or variant's or client's
//! response, a `Set-Cookie` the origin sent to someone else).

mod clients;
mod content;
mod faults;
mod origin;
mod proxy;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clients::Tally;
use faults::Disk;
use origin::Origin;
use proxy::{Proxy, Sample};

/// The soak's settings, from the command line.
struct Args {
    minutes: f64,
    clients: usize,
    report: Option<PathBuf>,
}

fn args() -> Args {
    let mut args = Args {
        minutes: 25.0,
        clients: 16,
        report: None,
    };
    let mut given = std::env::args().skip(1);
    // `cargo bench` adds `--bench`; anything else unknown is ignored likewise.
    while let Some(arg) = given.next() {
        match arg.as_str() {
            "--minutes" => {
                args.minutes = given
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(args.minutes)
            }
            "--clients" => {
                args.clients = given
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(args.clients)
            }
            "--report" => args.report = given.next().map(PathBuf::from),
            _ => {}
        }
    }
    args
}

/// A filesystem of the cache's own (a 512 MiB tmpfs), so that filling it to `min_free`
/// touches nothing else; `None`, with the reason printed, where mounting is not allowed.
fn own_filesystem(dir: &std::path::Path) -> Option<()> {
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512m", "tmpfs"])
        .arg(dir)
        .status();
    match mounted {
        Ok(status) if status.success() => Some(()),
        _ => {
            println!(
                "soak: cannot mount a tmpfs for the cache (needs root): the disk-full fault is skipped"
            );
            None
        }
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = args();
    match soak(&args).await {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(error) => {
            eprintln!("soak: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn soak(args: &Args) -> std::io::Result<bool> {
    let temp = tempfile::tempdir()?;
    let cache_fs = temp.path().join("fs");
    std::fs::create_dir_all(&cache_fs)?;
    let mounted = own_filesystem(&cache_fs);
    const MIN_FREE: u64 = 64 << 20;
    let disk = mounted.map(|()| Disk {
        filler: cache_fs.join("filler"),
        min_free: MIN_FREE,
    });
    let origin = Origin::start().await?;
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_secondhit"));
    let mut proxy = Proxy::new(
        &binary,
        temp.path(),
        &cache_fs.join("cache"),
        origin.addr,
        MIN_FREE,
    )?;
    proxy.start().await?;
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(args.minutes * 60.0);
    let tally = Arc::new(Tally::default());
    let base = format!("http://{}", proxy.addr);
    let clients = start_clients(args.clients, &base, &origin, &tally, until);
    let mut samples: Vec<(u64, u32, Sample)> = Vec::new();
    let sample = |proxy: &Proxy| {
        if let (Some(s), Some(pid)) = (proxy.sample(), proxy.pid()) {
            samples.push((started.elapsed().as_secs(), pid, s));
        }
    };
    let faulted = faults::run(
        &mut proxy,
        &origin,
        disk.as_ref(),
        &tally,
        (Duration::from_secs(6), until),
        sample,
    )
    .await;
    for client in clients {
        let _ = client.await;
    }
    proxy.stop();
    if mounted.is_some() {
        let _ = std::process::Command::new("umount").arg(&cache_fs).status();
    }
    faulted?;
    let table = report(args, &tally, &samples, started.elapsed());
    println!("{table}");
    if let Some(path) = &args.report {
        std::fs::write(path, &table)?;
    }
    let violations = tally.violations();
    for violation in &violations {
        eprintln!("soak violation: {violation}");
    }
    if !violations.is_empty() {
        eprintln!("soak: proxy log at {}", proxy.log().display());
        // Keep the directory for a look at the log.
        let _ = temp.keep();
    }
    Ok(violations.is_empty())
}

/// Starts `count` clients of `base` until `until`, every other one on HTTP/2.
fn start_clients(
    count: usize,
    base: &str,
    origin: &Arc<Origin>,
    tally: &Arc<Tally>,
    until: Instant,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..count)
        .map(|id| {
            tokio::spawn(clients::run(
                id,
                id % 2 == 1,
                base.to_owned(),
                Arc::clone(origin),
                Arc::clone(tally),
                until,
            ))
        })
        .collect()
}

/// The result table (Markdown), with memory and open files per process.
fn report(args: &Args, tally: &Tally, samples: &[(u64, u32, Sample)], took: Duration) -> String {
    let mut out = format!(
        "soak: {:.1} min, {} clients (half h2), {:.0} s run\n\n| outcome | count |\n|---|---|\n",
        args.minutes,
        args.clients,
        took.as_secs_f64()
    );
    for (outcome, count) in tally.counts() {
        out.push_str(&format!("| {outcome} | {count} |\n"));
    }
    out.push_str("\n| proxy process | samples | RSS MiB first / max / last | open fds first / max / last |\n|---|---|---|---|\n");
    let mut pids: Vec<u32> = samples.iter().map(|(_, pid, _)| *pid).collect();
    pids.dedup();
    for (i, pid) in pids.iter().enumerate() {
        let own: Vec<Sample> = samples
            .iter()
            .filter(|(_, p, _)| p == pid)
            .map(|(_, _, s)| *s)
            .collect();
        let (Some(first), Some(last)) = (own.first(), own.last()) else {
            continue;
        };
        let max_rss = own.iter().map(|s| s.rss_kib).max().unwrap_or(0);
        let max_fds = own.iter().map(|s| s.fds).max().unwrap_or(0);
        let mib = |kib: u64| kib as f64 / 1024.0;
        out.push_str(&format!(
            "| #{} | {} | {:.0} / {:.0} / {:.0} | {} / {} / {} |\n",
            i + 1,
            own.len(),
            mib(first.rss_kib),
            mib(max_rss),
            mib(last.rss_kib),
            first.fds,
            max_fds,
            last.fds
        ));
    }
    out
}
