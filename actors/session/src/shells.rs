//! The session's shells: lending, starting, seeding, replacing.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use ractor::Actor;
use ractor::ActorId;
use ractor::ActorRef;
use shellvisor_actor_job::JobMsg;
use shellvisor_actor_job::ShellRelease;
use shellvisor_actor_shell::KillReason;
use shellvisor_actor_shell::Shell;
use shellvisor_actor_shell::ShellArgs;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_policy::is_reserved_env_name;
use shellvisor_process::EnvRecord;
use shellvisor_process::ExitInfo;
use shellvisor_process::ShellSpawnSpec;
use shellvisor_process::parse_exported_env;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::Result;
use tokio::sync::watch;

use crate::actor::SessionState;
use crate::actor::ShellEntry;
use crate::actor::ShellRole;
use crate::messages::SessionMsg;

/// How long seeding a shell waits for the primary's environment record of its
/// last run (the shell writes it right after the status; it only fails to come
/// if the shell died in between).
const ENV_RECORD_WAIT: Duration = Duration::from_millis(500);

impl SessionState {
    /// The shell a new foreground run gets: the primary if it is free,
    /// otherwise a fresh isolated shell with the session's state.
    pub(crate) async fn lend_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
    ) -> Result<ActorRef<ShellMsg>> {
        if self.primary.is_none() {
            self.start_primary(myself).await?;
        }
        if self.primary_holder.is_none()
            && let Some(primary) = self.primary.clone()
        {
            self.primary_holder = Some(job_id.clone());
            if let Some(entry) = self.shells.get_mut(&primary.get_id()) {
                entry.holder = Some(job_id.clone());
            }
            return Ok(primary);
        }
        self.isolated_shell(myself, job_id).await
    }

    /// A fresh shell for one job, started from the session's state.
    pub(crate) async fn isolated_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
    ) -> Result<ActorRef<ShellMsg>> {
        let (shell, _) = self.start_shell(myself, ShellRole::Isolated).await?;
        if let Some(entry) = self.shells.get_mut(&shell.get_id()) {
            entry.holder = Some(job_id.clone());
        }
        Ok(shell)
    }

    pub(crate) async fn start_primary(&mut self, myself: &ActorRef<SessionMsg>) -> Result<()> {
        if let Some(until) = self.unavailable_until {
            let now = Instant::now();
            if now < until {
                return Err(Error::ShellUnavailable {
                    session: self.args.id.to_string(),
                    restarts: self.budget.failures(now),
                    window_secs: self.args.config.restart.window_secs,
                    last_failure: self
                        .last_failure
                        .clone()
                        .unwrap_or_else(|| "unknown".to_owned()),
                });
            }
            self.unavailable_until = None;
        }
        if self.promote_standby() {
            return Ok(());
        }
        let (shell, env) = self.start_shell(myself, ShellRole::Primary).await?;
        self.primary = Some(shell);
        self.primary_holder = None;
        self.primary_env = Some(env);
        self.last_run_nonce = None;
        Ok(())
    }

    /// Starts a shell with the session's state, with its environment records
    /// (which a primary, or a standby that becomes one, seeds new shells from).
    pub(crate) async fn start_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        role: ShellRole,
    ) -> Result<(ActorRef<ShellMsg>, watch::Receiver<EnvRecord>)> {
        let env = self.shell_env().await;
        let (env_tx, env_rx) = watch::channel(EnvRecord::default());
        let config = &self.args.config;
        let cwd = if self.cwd.is_dir() {
            self.cwd.clone()
        } else {
            self.args
                .home
                .clone()
                .filter(|h| h.is_dir())
                .unwrap_or_else(|| PathBuf::from("/"))
        };
        let args = ShellArgs {
            spawner: Arc::clone(&self.args.spawner),
            registry: Arc::clone(&self.args.registry),
            spawn: ShellSpawnSpec {
                cgroup: self.args.cgroup.clone(),
                program: config.shell.program.clone(),
                env,
                cwd,
            },
            parent_dir: self.args.dir.clone(),
            startup_timeout: config.shell.startup_timeout(),
            kill_grace: config.timeouts.kill_grace(),
            notify: Some(myself.get_derived()),
            env: Some(env_tx),
        };
        let (shell, _) = Actor::spawn_linked(None, Shell, args, myself.get_cell())
            .await
            .map_err(|err| Error::Spawn {
                what: "shell".to_owned(),
                message: err.to_string(),
            })?;
        self.shells.insert(
            shell.get_id(),
            ShellEntry {
                actor: shell.clone(),
                role,
                holder: None,
            },
        );
        Ok((shell, env_rx))
    }

    /// The environment for a new shell: the primary's exported variables
    /// after its last completed run (minus reserved names), or the base
    /// environment before any.
    pub(crate) async fn shell_env(&mut self) -> Vec<(OsString, OsString)> {
        self.refresh_env_snapshot().await;
        if let Some(snapshot) = &self.env_snapshot {
            match parse_exported_env(snapshot) {
                Ok(vars) => {
                    return vars
                        .into_iter()
                        .filter(|(name, _)| name.to_str().is_some_and(|n| !is_reserved_env_name(n)))
                        .collect();
                }
                Err(err) => {
                    tracing::warn!(session = %self.args.id, %err, "unreadable environment snapshot; using the base environment");
                }
            }
        }
        self.args.base_env.as_ref().clone()
    }

    /// Takes the primary's latest environment record, waiting briefly for the
    /// one of its last completed run if it has not been read yet.
    async fn refresh_env_snapshot(&mut self) {
        let Some(receiver) = self.primary_env.as_mut() else {
            return;
        };
        if let Some(nonce) = self.last_run_nonce.clone() {
            let arrived = tokio::time::timeout(
                ENV_RECORD_WAIT,
                receiver.wait_for(|record| record.nonce == nonce),
            )
            .await;
            if !matches!(arrived, Ok(Ok(_))) {
                tracing::debug!(session = %self.args.id, "environment record of the last run missing; using the previous one");
            }
        }
        let record = receiver.borrow();
        if !record.env.is_empty() {
            self.env_snapshot = Some(record.env.clone());
        }
    }

    /// A job took the primary shell to the background: the session gets a
    /// fresh primary with the same state, so its next call is neither blocked
    /// behind the job nor stripped of its state.
    pub(crate) async fn detach_primary(&mut self, myself: &ActorRef<SessionMsg>, job_id: &JobId) {
        if self.primary_holder.as_ref() != Some(job_id) {
            return;
        }
        if let Some(entry) = self
            .primary
            .as_ref()
            .and_then(|p| self.shells.get_mut(&p.get_id()))
        {
            entry.role = ShellRole::Detached;
        }
        self.primary = None;
        self.primary_holder = None;
        if let Err(err) = self.start_primary(myself).await {
            tracing::warn!(session = %self.args.id, %err, "could not start a new primary shell");
        }
    }

    /// A Job's shell refused its run before anything ran: retire that shell
    /// and lend the Job another.
    pub(crate) async fn shell_refused(&mut self, myself: &ActorRef<SessionMsg>, job_id: &JobId) {
        let Some(job) = self.jobs.get_mut(job_id) else {
            return;
        };
        let actor = job.actor.clone();
        if let Some(old) = job.shell.take()
            && let Some(entry) = self.shells.get_mut(&old)
        {
            let was_primary = entry.role == ShellRole::Primary;
            entry.role = ShellRole::Retired;
            entry.holder = None;
            let _ = entry.actor.cast(ShellMsg::Kill(KillReason::Release));
            if was_primary && self.is_primary(old) {
                self.primary = None;
                self.primary_holder = None;
            }
        }
        match self.lend_shell(myself, job_id).await {
            Ok(shell) => {
                if let Some(job) = self.jobs.get_mut(job_id) {
                    job.shell = Some(shell.get_id());
                }
                let _ = actor.cast(JobMsg::UseShell(shell));
            }
            Err(err) => {
                let _ = actor.cast(JobMsg::ShellGone {
                    reason: err.to_string(),
                });
            }
        }
    }

    /// Takes a shell back from a job. `release` is `None` when its state is unknown.
    pub(crate) async fn release_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        shell_id: ActorId,
        release: Option<ShellRelease>,
    ) {
        let Some(entry) = self.shells.get_mut(&shell_id) else {
            return;
        };
        entry.holder = None;
        match (entry.role, release) {
            (
                ShellRole::Primary,
                Some(ShellRelease::Reusable {
                    status,
                    env_follows,
                }),
            ) => {
                if let Some(cwd) = status.cwd {
                    self.cwd = cwd;
                }
                if env_follows {
                    self.last_run_nonce = Some(status.nonce);
                }
                self.primary_holder = None;
                self.retire_standby();
            }
            (ShellRole::Primary, _) => {
                // It ended during the run (exit, exec, timeout) or is in an
                // unknown state: replace it with one that has the same state.
                // This is the user's doing, not a crash: no budget charge.
                entry.role = ShellRole::Retired;
                let _ = entry.actor.cast(ShellMsg::Kill(KillReason::Release));
                self.primary = None;
                self.primary_holder = None;
                if let Err(err) = self.start_primary(myself).await {
                    tracing::warn!(session = %self.args.id, %err, "could not replace the shell");
                }
            }
            (ShellRole::Isolated | ShellRole::Detached, Some(ShellRelease::Reusable { .. })) => {
                // Done, but `server &` started by its command may still run:
                // the shell stays until those processes are gone.
                entry.role = ShellRole::Retired;
                let poll = Duration::from_millis(self.args.config.jobs.child_poll_ms.max(10));
                let _ = entry.actor.cast(ShellMsg::Release { poll });
            }
            (
                ShellRole::Isolated | ShellRole::Detached | ShellRole::Standby | ShellRole::Retired,
                _,
            ) => {
                entry.role = ShellRole::Retired;
                let _ = entry.actor.cast(ShellMsg::Kill(KillReason::Release));
            }
        }
    }

    /// A shell's bash ended. A run in progress is reported by its Job; an
    /// idle primary is replaced now, so no run is lent a dead shell.
    pub(crate) async fn shell_ended(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        shell: ActorId,
        exit: ExitInfo,
        during_run: bool,
    ) {
        if self.standby_ended(&shell) {
            self.retire(&shell);
            return;
        }
        if during_run || !self.is_primary(shell) {
            return;
        }
        if let Some(entry) = self.shells.get_mut(&shell) {
            entry.role = ShellRole::Retired;
        }
        self.primary = None;
        self.primary_holder = None;
        let reason = format!(
            "the shell exited with status {} while idle",
            exit.shell_status()
        );
        self.primary_failed(myself, &reason).await;
    }

    /// The primary shell died outside any run, or failed to start: charge the
    /// budget and restart, or refuse until the window passes.
    pub(crate) async fn primary_failed(&mut self, myself: &ActorRef<SessionMsg>, reason: &str) {
        tracing::warn!(session = %self.args.id, reason, "shell ended unexpectedly");
        self.last_failure = Some(reason.to_owned());
        let now = Instant::now();
        if let Some(until) = self.budget.charge(now) {
            tracing::warn!(session = %self.args.id, "shell restart budget spent; shell unavailable until the window passes");
            self.unavailable_until = Some(until);
            return;
        }
        if let Err(err) = self.start_primary(myself).await {
            tracing::warn!(session = %self.args.id, %err, "could not restart the shell");
        }
    }
}
