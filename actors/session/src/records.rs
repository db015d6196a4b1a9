//! Pooled Job actors and the records of the runs they finished.
//!
//! A foreground run on a shell that ends with its caller answered leaves
//! nothing that needs an actor: its Job hands the Session a record of it
//! (state, result, output) and waits for the session's next run. One Job
//! start then serves a session's successive runs, and a retained run costs
//! no actor. The records' Sinks move under the Session, so a Job that goes
//! on to run something else, or stops, takes none of them with it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use ractor::ActorId;
use ractor::ActorRef;
use shellvisor_actor_job::FinishedRun;
use shellvisor_actor_job::JobMsg;
use shellvisor_actor_job::JobRef;
use shellvisor_protocol::JobId;
use shellvisor_run::LazyTimer;
use shellvisor_run::instant_after;
use shellvisor_run::is_due;

use crate::actor::SessionState;
use crate::messages::SessionMsg;

/// Job actors kept for the next runs: more than one serves parallel calls.
const MAX_SPARE_JOBS: usize = 4;

/// The session's idle Job actors, and when its records' retention ends.
#[derive(Debug, Default)]
pub(crate) struct JobPool {
    /// Jobs whose last run is recorded, free for the next one.
    spares: Vec<ActorRef<JobMsg>>,
    /// Records by the end of their retention, soonest first (the
    /// retention is one setting, so this is the order they finished in).
    expiring: VecDeque<(Instant, JobId)>,
    /// Fires when the soonest retention ends.
    timer: LazyTimer<SessionMsg>,
}

impl JobPool {
    /// A Job free for the next run, if one is kept.
    pub(crate) fn take_spare(&mut self) -> Option<ActorRef<JobMsg>> {
        self.spares.pop()
    }

    /// `job` is free; returns it when enough are kept (to be stopped).
    fn keep_spare(&mut self, job: ActorRef<JobMsg>) -> Option<ActorRef<JobMsg>> {
        if self.spares.len() >= MAX_SPARE_JOBS {
            return Some(job);
        }
        self.spares.push(job);
        None
    }

    /// The actor `id` stopped: if it was a spare, it is one no longer.
    pub(crate) fn forget(&mut self, id: &ActorId) {
        self.spares.retain(|job| job.get_id() != *id);
    }

    /// The record `job_id`'s retention ends at `at`.
    fn expire(&mut self, myself: &ActorRef<SessionMsg>, job_id: JobId, at: Instant) {
        self.expiring.push_back((at, job_id));
        // Retentions end in the order they began: an armed timer fires
        // no later than this one's end.
        self.timer.fire_by(myself, at, || SessionMsg::ExpireRecords);
    }

    /// The timer fired: the records whose retention has ended. The timer is
    /// armed again for the next one.
    fn due(&mut self, myself: &ActorRef<SessionMsg>) -> Vec<JobId> {
        self.timer.fired();
        let mut due = Vec::new();
        while let Some((at, _)) = self.expiring.front() {
            if !is_due(*at) {
                let at = *at;
                self.timer.fire_by(myself, at, || SessionMsg::ExpireRecords);
                break;
            }
            if let Some((_, job_id)) = self.expiring.pop_front() {
                due.push(job_id);
            }
        }
        due
    }
}

impl SessionState {
    /// The Job `actor` finished `job_id` and recorded it: the record takes
    /// the job's place (its Sink moves under the Session, and the Session
    /// lets it go when its retention ends) and the actor waits for the
    /// next run.
    pub(crate) fn keep_record(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
        record: Arc<FinishedRun>,
    ) {
        let Some(actor) = self.jobs.get(job_id).and_then(JobRef::actor).cloned() else {
            return;
        };
        record.feed().adopt(myself.get_cell());
        self.jobs.record(job_id, JobRef::Finished(record));
        let retention = Duration::from_secs(self.args.ctx.config.jobs.retention_secs);
        self.job_pool
            .expire(myself, job_id.clone(), instant_after(retention));
        if let Some(extra) = self.job_pool.keep_spare(actor) {
            extra.stop(Some("enough idle jobs are kept".to_owned()));
        }
    }

    /// Lets a record go: its output with it.
    pub(crate) fn drop_record(&mut self, job_id: &JobId, reason: &str) {
        if matches!(self.jobs.get(job_id), Some(JobRef::Finished(_)))
            && let Some(JobRef::Finished(record)) = self.jobs.forget_job(job_id)
        {
            record.feed().stop(reason);
        }
    }

    /// The expiry timer fired: records whose retention ended are let go.
    pub(crate) fn expire_records(&mut self, myself: &ActorRef<SessionMsg>) {
        for job_id in self.job_pool.due(myself) {
            self.drop_record(&job_id, "retention elapsed");
        }
    }
}
