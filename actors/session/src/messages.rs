//! Messages of the Session actor.

use ractor::RpcReplyPort;
use shellvisor_actor_job::JobNotice;
use shellvisor_actor_shell::ShellNotice;
use shellvisor_protocol::JobId;
use shellvisor_protocol::OutputChunk;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunRequest;

/// Messages accepted by [`crate::Session`].
#[derive(Debug)]
pub enum SessionMsg {
    /// Run a command; the Job answers `reply` once.
    Run {
        /// The request.
        request: RunRequest,
        /// The caller.
        reply: RpcReplyPort<Result<RunOutcome>>,
    },
    /// Read a job's raw output by offset.
    ReadOutput {
        /// The job (of this session only).
        job_id: JobId,
        /// First byte.
        offset: u64,
        /// Most bytes.
        max: usize,
        /// Where the bytes go.
        reply: RpcReplyPort<Result<OutputChunk>>,
    },
    /// From a Job.
    Job(JobNotice),
    /// From a Shell.
    Shell(ShellNotice),
}

impl From<JobNotice> for SessionMsg {
    fn from(notice: JobNotice) -> Self {
        SessionMsg::Job(notice)
    }
}

impl TryFrom<SessionMsg> for JobNotice {
    type Error = SessionMsg;

    fn try_from(message: SessionMsg) -> std::result::Result<Self, SessionMsg> {
        match message {
            SessionMsg::Job(notice) => Ok(notice),
            other => Err(other),
        }
    }
}

impl From<ShellNotice> for SessionMsg {
    fn from(notice: ShellNotice) -> Self {
        SessionMsg::Shell(notice)
    }
}

impl TryFrom<SessionMsg> for ShellNotice {
    type Error = SessionMsg;

    fn try_from(message: SessionMsg) -> std::result::Result<Self, SessionMsg> {
        match message {
            SessionMsg::Shell(notice) => Ok(notice),
            other => Err(other),
        }
    }
}
