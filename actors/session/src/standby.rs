//! The standby shell: started shortly before a foreground command that holds
//! the primary reaches its deadline or its move to the background, with the
//! session's state as of its last completed run, so the next call finds a
//! ready primary instead of waiting for a shell to start (and, on hosts where
//! joining the pids cgroup means a migration, for that migration). A run that
//! ends its shell otherwise (`exit`, `exec`) also hands over to a standby if
//! one is ready by then.
//!
//! The standby is valid only while the primary is held: the session's state
//! changes only when a primary run completes, and then the standby is retired.
//! Short runs never start one: their want is withdrawn when they end.

use std::time::Duration;
use std::time::Instant;

use ractor::ActorRef;
use shellvisor_protocol::JobId;
use shellvisor_run::LazyTimer;
use shellvisor_run::instant_after;
use shellvisor_run::is_due;

use crate::actor::SessionState;
use crate::messages::SessionMsg;
use crate::shells::stop;

impl SessionState {
    /// The primary was lent to the foreground run `job_id`, which leaves it
    /// (deadline or move to the background) after `leaves_shell_in` if it is
    /// still running then: ask for a standby the configured lead before that.
    pub(crate) fn schedule_standby(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
        leaves_shell_in: Option<Duration>,
    ) {
        self.standby.withdraw();
        let (Some(lead), Some(leaves_in)) =
            (self.args.ctx.config.shell.standby_lead(), leaves_shell_in)
        else {
            return;
        };
        if self.shells.has_standby() {
            return;
        }
        let at = instant_after(leaves_in.saturating_sub(lead));
        self.standby.want(myself, job_id.clone(), at);
    }

    /// The standby timer fired: start the standby if `job_id` still holds
    /// the primary and there is none yet.
    pub(crate) async fn prepare_standby(&mut self, myself: &ActorRef<SessionMsg>, job_id: &JobId) {
        if !self.shells.wants_standby_for(job_id) || self.budget.is_spent() {
            return;
        }
        match self.start_shell(myself).await {
            Ok((shell, records)) => {
                tracing::debug!(session = %self.args.id, "standby shell ready");
                if let Some(displaced) = self.shells.set_standby(shell, records) {
                    stop(&displaced);
                }
            }
            Err(err) => {
                tracing::debug!(session = %self.args.id, %err, "could not start a standby shell");
            }
        }
    }
}

/// The standby's timer: one per session, kept from run to run. A run that
/// holds the primary says when it would want a standby; its end withdraws
/// the want. The timer is armed again only when it would fire too late:
/// most runs end long before their want, and this spares each of them a
/// timer task spawned and another aborted.
#[derive(Debug, Default)]
pub(crate) struct StandbyClock {
    timer: LazyTimer<SessionMsg>,
    /// The run that wants a standby, and from when.
    wanted: Option<(JobId, Instant)>,
}

impl StandbyClock {
    /// `job_id` wants a standby at `at`.
    fn want(&mut self, myself: &ActorRef<SessionMsg>, job_id: JobId, at: Instant) {
        self.wanted = Some((job_id, at));
        self.timer
            .fire_by(myself, at, || SessionMsg::PrepareStandby);
    }

    /// No run wants a standby (the timer, if armed, fires for nothing).
    pub(crate) fn withdraw(&mut self) {
        self.wanted = None;
    }

    /// The timer fired: the run whose standby is due, if any. A want that
    /// is not due yet arms the timer again.
    pub(crate) fn fired(&mut self, myself: &ActorRef<SessionMsg>) -> Option<JobId> {
        self.timer.fired();
        let at = self.wanted.as_ref()?.1;
        if !is_due(at) {
            self.timer
                .fire_by(myself, at, || SessionMsg::PrepareStandby);
            return None;
        }
        self.wanted.take().map(|(job_id, _)| job_id)
    }
}
