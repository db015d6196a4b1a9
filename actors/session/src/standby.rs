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
use shellvisor_actor_shell::AbortOnDrop;
use shellvisor_actor_shell::KillReason;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_process::EnvRecord;
use shellvisor_protocol::JobId;
use tokio::sync::watch;

use crate::actor::SessionState;
use crate::actor::ShellRole;
use crate::messages::SessionMsg;

/// A started standby shell.
#[derive(Debug)]
pub(crate) struct Standby {
    pub(crate) actor: ActorRef<ShellMsg>,
    /// Its environment records (it becomes the primary with them).
    pub(crate) env: watch::Receiver<EnvRecord>,
}

/// The timer that asks for a standby; dropping it cancels the request.
pub(crate) type StandbyTimer = AbortOnDrop<Result<(), ractor::MessagingErr<SessionMsg>>>;

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
            (self.args.config.shell.standby_lead(), leaves_shell_in)
        else {
            return;
        };
        if self.standby.is_some() {
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
        let still_held = self.primary_holder.as_ref() == Some(job_id);
        if !still_held || self.standby.is_some() || self.unavailable_until.is_some() {
            return;
        }
        match self.start_shell(myself, ShellRole::Standby).await {
            Ok((actor, env)) => {
                tracing::debug!(session = %self.args.id, "standby shell ready");
                self.standby = Some(Standby { actor, env });
            }
            Err(err) => {
                tracing::debug!(session = %self.args.id, %err, "could not start a standby shell");
            }
        }
    }

    /// Makes the standby the primary. `false` when there is none.
    pub(crate) fn promote_standby(&mut self) -> bool {
        self.standby_timer = None;
        let Some(standby) = self.standby.take() else {
            return false;
        };
        let Some(entry) = self.shells.get_mut(&standby.actor.get_id()) else {
            // It stopped before it could be used.
            return false;
        };
        entry.role = ShellRole::Primary;
        entry.holder = None;
        self.primary = Some(standby.actor);
        self.primary_holder = None;
        self.primary_env = Some(standby.env);
        self.last_run_nonce = None;
        tracing::debug!(session = %self.args.id, "standby shell promoted to primary");
        true
    }

    /// The primary's run completed and may have changed the session's state:
    /// the standby no longer matches it.
    pub(crate) fn retire_standby(&mut self) {
        self.standby_timer = None;
        if let Some(standby) = self.standby.take() {
            self.retire(&standby.actor.get_id());
        }
    }

    /// Forgets the standby `shell` if it is the one (it ended or stopped).
    pub(crate) fn standby_ended(&mut self, shell: &ractor::ActorId) -> bool {
        if self
            .standby
            .as_ref()
            .is_some_and(|s| s.actor.get_id() == *shell)
        {
            self.standby = None;
            return true;
        }
        false
    }

    /// Stops a shell the session no longer uses.
    pub(crate) fn retire(&mut self, shell: &ractor::ActorId) {
        if let Some(entry) = self.shells.get_mut(shell) {
            entry.role = ShellRole::Retired;
            let _ = entry.actor.cast(ShellMsg::Kill(KillReason::Release));
        }
    }
}
