//! Messages of the PtySession actor.

use ractor::RpcReplyPort;
use shellvisor_process::ChildProcess;
use shellvisor_process::ExitInfo;
use shellvisor_process::pty::InputWait;
use shellvisor_protocol::Error;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::Result;
use shellvisor_protocol::Screen;
use shellvisor_protocol::TerminalSize;
use shellvisor_run::KillReason;

/// Messages accepted by [`crate::PtySession`].
#[derive(Debug)]
pub enum PtyMsg {
    /// Fault injection for tests (feature `chaos`): the handler panics, as
    /// a bug would.
    #[cfg(feature = "chaos")]
    Panic,
    /// A request from the job's owner.
    Call(PtyCall),
    /// Kill the program's whole session (TERM and CONT, then KILL after the
    /// grace period). The run ends with this reason.
    Kill(KillReason),
    /// Internal: the program (the session leader) exited.
    Exited {
        /// How it ended.
        info: ExitInfo,
        /// The process, handed back by the watcher for reaping.
        child: ChildProcess,
    },
    /// Internal: the exit watcher failed.
    WatchFailed(String),
    /// Internal: every holder of the terminal closed it (the reader ended).
    ReaderDone,
    /// Internal: the writer thread could not write.
    WriterFailed(String),
    /// Internal: time to check for input waits.
    Probe,
    /// Internal: what a check found, and how many inputs had reached the
    /// terminal when it began.
    Probed {
        /// The program's input wait.
        wait: InputWait,
        /// Inputs written to the terminal before the check.
        inputs_written: u64,
    },
    /// Internal: the kill grace period elapsed.
    Escalate,
    /// Internal: late output has had its time after the exit.
    DrainElapsed,
}

/// Interactive requests on a terminal run.
#[derive(Debug)]
pub enum PtyCall {
    /// Type text (bytes are sent as given; use `\r` for Enter).
    Write {
        /// The bytes.
        bytes: Vec<u8>,
        /// Answered once queued for the terminal.
        reply: RpcReplyPort<Result<()>>,
    },
    /// Press a named key (see [`crate::key_bytes`]).
    Key {
        /// The key's name, such as `C-c` or `Enter`.
        name: String,
        /// Answered once queued for the terminal.
        reply: RpcReplyPort<Result<()>>,
    },
    /// Change the terminal size (clamped; the program gets `SIGWINCH`).
    Resize {
        /// The new size.
        size: TerminalSize,
        /// Answered with the size applied.
        reply: RpcReplyPort<Result<TerminalSize>>,
    },
    /// The rendered screen.
    Screen(RpcReplyPort<Result<Screen>>),
    /// Running, awaiting input, or exited.
    State(RpcReplyPort<Result<PtyState>>),
}

impl PtyCall {
    /// Answers the call with `error` (for a job without a terminal, or one
    /// whose terminal is gone).
    pub fn refuse(self, error: Error) {
        match self {
            PtyCall::Write { reply, .. } | PtyCall::Key { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            PtyCall::Resize { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            PtyCall::Screen(reply) => {
                let _ = reply.send(Err(error));
            }
            PtyCall::State(reply) => {
                let _ = reply.send(Err(error));
            }
        }
    }
}
