//! The session's shells: starting, lending, taking back, replacing. The
//! [`ShellPool`](crate::pool::ShellPool) decides; this carries it out.

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
use shellvisor_run::KillReason;
use tokio::sync::watch;

use crate::actor::SessionState;
use crate::messages::SessionMsg;
use crate::pool::BashEnded;
use crate::pool::Returned;

impl SessionState {
    /// The shell a new foreground run gets: the primary if it is free,
    /// otherwise a fresh isolated shell with the session's state.
    pub(crate) async fn lend_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
    ) -> Result<ActorRef<ShellMsg>> {
        if let Some(primary) = self.shells.lend_primary(job_id) {
            return Ok(primary);
        }
        // Boxed, as every start of a shell or Job on a message's path:
        // ractor moves the handler's future with each message the Session
        // gets, and a future is as large as its largest await (a shell's
        // start) even when, as for most runs, that await is never reached
        // (docs/architecture.md, "Measured costs").
        Box::pin(self.lend_started_shell(myself, job_id)).await
    }

    /// [`Self::lend_shell`] when the primary is missing or busy.
    async fn lend_started_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
    ) -> Result<ActorRef<ShellMsg>> {
        if !self.shells.has_primary() {
            self.start_primary(myself).await?;
        }
        if let Some(primary) = self.shells.lend_primary(job_id) {
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
        let (shell, _) = self.start_shell(myself).await?;
        if let Some(displaced) = self.shells.lend(job_id, shell.clone()) {
            self.release(&displaced);
        }
        Ok(shell)
    }

    /// Starts the primary shell: the standby if one is ready, otherwise a
    /// new shell, unless the restart budget is spent.
    pub(crate) async fn start_primary(&mut self, myself: &ActorRef<SessionMsg>) -> Result<()> {
        if let Err(spent) = self.budget.check(Instant::now()) {
            return Err(Error::ShellUnavailable {
                session: self.args.id.to_string(),
                restarts: spent.restarts,
                window_secs: self.args.ctx.config.restart.window_secs,
                last_failure: spent.last_failure,
            });
        }
        self.standby.withdraw();
        if self.shells.promote_standby() {
            tracing::debug!(session = %self.args.id, "standby shell promoted to primary");
            return Ok(());
        }
        let (shell, records) = self.start_shell(myself).await?;
        if let Some(displaced) = self.shells.install_primary(shell, records) {
            self.release(&displaced);
        }
        Ok(())
    }

    /// Starts a shell with the session's state, with its environment records
    /// (which a primary, or a standby that becomes one, seeds new shells from).
    pub(crate) async fn start_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
    ) -> Result<(ActorRef<ShellMsg>, watch::Receiver<EnvRecord>)> {
        let limit = self.args.ctx.config.sessions.max_shells_per_session.max(1);
        if self.shells.len() >= limit {
            return Err(Error::ShellLimitReached {
                session: self.args.id.to_string(),
                limit,
            });
        }
        let env = self.shell_env().await;
        let (records_tx, records) = watch::channel(EnvRecord::default());
        let ctx = &self.args.ctx;
        let last = self.shells.cwd();
        let cwd = if last.is_dir() {
            last.to_path_buf()
        } else {
            let elsewhere = ctx
                .home
                .clone()
                .filter(|h| h.is_dir())
                .unwrap_or_else(|| PathBuf::from("/"));
            // The next run says so; the session is where its shell is.
            self.relocated = Some(format!(
                "The session's working directory {} no longer exists; its new shell starts in {}.",
                last.display(),
                elsewhere.display()
            ));
            self.shells.moved_to(elsewhere.clone());
            elsewhere
        };
        let args = ShellArgs {
            ctx: Arc::clone(ctx),
            spawn: ShellSpawnSpec {
                containment: self.args.containment.clone(),
                nice: ctx.config.shell.nice,
                program: ctx.config.shell.program.clone(),
                env,
                cwd,
            },
            parent_dir: self.args.dir.clone(),
            notify: Some(myself.get_derived()),
            env: Some(records_tx),
            init: self.args.init.clone().filter(|init| init.enabled()),
        };
        // Boxed, as every actor start on a message's path (see `lend_shell`).
        let (shell, _) = Box::pin(Actor::spawn_linked(None, Shell, args, myself.get_cell()))
            .await
            .map_err(|err| Error::Spawn {
                what: "shell".to_owned(),
                message: err.to_string(),
            })?;
        Ok((shell, records))
    }

    /// The environment for a new shell: the primary's exported variables
    /// after its last completed run (minus reserved names), or the base
    /// environment before any.
    pub(crate) async fn shell_env(&mut self) -> Vec<(OsString, OsString)> {
        self.shells.refresh_env().await;
        if let Some(snapshot) = self.shells.env() {
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
        self.args.ctx.base_env.clone()
    }

    /// A job took the primary shell to the background: the session gets a
    /// fresh primary with the same state, so its next call is neither blocked
    /// behind the job nor stripped of its state. The call's own directory
    /// (`cwd`, or a rewritten leading `cd`) is where the session now is.
    pub(crate) async fn detach_primary(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
        cwd: Option<PathBuf>,
    ) {
        if !self.shells.detach_primary(job_id) {
            return;
        }
        if let Some(cwd) = cwd {
            // A standby was started from the old directory: not this one.
            if self.shells.cwd() != cwd
                && let Some(standby) = self.shells.retire_standby()
            {
                stop(&standby);
            }
            self.shells.moved_to(cwd);
        }
        if let Err(err) = self.start_primary(myself).await {
            tracing::warn!(session = %self.args.id, %err, "could not start a new primary shell");
        }
    }

    /// A Job's shell refused its run before anything ran: retire that shell
    /// and lend the Job another.
    pub(crate) async fn shell_refused(&mut self, myself: &ActorRef<SessionMsg>, job_id: &JobId) {
        let Some(job) = self.jobs.get(job_id).cloned() else {
            return;
        };
        if let Some(old) = self.shells.take_held(job_id) {
            self.release(&old);
        }
        match self.lend_shell(myself, job_id).await {
            Ok(shell) => {
                let _ = job.send(JobMsg::UseShell(shell));
            }
            Err(err) => {
                let _ = job.send(JobMsg::ShellGone {
                    reason: err.to_string(),
                });
            }
        }
    }

    /// Takes back the shell `job_id` held. `release` is `None` when its
    /// state is unknown.
    pub(crate) async fn give_back_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
        release: Option<ShellRelease>,
    ) {
        if self.take_back_shell(job_id, release.as_ref()) {
            self.replace_primary(myself).await;
        }
    }

    /// The part of [`Self::give_back_shell`] that sends nothing and waits
    /// for nothing: returns whether the primary shell was lost and must be
    /// replaced ([`Self::replace_primary`]).
    pub(crate) fn take_back_shell(
        &mut self,
        job_id: &JobId,
        release: Option<&ShellRelease>,
    ) -> bool {
        match self.shells.give_back(job_id, release) {
            Returned::Nothing => false,
            Returned::PrimaryKept { stale_standby } => {
                self.standby.withdraw();
                if let Some(standby) = stale_standby {
                    stop(&standby);
                }
                false
            }
            Returned::PrimaryLost(shell) => {
                // Processes earlier runs left running in it (`server &`)
                // live on until they end or the session closes.
                self.release(&shell);
                true
            }
            Returned::Release(shell) => {
                self.release(&shell);
                false
            }
        }
    }

    /// Starts a new primary shell in place of a lost one.
    pub(crate) async fn replace_primary(&mut self, myself: &ActorRef<SessionMsg>) {
        if let Err(err) = self.start_primary(myself).await {
            tracing::warn!(session = %self.args.id, %err, "could not replace the shell");
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
        killed: bool,
    ) {
        match self.shells.bash_ended(&shell, during_run) {
            BashEnded::Nothing => {}
            BashEnded::Standby(standby) => stop(&standby),
            BashEnded::IdlePrimary(_) if killed => {
                // The runtime gave it up (a broken channel): replace it, not
                // charged to the restart budget.
                self.replace_primary(myself).await;
            }
            BashEnded::IdlePrimary(_) => {
                // Its actor stays for processes its commands left running.
                let reason = format!(
                    "the shell exited with status {} while idle",
                    exit.shell_status()
                );
                self.primary_failed(myself, &reason).await;
            }
        }
    }

    /// The primary shell died outside any run, or failed to start: charge the
    /// budget and restart, or refuse until the window passes.
    pub(crate) async fn primary_failed(&mut self, myself: &ActorRef<SessionMsg>, reason: &str) {
        tracing::warn!(session = %self.args.id, reason, "shell ended unexpectedly");
        if !self.budget.charge(Instant::now(), reason) {
            tracing::warn!(session = %self.args.id, "shell restart budget spent; shell unavailable until the window passes");
            return;
        }
        if let Err(err) = self.start_primary(myself).await {
            tracing::warn!(session = %self.args.id, %err, "could not restart the shell");
        }
    }
}

impl SessionState {
    /// Lets a shell that ran commands go: it stops once the processes its
    /// commands left running are gone (or when the session closes).
    pub(crate) fn release(&self, shell: &ActorRef<ShellMsg>) {
        let poll = Duration::from_millis(self.args.ctx.config.jobs.child_poll_ms.max(10));
        let _ = shell.cast(ShellMsg::Release { poll });
    }
}

/// Stops a shell that never ran a command (a standby), now.
pub(crate) fn stop(shell: &ActorRef<ShellMsg>) {
    let _ = shell.cast(ShellMsg::Stop(KillReason::Release));
}
