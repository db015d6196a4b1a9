//! The one way the runtime kills what a run started: SIGTERM and SIGCONT,
//! then SIGKILL once the grace period has passed.

use std::time::Duration;

use ractor::ActorRef;
use ractor::Message;
use shellvisor_process::GroupGuard;
use shellvisor_process::ProcessSessionId;
use shellvisor_process::RunIdentity;
use shellvisor_process::Signal;

use crate::report::KillReason;
use crate::timers::AbortOnDrop;
use crate::timers::Timer;

/// How long killing a terminal session may rescan for members.
const KILL_ALL_DEADLINE: Duration = Duration::from_secs(1);

/// Something a run's processes can be signalled through.
pub trait KillTarget {
    /// SIGTERM, then SIGCONT (a stopped process holds SIGTERM until it is
    /// continued).
    fn terminate(&self);
    /// SIGKILL.
    fn kill(&self);
}

/// A process group (a pipe shell and the `&` jobs it started): signalled at once.
impl KillTarget for GroupGuard {
    fn terminate(&self) {
        for signal in [Signal::Term, Signal::Cont] {
            if let Err(err) = self.signal(signal) {
                tracing::warn!(%err, ?signal, "could not signal a process group");
            }
        }
    }

    fn kill(&self) {
        if let Err(err) = self.signal(Signal::Kill) {
            tracing::warn!(%err, "could not kill a process group");
        }
    }
}

/// Every process group of a POSIX session (a terminal program and its
/// job-control groups). Finding the groups reads `/proc`, so the signals are
/// sent from tokio's blocking pool, never from an async worker.
impl KillTarget for ProcessSessionId {
    fn terminate(&self) {
        let session = *self;
        tokio::task::spawn_blocking(move || {
            session.signal(Signal::Term);
            session.signal(Signal::Cont);
        });
    }

    fn kill(&self) {
        let session = *self;
        tokio::task::spawn_blocking(move || session.kill_all(KILL_ALL_DEADLINE));
    }
}

/// What one run started (see [`RunIdentity`]), its leader included: found by
/// a `/proc` scan, so signalled from tokio's blocking pool.
impl KillTarget for RunIdentity {
    fn terminate(&self) {
        let run = self.clone();
        tokio::task::spawn_blocking(move || {
            run.signal(Signal::Term);
            run.signal(Signal::Cont);
        });
    }

    fn kill(&self) {
        let run = self.clone();
        tokio::task::spawn_blocking(move || run.kill_all(KILL_ALL_DEADLINE));
    }
}

/// A kill in progress: TERM and CONT were sent; after the grace period the
/// actor gets `on_grace()` and calls [`Escalation::grace_elapsed`], which
/// sends KILL. Dropping it (with the actor's state) cancels the timer.
#[derive(Debug)]
pub struct Escalation<M: Message> {
    reason: KillReason,
    grace: Duration,
    on_grace: fn() -> M,
    timer: Option<Timer<M>>,
}

impl<M: Message> Escalation<M> {
    /// Sends TERM and CONT to `target` and arms the grace timer.
    pub fn begin(
        reason: KillReason,
        target: &impl KillTarget,
        myself: &ActorRef<M>,
        grace: Duration,
        on_grace: fn() -> M,
    ) -> Self {
        target.terminate();
        let mut escalation = Self {
            reason,
            grace,
            on_grace,
            timer: None,
        };
        escalation.rearm(myself);
        escalation
    }

    /// Why the run is being killed.
    pub fn reason(&self) -> KillReason {
        self.reason
    }

    /// The grace period passed: SIGKILL to `target`.
    pub fn grace_elapsed(&mut self, target: &impl KillTarget) {
        self.timer = None;
        target.kill();
    }

    /// Sends `on_grace()` again after another grace period (for a runner
    /// that keeps killing until it sees its process end).
    pub fn rearm(&mut self, myself: &ActorRef<M>) {
        self.timer = Some(AbortOnDrop(myself.send_after(self.grace, self.on_grace)));
    }

    /// The target ended: no more signals.
    pub fn settle(&mut self) {
        self.timer = None;
    }
}
