//! A `robots-guard serve` child process with JSON logs, for tests of the
//! real binary: its stderr lines arrive on a channel and can be waited for.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_robots-guard");

/// A `serve` child whose stderr lines arrive on a channel.
pub struct Served {
    /// The process.
    pub child: Child,
    /// Its stderr, a line at a time.
    pub lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Served {
    /// Starts `robots-guard serve --config CONFIG` (set `log.format = "json"`).
    pub fn start(config: &Path) -> Served {
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--config")
            .arg(config)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start robots-guard serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Served {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The next stderr line (as JSON) for which `pick` is true.
    pub fn wait_for(
        &mut self,
        what: &str,
        pick: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what} in stderr:\n{}", self.seen.join("\n")));
            self.seen.push(line.clone());
            let value: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stderr line is not JSON ({e}): {line}"));
            if pick(&value) {
                return value;
            }
        }
    }

    /// Sends signal `name` (`HUP`, `TERM`).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name}");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A JSON log line's message.
pub fn message(v: &serde_json::Value) -> &str {
    v["message"].as_str().unwrap_or("")
}
