//! A job's state as the job API reports it.

use std::time::Duration;

use shellvisor_protocol::JobInfo;
use shellvisor_protocol::JobStatus;

use crate::actor::Caller;
use crate::actor::JobState;
use crate::actor::RunnerRef;

/// How long the Sink may take to count the output of a running job.
const COUNT_DEADLINE: Duration = Duration::from_secs(2);

impl JobState {
    pub(crate) async fn info(&self) -> JobInfo {
        let (status, exit_code, output_bytes, wall_time_ms) = match &self.answers.result {
            Some(result) => {
                let status = if result.timed_out {
                    JobStatus::TimedOut
                } else if result.killed {
                    JobStatus::Killed
                } else if result.exit_code == Some(0) {
                    JobStatus::Completed
                } else {
                    JobStatus::Failed
                };
                (
                    status,
                    result.exit_code,
                    result.truncation.total_bytes,
                    result.wall_time_ms,
                )
            }
            None => {
                let bytes = self.feed.total_bytes(COUNT_DEADLINE).await.unwrap_or(0);
                let wall = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
                (JobStatus::Running, None, bytes, wall)
            }
        };
        let pty_state = match &self.runner {
            RunnerRef::Pty { state, .. } => Some(*state),
            RunnerRef::Shell { .. } => None,
        };
        JobInfo {
            pty_state,
            job_id: self.job_id.clone(),
            label: self.plan.label.clone(),
            state: status,
            background: matches!(self.caller, Caller::Backgrounded),
            started_at_ms: self.started_at_ms,
            wall_time_ms,
            exit_code,
            output_bytes,
        }
    }
}
