//! A run's readiness (`wait_for`) and its idle timeout, as the Job acts on
//! them: output patterns and silence are watched by the Sink, ports and
//! paths polled by a task the Job owns.

use std::time::Duration;

use ractor::ActorRef;
use shellvisor_actor_sink::OutputWatch;
use shellvisor_actor_sink::SinkNotice;
use shellvisor_policy::ReadyCheck;
use shellvisor_policy::RunPlan;
use shellvisor_process::tcp_port_listening;
use shellvisor_protocol::BackgroundReason;
use shellvisor_protocol::SessionEvent;
use shellvisor_run::AbortOnDrop;
use shellvisor_run::KillReason;

use crate::actor::Caller;
use crate::actor::JobState;
use crate::messages::JobMsg;

/// How often a port or a path is checked.
const READY_POLL: Duration = Duration::from_millis(100);

/// Where a run's readiness stands.
#[derive(Debug, Default)]
pub(crate) enum Readiness {
    /// The run waits for nothing.
    #[default]
    NotAsked,
    /// Not yet; the poll task (for a port or a path) runs while this is held.
    Pending {
        /// Dropping it stops the poll.
        _poll: Option<AbortOnDrop<()>>,
    },
    /// It held.
    Reached,
}

/// What the Sink watches for this run, reporting to `myself`.
pub(crate) fn output_watch(plan: &RunPlan, myself: &ActorRef<JobMsg>) -> OutputWatch {
    let ready = match plan.ready.as_ref().map(|ready| &ready.check) {
        Some(ReadyCheck::Output(regex)) => Some(regex.clone()),
        _ => None,
    };
    let watched = ready.is_some() || plan.idle_timeout.is_some();
    OutputWatch {
        idle: plan.idle_timeout,
        ready,
        notify: watched.then(|| myself.get_derived()),
    }
}

/// The readiness of a run with `plan`: a poll task for a port or a path.
pub(crate) fn start_readiness(plan: &RunPlan, myself: &ActorRef<JobMsg>, run: u64) -> Readiness {
    let Some(ready) = &plan.ready else {
        return Readiness::NotAsked;
    };
    let probe: Box<dyn Fn() -> bool + Send + Sync> = match &ready.check {
        ReadyCheck::Output(_) => return Readiness::Pending { _poll: None },
        ReadyCheck::Port(port) => {
            let port = *port;
            Box::new(move || tcp_port_listening(port))
        }
        ReadyCheck::Path(path) => {
            let path = path.clone();
            Box::new(move || path.try_exists().unwrap_or(false))
        }
    };
    // The first check runs here, before the command is sent: what holds
    // now, the run did not make (one read of a socket table, or a stat).
    if probe() {
        let _ = myself.cast(JobMsg::ReadyPolled {
            run,
            already_at_start: true,
        });
        return Readiness::Pending { _poll: None };
    }
    let probe = std::sync::Arc::new(probe);
    let myself = myself.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(READY_POLL).await;
            let check = std::sync::Arc::clone(&probe);
            let held = tokio::task::spawn_blocking(move || check())
                .await
                .unwrap_or(false);
            if held {
                let _ = myself.cast(JobMsg::ReadyPolled {
                    run,
                    already_at_start: false,
                });
                return;
            }
        }
    });
    Readiness::Pending {
        _poll: Some(AbortOnDrop(task)),
    }
}

impl JobState {
    /// What the Sink saw: silence for the idle timeout, or the pattern.
    pub(crate) async fn output_notice(&mut self, myself: &ActorRef<JobMsg>, notice: SinkNotice) {
        match notice {
            SinkNotice::Idle => {
                if self.answers.result.is_none() {
                    self.kill(myself, KillReason::Idle);
                }
            }
            SinkNotice::Ready => self.ready(None).await,
        }
    }

    /// The run's `wait_for` held: say so on the event stream, and answer a
    /// waiting caller with the job (reason `ready`); the run goes on.
    pub(crate) async fn ready(&mut self, notice: Option<String>) {
        if self.answers.result.is_some() || !matches!(self.readiness, Readiness::Pending { .. }) {
            return;
        }
        self.readiness = Readiness::Reached;
        let what = self
            .plan
            .ready
            .as_ref()
            .map_or_else(String::new, |ready| ready.what.clone());
        let _ = self.events.send(SessionEvent::JobReady {
            job_id: self.job_id.clone(),
            what: what.clone(),
        });
        if matches!(self.caller, Caller::Waiting(_)) {
            self.plan.notices.push(format!("Ready: {what}."));
            if let Some(notice) = notice {
                self.plan.notices.push(notice);
            }
            self.background_now(BackgroundReason::Ready).await;
        }
    }

    /// A run that ends before its `wait_for` held says so.
    pub(crate) fn note_unready(&mut self) {
        if matches!(self.readiness, Readiness::Pending { .. })
            && let Some(ready) = &self.plan.ready
        {
            self.plan.notices.push(format!(
                "The command ended before it was ready (waiting for {}).",
                ready.what
            ));
        }
        self.readiness = Readiness::NotAsked;
    }
}
