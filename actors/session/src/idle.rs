//! Closing a session nobody uses (`sessions.idle_close_secs`): no call for
//! the limit, no job running, and no process that its commands left running
//! (`server &`) in any of its shells. The Session stops itself; the
//! supervisor forgets it, so a later call opens the session afresh.

use std::time::Duration;

use ractor::ActorRef;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_run::AbortOnDrop;
use shellvisor_run::Timer;
use tokio::time::Instant;

use crate::actor::SessionState;
use crate::messages::SessionMsg;

/// How long the primary shell may take to say whether it holds processes.
const OCCUPIED_DEADLINE: Duration = Duration::from_secs(5);

/// When the session was last used, and the check that closes it.
#[derive(Debug)]
pub(crate) struct IdleClock {
    limit: Option<Duration>,
    last_call: Instant,
    check: Option<Timer<SessionMsg>>,
}

impl IdleClock {
    /// A clock for `limit` (`None`: the session is never closed as idle).
    pub(crate) fn new(limit: Option<Duration>) -> Self {
        Self {
            limit,
            last_call: Instant::now(),
            check: None,
        }
    }

    /// A call arrived.
    pub(crate) fn touch(&mut self) {
        self.last_call = Instant::now();
    }

    /// Schedules the next check for when the limit will have passed since
    /// the last call.
    pub(crate) fn arm(&mut self, myself: &ActorRef<SessionMsg>) {
        let Some(limit) = self.limit else { return };
        let due = limit.saturating_sub(self.last_call.elapsed());
        self.check = Some(AbortOnDrop(
            myself.send_after(due, || SessionMsg::IdleCheck),
        ));
    }

    /// Whether the limit has passed since the last call.
    fn expired(&self) -> bool {
        self.limit
            .is_some_and(|limit| self.last_call.elapsed() >= limit)
    }
}

impl SessionState {
    /// The idle check fired: close the session if nothing uses it, else
    /// look again later.
    pub(crate) async fn idle_check(&mut self, myself: &ActorRef<SessionMsg>) {
        if !self.idle.expired() {
            self.idle.arm(myself);
            return;
        }
        if self.jobs.any_running() || !self.waiting.is_empty() || self.holds_processes().await {
            // In use without calls: look again a full period from now.
            self.idle.touch();
            self.idle.arm(myself);
            return;
        }
        tracing::info!(session = %self.args.id, "session closed after its idle limit");
        myself.stop(Some("idle".to_owned()));
    }

    /// Whether processes that commands left running live in the session's
    /// shells: a released shell is kept only while it has some; the primary
    /// is asked.
    async fn holds_processes(&self) -> bool {
        if self.shells.has_retiring() {
            return true;
        }
        let Some(primary) = self.shells.primary() else {
            return false;
        };
        let primary: ActorRef<ShellMsg> = primary.clone();
        matches!(
            primary
                .call(ShellMsg::Occupied, Some(OCCUPIED_DEADLINE))
                .await,
            Ok(ractor::rpc::CallResult::Success(true))
        )
    }
}
