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
//! Short runs never start one: the timer is cancelled when the run ends.

use std::time::Duration;

use ractor::ActorRef;
use shellvisor_protocol::JobId;
use shellvisor_run::AbortOnDrop;

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
        self.standby_timer = None;
        let (Some(lead), Some(leaves_in)) =
            (self.args.ctx.config.shell.standby_lead(), leaves_shell_in)
        else {
            return;
        };
        if self.shells.has_standby() {
            return;
        }
        let job_id = job_id.clone();
        self.standby_timer = Some(AbortOnDrop(
            myself.send_after(leaves_in.saturating_sub(lead), move || {
                SessionMsg::PrepareStandby { job_id }
            }),
        ));
    }

    /// The standby timer fired: start the standby if `job_id` still holds
    /// the primary and there is none yet.
    pub(crate) async fn prepare_standby(&mut self, myself: &ActorRef<SessionMsg>, job_id: &JobId) {
        self.standby_timer = None;
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
