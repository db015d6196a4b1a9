//! What bash writes outside a run's redirections: an EXIT trap's output as
//! the shell exits (bash has undone the run's redirections by then), and its
//! own errors. It belongs to the run during which the shell exited; what
//! came before a run completed is the wrapper's (a DEBUG trap firing on the
//! wrapper's own commands) and is dropped then. Always drained, so bash
//! never blocks on it.

use std::io;
use std::os::fd::OwnedFd;

use bytes::Bytes;
use bytes::BytesMut;
use tokio::net::unix::pipe;

/// Most bytes kept for one run; older ones are dropped first (an EXIT
/// trap writes last).
const KEPT_BYTES: usize = 64 * 1024;
/// Read size.
const READ_BYTES: usize = 8 * 1024;

/// The read end of bash's stdout and stderr.
#[derive(Debug)]
pub(crate) struct ShellOutput {
    receiver: Option<pipe::Receiver>,
    kept: BytesMut,
}

impl ShellOutput {
    /// Wraps the pipe's read end. Must be called inside a tokio runtime.
    pub(crate) fn new(read: OwnedFd) -> io::Result<Self> {
        Ok(Self {
            receiver: Some(pipe::Receiver::from_owned_fd(read)?),
            kept: BytesMut::new(),
        })
    }

    /// Resolves when there is something to read (never once the pipe is
    /// closed).
    pub(crate) async fn readable(&self) {
        match &self.receiver {
            Some(receiver) => {
                let _ = receiver.readable().await;
            }
            None => std::future::pending().await,
        }
    }

    /// Reads what tokio saw arrive into the kept bytes (this clears its
    /// readiness, so [`ShellOutput::readable`] waits for more).
    pub(crate) fn read_ready(&mut self) {
        self.read(|receiver, buf| receiver.try_read(buf));
    }

    /// Reads what is in the pipe now, whether or not tokio has seen it yet.
    fn read_all_now(&mut self) {
        self.read(|receiver, buf| shellvisor_process::read_now(receiver, buf));
    }

    fn read(&mut self, read: impl Fn(&pipe::Receiver, &mut [u8]) -> io::Result<usize>) {
        let Some(receiver) = &self.receiver else {
            return;
        };
        let mut scratch = [0u8; READ_BYTES];
        loop {
            match read(receiver, &mut scratch) {
                Ok(0) => {
                    // Every writer is gone (bash and whatever inherited it).
                    self.receiver = None;
                    return;
                }
                Ok(n) => {
                    self.kept.extend_from_slice(&scratch[..n]);
                    if self.kept.len() > KEPT_BYTES {
                        let excess = self.kept.len() - KEPT_BYTES;
                        let _ = self.kept.split_to(excess);
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) => {
                    tracing::debug!(%err, "reading the shell's own output failed");
                    self.receiver = None;
                    return;
                }
            }
        }
    }

    /// A run completed: what bash wrote so far belongs to no run.
    pub(crate) fn forget(&mut self) {
        self.read_all_now();
        if !self.kept.is_empty() {
            tracing::debug!(
                bytes = self.kept.len(),
                "shell output outside any run dropped"
            );
            self.kept.clear();
        }
    }

    /// Everything written since the run started (the shell has exited: it
    /// is all in the pipe).
    pub(crate) fn take(&mut self) -> Bytes {
        self.read_all_now();
        self.kept.split().freeze()
    }
}
