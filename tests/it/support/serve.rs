//! The real `secondhit serve` binary as a child process, with its JSON log on stdout.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use super::PATIENCE;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_secondhit");

/// A running `secondhit serve` whose stdout is collected line by line.
pub struct ServeProcess {
    pub child: Child,
    /// The address from its "listening" log line.
    pub addr: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl ServeProcess {
    /// Starts `secondhit serve --config <config>` (the config must set `log.format = "json"`)
    /// and waits for it to log the address it listens on.
    pub async fn start(config: &Path) -> ServeProcess {
        let mut child = tokio::process::Command::new(BIN)
            .args(["serve", "--config"])
            .arg(config)
            .stdin(Stdio::null())
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
    pub async fn wait_for_log(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let found = self
                .lines
                .lock()
                .expect("log lines")
                .iter()
                .find(|line| line.contains(needle))
                .cloned();
            if let Some(line) = found {
                return line;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("secondhit exited ({status}) before logging {needle:?}");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "secondhit never logged {needle:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Kills the process with SIGKILL, as a crash or the OOM killer would, and reaps it.
    pub async fn kill(mut self) {
        self.child.start_kill().expect("SIGKILL");
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("dies after SIGKILL")
            .expect("wait");
    }
}
