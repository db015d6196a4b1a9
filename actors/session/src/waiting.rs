//! Runs that met the shell limit, waiting for a shell to come free.
//!
//! A run that needs a shell of its own (an overlapping call, an async run)
//! when the session already has `sessions.max_shells_per_session` shells
//! waits for one instead of being refused: most of those shells are busy
//! with short calls or retiring (let go, and stopping once their group is
//! empty, about 0.1 s after their call), so refusing would turn a burst of
//! parallel calls into errors that a moment later would not have been. A
//! run waits at most `sessions.shell_wait_ms`, then gets
//! `shell_limit_reached` as before. Waiting runs are tried again, in the
//! order they came, whenever a shell stops or a job ends (the primary may
//! be free again).

use std::collections::VecDeque;
use std::time::Instant;

use ractor::ActorRef;
use shellvisor_protocol::Error;
use shellvisor_run::LazyTimer;
use shellvisor_run::instant_after;
use shellvisor_run::is_due;

use crate::actor::SessionState;
use crate::jobs::ShellRun;
use crate::messages::SessionMsg;

/// The runs waiting for a shell, oldest first, and the timer that refuses
/// them when their wait is over.
#[derive(Debug, Default)]
pub(crate) struct WaitingRuns {
    runs: VecDeque<(ShellRun, Instant)>,
    timer: LazyTimer<SessionMsg>,
}

impl WaitingRuns {
    /// Whether no run waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

impl SessionState {
    /// `run` could not get a shell (`err`): it waits for one when the
    /// limit is what it met, or is answered with `err`.
    pub(crate) fn wait_for_a_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        err: Error,
        run: ShellRun,
    ) {
        let until = instant_after(self.args.ctx.config.sessions.shell_wait());
        self.wait_until(myself, err, run, until);
    }

    /// Keeps `run` waiting until `until`, or answers it with `err` when the
    /// limit is not what stopped it or its wait is over.
    fn wait_until(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        err: Error,
        run: ShellRun,
        until: Instant,
    ) {
        let waits = matches!(err, Error::ShellLimitReached { .. }) && !is_due(until);
        if !waits {
            run.refuse(err);
            return;
        }
        tracing::debug!(session = %self.args.id, "run waits for a shell (the session is at its limit)");
        self.waiting
            .timer
            .fire_by(myself, until, || SessionMsg::ShellWaitOver);
        self.waiting.runs.push_back((run, until));
    }

    /// A shell stopped, a job ended or a wait is over: the waiting runs try
    /// again, oldest first; those still without a shell wait on (or are
    /// refused once their wait is over).
    pub(crate) async fn serve_waiting(&mut self, myself: &ActorRef<SessionMsg>) {
        if self.waiting.runs.is_empty() {
            return;
        }
        for (run, until) in std::mem::take(&mut self.waiting.runs) {
            // Its caller left: nothing is started for nobody.
            if run.caller_left() {
                continue;
            }
            // Boxed: reached from most handlers, and rarely (see `lend_shell`).
            if let Err((err, run)) = Box::pin(self.start_shell_run(myself, run)).await {
                self.wait_until(myself, err, run, until);
            }
        }
    }

    /// The wait timer fired: the runs try again, and those whose wait is
    /// over are refused (the others arm it again).
    pub(crate) async fn shell_wait_over(&mut self, myself: &ActorRef<SessionMsg>) {
        self.waiting.timer.fired();
        self.serve_waiting(myself).await;
    }
}
