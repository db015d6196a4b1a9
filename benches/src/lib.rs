//! Measurement helpers shared by the benches: latency samples with
//! percentiles, and the raw baselines every figure is compared with (a bare
//! pipe round trip to a warm bash, and `bash -c` spawned per command).

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

/// Latency samples.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    values: Vec<Duration>,
}

impl Samples {
    /// Records one sample.
    pub fn push(&mut self, value: Duration) {
        self.values.push(value);
    }

    /// Adds every sample of `other`.
    pub fn extend(&mut self, other: Samples) {
        self.values.extend(other.values);
    }

    /// The `q`-quantile (0.5 for the median), by nearest rank.
    pub fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.values.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    /// Median.
    pub fn p50(&self) -> Duration {
        self.quantile(0.50)
    }

    /// 99th percentile.
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

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
        let mut samples = Samples::default();
        for _ in 0..count {
            let started = Instant::now();
            self.stdin.write_all(b"true; echo __done__\n")?;
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

/// Formats a duration in microseconds.
pub fn micros(value: Duration) -> String {
    format!("{:.1} µs", value.as_secs_f64() * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_nearest_rank() {
        let mut samples = Samples::default();
        for ms in 1..=100 {
            samples.push(Duration::from_millis(ms));
        }
        assert_eq!(samples.p50(), Duration::from_millis(50));
        assert_eq!(samples.p99(), Duration::from_millis(99));
        assert_eq!(samples.quantile(1.0), Duration::from_millis(100));
    }

    #[test]
    fn the_bare_pipe_baseline_answers() {
        let mut pipe = BarePipe::start().unwrap();
        assert_eq!(pipe.round_trips(3).unwrap().len(), 3);
    }
}
