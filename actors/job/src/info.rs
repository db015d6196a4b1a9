//! A job's state as the job API reports it.

use std::time::Duration;

use shellvisor_protocol::JobInfo;
use shellvisor_protocol::JobStatus;
use shellvisor_protocol::RunResult;

use crate::actor::Caller;
use crate::actor::JobState;
use crate::actor::RunnerRef;

/// How long the Sink may take to count a job's output.
pub(crate) const COUNT_DEADLINE: Duration = Duration::from_secs(2);

impl JobState {
    /// The job's state: a finished one's from its result, a running one's
    /// with the bytes its Sink has so far.
    pub(crate) async fn info(&self) -> JobInfo {
        if let Some(result) = &self.answers.result {
            let mut info = self.finished_info(result);
            if self.feed.late_output()
                && let Some(total) = self.feed.total_bytes(COUNT_DEADLINE).await
            {
                info.output_bytes = info.output_bytes.max(total);
            }
            return info;
        }
        let bytes = self.feed.total_bytes(COUNT_DEADLINE).await.unwrap_or(0);
        let wall = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.info_with(JobStatus::Running, None, bytes, wall)
    }

    /// The state of the job once `result` is its run's.
    pub(crate) fn finished_info(&self, result: &RunResult) -> JobInfo {
        let status = if result.timed_out {
            JobStatus::TimedOut
        } else if result.killed {
            JobStatus::Killed
        } else if result.exit_code == Some(0) {
            JobStatus::Completed
        } else {
            JobStatus::Failed
        };
        self.info_with(
            status,
            result.exit_code,
            result.truncation.total_bytes,
            result.wall_time_ms,
        )
    }

    fn info_with(
        &self,
        state: JobStatus,
        exit_code: Option<i32>,
        output_bytes: u64,
        wall_time_ms: u64,
    ) -> JobInfo {
        let pty_state = match &self.runner {
            RunnerRef::Pty { state, .. } => Some(*state),
            RunnerRef::Shell { .. } => None,
        };
        JobInfo {
            pty_state,
            job_id: self.job_id.clone(),
            label: self.plan.label.clone(),
            state,
            background: matches!(self.caller, Caller::Backgrounded),
            started_at_ms: self.started_at_ms,
            wall_time_ms,
            exit_code,
            output_bytes,
        }
    }
}
