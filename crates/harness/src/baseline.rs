//! The raw baselines every figure is compared with: a bare pipe round trip
//! to a warm bash, `bash -c` spawned per command, and a raw pipe read.

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use crate::samples::Samples;

/// A warm `bash --noprofile --norc` driven over bare pipes: write
/// `true; echo <marker>`, read up to the marker. The floor any
/// persistent-shell runtime can reach.
#[derive(Debug)]
pub struct BarePipe {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    line: String,
}

impl BarePipe {
    /// Starts the shell.
    ///
    /// # Errors
    /// When bash cannot be started.
    pub fn start() -> std::io::Result<Self> {
        let mut child = Command::new("bash")
            .args(["--noprofile", "--norc"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(Self {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            line: String::new(),
        })
    }

    /// `count` round trips of `true`.
    ///
    /// # Errors
    /// When the shell stops answering.
    pub fn round_trips(&mut self, count: usize) -> std::io::Result<Samples> {
        self.round_trips_of("true", count)
    }

    /// `count` round trips of `command` (one line of shell text).
    ///
    /// # Errors
    /// When the shell stops answering.
    pub fn round_trips_of(&mut self, command: &str, count: usize) -> std::io::Result<Samples> {
        let line = format!("{command}; echo __done__\n");
        let mut samples = Samples::default();
        for _ in 0..count {
            let started = Instant::now();
            self.stdin.write_all(line.as_bytes())?;
            self.stdin.flush()?;
            loop {
                self.line.clear();
                if self.stdout.read_line(&mut self.line)? == 0 {
                    return Err(std::io::Error::other("bash exited"));
                }
                if self.line == "__done__\n" {
                    break;
                }
            }
            samples.push(started.elapsed());
        }
        Ok(samples)
    }
}

impl BarePipe {
    /// Kills the shell and reaps it: the floor of letting a shell go.
    ///
    /// # Errors
    /// When the shell cannot be signalled or waited for.
    pub fn close(mut self) -> std::io::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for BarePipe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bash -c true` spawned and waited for, per command: what runtimes without a
/// persistent shell pay.
///
/// # Errors
/// When bash cannot be started.
pub fn spawn_per_command(count: usize) -> std::io::Result<Samples> {
    let mut samples = Samples::default();
    for _ in 0..count {
        let started = Instant::now();
        let status = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", "true"])
            .stdin(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other("bash -c true failed"));
        }
        samples.push(started.elapsed());
    }
    Ok(samples)
}

/// A warm bash over tokio pipes, for many in flight at once.
#[derive(Debug)]
pub struct AsyncBarePipe {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
    line: String,
}

impl AsyncBarePipe {
    /// Starts the shell.
    ///
    /// # Errors
    /// When bash cannot be started.
    pub fn start() -> std::io::Result<Self> {
        let mut child = tokio::process::Command::new("bash")
            .args(["--noprofile", "--norc"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(Self {
            child,
            stdin,
            stdout: tokio::io::BufReader::new(stdout),
            line: String::new(),
        })
    }

    /// One round trip of `command`.
    ///
    /// # Errors
    /// When the shell stops answering.
    pub async fn round_trip(&mut self, command: &str) -> std::io::Result<Duration> {
        use tokio::io::AsyncBufReadExt;
        use tokio::io::AsyncWriteExt;
        let started = Instant::now();
        self.stdin
            .write_all(format!("{command}; echo __done__\n").as_bytes())
            .await?;
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line).await? == 0 {
                return Err(std::io::Error::other("bash exited"));
            }
            if self.line == "__done__\n" {
                return Ok(started.elapsed());
            }
        }
    }

    /// Stops the shell.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Reads the whole stdout of `head -c <bytes> /dev/zero` through a pipe, in
/// 64 KiB reads, and returns how long it took: the floor for moving a stream.
///
/// # Errors
/// When the producer cannot be started or read.
pub fn raw_pipe_read(bytes: u64) -> std::io::Result<Duration> {
    use std::io::Read;
    let started = Instant::now();
    let mut child = Command::new("head")
        .args(["-c", &bytes.to_string(), "/dev/zero"])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout"))?;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = stdout.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    child.wait()?;
    if total != bytes {
        return Err(std::io::Error::other(format!(
            "read {total} of {bytes} bytes"
        )));
    }
    Ok(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_pipe_read_reads_everything() {
        assert!(raw_pipe_read(1 << 20).is_ok());
    }

    #[test]
    fn the_bare_pipe_baseline_answers() {
        let mut pipe = BarePipe::start().unwrap();
        assert_eq!(pipe.round_trips(3).unwrap().len(), 3);
    }
}
