//! Messages of the Shell actor.

use std::path::PathBuf;
use std::time::Duration;

use ractor::ActorId;
use ractor::DerivedActorRef;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_process::ExitInfo;
use shellvisor_run::KillReason;
use shellvisor_run::RunNotice;

/// Messages accepted by [`crate::Shell`].
#[derive(Debug)]
pub enum ShellMsg {
    /// Fault injection for tests (feature `chaos`): the handler panics, as
    /// a bug would.
    #[cfg(feature = "chaos")]
    Panic,
    /// Run a command; the outcome goes to the request's `reply_to`.
    Exec(ExecRequest),
    /// Kill the run in progress (its deadline fired, or it was cancelled):
    /// what the run started and the bash it runs in get TERM and CONT, then
    /// KILL after the grace period; processes earlier runs left running are
    /// not touched. The run ends as
    /// [`RunEnd::ShellExited`](shellvisor_run::RunEnd::ShellExited) with
    /// this reason, whatever traps do. Ignored when the run has completed.
    KillRun(KillReason),
    /// End the shell and everything in its process group (TERM and CONT,
    /// then KILL after the grace period) and stop. A run in progress ends
    /// with this reason.
    Stop(KillReason),
    /// The shell is no longer needed: stop it, but keep it while processes
    /// its commands left running (`server &`) are alive, checking every `poll`.
    Release {
        /// How often to check for those processes.
        poll: Duration,
    },
    /// Whether processes other than bash live in the shell's group (commands
    /// left them running: `server &`). Answered after a scan of `/proc`.
    Occupied(ractor::RpcReplyPort<bool>),
    /// Internal: check whether the processes left running are gone.
    CheckChildren,
    /// Internal: how many processes other than bash are in the group.
    ChildrenCounted(usize),
    /// Internal: look again whether a stopping shell's group is empty.
    CheckStoppedGroup,
    /// Internal: how many processes other than bash (which has exited) are
    /// left in a stopping shell's group.
    StoppedGroupCounted(usize),
    /// Internal: the status channel carried something that is not a record
    /// of the run in progress (the I/O task ended the run): give the shell up.
    ChannelBroken,
    /// Internal: the status channel reached end of file.
    StatusClosed,
    /// Internal: bash still runs a moment after its status channel closed.
    StatusClosedGrace,
    /// Internal: the bash process exited.
    Exited(ExitInfo),
    /// Internal: the grace period of a stop elapsed.
    Escalate,
    /// Internal: the grace period of a run kill elapsed.
    EscalateRun,
    /// Internal: the run being killed is gone (its processes ended after
    /// bash, or the KILL pass is done).
    RunKilled,
}

/// One command to run.
#[derive(Debug)]
pub struct ExecRequest {
    /// The command text, as written.
    pub command: String,
    /// Directory to `cd` into first.
    pub cwd: Option<PathBuf>,
    /// Variables for this call only.
    pub env: Vec<(String, String)>,
    /// Where the output goes.
    pub sink: SinkFeed,
    /// A run with resource limits: the subshell it runs in joins these.
    pub confinement: Option<RunConfinement>,
    /// Who learns how the run ended.
    pub reply_to: DerivedActorRef<RunNotice>,
}

/// How a run with resource limits is confined (see
/// `shellvisor_process::script::Confinement`).
#[derive(Clone, Debug, Default)]
pub struct RunConfinement {
    /// `cgroup.procs` files of the run's cgroup leaves.
    pub procs: Vec<PathBuf>,
    /// `RLIMIT_AS` in KiB, where memory has no cgroup.
    pub address_space_kib: Option<u64>,
}

/// What a Shell tells its supervisor (the Session) as soon as it happens,
/// without waiting for the actor to stop.
#[derive(Debug)]
pub enum ShellNotice {
    /// The bash process ended. The actor finishes killing its group and stops.
    Ended {
        /// Which shell.
        shell: ActorId,
        /// How bash ended.
        exit: ExitInfo,
        /// Whether a run was in progress (its Job reports it).
        during_run: bool,
        /// Whether the runtime killed it (never charged to the restart budget).
        killed: bool,
    },
}
