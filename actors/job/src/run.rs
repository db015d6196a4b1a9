//! Driving the run: starting it on its runner, killing it, finishing it.

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use ractor::MessagingErr;
use shellvisor_actor_pty::PtyMsg;
use shellvisor_actor_shell::ExecRequest;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::SessionEvent;
use shellvisor_run::AbortOnDrop;
use shellvisor_run::KillReason;
use shellvisor_run::RunNotice;
use shellvisor_run::RunReport;

use crate::actor::Caller;
use crate::actor::JobState;
use crate::actor::RunnerRef;
use crate::limits::RunLimitsState;
use crate::messages::CallerAnswer;
use crate::messages::JobMsg;
use crate::messages::JobNotice;
use crate::record::FinishedRun;
use crate::result::build_result;

/// Extra time, past the kill grace, that a runner may take to report a killed run.
const UNRESPONSIVE_AFTER_KILL: Duration = Duration::from_secs(5);

impl JobState {
    /// Sends the command to the shell (a terminal run starts with its
    /// PtySession instead).
    pub(crate) fn exec(&self, myself: &ActorRef<JobMsg>) {
        let RunnerRef::Shell { shell, .. } = &self.runner else {
            return;
        };
        let reply_to = self.run_notices.clone();
        let request = ExecRequest {
            command: self.plan.command.clone(),
            cwd: self.plan.cwd.clone(),
            env: self.plan.env.clone(),
            sink: self.feed.clone(),
            confinement: self.limits.as_ref().map(RunLimitsState::confinement),
            reply_to,
        };
        if shell.cast(ShellMsg::Exec(request)).is_err() {
            let _ = myself.cast(JobMsg::Runner(RunNotice::Finished(Box::new(
                RunReport::refused("the shell had already stopped"),
            ))));
        }
    }

    /// Asks the runner to kill the run's process tree (once), with a
    /// watchdog in case it never reports.
    pub(crate) fn kill(&mut self, myself: &ActorRef<JobMsg>, reason: KillReason) {
        if self.kill_sent {
            return;
        }
        self.kill_sent = true;
        let sent = match &self.runner {
            RunnerRef::Shell { shell, .. } => shell.cast(ShellMsg::KillRun(reason)).is_ok(),
            RunnerRef::Pty {
                session: Some(pty), ..
            } => pty.cast(PtyMsg::Kill(reason)).is_ok(),
            RunnerRef::Pty { session: None, .. } => false,
        };
        if !sent {
            let _ = myself.cast(JobMsg::ShellGone {
                reason: "the shell stopped before it could be killed".to_owned(),
            });
        }
        let wait = self.ctx.config.timeouts.kill_grace() + UNRESPONSIVE_AFTER_KILL;
        let run = self.run;
        self.watchdog = Some(AbortOnDrop(
            myself.send_after(wait, move || JobMsg::Unresponsive(run)),
        ));
    }

    /// The run is over: build the result, free the shell and the slot, and
    /// hand the result to its caller, its waiters or the completion stream.
    pub(crate) fn finish(&mut self, myself: &ActorRef<JobMsg>, report: RunReport) {
        if self.answers.result.is_some() {
            return;
        }
        // Neither the deadline nor the move to the background can come now
        // (the clock's timer stays armed for the retention or the next run).
        self.clock.run_over();
        self.watchdog = None;
        self.note_unready();
        let limits = self.limits.as_ref().map(RunLimitsState::report);
        if let Some((_, notices)) = &limits {
            self.plan.notices.extend(notices.iter().cloned());
        }
        // The run's shell ran the session's init first: a failure of it (the
        // session's first) is told here, once.
        if let Some(notice) = self.init.as_ref().and_then(|init| init.take_notice()) {
            self.plan.notices.push(notice);
        }
        tracing::trace!(target: "shellvisor::stage", "job: finished received");
        let (result, release) = build_result(
            &self.job_id,
            &self.plan,
            report,
            self.started.elapsed(),
            self.ctx.config.output.inline_bytes,
        );
        let mut result = result;
        result.limits = limits.map(|(report, _)| Box::new(report));
        let result = Arc::new(result);
        if let RunnerRef::Pty { state, .. } = &mut self.runner {
            *state = PtyState::Exited {
                code: result.exit_code,
            };
        }
        // The slot is free as soon as the run is over.
        self.slot = None;
        let record = self.recordable().then(|| {
            Arc::new(FinishedRun::new(
                self.finished_info(&result),
                Arc::clone(&result),
                self.feed.clone(),
            ))
        });
        self.recorded = record.is_some();
        let background = matches!(self.caller, Caller::Backgrounded);
        // A wait that takes the result is its delivery, so the completion
        // stream gets it only when nobody waits (a waiter that drops its
        // offer untaken gives it back, and then it goes there).
        self.answers.waiters.retain(|waiter| !waiter.is_closed());
        let deliver = background && self.answers.waiters.is_empty();
        // The Session must learn the shell (and the terminal slot) is free
        // before any caller, waiter or not, can send its next request: a
        // foreground caller is answered by the Session itself, as it takes
        // the shell back (see `CallerAnswer`).
        let answer = match std::mem::replace(&mut self.caller, Caller::Answered) {
            Caller::Waiting(reply) => Some(CallerAnswer::new(reply, Arc::clone(&result))),
            other => {
                self.caller = other;
                None
            }
        };
        let notice = JobNotice::Finished {
            job_id: self.job_id.clone(),
            release,
            deliver,
            record,
            answer,
        };
        if let Err(MessagingErr::SendErr(JobNotice::Finished {
            answer: Some(answer),
            ..
        })) = self.notify.send_message(notice)
        {
            // The Session is gone: the caller still gets its result.
            answer.send();
        }
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(SessionEvent::JobFinished {
                job_id: self.job_id.clone(),
                exit_code: result.exit_code,
                timed_out: result.timed_out,
            });
        }
        if self.recorded {
            // The Session keeps the record for its retention; nothing of
            // this run is left to time.
            self.clock.clear();
        } else {
            // Armed before anyone is answered: a task spawned after the
            // reply would take the caller's place as the next task on this
            // thread (tokio's LIFO slot) and push the caller to another
            // worker.
            self.arm_eviction(myself);
        }
        let waiters = std::mem::take(&mut self.answers.waiters);
        self.answers.result = Some(result);
        for waiter in waiters {
            self.answer_wait(myself, waiter);
        }
        for killer in self.answers.kill_waiters.drain(..) {
            let _ = killer.send(Ok(()));
        }
    }

    /// Whether the run, now over, can be a record (see [`FinishedRun`]): a
    /// foreground run on a shell whose caller is answered now, ended by the
    /// shell's own report, with nothing that could still message this run
    /// (no readiness, silence clock or limits).
    fn recordable(&self) -> bool {
        self.runner_reported
            && matches!(self.runner, RunnerRef::Shell { .. })
            && matches!(self.caller, Caller::Waiting(_))
            && self.plan.ready.is_none()
            && self.plan.idle_timeout.is_none()
            && self.limits.is_none()
    }
}
