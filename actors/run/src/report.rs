//! How a run ended, as its runner reports it to its Job.

use shellvisor_actor_sink::OutputSummary;
use shellvisor_process::ExitInfo;
use shellvisor_process::StatusRecord;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::Screen;

/// Why the runtime kills what a run started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillReason {
    /// The run's deadline fired.
    Timeout,
    /// The run printed nothing for its idle timeout.
    Idle,
    /// The caller cancelled the run.
    Cancelled,
    /// The shell is no longer needed (an isolated shell after its run).
    Release,
    /// The session or runtime is closing.
    Shutdown,
    /// The shell's own channels failed (its status channel closed or
    /// carried something that is not a record of the run).
    ChannelBroken,
}

impl KillReason {
    /// How a result names the reason.
    pub fn describe(self) -> &'static str {
        match self {
            KillReason::Timeout => "deadline",
            KillReason::Idle => "no output",
            KillReason::Cancelled => "cancelled",
            KillReason::Release | KillReason::Shutdown => "the session is closing",
            KillReason::ChannelBroken => "the shell's channels failed",
        }
    }
}

/// What a runner (a Shell or a PtySession) tells the Job it runs for.
#[derive(Debug)]
pub enum RunNotice {
    /// The run is over (boxed: it carries the rendered output).
    Finished(Box<RunReport>),
    /// A terminal program's state changed (for example it now waits for input).
    PtyState(PtyState),
}

/// A runner's report of a finished run: how it ended and its output.
#[derive(Debug)]
pub struct RunReport {
    /// How it ended.
    pub end: RunEnd,
    /// Its rendered output, or `None` if the Sink did not answer.
    pub output: Option<OutputSummary>,
    /// A terminal run's screen when the terminal closed.
    pub screen: Option<Screen>,
    /// A terminal run that used the alternate screen (an editor, a pager,
    /// `top`): its last full-screen view.
    pub last_full_screen: Option<Screen>,
}

impl RunReport {
    /// A report of a run that never started (no output, no screen).
    pub fn refused(reason: impl Into<String>) -> Self {
        Self::without_output(RunEnd::Refused {
            reason: reason.into(),
        })
    }

    /// A report with no output collected.
    pub fn without_output(end: RunEnd) -> Self {
        Self {
            end,
            output: None,
            screen: None,
            last_full_screen: None,
        }
    }
}

/// How a run ended.
#[derive(Debug)]
pub enum RunEnd {
    /// The command finished and the shell reported its status; the shell is
    /// ready for the next command.
    Completed {
        /// Exit status and working directory.
        status: StatusRecord,
        /// Whether an environment record for this run follows (the command may
        /// have changed the exported environment).
        env_follows: bool,
    },
    /// The shell process ended during the run (the command ran `exit` or
    /// `exec`, or something killed the shell). `killed` says whether the
    /// runtime killed it, and why.
    ShellExited {
        /// How bash ended.
        exit: ExitInfo,
        /// Set when the runtime killed the shell.
        killed: Option<KillReason>,
    },
    /// A terminal run's program (not a persistent shell) ended. `killed`
    /// says whether the runtime killed it, and why.
    ProgramExited {
        /// How the program ended.
        exit: ExitInfo,
        /// Set when the runtime killed it.
        killed: Option<KillReason>,
    },
    /// The runner refused the run before anything ran (it had ended or was
    /// busy). Running it elsewhere cannot run it twice.
    Refused {
        /// Why.
        reason: String,
    },
    /// The runner disappeared during the run.
    ShellLost {
        /// What happened.
        reason: String,
    },
}
