//! Runs on a pseudo-terminal (`pty: true`): opening the terminal and
//! starting the Job that drives it.

use std::ffi::OsString;

use ractor::ActorRef;
use shellvisor_actor_job::JobStart;
use shellvisor_actor_job::Runner;
use shellvisor_actor_pty::PtyLaunch;
use shellvisor_policy::RunPlan;
use shellvisor_process::pty::Terminal;
use shellvisor_process::pty::TerminalSpawnSpec;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunRequest;
use shellvisor_protocol::TerminalSize;

use crate::actor::SessionState;
use crate::jobs::RunCaller;
use crate::messages::SessionMsg;

/// Notice added when a PTY is requested but cannot be provided.
const PTY_UNAVAILABLE_NOTICE: &str =
    "pty requested but unavailable in this environment; ran without a terminal";

/// An open terminal and its size.
pub(crate) type OpenTerminal = (Terminal, TerminalSize);

impl SessionState {
    /// Opens a terminal for a `pty` request. `Ok(None)` when terminals are
    /// turned off or none can be opened: the run then goes without one and
    /// its plan carries the fallback notice.
    pub(crate) fn open_terminal(
        &mut self,
        request: &RunRequest,
        plan: &mut RunPlan,
    ) -> Result<Option<OpenTerminal>> {
        let config = &self.args.ctx.config.pty;
        if !config.enabled {
            plan.notices.push(PTY_UNAVAILABLE_NOTICE.to_owned());
            return Ok(None);
        }
        if self.jobs.running_terminals() >= config.max_running_per_session {
            return Err(Error::PtyBusy {
                limit: config.max_running_per_session,
            });
        }
        let size = TerminalSize::clamped(request.cols, request.rows);
        match self.args.ctx.pty_backend.open(size) {
            Ok(terminal) => Ok(Some((terminal, size))),
            Err(err) => {
                tracing::warn!(session = %self.args.id, %err, "no pseudo-terminal available; running without one");
                plan.notices.push(PTY_UNAVAILABLE_NOTICE.to_owned());
                Ok(None)
            }
        }
    }

    /// Starts a run on a terminal: `bash -c <command>` with the session's
    /// exported environment, `TERM=xterm-256color` and the call's variables,
    /// in the call's (or the session's) directory. Explicit async answers at
    /// once; otherwise the caller waits for the exit, the auto-background
    /// timer, or the program waiting for input.
    pub(crate) async fn run_on_terminal(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: &RunRequest,
        job_id: JobId,
        plan: RunPlan,
        (terminal, size): OpenTerminal,
        caller: RunCaller,
    ) {
        let mut env: Vec<(OsString, OsString)> = self
            .shell_env()
            .await
            .into_iter()
            .filter(|(name, _)| name != "TERM" && !plan.env.iter().any(|(n, _)| name == n.as_str()))
            .collect();
        env.push(("TERM".into(), "xterm-256color".into()));
        env.extend(plan.env.iter().map(|(n, v)| (n.into(), v.into())));
        let spec = TerminalSpawnSpec {
            containment: self.args.containment.clone(),
            nice: self.args.ctx.config.shell.nice,
            program: self.args.ctx.config.shell.program.clone(),
            args: vec![
                "--noprofile".into(),
                "--norc".into(),
                "-c".into(),
                plan.command.clone().into(),
            ],
            env,
            cwd: plan
                .cwd
                .clone()
                .unwrap_or_else(|| self.shells.cwd().to_path_buf()),
        };
        let runner = Runner::Pty(Box::new(PtyLaunch {
            terminal,
            size,
            spec,
        }));
        if !request.run_async {
            if let Some(spawn) = self.start_foreground(myself, job_id, plan, runner, caller) {
                let _ = self.spawn_job(myself, spawn).await;
            }
            return;
        }
        let slot = match self.args.slots.try_acquire() {
            Ok(slot) => slot,
            Err(limit) => {
                let _ = caller.reply.send(Err(Error::JobLimitReached { limit }));
                return;
            }
        };
        let answer = self.requested_start(&job_id, &plan);
        let outcome = self
            .start_job(
                myself,
                job_id,
                plan,
                runner,
                JobStart::Background { slot },
                caller.started,
            )
            .await
            .map(|()| RunOutcome::Backgrounded(answer));
        let _ = caller.reply.send(outcome);
    }
}
