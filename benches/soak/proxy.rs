//! The proxy under soak: the release binary in a process of its own, so that it can be
//! killed with SIGKILL, restarted on the same cache directory and reloaded with SIGHUP,
//! and its memory and open files read from /proc.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One sample of the proxy process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    /// Resident memory in KiB.
    pub rss_kib: u64,
    /// Open file descriptors.
    pub fds: u64,
}

/// The proxy process and what it is started with.
pub(crate) struct Proxy {
    binary: PathBuf,
    config: PathBuf,
    log: PathBuf,
    /// Where clients reach it.
    pub addr: SocketAddr,
    /// Its admin listener.
    pub admin: SocketAddr,
    origin: SocketAddr,
    cache_dir: PathBuf,
    min_free: u64,
    child: Option<Child>,
    reloads: u64,
}

/// A port on 127.0.0.1 free a moment ago.
fn free_port() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}

impl Proxy {
    /// A proxy in `dir` (config and log there, cache in `cache_dir`) in front of `origin`.
    pub(crate) fn new(
        binary: &Path,
        dir: &Path,
        cache_dir: &Path,
        origin: SocketAddr,
        min_free: u64,
    ) -> std::io::Result<Proxy> {
        Ok(Proxy {
            binary: binary.to_path_buf(),
            config: dir.join("soak.toml"),
            log: dir.join("proxy.log"),
            addr: free_port()?,
            admin: free_port()?,
            origin,
            cache_dir: cache_dir.to_path_buf(),
            min_free,
            child: None,
            reloads: 0,
        })
    }

    fn write_config(&self) -> std::io::Result<()> {
        // Reloads alternate a key a reload applies, so each one changes something.
        let unreachable = if self.reloads.is_multiple_of(2) {
            "30s"
        } else {
            "0s"
        };
        let text = format!(
            "[server]\nlisten = \"{addr}\"\nadmin_listen = \"{admin}\"\nshutdown_timeout = \"2s\"\n\
             send_timeout = \"10s\"\n\n\
             [origin]\nurl = \"http://{origin}\"\nconnect_timeout = \"1s\"\nread_timeout = \"2s\"\n\
             queue_timeout = \"2s\"\n\n\
             [cache]\ndir = \"{dir}\"\nmax_size = \"192MiB\"\nmin_free = \"{min_free}\"\n\
             fsync = \"1s\"\nmemory_size = \"16MiB\"\ncollapse_timeout = \"2s\"\n\
             stale_if_unreachable = \"{unreachable}\"\n\n\
             [admission]\npolicy = \"second-hit\"\nexpected_urls = 100000\n\n\
             [log]\nlevel = \"warn\"\n\n[tags]\nheader = \"Surrogate-Key\"\n",
            addr = self.addr,
            admin = self.admin,
            origin = self.origin,
            dir = self.cache_dir.display(),
            min_free = self.min_free,
        );
        std::fs::write(&self.config, text)
    }

    /// Starts the process and waits until it accepts connections.
    pub(crate) async fn start(&mut self) -> std::io::Result<()> {
        self.write_config()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.binary)
            .args(["serve", "--config"])
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(std::io::Error::other(format!(
                    "the proxy exited at start ({status}); see {}",
                    self.log.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(std::io::Error::other(
            "the proxy did not listen within 30 s",
        ))
    }

    /// Kills the process with SIGKILL and starts it again on the same cache.
    pub(crate) async fn kill_and_restart(&mut self) -> std::io::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        self.start().await
    }

    /// Rewrites the config (one key changed) and sends SIGHUP.
    pub(crate) fn reload(&mut self) -> std::io::Result<()> {
        self.reloads += 1;
        self.write_config()?;
        let pid = self
            .pid()
            .ok_or_else(|| std::io::Error::other("no proxy process"))?;
        let pid = rustix::process::Pid::from_raw(pid as i32)
            .ok_or_else(|| std::io::Error::other("pid 0"))?;
        rustix::process::kill_process(pid, rustix::process::Signal::HUP)?;
        Ok(())
    }

    /// The process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Its resident memory and open files now.
    pub(crate) fn sample(&self) -> Option<Sample> {
        let pid = self.pid()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let rss_kib = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
        Some(Sample { rss_kib, fds })
    }

    /// Stops the process (SIGKILL: nothing is left to flush that a restart needs).
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The log file the process writes.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}
