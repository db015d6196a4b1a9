//! Messages of the Job actor.

use std::sync::Arc;

use ractor::ActorRef;
use ractor::RpcReplyPort;
use shellvisor_actor_pty::PtyCall;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_actor_sink::SinkNotice;
use shellvisor_process::StatusRecord;
use shellvisor_protocol::JobId;
use shellvisor_protocol::JobInfo;
use shellvisor_protocol::OutputChunk;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunResult;
use shellvisor_run::RunNotice;

use crate::actor::JobArgs;
use crate::offer::Offer;
use crate::offer::StreamOffer;
use crate::record::FinishedRun;

/// Messages accepted by [`crate::Job`].
#[derive(Debug)]
pub enum JobMsg {
    /// Fault injection for tests (feature `chaos`): the handler panics, as
    /// a bug would.
    #[cfg(feature = "chaos")]
    Panic,
    /// From the runner (the Shell or the PtySession).
    Runner(RunNotice),
    /// From the Sink: the run was silent for its idle timeout, or a line
    /// matched its `wait_for` pattern.
    Output(SinkNotice),
    /// From the Session, to a Job whose last run is over and recorded:
    /// serve this run next (the actor is pooled: one start serves a
    /// session's successive runs).
    Begin(Box<JobArgs>),
    /// Internal: the run's port listens or its path exists (`already_at_start`:
    /// it did at the first check).
    ReadyPolled {
        /// Which of the actor's runs asked (a stale poll is ignored).
        run: u64,
        /// The condition held at the first check, before the run could
        /// have made it.
        already_at_start: bool,
    },
    /// An interactive call (input, keys, resize, screen, state); refused with
    /// `not_interactive` when the job has no terminal.
    PtyCall(PtyCall),
    /// From the Session: run on this shell instead (the previous one refused
    /// the run before anything ran).
    UseShell(ActorRef<ShellMsg>),
    /// From the Session: the Shell actor stopped without reporting the run.
    ShellGone {
        /// What the Session saw.
        reason: String,
    },
    /// Read raw output `[offset, offset + max)`.
    ReadOutput {
        /// First byte.
        offset: u64,
        /// Most bytes.
        max: usize,
        /// Where the bytes go.
        reply: RpcReplyPort<Result<OutputChunk>>,
    },
    /// The job's current state.
    GetInfo(RpcReplyPort<Result<JobInfo>>),
    /// The result once the job finishes (answered at once if it has), as an
    /// [`Offer`]: taking it is the result's delivery.
    Wait(RpcReplyPort<Result<Offer>>),
    /// The result for the session's completion stream, if the job has
    /// finished, nobody took it and no offer of it is unsettled. A wait
    /// that comes while it is on its way withdraws it (see
    /// [`StreamOffer::take`]).
    Claim(RpcReplyPort<Option<StreamOffer>>),
    /// From an [`Offer`]: its receiver took the result.
    Confirm(u64),
    /// From an [`Offer`]: it was dropped untaken.
    GiveBack(u64),
    /// Kill the job's process tree; answered once it has ended.
    Kill(RpcReplyPort<Result<()>>),
    /// Internal: the Job's clock fired (a deadline, a move to the
    /// background or the end of the retention may be due; see
    /// `JobClock`).
    ClockFired,
    /// Internal: the Shell did not report within the grace after a kill.
    /// It names the actor's run that armed it: one that fired as its run
    /// was recorded is ignored by the next.
    Unresponsive(u64),
}

impl From<RunNotice> for JobMsg {
    fn from(notice: RunNotice) -> Self {
        JobMsg::Runner(notice)
    }
}

impl From<SinkNotice> for JobMsg {
    fn from(notice: SinkNotice) -> Self {
        JobMsg::Output(notice)
    }
}

impl TryFrom<JobMsg> for SinkNotice {
    type Error = JobMsg;

    fn try_from(message: JobMsg) -> std::result::Result<Self, JobMsg> {
        match message {
            JobMsg::Output(notice) => Ok(notice),
            other => Err(other),
        }
    }
}

impl TryFrom<JobMsg> for RunNotice {
    type Error = JobMsg;

    fn try_from(message: JobMsg) -> std::result::Result<Self, JobMsg> {
        match message {
            JobMsg::Runner(notice) => Ok(notice),
            other => Err(other),
        }
    }
}

/// What a Job tells its Session.
#[derive(Debug)]
pub enum JobNotice {
    /// The shell refused the run before anything ran; the Job asks for
    /// another (answered with [`JobMsg::UseShell`] or [`JobMsg::ShellGone`]).
    ShellRefused {
        /// Which job.
        job_id: JobId,
    },
    /// The foreground run became a background job (its caller was answered).
    Backgrounded {
        /// Which job.
        job_id: JobId,
        /// The directory the call asked to run in (its `cwd`, or its
        /// rewritten leading `cd`): the session's next shell starts there.
        cwd: Option<std::path::PathBuf>,
    },
    /// A finished background job's result is undelivered (its receiver left
    /// or never confirmed): it belongs on the completion stream.
    Undelivered {
        /// Which job.
        job_id: JobId,
    },
    /// The job is over and no longer needs its shell.
    Finished {
        /// Which job.
        job_id: JobId,
        /// In what state the shell is.
        release: ShellRelease,
        /// Whether the result is for the session's completion stream (a
        /// background job whose result no wait has taken).
        deliver: bool,
        /// The finished run as a record the Session keeps, when the actor
        /// is free for the session's next run (a foreground run on a shell,
        /// answered, with no watch or limits); `None` when the actor keeps
        /// the job for its retention.
        record: Option<Arc<FinishedRun>>,
        /// The foreground caller's answer, for the Session to send once it
        /// has the shell back; `None` when no caller waits.
        answer: Option<CallerAnswer>,
    },
}

/// A foreground caller's result, sent by the Session as it takes the run's
/// shell back. The caller's next call then always finds the shell free,
/// and the caller is the one task the run's end wakes after the Session:
/// a Job that woke both its Session and its caller pushed one of them out
/// of the next-to-run slot of tokio's worker, which woke a parked worker
/// to take it, once per run.
#[derive(Debug)]
pub struct CallerAnswer {
    reply: RpcReplyPort<Result<RunOutcome>>,
    result: Arc<RunResult>,
}

impl CallerAnswer {
    pub(crate) fn new(reply: RpcReplyPort<Result<RunOutcome>>, result: Arc<RunResult>) -> Self {
        Self { reply, result }
    }

    /// Answers the caller (one that left is no error).
    pub fn send(self) {
        let outcome = RunOutcome::Completed((*self.result).clone());
        let _ = self.reply.send(Ok(outcome));
        tracing::trace!(target: "shellvisor::stage", "caller answered");
    }
}

/// The state a Job leaves its shell in.
#[derive(Debug)]
pub enum ShellRelease {
    /// Ready for the next command.
    Reusable {
        /// The run's status (its cwd).
        status: StatusRecord,
        /// Whether an environment record for the run follows.
        env_follows: bool,
    },
    /// Gone (it exited or was killed) or unusable: replace it.
    Ended,
}
