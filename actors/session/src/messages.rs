//! Messages of the Session actor.

use ractor::RpcReplyPort;
use shellvisor_actor_job::JobNotice;
use shellvisor_actor_job::Offer;
use shellvisor_actor_job::StreamOffer;
use shellvisor_actor_pty::PtyCall;
use shellvisor_actor_shell::ShellNotice;
use shellvisor_protocol::JobId;
use shellvisor_protocol::JobInfo;
use shellvisor_protocol::JobPage;
use shellvisor_protocol::JobQuery;
use shellvisor_protocol::OutputChunk;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunRequest;

/// Messages accepted by [`crate::Session`].
#[derive(Debug)]
pub enum SessionMsg {
    /// Fault injection for tests (feature `chaos`): the handler panics, as
    /// a bug would.
    #[cfg(feature = "chaos")]
    Panic,
    /// Run a command; the Job answers `reply` once.
    Run {
        /// The request.
        request: RunRequest,
        /// The caller.
        reply: RpcReplyPort<Result<RunOutcome>>,
        /// Told the run's job id as soon as its Job exists (dropped unsent
        /// when the request is refused before that).
        started: Option<tokio::sync::oneshot::Sender<JobId>>,
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
    /// A page of this session's retained jobs, oldest first.
    ListJobs {
        /// Which page.
        query: JobQuery,
        /// Where the page goes.
        reply: RpcReplyPort<JobPage>,
    },
    /// One job's state.
    JobInfo {
        /// The job (of this session only).
        job_id: JobId,
        /// Where the state goes.
        reply: RpcReplyPort<Result<JobInfo>>,
    },
    /// A job's result once it finishes (the caller bounds the wait), as an
    /// offer to take.
    Wait {
        /// The job (of this session only).
        job_id: JobId,
        /// Where the offer goes.
        reply: RpcReplyPort<Result<Offer>>,
    },
    /// Kill a job's process tree; answered once it has ended.
    Kill {
        /// The job (of this session only).
        job_id: JobId,
        /// Answered once the job has ended.
        reply: RpcReplyPort<Result<()>>,
    },
    /// An interactive call on a job's terminal.
    Pty {
        /// The job (of this session only).
        job_id: JobId,
        /// The call (it carries its reply port).
        call: PtyCall,
    },
    /// The next finished background job whose result nobody has taken
    /// (answered when one finishes), as an offer to take.
    NextCompletion(RpcReplyPort<StreamOffer>),
    /// A standby shell may be due (sent by the Session's own timer).
    PrepareStandby,
    /// The idle limit may have passed (sent by the Session's own timer).
    IdleCheck,
    /// Finished runs' records may be due to go (the Session's own timer).
    ExpireRecords,
    /// A run waiting for a shell may have waited its limit (the Session's
    /// own timer).
    ShellWaitOver,
    /// From a Job.
    Job(JobNotice),
    /// From a Shell.
    Shell(ShellNotice),
}

impl SessionMsg {
    /// Whether this is a caller's request (it resets the idle clock), as
    /// opposed to a notice from the session's own actors or timers.
    pub(crate) fn is_call(&self) -> bool {
        match self {
            SessionMsg::Run { .. }
            | SessionMsg::ReadOutput { .. }
            | SessionMsg::ListJobs { .. }
            | SessionMsg::JobInfo { .. }
            | SessionMsg::Wait { .. }
            | SessionMsg::Kill { .. }
            | SessionMsg::Pty { .. }
            | SessionMsg::NextCompletion(_) => true,
            #[cfg(feature = "chaos")]
            SessionMsg::Panic => false,
            SessionMsg::PrepareStandby
            | SessionMsg::IdleCheck
            | SessionMsg::ExpireRecords
            | SessionMsg::ShellWaitOver
            | SessionMsg::Job(_)
            | SessionMsg::Shell(_) => false,
        }
    }
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
