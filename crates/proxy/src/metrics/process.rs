//! The process's own figures for `/metrics`, read from `/proc` at scrape time (procfs):
//! the `process_*` metrics every Prometheus client library exports under these names, so
//! dashboards made for them work unchanged.

/// What a scrape reports about the process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ProcessStats {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident memory, in bytes.
    pub resident_bytes: u64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on them (`None`: unlimited).
    pub max_fds: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

/// The process's figures now; `None` where `/proc` cannot be read (it always can on Linux,
/// the only system secondhit runs on, unless it is hidden from the process).
pub(super) fn read() -> Option<ProcessStats> {
    let me = procfs::process::Process::myself().ok()?;
    let stat = me.stat().ok()?;
    let ticks = procfs::ticks_per_second().max(1) as f64;
    let boot = procfs::boot_time_secs().ok()? as f64;
    let max_fds = me
        .limits()
        .ok()
        .and_then(|limits| match limits.max_open_files.soft_limit {
            procfs::process::LimitValue::Value(value) => Some(value),
            procfs::process::LimitValue::Unlimited => None,
        });
    Some(ProcessStats {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_bytes: stat.rss.saturating_mul(procfs::page_size()),
        open_fds: me.fd_count().ok()? as u64,
        max_fds,
        start_time_seconds: boot + stat.starttime as f64 / ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figures_describe_this_process() {
        let files: Vec<std::fs::File> = (0..50)
            .map(|_| std::fs::File::open("/proc/self/stat").expect("open a file"))
            .collect();
        // Burn a little CPU, so the counter has something to count.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let stats = read().expect("/proc is readable");
        assert!(stats.open_fds >= files.len() as u64, "{stats:?}");
        assert!(
            stats.max_fds.is_none_or(|max| max >= stats.open_fds),
            "{stats:?}"
        );
        assert!(stats.cpu_seconds > 0.0, "{stats:?}");
        assert!(stats.resident_bytes > 1024 * 1024, "{stats:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        // This test process started within the last day, not in the future.
        assert!(
            stats.start_time_seconds <= now + 1.0 && stats.start_time_seconds > now - 86_400.0,
            "{stats:?} at {now}"
        );
    }
}
