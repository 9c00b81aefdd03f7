//! The faults the soak injects while traffic runs, one every few seconds in turn: a
//! reload, a tag purge (hard, after the origin publishes a new version), a prefix purge
//! (soft), a hung origin, an origin that goes down, a disk filled to `cache.min_free`
//! (when the cache has a filesystem of its own), and a SIGKILL of the proxy with a
//! restart on the same cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clients::Tally;
use crate::content::GROUPS;
use crate::origin::{Mode, Origin};
use crate::proxy::Proxy;

/// A fault the soak injects.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    Reload,
    TagPurge,
    SoftPrefixPurge,
    OriginHangs,
    OriginDown,
    DiskFull,
    KillAndRestart,
}

impl Fault {
    const ROTATION: [Fault; 7] = [
        Fault::Reload,
        Fault::TagPurge,
        Fault::OriginHangs,
        Fault::SoftPrefixPurge,
        Fault::DiskFull,
        Fault::OriginDown,
        Fault::KillAndRestart,
    ];

    /// The fault's name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Fault::Reload => "reload (SIGHUP)",
            Fault::TagPurge => "tag purge, new version",
            Fault::SoftPrefixPurge => "soft prefix purge",
            Fault::OriginHangs => "origin hangs 4 s",
            Fault::OriginDown => "origin down 4 s",
            Fault::DiskFull => "disk filled to min_free 5 s",
            Fault::KillAndRestart => "kill -9 and restart",
        }
    }
}

/// Where the disk fault writes its filler, when the cache has a filesystem to itself.
pub(crate) struct Disk {
    /// The file that takes the free space.
    pub filler: PathBuf,
    /// `cache.min_free` in bytes.
    pub min_free: u64,
}

/// Injects faults every `every` until `until`, counting each in `tally`; runs `on_sample`
/// between them. Returns an error only when the proxy cannot be brought back.
pub(crate) async fn run(
    proxy: &mut Proxy,
    origin: &Arc<Origin>,
    disk: Option<&Disk>,
    tally: &Tally,
    (every, until): (Duration, Instant),
    mut on_sample: impl FnMut(&Proxy),
) -> std::io::Result<()> {
    let admin = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build();
    let admin = admin.map_err(std::io::Error::other)?;
    let mut turn = 0u64;
    while Instant::now() + every < until {
        let fault = Fault::ROTATION[(turn % Fault::ROTATION.len() as u64) as usize];
        let group = turn % GROUPS;
        turn += 1;
        tokio::time::sleep(every).await;
        on_sample(proxy);
        match fault {
            Fault::Reload => proxy.reload()?,
            Fault::TagPurge => {
                origin.bump(group);
                purge(&admin, proxy, &[("tag", &format!("g{group}"))], tally).await;
            }
            Fault::SoftPrefixPurge => {
                let prefix = format!("http://{}/o/{}", proxy.addr, group % 10);
                purge(&admin, proxy, &[("prefix", &prefix), ("soft", "1")], tally).await;
            }
            Fault::OriginHangs | Fault::OriginDown => {
                let mode = if matches!(fault, Fault::OriginHangs) {
                    Mode::Hung
                } else {
                    Mode::Down
                };
                origin.set_mode(mode);
                tokio::time::sleep(Duration::from_secs(4)).await;
                origin.set_mode(Mode::Serving);
            }
            Fault::DiskFull => match disk {
                Some(disk) => fill_disk(disk, tally).await,
                None => continue,
            },
            Fault::KillAndRestart => proxy.kill_and_restart().await?,
        }
        tally.count(&format!("fault {}", fault.name()));
    }
    Ok(())
}

async fn purge(admin: &reqwest::Client, proxy: &Proxy, query: &[(&str, &str)], tally: &Tally) {
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query)
        .finish();
    let url = format!("http://{}/purge?{query}", proxy.admin);
    match admin.post(url).send().await {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => tally.count(&format!("purge answered {}", response.status().as_u16())),
        Err(_) => tally.count("purge failed"),
    }
}

/// Takes all but half of `min_free` of the cache filesystem's free space for 5 s.
async fn fill_disk(disk: &Disk, tally: &Tally) {
    let Some(dir) = disk.filler.parent() else {
        return;
    };
    let Ok(stats) = rustix::fs::statvfs(dir) else {
        tally.count("disk fault: statvfs failed");
        return;
    };
    let free = stats.f_bavail * stats.f_frsize;
    let take = free.saturating_sub(disk.min_free / 2);
    if let Err(error) = write_filler(&disk.filler, take) {
        tally.count(&format!("disk fault: filler {}", error.kind()));
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let _ = std::fs::remove_file(&disk.filler);
}

fn write_filler(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    let chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}
