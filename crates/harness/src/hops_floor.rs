//! The runtime's message path of a run with no shell behind it: stand-ins
//! for the Session, a pooled Job and the Shell, as ractor actors, and the
//! Shell's I/O task as a tokio task, passing a run along the hops a real
//! run takes (caller → Session → Job → Shell → I/O task → Job → Session and
//! caller) and doing nothing else. Its round trip is what the actor design's
//! hops cost alone; with the protocol alone's, it says how much of the
//! library's round trip is hops and how much is work that could still go.

use std::time::Instant;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::SupervisionEvent;
use tokio::sync::mpsc;
use tokio::sync::oneshot;

use crate::samples::Samples;

/// A caller's reply port.
type Reply = oneshot::Sender<u64>;

enum SessionMsg {
    /// A caller's run.
    Run(Reply),
    /// The Job's "finished, the shell is free".
    Finished,
}

enum JobMsg {
    /// The Session's next run for this pooled Job.
    Begin(Reply),
    /// The I/O task's report of the run.
    Report,
}

enum ShellMsg {
    /// The Job's run.
    Exec(ActorRef<JobMsg>),
}

struct HopSession;

struct SessionState {
    job: ActorRef<JobMsg>,
    finished: u64,
}

impl Actor for HopSession {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        (): (),
    ) -> Result<SessionState, ActorProcessingErr> {
        let (shell, _) = Actor::spawn_linked(None, HopShell, (), myself.get_cell()).await?;
        let (job, _) =
            Actor::spawn_linked(None, HopJob, (myself.clone(), shell), myself.get_cell()).await?;
        Ok(SessionState { job, finished: 0 })
    }

    async fn handle(
        &self,
        _: ActorRef<SessionMsg>,
        message: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SessionMsg::Run(reply) => state.job.cast(JobMsg::Begin(reply))?,
            SessionMsg::Finished => state.finished += 1,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<SessionMsg>,
        _: SupervisionEvent,
        _: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

struct HopJob;

struct JobState {
    session: ActorRef<SessionMsg>,
    shell: ActorRef<ShellMsg>,
    caller: Option<Reply>,
    runs: u64,
}

impl Actor for HopJob {
    type Msg = JobMsg;
    type State = JobState;
    type Arguments = (ActorRef<SessionMsg>, ActorRef<ShellMsg>);

    async fn pre_start(
        &self,
        _: ActorRef<JobMsg>,
        (session, shell): Self::Arguments,
    ) -> Result<JobState, ActorProcessingErr> {
        Ok(JobState {
            session,
            shell,
            caller: None,
            runs: 0,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<JobMsg>,
        message: JobMsg,
        state: &mut JobState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            JobMsg::Begin(reply) => {
                state.caller = Some(reply);
                state.shell.cast(ShellMsg::Exec(myself))?;
            }
            JobMsg::Report => {
                state.runs += 1;
                state.session.cast(SessionMsg::Finished)?;
                if let Some(caller) = state.caller.take() {
                    let _ = caller.send(state.runs);
                }
            }
        }
        Ok(())
    }
}

struct HopShell;

impl Actor for HopShell {
    type Msg = ShellMsg;
    type State = mpsc::UnboundedSender<ActorRef<JobMsg>>;
    type Arguments = ();

    async fn pre_start(
        &self,
        _: ActorRef<ShellMsg>,
        (): (),
    ) -> Result<Self::State, ActorProcessingErr> {
        // The I/O task: it gets the run from the Shell and reports it.
        let (runs, mut rx) = mpsc::unbounded_channel::<ActorRef<JobMsg>>();
        tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                let _ = job.cast(JobMsg::Report);
            }
        });
        Ok(runs)
    }

    async fn handle(
        &self,
        _: ActorRef<ShellMsg>,
        ShellMsg::Exec(job): ShellMsg,
        io: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        io.send(job)?;
        Ok(())
    }
}

/// The hops of a run with no shell, ready to be timed.
pub(crate) struct HopPath {
    session: ActorRef<SessionMsg>,
}

impl HopPath {
    /// Starts the stand-ins on the current runtime.
    ///
    /// # Errors
    /// When an actor cannot start.
    pub(crate) async fn start() -> std::io::Result<Self> {
        let (session, _) = Actor::spawn(None, HopSession, ())
            .await
            .map_err(std::io::Error::other)?;
        Ok(Self { session })
    }

    /// `count` round trips, each timed, from a task on the runtime's
    /// workers (as the library's figure is taken).
    ///
    /// # Errors
    /// When a stand-in has stopped.
    pub(crate) async fn round_trips(&self, count: usize) -> std::io::Result<Samples> {
        let session = self.session.clone();
        tokio::spawn(async move {
            let mut samples = Samples::default();
            for _ in 0..count {
                let started = Instant::now();
                let (tx, rx) = oneshot::channel();
                session
                    .cast(SessionMsg::Run(tx))
                    .map_err(|_| std::io::Error::other("the session stand-in stopped"))?;
                rx.await.map_err(std::io::Error::other)?;
                samples.push(started.elapsed());
            }
            Ok(samples)
        })
        .await
        .map_err(std::io::Error::other)?
    }
}

impl Drop for HopPath {
    fn drop(&mut self) {
        // Its children (the Job and the Shell) stop with it.
        self.session.stop(None);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_run_goes_the_whole_path_and_is_answered() {
        let path = HopPath::start().await.unwrap();
        let samples = path.round_trips(50).await.unwrap();
        assert_eq!(samples.len(), 50);
        // The Job answered each run once, in order: the 51st is its 51st.
        let (tx, rx) = oneshot::channel();
        path.session.cast(SessionMsg::Run(tx)).unwrap();
        assert_eq!(rx.await.unwrap(), 51);
    }
}
