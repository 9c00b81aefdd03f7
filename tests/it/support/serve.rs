//! The real `secondhit serve` binary as a child process, with its JSON log on stdout.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use super::PATIENCE;

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_secondhit");

/// A running `secondhit serve` whose stdout is collected line by line.
pub(crate) struct ServeProcess {
    pub child: Child,
    /// The address from its "listening" log line.
    pub addr: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl ServeProcess {
    /// Starts `secondhit serve --config <config>` (the config must set `log.format = "json"`)
    /// and waits for it to log the address it listens on.
    pub(crate) async fn start(config: &Path) -> ServeProcess {
        let mut command = tokio::process::Command::new(BIN);
        command
            .args(["serve", "--config"])
            .arg(config)
            .stdin(Stdio::null());
        ServeProcess::start_command(command).await
    }

    /// Like [`Self::start`], with the command prepared by the caller (a wrapper, inherited
    /// sockets); its stdout is taken here.
    pub(crate) async fn start_command(mut command: tokio::process::Command) -> ServeProcess {
        let mut child = command
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start secondhit serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collected = lines.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                collected.lock().expect("log lines").push(line);
            }
        });
        let mut serve = ServeProcess {
            child,
            addr: String::new(),
            lines,
        };
        // The JSON start-up line carries the bound address: {"fields":{"message":"listening","addr":"127.0.0.1:port",...}}
        let line = serve.wait_for_log("\"listening\"").await;
        let start = line.find("\"addr\":\"").expect("addr field") + "\"addr\":\"".len();
        let end = line[start..].find('"').expect("addr end") + start;
        serve.addr = line[start..end].to_owned();
        serve
    }

    /// Waits for the first log line containing `needle` and returns it.
    pub(crate) async fn wait_for_log(&mut self, needle: &str) -> String {
        self.wait_for_log_with(0, &[needle]).await
    }

    /// How many log lines have arrived so far: a mark for [`Self::wait_for_log_with`].
    pub(crate) fn log_mark(&self) -> usize {
        self.lines.lock().expect("log lines").len()
    }

    /// How many log lines so far contain `needle`.
    pub(crate) fn log_lines_containing(&self, needle: &str) -> usize {
        let lines = self.lines.lock().expect("log lines");
        lines.iter().filter(|line| line.contains(needle)).count()
    }

    /// Waits for the first log line from line `mark` on containing every one of
    /// `needles`, and returns it.
    pub(crate) async fn wait_for_log_with(&mut self, mark: usize, needles: &[&str]) -> String {
        self.wait_for_line(mark, needles, true).await
    }

    /// Like [`Self::wait_for_log_with`], for a line that another process writes to the
    /// same output (the new process of an upgrade), whether or not this one still runs.
    pub(crate) async fn wait_for_successor_log(&mut self, mark: usize, needles: &[&str]) -> String {
        self.wait_for_line(mark, needles, false).await
    }

    async fn wait_for_line(&mut self, mark: usize, needles: &[&str], alive: bool) -> String {
        let lines = &self.lines;
        let child = &mut self.child;
        super::eventually(
            || {
                let log = lines.lock().expect("log lines").join("\n");
                format!("secondhit never logged {needles:?}; its log:\n{log}")
            },
            async || {
                let found = lines
                    .lock()
                    .expect("log lines")
                    .iter()
                    .skip(mark)
                    .find(|line| needles.iter().all(|needle| line.contains(needle)))
                    .cloned();
                if found.is_none()
                    && alive
                    && let Ok(Some(status)) = child.try_wait()
                {
                    panic!("secondhit exited ({status}) before logging {needles:?}");
                }
                found
            },
        )
        .await
    }

    /// Sends `signal` (a name `kill` knows: "HUP", "TERM", "USR1") to the process.
    pub(crate) fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("a running child").to_string();
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Sends SIGTERM and waits for the process to exit; returns its status.
    pub(crate) async fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("exits after SIGTERM")
            .expect("wait")
    }

    /// Kills the process with SIGKILL, as a crash or the OOM killer would, and reaps it.
    pub(crate) async fn kill(mut self) {
        self.child.start_kill().expect("SIGKILL");
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("dies after SIGKILL")
            .expect("wait");
    }
}
