//! A minimal client of a line-delimited JSON-RPC server on a child's stdio
//! (`shellvisor serve`, and `shellvisor mcp`, whose stdio transport is the
//! same framing): one blocking loop, no SDK, so what a call costs is the
//! server's share and the pipe's, not the client's.

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::process::Child;
use std::process::ChildStdin;
use std::process::ChildStdout;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;
use serde_json::json;

/// How long a stopped server gets to exit after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// A server process and the client end of its stdio.
#[derive(Debug)]
pub(crate) struct LineClient {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

fn protocol_error(what: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

impl LineClient {
    /// Starts `command` with piped stdin and stdout (stderr is discarded).
    pub(crate) fn spawn(mut command: Command) -> std::io::Result<Self> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the server's stdio is not piped"));
        };
        Ok(Self {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
            line: String::new(),
            next_id: 1,
        })
    }

    fn write(&mut self, message: &Value) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(message).map_err(protocol_error)?;
        bytes.push(b'\n');
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the client is closed"))?;
        stdin.write_all(&bytes)?;
        stdin.flush()
    }

    /// Sends a notification (no answer).
    pub(crate) fn notify(&mut self, method: &str, params: Value) -> std::io::Result<()> {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Calls `method` and returns its result; the server's notifications
    /// read meanwhile are skipped, an error answer is an error.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> std::io::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line)? == 0 {
                return Err(protocol_error(format!(
                    "the server closed its output before answering `{method}`"
                )));
            }
            let mut message: Value = serde_json::from_str(&self.line).map_err(protocol_error)?;
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(protocol_error(format!("`{method}` failed: {error}")));
            }
            return message
                .get_mut("result")
                .map(Value::take)
                .ok_or_else(|| protocol_error(format!("`{method}` answered without a result")));
        }
    }

    /// Closes the server's stdin and waits for it to exit (killing it after
    /// a grace period).
    pub(crate) fn close(mut self) -> std::io::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> std::io::Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + EXIT_GRACE;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child.kill()?;
        self.child.wait()?;
        Err(std::io::Error::other(
            "the server did not exit after its stdin closed",
        ))
    }
}

impl Drop for LineClient {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.stop();
        }
    }
}
