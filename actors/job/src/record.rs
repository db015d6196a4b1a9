//! A finished run kept as a record once its Job actor moves on to the
//! session's next run, and a handle to a job, live or recorded.

use std::sync::Arc;

use ractor::ActorRef;
use ractor::MessagingErr;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobInfo;
use shellvisor_protocol::RunResult;

use crate::info::COUNT_DEADLINE;
use crate::messages::JobMsg;
use crate::offer::Offer;

/// A finished foreground run whose caller has its result: what the job API
/// still reports of it (its state, its result, its output by offset) for
/// its retention, without an actor of its own.
///
/// Only such a run becomes a record: its shell reported its end (so the
/// shell sends nothing more about it), nothing of it is pending (no timer,
/// watch, limits or terminal), and its result needs no delivery.
#[derive(Debug)]
pub struct FinishedRun {
    info: JobInfo,
    /// Shared with the Job that ran it (until it serves another run).
    result: Arc<RunResult>,
    feed: SinkFeed,
}

impl FinishedRun {
    pub(crate) fn new(info: JobInfo, result: Arc<RunResult>, feed: SinkFeed) -> Self {
        Self { info, result, feed }
    }

    /// The job's state.
    pub fn info(&self) -> &JobInfo {
        &self.info
    }

    /// The run's output (its Sink, if output started one).
    pub fn feed(&self) -> &SinkFeed {
        &self.feed
    }

    /// Answers a job request as the Job did once the run was over: reads
    /// go to the Sink, a wait gets the result at once, a kill has nothing
    /// to do, a terminal call is refused. Nothing else concerns a record.
    pub fn answer(&self, message: JobMsg) {
        match message {
            JobMsg::ReadOutput { offset, max, reply } => self.feed.read(offset, max, reply),
            // Output of the run's `&` children after it ended is counted
            // too (the Sink is asked only then, off the caller's actor).
            JobMsg::GetInfo(reply) if self.feed.late_output() => {
                let (feed, mut info) = (self.feed.clone(), self.info.clone());
                tokio::spawn(async move {
                    if let Some(total) = feed.total_bytes(COUNT_DEADLINE).await {
                        info.output_bytes = info.output_bytes.max(total);
                    }
                    let _ = reply.send(Ok(info));
                });
            }
            JobMsg::GetInfo(reply) => {
                let _ = reply.send(Ok(self.info.clone()));
            }
            JobMsg::Wait(reply) => {
                let _ = reply.send(Ok(Offer::settled(Arc::clone(&self.result))));
            }
            // Its caller had the result: it is not the completion stream's.
            JobMsg::Claim(reply) => {
                let _ = reply.send(None);
            }
            JobMsg::Kill(reply) => {
                let _ = reply.send(Ok(()));
            }
            JobMsg::PtyCall(call) => call.refuse(Error::NotInteractive {
                id: self.info.job_id.to_string(),
            }),
            _ => {}
        }
    }
}

/// One of a session's jobs: its live actor, or the record of a finished run.
#[derive(Clone, Debug)]
pub enum JobRef {
    /// The job's actor.
    Live(ActorRef<JobMsg>),
    /// A finished run's record.
    Finished(Arc<FinishedRun>),
}

impl JobRef {
    /// Sends a request to the job; `Err` gives the message back when its
    /// actor has stopped.
    pub fn send(&self, message: JobMsg) -> Result<(), JobMsg> {
        match self {
            JobRef::Live(actor) => match actor.cast(message) {
                Ok(()) => Ok(()),
                Err(MessagingErr::SendErr(message)) => Err(message),
                // A cast fails only by handing the message back; anything
                // else has nothing to give back and dropped the message.
                Err(_) => Ok(()),
            },
            JobRef::Finished(record) => {
                record.answer(message);
                Ok(())
            }
        }
    }

    /// The job's actor, while it has one.
    pub fn actor(&self) -> Option<&ActorRef<JobMsg>> {
        match self {
            JobRef::Live(actor) => Some(actor),
            JobRef::Finished(_) => None,
        }
    }
}
