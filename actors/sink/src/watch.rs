//! What a Sink watches its output for on its Job's behalf: silence (the
//! idle timeout) and a line matching the run's `wait_for` pattern.

use std::time::Duration;
use std::time::Instant;

use ractor::DerivedActorRef;

/// The longest line kept for matching (bytes): a longer line is matched in
/// windows of this size, so a pattern spanning a window edge can be missed.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// What a Sink tells its Job about the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkNotice {
    /// Nothing arrived for the idle timeout.
    Idle,
    /// A line matched the `wait_for` pattern.
    Ready,
}

/// What to watch for, and whom to tell.
#[derive(Debug, Default)]
pub struct OutputWatch {
    /// Tell the Job when nothing arrives for this long.
    pub idle: Option<Duration>,
    /// Tell the Job when a line (or the line being written) matches.
    pub ready: Option<regex::bytes::Regex>,
    /// The Job (no watching without it).
    pub notify: Option<DerivedActorRef<SinkNotice>>,
}

impl OutputWatch {
    /// Whether silence is watched: the Sink's clock must then run from the
    /// start of the run, before any output.
    pub fn watches_silence(&self) -> bool {
        self.notify.is_some() && self.idle.is_some()
    }
}

/// The watch in progress.
#[derive(Debug)]
pub(crate) struct Watching {
    watch: OutputWatch,
    last_output: Instant,
    /// The line being written, for the pattern.
    line: Vec<u8>,
}

impl Watching {
    pub(crate) fn new(watch: OutputWatch) -> Self {
        Self {
            watch,
            last_output: Instant::now(),
            line: Vec::new(),
        }
    }

    /// The first idle check's delay, if the idle timeout is on.
    pub(crate) fn idle(&self) -> Option<Duration> {
        self.watch.notify.as_ref().and(self.watch.idle)
    }

    /// Output arrived: restart the idle clock and match its lines.
    pub(crate) fn saw(&mut self, chunk: &[u8]) {
        self.last_output = Instant::now();
        let Some(regex) = &self.watch.ready else {
            return;
        };
        let mut matched = false;
        let mut rest = chunk;
        while let Some(newline) = memchr::memchr(b'\n', rest) {
            let end = &rest[..newline];
            matched = matched
                || if self.line.is_empty() {
                    regex.is_match(end)
                } else {
                    extend_line(&mut self.line, end);
                    regex.is_match(&self.line)
                };
            self.line.clear();
            rest = &rest[newline + 1..];
        }
        if !matched && !rest.is_empty() {
            extend_line(&mut self.line, rest);
            matched = regex.is_match(&self.line);
        }
        if matched {
            self.line = Vec::new();
            self.watch.ready = None;
            self.tell(SinkNotice::Ready);
        }
    }

    /// The idle timer fired: `None` when the run has been silent for the
    /// idle timeout (the Job is told), else how long until the next check.
    pub(crate) fn check_idle(&mut self) -> Option<Duration> {
        let idle = self.watch.idle?;
        let silent = self.last_output.elapsed();
        if silent >= idle {
            self.watch.idle = None;
            self.tell(SinkNotice::Idle);
            None
        } else {
            Some(idle - silent)
        }
    }

    /// The run's output is over: stop watching.
    pub(crate) fn stop(&mut self) {
        self.watch.idle = None;
        self.watch.ready = None;
        self.line = Vec::new();
    }

    fn tell(&self, notice: SinkNotice) {
        if let Some(job) = &self.watch.notify {
            let _ = job.send_message(notice);
        }
    }
}

/// Appends `part` to `line`, keeping at most [`MAX_LINE_BYTES`] (the newest).
fn extend_line(line: &mut Vec<u8>, part: &[u8]) {
    line.extend_from_slice(part);
    if line.len() > MAX_LINE_BYTES {
        let excess = line.len() - MAX_LINE_BYTES;
        line.drain(..excess);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watching(pattern: &str) -> Watching {
        Watching::new(OutputWatch {
            idle: None,
            ready: Some(regex::bytes::Regex::new(pattern).unwrap()),
            notify: None,
        })
    }

    #[test]
    fn a_pattern_matches_across_chunks_and_within_the_line_being_written() {
        let mut watch = watching("^Serving HTTP on .* port");
        watch.saw(b"starting\nServing HT");
        assert!(watch.watch.ready.is_some(), "not yet");
        watch.saw(b"TP on 0.0.0.0 port 8000");
        assert!(
            watch.watch.ready.is_none(),
            "matched the line being written"
        );

        let mut watch = watching("^ready$");
        watch.saw(b"not ready\nrea");
        assert!(
            watch.watch.ready.is_some(),
            "a line is matched whole, never across lines"
        );
        watch.saw(b"dy\n");
        assert!(watch.watch.ready.is_none());

        let mut watch = watching("y");
        watch.saw(&vec![b'x'; MAX_LINE_BYTES * 3]);
        assert!(watch.line.len() <= MAX_LINE_BYTES, "a long line is bounded");
        assert!(watch.watch.ready.is_some());
    }
}
